/* qwen35.c: the hybrid Qwen3.5 architecture (Ternary Bonsai 2 27B and upstream qwen35 GGUFs):
 * Gated DeltaNet layers, gated full-attention layers every full_attention_interval, and the
 * Walsh-Hadamard rotated weight basis of Bonsai 2 files.
 * Source of truth: ../shared/spec/ternary-gguf.md section 4 (rotation), 5.1-5.6 (keys, tensors,
 * forward, V-head order, KV cache); DESIGN.md "Data flow of one decode step (qwen35)".
 *
 * One forward over a batch of n columns (straight line, spec 5.4):
 *   x = embd(tok) [inverse rotation of the row when token_embd is listed as inverse]
 *   per layer: h = RMSNorm(x, attn_norm); x += ATTN(h) or GDN(h)
 *              h2 = RMSNorm(x, post_attention_norm); x += ffn_down(rot(silu(ffn_gate rot(h2)) * ffn_up rot(h2)))
 *   logits = output(rot(RMSNorm(x, output_norm)))
 * where rot() is applied exactly when the weight that reads the activation is folded
 * (prism.hadamard.weight_names); unrotated upstream files run the same code with no rotation.
 * Projections that share an input run in one pool job (qkv + gate; q + k + v; ffn gate + up).
 *
 * Batches: the columns of one forward may belong to different sequences (tern_batch_eval: one
 * column per session) or to one (prefill, speculative verification); a "run" is a maximal range
 * of consecutive columns of one sequence. Projections and attention are per column (the attention
 * is the dense layers' blk_attn, between the split of q from its output gate and the gate); the
 * conv and the delta rule run per run, all runs in one pool job each (threads split (run, head)
 * pairs).
 *
 * Recurrent state: one rstate per sequence (runtime/rstate.h): runs of up to Q35_VERIFY_MAX (16)
 * tokens are computed token by token and logged, so each position has the bits of single-token
 * decode and the sequence can be truncated to any position inside the run (speculative
 * verification); runs of GDN_CHUNK_MIN (17) or more use the chunked delta rule and are not
 * logged (prefill). */
#include "core/fp16.h"
#include "format/qtypes.h"
#include "model/blocks.h"
#include "model/gdn.h"
#include "model/hadamard.h"
#include "runtime/rstate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Rollback: a logged run keeps the Q35_WINDOW / 2 positions before it restorable (rstate.h), so a
 * verify batch of up to Q35_VERIFY_MAX tokens, even when the engine splits it into n_batch chunks,
 * can be truncated to any position inside it; such batches are never chunked. */
#define Q35_WINDOW 32
#define Q35_VERIFY_MAX (Q35_WINDOW / 2)
_Static_assert(GDN_CHUNK_MIN > Q35_VERIFY_MAX, "verify batches must run token by token (bit-identical)");

typedef struct q35_data {
    gdn_dims g;
    int n_gdn, n_attn;
    int *rs_layer;             /* (n_gdn) rstate layer -> model layer */
    had_cfg had;
    model_rot rot_embd_inv;      /* inverse rotation of embedding rows */
    model_rot rot_logits;        /* forward rotation before the LM head */
} q35_data;

/* Workspace beyond the generic model_ws (float buffers, each rounded to 64 bytes). */
typedef struct q35_ws {
    float *xr;                 /* (nb, n_embd) rotated normed input */
    float *qg;                 /* (nb, 2 Hq hd) attention q + gate, interleaved per head */
    float *gate;               /* (nb, Hq hd) attention output gate */
    float *qkv, *u;            /* (nb, n_ch) GDN raw projection, conv+SiLU output */
    float *z;                  /* (nb, Hv d) */
    float *ga, *gb;            /* (nb, Hv) alpha/beta projections, then gam/beta */
    float *y, *y2;             /* (nb, Hv d) GDN output (tiled), permuted/rotated */
    float *scratch;            /* (n_threads, gdn_chunk_scratch_floats) */
    int *run;                  /* (nb + 1) run r = columns [run[r], run[r + 1]) of one sequence */
    int n_run;
    void *aq;                  /* quantised activation, largest K */
} q35_ws;

typedef struct q35_state {
    const model_t *m;
    rstate *rs;
    float *u;                  /* (Q35_WINDOW, n_ch) replay scratch */
    tern_pool *pool;           /* set while the forward or a truncation owns the pool: replays split across it */
} q35_state;

/* Per-op profile (tern_profile_enable): the wall time of each section of a forward is added to
 * g_blk_prof (blocks.h) under the dense archs' categories: norm + rotation + quantise -> quant,
 * the conv + delta rule + gated norm -> recur, attention -> attn, residual adds and run setup ->
 * norm, embedding -> embed. Projections are timed inside blk_project_job (matmul); the section
 * clock restarts after them. */

/* ---- load ------------------------------------------------------------------------------------ */

static int rot_site(const q35_data *q, const char *const *names, int n_names, int64_t K, model_rot *out,
                    tern_err *err) {
    out->n = 0;
    out->s = NULL;
    if (!q->had.active) return TERN_OK;
    int n_folded = 0;
    for (int i = 0; i < n_names; i++) n_folded += had_is_folded(&q->had, names[i]);
    if (n_folded == 0) return TERN_OK;
    if (n_folded != n_names)
        return tern_err_set(err, TERN_E_UNSUPPORTED,
                            "prism.hadamard.weight_names lists '%s' but not every weight reading the same input "
                            "(%d of %d folded)", names[0], n_folded, n_names);
    out->n = q->had.block;
    out->s = q->had.identity ? NULL : had_signs(&q->had, K);
    return TERN_OK;
}

