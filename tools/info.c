/* info.c: `tern info FILE [--bw GB/s] [--pos N] [--no-tensors]`: what a GGUF file holds and what
 * decoding it costs. Prints the file layout, architecture and its hyperparameters, tokenizer
 * summary, prism.hadamard.* summary, the tensor table, totals by type, the parameter count and
 * the per-token byte budget of ../shared/DESIGN.md with the decode ceiling it implies at a
 * memory bandwidth. Opens the file with a private mapping (header pages only are touched, so a
 * 7 GB file is instant). Figures: src/format/budget.c. */
#include "cli.h"
#include "opts.h"

#include "core/core.h"
#include "format/budget.h"
#include "format/gguf.h"
#include "format/qtypes.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *group(uint64_t v, char *buf) {            /* 1234567 -> "1,234,567" */
    char tmp[32];
    const int n = snprintf(tmp, sizeof tmp, "%" PRIu64, v);
    int o = 0;
    for (int i = 0; i < n; i++) {
        if (i && (n - i) % 3 == 0) buf[o++] = ',';
        buf[o++] = tmp[i];
    }
    buf[o] = '\0';
    return buf;
}

/* A GGUF string, quoted, its first max bytes: control bytes and bytes that are not part of a
 * valid UTF-8 character as \xNN (a damaged file never sends raw bytes to the terminal). */
static void print_str(gguf_str s, size_t max) {
    putchar('"');
    for (uint64_t i = 0; i < s.n && i < max; i++) {
        const unsigned char c = (unsigned char)s.p[i];
        if (c >= 0x80) {
            const uint64_t left = s.n - i;
            const int len = tern_utf8_seq((const unsigned char *)s.p + i, left > 4 ? 4 : (int)left);
            if (len > 0) {
                fwrite(s.p + i, 1, (size_t)len, stdout);
                i += (uint64_t)len - 1;
            } else printf("\\x%02x", c);
            continue;
        }
        if (c == '\n') fputs("\\n", stdout);
        else if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20 || c == 0x7f) printf("\\x%02x", c);
        else putchar(c);
    }
    putchar('"');
    if (s.n > max) printf("... (%" PRIu64 " bytes)", s.n);
}

static void print_value(const gguf_kv *kv) {
    switch (kv->type) {
    case GGUF_T_U8: case GGUF_T_U16: case GGUF_T_U32: case GGUF_T_U64: printf("%" PRIu64, kv->v.u); break;
    case GGUF_T_I8: case GGUF_T_I16: case GGUF_T_I32: case GGUF_T_I64: printf("%" PRId64, kv->v.i); break;
    case GGUF_T_F32: case GGUF_T_F64: printf("%g", kv->v.f); break;
    case GGUF_T_BOOL: fputs(kv->v.b ? "true" : "false", stdout); break;
    case GGUF_T_STRING: print_str(kv->v.s, 80); break;
    case GGUF_T_ARRAY: {
        const gguf_arr *a = &kv->v.a;
        printf("[");
        for (uint64_t i = 0; i < a->n && i < 8; i++) {
            if (i) printf(", ");
            if (a->type == GGUF_T_STRING) print_str(a->strs[i], 40);
            else if (gguf_arr_is_int(a)) printf("%" PRId64, gguf_arr_int(a, i));
            else printf("%g", gguf_arr_float(a, i));
        }
        printf("%s] (%" PRIu64 " x %s)", a->n > 8 ? ", ..." : "", a->n, gguf_vtype_name(a->type));
        break;
    }
    default: printf("?");
    }
}

static void print_token(const gguf_ctx *g, const char *label, const char *key, uint64_t n_vocab) {
    int32_t id;
    tern_err err = {0};
    printf("  %-16s", label);
    if (gguf_get_token_id(g, key, n_vocab, &id, &err) != TERN_OK) { printf("invalid: %s\n", err.msg); return; }
    if (id < 0) { printf("none\n"); return; }
    gguf_arr toks;
    printf("%d", id);
    if (gguf_get_arr(g, "tokenizer.ggml.tokens", false, &toks, &err) == TERN_OK && toks.type == GGUF_T_STRING && (uint64_t)id < toks.n) {
        printf(" ");
        print_str(toks.strs[id], 40);
    }
    printf("\n");
}

