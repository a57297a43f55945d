/* attn_avx512.c: the attention tile body (attn_impl.h) compiled with -mavx2 -mf16c -mavx512f
 * -mavx512vl (Makefile): the same 8-lane vectors and vcvtph2ps widening as x86/attn_avx2.c, so the
 * same bits, with AVX-512VL's 32 vector registers, where the 8-query tiles of prefill keep their
 * accumulators, query chunks and broadcast weights in registers instead of reloading them. Only
 * blk_attn_tile_avx512 is exported; the avx512 ops table (ops.c) holds it. */
#include "model/blocks.h"

#if defined(__x86_64__)
#if !defined(__AVX2__) || !defined(__F16C__) || !defined(__AVX512VL__)
#error "attn_avx512.c must be compiled with -mavx2 -mf16c -mavx512f -mavx512vl"
#endif

#include "model/x86/f16c.h"

#define ATTN_SUFFIX avx512
#define ATTN_LD_F16(p) attn_ld_f16c(p)
#define ATTN_CG_WIDE 2   /* 8 queries x 2 chunks of the weighted V sum in registers */
#include "model/attn_impl.h"
#endif
