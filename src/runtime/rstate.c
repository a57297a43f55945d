/* rstate.c: recurrent state with a base snapshot and a per-token input log (see rstate.h for
 * the design, its costs and invariants).
 * Invariants: 0 <= base_pos <= pos; pos - base_pos <= window (outside a batch); the log holds
 * the inputs of tokens base_pos .. pos-1, token p of layer il in ring slot
 * (log_head + p - base_pos) mod window of that layer's ring; S_base/conv_base hold the state
 * after base_pos tokens. */
#include "runtime/rstate.h"

#include <stdlib.h>
#include <string.h>

static float *ring(const rstate *rs, int il, int slot) {
    return rs->log + ((int64_t)il * rs->window + slot) * rs->n_in;
}

uint64_t rstate_bytes(int n_layer, int64_t n_state, int64_t n_conv, int64_t n_in, int window) {
    const uint64_t per = (uint64_t)n_layer * (uint64_t)(n_state + n_conv);
    return sizeof(float) * (2 * per + (uint64_t)n_layer * (uint64_t)window * (uint64_t)n_in);
}

int rstate_init(rstate **out, int n_layer, int64_t n_state, int64_t n_conv, int64_t n_in, int window,
                rstate_replay_fn replay, void *replay_ctx, tern_err *err) {
    *out = NULL;
    if (n_layer < 0 || n_state < 0 || n_conv < 0 || n_in < 0 || window < 1 || !replay)
        return tern_err_set(err, TERN_E_ARG, "rstate_init: bad arguments (n_layer %d, window %d)", n_layer, window);
    rstate *rs = calloc(1, sizeof *rs);
    if (!rs) return tern_err_set(err, TERN_E_NOMEM, "rstate_init: out of memory");
    rs->n_layer = n_layer; rs->n_state = n_state; rs->n_conv = n_conv; rs->n_in = n_in;
    rs->window = window; rs->replay = replay; rs->replay_ctx = replay_ctx;
    const size_t ns = sizeof(float) * (size_t)n_layer * (size_t)n_state;
    const size_t nc = sizeof(float) * (size_t)n_layer * (size_t)n_conv;
    const size_t nl = sizeof(float) * (size_t)n_layer * (size_t)window * (size_t)n_in;
    /* n_layer == 0 (a model without recurrent layers) allocates nothing */
    if (n_layer > 0) {
        rs->S = tern_alloc_aligned(ns);
        rs->S_base = tern_alloc_aligned(ns);
        rs->conv = tern_alloc_aligned(nc ? nc : 64);
        rs->conv_base = tern_alloc_aligned(nc ? nc : 64);
        rs->log = tern_alloc_aligned(nl ? nl : 64);
        if (!rs->S || !rs->S_base || !rs->conv || !rs->conv_base || !rs->log) {
            rstate_free(rs);
            return tern_err_set(err, TERN_E_NOMEM, "recurrent state: cannot allocate %llu bytes",
                                (unsigned long long)rstate_bytes(n_layer, n_state, n_conv, n_in, window));
        }
    }
    rstate_reset(rs);
    *out = rs;
    return TERN_OK;
}

uint64_t rstate_snap_bytes(int n_layer, int64_t n_state, int64_t n_conv, int n) {
    return sizeof(float) * (uint64_t)n * (uint64_t)n_layer * (uint64_t)(n_state + n_conv);
}

int rstate_snap_init(rstate *rs, int n, tern_err *err) {
    if (n <= 0 || rs->n_layer == 0) return TERN_OK;
    const size_t ns = sizeof(float) * (size_t)rs->n_layer * (size_t)rs->n_state * (size_t)n;
    const size_t nc = sizeof(float) * (size_t)rs->n_layer * (size_t)rs->n_conv * (size_t)n;
    rs->snap_S = tern_alloc_aligned(ns ? ns : 64);
    rs->snap_conv = tern_alloc_aligned(nc ? nc : 64);
    rs->snap_pos = malloc(sizeof *rs->snap_pos * (size_t)n);
    if (!rs->snap_S || !rs->snap_conv || !rs->snap_pos)
        return tern_err_set(err, TERN_E_NOMEM, "recurrent state: cannot allocate %llu bytes for %d checkpoints",
                            (unsigned long long)rstate_snap_bytes(rs->n_layer, rs->n_state, rs->n_conv, n), n);
    rs->n_snap = n;
    for (int i = 0; i < n; i++) rs->snap_pos[i] = -1;
    return TERN_OK;
}