static void print_tokenizer(const gguf_ctx *g) {
    tern_err err = {0};
    gguf_str s;
    gguf_arr a;
    printf("\ntokenizer\n");
    const int valid = gguf_check_tokenizer(g, &err);
    if (valid != TERN_OK) printf("  INVALID: %s\n", err.msg);
    tern_err_clear(&err);
    printf("  %-16s", "model");
    if (gguf_get_str(g, "tokenizer.ggml.model", false, &s, &err) == TERN_OK && s.n) print_str(s, 40); else printf("(absent)");
    printf("\n  %-16s", "pre");
    tern_err_clear(&err);
    if (gguf_get_str(g, "tokenizer.ggml.pre", false, &s, &err) == TERN_OK && s.n) print_str(s, 40); else printf("(absent)");
    tern_err_clear(&err);
    uint64_t n_vocab = 0;
    if (gguf_get_arr(g, "tokenizer.ggml.tokens", false, &a, &err) == TERN_OK) n_vocab = a.n;
    tern_err_clear(&err);
    printf("\n  %-16s%" PRIu64 "\n", "tokens", n_vocab);
    uint64_t n_merges = 0;
    if (gguf_get_arr(g, "tokenizer.ggml.merges", false, &a, &err) == TERN_OK) n_merges = a.n;
    tern_err_clear(&err);
    printf("  %-16s%" PRIu64 "\n", "merges", n_merges);
    print_token(g, "bos", "tokenizer.ggml.bos_token_id", n_vocab);
    print_token(g, "eos", "tokenizer.ggml.eos_token_id", n_vocab);
    print_token(g, "pad", "tokenizer.ggml.padding_token_id", n_vocab);
    bool add_bos = false;
    if (gguf_get_bool(g, "tokenizer.ggml.add_bos_token", false, false, &add_bos, &err) == TERN_OK && gguf_find_kv(g, "tokenizer.ggml.add_bos_token"))
        printf("  %-16s%s\n", "add_bos", add_bos ? "true" : "false");
    tern_err_clear(&err);
    printf("  %-16s", "chat template");
    if (gguf_get_str(g, "tokenizer.chat_template", false, &s, &err) == TERN_OK && gguf_find_kv(g, "tokenizer.chat_template"))
        printf("present (%" PRIu64 " bytes)\n", s.n);
    else
        printf("absent\n");
}

static void print_hadamard(const gguf_ctx *g) {
    tern_err err = {0};
    printf("\nhadamard rotation (prism.hadamard.*)\n");
    if (!gguf_find_kv(g, "prism.hadamard.version")) { printf("  none (weights are used directly)\n"); return; }
    static const char *const scalar[] = {"version", "block_size", "transform", "axis", "sign_mode", "gdn_v_grouped", "tied_output"};
    char key[96];
    for (size_t i = 0; i < sizeof scalar / sizeof scalar[0]; i++) {
        snprintf(key, sizeof key, "prism.hadamard.%s", scalar[i]);
        const gguf_kv *kv = gguf_find_kv(g, key);
        printf("  %-22s", scalar[i]);
        if (kv) print_value(kv); else printf("(absent)");
        printf("\n");
    }
    gguf_arr a;
    printf("  %-22s", "sign_widths");
    if (gguf_get_arr(g, "prism.hadamard.sign_widths", false, &a, &err) == TERN_OK && a.n && gguf_arr_is_int(&a)) {
        int64_t sum = 0;
        for (uint64_t i = 0; i < a.n; i++) { printf("%s%" PRId64, i ? ", " : "", gguf_arr_int(&a, i)); sum += gguf_arr_int(&a, i); }
        printf(" (sum %" PRId64 ")\n", sum);
    } else {
        printf("(absent or not integers)\n");
    }
    tern_err_clear(&err);
    static const char *const counts[] = {"sign_values", "weight_names", "inverse_weight_names"};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        snprintf(key, sizeof key, "prism.hadamard.%s", counts[i]);
        printf("  %-22s", counts[i]);
        if (gguf_get_arr(g, key, false, &a, &err) == TERN_OK && gguf_find_kv(g, key)) {
            printf("%" PRIu64 " x %s", a.n, gguf_vtype_name(a.type));
            if (a.type == GGUF_T_STRING && a.n && a.n <= 4) {
                printf(": ");
                for (uint64_t k = 0; k < a.n; k++) { if (k) printf(", "); print_str(a.strs[k], 40); }
            }
            printf("\n");
        } else {
            printf("(absent)\n");
        }
        tern_err_clear(&err);
    }
}

