/* tokenize.c: `tern tokenize`: the token ids and pieces of a text, as llama.cpp's llama-tokenize
 * prints them, and --detokenize: the text of a list of ids.
 *
 * Output (stdout; notices and errors on stderr):
 *   default      one line per token, "%6d -> 'PIECE'" (llama-tokenize's format); PIECE is the
 *                token's bytes with control-token text shown (BOS is '<s>'); a piece that is not
 *                valid UTF-8 on its own (a byte token, half a character) is written with each
 *                byte as \xNN, so stdout stays valid UTF-8 and nothing is hidden
 *   --ids        one Python-style list, "[1, 2, 3]" (llama-tokenize --ids)
 *   --pieces     one line per token, "'PIECE'" (the default without the ids)
 *   --show-count a last line "Total number of tokens: N" (llama-tokenize --show-count)
 *   --detokenize the text of the ids (-p "1 2 3", -p "[1, 2, 3]", or -f FILE of such ids), then a
 *                newline: the streaming detokeniser's text (control tokens give no text; a
 *                leading BOS drops the SentencePiece space of the next piece; invalid UTF-8
 *                becomes U+FFFD); with --parse-special a control token shows its text
 *                (<|im_end|>), the inverse of tokenising with --parse-special
 * BOS is added when the vocabulary asks for it (add_bos), unless --no-bos; control-token text
 * (<|im_start|>) becomes control tokens only with --parse-special (llama-tokenize parses it by
 * default: tern keeps `tern run`'s default, user text stays text).
 * Exit status: 0; 2 a usage error (flags, a -p id list that does not parse or holds an id outside
 * the vocabulary); 1 a runtime error (the model, the file, an id list in a file that does not
 * parse or holds an id outside the vocabulary). Only the GGUF's header is read (its weights are
 * mapped, never touched) and only its tokenizer.* keys are used, so a vocabulary-only GGUF works
 * as a model does and a 27B file costs what its header does. */
#include "cli.h"
#include "format/gguf.h"
#include "model_opts.h"
#include "tern.h"
#include "tokenizer/tok.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TK_PROMPT = 1, TK_FILE, TK_IDS, TK_PIECES, TK_PARSE_SPECIAL, TK_NO_BOS, TK_SHOW_COUNT, TK_DETOKENIZE };
static const opt_def tk_defs[] = {
    {TK_PROMPT, "-p, --prompt", OPT_TEXT, "TEXT", 0, 0, NULL, "text to tokenise (--detokenize: the ids, \"1 2 3\" or \"[1, 2, 3]\")"},
    {TK_FILE, "-f, --file", OPT_PATH, "PATH", 0, 0, NULL, "read the text (or the ids) from a file"},
    {TK_IDS, "--ids", OPT_FLAG, NULL, 0, 0, NULL, "print only the ids, as a list [1, 2, 3]"},
    {TK_PIECES, "--pieces", OPT_FLAG, NULL, 0, 0, NULL, "print only the pieces, one 'PIECE' per line"},
    {TK_PARSE_SPECIAL, "--parse-special", OPT_FLAG, NULL, 0, 0, NULL, "control-token text (<|im_start|>) becomes control tokens\n"
     "                          (--detokenize: control tokens show their text)"},
    {TK_NO_BOS, "--no-bos", OPT_FLAG, NULL, 0, 0, NULL, "do not add BOS (added by default when the vocabulary asks for it)"},
    {TK_SHOW_COUNT, "--show-count", OPT_FLAG, NULL, 0, 0, NULL, "print \"Total number of tokens: N\" last"},
    {TK_DETOKENIZE, "--detokenize", OPT_FLAG, NULL, 0, 0, NULL, "read token ids and print their text"},
};

static void tk_usage(FILE *f, const opt_table *t, int n_t) {
    fprintf(f, "usage: tern tokenize -m MODEL (-p TEXT | -f FILE) [--ids | --pieces] [--show-count]\n"
               "       tern tokenize -m MODEL --detokenize (-p IDS | -f FILE)\n"
               "Prints one \"%%6d -> 'PIECE'\" line per token, as llama-tokenize (control tokens as their\n"
               "text, bytes that are not valid UTF-8 as \\xNN). Exit 2: usage, and ids out of the vocabulary\n"
               "given with -p; 1: model or file errors, and such ids read from -f.\n");
    opts_help(f, t, n_t);
}

/* Write a piece between quotes: valid UTF-8 as is, each byte of an invalid part as \xNN. */
static void tk_put_piece(const char *p, size_t n) {
    size_t i = 0;
    while (i < n) {
        const size_t ok = tern_utf8_valid_len(p + i, n - i);
        fwrite(p + i, 1, ok, stdout);
        i += ok;
        if (i < n) printf("\\x%02x", (unsigned)(unsigned char)p[i++]);
    }
}


