/* avx2.c: AVX2 (vpmaddubsw) kernels. Built with -mavx2 -mfma -mf16c only; exports only
 * kern_table_avx2; every helper is static. Entries left NULL use the reference. */
#include "kernels/kern_impl.h"

const kern_table kern_table_avx2 = {
    .name = "avx2",
    .needs = KCPU_AVX2,
};
