/* passes_avx2.c: the sampler's vocabulary passes on 8-lane ymm vectors (built with -mavx2; the
 * same body as the generic table, passes_impl.h, so the same bits). */
#include "sampling/passes.h"

#include <immintrin.h>

#define SP_N 8
#define SP_VF attn_v8f
#define SP_VI attn_v8i
#define SP_B(c) ((attn_v8f){c, c, c, c, c, c, c, c})
#define SP_BI(c) ((attn_v8i){c, c, c, c, c, c, c, c})
#define SP_IOTA ((attn_v8i){0, 1, 2, 3, 4, 5, 6, 7})
#define SP_EXP vexp_le0
#define SP_ANY(m) _mm256_movemask_ps((__m256)(m))
#define SP_FN(name) sp8_##name
#define SP_TABLE samp_passes_avx2
#define SP_NAME "avx2"
#include "sampling/passes_impl.h"