static const char *type_label(const gguf_tensor *t) {
    if (t->file_type == QT_Q2_0 && t->type == QT_PQ2_0) return "PQ2_0(42)";   /* legacy group-128 id 42 */
    const qt_traits *tr = qt_get(t->type);
    return tr ? tr->name : "?";
}

enum { INFO_BW = 1, INFO_POS, INFO_NO_TENSORS, INFO_MODEL };
static const opt_def info_defs[] = {
    {INFO_MODEL, "-m, --model", OPT_PATH, "FILE", 0, 0, NULL, "the GGUF FILE (the same as giving it alone; llama.cpp's habit)"},
    {INFO_BW, "--bw", OPT_FLOAT, "GB/s", 0.001, 1e6, NULL,
     "memory bandwidth for the decode ceiling (default 30: an example, not a\n"
     "                          measurement; measure yours with `tern bench-kernel`)"},
    {INFO_POS, "--pos", OPT_INT, "N", 0, 2147483647.0, NULL, "position of the decoded token for the KV cache read (default 0)"},
    {INFO_NO_TENSORS, "--no-tensors", OPT_FLAG, NULL, 0, 0, NULL, "omit the tensor table"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: tern info FILE [--bw GB/s] [--pos N] [--no-tensors]   (or -m FILE)\n");
    opts_help(f, &OPT_TABLE(info_defs), 1);
}

int cmd_info(int argc, char **argv) {
    const char *path = NULL;
    double bw = 30.0;
    bool bw_given = false, tensors = true;
    long long pos = 0;
    const opt_table tab = OPT_TABLE(info_defs);
    for (int i = 1; i < argc; i++) {
        opt_val v;
        const int id = opts_next("info", &tab, 1, argc, argv, &i, &v);
        if (id == OPT_HELP) { usage(stdout); return 0; }
        if (id == OPT_ERR) return 2;
        if (id == INFO_BW) { bw = v.f; bw_given = true; }
        else if (id == INFO_POS) pos = v.i;
        else if (id == INFO_NO_TENSORS) tensors = false;
        else if (path) {   /* a second FILE, positional or -m */
            fprintf(stderr, "tern info: unexpected argument '%s' (one FILE only); see tern info --help\n", v.str);
            return 2;
        } else path = v.str;
    }
    if (!path) {
        fprintf(stderr, "tern info: a GGUF FILE is required; see tern info --help\n");
        return 2;
    }

    gguf_ctx *g;
    tern_err err = {0};
    if (gguf_open(&g, path, GGUF_LOAD_MMAP, &err) != TERN_OK) {
        fprintf(stderr, "tern info: %s\n", err.msg);
        return 1;
    }
    gguf_budget b;
    if (gguf_budget_compute(g, pos, &b, &err) != TERN_OK) {
        fprintf(stderr, "tern info: %s: %s\n", path, err.msg);
        gguf_close(g);
        return 1;
    }
    char n1[32], n2[32];
    printf("file            %s\n", path);
    printf("size            %s bytes (GGUF v%u, %" PRIu64 " keys, %" PRIu64 " tensors, alignment %" PRIu64 ")\n",
           group(g->size, n1), g->version, g->n_kv, g->n_tensors, g->alignment);
    printf("header          %s bytes (metadata and tensor infos, padded)\n", group(g->data_offset, n1));
    printf("tensor data     %s bytes\n", group(b.data_bytes, n1));

    printf("\narchitecture    %s\n", b.arch[0] ? b.arch : "(general.architecture absent)");
    gguf_str name;
    if (gguf_get_str(g, "general.name", false, &name, &err) == TERN_OK && name.n) { printf("name            "); print_str(name, 80); printf("\n"); }
    tern_err_clear(&err);
    printf("\nhyperparameters\n");
    const size_t al = strlen(b.arch);
    int n_hp = 0;
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const gguf_kv *kv = &g->kv[i];
        if (!al || strncmp(kv->key, b.arch, al) != 0 || kv->key[al] != '.') continue;
        printf("  %-44s ", kv->key);
        print_value(kv);
        printf("\n");
        n_hp++;
    }
    if (!n_hp) printf("  (none)\n");

    print_tokenizer(g);
    print_hadamard(g);

    if (tensors) {
        printf("\ntensors\n  %-40s %-9s %-28s %15s\n", "name", "type", "shape (ne)", "bytes");
        for (uint64_t i = 0; i < g->n_tensors; i++) {
            const gguf_tensor *t = &g->tensors[i];
            char shape[96];
            int o = snprintf(shape, sizeof shape, "[");
            for (int d = 0; d < t->n_dims; d++) o += snprintf(shape + o, sizeof shape - (size_t)o, "%s%" PRId64, d ? ", " : "", t->ne[d]);
            snprintf(shape + o, sizeof shape - (size_t)o, "]");
            printf("  %-40s %-9s %-28s %15s\n", t->name, type_label(t), shape, group(t->nbytes, n1));
        }
    }

    printf("\ntotals by type\n");
    for (int k = 0; k < b.n_types; k++) {
        const qt_traits *tr = qt_get(b.by_type[k].type);
        printf("  %-8s %5" PRIu64 " tensors %20s params %20s bytes\n", tr ? tr->name : "?", b.by_type[k].n_tensors,
               group(b.by_type[k].n_params, n1), group(b.by_type[k].bytes, n2));
    }
    printf("  %-8s %5" PRIu64 " tensors %20s params %20s bytes\n", "all", b.n_tensors, group(b.n_params, n1), group(b.tensor_bytes, n2));
    if (b.n_params >= 1000000000ull) printf("\nparameters      %s (%.2f B)\n", group(b.n_params, n1), (double)b.n_params / 1e9);
    else printf("\nparameters      %s (%.6g M)\n", group(b.n_params, n1), (double)b.n_params / 1e6);

    if (g->n_tensors == 0) {   /* a tokenizer-only file (ggml-vocab-*.gguf): no model to decode with */
        printf("\nper-token bytes: none (no tensors: a vocabulary-only GGUF, which tern tokenize reads but "
               "run cannot)\n");
        gguf_close(g);
        return 0;
    }
    printf("\nper-token bytes (what must cross the memory bus per decoded token; docs/ARCHITECTURE.md, the load)\n");
    if (b.tied_embd)
        printf("  weights         %18s  every tensor as stored; token_embd tied: read once, as the LM head\n", group(b.weight_bytes, n1));
    else
        printf("  weights         %18s  every tensor as stored; token_embd lookup-only: one row (%s bytes)\n",
               group(b.weight_bytes, n1), group(b.embd_row_bytes, n2));
    if (b.ptq1_0_as_2bit_extra)
        printf("                  %18s  more if PTQ1_0 is transcoded to the 2-bit layout at load\n", group(b.ptq1_0_as_2bit_extra, n1));
    printf("  KV cache        %18s  at --pos %" PRId64 ": %" PRId64 " positions x %s bytes (f16; %" PRId64 " attention layers x %" PRId64 " kv heads x (%" PRId64 " + %" PRId64 "))\n",
           group(b.kv_bytes, n1), b.pos, b.pos + 1, group(b.kv_bytes_per_pos, n2), b.n_attn_layers, b.n_head_kv, b.key_length, b.value_length);
    if (b.n_gdn_layers > 0) {
        printf("  recurrent state %18s  read + written: 2 x %" PRId64 " GDN layers x %" PRId64 " heads x %" PRId64 " x %" PRId64 " x 4 bytes\n",
               group(b.rstate_bytes, n1), b.n_gdn_layers, b.ssm_n_heads, b.ssm_d_state, b.ssm_d_state);
        printf("  conv state      %18s  read + written: 2 x %" PRId64 " layers x %" PRId64 " taps x %" PRId64 " channels x 4 bytes\n",
               group(b.conv_bytes, n1), b.n_gdn_layers, b.ssm_d_conv - 1, b.ssm_conv_channels);
    }
    printf("  total           %18s  (%.4f GB)\n", group(b.total_bytes, n1), (double)b.total_bytes / 1e9);
    const double tps = b.total_bytes ? bw * 1e9 / (double)b.total_bytes : 0.0;
    printf("\ndecode ceiling  %.2f tokens/s at %g GB/s%s\n", tps, bw,
           bw_given ? "" : " (an example bandwidth, not a measurement: pass --bw with your measured GB/s)");
    gguf_close(g);
    return 0;
}
