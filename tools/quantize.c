/* quantize.c: `tern quantize IN OUT --type T` re-encodes the weight matrices of a GGUF file.
 * Source of truth: ../shared/spec/ternary-gguf.md sections 2 and 3 (types, encoders, the
 * lossless PQ2_0 <-> PTQ1_0 transcoding) and 5.2 (which tensors are not projections).
 *
 * The rule: a tensor converts iff it is the weight matrix of a projection, i.e. it has two
 * dimensions, its name ends in ".weight", it is not ssm_conv1d (conv taps), ssm_alpha or
 * ssm_beta (BF16 by the spec), and its row length ne[0] is a multiple of the target block.
 * Everything else (norms and every other 1-D tensor, conv taps, ssm_a, ssm_dt.bias, BF16
 * alpha/beta, and 2-D weights whose rows do not fit the block) is copied byte for byte.
 * A converted tensor goes PQ2_0 <-> PTQ1_0 by direct transcoding (lossless; a PQ2_0 block that
 * holds code 3 (+2d) cannot be written as PTQ1_0 and is refused, naming tensor, row and block),
 * otherwise through f32: the spec's scalar dequantiser, then its reference encoder.
 * Metadata is copied key by key in order; only general.file_type is updated to the new type
 * (Prism: 141 PQ2_0, 143 PTQ1_0; llama.cpp: 0 F32, 1 F16, 7 Q8_0; dropped for Q2_0, which has no
 * known value). Tensor order and alignment are kept. The input is mapped (MAP_PRIVATE) and the
 * output streamed in row chunks, so memory stays bounded for the 27B. */
#include "cli.h"
#include "opts.h"

#include "core/core.h"
#include "format/gguf.h"
#include "format/qtypes.h"

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifndef _WIN32
#include <sys/mman.h>
#endif
#include <sys/stat.h>
#include <unistd.h>

static bool ends_with(const char *s, const char *suf) {
    const size_t n = strlen(s), m = strlen(suf);
    return n >= m && memcmp(s + n - m, suf, m) == 0;
}

/* A projection's weight matrix: 2-D, "*.weight", not conv taps and not the BF16 alpha/beta. */
static bool is_projection(const gguf_tensor *t) {
    if (t->n_dims != 2 || !ends_with(t->name, ".weight")) return false;
    return !strstr(t->name, "ssm_conv1d") && !strstr(t->name, "ssm_alpha") && !strstr(t->name, "ssm_beta");
}

/* The conversion rule above: does tensor t take type `type`? */
static bool quant_converts(const gguf_tensor *t, int type) {
    const qt_traits *q = qt_get(type);
    return q && is_projection(t) && t->ne[0] % q->block == 0;
}

static int file_type_of(int type) {   /* general.file_type for a file of `type` weights; -1 none */
    const qt_traits *q = qt_get(type);
    return q ? q->file_type : -1;
}