static int q35_load(model_t *m, tern_err *err) {
    int rc = model_load_hparams_common(m, err);
    if (rc) return rc;
    model_hparams *hp = &m->hp;
    hp->rope_type = ROPE_NEOX;
    q35_data *q = calloc(1, sizeof *q);
    if (!q) return tern_err_set(err, TERN_E_NOMEM, "out of memory");
    m->arch_data = q;
    int32_t d_conv, d_state, n_group, dt_rank, d_inner, interval;
    if ((rc = model_get_i32(m, "ssm.conv_kernel", true, 0, &d_conv, err)) ||
        (rc = model_get_i32(m, "ssm.state_size", true, 0, &d_state, err)) ||
        (rc = model_get_i32(m, "ssm.group_count", true, 0, &n_group, err)) ||
        (rc = model_get_i32(m, "ssm.time_step_rank", true, 0, &dt_rank, err)) ||
        (rc = model_get_i32(m, "ssm.inner_size", true, 0, &d_inner, err)) ||
        (rc = model_get_i32(m, "full_attention_interval", false, 4, &interval, err)))
        return rc;
    if (d_conv < 2 || d_conv > 16 || d_state < 16 || d_state > 256 || d_state % 16 || n_group < 1 || dt_rank < 1 ||
        dt_rank % n_group || (int64_t)dt_rank * d_state != d_inner || interval < 1)
        return tern_err_set(err, TERN_E_FORMAT,
                            "qwen35 ssm keys: conv_kernel %d (2..16), state_size %d (16..256, multiple of 16), "
                            "group_count %d, time_step_rank %d (a multiple of group_count), inner_size %d (expected "
                            "time_step_rank * state_size), full_attention_interval %d",
                            d_conv, d_state, n_group, dt_rank, d_inner, interval);
    if (hp->n_embd_head_k != hp->n_embd_head_v)
        return tern_err_set(err, TERN_E_FORMAT, "qwen35: key_length %d != value_length %d", hp->n_embd_head_k,
                            hp->n_embd_head_v);
    q->g = (gdn_dims){.n_k_head = n_group, .n_v_head = dt_rank, .d_head = d_state, .d_conv = d_conv,
                      .eps = hp->f_norm_rms_eps, .ggml = m->numerics == KQ_GGML && d_state % 64 == 0};
    if ((rc = had_load(&q->had, m->g, err))) return rc;

    const int NL = hp->n_layer;
    q->rs_layer = calloc((size_t)NL, sizeof *q->rs_layer);
    m->layers = calloc((size_t)NL, sizeof *m->layers);
    if (!q->rs_layer || !m->layers) return tern_err_set(err, TERN_E_NOMEM, "out of memory (layers)");

    /* layer schedule: recurrent unless (il + 1) % interval == 0; optional override array */
    char key[128];
    const gguf_kv *rkv = gguf_find_kv(m->g, model_key(m, key, sizeof key, "attention.recurrent_layers"));
    gguf_arr ra = {0};
    if (rkv) {
        if ((rc = gguf_get_arr(m->g, key, true, &ra, err))) return rc;
        if (!gguf_arr_is_int(&ra) || ra.n != (uint64_t)NL)
            return tern_err_set(err, TERN_E_FORMAT, "key '%s': expected %d bool/int values, got %llu of %s", key, NL,
                                (unsigned long long)ra.n, gguf_vtype_name(ra.type));
    }
    for (int il = 0; il < NL; il++) {
        model_layer *L = &m->layers[il];
        L->recurrent = rkv ? gguf_arr_int(&ra, (uint64_t)il) != 0 : (il + 1) % interval != 0;
        L->il_kv = L->il_rs = -1;
        if (L->recurrent) { L->il_rs = q->n_gdn; q->rs_layer[q->n_gdn++] = il; }
        else L->il_kv = q->n_attn++;
    }
    m->n_layer_kv = q->n_attn;

    const int64_t D = hp->n_embd, V = hp->n_vocab, F = hp->n_ff, hd = hp->n_embd_head_k;
    const int64_t dq = (int64_t)hp->n_head * hd, dkv = (int64_t)hp->n_head_kv * hd;
    const int64_t nch = gdn_n_ch(&q->g), dz = (int64_t)q->g.n_v_head * q->g.d_head;
    bool found;
    if ((rc = model_bind_w(m, "token_embd.weight", D, V, &m->tok_embd, false, NULL, err)) ||
        (rc = model_bind_f32(m, "output_norm.weight", D, 1, &m->output_norm, err)) ||
        (rc = model_bind_w(m, "output.weight", D, V, &m->output, true, &found, err)))
        return rc;
    m->tied_output = !found;
    if (m->tied_output) m->output = m->tok_embd;
    if (q->had.active && had_is_inverse(&q->had, "token_embd.weight")) {
        q->rot_embd_inv.n = q->had.block;
        q->rot_embd_inv.s = q->had.identity ? NULL : had_signs(&q->had, D);
    }
    if (m->tied_output) {
        /* the tied head reads the stored (rotated) rows: forward rotation on the hidden state */
        if (q->had.active && (q->had.tied_output || had_is_inverse(&q->had, "token_embd.weight"))) {
            q->rot_logits.n = q->had.block;
            q->rot_logits.s = q->had.identity ? NULL : had_signs(&q->had, D);
        }
    } else {
        const char *on[1] = {"output.weight"};
        if ((rc = rot_site(q, on, 1, D, &q->rot_logits, err))) return rc;
    }

    for (int il = 0; il < NL; il++) {
        model_layer *L = &m->layers[il];
        char n1[96], n2[96], n3[96];
#define NM(buf, s) (snprintf(buf, sizeof buf, "blk.%d." s, il), buf)
        if ((rc = model_bind_f32(m, NM(n1, "attn_norm.weight"), D, 1, &L->attn_norm, err)) ||
            (rc = model_bind_f32(m, NM(n1, "post_attention_norm.weight"), D, 1, &L->ffn_norm, err)) ||
            (rc = model_bind_w(m, NM(n1, "ffn_gate.weight"), D, F, &L->ffn_gate, false, NULL, err)) ||
            (rc = model_bind_w(m, NM(n1, "ffn_up.weight"), D, F, &L->ffn_up, false, NULL, err)) ||
            (rc = model_bind_w(m, NM(n1, "ffn_down.weight"), F, D, &L->ffn_down, false, NULL, err)))
            return rc;
        {
            const char *fn[2] = {NM(n1, "ffn_gate.weight"), NM(n2, "ffn_up.weight")};
            if ((rc = rot_site(q, fn, 2, D, &L->rot_ffn, err))) return rc;
            const char *dn[1] = {NM(n3, "ffn_down.weight")};
            if ((rc = rot_site(q, dn, 1, F, &L->rot_down, err))) return rc;
        }
        if (L->recurrent) {
            if ((rc = model_bind_w(m, NM(n1, "attn_qkv.weight"), D, nch, &L->attn_qkv, false, NULL, err)) ||
                (rc = model_bind_w(m, NM(n1, "attn_gate.weight"), D, dz, &L->attn_gate, false, NULL, err)) ||
                (rc = model_bind_w(m, NM(n1, "ssm_alpha.weight"), D, q->g.n_v_head, &L->ssm_alpha, false, NULL, err)) ||
                (rc = model_bind_w(m, NM(n1, "ssm_beta.weight"), D, q->g.n_v_head, &L->ssm_beta, false, NULL, err)) ||
                (rc = model_bind_w(m, NM(n1, "ssm_out.weight"), dz, D, &L->ssm_out, false, NULL, err)) ||
                (rc = model_bind_f32(m, NM(n1, "ssm_conv1d.weight"), d_conv, nch, &L->ssm_conv1d, err)) ||
                (rc = model_bind_f32(m, NM(n1, "ssm_dt.bias"), q->g.n_v_head, 1, &L->ssm_dt_bias, err)) ||
                (rc = model_bind_f32(m, NM(n1, "ssm_a"), q->g.n_v_head, 1, &L->ssm_a, err)) ||
                (rc = model_bind_f32(m, NM(n1, "ssm_norm.weight"), q->g.d_head, 1, &L->ssm_norm, err)))
                return rc;
            const char *in[2] = {NM(n1, "attn_qkv.weight"), NM(n2, "attn_gate.weight")};
            if ((rc = rot_site(q, in, 2, D, &L->rot_in, err))) return rc;
            const char *on[1] = {NM(n3, "ssm_out.weight")};
            if ((rc = rot_site(q, on, 1, dz, &L->rot_out, err))) return rc;
            const char *ab[2] = {NM(n1, "ssm_alpha.weight"), NM(n2, "ssm_beta.weight")};
            for (int j = 0; j < 2; j++)
                if (had_is_folded(&q->had, ab[j]))
                    return tern_err_set(err, TERN_E_UNSUPPORTED,
                                        "'%s' is listed in prism.hadamard.weight_names, but it reads the unrotated "
                                        "input (spec 4.6)", ab[j]);
        } else {
            if ((rc = model_bind_w(m, NM(n1, "attn_q.weight"), D, 2 * dq, &L->attn_q, false, NULL, err)) ||
                (rc = model_bind_w(m, NM(n1, "attn_k.weight"), D, dkv, &L->attn_k, false, NULL, err)) ||
                (rc = model_bind_w(m, NM(n1, "attn_v.weight"), D, dkv, &L->attn_v, false, NULL, err)) ||
                (rc = model_bind_w(m, NM(n1, "attn_output.weight"), dq, D, &L->attn_output, false, NULL, err)) ||
                (rc = model_bind_f32(m, NM(n1, "attn_q_norm.weight"), hd, 1, &L->attn_q_norm, err)) ||
                (rc = model_bind_f32(m, NM(n1, "attn_k_norm.weight"), hd, 1, &L->attn_k_norm, err)))
                return rc;
            const char *in[3] = {NM(n1, "attn_q.weight"), NM(n2, "attn_k.weight"), NM(n3, "attn_v.weight")};
            if ((rc = rot_site(q, in, 3, D, &L->rot_in, err))) return rc;
            const char *on[1] = {NM(n1, "attn_output.weight")};
            if ((rc = rot_site(q, on, 1, dq, &L->rot_out, err))) return rc;
        }
#undef NM
    }
    /* every folded width needs signs (explicit mode): had_load checked each listed weight */
    /* decode byte budget: the recurrent state is read and written once per token (model.c adds
     * the weights on top of this) */
    m->bytes_per_token = 2 * sizeof(float) * (uint64_t)q->n_gdn *
                         (uint64_t)(gdn_state_floats(&q->g) + gdn_conv_floats(&q->g));
    return TERN_OK;
}

