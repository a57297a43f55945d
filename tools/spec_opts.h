/* spec_opts.h: the speculative-decoding flags shared by `tern run`, `tern chat` and `tern
 * bench-spec`, as an opts.h table: --spec lookup|none, --draft-max N (llama.cpp's meaning: most
 * tokens drafted per verification), --spec-ngram-min N, --spec-ngram-max N; and the stats line. */
#ifndef TERN_TOOLS_SPEC_OPTS_H
#define TERN_TOOLS_SPEC_OPTS_H

#include "tern.h"
#include "opts.h"

#include <stdio.h>

typedef struct spec_opts {
    bool on;                 /* --spec lookup given */
    tern_spec_params p;
    bool min_given, max_given;   /* --spec-ngram-min / --spec-ngram-max given */
    const char *tuning;      /* the first of --draft-max, --spec-ngram-min, --spec-ngram-max given, or NULL */
} spec_opts;

/* Ids 1200..1209 are this table's. */
enum { SPEC_OPT_SPEC = 1200, SPEC_OPT_DRAFT_MAX, SPEC_OPT_NGRAM_MIN, SPEC_OPT_NGRAM_MAX };
extern const opt_table spec_opts_tab;
/* The same without --spec: the tuning flags only, for bench-spec (it always compares lookup
 * speculation with plain decoding, so --spec has no choice to make there). */
extern const opt_table spec_opts_tab_tuning;

void spec_opts_default(spec_opts *o);
/* Store a parsed value of spec_opts_tab; returns false if id is not one of its options. */
bool spec_opts_apply(spec_opts *o, int id, const opt_val *v);
/* The rules between the flags, after parsing, for commands that decode with --spec lookup (run,
 * chat, serve): --spec-ngram-min must not exceed --spec-ngram-max (the flag given is blamed, in
 * the parser's form and with its exit status: "tern run: --spec-ngram-max: expected an integer in
 * 4..16 (at least --spec-ngram-min), got '2'", returns 2); a tuning flag without --spec lookup
 * is accepted with a warning that it does nothing (as llama-server takes --draft-max without a
 * draft model; tern says so). Returns 0 when the options are usable. */
int spec_opts_check(const spec_opts *o);
/* "speculative: D drafted, A accepted (acceptance R%), S verifications, T tokens (X per
 * forward)" and ", N tokens/s" when t_gen (generation seconds) > 0. */
void spec_opts_print_stats(FILE *f, const tern_spec_stats *st, double t_gen);

#endif /* TERN_TOOLS_SPEC_OPTS_H */
