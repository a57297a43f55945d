/* model_opts.c: shared option parsing for the model programs (see model_opts.h). */
#include "model_opts.h"
#include "tokenizer/chat.h"
#include "tokenizer/tok.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void opts_common_default(opts_common *o) {
    memset(o, 0, sizeof *o);
    o->n_ctx = 0;                 /* opts_ctx_resolve: 4096 or the trained context */
    o->n_batch = 512;
    o->numerics = TERN_NUMERICS_FAST;
}

static const opt_def d_model[] = {
    {OPTS_MODEL, "-m, --model", OPT_PATH, "PATH", 0, 0, NULL, "GGUF model"},
};
static const opt_def d_threads[] = {
    {OPTS_THREADS, "-t, --threads", OPT_INT, "N", 1, OPT_HI_THREADS, NULL, "threads (default: the CPUs this process may run on, as taskset or cgroups allow)"},
};
static const opt_def d_ctx[] = {
    {OPTS_CTX, "-c, --ctx-size", OPT_INT, "N", 1, 1 << 24, NULL, "context length (default 4096, or the model's trained length if shorter)"},
};
static const opt_def d_load[] = {
    {OPTS_BATCH, "-b, --batch-size", OPT_INT, "N", 1, 1 << 16, NULL, "prompt tokens per forward pass (default 512; on qwen35, 17 or more take the chunked recurrence: the greedy text may differ from -b 16)"},
    {OPTS_NUMERICS, "--numerics", OPT_CHOICE, "M", 0, 0, "fast|ggml|f32",
     "fast (default) | ggml (reference Q8_0 rounding) | f32 (dequantised)"},
    {OPTS_CACHE_TYPE, "--cache-type, -ctk", OPT_CHOICE, "T", 0, 0, "f16|f32", "KV cache f16 (default) | f32"},
    {OPTS_MMAP, "--mmap", OPT_FLAG, NULL, 0, 0, NULL, "map the file instead of reading it into memory"},
    {OPTS_NO_MMAP, "--no-mmap", OPT_FLAG, NULL, 0, 0, NULL, "read the file into memory (the default)"},
    {OPTS_NO_PROGRESS, "--no-progress", OPT_FLAG, NULL, 0, 0, NULL, "no load progress bar"},
};
static const opt_def d_sampling[] = {
    {OPTS_TEMP, "--temp", OPT_FLOAT, "T", 0, 100, NULL, "temperature (default 0.8; 0 = greedy)"},
    {OPTS_TOP_K, "--top-k", OPT_INT, "N", -1, 1 << 30, NULL, "keep the N most likely tokens (default 40; 0 or -1 = off)"},
    {OPTS_TOP_P, "--top-p", OPT_FLOAT, "P", 0, 1, NULL, "nucleus: smallest set with mass >= P (default 0.95; 1 = off)"},
    {OPTS_MIN_P, "--min-p", OPT_FLOAT, "P", 0, 1, NULL, "drop tokens below P x the top probability (default 0.05; 0 = off)"},
    {OPTS_REPEAT_PENALTY, "--repeat-penalty", OPT_FLOAT, "F", 0.01, 100, NULL, "repetition penalty (default 1.0 = off)"},
    {OPTS_REPEAT_LAST_N, "--repeat-last-n", OPT_INT, "N", -1, 1 << 24, NULL,
     "tokens the penalty looks back (default 64; 0 = off, -1 = context)"},
    {OPTS_SEED, "-s, --seed", OPT_SEED, "N", 0, 0, NULL, "random seed (default -1: drawn from the OS)"},
    {OPTS_LOGIT_BIAS, "-l, --logit-bias", OPT_BIAS, "ID(+|-)B", 0, 0, NULL,
     "add B to token ID's logit before sampling; repeatable up to 256 times (15043+1, 15043-inf bans it)"},
};
const opt_table opts_tab_model = {d_model, (int)(sizeof d_model / sizeof d_model[0])};
const opt_table opts_tab_threads = {d_threads, (int)(sizeof d_threads / sizeof d_threads[0])};
const opt_table opts_tab_ctx = {d_ctx, (int)(sizeof d_ctx / sizeof d_ctx[0])};
const opt_table opts_tab_load = {d_load, (int)(sizeof d_load / sizeof d_load[0])};
const opt_table opts_tab_sampling = {d_sampling, (int)(sizeof d_sampling / sizeof d_sampling[0])};

