/* perplexity.c: `tern perplexity`: perplexity of a model on a text or on token ids.
 * Text mode follows llama-perplexity's conventions (golden/qwen3-tiny-pq2_0/PROVENANCE.md "Perplexity"): the
 * file minus one trailing newline is tokenised whole (BOS added when the vocab adds it, control
 * text not parsed); chunk i is tokens [c*i, c*(i+1)); when the vocab adds BOS the chunk's first
 * token is replaced by BOS; the KV cache is cleared per chunk; only the SECOND HALF of each chunk
 * is scored: positions c/2 .. c-2 predict the next token (c/2 - 1 tokens per chunk). Per token
 * nll = -(l[tok] - max - log(sum_j expf(l[j] - max))) with float logits and the sum in double.
 * --tokens FILE: whitespace-separated ids evaluated as one sequence from its first id; every
 * next-token prediction is scored. stdout holds the results only, in both modes: a first line
 * "perplexity: N tokens, ..." saying what is scored, the running value per chunk (-f), and last
 * `PPL = <value>`; warnings and errors go to stderr. */
#include "cli.h"
#include "tern.h"
#include "model_opts.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PPL_FILE = 1, PPL_TOKENS, PPL_CHUNK, PPL_CHUNKS };
static const opt_def ppl_defs[] = {
    {PPL_FILE, "-f, --file", OPT_PATH, "PATH", 0, 0, NULL,
     "text; scored in non-overlapping chunks of -c tokens, the second half of\n"
     "                          each chunk scored (llama-perplexity's convention)"},
    {PPL_TOKENS, "--tokens", OPT_PATH, "PATH", 0, 0, NULL, "whitespace-separated token ids: one sequence, every prediction scored"},
    {PPL_CHUNK, "-c, --ctx-size", OPT_INT, "N", 2, 1 << 24, NULL, "chunk length (default 512, at least 4 for -f; --tokens: the number of ids)"},
    {PPL_CHUNKS, "--chunks", OPT_INT, "N", 1, 1 << 30, NULL, "at most N chunks (default all)"},
};

static void ppl_usage(FILE *f, const opt_table *t, int n_t) {
    fprintf(f, "usage: tern perplexity -m MODEL (-f TEXT | --tokens FILE) [options]\n");
    opts_help(f, t, n_t);
}

/* Index of the first logit of l[0..n) that is NaN or infinite, or -1 if all are finite. */
static int first_nonfinite(const float *l, int n) {
    for (int i = 0; i < n; i++)
        if (!isfinite(l[i])) return i;
    return -1;
}

/* A non-finite logit (NaN weights, an overflow) would make the result `nan` with exit 0: an error
 * naming where it first happened (what: "chunk 2, position 40" or "position 7"). Returns 1. */
static int nonfinite_error(const char *what, const float *l, int n_vocab) {
    const int k = first_nonfinite(l, n_vocab);
    fprintf(stderr, "tern perplexity: the logits at %s are not finite (logit %d of %d is %s); expected finite "
                    "logits: the model's weights may be damaged (NaN or Inf)\n", what, k, n_vocab,
            isnan(l[k]) ? "NaN" : l[k] > 0 ? "+Inf" : "-Inf");
    return 1;
}

/* -log p(tok) from float logits as llama-perplexity's log_softmax. */
static double nll_of(const float *l, int n_vocab, int tok) {
    float mx = l[0];
    for (int i = 1; i < n_vocab; i++) mx = l[i] > mx ? l[i] : mx;
    double sum = 0.0;
    for (int i = 0; i < n_vocab; i++) sum += expf(l[i] - mx);
    return -((double)(l[tok] - mx) - log(sum));
}