/* Copy one metadata pair into the writer, keeping its value type. */
static int copy_kv(gguf_writer *w, const gguf_kv *kv, tern_err *err) {
    int rc;
    switch (kv->type) {
    case GGUF_T_U32: rc = gguf_w_set_u32(w, kv->key, (uint32_t)kv->v.u); break;
    case GGUF_T_I32: rc = gguf_w_set_i32(w, kv->key, (int32_t)kv->v.i); break;
    case GGUF_T_U64: rc = gguf_w_set_u64(w, kv->key, kv->v.u); break;
    case GGUF_T_F32: rc = gguf_w_set_f32(w, kv->key, (float)kv->v.f); break;
    case GGUF_T_BOOL: rc = gguf_w_set_bool(w, kv->key, kv->v.b); break;
    case GGUF_T_STRING: {
        char *s = malloc(kv->v.s.n + 1);
        if (!s) return tern_err_set(err, TERN_E_NOMEM, "quantize: key '%s'", kv->key);
        memcpy(s, kv->v.s.p, kv->v.s.n);
        s[kv->v.s.n] = '\0';
        rc = gguf_w_set_str(w, kv->key, s);
        free(s);
        break;
    }
    case GGUF_T_ARRAY:
        if (kv->v.a.type == GGUF_T_STRING) {
            const char **strs = malloc((size_t)(kv->v.a.n ? kv->v.a.n : 1) * sizeof *strs);
            uint64_t *lens = malloc((size_t)(kv->v.a.n ? kv->v.a.n : 1) * sizeof *lens);
            if (!strs || !lens) { free(strs); free(lens); return tern_err_set(err, TERN_E_NOMEM, "quantize: key '%s'", kv->key); }
            for (uint64_t i = 0; i < kv->v.a.n; i++) { strs[i] = kv->v.a.strs[i].p; lens[i] = kv->v.a.strs[i].n; }
            rc = gguf_w_set_arr_str(w, kv->key, strs, lens, kv->v.a.n);
            free(strs);
            free(lens);
        } else {
            rc = gguf_w_set_arr(w, kv->key, kv->v.a.type, kv->v.a.data, kv->v.a.n);
        }
        break;
    default:
        return tern_err_set(err, TERN_E_UNSUPPORTED, "quantize: key '%s': cannot copy a scalar of type %s",
                            kv->key, gguf_vtype_name(kv->type));
    }
    if (rc != TERN_OK) return tern_err_set(err, rc, "quantize: copying key '%s' (%s)", kv->key, gguf_vtype_name(kv->type));
    return TERN_OK;
}

/* Convert rows [0, n_rows) of tensor t (source bytes src, row0 = index of the first row, for
 * messages) to type dst into out. f32: scratch of n_rows * ne[0] floats. */
/* Refuse a damaged source (NaN/Inf fp16 block scale, NaN/Inf F32/F16/BF16 element) rather than
 * convert it to NaN weights, which the load check does not scan in F32/F16 matrices. Block types:
 * the fp16 scale of each block of the n_rows rows at src (rows row0..) is read (exponent all ones
 * = Inf/NaN); element types: f32 holds those rows dequantised and is scanned. The first
 * non-finite one is reported with the load check's wording (tensor, row, block, the scale's
 * bits; or tensor, element, row, column, bits) as TERN_E_FORMAT; TERN_OK when all are finite. */
static int check_finite(const gguf_tensor *t, const uint8_t *src, int64_t row0, int64_t n_rows, const float *f32,
                        tern_err *err) {
    const int64_t K = t->ne[0];
    const qt_traits *q = qt_get(t->type);
    if (q && q->block > 1) {
        const int64_t nb_row = K / q->block, nb = n_rows * nb_row;
        const uint8_t *hi = src + q->d_offset + 1;   /* the fp16's high byte */
        unsigned bad = 0;
        for (int64_t i = 0; i < nb; i++) bad |= (hi[i * q->block_bytes] & 0x7cu) + 4u;   /* bit 7: exponent 11111 */
        if (!(bad & 0x80u)) return TERN_OK;
        int64_t i = 0;
        while ((hi[i * q->block_bytes] & 0x7c) != 0x7c) i++;
        const unsigned h = (unsigned)(hi[i * q->block_bytes - 1] | hi[i * q->block_bytes] << 8);
        return tern_err_set(err, TERN_E_FORMAT, "tensor '%s': row %lld, block %lld: scale 0x%04x is %s; expected a "
                            "finite fp16 scale (the file is damaged)", t->name, (long long)(row0 + i / nb_row),
                            (long long)(i % nb_row), h, (h & 0x3ff) ? "NaN" : (h & 0x8000) ? "-Inf" : "+Inf");
    }
    const int64_t n = n_rows * K;
    int64_t e = 0;
    while (e < n && isfinite(f32[e])) e++;
    if (e == n) return TERN_OK;
    const int64_t row = row0 + e / K, col = e % K;
    const char *what = isnan(f32[e]) ? "NaN" : f32[e] < 0 ? "-Inf" : "+Inf";
    const int width = q ? q->block_bytes : 4;
    uint32_t bits = 0;
    memcpy(&bits, src + e * width, width == 2 ? 2 : 4);
    return tern_err_set(err, TERN_E_FORMAT, "tensor '%s': element %lld (row %lld, column %lld) is %s (bits 0x%0*x); "
                        "expected a finite value (the file is damaged)", t->name, (long long)(row * K + col),
                        (long long)row, (long long)col, what, width == 2 ? 4 : 8, (unsigned)bits);
}