const char *opts_numerics_name(tern_numerics n) {
    return n == TERN_NUMERICS_GGML ? "ggml" : n == TERN_NUMERICS_F32 ? "f32" : "fast";
}

bool opts_apply_common(opts_common *o, int id, const opt_val *v) {
    switch (id) {
    case OPTS_MODEL: o->model = v->str; break;
    case OPTS_THREADS: o->n_threads = (int)v->i; break;
    case OPTS_CTX: o->n_ctx = (int)v->i; o->ctx_given = true; break;
    case OPTS_BATCH: o->n_batch = (int)v->i; break;
    case OPTS_NUMERICS:
        o->numerics = v->choice == 1 ? TERN_NUMERICS_GGML : v->choice == 2 ? TERN_NUMERICS_F32 : TERN_NUMERICS_FAST;
        break;
    case OPTS_CACHE_TYPE: o->kv_f32 = v->choice == 1; break;
    case OPTS_MMAP:
    case OPTS_NO_MMAP:
        /* a contradiction, as --ids with --pieces: a usage error, not "the last one wins" */
        if (o->mmap_flag && o->mmap_flag != (id == OPTS_MMAP ? 1 : 2)) {
            fprintf(stderr, "tern %s: --mmap and --no-mmap choose different loads; use one of them; see tern %s --help\n",
                    opts_cmd(), opts_cmd());
            exit(2);
        }
        o->mmap_flag = id == OPTS_MMAP ? 1 : 2;
        o->use_mmap = id == OPTS_MMAP;
        break;
    case OPTS_NO_PROGRESS: o->no_progress = true; break;
    default: return false;
    }
    return true;
}

void opts_sampling_default(opts_sampling *s) {
    memset(s, 0, sizeof *s);
    tern_sampler_params_default(&s->p);
}

bool opts_apply_sampling(opts_sampling *s, int id, const opt_val *v) {
    tern_sampler_params *p = &s->p;
    switch (id) {
    case OPTS_LOGIT_BIAS:
        if (s->n_bias < OPTS_BIAS_MAX) {
            s->bias_id[s->n_bias] = (int32_t)v->i;
            s->bias[s->n_bias] = (float)v->f;
        }
        s->n_bias++;
        break;
    case OPTS_TEMP: p->temp = (float)v->f; break;
    case OPTS_TOP_K: p->top_k = (int32_t)v->i; break;
    case OPTS_TOP_P: p->top_p = (float)v->f; break;
    case OPTS_MIN_P: p->min_p = (float)v->f; break;
    case OPTS_REPEAT_PENALTY: p->repeat_penalty = (float)v->f; break;
    case OPTS_REPEAT_LAST_N: p->repeat_last_n = (int32_t)v->i; break;
    case OPTS_SEED: p->seed = (uint64_t)v->u; break;
    default: return false;
    }
    return true;
}

bool opts_sampling_check(const opts_sampling *s) {
    if (s->n_bias <= OPTS_BIAS_MAX) return true;
    fprintf(stderr, "tern %s: -l, --logit-bias: given %d times, at most %d\n", opts_cmd(), s->n_bias, OPTS_BIAS_MAX);
    return false;
}

