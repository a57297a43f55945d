/* synth.c: `tern synth` writes a Bonsai-format GGUF with random ternary weights and exactly the
 * tensor names, shapes, types and metadata of the spec, for tests and benchmarks.
 * Source of truth: ../shared/spec/ternary-gguf.md sections 4 (Hadamard keys and folding), 5
 * (qwen35 tensor table), 6 (qwen3 tensor table), 7 (tokenizer keys); the weight recipe follows
 * ../shared/golden/qwen3-tiny-pq2_0/PROVENANCE.md.
 *
 * Weights. Every ternary tensor row is a sequence of 128-weight blocks w = (u - 1) * d, u uniform
 * in {0, 1, 2}, d an fp16-exact scale drawn per block, and positions 0 and 64 of each block forced
 * nonzero. So every 64- and 128-group has max|w| = d and the spec encoders (PQ2_0, Q2_0 group 64,
 * PTQ1_0) are lossless: the --type choice changes the encoding, never the weights. Norm weights
 * are 1 + N(0, 0.1^2) (output_norm 16 * that, which sets the logit scale of a random model, as the
 * golden models do), ssm_conv1d N(0, 0.3^2), ssm_dt.bias U[-4, -1], ssm_a = -U[0.5, 4], ssm_alpha
 * N(0, 0.03^2) and ssm_beta N(0, 0.05^2) rounded to bf16.
 *
 * Determinism. Each tensor draws from its own xoshiro256** stream, seeded by splitmix64 from
 * (--seed, tensor name), and consumes it row by row. The bytes depend only on (arch, type, seed,
 * tokenizer), never on chunk sizes, so the 27B streams with bounded memory (one row chunk).
 *
 * Rotation (qwen35 archs). The file stores W' (folded) for every name in
 * prism.hadamard.weight_names and rows R e_r for token_embd. --unrotated-f32 writes, from the
 * same draws, the dense W = W' R (row n of W = had_rot_inv(row n of W'), because R^T R = I and
 * R^T = S H/sqrt(n) is exactly had_rot_inv), embedding rows e_r = R^T (stored row) = had_rot_inv
 * likewise, ssm_out columns moved from grouped back to tiled V-head order (spec 5.5), and no
 * prism.hadamard.* keys: both files compute the same function up to float rounding. */
#include "cli.h"
#include "opts.h"

#include "core/core.h"
#include "core/fp16.h"
#include "format/gguf.h"
#include "format/qtypes.h"
#include "model/hadamard.h"
#include "tokenizer/hf_import.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ==== random numbers =========================================================================== */

typedef struct { uint64_t s[4]; } synth_rng;

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint64_t rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

/* xoshiro256** (Blackman and Vigna). */
static inline uint64_t rng_next(synth_rng *r) {
    uint64_t *s = r->s;
    const uint64_t out = rotl64(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl64(s[3], 45);
    return out;
}

/* A stream per (seed, name): FNV-1a of the name mixed with the seed through splitmix64. */
static void rng_init(synth_rng *r, uint64_t seed, const char *stream) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *p = stream; *p; p++) h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
    uint64_t x = h ^ splitmix64(&seed);
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

static double rng_unif(synth_rng *r) { return (double)(rng_next(r) >> 11) * 0x1.0p-53; }  /* [0, 1) */