static void q35_free(model_t *m) {
    q35_data *q = m->arch_data;
    if (!q) return;
    had_free(&q->had);
    free(q->rs_layer);
    free(q);
    m->arch_data = NULL;
}

/* ---- workspace ------------------------------------------------------------------------------- */

#define R16(x) (((size_t)(x) + 15) & ~(size_t)15)

static int64_t q35_kmax(const model_t *m) {
    const q35_data *q = m->arch_data;
    const model_hparams *hp = &m->hp;
    int64_t k = TERN_MAX((int64_t)hp->n_embd, (int64_t)hp->n_ff);
    k = TERN_MAX(k, (int64_t)q->g.n_v_head * q->g.d_head);
    return TERN_MAX(k, (int64_t)hp->n_head * hp->n_embd_head_v);
}

static size_t q35_aq_floats(const model_t *m, int nb) {
    size_t aq = 0;
    for (int mode = 0; mode < 3; mode++) {
        const size_t b = kern_act_bytes((kern_numerics)mode, q35_kmax(m), nb);
        if (b > aq) aq = b;
    }
    return (aq + 3) / 4;
}

static void ws_layout(const model_t *m, int nb, float *p, q35_ws *w, size_t *total) {
    const q35_data *q = m->arch_data;
    const model_hparams *hp = &m->hp;
    const size_t D = (size_t)hp->n_embd, dq = (size_t)hp->n_head * (size_t)hp->n_embd_head_k;
    const size_t nch = (size_t)gdn_n_ch(&q->g), dz = (size_t)q->g.n_v_head * (size_t)q->g.d_head;
    const size_t hv = (size_t)q->g.n_v_head, nt = m->pool ? (size_t)pool_n_threads(m->pool) : (size_t)m->n_threads;
    const size_t sizes[] = {R16(nb * D), R16(nb * 2 * dq), R16(nb * dq), R16(nb * nch), R16(nb * nch), R16(nb * dz),
                            R16(nb * hv), R16(nb * hv), R16(nb * dz), R16(nb * dz),
                            R16(nt * gdn_chunk_scratch_floats(q->g.d_head)), R16(nb + 1), R16(q35_aq_floats(m, nb))};
    float **dst[] = {&w->xr, &w->qg, &w->gate, &w->qkv, &w->u, &w->z, &w->ga, &w->gb, &w->y, &w->y2, &w->scratch};
    const size_t n_dst = sizeof dst / sizeof dst[0];
    size_t off = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        if (p) {
            if (i < n_dst) *dst[i] = p + off;
            else if (i == n_dst) w->run = (int *)(void *)(p + off);   /* int and float are both 4 bytes */
            else w->aq = p + off;
        }
        off += sizes[i];
    }
    w->n_run = 0;
    *total = off;
}

static size_t q35_ws_extra_bytes(const model_t *m, int n_batch, int n_ctx) {
    (void)n_ctx;
    size_t total;
    q35_ws w;
    ws_layout(m, n_batch, NULL, &w, &total);
    return total * sizeof(float);
}

/* ---- jobs ------------------------------------------------------------------------------------ */

typedef struct {
    const model_t *m;
    model_ws *ws;
    q35_ws *w;
    const model_batch *b;
    const model_layer *L;
} q35_job;

static rstate *run_rs(const model_batch *b, const q35_ws *w, int r) {
    return ((q35_state *)b->state[w->run[r]])->rs;
}

