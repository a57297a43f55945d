/* avx512vnni.c: AVX-512 VNNI (vpdpbusd) kernels. Built with the AVX-512 flags only; exports only
 * kern_table_avx512vnni; every helper is static. Entries left NULL use the reference. */
#include "kernels/kern_impl.h"

const kern_table kern_table_avx512vnni = {
    .name = "avx512vnni",
    .needs = KCPU_AVX2 | KCPU_AVX512VNNI,
};
