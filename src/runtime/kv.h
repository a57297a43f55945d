/* kv.h: the attention KV cache of one sequence. Layer 4.
 * Layout: per layer, K and V are (n_ctx, n_embd_k) and (n_ctx, n_embd_v) row-major: the keys
 * of position p are one contiguous row of n_head_kv * n_embd_head values (head-major inside),
 * stored as fp16 (default: rounds K after RoPE and V to fp16, as the reference runtime's f16
 * cache does, spec 5.6) or f32 (exact). Allocated once (kv_init); writes never allocate.
 * The cache does not track the sequence length: the session owns `pos` and truncation is
 * just lowering it (rows past pos are never read). */
#ifndef TERN_RUNTIME_KV_H
#define TERN_RUNTIME_KV_H

#include "core/core.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kv_cache {
    int n_layer;          /* layers that have a cache (the arch maps its layer index) */
    int n_ctx;            /* rows per layer */
    int n_embd_k, n_embd_v;
    bool f32;             /* element type: f32 (true) or fp16 */
    size_t elt;           /* 4 or 2 */
    uint8_t *k, *v;       /* n_layer * n_ctx * n_embd_{k,v} * elt bytes each, 64-byte aligned */
} kv_cache;

/* Bytes kv_init will allocate (0 on overflow). */
uint64_t kv_bytes(int n_layer, int n_ctx, int n_embd_k, int n_embd_v, bool f32);
/* Allocate (zeroed). Errors: TERN_E_ARG (non-positive sizes), TERN_E_NOMEM. */
int kv_init(kv_cache *kv, int n_layer, int n_ctx, int n_embd_k, int n_embd_v, bool f32, tern_err *err);
void kv_free(kv_cache *kv);   /* safe on a zeroed or freed struct */

/* Row pointers (no checks beyond debug asserts: il < n_layer, pos < n_ctx). */
static inline void *kv_k_row(const kv_cache *kv, int il, int pos) {
    TERN_DASSERT(il >= 0 && il < kv->n_layer && pos >= 0 && pos < kv->n_ctx);
    return kv->k + ((size_t)il * (size_t)kv->n_ctx + (size_t)pos) * (size_t)kv->n_embd_k * kv->elt;
}
static inline void *kv_v_row(const kv_cache *kv, int il, int pos) {
    TERN_DASSERT(il >= 0 && il < kv->n_layer && pos >= 0 && pos < kv->n_ctx);
    return kv->v + ((size_t)il * (size_t)kv->n_ctx + (size_t)pos) * (size_t)kv->n_embd_v * kv->elt;
}
/* Store elements [k0, k0 + nk) of the key row and [v0, v0 + nv) of the value row of position pos
 * (k, v: those elements only), converted to the cache type (f32_to_fp16 for fp16): storing a row
 * in parts (e.g. one head per thread) writes the same bytes as storing it whole. Trusts its ranges
 * (debug asserts). */
void kv_store_part(kv_cache *kv, int il, int pos, int k0, int nk, const float *k, int v0, int nv, const float *v);

#endif /* TERN_RUNTIME_KV_H */