/* What a conversion into a ternary type loses, summed over a tensor's rows: the squared
 * difference between the input values and the values the output encodes, and the squared input.
 * Weights that are ternary already (-d, 0, +d per block, d an fp16) convert exactly (err 0);
 * those of a model not trained ternary lose a large share of their norm (stories260K: 75% in
 * its worst tensor). */
typedef struct {
    double err, norm;
} qz_loss;
#define QZ_LOSSY 0.01   /* relative error (sqrt(err / norm)) above which a tensor counts as not ternary */

static int convert_rows(const gguf_tensor *t, int dst, const uint8_t *src, int64_t row0, int64_t n_rows,
                        uint8_t *out, float *f32, float *back, qz_loss *loss, tern_err *err) {
    const int64_t K = t->ne[0];
    const bool blocks = qt_get(t->type) && qt_get(t->type)->block > 1;
    /* refuse a damaged source before converting it (the lossless paths would carry a NaN scale on,
     * the others would write NaN weights) */
    if (blocks && check_finite(t, src, row0, n_rows, NULL, err) != TERN_OK) return TERN_E_FORMAT;
    if (t->type == QT_PQ2_0 && dst == QT_PTQ1_0) {
        const int64_t nb = K / QK_PQ2_0;
        for (int64_t r = 0; r < n_rows; r++) {
            tern_err e = {0};
            if (qt_pq2_0_to_ptq1_0((const block_pq2_0 *)src + r * nb, (block_ptq1_0 *)out + r * nb, nb, &e) != TERN_OK)
                return tern_err_set(err, TERN_E_FORMAT, "tensor '%s' row %" PRId64 ": %s", t->name, row0 + r, e.msg);
        }
        return TERN_OK;
    }
    if (t->type == QT_PTQ1_0 && dst == QT_PQ2_0) {
        qt_ptq1_0_to_pq2_0((const block_ptq1_0 *)src, (block_pq2_0 *)out, n_rows * (K / QK_PTQ1_0));
        return TERN_OK;
    }
    int rc = qt_dequant(t->type, src, f32, n_rows * K);
    if (rc == TERN_OK && !blocks && check_finite(t, src, row0, n_rows, f32, err) != TERN_OK) return TERN_E_FORMAT;
    if (rc == TERN_OK) rc = qt_quantize(dst, f32, out, n_rows * K);
    if (rc == TERN_OK && qt_get(dst)->ternary && (rc = qt_dequant(dst, out, back, n_rows * K)) == TERN_OK) {
        for (int64_t k = 0; k < n_rows * K; k++) {
            const double e = (double)f32[k] - (double)back[k];
            loss->err += e * e;
            loss->norm += (double)f32[k] * (double)f32[k];
        }
    }
    if (rc != TERN_OK)
        return tern_err_set(err, rc, "tensor '%s': converting %s to %s", t->name, qt_get(t->type) ? qt_get(t->type)->name : "?",
                            qt_get(dst)->name);
    return TERN_OK;
}

/* Drop the mapped input pages that lie more than RELEASE_LAG bytes behind the read position
 * pos, so the resident set stays about one chunk plus the lag instead of the whole input (7 GB
 * for the 27B). The mapping is MAP_PRIVATE and never written: every page is a clean copy of the
 * file, and dropping one only costs a re-fault if it is read again. The lag matters: a page
 * fault maps the aligned window around it (fault-around, large folios), so dropping the page
 * just behind the reader would have the next fault map it back for good (measured: releasing
 * each chunk's own pages left 140 MB mapped for the 1.7B, 2.2 GB for the 27B). Tensors are read
 * in file order, so *rel only moves forward; a tensor stored out of order is read correctly,
 * only not released. */
