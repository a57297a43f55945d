/* neon_dot.c: the ARMv8.2 dotprod path, built with -march=armv8.2-a+dotprod only (owner: arm).
 * sdot for matvec and matmul: the row-pair decode and its bounds are in arm_dot.h; a matmul
 * runs the one-column block dot per column with the weight block still in L1 (the loops in
 * arm_common.h load each block once per chunk of up to 64 columns). */
#include "kernels/arm/arm_common.h"

#if defined(__aarch64__)
#include "kernels/arm/arm_dot.h"

ARM_DEFINE_ENTRIES(dotprod, dot_rp_dot1, NULL, dot_rp_ggml, dot_ptq_dot)

const kern_table kern_table_dotprod = {
    .name = "dotprod",
    .needs = KCPU_NEON | KCPU_DOTPROD,
    .fallback = &kern_table_neon,
    .mm = {ARM_TABLE_MM(dotprod)},
};

#endif /* __aarch64__ */
