/* swiglu_impl.h: the body of blk_swiglu_fast (blocks.h), included once per instruction set: by
 * blocks.c (portable), by x86/attn_avx2.c (-mavx2) and by x86/attn_avx512.c (-mavx512f, with
 * SWIGLU_V16: 16 lanes at a time). Element-wise IEEE operations only (vexp.h), so every copy
 * gives the same bits. The includer defines SWIGLU_SUFFIX: the function is
 * blk_swiglu_fast_<suffix>.
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

#ifdef SWIGLU_V16
/* 16 values at once: vsilu's operations per lane (vexp.h's bodies on 16-lane vectors), the same
 * bits as two swiglu8. */
typedef float swiglu_v16f __attribute__((vector_size(64)));
typedef int32_t swiglu_v16i __attribute__((vector_size(64)));
#define SWIGLU_B16(c) ((swiglu_v16f){c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c})
static inline __attribute__((always_inline)) swiglu_v16f SWIGLU_FN(vexp16)(const swiglu_v16f *xp) {
    VEXP_LE0_BODY(swiglu_v16f, swiglu_v16i, SWIGLU_B16);
}
static inline __attribute__((always_inline)) swiglu_v16f SWIGLU_FN(vsilu16)(const swiglu_v16f *xp) {
    VSILU_BODY(swiglu_v16f, swiglu_v16i, SWIGLU_B16, SWIGLU_FN(vexp16));
}
static inline __attribute__((always_inline)) void SWIGLU_FN(swiglu16)(float *o, const float *g, const float *u) {
    swiglu_v16f x, uu;
    memcpy(&x, g, sizeof x);
    memcpy(&uu, u, sizeof uu);
    const swiglu_v16f r = SWIGLU_FN(vsilu16)(&x) * uu;
    memcpy(o, &r, sizeof r);
}
#undef SWIGLU_B16
#endif

void SWIGLU_FN(blk_swiglu_fast)(float *out, const float *g, const float *u, int64_t n) {
    int64_t i = 0;
#ifdef SWIGLU_V16
    for (; i + 16 <= n; i += 16) SWIGLU_FN(swiglu16)(out + i, g + i, u + i);
#endif
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
#undef SWIGLU_V16