static double rng_normal(synth_rng *r) {   /* Box-Muller, one value per call */
    const double u1 = 1.0 - rng_unif(r), u2 = rng_unif(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* ==== architectures ============================================================================ */

typedef struct {
    const char *name;        /* --arch value */
    const char *arch;        /* general.architecture: "qwen3" or "qwen35" */
    bool tiny;               /* --unrotated-f32 allowed; vocab rows grow to fit a tokenizer */
    int64_t n_embd, n_layer, n_ff, n_head, n_head_kv, n_embd_head;
    int64_t n_vocab;         /* token_embd rows (tiny archs: without --tokenizer) */
    bool tied;               /* no output.weight */
    int64_t n_ctx;
    float rope_freq_base;
    /* qwen35 only */
    int64_t n_rot;           /* rope.dimension_count */
    int32_t rope_sections[4];
    int64_t ssm_d_conv, ssm_d_state, ssm_n_group, ssm_dt_rank, ssm_d_inner, full_attn_interval;
    int64_t had_block;       /* prism.hadamard.block_size; 0: no rotation */
} synth_arch;

static const synth_arch g_archs[] = {
    /* golden qwen3-tiny dims (256 wide, 4 layers, 4/2 heads of 64, n_ff 768), tied head */
    {.name = "qwen3-tiny", .arch = "qwen3", .tiny = true, .n_embd = 256, .n_layer = 4, .n_ff = 768,
     .n_head = 4, .n_head_kv = 2, .n_embd_head = 64, .n_vocab = 512, .tied = true, .n_ctx = 40960,
     .rope_freq_base = 1e6f},
    /* spec section 6, 1.7B column; vocab rows 151936 (the cards' padded table) */
    {.name = "bonsai-1.7b", .arch = "qwen3", .n_embd = 2048, .n_layer = 28, .n_ff = 6144,
     .n_head = 16, .n_head_kv = 8, .n_embd_head = 128, .n_vocab = 151936, .tied = true,
     .n_ctx = 32768, .rope_freq_base = 1e6f},
    /* golden qwen35-tiny dims (attention at 3 and 7; 4 key / 8 value GDN heads of 128), with an
     * untied head and Hadamard folding (block 256; sign widths 256, 1024, 768) like the 27B */
    {.name = "qwen35-tiny", .arch = "qwen35", .tiny = true, .n_embd = 256, .n_layer = 8, .n_ff = 768,
     .n_head = 4, .n_head_kv = 2, .n_embd_head = 64, .n_vocab = 512, .tied = false, .n_ctx = 262144,
     .rope_freq_base = 1e7f, .n_rot = 16, .rope_sections = {3, 3, 2, 0}, .ssm_d_conv = 4,
     .ssm_d_state = 128, .ssm_n_group = 4, .ssm_dt_rank = 8, .ssm_d_inner = 1024,
     .full_attn_interval = 4, .had_block = 256},
    /* spec section 5.1 exactly */
    {.name = "bonsai2-27b", .arch = "qwen35", .n_embd = 5120, .n_layer = 64, .n_ff = 17408,
     .n_head = 24, .n_head_kv = 4, .n_embd_head = 256, .n_vocab = 248320, .tied = false,
     .n_ctx = 262144, .rope_freq_base = 1e7f, .n_rot = 64, .rope_sections = {11, 11, 10, 0},
     .ssm_d_conv = 4, .ssm_d_state = 128, .ssm_n_group = 16, .ssm_dt_rank = 48,
     .ssm_d_inner = 6144, .full_attn_interval = 4, .had_block = 1024},
};

static bool arch_is_attn_layer(const synth_arch *a, int64_t il) {   /* spec 5.1 layer schedule */
    return strcmp(a->arch, "qwen3") == 0 || (il + 1) % a->full_attn_interval == 0;
}

/* ==== the tensor plan ========================================================================== */

typedef enum { K_TERN, K_NORM, K_OUT_NORM, K_CONV, K_DT_BIAS, K_SSM_A, K_ALPHA, K_BETA } synth_kind;
enum { ROT_NONE = 0, ROT_FOLDED = 1, ROT_INVERSE = 2 };

typedef struct {
    char name[64];
    synth_kind kind;
    int n_dims;
    int64_t ne[2];           /* ne[0] = row length K, ne[1] = rows N (1 for vectors) */
    int type;                /* ggml type id written */
    float lo, hi;            /* K_TERN: range of the per-block scale */
    int rot;                 /* ROT_* (rotated archs only) */
    bool v_grouped;          /* ssm_out: input columns in grouped V-head order (spec 5.5) */
} synth_tensor;

typedef struct {
    const synth_arch *a;
    int tern_type;           /* type of K_TERN tensors (QT_F32 when unrotated_f32) */
    bool unrotated_f32;
    bool rotated;            /* prism.hadamard.* written and weights folded */
    int64_t n_vocab;
    synth_tensor *t;
    int n_t, cap_t;
    /* sign vectors, concatenated in sign_widths order */
    int64_t sign_widths[3];
    int n_sign_widths;
    int8_t *signs;
    int64_t n_signs;
} synth_plan;

static int plan_add(synth_plan *p, synth_kind kind, const char *name, int n_dims, int64_t k, int64_t n,
                    int rot, float lo, float hi) {
    if (p->n_t == p->cap_t) {
        int cap = p->cap_t ? 2 * p->cap_t : 256;
        synth_tensor *t = realloc(p->t, (size_t)cap * sizeof *t);
        if (!t) return TERN_E_NOMEM;
        p->t = t;
        p->cap_t = cap;
    }
    synth_tensor *t = &p->t[p->n_t++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->kind = kind;
    t->n_dims = n_dims;
    t->ne[0] = k;
    t->ne[1] = n;
    t->rot = p->rotated ? rot : ROT_NONE;
    t->lo = lo;
    t->hi = hi;
    switch (kind) {
    case K_TERN: t->type = p->tern_type; break;
    case K_ALPHA: case K_BETA: t->type = QT_BF16; break;
    default: t->type = QT_F32; break;
    }
    return TERN_OK;
}

/* Tensor order of the reference converter's files (the golden tiny models): global tensors by
 * name, then each layer's tensors by name. Order changes no weight (streams are per name). */
static int64_t tensor_layer(const char *name) {
    return strncmp(name, "blk.", 4) == 0 ? strtoll(name + 4, NULL, 10) : -1;
}
static int tensor_cmp(const void *pa, const void *pb) {
    const synth_tensor *a = pa, *b = pb;
    const int64_t la = tensor_layer(a->name), lb = tensor_layer(b->name);
    if (la != lb) return la < lb ? -1 : 1;
    return strcmp(a->name, b->name);
}

/* Scale ranges (golden PROVENANCE): embedding [0.015, 0.025], ffn [0.035, 0.05], the rest
 * [0.01, 0.05]. */
#define SC_EMBD 0.015f, 0.025f
#define SC_FFN 0.035f, 0.05f
#define SC_ATTN 0.01f, 0.05f

static int plan_build(synth_plan *p) {
    const synth_arch *a = p->a;
    const bool q35 = strcmp(a->arch, "qwen35") == 0;
    const int64_t D = a->n_embd, F = a->n_ff, Dh = a->n_embd_head;
    char nm[64];
    int rc = TERN_OK;
#define ADD(kind, n_dims, k, n, rot, ...) \
    do { if ((rc = plan_add(p, kind, nm, n_dims, k, n, rot, __VA_ARGS__)) != TERN_OK) return rc; } while (0)
#define NAME(...) snprintf(nm, sizeof nm, __VA_ARGS__)
    NAME("token_embd.weight");   ADD(K_TERN, 2, D, p->n_vocab, ROT_INVERSE, SC_EMBD);
    for (int64_t il = 0; il < a->n_layer; il++) {
        NAME("blk.%" PRId64 ".attn_norm.weight", il);   ADD(K_NORM, 1, D, 1, ROT_NONE, 0, 0);
        if (arch_is_attn_layer(a, il)) {
            /* qwen35 attn_q rows hold query and output gate per head (spec 5.2) */
            const int64_t q_rows = a->n_head * Dh * (q35 ? 2 : 1);
            NAME("blk.%" PRId64 ".attn_q.weight", il);      ADD(K_TERN, 2, D, q_rows, ROT_FOLDED, SC_ATTN);
            NAME("blk.%" PRId64 ".attn_k.weight", il);      ADD(K_TERN, 2, D, a->n_head_kv * Dh, ROT_FOLDED, SC_ATTN);
            NAME("blk.%" PRId64 ".attn_v.weight", il);      ADD(K_TERN, 2, D, a->n_head_kv * Dh, ROT_FOLDED, SC_ATTN);
            NAME("blk.%" PRId64 ".attn_output.weight", il); ADD(K_TERN, 2, a->n_head * Dh, D, ROT_FOLDED, SC_ATTN);
            NAME("blk.%" PRId64 ".attn_q_norm.weight", il); ADD(K_NORM, 1, Dh, 1, ROT_NONE, 0, 0);
            NAME("blk.%" PRId64 ".attn_k_norm.weight", il); ADD(K_NORM, 1, Dh, 1, ROT_NONE, 0, 0);
        } else {   /* Gated DeltaNet layer (spec 5.2) */
            const int64_t dk = a->ssm_d_state, Hk = a->ssm_n_group, Hv = a->ssm_dt_rank;
            const int64_t n_qkv = 2 * Hk * dk + a->ssm_d_inner;
            NAME("blk.%" PRId64 ".attn_qkv.weight", il);  ADD(K_TERN, 2, D, n_qkv, ROT_FOLDED, SC_ATTN);
            NAME("blk.%" PRId64 ".attn_gate.weight", il); ADD(K_TERN, 2, D, a->ssm_d_inner, ROT_FOLDED, SC_ATTN);
            NAME("blk.%" PRId64 ".ssm_alpha.weight", il); ADD(K_ALPHA, 2, D, Hv, ROT_NONE, 0, 0);
            NAME("blk.%" PRId64 ".ssm_beta.weight", il);  ADD(K_BETA, 2, D, Hv, ROT_NONE, 0, 0);
            NAME("blk.%" PRId64 ".ssm_conv1d.weight", il); ADD(K_CONV, 2, a->ssm_d_conv, n_qkv, ROT_NONE, 0, 0);
            NAME("blk.%" PRId64 ".ssm_dt.bias", il);      ADD(K_DT_BIAS, 1, Hv, 1, ROT_NONE, 0, 0);
            NAME("blk.%" PRId64 ".ssm_a", il);            ADD(K_SSM_A, 1, Hv, 1, ROT_NONE, 0, 0);
            NAME("blk.%" PRId64 ".ssm_norm.weight", il);  ADD(K_NORM, 1, a->ssm_d_state, 1, ROT_NONE, 0, 0);
            NAME("blk.%" PRId64 ".ssm_out.weight", il);   ADD(K_TERN, 2, a->ssm_d_inner, D, ROT_FOLDED, SC_ATTN);
            p->t[p->n_t - 1].v_grouped = p->rotated;     /* gdn_v_grouped is written as true */
        }
        NAME("blk.%" PRId64 ".%s.weight", il, q35 ? "post_attention_norm" : "ffn_norm");
        ADD(K_NORM, 1, D, 1, ROT_NONE, 0, 0);
        NAME("blk.%" PRId64 ".ffn_gate.weight", il); ADD(K_TERN, 2, D, F, ROT_FOLDED, SC_FFN);
        NAME("blk.%" PRId64 ".ffn_up.weight", il);   ADD(K_TERN, 2, D, F, ROT_FOLDED, SC_FFN);
        NAME("blk.%" PRId64 ".ffn_down.weight", il); ADD(K_TERN, 2, F, D, ROT_FOLDED, SC_FFN);
    }
    NAME("output_norm.weight"); ADD(K_OUT_NORM, 1, D, 1, ROT_NONE, 0, 0);
    if (!a->tied) { NAME("output.weight"); ADD(K_TERN, 2, D, p->n_vocab, ROT_FOLDED, SC_EMBD); }
#undef ADD
#undef NAME
    qsort(p->t, (size_t)p->n_t, sizeof *p->t, tensor_cmp);   /* names are unique: a total order */
    return TERN_OK;
}

static const int8_t *plan_sign_vec(const synth_plan *p, int64_t K);

/* Sign vectors for the input widths of folded weights: n_embd, ssm_d_inner (ssm_out; attn_output
 * when n_head * n_embd_head equals it, as in the 27B), n_ff: the 27B order [5120, 6144, 17408].
 * Every folded width must have one (checked). */
static int plan_signs(synth_plan *p, uint64_t seed, tern_err *err) {
    const synth_arch *a = p->a;
    const int64_t cand[4] = {a->n_embd, a->ssm_d_inner, a->n_ff, a->n_head * a->n_embd_head};
    p->n_sign_widths = 0;
    p->n_signs = 0;
    for (int i = 0; i < 4; i++) {
        bool dup = false;
        for (int j = 0; j < p->n_sign_widths; j++) dup |= p->sign_widths[j] == cand[i];
        if (dup) continue;
        if (p->n_sign_widths == 3)
            return tern_err_set(err, TERN_E_ARG, "synth %s: more than 3 distinct sign widths", a->name);
        p->sign_widths[p->n_sign_widths++] = cand[i];
        p->n_signs += cand[i];
    }
    p->signs = malloc((size_t)p->n_signs);
    if (!p->signs) return tern_err_set(err, TERN_E_NOMEM, "synth: sign vectors (%" PRId64 " bytes)", p->n_signs);
    synth_rng r;
    rng_init(&r, seed, "prism.hadamard.sign_values");
    for (int64_t i = 0; i < p->n_signs; i++) p->signs[i] = (rng_next(&r) >> 63) ? 1 : -1;
    for (int i = 0; i < p->n_t; i++) {
        const synth_tensor *t = &p->t[i];
        if (t->rot == ROT_NONE) continue;
        if (!plan_sign_vec(p, t->ne[0]))
            return tern_err_set(err, TERN_E_ARG, "synth %s: tensor '%s' ne[0] %" PRId64 " has no sign vector", a->name, t->name, t->ne[0]);
        if (t->ne[0] % a->had_block != 0)
            return tern_err_set(err, TERN_E_ARG, "synth %s: tensor '%s' ne[0] %" PRId64 " not a multiple of block %" PRId64,
                                a->name, t->name, t->ne[0], a->had_block);
    }
    return TERN_OK;
}

/* The sign vector of width K (NULL if none). */
static const int8_t *plan_sign_vec(const synth_plan *p, int64_t K) {
    int64_t off = 0;
    for (int i = 0; i < p->n_sign_widths; i++) {
        if (p->sign_widths[i] == K) return p->signs + off;
        off += p->sign_widths[i];
    }
    return NULL;
}

/* ==== vocabulary =============================================================================== */

/* GPT-2 byte -> unicode code point (printable bytes map to themselves, the rest to 256 + n). */
static int gpt2_byte_cp(int b) {
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) return b;
    int n = 0;
    for (int c = 0; c < b; c++)
        if (!((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174 && c <= 255))) n++;
    return 256 + n;
}

static int utf8_put(char *o, int cp) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    o[0] = (char)(0xc0 | (cp >> 6));
    o[1] = (char)(0x80 | (cp & 0x3f));
    return 2;   /* every GPT-2 byte code point is below 0x800 */
}

enum { TT_NORMAL = 1, TT_CONTROL = 3, TT_USER_DEFINED = 4, TT_UNUSED = 5 };

/* A small real byte-level BPE vocabulary: the 256 byte tokens, a few English merges (each
 * adds its merged token), the ChatML control tokens and think tags, then NORMAL rows " w<id>" up
 * to n_vocab (text, not UNUSED padding: a random model generates every id and each must print). Merges are written "a b" in GPT-2 byte-unicode ('Ġ' = space). */
/* --n-vocab's minimum: the built-in vocabulary's 285 strings (256 bytes, 24 merges, 5 special
 * tokens: vocab_write_builtin), so the parser refuses fewer as a usage error. */
#define SYNTH_N_VOCAB_MIN 285
static const char *const g_merges[][2] = {
    {"\xc4\xa0", "t"}, {"h", "e"}, {"\xc4\xa0", "a"}, {"i", "n"}, {"\xc4\xa0t", "he"}, {"e", "r"},
    {"o", "n"}, {"\xc4\xa0", "s"}, {"r", "e"}, {"a", "t"}, {"\xc4\xa0", "w"}, {"o", "u"},
    {"e", "n"}, {"\xc4\xa0", "o"}, {"i", "s"}, {"\xc4\xa0", "b"}, {"e", "d"}, {"\xc4\xa0", "c"},
    {"i", "t"}, {"a", "n"}, {"\xc4\xa0", "f"}, {"o", "r"}, {"in", "g"}, {"\xc4\xa0", "m"},
};
static const char *const g_chatml_template =
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

static int vocab_write_builtin(gguf_writer *w, const char *pre, int64_t n_vocab, const char *chat_template, tern_err *err) {
    enum { N_MERGES = (int)(sizeof g_merges / sizeof g_merges[0]) };
    static const char *const specials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"};
    const int64_t n_real = 256 + N_MERGES + 5;
    _Static_assert(256 + N_MERGES + 5 == SYNTH_N_VOCAB_MIN, "--n-vocab's minimum is the built-in vocabulary's size");
    if (n_vocab < n_real)
        return tern_err_set(err, TERN_E_ARG, "--n-vocab: expected at least %" PRId64 " (the built-in vocabulary: 256 bytes, "
                            "merges and 5 special tokens), got %" PRId64, n_real, n_vocab);
    int rc = TERN_E_NOMEM;
    char **toks = calloc((size_t)n_vocab, sizeof *toks);
    uint64_t *lens = calloc((size_t)n_vocab, sizeof *lens);
    int32_t *types = calloc((size_t)n_vocab, sizeof *types);
    char *mstr[N_MERGES] = {0};
    uint64_t mlen[N_MERGES];
    if (!toks || !lens || !types) goto done;
    for (int64_t i = 0; i < n_vocab; i++) {
        char buf[32];
        int n = 0;
        int32_t type = TT_NORMAL;
        if (i < 256) n = utf8_put(buf, gpt2_byte_cp((int)i));
        else if (i < 256 + N_MERGES) n = snprintf(buf, sizeof buf, "%s%s", g_merges[i - 256][0], g_merges[i - 256][1]);
        else if (i < n_real) {
            const int k = (int)(i - 256 - N_MERGES);
            n = snprintf(buf, sizeof buf, "%s", specials[k]);
            type = k < 3 ? TT_CONTROL : TT_USER_DEFINED;
        } else {   /* every row has text, so a random model's output (any id) prints: " w<id>" in
                    * GPT-2 byte-unicode (U+0120 is the space); digits are in no merge, so each is unique */
            n = snprintf(buf, sizeof buf, "\xc4\xa0w%" PRId64, i);
        }
        if (!(toks[i] = malloc((size_t)n))) goto done;
        memcpy(toks[i], buf, (size_t)n);
        lens[i] = (uint64_t)n;
        types[i] = type;
    }
    for (int m = 0; m < N_MERGES; m++) {
        char buf[32];
        const int n = snprintf(buf, sizeof buf, "%s %s", g_merges[m][0], g_merges[m][1]);
        if (!(mstr[m] = malloc((size_t)n))) goto done;
        memcpy(mstr[m], buf, (size_t)n);
        mlen[m] = (uint64_t)n;
    }
    const uint32_t eot = (uint32_t)(256 + N_MERGES), eos = eot + 2;
    if ((rc = gguf_w_set_str(w, "tokenizer.ggml.model", "gpt2")) != TERN_OK ||
        (rc = gguf_w_set_str(w, "tokenizer.ggml.pre", pre)) != TERN_OK ||
        (rc = gguf_w_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)toks, lens, (uint64_t)n_vocab)) != TERN_OK ||
        (rc = gguf_w_set_arr(w, "tokenizer.ggml.token_type", GGUF_T_I32, types, (uint64_t)n_vocab)) != TERN_OK ||
        (rc = gguf_w_set_arr_str(w, "tokenizer.ggml.merges", (const char *const *)mstr, mlen, N_MERGES)) != TERN_OK ||
        (rc = gguf_w_set_u32(w, "tokenizer.ggml.bos_token_id", eot)) != TERN_OK ||
        (rc = gguf_w_set_u32(w, "tokenizer.ggml.padding_token_id", eot)) != TERN_OK ||
        (rc = gguf_w_set_u32(w, "tokenizer.ggml.eos_token_id", eos)) != TERN_OK ||
        (rc = gguf_w_set_bool(w, "tokenizer.ggml.add_bos_token", false)) != TERN_OK ||
        (rc = gguf_w_set_str(w, "tokenizer.chat_template", chat_template ? chat_template : g_chatml_template)) != TERN_OK)
        tern_err_set(err, rc, "synth: writing the built-in vocabulary");