void rstate_snap_take(rstate *rs) {
    TERN_ASSERT(rs->batch_n == 0);
    if (rs->n_snap == 0 || rs->pos == 0) return;
    for (int i = 0; i < rs->n_snap; i++)
        if (rs->snap_pos[i] == rs->pos) return;       /* this position has its copy */
    const int k = rs->snap_next;
    const size_t ns = (size_t)rs->n_layer * (size_t)rs->n_state, nc = (size_t)rs->n_layer * (size_t)rs->n_conv;
    memcpy(rs->snap_S + (size_t)k * ns, rs->S, sizeof(float) * ns);
    memcpy(rs->snap_conv + (size_t)k * nc, rs->conv, sizeof(float) * nc);
    rs->snap_pos[k] = rs->pos;
    rs->snap_next = (k + 1) % rs->n_snap;
}

int rstate_restorable(const rstate *rs, int p) {
    if (p >= rs->pos) return rs->pos;
    if (p >= rs->base_pos) return p;
    int best = 0;
    for (int i = 0; i < rs->n_snap; i++)
        if (rs->snap_pos[i] <= p && rs->snap_pos[i] > best) best = rs->snap_pos[i];
    return best;
}

void rstate_free(rstate *rs) {
    if (!rs) return;
    tern_free_aligned(rs->snap_S);
    tern_free_aligned(rs->snap_conv);
    free(rs->snap_pos);
    tern_free_aligned(rs->S); tern_free_aligned(rs->S_base);
    tern_free_aligned(rs->conv); tern_free_aligned(rs->conv_base);
    tern_free_aligned(rs->log);
    free(rs);
}

void rstate_reset(rstate *rs) {
    if (rs->n_layer > 0) {
        const size_t ns = sizeof(float) * (size_t)rs->n_layer * (size_t)rs->n_state;
        const size_t nc = sizeof(float) * (size_t)rs->n_layer * (size_t)rs->n_conv;
        memset(rs->S, 0, ns); memset(rs->S_base, 0, ns);
        memset(rs->conv, 0, nc); memset(rs->conv_base, 0, nc);
    }
    rs->pos = rs->base_pos = rs->log_head = 0;
    rs->logging = false;
    rs->batch_n = 0;
    for (int i = 0; i < rs->n_snap; i++) rs->snap_pos[i] = -1;
}

/* Re-apply the logged tokens base_pos .. base_pos+k-1 to (S, conv) (the two ring pieces); with
 * from (a rollback), each layer starts from the base: the callback copies it in (k may be 0). */
static void replay_log(rstate *rs, float *S, float *conv, int k, bool from_base) {
    for (int il = 0; il < rs->n_layer; il++) {
        float *Sl = S + (int64_t)il * rs->n_state, *cl = conv + (int64_t)il * rs->n_conv;
        const float *Sf = from_base ? rs->S_base + (int64_t)il * rs->n_state : NULL;
        const float *cf = from_base ? rs->conv_base + (int64_t)il * rs->n_conv : NULL;
        const int first = TERN_MIN(k, rs->window - rs->log_head);
        if (first > 0 || Sf) rs->replay(rs->replay_ctx, il, Sl, cl, Sf, cf, ring(rs, il, rs->log_head), first);
        if (k > first) rs->replay(rs->replay_ctx, il, Sl, cl, NULL, NULL, ring(rs, il, 0), k - first);
    }
}