/* The text of ids through the streaming detokeniser, then a newline; special: a control token
 * writes its text (after the bytes held back before it, which it cuts off). Returns 0, or 1 on a
 * failure; an id past the vocabulary returns bad_id (2 for ids given as -p, a usage error as -l's
 * ids; 1 for a file's, a runtime error as perplexity --tokens'). */
static int tk_detokenize(const tok_vocab *v, const int32_t *ids, int n, const char *what, bool special, int bad_id) {
    const int32_t n_vocab = tok_n_vocab(v);
    for (int i = 0; i < n; i++)
        if (ids[i] >= n_vocab) {
            fprintf(stderr, "tern tokenize: %s: id %d at index %d: expected an id in 0..%d (the model's vocabulary)\n",
                    what, (int)ids[i], i, (int)n_vocab - 1);
            return bad_id;
        }
    tok_stream dt;
    tok_stream_init(&dt);
    int cap = 1024;
    char *out = malloc((size_t)cap);
    for (int i = 0; out && i < n; i++) {
        /* tok_stream_put needs at most 3 x (piece bytes + 3); a control piece fits too */
        char one[1];
        const int need = 3 * (tok_piece(v, ids[i], true, one, 0) + 3);
        if (need > cap) {
            free(out);
            out = malloc((size_t)(cap = need));
            if (!out) break;
        }
        const int nb = tok_stream_put(v, &dt, ids[i], out, cap);
        if (nb < 0) {
            fprintf(stderr, "tern tokenize: %s: id %d at index %d: %s\n", what, (int)ids[i], i, tern_strerror(nb));
            free(out);
            return 1;
        }
        fwrite(out, 1, (size_t)nb, stdout);
        const int n_special = special && tok_piece(v, ids[i], false, one, 0) == 0
                                  ? tok_piece(v, ids[i], true, out, cap) : 0;
        if (n_special > 0 && n_special <= cap) {   /* the piece fits: cap >= 3 x (its bytes + 3) */
            char held[8];
            const int nh = tok_stream_flush(&dt, held, sizeof held);
            if (nh > 0) fwrite(held, 1, (size_t)nh, stdout);
            fwrite(out, 1, (size_t)n_special, stdout);
        }
    }
    if (!out) { fprintf(stderr, "tern tokenize: out of memory\n"); return 1; }
    const int nb = tok_stream_flush(&dt, out, cap);
    if (nb > 0) fwrite(out, 1, (size_t)nb, stdout);
    fputc('\n', stdout);
    free(out);
    return 0;
}

/* The vocabulary of the GGUF at path: its header (mapped) and tokenizer.* keys, no weights. */
static int tk_load_vocab(const char *path, tok_vocab **v, tern_err *err) {
    if (!opts_model_input_ok("-m", path, err->msg, sizeof err->msg)) return err->code = TERN_E_IO;
    gguf_ctx *g = NULL;
    int rc = gguf_open(&g, path, GGUF_LOAD_MMAP, err);
    if (rc == TERN_OK) {
        rc = tok_load(v, g, err);   /* copies what it needs */
        if (rc) {
            char m[sizeof err->msg];
            snprintf(m, sizeof m, "%s", err->msg);
            tern_err_set(err, rc, "%s: %s", path, m);
        }
    }
    gguf_close(g);
    return rc;
}

/* The tokens of text: ids and pieces in the chosen form. Returns 0 or 1. */
static int tk_tokenize(const tok_vocab *v, const char *text, size_t len, bool add_bos, bool parse_special, bool ids_only,
                       bool pieces_only, bool show_count, tern_err *err) {
    int n = 0;
    if (tok_encode(v, text ? text : "", len, parse_special, add_bos, NULL, 0, &n, err) && err->code != TERN_E_RANGE) return 1;
    err->code = TERN_OK;
    int32_t *ids = malloc(((size_t)n + 1) * sizeof *ids);
    if (!ids) { fprintf(stderr, "tern tokenize: out of memory\n"); return 1; }
    if (tok_encode(v, text ? text : "", len, parse_special, add_bos, ids, n, &n, err)) { free(ids); return 1; }
    char small[256];
    if (ids_only) {
        putchar('[');
        for (int i = 0; i < n; i++) printf(i ? ", %d" : "%d", (int)ids[i]);
        printf("]\n");
    } else {
        for (int i = 0; i < n; i++) {
            const int k = tok_piece(v, ids[i], true, small, (int)sizeof small);
            char *piece = small;
            if (k > (int)sizeof small) {
                piece = malloc((size_t)k);
                if (!piece) { free(ids); fprintf(stderr, "tern tokenize: out of memory\n"); return 1; }
                tok_piece(v, ids[i], true, piece, k);
            }
            if (!pieces_only) printf("%6d -> ", (int)ids[i]);
            putchar('\'');
            tk_put_piece(piece, k > 0 ? (size_t)k : 0);
            printf("'\n");
            if (piece != small) free(piece);
        }
    }
    if (show_count) printf("Total number of tokens: %d\n", n);
    free(ids);
    return 0;
}