done:
    if (rc == TERN_E_NOMEM) tern_err_set(err, rc, "synth: out of memory building the vocabulary");
    if (toks)
        for (int64_t i = 0; i < n_vocab; i++) free(toks[i]);
    for (int m = 0; m < N_MERGES; m++) free(mstr[m]);
    free(toks);
    free(lens);
    free(types);
    return rc;
}

/* ==== metadata ================================================================================= */

static int write_hparams(gguf_writer *w, const synth_plan *p, uint64_t seed) {
    const synth_arch *a = p->a;
    char key[96], name[96];
    int rc;
#define KEY(s) (snprintf(key, sizeof key, "%s.%s", a->arch, s), key)
#define CK(x) do { if ((rc = (x)) != TERN_OK) return rc; } while (0)
    snprintf(name, sizeof name, "tern-synth %s seed %" PRIu64 "%s", a->name, seed, p->unrotated_f32 ? " unrotated-f32" : "");
    CK(gguf_w_set_str(w, "general.architecture", a->arch));
    CK(gguf_w_set_str(w, "general.name", name));
    CK(gguf_w_set_u32(w, KEY("context_length"), (uint32_t)a->n_ctx));
    CK(gguf_w_set_u32(w, KEY("embedding_length"), (uint32_t)a->n_embd));
    CK(gguf_w_set_u32(w, KEY("block_count"), (uint32_t)a->n_layer));
    CK(gguf_w_set_u32(w, KEY("feed_forward_length"), (uint32_t)a->n_ff));
    CK(gguf_w_set_u32(w, KEY("attention.head_count"), (uint32_t)a->n_head));
    CK(gguf_w_set_u32(w, KEY("attention.head_count_kv"), (uint32_t)a->n_head_kv));
    CK(gguf_w_set_u32(w, KEY("attention.key_length"), (uint32_t)a->n_embd_head));
    CK(gguf_w_set_u32(w, KEY("attention.value_length"), (uint32_t)a->n_embd_head));
    CK(gguf_w_set_f32(w, KEY("rope.freq_base"), a->rope_freq_base));
    CK(gguf_w_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), 1e-6f));
    if (strcmp(a->arch, "qwen35") == 0) {
        CK(gguf_w_set_u32(w, KEY("rope.dimension_count"), (uint32_t)a->n_rot));
        CK(gguf_w_set_arr(w, KEY("rope.dimension_sections"), GGUF_T_I32, a->rope_sections, 4));
        CK(gguf_w_set_u32(w, KEY("ssm.conv_kernel"), (uint32_t)a->ssm_d_conv));
        CK(gguf_w_set_u32(w, KEY("ssm.state_size"), (uint32_t)a->ssm_d_state));
        CK(gguf_w_set_u32(w, KEY("ssm.group_count"), (uint32_t)a->ssm_n_group));
        CK(gguf_w_set_u32(w, KEY("ssm.time_step_rank"), (uint32_t)a->ssm_dt_rank));
        CK(gguf_w_set_u32(w, KEY("ssm.inner_size"), (uint32_t)a->ssm_d_inner));
        CK(gguf_w_set_u32(w, KEY("full_attention_interval"), (uint32_t)a->full_attn_interval));
    }
