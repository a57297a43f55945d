/* kv.c: the attention KV cache (see kv.h). Invariant: k and v hold n_layer * n_ctx rows. */
#include "runtime/kv.h"

#include "core/fp16.h"
#include "core/os.h"

#include <limits.h>
#include <string.h>

uint64_t kv_bytes(int n_layer, int n_ctx, int n_head_kv, int hd_k, int hd_v, bool f32) {
    if (n_layer <= 0 || n_ctx <= 0 || n_head_kv <= 0 || hd_k <= 0 || hd_v <= 0) return 0;
    uint64_t rows, bk, bv, sum;
    const uint64_t elt = f32 ? 4 : 2;
    if (!ck_mul_u64((uint64_t)n_layer * (uint64_t)n_ctx, (uint64_t)n_head_kv, &rows) ||
        !ck_mul_u64(rows, (uint64_t)hd_k * elt, &bk) || !ck_mul_u64(rows, (uint64_t)hd_v * elt, &bv) ||
        !ck_add_u64(bk, bv, &sum))
        return 0;
    return sum;
}

int kv_init(kv_cache *kv, int n_layer, int n_ctx, int n_head_kv, int hd_k, int hd_v, bool f32, tern_err *err) {
    memset(kv, 0, sizeof *kv);
    const uint64_t total = kv_bytes(n_layer, n_ctx, n_head_kv, hd_k, hd_v, f32);
    if (total == 0 || (int64_t)n_head_kv * hd_k > INT_MAX || (int64_t)n_head_kv * hd_v > INT_MAX)
        return tern_err_set(err, TERN_E_ARG, "kv cache: bad shape n_layer=%d n_ctx=%d n_head_kv=%d hd_k=%d hd_v=%d",
                            n_layer, n_ctx, n_head_kv, hd_k, hd_v);
    if (total > SIZE_MAX / 2)
        return tern_err_set(err, TERN_E_NOMEM, "kv cache: %llu bytes for a context of %d tokens, more than this system can address",
                            (unsigned long long)total, n_ctx);
    const int n_embd_k = n_head_kv * hd_k, n_embd_v = n_head_kv * hd_v;
    kv->n_layer = n_layer;
    kv->n_ctx = n_ctx;
    kv->n_head_kv = n_head_kv;
    kv->hd_k = hd_k;
    kv->hd_v = hd_v;
    kv->n_embd_k = n_embd_k;
    kv->n_embd_v = n_embd_v;
    kv->f32 = f32;
    kv->elt = f32 ? 4 : 2;
    const size_t bk = (size_t)n_layer * (size_t)n_ctx * (size_t)n_embd_k * kv->elt;
    const size_t bv = (size_t)n_layer * (size_t)n_ctx * (size_t)n_embd_v * kv->elt;
    /* fresh pages from the OS, zero-filled when first touched: a context costs memory and the
     * time to clear it only as its positions fill, so even a -c of millions of tokens starts at
     * once */
    kv->k = os_pages_alloc(bk);
    kv->v = os_pages_alloc(bv);
    if (!kv->k || !kv->v) {
        kv_free(kv);
        return tern_err_set(err, TERN_E_NOMEM,
                            "kv cache: cannot allocate %llu bytes for a context of %d tokens (%d layers); a smaller "
                            "context (-c) needs proportionally less", (unsigned long long)total, n_ctx, n_layer);
    }
    return TERN_OK;
}

void kv_free(kv_cache *kv) {
    if (!kv) return;
    const size_t pos = (size_t)kv->n_layer * (size_t)kv->n_ctx * kv->elt;
    os_pages_free(kv->k, pos * (size_t)kv->n_embd_k);
    os_pages_free(kv->v, pos * (size_t)kv->n_embd_v);
    kv->k = kv->v = NULL;
}

void kv_store_heads(kv_cache *kv, int il, int pos, int h0, int h1, const float *k, const float *v) {
    TERN_DASSERT(h0 >= 0 && h0 <= h1 && h1 <= kv->n_head_kv);
    const int hk = kv->hd_k, hv = kv->hd_v;
    for (int h = h0; h < h1; h++, k += hk, v += hv) {
        void *kr = kv_k_at(kv, il, h, pos), *vr = kv_v_at(kv, il, h, pos);
        if (kv->f32) {
            memcpy(kr, k, (size_t)hk * 4);
            memcpy(vr, v, (size_t)hv * 4);
            continue;
        }
        uint16_t *kh = kr, *vh = vr;
        for (int i = 0; i < hk; i++) kh[i] = f32_to_fp16(k[i]);
        for (int i = 0; i < hv; i++) vh[i] = f32_to_fp16(v[i]);
    }
}