int opts_bias_check(const opts_sampling *s, const tern_model *m, tern_err *err) {
    tern_model_info info;
    tern_model_get_info(m, &info);
    for (int i = 0; i < s->n_bias; i++)
        if (s->bias_id[i] >= info.n_vocab)
            return tern_err_set(err, TERN_E_ARG, "-l, --logit-bias: token id %d is not in the model's vocabulary (ids 0..%d)",
                                (int)s->bias_id[i], (int)info.n_vocab - 1);
    return TERN_OK;
}

int opts_sampler_init(const opts_sampling *s, const tern_model *m, const tern_session *se, tern_sampler **out,
                      tern_err *err) {
    tern_sampler_params p = s->p;
    if (p.repeat_last_n < 0) p.repeat_last_n = tern_session_n_ctx(se);   /* llama.cpp's -1: the whole context */
    int rc = opts_bias_check(s, m, err);
    if (rc) return rc;
    rc = tern_sampler_init(out, m, &p, err);
    if (!rc) rc = tern_sampler_set_logit_bias(*out, s->bias_id, s->bias, s->n_bias, err);
    return rc;
}

int opts_ctx_resolve(const tern_model *m, int n_ctx, bool given, int need) {
    enum { CTX_DEFAULT = 4096 };
    tern_model_info info;
    tern_model_get_info(m, &info);
    const int train = info.n_ctx_train;
    if (n_ctx <= 0) {
        n_ctx = CTX_DEFAULT;
        if (train > 0 && train < n_ctx) {
            if (need <= 0 || need > train)
                fprintf(stderr, "tern %s: context %d tokens, the model's trained length (the default %d is longer; -c N sets it)\n",
                        opts_cmd(), train, CTX_DEFAULT);
            n_ctx = train;
        }
    } else if (given && train > 0 && n_ctx > train) {
        fprintf(stderr, "tern %s: warning: -c %d is longer than the model's trained context (%d tokens); text past position %d "
                        "may degrade\n", opts_cmd(), n_ctx, train, train);
    }
    return n_ctx;
}

int opts_env_model(tern_model_opts *mo, tern_err *err) {
    const char *mem = getenv("TERN_MEM_AVAILABLE");
    if (mem && *mem) {
        char *end;
        errno = 0;
        const unsigned long long v = strtoull(mem, &end, 10);
        /* digits only: strtoull alone would also take leading blanks, a sign ('+', '-' wrapping) */
        if (*end || errno || v == 0 || strspn(mem, "0123456789") != strlen(mem))
            return tern_err_set(err, TERN_E_ARG,
                                "TERN_MEM_AVAILABLE='%s': expected a positive integer number of bytes in decimal "
                                "digits only (e.g. 8000000000), at most %llu", mem, (unsigned long long)ULLONG_MAX);
        mo->mem_available = v;
    }
    const char *ptq = getenv("TERN_PTQ1_0");
    if (ptq && *ptq) {
        if (!strcmp(ptq, "transcode")) mo->ptq1_0 = TERN_PTQ1_0_TRANSCODE;
        else if (!strcmp(ptq, "direct")) mo->ptq1_0 = TERN_PTQ1_0_DIRECT;
        else if (!strcmp(ptq, "auto")) mo->ptq1_0 = TERN_PTQ1_0_AUTO;
        else return tern_err_set(err, TERN_E_ARG, "TERN_PTQ1_0='%s': expected auto, transcode or direct", ptq);
    }
    return TERN_OK;
}

int opts_env_isa(tern_err *err) {
    const char *isa = getenv("TERN_ISA");
    if (!isa || !*isa) return TERN_OK;
    tern_err e = {0};
    const int rc = tern_set_isa(isa, &e);
    if (rc == TERN_E_ARG) return tern_err_set(err, TERN_E_ARG, "TERN_ISA: %s", e.msg);   /* a misspelling; the message has the name */
    if (rc != TERN_OK) fprintf(stderr, "tern: warning: TERN_ISA=%s: %s; using the best available path\n", isa, e.msg);
    return TERN_OK;
}