#undef KEY
    return TERN_OK;
}

/* Closing keys, last as llama-quantize writes them: general.quantization_version 2, and
 * general.file_type (informative only, spec 1), the type table's: Prism 141 = PQ2_0, 143 =
 * PTQ1_0; 0 = all F32. No Q2_0 value is known (-1 in the table), so q2_0 files carry none. */
static int write_closing(gguf_writer *w, const synth_plan *p) {
    int rc;
    CK(gguf_w_set_u32(w, "general.quantization_version", 2));
    const int file_type = qt_get(p->tern_type)->file_type;
    if (file_type >= 0) CK(gguf_w_set_u32(w, "general.file_type", (uint32_t)file_type));
    return TERN_OK;
}

/* prism.hadamard.* (spec 4.1, version 1): the 10 keys of the 27B. */
static int write_hadamard(gguf_writer *w, const synth_plan *p, tern_err *err) {
    int rc = TERN_E_NOMEM;
    int32_t widths[3], *vals = malloc((size_t)p->n_signs * sizeof *vals);
    const char **names = malloc((size_t)p->n_t * sizeof *names);
    uint64_t *lens = malloc((size_t)p->n_t * sizeof *lens);
    if (!vals || !names || !lens) { tern_err_set(err, rc, "synth: hadamard metadata"); goto done; }
    for (int i = 0; i < p->n_sign_widths; i++) widths[i] = (int32_t)p->sign_widths[i];
    for (int64_t i = 0; i < p->n_signs; i++) vals[i] = p->signs[i];
    uint64_t n_names = 0;
    for (int i = 0; i < p->n_t; i++)
        if (p->t[i].rot == ROT_FOLDED) { names[n_names] = p->t[i].name; lens[n_names++] = strlen(p->t[i].name); }
    const char *inv[1] = {"token_embd.weight"};
    const uint64_t inv_len[1] = {strlen(inv[0])};
#define HK(x) do { if ((rc = (x)) != TERN_OK) { tern_err_set(err, rc, "synth: writing prism.hadamard keys"); goto done; } } while (0)
    HK(gguf_w_set_u32(w, "prism.hadamard.version", 1));
    HK(gguf_w_set_u32(w, "prism.hadamard.block_size", (uint32_t)p->a->had_block));
    HK(gguf_w_set_str(w, "prism.hadamard.transform", "normalized-sylvester-walsh-hadamard"));
    HK(gguf_w_set_str(w, "prism.hadamard.axis", "input-last-dimension"));
    HK(gguf_w_set_str(w, "prism.hadamard.sign_mode", "explicit"));
    HK(gguf_w_set_arr(w, "prism.hadamard.sign_widths", GGUF_T_I32, widths, (uint64_t)p->n_sign_widths));
    HK(gguf_w_set_arr(w, "prism.hadamard.sign_values", GGUF_T_I32, vals, (uint64_t)p->n_signs));
    HK(gguf_w_set_arr_str(w, "prism.hadamard.weight_names", names, lens, n_names));
    HK(gguf_w_set_arr_str(w, "prism.hadamard.inverse_weight_names", inv, inv_len, 1));
    HK(gguf_w_set_bool(w, "prism.hadamard.gdn_v_grouped", true));
#undef HK
    rc = TERN_OK;
done:
    free(vals);
    free(names);
    free(lens);
    return rc;
}