static int read_ids(const char *path, int32_t **out, int *n) {
    char *txt;
    size_t len;
    if (opts_read_input("--tokens", path, &txt, &len)) return -1;
    const char *nul = memchr(txt, '\0', len);
    if (nul) {   /* the ids after it would be dropped unseen */
        fprintf(stderr, "tern perplexity: --tokens %s: a NUL byte at offset %zu of %zu, expected token ids as text\n", path,
                (size_t)(nul - txt), len);
        free(txt);
        return -1;
    }
    char what[4200];
    snprintf(what, sizeof what, "--tokens %s", path);
    const int rc = opts_parse_ids(what, txt, out, n);
    free(txt);
    return rc;
}

int cmd_perplexity(int argc, char **argv) {
    opts_common oc;
    opts_common_default(&oc);
    oc.n_ctx = 0;
    const char *text_path = NULL, *tok_path = NULL;
    int max_chunks = -1;
    /* -c's minimum is 4 with -f (a chunk scores its second half: at least 2 predictions), 2 with
     * --tokens: the parser's own message states the one that applies */
    opt_def defs[sizeof ppl_defs / sizeof ppl_defs[0]];
    memcpy(defs, ppl_defs, sizeof defs);
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-f") || !strcmp(argv[i], "--file") || !strncmp(argv[i], "--file=", 7))
            defs[PPL_CHUNK - 1].lo = 4;
    const opt_table tabs[] = {opts_tab_model, OPT_TABLE(defs), opts_tab_threads, opts_tab_load};
    const int n_tabs = (int)(sizeof tabs / sizeof tabs[0]);
    for (int i = 1; i < argc; i++) {
        opt_val v;
        const int id = opts_next("perplexity", tabs, n_tabs, argc, argv, &i, &v);
        if (id == OPT_HELP) { ppl_usage(stdout, tabs, n_tabs); return 0; }
        if (id == OPT_ERR) return 2;
        if (id == OPT_POSITIONAL) return opts_unexpected("perplexity", v.str);
        if (opts_apply_common(&oc, id, &v)) continue;
        switch (id) {
        case PPL_FILE: text_path = v.str; break;
        case PPL_TOKENS: tok_path = v.str; break;
        case PPL_CHUNK: oc.n_ctx = (int)v.i; break;
        case PPL_CHUNKS: max_chunks = (int)v.i; break;
        default: break;
        }
    }
    if (!oc.model || (!text_path) == (!tok_path)) {
        fprintf(stderr, "tern perplexity: need -m MODEL and exactly one of -f TEXT or --tokens FILE; see tern perplexity --help\n");
        return 2;
    }
    if (tok_path && max_chunks > 0)   /* the ids are one sequence, scored whole: there are no chunks to count */
        fprintf(stderr, "tern perplexity: warning: --chunks has no effect with --tokens (the ids are one sequence, "
                        "every next token scored)\n");
    int32_t *ids = NULL;
    int n_ids = 0;
    if (tok_path && read_ids(tok_path, &ids, &n_ids)) return 1;
    const int c = oc.n_ctx > 0 ? oc.n_ctx : (tok_path ? (n_ids > 0 ? n_ids : 1) : 512);
    oc.n_ctx = c;
    if (oc.n_batch > c) oc.n_batch = c;

    int status = 1;
    tern_err err = {0};
    tern_model *m = NULL;
    tern_session *s = NULL;
    float *logits = NULL;
    char *txt = NULL;
    size_t len = 0;
    /* the text first: a missing or unreadable file is said before a model's load, not after it */
    if (!tok_path && opts_read_input("-f", text_path, &txt, &len)) goto done;
    if (opts_load(&oc, &m, &s, &err)) goto done;
    tern_model_info info;
    tern_model_get_info(m, &info);
    const int V = info.n_vocab;
    fprintf(stderr, "tern perplexity: %s (%s), %s, %d thread%s, numerics %s\n", oc.model, info.arch, info.isa,
            info.n_threads, info.n_threads == 1 ? "" : "s", opts_numerics_name(oc.numerics));
    /* as tern run's -c warning (opts_ctx_resolve), for the positions evaluated: with --tokens the
     * ids, which -c only bounds */
    if (info.n_ctx_train > 0 && (tok_path ? n_ids : c) > info.n_ctx_train) {
        if (tok_path)
            fprintf(stderr, "tern perplexity: warning: the %d ids (one sequence) are longer than the model's trained context "
                            "(%d tokens); predictions past position %d may degrade\n", n_ids, info.n_ctx_train, info.n_ctx_train);
        else
            fprintf(stderr, "tern perplexity: warning: -c %d is longer than the model's trained context (%d tokens); "
                            "predictions past position %d of each chunk may degrade\n", c, info.n_ctx_train, info.n_ctx_train);
    }
    double nll = 0.0, nll2 = 0.0;   /* sums of -log p and of its square over the scored predictions */
    long count = 0;

    if (tok_path) {
        if (n_ids < 2) {
            fprintf(stderr, "tern perplexity: --tokens %s: %d id%s, expected at least 2\n", tok_path, n_ids, n_ids == 1 ? "" : "s");
            goto done;
        }
        if (n_ids > c) {
            fprintf(stderr, "tern perplexity: --tokens %s: %d ids, expected at most the context of %d (-c)\n", tok_path, n_ids, c);
            goto done;
        }
        /* every id, including the last (only ever a prediction target, never evaluated), must
         * index the logits: check them all here */
        for (int i = 0; i < n_ids; i++)
            if (ids[i] < 0 || ids[i] >= V) {
                fprintf(stderr, "tern perplexity: --tokens %s: id %d at index %d: expected an id in 0..%d (the model's vocabulary)\n",
                        tok_path, (int)ids[i], i, V - 1);
                goto done;
            }
        const int nb = oc.n_batch;
        logits = malloc((size_t)nb * (size_t)V * sizeof(float));
        if (!logits) { fprintf(stderr, "tern perplexity: out of memory\n"); goto done; }
        for (int i0 = 0; i0 < n_ids - 1; i0 += nb) {
            const int n = n_ids - 1 - i0 < nb ? n_ids - 1 - i0 : nb;
            if (tern_session_eval_all(s, ids + i0, n, logits, &err)) goto done;
            for (int j = 0; j < n; j++) {
                if (first_nonfinite(logits + (size_t)j * V, V) >= 0) {
                    char what[1100];
                    snprintf(what, sizeof what, "position %d of the ids in %s", i0 + j, tok_path);
                    status = nonfinite_error(what, logits + (size_t)j * V, V);
                    goto done;
                }
                const double l = nll_of(logits + (size_t)j * V, V, ids[i0 + j + 1]);
                nll += l;
                nll2 += l * l;
                count++;
            }
        }
        printf("perplexity: %d token%s, %ld prediction%s scored (every next token)\n", n_ids, n_ids == 1 ? "" : "s", count,
               count == 1 ? "" : "s");
    } else {
        if (len > 0 && txt[len - 1] == '\n') len--;
        opts_warn_utf8("perplexity", text_path, txt, len, false);
        if (len > (size_t)INT32_MAX) { fprintf(stderr, "tern perplexity: text too large\n"); goto done; }
        int n_tok = 0;
        tern_tokenize(m, txt, len, info.add_bos, false, NULL, 0, &n_tok, &err);
        err.code = TERN_OK;
        ids = malloc(((size_t)n_tok + 1) * sizeof *ids);
        if (!ids) { fprintf(stderr, "tern perplexity: out of memory\n"); goto done; }
        if (tern_tokenize(m, txt, len, info.add_bos, false, ids, n_tok, &n_tok, &err)) goto done;
        int n_chunk = n_tok / c;
        if (max_chunks > 0 && max_chunks < n_chunk) n_chunk = max_chunks;
        if (n_chunk < 1 || c < 4) {
            char what[128];
            const int n_bos = info.add_bos && n_tok > 0 ? 1 : 0;
            if (len == 0)
                snprintf(what, sizeof what, "empty (%d token%s%s)", n_tok, n_tok == 1 ? "" : "s", n_bos ? ": the BOS only" : "");
            else snprintf(what, sizeof what, "too short: %d token%s", n_tok, n_tok == 1 ? "" : "s");
            fprintf(stderr, "tern perplexity: -f %s: the text is %s, expected at least %d (one chunk of -c %d; "
                            "a smaller -c, at least 4, scores a shorter text)\n", text_path, what, c, c);
            goto done;
        }
        const int first = c / 2;
        logits = malloc((size_t)(c - first) * (size_t)V * sizeof(float));
        if (!logits) { fprintf(stderr, "tern perplexity: out of memory\n"); goto done; }
        printf("perplexity: %d token%s, %d chunk%s of %d, scoring positions %d..%d of each chunk\n", n_tok,
               n_tok == 1 ? "" : "s", n_chunk, n_chunk == 1 ? "" : "s", c, first, c - 2);
        int32_t *chunk = malloc((size_t)c * sizeof *chunk);
        if (!chunk) goto done;
        for (int ic = 0; ic < n_chunk; ic++) {
            memcpy(chunk, ids + (size_t)ic * c, (size_t)c * sizeof *chunk);
            if (info.add_bos && info.bos >= 0) chunk[0] = info.bos;
            tern_session_reset(s);
            /* first half without logits, second half with (bit-identical to one batch) */
            if (!tern_session_eval(s, chunk, first, &err) ||
                tern_session_eval_all(s, chunk + first, c - first, logits, &err)) {
                free(chunk);
                goto done;
            }
            for (int j = first; j < c - 1; j++) {
                if (first_nonfinite(logits + (size_t)(j - first) * V, V) >= 0) {
                    char what[128];
                    snprintf(what, sizeof what, "chunk %d, position %d (token %ld of the text)", ic + 1, j, (long)ic * c + j);
                    printf("\n");
                    free(chunk);
                    status = nonfinite_error(what, logits + (size_t)(j - first) * V, V);
                    goto done;
                }
                const double l = nll_of(logits + (size_t)(j - first) * V, V, ids[(size_t)ic * c + j + 1]);
                nll += l;
                nll2 += l * l;
                count++;
            }
            printf("[%d]%.4f,", ic + 1, exp(nll / (double)count));
            fflush(stdout);
        }
        free(chunk);
        printf("\n");
    }
    const double ppl = exp(nll / (double)count);
    if (!isfinite(ppl)) {   /* finite logits whose log-softmax still overflowed (a logit near FLT_MAX) */
        fprintf(stderr, "tern perplexity: the perplexity is not finite (mean -log p = %g over %ld prediction%s); "
                        "expected a finite value: the logits are out of range\n", nll / (double)count, count,
                count == 1 ? "" : "s");
        goto done;
    }
    /* The standard error, as llama-perplexity prints it: PPL = exp(mean nll), so by the delta method
     * SE(PPL) ~= PPL * SE(mean nll) = PPL * sqrt(var(nll) / (n - 1)), var(nll) = mean(nll^2) -
     * mean(nll)^2 over the n scored predictions (treated as independent: an estimate). */
    if (count >= 2) {
        const double mean = nll / (double)count, var = nll2 / (double)count - mean * mean;
        printf("PPL = %.6f +/- %.6f\n", ppl, ppl * sqrt(var > 0 ? var / (double)(count - 1) : 0.0));
    } else {
        printf("PPL = %.6f\n", ppl);   /* one prediction: no spread to estimate */
    }
    status = 0;
done:
    if (status && err.code) fprintf(stderr, "tern perplexity: %s\n", err.msg[0] ? err.msg : tern_strerror(err.code));
    free(logits);
    free(ids);
    free(txt);
    tern_session_free(s);
    tern_model_free(m);
    return status;
}