void rstate_begin(rstate *rs, int n, bool log) {
    TERN_ASSERT(n >= 1 && rs->batch_n == 0);
    rs->batch_n = n;
    rs->logging = log && n <= rs->window;
    if (!rs->logging) return;
    const int used = rs->pos - rs->base_pos;
    if (used + n <= rs->window) return;
    /* advance the base to keep the last window/2 tokens before this batch (when the batch leaves
     * room for them): a verify batch of <= window/2 tokens split into several calls keeps its
     * start restorable, and each re-application covers >= window/2 tokens (amortised) */
    const int keep = rs->window / 2;
    int k = TERN_MAX(used + n - rs->window, used - keep);
    if (k > used) k = used;
    replay_log(rs, rs->S_base, rs->conv_base, k, false);
    rs->base_pos += k;
    rs->log_head = (rs->log_head + k) % rs->window;
}

float *rstate_log_slot(rstate *rs, int il, int i) {
    if (!rs->logging) return NULL;
    TERN_DASSERT(il >= 0 && il < rs->n_layer && i >= 0 && i < rs->batch_n);
    const int slot = (rs->log_head + rs->pos - rs->base_pos + i) % rs->window;
    return ring(rs, il, slot);
}

void rstate_end(rstate *rs) {
    TERN_ASSERT(rs->batch_n > 0);
    rs->pos += rs->batch_n;
    if (!rs->logging && rs->n_layer > 0) {
        memcpy(rs->S_base, rs->S, sizeof(float) * (size_t)rs->n_layer * (size_t)rs->n_state);
        memcpy(rs->conv_base, rs->conv, sizeof(float) * (size_t)rs->n_layer * (size_t)rs->n_conv);
    }
    if (!rs->logging) { rs->base_pos = rs->pos; rs->log_head = 0; }
    rs->batch_n = 0;
    rs->logging = false;
}

static int snap_at(const rstate *rs, int p) {
    for (int i = 0; i < rs->n_snap; i++)
        if (rs->snap_pos[i] == p) return i;
    return -1;
}

bool rstate_can_restore(const rstate *rs, int p) {
    return p == 0 || (p >= rs->base_pos && p <= rs->pos) || (p < rs->pos && snap_at(rs, p) >= 0);
}

int rstate_rollback(rstate *rs, int p, tern_err *err) {
    TERN_ASSERT(rs->batch_n == 0);
    if (p == rs->pos) return TERN_OK;
    if (p == 0) { rstate_reset(rs); return TERN_OK; }
    if (!rstate_can_restore(rs, p))
        return tern_err_set(err, TERN_E_RANGE,
                            "recurrent state: cannot restore position %d (restorable: 0 and %d..%d; window %d)",
                            p, rs->base_pos, rs->pos, rs->window);
    if (p < rs->base_pos) {                           /* a copy: it becomes the base, the log starts empty */
        const int k = snap_at(rs, p);
        const size_t ns = (size_t)rs->n_layer * (size_t)rs->n_state, nc = (size_t)rs->n_layer * (size_t)rs->n_conv;
        memcpy(rs->S, rs->snap_S + (size_t)k * ns, sizeof(float) * ns);
        memcpy(rs->conv, rs->snap_conv + (size_t)k * nc, sizeof(float) * nc);
        memcpy(rs->S_base, rs->S, sizeof(float) * ns);
        memcpy(rs->conv_base, rs->conv, sizeof(float) * nc);
        for (int i = 0; i < rs->n_snap; i++)          /* copies past p describe another future */
            if (rs->snap_pos[i] > p) rs->snap_pos[i] = -1;
        rs->pos = rs->base_pos = p;
        rs->log_head = 0;
        return TERN_OK;
    }
    if (rs->n_layer > 0) replay_log(rs, rs->S, rs->conv, p - rs->base_pos, true);
    rs->pos = p;
    for (int i = 0; i < rs->n_snap; i++)              /* copies past p describe another future */
        if (rs->snap_pos[i] > p) rs->snap_pos[i] = -1;
    return TERN_OK;
}