/* ==== weights ================================================================================== */

/* One 128-weight block: codes u[j] in {0, 1, 2} (w = (u - 1) d); returns the fp16 scale d. */
static uint16_t gen_block(synth_rng *r, float lo, float hi, uint8_t u[128]) {
    const uint16_t d = f32_to_fp16(lo + (hi - lo) * (float)rng_unif(r));
    for (int j = 0; j < 128; j += 4) {
        uint64_t x = rng_next(r);
        for (int i = 0; i < 4; i++, x >>= 16) u[j + i] = (uint8_t)(((x & 0xffff) * 3) >> 16);  /* 21846/21845/21845 */
    }
    const uint64_t x = rng_next(r);
    u[0] = (x & 1) ? 2 : 0;     /* one nonzero per 64-group: max|w| = d, lossless encoders */
    u[64] = (x & 2) ? 2 : 0;
    return d;
}

/* PTQ1_0 byte of k base-3 digits u (most significant first), spec 3.4: q = sum u_i 3^(k-1-i)
 * (times 3 for a 4-digit qh byte), byte = ceil(q * 256 / 243). */
static inline uint8_t ptq1_0_byte(const uint8_t *u, int stride, int k) {
    int q = 0;
    for (int i = 0; i < k; i++) q = 3 * q + u[i * stride];
    if (k == 4) q *= 3;
    return (uint8_t)((q * 256 + 242) / 243);
}

/* One block of 128 codes in the file layout of type (spec 3.1, 3.2, 3.4); returns its bytes. */
static int pack_block(int type, const uint8_t u[128], uint16_t d, uint8_t *b) {
    switch (type) {
    case QT_PQ2_0:   /* d, then qs[32]: weight j at bits 2(j&3) of qs[j>>2] */
        b[0] = (uint8_t)d;
        b[1] = (uint8_t)(d >> 8);
        for (int k = 0; k < 32; k++) b[2 + k] = (uint8_t)(u[4 * k] | u[4 * k + 1] << 2 | u[4 * k + 2] << 4 | u[4 * k + 3] << 6);
        return 34;
    case QT_Q2_0:    /* two group-64 blocks, each d then qs[16]; max|w| of each half is d */
        for (int h = 0; h < 2; h++) {
            uint8_t *o = b + 18 * h;
            o[0] = (uint8_t)d;
            o[1] = (uint8_t)(d >> 8);
            for (int k = 0; k < 16; k++) {
                const uint8_t *v = u + 64 * h + 4 * k;
                o[2 + k] = (uint8_t)(v[0] | v[1] << 2 | v[2] << 4 | v[3] << 6);
            }
        }
        return 36;
    case QT_PTQ1_0:  /* qs[m] = u[m + 16n] (m < 16), qs[16 + m] = u[80 + m + 8n] (m < 8), qh[m] = u[120 + m + 2n], d last */
        for (int m = 0; m < 16; m++) b[m] = ptq1_0_byte(u + m, 16, 5);
        for (int m = 0; m < 8; m++) b[16 + m] = ptq1_0_byte(u + 80 + m, 8, 5);
        for (int m = 0; m < 2; m++) b[24 + m] = ptq1_0_byte(u + 120 + m, 2, 4);
        b[26] = (uint8_t)d;
        b[27] = (uint8_t)(d >> 8);
        return 28;
    default: return 0;
    }
}

