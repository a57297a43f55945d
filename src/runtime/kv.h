/* kv.h: the attention KV cache of one sequence. Layer 4.
 * Layout: per layer and kv head, K is (n_ctx, hd_k) and V (n_ctx, hd_v) row-major: one head's
 * keys of consecutive positions are contiguous, so the attention of a decode step reads each head
 * as one sequential stream (in a position-major cache a head's rows lie a whole cache row apart:
 * a power-of-two stride that maps them onto a few cache sets and that the hardware prefetcher
 * does not follow). Elements are fp16 (default: rounds K after RoPE and V to fp16, as the
 * reference runtime's f16 cache does, spec 5.6) or f32 (exact). Allocated once (kv_init);
 * writes never allocate.
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
    int n_ctx;            /* positions per layer */
    int n_head_kv;
    int hd_k, hd_v;       /* head dims (n_embd_head_k, n_embd_head_v) */
    int n_embd_k, n_embd_v;   /* n_head_kv * hd_k, n_head_kv * hd_v */
    bool f32;             /* element type: f32 (true) or fp16 */
    size_t elt;           /* 4 or 2 */
    uint8_t *k, *v;       /* n_layer * n_ctx * n_embd_{k,v} * elt bytes each, 64-byte aligned */
} kv_cache;

/* Bytes kv_init will allocate (0 on overflow). */
uint64_t kv_bytes(int n_layer, int n_ctx, int n_head_kv, int hd_k, int hd_v, bool f32);
/* Allocate (zeroed: fresh pages, so the memory is taken as positions fill). Errors: TERN_E_ARG
 * (non-positive sizes), TERN_E_NOMEM. */
int kv_init(kv_cache *kv, int n_layer, int n_ctx, int n_head_kv, int hd_k, int hd_v, bool f32, tern_err *err);
void kv_free(kv_cache *kv);   /* safe on a zeroed or freed struct */

/* The keys / values of kv head h of layer il at position pos: hd_k / hd_v elements; the next
 * position's follow them (stride hd_k / hd_v elements), the next head's start n_ctx positions on.
 * No checks beyond debug asserts (il < n_layer, h < n_head_kv, pos < n_ctx). */
static inline void *kv_k_at(const kv_cache *kv, int il, int h, int pos) {
    TERN_DASSERT(il >= 0 && il < kv->n_layer && h >= 0 && h < kv->n_head_kv && pos >= 0 && pos < kv->n_ctx);
    return kv->k + (((size_t)il * (size_t)kv->n_head_kv + (size_t)h) * (size_t)kv->n_ctx + (size_t)pos) *
                       (size_t)kv->hd_k * kv->elt;
}
static inline void *kv_v_at(const kv_cache *kv, int il, int h, int pos) {
    TERN_DASSERT(il >= 0 && il < kv->n_layer && h >= 0 && h < kv->n_head_kv && pos >= 0 && pos < kv->n_ctx);
    return kv->v + (((size_t)il * (size_t)kv->n_head_kv + (size_t)h) * (size_t)kv->n_ctx + (size_t)pos) *
                       (size_t)kv->hd_v * kv->elt;
}
/* Store kv heads [h0, h1) of position pos: k holds their (h1 - h0) * hd_k keys, v their values,
 * head after head (the heads' part of a projection's output row), converted to the cache type
 * (f32_to_fp16 for fp16): storing a position head by head (e.g. one head per thread) writes the
 * same bytes as storing it whole. Trusts its ranges (debug asserts). */
void kv_store_heads(kv_cache *kv, int il, int pos, int h0, int h1, const float *k, const float *v);

#endif /* TERN_RUNTIME_KV_H */
