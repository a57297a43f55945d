/* spec_opts.h: the speculative-decoding flags shared by `tern run`, `tern chat` and `tern
 * bench-spec`: --spec lookup, --draft-max N, --spec-ngram-min N, --spec-ngram-max N (llama.cpp's
 * --draft-max meaning: most tokens drafted per verification), and the stats line. */
#ifndef TERN_TOOLS_SPEC_OPTS_H
#define TERN_TOOLS_SPEC_OPTS_H

#include "tern.h"

#include <stdio.h>

typedef struct spec_opts {
    bool on;                 /* --spec lookup given */
    tern_spec_params p;
} spec_opts;

void spec_opts_default(spec_opts *o);
/* Try to parse argv[*i] (and its value) as a speculative-decoding option. Returns 1 if consumed
 * (advancing *i past the value), 0 if not one, -1 on a bad value (message printed, naming the
 * option, the value and what is expected). */
int spec_opts_parse(spec_opts *o, int argc, char **argv, int *i);
void spec_opts_usage(FILE *f);
/* "speculative: D drafted, A accepted (R%), S verifications, T tokens (X per forward)"; t_gen:
 * generation seconds (tokens/s when > 0). */
void spec_opts_print_stats(FILE *f, const tern_spec_stats *st, double t_gen);

#endif /* TERN_TOOLS_SPEC_OPTS_H */