/* Rows [0, n_rows) of a ternary tensor, next in its stream, encoded as t->type into out.
 * f32: scratch for n_rows * K floats (F32 output only); tmp: K floats. Ternary types are packed
 * directly (the PRNG, not the encoder, bounds the 27B's time); tests check the result equals
 * the library's encoders and transcoders byte for byte. */
static int gen_tern_rows(const synth_plan *p, const synth_tensor *t, synth_rng *r, int64_t n_rows,
                         uint8_t *out, float *f32, float *tmp, tern_err *err) {
    const int64_t K = t->ne[0], nb = K / 128;
    uint8_t u[128];
    if (t->type != QT_F32) {
        for (int64_t i = 0; i < n_rows * nb; i++) {
            const uint16_t d = gen_block(r, t->lo, t->hi, u);
            const int n = pack_block(t->type, u, d, out);
            if (n == 0) return tern_err_set(err, TERN_E_ARG, "synth: '%s': type %d is not a ternary type", t->name, t->type);
            out += n;
        }
        return TERN_OK;
    }
    for (int64_t i = 0; i < n_rows * nb; i++) {
        const float d = fp16_to_f32(gen_block(r, t->lo, t->hi, u));
        for (int j = 0; j < 128; j++) f32[i * 128 + j] = (float)((int)u[j] - 1) * d;
    }
    /* unrotated F32: W = W' R, row by row (spec 4.3); embedding rows likewise (spec 4.4) */
    for (int64_t n = 0; n < n_rows; n++) {
        float *row = f32 + n * K;
        if (t->rot != ROT_NONE) had_rot_inv(row, K, p->a->had_block, plan_sign_vec(p, K));
        if (t->v_grouped) {   /* W_tiled[128(k + Hk r) + e] = W_grouped[128(ratio k + r) + e] */
            const int64_t Hk = p->a->ssm_n_group, ratio = p->a->ssm_dt_rank / Hk, dv = p->a->ssm_d_state;
            for (int64_t k = 0; k < Hk; k++)
                for (int64_t rr = 0; rr < ratio; rr++)
                    memcpy(tmp + dv * (k + Hk * rr), row + dv * (ratio * k + rr), (size_t)dv * sizeof(float));
            memcpy(row, tmp, (size_t)K * sizeof(float));
        }
    }
    memcpy(out, f32, (size_t)(n_rows * K) * sizeof(float));
    return TERN_OK;
}

/* A whole small (non-ternary) tensor into out. */
static void gen_small(const synth_tensor *t, synth_rng *r, uint8_t *out) {
    const int64_t n = t->ne[0] * t->ne[1];
    for (int64_t i = 0; i < n; i++) {
        float v = 0;
        switch (t->kind) {
        case K_NORM: v = (float)(1.0 + 0.1 * rng_normal(r)); break;
        case K_OUT_NORM: v = (float)(16.0 * (1.0 + 0.1 * rng_normal(r))); break;
        case K_CONV: v = (float)(0.3 * rng_normal(r)); break;
        case K_DT_BIAS: v = (float)(-4.0 + 3.0 * rng_unif(r)); break;
        case K_SSM_A: v = (float)-(0.5 + 3.5 * rng_unif(r)); break;
        case K_ALPHA: v = (float)(0.03 * rng_normal(r)); break;
        case K_BETA: v = (float)(0.05 * rng_normal(r)); break;
        case K_TERN: break;
        }
        if (t->type == QT_BF16) {
            const uint16_t h = f32_to_bf16(v);
            out[2 * i] = (uint8_t)h;
            out[2 * i + 1] = (uint8_t)(h >> 8);
        } else {
            memcpy(out + 4 * i, &v, 4);
        }
    }
}

static int write_weights(gguf_writer *w, const synth_plan *p, uint64_t seed, tern_err *err) {
    /* one chunk of rows: at most ~1M weights (4 MB of f32 scratch) per call */
    int64_t max_k = 0, max_small = 0;
    for (int i = 0; i < p->n_t; i++) {
        if (p->t[i].kind == K_TERN) max_k = TERN_MAX(max_k, p->t[i].ne[0]);
        else max_small = TERN_MAX(max_small, p->t[i].ne[0] * p->t[i].ne[1]);
    }
    const int64_t chunk_rows = TERN_MAX((int64_t)1, ((int64_t)1 << 20) / TERN_MAX(max_k, 1));
    const size_t n_f32 = (size_t)TERN_MAX(chunk_rows * max_k, max_small);
    float *f32 = malloc(n_f32 * sizeof(float)), *tmp = malloc((size_t)TERN_MAX(max_k, 1) * sizeof(float));
    uint8_t *out = malloc(n_f32 * sizeof(float));
    int rc = TERN_OK;
    if (!f32 || !tmp || !out) { rc = tern_err_set(err, TERN_E_NOMEM, "synth: row buffers"); goto done; }
    for (int i = 0; i < p->n_t && rc == TERN_OK; i++) {
        const synth_tensor *t = &p->t[i];
        synth_rng r;
        rng_init(&r, seed, t->name);
        uint64_t row_bytes = 0;
        if (!qt_row_bytes(t->type, (uint64_t)t->ne[0], &row_bytes)) {
            rc = tern_err_set(err, TERN_E_ARG, "synth: '%s' row of %" PRId64 " does not fit type %d", t->name, t->ne[0], t->type);
            break;
        }
        if (t->kind != K_TERN) {
            gen_small(t, &r, out);
            rc = gguf_w_tensor_data(w, i, out, row_bytes * (uint64_t)t->ne[1], err);
            continue;
        }
        for (int64_t r0 = 0; r0 < t->ne[1] && rc == TERN_OK; r0 += chunk_rows) {
            const int64_t n = TERN_MIN(chunk_rows, t->ne[1] - r0);
            rc = gen_tern_rows(p, t, &r, n, out, f32, tmp, err);
            if (rc == TERN_OK) rc = gguf_w_tensor_data(w, i, out, row_bytes * (uint64_t)n, err);
        }
    }
done:
    free(f32);
    free(tmp);
    free(out);
    return rc;
}

/* ==== command ================================================================================== */

