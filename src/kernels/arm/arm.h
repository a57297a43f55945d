/* arm.h: the ARM64 kernel paths as the dispatcher sees them (owner: arm). Compiled only for
 * aarch64 (the Makefile adds the files of src/kernels/arm when the compiler targets it).
 *
 * Three tables, worst -> best, each in its own file built with only its own -march flags:
 *   kern_table_neon     neon.c       ARMv8.0 AdvSIMD: widening multiply-accumulate (smlal);
 *                                    also the float weights of all three tables
 *   kern_table_dotprod  neon_dot.c   ARMv8.2 +dotprod: sdot for matvec and matmul
 *   kern_table_i8mm     neon_i8mm.c  +dotprod+i8mm: smmla on 4-column tiles for matmul, sdot
 *                                    for matvec and for a single leftover column
 * They fill the PQ2_0 (row-pair layout) and PTQ1_0 (direct base-3 decode, or the row-pair
 * transcode) entries for the fast and ggml numerics, and the float weights (F32, F16, BF16) in
 * every numerics mode through the shared arm_mm_f32/f16/bf16; every other entry is NULL (the
 * dispatcher falls back to ref). Integer and float order: kernels/kern_impl.h, reproduced exactly. */
#ifndef TERN_KERNELS_ARM_ARM_H
#define TERN_KERNELS_ARM_ARM_H

#include "kernels/kern_impl.h"

#include <stdint.h>

/* KCPU_NEON | KCPU_DOTPROD | KCPU_I8MM bits of this CPU: getauxval(AT_HWCAP/AT_HWCAP2) on
 * Linux, sysctlbyname on macOS. KCPU_I8MM is only reported together with KCPU_DOTPROD (the i8mm
 * table uses sdot too). Cheap; the dispatcher calls it once. */
uint32_t arm_cpu_features(void);

/* Float weights (neon.c, plain AdvSIMD; the entries of all three tables for KT_F32, KT_F16,
 * KT_BF16 in every mode): rows [r0, r1) of every column of y = W x in the float order of
 * kern_impl.h (16 fmaf lanes, BF16: x rounded to bf16 first, then kern_lane_reduce), bit-identical
 * to ref.c's kern_ref_mm_float. Reads m->a->x (any mode); never writes m->isum. */
void arm_mm_f32(const kern_mm_args *m, int64_t r0, int64_t r1);
void arm_mm_f16(const kern_mm_args *m, int64_t r0, int64_t r1);
void arm_mm_bf16(const kern_mm_args *m, int64_t r0, int64_t r1);

extern const kern_table kern_table_neon;
extern const kern_table kern_table_dotprod;
extern const kern_table kern_table_i8mm;

#endif /* TERN_KERNELS_ARM_ARM_H */