int opts_model_opts(const opts_common *o, tern_model_opts *mo, tern_err *err) {
    tern_model_opts_default(mo);
    const int rc = opts_env_model(mo, err);
    if (rc) return rc;
    mo->n_threads = o->n_threads;
    mo->use_mmap = o->use_mmap;
    mo->numerics = o->numerics;
    mo->progress = !o->no_progress;
    return TERN_OK;
}

int opts_load(const opts_common *o, tern_model **m, tern_session **s, tern_err *err) {
    *m = NULL;
    if (s) *s = NULL;
    tern_model_opts mo;
    int rc = opts_model_opts(o, &mo, err);
    if (rc) return rc;
    if (!opts_model_input_ok("-m", o->model, err->msg, sizeof err->msg)) return err->code = TERN_E_IO;
    rc = tern_model_load(m, o->model, &mo, err);
    if (rc || !s) return rc;
    tern_session_opts so;
    tern_session_opts_default(&so);
    so.n_ctx = opts_ctx_resolve(*m, o->n_ctx, o->ctx_given, o->ctx_need);
    so.n_batch = o->n_batch;
    so.kv_f32 = o->kv_f32;
    rc = tern_session_init(s, *m, &so, err);
    if (rc) { tern_model_free(*m); *m = NULL; }
    return rc;
}

bool opts_warn_utf8(const char *cmd, const char *what, const char *s, size_t n, bool shown) {
    const char *nul = memchr(s, '\0', n);
    if (nul)   /* valid UTF-8, but no text holds one: most likely a binary or UTF-16 file */
        fprintf(stderr, "tern %s: warning: %s has a NUL byte at offset %zu of %zu (no text holds one: a binary or UTF-16 "
                "file?); it is tokenised as the byte 0x00\n", cmd, what, (size_t)(nul - s), n);
    const size_t ok = tern_utf8_valid_len(s, n);
    if (ok == n) return nul != NULL;
    fprintf(stderr,
            "tern %s: warning: %s is not valid UTF-8 (first bad byte 0x%02x at offset %zu of %zu); it is tokenised "
            "byte by byte%s\n",
            cmd, what, (unsigned)(unsigned char)s[ok], ok, n, shown ? " and shown with U+FFFD" : " (the model sees those exact bytes)");
    return true;
}

bool opts_warn_bad_logits(const char *cmd, const tern_gen *g, const char *then) {
    tern_err e = {0};
    if (tern_gen_logits_error(g, &e) == TERN_OK) return false;
    fprintf(stderr, "\ntern %s: %s; generation stopped there and %s\n", cmd, e.msg, then);
    return true;
}

void opts_write_utf8(FILE *f, const char *s, size_t n) {
    if (tern_utf8_valid_len(s, n) == n) { fwrite(s, 1, n, f); return; }
    char *buf = malloc(3 * n + 1);
    if (!buf) { fwrite(s, 1, n, f); return; }
    fwrite(buf, 1, tok_utf8_repair(s, n, buf), f);
    free(buf);
}

int opts_check_chat_template(const char *cmd, const char *name) {
    chat_tmpl t;
    tern_err err = {0};
    if (!name || chat_tmpl_by_name(name, &t, &err) == TERN_OK) return 0;
    opts_bad_value(cmd, "--chat-template", "one of chatml, qwen3, qwen35", name);
    return 2;
}

bool opts_note_chat_template(const char *cmd, const tern_model *m, const char *name) {
    tern_model_info info;
    tern_model_get_info(m, &info);
    if ((name && *name) || info.has_chat_template) return false;
    const bool empty = tern_model_meta_str(m, "tokenizer.chat_template", NULL, 0) == 0;   /* present, "" */
    fprintf(stderr, "tern %s: warning: the model has no chat template (%s); using ChatML (--chat-template "
                    "chatml|qwen3|qwen35 chooses one)\n", cmd,
            empty ? "tokenizer.chat_template is empty in the file" : "no tokenizer.chat_template in the file");
    return true;
}