/* --n-vocab's maximum: 2^20 rows, about 4x the largest real vocabulary (qwen35: 248320); the
 * built-in vocabulary holds one string per row, so a value near INT32_MAX would eat the memory. */
#define SYNTH_N_VOCAB_MAX 1048576
enum { SY_ARCH = 1, SY_TYPE, SY_SEED, SY_TOKENIZER, SY_TEMPLATE, SY_N_VOCAB, SY_UNROT, SY_NO_WEIGHTS, SY_OUT, SY_N_LAYER };
static const opt_def synth_defs[] = {
    {SY_ARCH, "--arch", OPT_TEXT, "ARCH", 0, 0, NULL, "qwen3-tiny | bonsai-1.7b | qwen35-tiny | bonsai2-27b"},
    {SY_TYPE, "--type", OPT_TEXT, "TYPE", 0, 0, NULL, "ternary encoding pq2_0 (default) | ptq1_0 | q2_0 (group 64, id 42)"},
    {SY_SEED, "--seed", OPT_TEXT, "N", 0, 0, NULL, "PRNG seed (default 1); the same seed gives the same bytes"},
    {SY_TOKENIZER, "--tokenizer", OPT_PATH, "PATH", 0, 0, NULL,
     "embed a HF tokenizer.json and the tokenizer_config.json beside it (default:\n"
     "                          a small byte-level vocabulary); rows beyond its ids become [PADi] (unused)"},
    {SY_TEMPLATE, "--chat-template", OPT_PATH, "PATH", 0, 0, NULL, "store this template file's text as tokenizer.chat_template"},
    {SY_N_VOCAB, "--n-vocab", OPT_INT, "N", SYNTH_N_VOCAB_MIN, SYNTH_N_VOCAB_MAX, NULL,
     "tiny archs: embedding rows (default 512, or the tokenizer's ids; at least 285,\n"
     "                          the built-in vocabulary's strings; at most 2^20, about 4x the\n"
     "                          largest real vocabulary, qwen35's 248320)"},
    {SY_N_LAYER, "--n-layer", OPT_INT, "N", 1, 4096, NULL,
     "fewer (or more) blocks than the arch has, same per-layer shapes (benchmarks);\n"
     "                          qwen35: a multiple of its full-attention interval (4)"},
    {SY_UNROT, "--unrotated-f32", OPT_FLAG, NULL, 0, 0, NULL, "tiny archs: the equivalent model with dense F32 weights, no rotation"},
    {SY_NO_WEIGHTS, "--no-weights", OPT_FLAG, NULL, 0, 0, NULL, "header only; the data region is left as a sparse hole (zeros)"},
    {SY_OUT, "-o, --output", OPT_PATH, "PATH", 0, 0, NULL, "the GGUF file to write (required)"},
};

static void synth_usage(FILE *f) {
    fprintf(f,
            "usage: tern synth --arch ARCH [--type pq2_0|ptq1_0|q2_0] [--seed N] [--tokenizer tokenizer.json]\n"
            "                  [--chat-template FILE] [--n-vocab N] [--n-layer N] [--unrotated-f32] [--no-weights] -o OUT.gguf\n"
            "Writes a Bonsai-format GGUF with random ternary weights (lossless for every --type) and\n"
            "exactly the spec's tensor names, shapes, types and metadata.\n");
    opts_help(f, &OPT_TABLE(synth_defs), 1);
}