/* Attention: per column, the projected qg (q and the output gate interleaved per head) split into
 * ws->q and w->gate (each (Hq hd) per column). */
static void job_split_gate(void *ctx, int64_t c0, int64_t c1, int ith) {
    (void)ith;
    const q35_job *j = ctx;
    const model_hparams *hp = &j->m->hp;
    const int hd = hp->n_embd_head_k, Hq = hp->n_head;
    const int64_t dq = (int64_t)Hq * hd;
    for (int64_t c = c0; c < c1; c++) {
        const float *qg = j->w->qg + c * 2 * dq;
        float *q = j->ws->q + c * dq, *g = j->w->gate + c * dq;
        for (int h = 0; h < Hq; h++) {
            memcpy(q + (int64_t)h * hd, qg + (int64_t)h * 2 * hd, sizeof(float) * (size_t)hd);
            memcpy(g + (int64_t)h * hd, qg + (int64_t)h * 2 * hd + hd, sizeof(float) * (size_t)hd);
        }
    }
}

/* GDN: conv + SiLU over channels [i0, i1) (aligned to d) for every run (each with its own conv
 * state), then L2 norm of the q/k heads in the range for every column. */
static void job_gdn_conv(void *ctx, int64_t i0, int64_t i1, int ith) {
    (void)ith;
    const q35_job *j = ctx;
    const q35_data *q = j->m->arch_data;
    const gdn_dims *g = &q->g;
    const q35_ws *w = j->w;
    const int64_t nch = gdn_n_ch(g);
    for (int r = 0; r < w->n_run; r++) {
        const int c0 = w->run[r], nr = w->run[r + 1] - c0;
        gdn_conv(g, nr, j->L->ssm_conv1d, rstate_conv(run_rs(j->b, w, r), j->L->il_rs), w->qkv + (int64_t)c0 * nch,
                 w->u + (int64_t)c0 * nch, i0, i1);
    }
    const int64_t qk_end = 2 * (int64_t)g->n_k_head * g->d_head;
    for (int64_t c = i0; c < TERN_MIN(i1, qk_end); c += g->d_head)
        for (int i = 0; i < j->b->n; i++)
            gdn_l2norm_heads(w->u + (int64_t)i * nch + c, 1, g->d_head, g->eps);
}

/* GDN: recurrence + gated norm for the (run, v-head) pairs [i0, i1) (item = run * Hv + head). */
static void job_gdn_heads(void *ctx, int64_t i0, int64_t i1, int ith) {
    const q35_job *j = ctx;
    const q35_data *q = j->m->arch_data;
    const gdn_dims *g = &q->g;
    const q35_ws *w = j->w;
    const int hv = g->n_v_head;
    const int64_t nch = gdn_n_ch(g), dz = (int64_t)hv * g->d_head;
    float *scratch = w->scratch + (size_t)ith * R16(gdn_chunk_scratch_floats(g->d_head));
    for (int64_t it = i0; it < i1;) {
        const int r = (int)(it / hv), h0 = (int)(it % hv);
        const int h1 = (int)TERN_MIN((int64_t)hv, h0 + (i1 - it));
        const int c0 = w->run[r], nr = w->run[r + 1] - c0;
        gdn_layer_heads(g, nr, w->u + (int64_t)c0 * nch, w->ga + (int64_t)c0 * hv, w->gb + (int64_t)c0 * hv,
                        w->z + (int64_t)c0 * dz, j->L->ssm_norm, rstate_S(run_rs(j->b, w, r), j->L->il_rs),
                        w->y + (int64_t)c0 * dz, h0, h1, j->m->numerics != KQ_GGML, scratch);
        it += h1 - h0;
    }
}

/* ---- projections ----------------------------------------------------------------------------- */

/* The projections run as blk_project_job (a decode step's rows claimed by whichever thread is
 * free: blocks.c). The GDN heads of a decode step are claimed too, Q35_HEADS_CLAIM at a time
 * (gdn_layer). Results depend neither on who takes which rows nor on the thread count
 * (test_qwen35: 2 and 3 threads == 1 thread). */
#define Q35_HEADS_CLAIM 4

static bool is_float_w(const kern_w *w) { return w->type == QT_F32 || w->type == QT_F16 || w->type == QT_BF16; }

/* ---- ggml numerics: the reference runtime's BF16 dot and SwiGLU ------------------------------ */

/* _mm512_reduce_add_ps of 16 lanes (gcc: halves of 8, of 4, then (0 + 2) + (1 + 3)). */
static float reduce16(const float *a) {
    float t8[8], t4[4];
    for (int l = 0; l < 8; l++) t8[l] = a[l + 8] + a[l];
    for (int l = 0; l < 4; l++) t4[l] = t8[l + 4] + t8[l];
    return (t4[0] + t4[2]) + (t4[1] + t4[3]);
}

/* One BF16 row times a bf16-rounded activation xb (K values), as the reference's AVX512-BF16
 * build: one token: ggml_vec_dot_bf16 (two accumulators over alternating 32-value chunks; each
 * vdpbf16ps lane adds the odd, then the even product of its pair; the two reductions summed in
 * double, leftovers in double); a batch: llamafile tinyBLAS (one accumulator over every chunk,
 * one reduction). Products of two bf16 values are exact in f32. */
static float dot_bf16_ggml(const uint16_t *w, const uint16_t *xb, int64_t K, bool batch) {
    float c[2][16] = {{0}};
    int64_t i = 0;
    if (batch && K % 32 == 0) {
        for (; i < K; i += 32)
            for (int l = 0; l < 16; l++) {
                c[0][l] += bf16_to_f32(w[i + 2 * l + 1]) * bf16_to_f32(xb[i + 2 * l + 1]);
                c[0][l] += bf16_to_f32(w[i + 2 * l]) * bf16_to_f32(xb[i + 2 * l]);
            }
        return reduce16(c[0]);
    }
    for (; i + 64 <= K; i += 64)
        for (int h = 0; h < 2; h++)
            for (int l = 0; l < 16; l++) {
                const int64_t e = i + 32 * h + 2 * l;
                c[h][l] += bf16_to_f32(w[e + 1]) * bf16_to_f32(xb[e + 1]);
                c[h][l] += bf16_to_f32(w[e]) * bf16_to_f32(xb[e]);
            }
    double sum = 0.0;
    if (K >= 64) { sum += (double)reduce16(c[0]); sum += (double)reduce16(c[1]); }
    for (; i < K; i++) sum += (double)(bf16_to_f32(w[i]) * bf16_to_f32(xb[i]));
    return (float)sum;
}

