/* swiglu_impl.h: the body of blk_swiglu_fast (blocks.h), included once per instruction set: by
 * blocks.c (portable) and by x86/attn_avx2.c (-mavx2). Element-wise IEEE operations on 8-lane
 * vectors only (vexp.h), so both copies give the same bits. The includer defines SWIGLU_SUFFIX:
 * the function is blk_swiglu_fast_<suffix>.
 * out = silu(x) * u with vexp.h's vsilu8. */
#ifndef SWIGLU_SUFFIX
#error "define SWIGLU_SUFFIX before including swiglu_impl.h"
#endif

#include "model/vexp.h"

#include <string.h>

#define SWIGLU_CAT2(a, b) a##_##b
#define SWIGLU_CAT(a, b) SWIGLU_CAT2(a, b)
#define SWIGLU_FN(name) SWIGLU_CAT(name, SWIGLU_SUFFIX)

static inline __attribute__((always_inline)) void SWIGLU_FN(swiglu8)(float *o, const float *g, const float *u) {
    attn_v8f x, uu;
    memcpy(&x, g, sizeof x);
    memcpy(&uu, u, sizeof uu);
    const attn_v8f r = vsilu8(&x) * uu;
    memcpy(o, &r, sizeof r);
}

void SWIGLU_FN(blk_swiglu_fast)(float *out, const float *g, const float *u, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) SWIGLU_FN(swiglu8)(out + i, g + i, u + i);
    if (i < n) {   /* tail: zero lanes, only the first n - i written back */
        float tg[8] = {0}, tu[8] = {0}, to[8];
        memcpy(tg, g + i, (size_t)(n - i) * sizeof(float));
        memcpy(tu, u + i, (size_t)(n - i) * sizeof(float));
        SWIGLU_FN(swiglu8)(to, tg, tu);
        memcpy(out + i, to, (size_t)(n - i) * sizeof(float));
    }
}

#undef SWIGLU_FN
#undef SWIGLU_CAT
#undef SWIGLU_CAT2