#define RELEASE_LAG ((uintptr_t)8 << 20)
static void release_behind(const gguf_ctx *g, uintptr_t *rel, const uint8_t *pos) {
#ifdef _WIN32
    (void)g; (void)rel; (void)pos;   /* Windows reads the input (gguf_open): nothing is mapped */
#else
    if (g->mode != GGUF_LOAD_MMAP) return;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), p = (uintptr_t)pos;
    if (p < RELEASE_LAG) return;
    const uintptr_t target = (p - RELEASE_LAG) & ~(page - 1);
    if (target > *rel) {
        madvise((void *)*rel, target - *rel, MADV_DONTNEED);
        *rel = target;
    }
#endif
}

/* Writes to out->write_path (opts_out: a temporary file beside OUT, or OUT itself in place); the
 * caller commits or aborts it. in is the path as given, for messages. */
static bool is_float_type(int t) { return t == QT_F32 || t == QT_F16 || t == QT_BF16; }

static int quantize_file(const char *in, const opts_out *out, int type, bool allow_requant, tern_err *err) {
    gguf_ctx *g = NULL;
    gguf_writer *w = NULL;
    int *dst = NULL;
    float *f32 = NULL, *back = NULL;
    uint8_t *buf = NULL;
    int rc = gguf_open(&g, in, GGUF_LOAD_MMAP, err);
    if (rc != TERN_OK) return rc;
    if ((rc = gguf_w_init(&w, err)) != TERN_OK) goto done;
    const int ftype = file_type_of(type);
    bool ftype_done = false;
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const gguf_kv *kv = &g->kv[i];
        if (strcmp(kv->key, "general.alignment") == 0) {   /* gguf_w_set_alignment writes the key */
            if ((rc = gguf_w_set_alignment(w, (uint32_t)g->alignment)) != TERN_OK) {
                tern_err_set(err, rc, "quantize: alignment %" PRIu64, g->alignment);
                goto done;
            }
            continue;
        }
        if (strcmp(kv->key, "general.file_type") == 0) {
            ftype_done = true;
            if (ftype >= 0 && (rc = gguf_w_set_u32(w, kv->key, (uint32_t)ftype)) != TERN_OK) goto done;
            continue;
        }
        if ((rc = copy_kv(w, kv, err)) != TERN_OK) goto done;
    }
    if (!ftype_done && ftype >= 0 && (rc = gguf_w_set_u32(w, "general.file_type", (uint32_t)ftype)) != TERN_OK) goto done;

    if (!(dst = malloc((size_t)(g->n_tensors ? g->n_tensors : 1) * sizeof *dst))) {
        rc = tern_err_set(err, TERN_E_NOMEM, "quantize: tensor table");
        goto done;
    }
    int64_t max_k = 1;
    int n_conv = 0, n_unfit = 0, n_same = 0;   /* n_same: projections already of the type */
    const char *unfit = NULL;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        dst[i] = quant_converts(t, type) ? type : t->type;
        /* a weight of a non-ternary quantised type (Q8_0, ...) into another quantised type rounds
         * twice (as llama-quantize, only with --allow-requantize); a ternary weight's values are
         * carried by every target (exactly between the ternary types) */
        if (dst[i] != t->type && !allow_requant && !is_float_type(t->type) && !is_float_type(dst[i]) &&
            !(qt_get(t->type) && qt_get(t->type)->ternary)) {
            rc = tern_err_set(err, TERN_E_ARG,
                              "tensor '%s' is quantized already (%s): converting it to %s rounds it a second time; "
                              "--allow-requantize does so anyway, or quantize from the F32/F16 file",
                              t->name, qt_get(t->type) ? qt_get(t->type)->name : "?", qt_get(dst[i])->name);
            goto done;
        }
        if (is_projection(t) && t->type == type) n_same++;
        else if (is_projection(t) && dst[i] != type) {   /* a projection whose rows do not fit the block */
            n_unfit++;
            if (!unfit) unfit = t->name;
        }
        if (dst[i] != t->type) { n_conv++; max_k = TERN_MAX(max_k, t->ne[0]); }
        const int idx = gguf_w_add_tensor(w, t->name, dst[i], t->n_dims, t->ne, NULL);
        if (idx < 0) { rc = tern_err_set(err, idx, "quantize: adding tensor '%s'", t->name); goto done; }
    }
    /* Nothing to convert: writing a copy would look like success, so say why and write no OUT */
    if (g->n_tensors == 0) {
        rc = tern_err_set(err, TERN_E_ARG, "IN has no tensors (a vocabulary-only GGUF?), nothing to convert to %s",
                          qt_get(type)->name);
        goto done;
    }
    if (n_conv == 0) {   /* why, naming only the reasons that apply */
        char why[512] = "";
        size_t o = 0;
        const uint64_t n_rule = g->n_tensors - (uint64_t)n_same - (uint64_t)n_unfit;
        if (n_same)
            o += (size_t)snprintf(why + o, sizeof why - o, "%d matri%s %s %s already", n_same, n_same == 1 ? "x" : "ces",
                                  n_same == 1 ? "is" : "are", qt_get(type)->name);
        if (n_unfit && o < sizeof why)
            o += (size_t)snprintf(why + o, sizeof why - o, "%s%d ha%s rows not a multiple of %d (e.g. '%s')", o ? ", " : "",
                                  n_unfit, n_unfit == 1 ? "s" : "ve", qt_get(type)->block, unfit ? unfit : "?");
        if (n_rule && o < sizeof why)
            snprintf(why + o, sizeof why - o, "%s%" PRIu64 " keep%s %s type by rule", o ? ", " : "", n_rule,
                     n_rule == 1 ? "s" : "", n_rule == 1 ? "its" : "their");
        rc = tern_err_set(err, TERN_E_ARG, "no tensor converted to %s (%s)", qt_get(type)->name, why);
        goto done;
    }
    /* chunks of about 1M weights: f32 scratch and an output buffer of at most 4 MB each */
    const int64_t chunk = TERN_MAX((int64_t)1, ((int64_t)1 << 20) / max_k);
    f32 = malloc((size_t)(chunk * max_k) * sizeof(float));
    buf = malloc((size_t)(chunk * max_k) * sizeof(float));
    back = malloc((size_t)(chunk * max_k) * sizeof(float));
    if (!f32 || !buf || !back) { rc = tern_err_set(err, TERN_E_NOMEM, "quantize: row buffers"); goto done; }
    int n_lossy = 0;          /* tensors converted into a ternary type with a relative error over QZ_LOSSY */
    double worst = 0;
    const char *worst_name = NULL;
    if ((rc = gguf_w_begin(w, out->write_path, err)) != TERN_OK) goto done;
    uintptr_t rel = (uintptr_t)g->buf;   /* input pages below rel are released (g->buf is page aligned) */
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        if (dst[i] == t->type) {   /* copied as is, in pieces of at most 4 MB */
            for (uint64_t o = 0; o < t->nbytes; o += (uint64_t)1 << 22) {
                const uint64_t n = TERN_MIN((uint64_t)1 << 22, t->nbytes - o);
                if ((rc = gguf_w_tensor_data(w, (int)i, t->data + o, n, err)) != TERN_OK) goto done;
                release_behind(g, &rel, t->data + o + n);
            }
            continue;
        }
        uint64_t src_row = 0, dst_row = 0;
        if (!qt_row_bytes(t->type, (uint64_t)t->ne[0], &src_row) || !qt_row_bytes(dst[i], (uint64_t)t->ne[0], &dst_row)) {
            rc = tern_err_set(err, TERN_E_FORMAT, "tensor '%s': row of %" PRId64 " does not fit its type", t->name, t->ne[0]);
            goto done;
        }
        const int64_t n_rows = t->ne[1] * t->ne[2] * t->ne[3];
        qz_loss loss = {0, 0};
        for (int64_t r0 = 0; r0 < n_rows; r0 += chunk) {
            const int64_t n = TERN_MIN(chunk, n_rows - r0);
            if ((rc = convert_rows(t, dst[i], t->data + (uint64_t)r0 * src_row, r0, n, buf, f32, back, &loss, err)) != TERN_OK)
                goto done;
            if ((rc = gguf_w_tensor_data(w, (int)i, buf, dst_row * (uint64_t)n, err)) != TERN_OK) goto done;
            release_behind(g, &rel, t->data + (uint64_t)(r0 + n) * src_row);
        }
        const double rel_err = loss.norm > 0 ? sqrt(loss.err / loss.norm) : 0;
        if (rel_err > QZ_LOSSY) {
            n_lossy++;
            if (rel_err > worst) { worst = rel_err; worst_name = t->name; }
        }
    }
    rc = gguf_w_end(w, err);
    if (rc == TERN_OK) {
        fprintf(stderr, "tern quantize: %s -> %s: %d of %" PRIu64 " tensors converted to %s, the rest copied\n", in, out->path,
                n_conv, g->n_tensors, qt_get(type)->name);
        if (n_unfit)
            fprintf(stderr, "tern quantize: note: %d weight matrices kept their type because their rows are not a multiple "
                    "of %s's block of %d (e.g. '%s')\n", n_unfit, qt_get(type)->name, qt_get(type)->block, unfit);
        if (n_lossy)
            fprintf(stderr, "tern quantize: warning: %d of the %d converted tensors were not ternary (the worst, '%s', "
                    "now differs from its input by %.0f%% of its norm): %s holds -d, 0, +d per block, so a model not "
                    "trained ternary loses most of its accuracy; q8_0 or f16 keep it\n", n_lossy, n_conv, worst_name,
                    100 * worst, qt_get(type)->name);
    }