int cmd_synth(int argc, char **argv) {
    const char *arch_name = NULL, *out_path = NULL, *tok_path = NULL, *type_name = "pq2_0", *tmpl_path = NULL;
    uint64_t seed = 1;
    int64_t n_vocab_opt = 0, n_layer_opt = 0;
    bool unrot = false, no_weights = false, type_given = false;
    const opt_table tab = OPT_TABLE(synth_defs);
    for (int i = 1; i < argc; i++) {
        opt_val v;
        switch (opts_next("synth", &tab, 1, argc, argv, &i, &v)) {
        case OPT_HELP: synth_usage(stdout); return 0;
        case OPT_ERR: return 2;
        case OPT_POSITIONAL: return opts_unexpected("synth", v.str);
        case SY_ARCH: arch_name = v.str; break;
        case SY_TYPE: type_name = v.str, type_given = true; break;
        case SY_SEED: {   /* all digits, 0..2^64-2: no "-1 (random)" here, the file is a function of the seed */
            char *end;
            errno = 0;
            const unsigned long long x = v.str[0] >= '0' && v.str[0] <= '9' ? strtoull(v.str, &end, 10) : 0;
            if (!(v.str[0] >= '0' && v.str[0] <= '9') || errno || *end || x >= UINT64_MAX) {
                opts_bad_value("synth", "--seed", "an integer in 0..18446744073709551614 (synth is deterministic: no random seed)", v.str);
                return 2;
            }
            seed = x;
            break;
        }
        case SY_TOKENIZER: tok_path = v.str; break;
        case SY_TEMPLATE: tmpl_path = v.str; break;
        case SY_N_VOCAB: n_vocab_opt = v.i; break;
        case SY_N_LAYER: n_layer_opt = v.i; break;
        case SY_UNROT: unrot = true; break;
        case SY_NO_WEIGHTS: no_weights = true; break;
        case SY_OUT: out_path = v.str; break;
        default: break;
        }
    }
    if (!arch_name || !out_path) {
        fprintf(stderr, "tern synth: %s is required; see tern synth --help\n", !arch_name ? "--arch" : "-o OUT.gguf");
        return 2;
    }
    const synth_arch *a = NULL;
    for (size_t i = 0; i < sizeof g_archs / sizeof g_archs[0]; i++)
        if (strcmp(arch_name, g_archs[i].name) == 0) a = &g_archs[i];
    if (!a) {
        fprintf(stderr, "tern synth: unknown --arch '%s' (expected qwen3-tiny, bonsai-1.7b, qwen35-tiny or bonsai2-27b)\n", arch_name);
        return 2;
    }
    synth_arch a_layers;                               /* --n-layer: the arch with another depth */
    if (n_layer_opt) {
        if (strcmp(a->arch, "qwen35") == 0 && n_layer_opt % a->full_attn_interval != 0) {
            fprintf(stderr, "tern synth: --n-layer: expected a multiple of %" PRId64 " for %s, got '%" PRId64 "'\n",
                    a->full_attn_interval, a->name, n_layer_opt);
            return 2;
        }
        a_layers = *a;
        a_layers.n_layer = n_layer_opt;
        a = &a_layers;
    }
    const int type = qt_from_name(type_name);
    if (type != QT_PQ2_0 && type != QT_PTQ1_0 && type != QT_Q2_0) {
        fprintf(stderr, "tern synth: --type '%s': expected pq2_0, ptq1_0 or q2_0\n", type_name);
        return 2;
    }
    if (unrot && type_given) {   /* never drop one of two contradicting choices silently */
        fprintf(stderr, "tern synth: --type %s and --unrotated-f32 choose different weights (--unrotated-f32 writes F32); "
                        "use one of them\n", type_name);
        return 2;
    }
    if (unrot && !a->tiny) {
        fprintf(stderr, "tern synth: --unrotated-f32 is for the tiny archs only (%s in F32 would be huge)\n", a->name);
        return 2;
    }
    if (n_vocab_opt && !a->tiny) {
        fprintf(stderr, "tern synth: --n-vocab is for the tiny archs only (%s has %" PRId64 " rows by the spec)\n", a->name, a->n_vocab);
        return 2;
    }

    synth_plan p = {.a = a, .tern_type = unrot ? QT_F32 : type, .unrotated_f32 = unrot,
                    .rotated = a->had_block > 0, .n_vocab = n_vocab_opt ? n_vocab_opt : a->n_vocab};
    const char *pre = strcmp(a->arch, "qwen35") == 0 ? "qwen35" : "qwen2";
    tern_err err = {0};
    gguf_writer *w = NULL;
    tok_hf *hf = NULL;
    char *tmpl = NULL;
    int rc = TERN_OK;
    if (tok_path && !opts_input_ok("--tokenizer", tok_path, err.msg, sizeof err.msg)) {
        fprintf(stderr, "tern synth: %s\n", err.msg);
        return 1;
    }
    size_t tmpl_len;
    if (tmpl_path && opts_read_input("--chat-template", tmpl_path, &tmpl, &tmpl_len)) return 1;
    if (tmpl_path && tmpl_len == 0) {   /* an empty template renders nothing: a mistake, not a wish */
        fprintf(stderr, "tern synth: --chat-template '%s' is empty, expected a chat template's text\n", tmpl_path);
        free(tmpl);
        return 1;
    }
    if (tmpl_path) {   /* GGUF strings are UTF-8, and a NUL would end the template where C code reads it */
        const char *nul = memchr(tmpl, '\0', tmpl_len);
        const size_t ok = tern_utf8_valid_len(tmpl, nul ? (size_t)(nul - tmpl) : tmpl_len);
        if (nul || ok != tmpl_len) {
            if (ok < (nul ? (size_t)(nul - tmpl) : tmpl_len))
                fprintf(stderr, "tern synth: --chat-template '%s': not valid UTF-8 (byte 0x%02x at offset %zu of %zu), expected "
                                "a chat template's text\n", tmpl_path, (unsigned)(unsigned char)tmpl[ok], ok, tmpl_len);
            else
                fprintf(stderr, "tern synth: --chat-template '%s': a NUL byte at offset %zu of %zu, expected a chat template's "
                                "text\n", tmpl_path, (size_t)(nul - tmpl), tmpl_len);
            free(tmpl);
            return 1;
        }
    }
    if (rc == TERN_OK && tok_path) {
        /* spec archs: the spec's rows (an id beyond them is an error); tiny: --n-vocab or the ids */
        const tok_hf_opts o = {.pre = pre, .n_rows = (int32_t)(a->tiny ? n_vocab_opt : a->n_vocab), .chat_template = tmpl};
        rc = tok_hf_load(&hf, tok_path, &o, &err);
        if (rc == TERN_OK) p.n_vocab = hf->n_vocab;
        else {                                /* the file's own error, under the flag that named it */
            char why[sizeof err.msg];
            snprintf(why, sizeof why, "%s", err.msg);
            snprintf(err.msg, sizeof err.msg, "--tokenizer: %.*s", (int)(sizeof err.msg - sizeof "--tokenizer: "), why);
        }
    }
    if (rc == TERN_OK && (rc = plan_build(&p)) != TERN_OK) tern_err_set(&err, rc, "synth: out of memory planning tensors");
    if (rc == TERN_OK && p.rotated) rc = plan_signs(&p, seed, &err);
    if (rc == TERN_OK) rc = gguf_w_init(&w, &err);
    if (rc == TERN_OK) {
        rc = write_hparams(w, &p, seed);
        if (rc != TERN_OK) tern_err_set(&err, rc, "synth: writing hyperparameters");
    }
    if (rc == TERN_OK) rc = hf ? tok_hf_write(hf, w, &err) : vocab_write_builtin(w, pre, p.n_vocab, tmpl, &err);
    if (rc == TERN_OK && p.rotated && !unrot) rc = write_hadamard(w, &p, &err);
    if (rc == TERN_OK && (rc = write_closing(w, &p)) != TERN_OK) tern_err_set(&err, rc, "synth: writing general keys");
    for (int i = 0; i < p.n_t && rc == TERN_OK; i++) {
        const int idx = gguf_w_add_tensor(w, p.t[i].name, p.t[i].type, p.t[i].n_dims, p.t[i].ne, NULL);
        if (idx != i) rc = tern_err_set(&err, idx < 0 ? idx : TERN_E_ARG, "synth: adding tensor '%s'", p.t[i].name);
    }
    const double t0 = tern_time_s();
    /* written to a temporary file renamed over OUT at the end (opts_out): a failure leaves an
     * existing OUT as it was and no new file; /dev/full, a FIFO... are written in place */
    opts_out out = {0};
    bool begun = false, said = false;
    if (rc == TERN_OK) {
        if (opts_out_begin(&out, out_path) != 0) rc = TERN_E_IO, said = true;   /* it printed why */
        else begun = true;
    }
    if (rc == TERN_OK) rc = gguf_w_begin(w, out.write_path, &err);
    if (rc == TERN_OK && !no_weights) rc = write_weights(w, &p, seed, &err);
    if (rc == TERN_OK) rc = no_weights ? gguf_w_end_sparse(w, &err) : gguf_w_end(w, &err);
    gguf_w_free(w);
    tok_hf_free(hf);
    free(tmpl);
    free(p.t);
    free(p.signs);
    if (rc != TERN_OK) {
        if (!said) fprintf(stderr, "tern synth: %s%s\n", err.msg[0] ? err.msg : tern_strerror(rc), begun ? opts_out_note(&out) : "");
        if (begun) opts_out_abort(&out);
        return 1;
    }
    if (opts_out_commit(&out, err.msg, sizeof err.msg) != 0) {
        fprintf(stderr, "tern synth: %s (OUT '%s' left as it was)\n", err.msg, out_path);
        return 1;
    }
    fprintf(stderr, "tern synth: wrote %s (%s, %d tensors, %s%s) in %.1f s\n", out_path, a->name, p.n_t,
            unrot ? "unrotated F32" : qt_get(type)->name, no_weights ? ", no weights" : "", tern_time_s() - t0);
    return 0;
}