int cmd_tokenize(int argc, char **argv) {
    opts_common oc;
    opts_common_default(&oc);
    const char *prompt = NULL, *path = NULL, *ids_flag = NULL;
    bool ids_only = false, pieces_only = false, parse_special = false, no_bos = false, show_count = false, detok = false;
    const opt_table tabs[] = {opts_tab_model, OPT_TABLE(tk_defs)};
    const int n_tabs = (int)(sizeof tabs / sizeof tabs[0]);
    for (int i = 1; i < argc; i++) {
        opt_val v;
        const int id = opts_next("tokenize", tabs, n_tabs, argc, argv, &i, &v);
        if (id == OPT_HELP) { tk_usage(stdout, tabs, n_tabs); return 0; }
        if (id == OPT_ERR) return 2;
        if (id == OPT_POSITIONAL) return opts_unexpected("tokenize", v.str);
        if (opts_apply_common(&oc, id, &v)) continue;
        switch (id) {
        case TK_PROMPT: prompt = v.str; break;
        case TK_FILE: path = v.str; break;
        case TK_IDS: ids_only = true; ids_flag = ids_flag ? ids_flag : "--ids"; break;
        case TK_PIECES: pieces_only = true; ids_flag = ids_flag ? ids_flag : "--pieces"; break;
        case TK_PARSE_SPECIAL: parse_special = true; break;
        case TK_NO_BOS: no_bos = true; break;
        case TK_SHOW_COUNT: show_count = true; break;
        case TK_DETOKENIZE: detok = true; break;
        default: break;
        }
    }
    if (!oc.model) { fprintf(stderr, "tern tokenize: -m MODEL is required; see tern tokenize --help\n"); return 2; }
    if (!prompt == !path) {   /* one input: never drop one of the two silently */
        fprintf(stderr, "tern tokenize: need exactly one of -p TEXT or -f FILE%s; see tern tokenize --help\n",
                prompt ? " (both given)" : "");
        return 2;
    }
    if (ids_only && pieces_only) {
        fprintf(stderr, "tern tokenize: --ids and --pieces choose different outputs; use one of them; see tern tokenize --help\n");
        return 2;
    }
    if (detok && (ids_flag || show_count || no_bos)) {
        fprintf(stderr, "tern tokenize: %s: not used with --detokenize (it prints text); see tern tokenize --help\n",
                ids_flag ? ids_flag : show_count ? "--show-count" : "--no-bos");
        return 2;
    }
    int32_t *ids = NULL;
    int n_ids = 0;
    if (detok && prompt && opts_parse_ids("-p", prompt, &ids, &n_ids)) return 2;   /* argv: checked before loading */
    char *text = NULL;
    size_t len = prompt ? strlen(prompt) : 0;
    char what[1100];
    snprintf(what, sizeof what, "-f %s", path ? path : "");
    if (path && opts_read_input("-f", path, &text, &len)) { free(ids); return 1; }
    if (detok && path && memchr(text, '\0', len)) {   /* the ids after it would be dropped unseen */
        fprintf(stderr, "tern tokenize: %s: a NUL byte at offset %zu of %zu, expected token ids as text\n", what,
                (size_t)((const char *)memchr(text, '\0', len) - text), len);
        free(text);
        free(ids);
        return 1;
    }
    if (detok && path && opts_parse_ids(what, text, &ids, &n_ids)) { free(text); return 1; }
    if (!path) text = NULL;
    if (!detok) opts_warn_utf8("tokenize", path ? path : "the text (-p)", path ? text : prompt, len, false);

    tern_err err = {0};
    tok_vocab *voc = NULL;
    int status = 1;
    if (tk_load_vocab(oc.model, &voc, &err)) goto done;
    if (detok) status = tk_detokenize(voc, ids, n_ids, path ? what : "-p", parse_special, path ? 1 : 2);
    else status = tk_tokenize(voc, path ? text : prompt, len, tok_add_bos(voc) && !no_bos, parse_special, ids_only,
                              pieces_only, show_count, &err);
done:
    if (status && err.code) fprintf(stderr, "tern tokenize: %s\n", err.msg[0] ? err.msg : tern_strerror(err.code));
    free(ids);
    free(text);
    tok_free(voc);
    return status;
}
