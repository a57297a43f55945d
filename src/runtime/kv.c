/* kv.c: the attention KV cache (see kv.h). Invariant: k and v hold n_layer * n_ctx rows. */
#include "runtime/kv.h"

#include "core/fp16.h"

#include <string.h>

uint64_t kv_bytes(int n_layer, int n_ctx, int n_embd_k, int n_embd_v, bool f32) {
    if (n_layer <= 0 || n_ctx <= 0 || n_embd_k <= 0 || n_embd_v <= 0) return 0;
    uint64_t rows = (uint64_t)n_layer * (uint64_t)n_ctx, bk, bv, sum;
    const uint64_t elt = f32 ? 4 : 2;
    if (!ck_mul_u64(rows, (uint64_t)n_embd_k * elt, &bk) || !ck_mul_u64(rows, (uint64_t)n_embd_v * elt, &bv) ||
        !ck_add_u64(bk, bv, &sum))
        return 0;
    return sum;
}

int kv_init(kv_cache *kv, int n_layer, int n_ctx, int n_embd_k, int n_embd_v, bool f32, tern_err *err) {
    memset(kv, 0, sizeof *kv);
    const uint64_t total = kv_bytes(n_layer, n_ctx, n_embd_k, n_embd_v, f32);
    if (total == 0)
        return tern_err_set(err, TERN_E_ARG, "kv cache: bad shape n_layer=%d n_ctx=%d n_embd_k=%d n_embd_v=%d",
                            n_layer, n_ctx, n_embd_k, n_embd_v);
    if (total > SIZE_MAX / 2) return tern_err_set(err, TERN_E_NOMEM, "kv cache: %llu bytes", (unsigned long long)total);
    kv->n_layer = n_layer;
    kv->n_ctx = n_ctx;
    kv->n_embd_k = n_embd_k;
    kv->n_embd_v = n_embd_v;
    kv->f32 = f32;
    kv->elt = f32 ? 4 : 2;
    const size_t bk = (size_t)n_layer * (size_t)n_ctx * (size_t)n_embd_k * kv->elt;
    const size_t bv = (size_t)n_layer * (size_t)n_ctx * (size_t)n_embd_v * kv->elt;
    kv->k = tern_calloc_aligned(bk);
    kv->v = tern_calloc_aligned(bv);
    if (!kv->k || !kv->v) {
        kv_free(kv);
        return tern_err_set(err, TERN_E_NOMEM, "kv cache: cannot allocate %llu bytes", (unsigned long long)total);
    }
    return TERN_OK;
}

void kv_free(kv_cache *kv) {
    if (!kv) return;
    tern_free_aligned(kv->k);
    tern_free_aligned(kv->v);
    kv->k = kv->v = NULL;
}

void kv_store_part(kv_cache *kv, int il, int pos, int k0, int nk, const float *k, int v0, int nv, const float *v) {
    TERN_DASSERT(k0 >= 0 && nk >= 0 && k0 + nk <= kv->n_embd_k && v0 >= 0 && nv >= 0 && v0 + nv <= kv->n_embd_v);
    uint8_t *kr = (uint8_t *)kv_k_row(kv, il, pos) + (size_t)k0 * kv->elt;
    uint8_t *vr = (uint8_t *)kv_v_row(kv, il, pos) + (size_t)v0 * kv->elt;
    if (kv->f32) {
        memcpy(kr, k, (size_t)nk * 4);
        memcpy(vr, v, (size_t)nv * 4);
        return;
    }
    uint16_t *kh = (uint16_t *)(void *)kr, *vh = (uint16_t *)(void *)vr;
    for (int i = 0; i < nk; i++) kh[i] = f32_to_fp16(k[i]);
    for (int i = 0; i < nv; i++) vh[i] = f32_to_fp16(v[i]);
}

