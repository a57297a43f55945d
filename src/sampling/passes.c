/* passes.c: the generic table of the sampler's vocabulary passes (4 lanes: the baseline register
 * of x86-64 and ARM64, so no ISA flags) and the choice of table. */
#include "sampling/passes.h"

#include "kernels/kernels.h"

#define SP_N 4
#define SP_VF vexp_v4f
#define SP_VI vexp_v4i
#define SP_B(c) ((vexp_v4f){c, c, c, c})
#define SP_BI(c) ((vexp_v4i){c, c, c, c})
#define SP_IOTA ((vexp_v4i){0, 1, 2, 3})
#define SP_EXP vexp4_le0
#define SP_ANY(m) ((m)[0] | (m)[1] | (m)[2] | (m)[3])
#define SP_FN(name) sp4_##name
#define SP_TABLE samp_passes_generic
#define SP_NAME "generic"
#include "sampling/passes_impl.h"

const samp_passes *samp_passes_active(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (kern_isa_avx2()) return &samp_passes_avx2;
#endif
    return &samp_passes_generic;
}