done:
    gguf_w_free(w);
    gguf_close(g);
    free(dst);
    free(f32);
    free(back);
    free(buf);
    return rc;
}

enum { QZ_TYPE = 1, QZ_ALLOW_REQUANT };
static const opt_def quantize_defs[] = {
    {QZ_TYPE, "--type", OPT_TEXT, "TYPE", 0, 0, NULL, "pq2_0 | ptq1_0 | q2_0 | q8_0 | f16 | f32 (required)"},
    {QZ_ALLOW_REQUANT, "--allow-requantize", OPT_FLAG, NULL, 0, 0, NULL,
     "convert weights of a non-ternary quantized type (Q8_0, ...) into another quantized type (rounds twice)"},
};

static void quantize_usage(FILE *f) {
    fprintf(f,
            "usage: tern quantize IN.gguf OUT.gguf --type pq2_0|ptq1_0|q2_0|q8_0|f16|f32\n"
            "Converts every projection weight (2-D '*.weight' whose row length fits the type's block,\n"
            "except ssm_conv1d, ssm_alpha, ssm_beta); norms, 1-D tensors, conv taps, ssm_a, ssm_dt.bias\n"
            "and BF16 alpha/beta keep their type. PQ2_0 <-> PTQ1_0 is lossless and refuses a block with\n"
            "code 3. A weight of a non-ternary quantized type (Q8_0, ...) goes into another quantized type\n"
            "only with --allow-requantize. Metadata is copied (general.file_type updated). When no tensor can be converted\n"
            "(all are of the type already or none fits its block) it says why and exits 1, writing no OUT.\n"
            "The ternary types hold -d, 0, +d per block: converting weights that are not ternary warns (the file is\n"
            "still written); a model not trained ternary loses most of its accuracy in them.\n");
    opts_help(f, &OPT_TABLE(quantize_defs), 1);
}

