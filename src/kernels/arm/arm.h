/* arm.h: the ARM64 kernel paths as the dispatcher sees them (owner: arm). Compiled only for
 * aarch64 (the Makefile adds the files of src/kernels/arm when the compiler targets it).
 *
 * Three tables, worst -> best, each in its own file built with only its own -march flags:
 *   kern_table_neon     neon.c       ARMv8.0 AdvSIMD: widening multiply-accumulate (smlal)
 *   kern_table_dotprod  neon_dot.c   ARMv8.2 +dotprod: sdot for matvec and matmul
 *   kern_table_i8mm     neon_i8mm.c  +dotprod+i8mm: smmla on 4-column tiles for matmul, sdot
 *                                    for matvec and for a single leftover column
 * They fill the PQ2_0 (row-pair layout) and PTQ1_0 (direct base-3 decode, or the row-pair
 * transcode) entries for the fast and ggml numerics; every other entry is NULL (the dispatcher
 * falls back to ref). Integer and float order: kernels/kern_impl.h, reproduced exactly. */
#ifndef TERN_KERNELS_ARM_ARM_H
#define TERN_KERNELS_ARM_ARM_H

#include "kernels/kern_impl.h"

#include <stdint.h>

/* KCPU_NEON | KCPU_DOTPROD | KCPU_I8MM bits of this CPU: getauxval(AT_HWCAP/AT_HWCAP2) on
 * Linux, sysctlbyname on macOS. KCPU_I8MM is only reported together with KCPU_DOTPROD (the i8mm
 * table uses sdot too). Cheap; the dispatcher calls it once. */
uint32_t arm_cpu_features(void);

extern const kern_table kern_table_neon;
extern const kern_table kern_table_dotprod;
extern const kern_table kern_table_i8mm;

#endif /* TERN_KERNELS_ARM_ARM_H */
