/* test_synth_util.h: helpers shared by the synth and quantize suites: run the tern binary built
 * beside the test runner, and expected tensor tables derived from the spec (sections 5.2, 6),
 * independent of tools/synth.c. Included by tests/test_synth.c and tests/test_quantize.c only. */
#ifndef TERN_TESTS_TEST_SYNTH_UTIL_H
#define TERN_TESTS_TEST_SYNTH_UTIL_H

#include "test.h"
#include "run_util.h"

#include "format/gguf.h"
#include "format/qtypes.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Run `tern ARGS` (ARGS: a shell-quoted string built by the caller); stderr goes into msg (may be
 * NULL). Returns the exit status, or -1 if it did not exit normally. */
static inline int st_run(char *msg, size_t msg_n, const char *fmt, ...) {
    char args[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    char *err = NULL;
    const int st = ru_tern(NULL, msg && msg_n ? &err : NULL, "%s", args);
    if (msg && msg_n) snprintf(msg, msg_n, "%s", err ? err : "");
    free(err);
    return st;
}

/* Run and require exit status 0 (prints the command's stderr on failure). */
#define ST_RUN_OK(...)                                                                             \
    do {                                                                                           \
        char st_msg_[2048];                                                                        \
        const int st_rc_ = st_run(st_msg_, sizeof st_msg_, __VA_ARGS__);                           \
        if (st_rc_ != 0) fail_msg("tern exited %d: %s", st_rc_, st_msg_);                          \
    } while (0)

static inline gguf_ctx *st_open(const char *path) {
    gguf_ctx *g = NULL;
    tern_err err = {0};
    if (gguf_open(&g, path, GGUF_LOAD_MMAP, &err) != TERN_OK) fail_msg("gguf_open %s: %s", path, err.msg);
    return g;
}

/* ---- expected tensor tables (spec 5.2 for qwen35, spec 6 for qwen3) ---------------------------- */
enum { C_TERN = 0, C_F32 = 1, C_BF16 = 2 };
typedef struct { char name[64]; int n_dims; int64_t ne0, ne1; int cls; int rot; } st_exp;   /* rot: 0, 1 folded, 2 inverse */
typedef struct {
    bool q35;
    int64_t D, L, F, Hq, Hkv, Dh, V;
    bool tied;
    int64_t conv, dstate, Hk, Hv, inner, interval;
} st_hp;

static inline int st_exp_add(st_exp *e, int n, const char *name, int n_dims, int64_t ne0, int64_t ne1, int cls, int rot) {
    snprintf(e[n].name, sizeof e[n].name, "%s", name);
    e[n].n_dims = n_dims;
    e[n].ne0 = ne0;
    e[n].ne1 = ne1;
    e[n].cls = cls;
    e[n].rot = rot;
    return n + 1;
}

/* Fills e (capacity >= 16 * L + 8) and returns the count. */
static inline int st_expected(const st_hp *h, st_exp *e) {
    int n = 0;
    char nm[64];
    n = st_exp_add(e, n, "token_embd.weight", 2, h->D, h->V, C_TERN, 2);
    n = st_exp_add(e, n, "output_norm.weight", 1, h->D, 1, C_F32, 0);
    if (!h->tied) n = st_exp_add(e, n, "output.weight", 2, h->D, h->V, C_TERN, 1);
    for (int64_t i = 0; i < h->L; i++) {
#define L_(s) (snprintf(nm, sizeof nm, "blk.%" PRId64 ".%s", i, s), nm)
        n = st_exp_add(e, n, L_("attn_norm.weight"), 1, h->D, 1, C_F32, 0);
        n = st_exp_add(e, n, L_(h->q35 ? "post_attention_norm.weight" : "ffn_norm.weight"), 1, h->D, 1, C_F32, 0);
        n = st_exp_add(e, n, L_("ffn_gate.weight"), 2, h->D, h->F, C_TERN, 1);
        n = st_exp_add(e, n, L_("ffn_up.weight"), 2, h->D, h->F, C_TERN, 1);
        n = st_exp_add(e, n, L_("ffn_down.weight"), 2, h->F, h->D, C_TERN, 1);
        const bool attn = !h->q35 || (i + 1) % h->interval == 0;
        if (attn) {
            n = st_exp_add(e, n, L_("attn_q.weight"), 2, h->D, h->Hq * h->Dh * (h->q35 ? 2 : 1), C_TERN, 1);
            n = st_exp_add(e, n, L_("attn_k.weight"), 2, h->D, h->Hkv * h->Dh, C_TERN, 1);
            n = st_exp_add(e, n, L_("attn_v.weight"), 2, h->D, h->Hkv * h->Dh, C_TERN, 1);
            n = st_exp_add(e, n, L_("attn_output.weight"), 2, h->Hq * h->Dh, h->D, C_TERN, 1);
            n = st_exp_add(e, n, L_("attn_q_norm.weight"), 1, h->Dh, 1, C_F32, 0);
            n = st_exp_add(e, n, L_("attn_k_norm.weight"), 1, h->Dh, 1, C_F32, 0);
        } else {
            const int64_t qkv = 2 * h->Hk * h->dstate + h->Hv * h->dstate;
            n = st_exp_add(e, n, L_("attn_qkv.weight"), 2, h->D, qkv, C_TERN, 1);
            n = st_exp_add(e, n, L_("attn_gate.weight"), 2, h->D, h->Hv * h->dstate, C_TERN, 1);
            n = st_exp_add(e, n, L_("ssm_alpha.weight"), 2, h->D, h->Hv, C_BF16, 0);
            n = st_exp_add(e, n, L_("ssm_beta.weight"), 2, h->D, h->Hv, C_BF16, 0);
            n = st_exp_add(e, n, L_("ssm_conv1d.weight"), 2, h->conv, qkv, C_F32, 0);
            n = st_exp_add(e, n, L_("ssm_dt.bias"), 1, h->Hv, 1, C_F32, 0);
            n = st_exp_add(e, n, L_("ssm_a"), 1, h->Hv, 1, C_F32, 0);
            n = st_exp_add(e, n, L_("ssm_norm.weight"), 1, h->dstate, 1, C_F32, 0);
            n = st_exp_add(e, n, L_("ssm_out.weight"), 2, h->inner, h->D, C_TERN, 1);
        }
#undef L_
    }
    return n;
}

/* Spec 5.1 (27B), spec 6 (1.7B); the tiny dims are the golden tiny models' (PROVENANCE.md). */
__attribute__((unused)) static const st_hp ST_HP_27B = {true, 5120, 64, 17408, 24, 4, 256, 248320, false, 4, 128, 16, 48, 6144, 4};
__attribute__((unused)) static const st_hp ST_HP_1_7B = {false, 2048, 28, 6144, 16, 8, 128, 151936, true, 0, 0, 0, 0, 0, 0};
__attribute__((unused)) static const st_hp ST_HP_Q35_TINY = {true, 256, 8, 768, 4, 2, 64, 512, false, 4, 128, 4, 8, 1024, 4};
__attribute__((unused)) static const st_hp ST_HP_Q3_TINY = {false, 256, 4, 768, 4, 2, 64, 512, true, 0, 0, 0, 0, 0, 0};

#endif /* TERN_TESTS_TEST_SYNTH_UTIL_H */