/* y[c * n_out + o] for a BF16 weight on n columns of x (K), ggml order. xb: K uint16 scratch. */
static void project_bf16_ggml(const kern_w *w, const float *x, int n, float *y, uint16_t *xb) {
    const int64_t K = w->n_in;
    for (int c = 0; c < n; c++) {
        for (int64_t k = 0; k < K; k++) xb[k] = f32_to_bf16(x[(int64_t)c * K + k]);
        for (int64_t o = 0; o < w->n_out; o++)
            y[(int64_t)c * w->n_out + o] = dot_bf16_ggml((const uint16_t *)(const void *)w->data + o * K, xb, K, n > 1);
    }
}

/* ---- forward --------------------------------------------------------------------------------- */

typedef struct {
    float *y, *yn;
    void *q;
    const float *x, *w;
    int64_t K;
    float eps;
    const model_rot *rot;
    kern_numerics mode;
} nrq_job;

static void job_norm_rot_quant(void *ctx, int64_t c0, int64_t c1, int ith) {
    (void)ith;
    const nrq_job *j = ctx;
    const size_t qcol = kern_act_bytes(j->mode, j->K, 1);
    for (int64_t c = c0; c < c1; c++)
        had_rmsnorm_rot_quant(j->y + c * j->K, j->q ? (uint8_t *)j->q + (size_t)c * qcol : NULL, j->mode,
                              j->yn ? j->yn + c * j->K : NULL, j->x + c * j->K, j->w, j->K, j->eps, j->rot->n,
                              j->rot->s);
}

/* The input of a projection, in one pass per column (hadamard.h had_rmsnorm_rot_quant):
 * dst = rot(RMSNorm(src) * w) for n columns and its quantisation into aq; yn (optional) gets
 * the normed columns before the rotation. Fills a (x = dst) for blk_project_job. Columns split
 * across the pool when n > 1 (each column's bits do not depend on the split). */
static void norm_rot_quant(const model_t *m, kern_act *a, float *dst, void *aq, float *yn, const float *src,
                           const float *w, int n, int64_t K, float eps, const model_rot *rot) {
    a->x = dst;
    a->K = K;
    a->ncols = n;
    a->mode = m->numerics;
    a->q = m->numerics == KQ_F32 ? NULL : aq;
    nrq_job j = {.y = dst, .yn = yn, .q = a->q, .x = src, .w = w, .K = K, .eps = eps, .rot = rot, .mode = m->numerics};
    if (n > 1) pool_for(m->pool, n, 1, job_norm_rot_quant, &j);
    else job_norm_rot_quant(&j, 0, n, 0);
}

/* The input of ssm_out / attn_output in chunks of whole rotation blocks and whole quantisation
 * blocks (max(rot n, 128) values, as had_rmsnorm_rot_quant), a batch's (column, chunk) pairs split
 * over the pool; one column (decode) runs on the caller (see rot_quant):
 *   pre-op (per chunk): GATE dst = src * sigmoid(aux) (the attention's output gate, libm expf);
 *                       VGROUP dst = the grouped V-head permutation of src (spec 5.5);
 *                       COPY dst = src (or nothing when they alias)
 *   then dst = rot(dst) on the chunk and its quantisation into q (mode != KQ_F32).
 * Every value takes the same operations as the unsplit sequence (the gate, had_gdn_v_grouped,
 * had_rot, kern_quantize over the column: rotation and quantisation blocks are independent),
 * so the bits do not depend on the split (tests: thread counts, batch == single steps). */
enum { RQ_COPY, RQ_VGROUP, RQ_GATE };
typedef struct {
    int op;
    float *dst;
    const float *src, *aux;
    void *q;
    int64_t K, chunk, n_chunk;
    const model_rot *rot;
    kern_numerics mode;
    int n_k_head, n_v_head, d_head;
} rq_job;

static void job_rot_quant(void *ctx, int64_t i0, int64_t i1, int ith) {
    (void)ith;
    const rq_job *j = ctx;
    const size_t qcol = kern_act_bytes(j->mode, j->K, 1);
    for (int64_t it = i0; it < i1; it++) {
        const int64_t c = it / j->n_chunk, k0 = (it % j->n_chunk) * j->chunk;
        const int64_t len = TERN_MIN(j->chunk, j->K - k0);
        float *y = j->dst + c * j->K + k0;
        const float *x = j->src + c * j->K + k0;
        if (j->op == RQ_GATE) {
            const float *g = j->aux + c * j->K + k0;
            for (int64_t i = 0; i < len; i++) y[i] = x[i] * (1.0f / (1.0f + expf(-g[i])));
        } else if (j->op == RQ_VGROUP) {
            /* dst head e = r_per k + r takes src head k + Hk r (had_gdn_v_grouped) */
            const int d = j->d_head, r_per = j->n_v_head / j->n_k_head;
            const float *xc = j->src + c * j->K;
            for (int64_t e = k0 / d; e < (k0 + len) / d; e++) {
                const int kk = (int)(e / r_per), r = (int)(e % r_per);
                memcpy(j->dst + c * j->K + e * d, xc + (int64_t)d * (kk + j->n_k_head * r), sizeof(float) * (size_t)d);
            }
        } else if (y != x) {   /* COPY */
            memcpy(y, x, sizeof(float) * (size_t)len);
        }
        if (j->rot->n) had_rot(y, len, j->rot->n, j->rot->s ? j->rot->s + k0 : NULL);
        if (j->q) {
            kern_act a = {.x = y, .q = (uint8_t *)j->q + (size_t)c * qcol + kern_act_bytes(j->mode, k0, 1), .K = len,
                          .ncols = 1, .mode = j->mode};
            kern_quantize(&a);
        }
    }
}

/* Runs job_rot_quant over n columns of K and fills a (x = dst) for blk_project_job. */
static void rot_quant(const model_t *m, kern_act *a, rq_job *j, int n) {
    j->mode = m->numerics;
    j->q = m->numerics == KQ_F32 ? NULL : j->q;
    j->chunk = TERN_MAX(j->rot->n, (int64_t)128);
    if (j->op == RQ_VGROUP && j->chunk % j->d_head) {   /* whole heads: lcm(chunk, d) */
        int64_t a0 = j->chunk, b0 = j->d_head;
        while (b0) { const int64_t t = a0 % b0; a0 = b0; b0 = t; }
        j->chunk = j->chunk / a0 * j->d_head;
    }
    j->n_chunk = (j->K + j->chunk - 1) / j->chunk;
    a->x = j->dst;
    a->q = j->q;
    a->K = j->K;
    a->ncols = n;
    a->mode = m->numerics;
    /* one column (decode): on the caller, as norm_rot_quant: a few thousand values take
     * microseconds, less than a pool job costs whenever a worker is descheduled (hundreds of
     * microseconds on a loaded machine) */
    if (n == 1) job_rot_quant(j, 0, j->n_chunk, 0);
    else pool_for(m->pool, (int64_t)n * j->n_chunk, 1, job_rot_quant, j);
}

