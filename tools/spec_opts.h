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
} spec_opts;

/* Ids 1200..1209 are this table's. */
enum { SPEC_OPT_SPEC = 1200, SPEC_OPT_DRAFT_MAX, SPEC_OPT_NGRAM_MIN, SPEC_OPT_NGRAM_MAX };
extern const opt_table spec_opts_tab;

void spec_opts_default(spec_opts *o);
/* Store a parsed value of spec_opts_tab; returns false if id is not one of its options. */
bool spec_opts_apply(spec_opts *o, int id, const opt_val *v);
/* "speculative: D drafted, A accepted (acceptance R%), S verifications, T tokens (X per
 * forward)" and ", N tokens/s" when t_gen (generation seconds) > 0. */
void spec_opts_print_stats(FILE *f, const tern_spec_stats *st, double t_gen);

#endif /* TERN_TOOLS_SPEC_OPTS_H */
