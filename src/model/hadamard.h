/* hadamard.h: the Walsh-Hadamard rotation of Ternary Bonsai 2 files. Layer 5 primitive.
 * Source of truth: ../shared/spec/ternary-gguf.md section 4.2 (rot), 4.4 (inverse rows).
 *   rot(x):      y = s (.) x; per block of n: y_b = FWHT_n(y_b) * (1/sqrt n)  (scale first)
 *   rot_inv(r):  e = s (.) (FWHT_blockwise(r) * (1/sqrt n))
 * FWHT_n is the unnormalised Sylvester transform, natural order: for span h = 1, 2, ..., n/2,
 * (a, b) -> (a + b, a - b). n is a power of two; K a multiple of n; s has K entries (+-1) or is
 * NULL (identity signs). Scalar reference; SIMD versions must give the same bits. */
#ifndef TERN_MODEL_HADAMARD_H
#define TERN_MODEL_HADAMARD_H

#include "format/gguf.h"
#include "kernels/kernels.h"

#include <stdbool.h>
#include <stdint.h>

/* In-place unnormalised FWHT of x[0..n). */
void had_fwht(float *x, int64_t n);
/* In place: x = rot(x) over K values with block size n and signs s (int8 +-1, or NULL). */
void had_rot(float *x, int64_t K, int64_t n, const int8_t *s);
/* In place: x = rot_inv(x) (inverse of rot; used for embedding rows and unrotating weights). */
void had_rot_inv(float *x, int64_t K, int64_t n, const int8_t *s);

/* In place: FWHT of each block of n over K values, vector code with the same bits as had_fwht
 * (every butterfly is the same single add or subtract of the same operands). n >= 8. */
void had_fwht_blocks(float *x, int64_t K, int64_t n);
/* The same on the named ISA path ("avx2"/"avxvnni"/"avx512vnni": the AVX2 build of the same code, x86
 * only; anything else: generic), for tests that compare the paths bit for bit. */
void had_fwht_blocks_isa(const char *isa, float *x, int64_t K, int64_t n);

/* Fused RMSNorm + rotation, one pass over x (the activation is read once):
 *   y_i = x_i * r * w_i,  r = 1 / sqrtf(mean(x^2) + eps)   (squares summed in double, as the
 *         reference runtime's rms_norm; then the weight multiply, a separate rounding)
 *   y   = rot(y) (signs, scale 1/sqrt(n) first, blockwise FWHT)   [skipped when n == 0]
 * Bit-identical to rmsnorm followed by had_rot. w may be NULL (no weight). y must not alias x
 * unless n == 0. */
void had_rmsnorm_rot(float *y, const float *x, const float *w, int64_t K, float eps, int64_t n, const int8_t *s);

/* The same for one column, fused with the int8 quantisation of the result: after the sum of
 * squares, x is read once more, block by block (max(n, 128) values: whole rotation blocks and
 * whole quantisation blocks of both modes), and each block is normed, rotated and quantised
 * while it is in L1. Writes y (the rotated column, K floats: float kernels read it), q (the
 * column's kern_quantize output for mode, kern_act_bytes(mode, K, 1) bytes; unused for KQ_F32)
 * and, when yn is not NULL, yn = the normed column before the rotation. Bit-identical to
 * had_rmsnorm_rot (and yn to it with n = 0) followed by kern_quantize of y (tested). No alias
 * between y, yn and x. */
void had_rmsnorm_rot_quant(float *y, void *q, kern_numerics mode, float *yn, const float *x, const float *w, int64_t K,
                           float eps, int64_t n, const int8_t *s);

/* Grouped V-head permutation before ssm_out (spec 5.5), n_tok tokens of Hv = Hk * r_per heads of d:
 *   dst[128 (r_per k + r) + e] = src[128 (k + Hk r) + e]   (here with d for 128)
 * dst must not alias src. */
void had_gdn_v_grouped(float *dst, const float *src, int n_k_head, int n_v_head, int d);

/* ---- prism.hadamard.* metadata (spec 4.1) ------------------------------------------------ */
#define HAD_MAX_WIDTHS 16
typedef struct had_cfg {
    bool active;               /* prism.hadamard.version present */
    int version;               /* 1 or 2 */
    int64_t block;             /* n: power of two */
    bool identity;             /* sign_mode "identity": all signs +1 */
    int n_widths;
    int64_t widths[HAD_MAX_WIDTHS];
    int8_t *signs[HAD_MAX_WIDTHS]; /* owned copies, widths[i] entries of +-1 (NULL when identity) */
    uint64_t n_folded, n_inverse;
    gguf_str *folded;          /* owned array of names (the strings point into the gguf buffer) */
    gguf_str *inverse;
    bool gdn_v_grouped;
    bool tied_output;
} had_cfg;

/* Read and validate every prism.hadamard.* key of g (all refusals name the key, expected, got):
 * unknown keys under prism.hadamard. (TERN_E_UNSUPPORTED), version not 1/2, block_size not a
 * power of two, transform other than "normalized-sylvester-walsh-hadamard" or axis other than
 * "input-last-dimension" (TERN_E_UNSUPPORTED), sign_mode other than explicit/identity, sign
 * widths not positive multiples of n or repeated, sum(widths) != len(sign_values), a sign value
 * not +-1 (any integer type accepted), a listed name that is not a tensor, a listed weight whose
 * ne[0] is not a multiple of n or has no sign vector of exactly that width, tied_output with
 * version 1, tied_output without token_embd.weight in the inverse list, or with output.weight
 * present (TERN_E_FORMAT). Without prism.hadamard.version (and no other such key): inactive, OK.
 * h is zeroed first; release with had_free (also after an error). g must outlive h. */
int had_load(had_cfg *h, const gguf_ctx *g, tern_err *err);
void had_free(had_cfg *h);
/* Signs for input width K (NULL for identity mode or no such width). */
const int8_t *had_signs(const had_cfg *h, int64_t K);
/* Whether a tensor is folded (forward rotation on its input) / stored as inverse rows. */
bool had_is_folded(const had_cfg *h, const char *name);
bool had_is_inverse(const had_cfg *h, const char *name);

#endif /* TERN_MODEL_HADAMARD_H */