static void attn_layer(const model_t *m, model_ws *ws, q35_ws *w, const model_batch *b, int il) {
    const model_hparams *hp = &m->hp;
    const model_layer *L = &m->layers[il];
    const int n = b->n;
    const int64_t D = hp->n_embd, dq = (int64_t)hp->n_head * hp->n_embd_head_k;
    double pt = blk_prof_now();
    kern_act a;
    /* xr (n, D) = rot(RMSNorm(x) * attn_norm), quantised into aq */
    norm_rot_quant(m, &a, w->xr, w->aq, NULL, ws->x, L->attn_norm, n, D, hp->f_norm_rms_eps, &L->rot_in);
    pt = blk_prof_add(BLK_PROF_QUANT, pt);
    /* qg (n, 2 Hq hd): q and the output gate interleaved per head; k, v (n, Hkv hd) */
    blk_project_job(m->pool, &(blk_proj){.n_w = 3, .a = {&a, &a, &a}, .w = {&L->attn_q, &L->attn_k, &L->attn_v},
                              .y = {w->qg, ws->k, ws->v}});
    pt = blk_prof_now();
    /* q, gate (n, Hq hd) split from qg; att (n, Hq hd) = the dense blocks' attention (QK-norm,
     * RoPE, the KV store, softmax(q . K^T * scale) . V) */
    q35_job j = {.m = m, .ws = ws, .w = w, .b = b, .L = L};
    if (n > 1) pool_for(m->pool, n, 1, job_split_gate, &j);
    else job_split_gate(&j, 0, 1, 0);
    blk_attn(m, ws, b, L, L->il_kv, true, false);
    pt = blk_prof_now();
    /* att = rot(att * sigmoid(gate)), quantised */
    rq_job rq = {.op = RQ_GATE, .dst = ws->att, .src = ws->att, .aux = w->gate, .q = w->aq, .K = dq, .rot = &L->rot_out};
    rot_quant(m, &a, &rq, n);
    pt = blk_prof_add(BLK_PROF_QUANT, pt);
    /* x (n, D) += attn_output . att */
    blk_project_job(m->pool, &(blk_proj){.n_w = 1, .a = {&a}, .w = {&L->attn_output}, .y = {ws->xb}, .resid = ws->x});
}

static void gdn_layer(const model_t *m, model_ws *ws, q35_ws *w, const model_batch *b, int il) {
    const q35_data *q = m->arch_data;
    const model_hparams *hp = &m->hp;
    const model_layer *L = &m->layers[il];
    const gdn_dims *g = &q->g;
    const int n = b->n, hv = g->n_v_head;
    const int64_t D = hp->n_embd, nch = gdn_n_ch(g), dz = (int64_t)hv * g->d_head;
    /* h = xb (n, D) = RMSNorm(x) * attn_norm (unrotated: alpha/beta read it); r = xr (n, D) = rot(h)
     * for qkv and gate, quantised */
    double pt = blk_prof_now();
    kern_act a;
    if (L->rot_in.n)
        norm_rot_quant(m, &a, w->xr, w->aq, ws->xb, ws->x, L->attn_norm, n, D, hp->f_norm_rms_eps, &L->rot_in);
    else
        norm_rot_quant(m, &a, ws->xb, w->aq, NULL, ws->x, L->attn_norm, n, D, hp->f_norm_rms_eps, &L->rot_in);
    pt = blk_prof_add(BLK_PROF_QUANT, pt);
    /* alpha/beta: BF16 (or any float) weights on the unrotated h; the float kernel path rounds
     * the activation to bf16 for BF16 weights (spec 8.4) */
    /* qkv (n, n_ch) = attn_qkv . r, z (n, Hv d) = attn_gate . r, ga, gb (n, Hv) = ssm_alpha . h, ssm_beta . h */
    const bool float_ab = is_float_w(&L->ssm_alpha) && is_float_w(&L->ssm_beta);
    const bool merged = float_ab && !g->ggml;
    if (merged) {
        /* one pool job for qkv + gate (quantised rotated h) and alpha + beta (f32 h): one barrier
         * less per GDN layer; every row is the same kern_matmul call as in separate jobs */
        const kern_act af = {.x = ws->xb, .q = NULL, .K = D, .ncols = n, .mode = KQ_F32};
        /* order alpha, qkv, beta, gate: the rows split evenly, so with 2 threads each thread
         * gets one of the two BF16 weights (10 KB a row, 7.5 PQ2_0 rows' bytes) instead of the
         * second thread both */
        blk_project_job(m->pool, &(blk_proj){.n_w = 4, .a = {&af, &a, &af, &a},
                                  .w = {&L->ssm_alpha, &L->attn_qkv, &L->ssm_beta, &L->attn_gate},
                                  .y = {w->ga, w->qkv, w->gb, w->z}});
    } else {
        blk_project_job(m->pool, &(blk_proj){.n_w = 2, .a = {&a, &a}, .w = {&L->attn_qkv, &L->attn_gate}, .y = {w->qkv, w->z}});
    }
    if (merged) {
        /* alpha and beta were projected with qkv and gate */
    } else if (g->ggml && L->ssm_alpha.type == QT_BF16 && L->ssm_beta.type == QT_BF16 && L->ssm_alpha.layout == KW_FILE &&
        L->ssm_beta.layout == KW_FILE) {
        /* per run: a multi-token run of one sequence takes the reference's batch order, a single
         * token (decode, or one column of a multi-session batch) its one-token order */
        for (int r = 0; r < w->n_run; r++) {
            const int c0 = w->run[r], nr = w->run[r + 1] - c0;
            uint16_t *xbf = (uint16_t *)(void *)w->xr;   /* xr: consumed above */
            project_bf16_ggml(&L->ssm_alpha, ws->xb + (int64_t)c0 * D, nr, w->ga + (int64_t)c0 * hv, xbf);
            project_bf16_ggml(&L->ssm_beta, ws->xb + (int64_t)c0 * D, nr, w->gb + (int64_t)c0 * hv, xbf);
        }
    } else {
        kern_act af;
        blk_quantize(m->pool, &af, ws->xb, w->aq, D, n, float_ab ? KQ_F32 : m->numerics);
        blk_project_job(m->pool, &(blk_proj){.n_w = 2, .a = {&af, &af}, .w = {&L->ssm_alpha, &L->ssm_beta}, .y = {w->ga, w->gb}});
    }
    pt = blk_prof_now();
    gdn_gates(g, n, w->ga, w->gb, L->ssm_dt_bias, L->ssm_a, w->ga, w->gb);   /* -> gam, beta */

    /* the recurrence: log the inputs of logged runs, then per run the conv (qkv -> u (n, n_ch)) and
     * the delta rule with the gated norm (-> y (n, Hv d)) */
    for (int r = 0; r < w->n_run; r++) {
        rstate *rs = run_rs(b, w, r);
        for (int i = w->run[r]; i < w->run[r + 1]; i++) {
            float *slot = rstate_log_slot(rs, L->il_rs, i - w->run[r]);
            if (slot) gdn_log_token(g, slot, w->qkv + (int64_t)i * nch, w->ga + (int64_t)i * hv, w->gb + (int64_t)i * hv);
        }
    }
    q35_job j = {.m = m, .ws = ws, .w = w, .b = b, .L = L};
    pool_for(m->pool, nch, g->d_head, job_gdn_conv, &j);
    if (n == 1 && pool_n_threads(m->pool) > 1) {
        /* a decode step's heads: threads claim Q35_HEADS_CLAIM at a time as they finish
         * (pool_for_dyn; each head's recurrence is the same computation in any range, so the
         * split never changes a bit) */
        pool_for_dyn(m->pool, hv, 1, Q35_HEADS_CLAIM, Q35_HEADS_CLAIM, job_gdn_heads, &j);
    } else {
        pool_for(m->pool, (int64_t)w->n_run * hv, 1, job_gdn_heads, &j);
    }
    pt = blk_prof_add(BLK_PROF_RECUR, pt);
    /* y2 = rot(y, V heads regrouped when the file asks), quantised */
    const bool vg = q->had.gdn_v_grouped;
    rq_job rq = {.op = vg ? RQ_VGROUP : RQ_COPY, .dst = vg || L->rot_out.n ? w->y2 : w->y, .src = w->y, .q = w->aq,
                 .K = dz, .rot = &L->rot_out, .n_k_head = g->n_k_head, .n_v_head = hv, .d_head = g->d_head};
    rot_quant(m, &a, &rq, n);
    pt = blk_prof_add(BLK_PROF_QUANT, pt);
    /* x (n, D) += ssm_out . y */
    blk_project_job(m->pool, &(blk_proj){.n_w = 1, .a = {&a}, .w = {&L->ssm_out}, .y = {ws->xb}, .resid = ws->x});
}

