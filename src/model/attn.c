/* attn.c: the standard-softmax attention tile (blk_attn_tile, blocks.h), its portable copy and
 * the choice of copy, plus the exact fp16 -> f32 table. The body is attn_impl.h; x86/attn_avx2.c
 * compiles the same body with -mavx2 -mf16c, x86/attn_avx512.c adds -mavx512f -mavx512vl. The
 * copies give the same bits (see attn_impl.h), so the choice never changes a result: the ops
 * table (ops.h) takes the AVX-512 copy when the kernels run avx512vnni, the AVX2 copy on avx2 and
 * avxvnni (those need AVX2 + F16C), the portable copy otherwise (so the ref path also exercises
 * it). */
#include "model/blocks.h"
#include "model/ops.h"

#include "core/fp16.h"

#include <pthread.h>
#include <string.h>

/* The vector helpers below return 32-byte vectors; they are all static and always inlined, so
 * no call crosses an ABI boundary and GCC's note about the AVX calling convention is moot. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

/* fp16 -> f32 through a 64K-entry table (exact: filled with fp16_to_f32). */
static float f16_table[65536];
static pthread_once_t f16_once = PTHREAD_ONCE_INIT;
static void f16_table_fill(void) {
    for (uint32_t h = 0; h < 65536; h++) f16_table[h] = fp16_to_f32((uint16_t)h);
}
void blk_init(void) { pthread_once(&f16_once, f16_table_fill); }

static inline __attribute__((always_inline)) attn_v8f attn_ld_f16_table(const uint16_t *p) {
    const attn_v8f v = {f16_table[p[0]], f16_table[p[1]], f16_table[p[2]], f16_table[p[3]],
                        f16_table[p[4]], f16_table[p[5]], f16_table[p[6]], f16_table[p[7]]};
    return v;
}

#define ATTN_SUFFIX generic
#define ATTN_LD_F16(p) attn_ld_f16_table(p)
#include "model/attn_impl.h"
#undef ATTN_SUFFIX
#undef ATTN_LD_F16

void blk_attn_tile(int nq, const float *const *q, float *const *out, const int *n_kv, const blk_kv_view *kv, int ikv,
                   int hd_k, int hd_v, float scale, float *scores) {
    model_ops_active()->attn_tile(nq, q, out, n_kv, kv, ikv, hd_k, hd_v, scale, scores);
}