int cmd_quantize(int argc, char **argv) {
    const char *paths[2] = {NULL, NULL}, *type_name = NULL;
    int n_paths = 0;
    bool allow_requant = false;
    const opt_table tab = OPT_TABLE(quantize_defs);
    for (int i = 1; i < argc; i++) {
        opt_val v;
        switch (opts_next("quantize", &tab, 1, argc, argv, &i, &v)) {
        case OPT_HELP: quantize_usage(stdout); return 0;
        case OPT_ERR: return 2;
        case QZ_TYPE: type_name = v.str; break;
        case QZ_ALLOW_REQUANT: allow_requant = true; break;
        case OPT_POSITIONAL:
            if (n_paths == 2) {   /* llama-quantize takes the type as a third argument: say how it is given here */
                const bool a_type = qt_from_name(v.str) >= 0;
                fprintf(stderr, "tern quantize: unexpected argument '%s' (IN and OUT already given)%s%s; see tern quantize --help\n",
                        v.str, a_type ? "; the type is given as --type " : "", a_type ? v.str : "");
                return 2;
            }
            if (!v.str[0]) {   /* "" names no file (an empty OUT was seen only at the final rename) */
                fprintf(stderr, "tern quantize: %s: expected a path, got ''; see tern quantize --help\n", n_paths ? "OUT" : "IN");
                return 2;
            }
            paths[n_paths++] = v.str;
            break;
        default: break;
        }
    }
    if (n_paths != 2 || !type_name) {
        fprintf(stderr, "tern quantize: %s; see tern quantize --help\n", n_paths != 2 ? "expected IN and OUT paths" : "--type is required");
        return 2;
    }
    const int type = qt_from_name(type_name);
    if (type != QT_PQ2_0 && type != QT_PTQ1_0 && type != QT_Q2_0 && type != QT_Q8_0 && type != QT_F16 && type != QT_F32) {
        fprintf(stderr, "tern quantize: --type '%s': expected pq2_0, ptq1_0, q2_0, q8_0, f16 or f32\n", type_name);
        return 2;
    }
    /* OUT that is IN by another name (../, a symlink, a hard link): writing it would truncate the
     * mmapped input under the reader (SIGBUS, the model lost) */
#ifdef _WIN32
    /* no inode numbers in the CRT's stat: the full paths are compared, case-insensitively */
    char full_in[1024], full_out[1024];
    if (strcmp(paths[0], paths[1]) == 0 || (_fullpath(full_in, paths[0], sizeof full_in) &&
                                             _fullpath(full_out, paths[1], sizeof full_out) && _stricmp(full_in, full_out) == 0)) {
#else
    struct stat st_in, st_out;
    if (strcmp(paths[0], paths[1]) == 0 ||
        (stat(paths[0], &st_in) == 0 && stat(paths[1], &st_out) == 0 && st_in.st_dev == st_out.st_dev &&
         st_in.st_ino == st_out.st_ino)) {
#endif
        fprintf(stderr, "tern quantize: IN '%s' and OUT '%s' are the same file; expected a different OUT "
                "(the input is read while OUT is written)\n", paths[0], paths[1]);
        return 2;
    }
    tern_err err = {0};
    opts_out out;
    if (opts_out_begin(&out, paths[1]) != 0) return 1;
    int rc = quantize_file(paths[0], &out, type, allow_requant, &err);
    if (rc != TERN_OK) {
        fprintf(stderr, "tern quantize: %s%s\n", err.msg[0] ? err.msg : tern_strerror(rc), opts_out_note(&out));
        opts_out_abort(&out);
        return 1;
    }
    char msg[2600];
    if (opts_out_commit(&out, msg, sizeof msg) != 0) {
        fprintf(stderr, "tern quantize: %s (OUT '%s' left as it was)\n", msg, paths[1]);
        return 1;
    }
    return 0;
}