static void ffn_layer(const model_t *m, model_ws *ws, q35_ws *w, int n, int il) {
    const q35_data *q = m->arch_data;
    const model_hparams *hp = &m->hp;
    const model_layer *L = &m->layers[il];
    const int64_t D = hp->n_embd;
    double pt = blk_prof_now();
    kern_act a;
    /* xr (n, D) = rot(RMSNorm(x) * post_attention_norm), quantised */
    norm_rot_quant(m, &a, w->xr, w->aq, NULL, ws->x, L->ffn_norm, n, D, hp->f_norm_rms_eps, &L->rot_ffn);
    pt = blk_prof_add(BLK_PROF_QUANT, pt);
    /* hg (n, F) = rot(silu(ffn_gate . xr) * (ffn_up . xr)), quantised into aq2: one job (blk_ffn_up) */
    kern_act h;
    blk_ffn_up(m->pool, &h, &a, &L->ffn_gate, &L->ffn_up, ws->hg, ws->hu, ws->aq2, m->numerics,
               q->g.ggml ? BLK_SILU_GGML : BLK_SILU_FAST, &L->rot_down);
    /* x (n, D) += ffn_down . hg */
    blk_project_job(m->pool, &(blk_proj){.n_w = 1, .a = {&h}, .w = {&L->ffn_down}, .y = {ws->xb}, .resid = ws->x});
}

static int q35_forward(const model_t *m, model_ws *ws, const model_batch *b) {
    const q35_data *q = m->arch_data;
    const model_hparams *hp = &m->hp;
    q35_ws w;
    size_t total;
    ws_layout(m, ws->n_batch, ws->arch_ws, &w, &total);
    const int n = b->n;
    const int64_t D = hp->n_embd;
    double pt = blk_prof_now();
    for (int c = 0; c < n; c++) {
        float *xc = ws->x + (int64_t)c * D;
        kern_w_row_f32(&m->tok_embd, b->tok[c], xc);
        if (q->rot_embd_inv.n) had_rot_inv(xc, D, q->rot_embd_inv.n, q->rot_embd_inv.s);
        blk_rope_cache(ws->rope_cs + (int64_t)c * hp->n_rot, b->pos[c], hp);
    }
    pt = blk_prof_add(BLK_PROF_EMBED, pt);
    /* runs of consecutive columns of one sequence; each begins a batch of its recurrent state */
    w.n_run = 0;
    for (int c0 = 0; c0 < n;) {
        int c1 = c0 + 1;
        while (c1 < n && b->state[c1] == b->state[c0]) c1++;
        q35_state *st = b->state[c0];
        TERN_ASSERT(st && st->rs->pos == b->pos[c0] && st->rs->batch_n == 0);   /* a sequence is one run */
        st->pool = m->pool;     /* a base advance replays window / 2 tokens of every layer: split it */
        rstate_begin(st->rs, c1 - c0, c1 - c0 < GDN_CHUNK_MIN);   /* chunked runs: not logged */
        st->pool = NULL;
        w.run[w.n_run++] = c0;
        c0 = c1;
    }
    w.run[w.n_run] = n;
    pt = blk_prof_add(BLK_PROF_NORM, pt);
    for (int il = 0; il < hp->n_layer; il++) {
        if (m->layers[il].recurrent) gdn_layer(m, ws, &w, b, il);
        else attn_layer(m, ws, &w, b, il);
        ffn_layer(m, ws, &w, n, il);
    }
    for (int r = 0; r < w.n_run; r++) rstate_end(run_rs(b, &w, r));
    pt = blk_prof_now();
    /* logits of the wanted columns (gathered into lx) */
    int nl = 0;
    const size_t qcol = kern_act_bytes(m->numerics, D, 1);
    for (int c = 0; c < n; c++) {
        const bool want = b->want_logits ? b->want_logits[c] : c == n - 1;
        if (!want) continue;
        had_rmsnorm_rot_quant(ws->lx + (int64_t)nl * D, (uint8_t *)w.aq + (size_t)nl * qcol, m->numerics, NULL,
                              ws->x + (int64_t)c * D, m->output_norm, D, hp->f_norm_rms_eps, q->rot_logits.n,
                              q->rot_logits.s);
        nl++;
    }
    pt = blk_prof_add(BLK_PROF_QUANT, pt);
    if (nl == 0) return TERN_OK;
    /* logits (nl, n_vocab) = output . lx */
    const kern_act a = {.x = ws->lx, .q = m->numerics == KQ_F32 ? NULL : w.aq, .K = D, .ncols = nl, .mode = m->numerics};
    blk_project_job(m->pool, &(blk_proj){.n_w = 1, .a = {&a}, .w = {&m->output}, .y = {b->logits}});
    return TERN_OK;
}

/* ---- per-sequence state ---------------------------------------------------------------------- */

typedef struct {
    const gdn_dims *g;
    const float *conv_w, *in, *S_from, *conv_from;
    float *S, *conv, *u;
    int n;
} replay_job;

static void job_replay_conv(void *ctx, int64_t c0, int64_t c1, int ith) {
    (void)ith;
    const replay_job *j = ctx;
    gdn_replay_conv(j->g, j->conv_w, j->conv, j->conv_from, j->in, j->n, j->u, c0, c1);
}

static void job_replay_heads(void *ctx, int64_t h0, int64_t h1, int ith) {
    (void)ith;
    const replay_job *j = ctx;
    gdn_replay_heads(j->g, j->S, j->S_from, j->in, j->n, j->u, (int)h0, (int)h1);
}

/* Re-apply n logged tokens to one layer's state, from (S_from, conv_from) when given (rstate's
 * callback). With the pool (a forward advancing the base: window / 2 tokens of every GDN layer
 * every window / 2 decode steps; a truncation restoring the base and replaying up to the window)
 * the channels and then the heads split across it, each thread copying its own part of the
 * base; else on the calling thread. The bits do not depend on the split. */
static void q35_replay(void *ctx, int il_rs, float *S, float *conv, const float *S_from, const float *conv_from,
                       const float *in, int n) {
    q35_state *st = ctx;
    const q35_data *q = st->m->arch_data;
    const model_layer *L = &st->m->layers[q->rs_layer[il_rs]];
    if (!st->pool || pool_n_threads(st->pool) == 1) {
        gdn_replay(&q->g, L->ssm_conv1d, S, conv, S_from, conv_from, in, n, st->u);
        return;
    }
    replay_job j = {.g = &q->g, .conv_w = L->ssm_conv1d, .in = in, .S_from = S_from, .conv_from = conv_from, .S = S,
                    .conv = conv, .u = st->u, .n = n};
    pool_for(st->pool, gdn_n_ch(&q->g), q->g.d_head, job_replay_conv, &j);
    pool_for(st->pool, q->g.n_v_head, 1, job_replay_heads, &j);
}

static void q35_state_free(void *state) {
    q35_state *st = state;
    if (!st) return;
    rstate_free(st->rs);
    free(st->u);
    free(st);
}

static uint64_t q35_state_bytes(const model_t *m, int n_ctx, int n_ckpt) {
    (void)n_ctx;
    const q35_data *q = m->arch_data;
    return rstate_bytes(q->n_gdn, gdn_state_floats(&q->g), gdn_conv_floats(&q->g), gdn_log_floats(&q->g), Q35_WINDOW) +
           rstate_snap_bytes(q->n_gdn, gdn_state_floats(&q->g), gdn_conv_floats(&q->g), n_ckpt) +
           sizeof(float) * (uint64_t)Q35_WINDOW * (uint64_t)gdn_n_ch(&q->g);   /* + the conv input scratch u */
}

static int q35_state_init(const model_t *m, void **state, int n_ctx, int n_ckpt, tern_err *err) {
    (void)n_ctx;   /* its memory was checked with the KV cache's (tern_session_init, q35_state_bytes) */
    const q35_data *q = m->arch_data;
    *state = NULL;
    q35_state *st = calloc(1, sizeof *st);
    if (!st) return tern_err_set(err, TERN_E_NOMEM, "out of memory (recurrent state)");
    st->m = m;
    st->u = malloc(sizeof(float) * (size_t)Q35_WINDOW * (size_t)gdn_n_ch(&q->g));
    if (!st->u) { free(st); return tern_err_set(err, TERN_E_NOMEM, "out of memory (recurrent state)"); }
    int rc = rstate_init(&st->rs, q->n_gdn, gdn_state_floats(&q->g), gdn_conv_floats(&q->g), gdn_log_floats(&q->g),
                         Q35_WINDOW, q35_replay, st, err);
    if (rc == TERN_OK) rc = rstate_snap_init(st->rs, n_ckpt, err);
    if (rc) { q35_state_free(st); return rc; }
    *state = st;
    return TERN_OK;
}

static void q35_state_reset(void *state) { rstate_reset(((q35_state *)state)->rs); }

/* The log keeps every position of its window restorable (rstate.h); a checkpoint also copies
 * the whole state when the session has room for copies, so pos stays restorable after later
 * prompt chunks (which are not logged). */
static int q35_state_checkpoint(void *state, int pos, tern_err *err) {
    q35_state *st = state;
    if (pos != st->rs->pos)
        return tern_err_set(err, TERN_E_ARG, "checkpoint at %d, but the recurrent state is at %d", pos, st->rs->pos);
    rstate_snap_take(st->rs);
    return TERN_OK;
}

static int q35_state_restorable(const void *state, int pos) { return rstate_restorable(((const q35_state *)state)->rs, pos); }

static int q35_state_truncate(void *state, int pos, tern_err *err) {
    q35_state *st = state;
    st->pool = st->m->pool;   /* the caller holds eval_lock (model.h) */
    const int rc = rstate_rollback(st->rs, pos, err);
    st->pool = NULL;
    return rc;
}

const model_arch model_arch_qwen35 = {
    .name = "qwen35",
    .load = q35_load,
    .ws_extra_bytes = q35_ws_extra_bytes,
    .forward = q35_forward,
    .free = q35_free,
    .state_init = q35_state_init,
    .state_bytes = q35_state_bytes,
    .state_free = q35_state_free,
    .state_reset = q35_state_reset,
    .state_checkpoint = q35_state_checkpoint,
    .state_truncate = q35_state_truncate,
    .state_restorable = q35_state_restorable,
};
