/* model_opts.h: command-line options shared by `tern run`, `tern bench` and `tern perplexity`
 * (model, threads, context, batch, numerics, mmap, KV cache type, sampling flags with
 * llama.cpp's names). */
#ifndef TERN_TOOLS_MODEL_OPTS_H
#define TERN_TOOLS_MODEL_OPTS_H

#include "tern.h"

#include <stdio.h>

typedef struct opts_common {
    const char *model;       /* -m */
    int n_threads;           /* -t (0 = all cores) */
    int n_ctx;               /* -c (4096) */
    int n_batch;             /* -b (512) */
    tern_numerics numerics;  /* --numerics fast|ggml|f32 */
    bool use_mmap;           /* --mmap */
    bool kv_f32;             /* --cache-type f32 */
    bool no_progress;        /* --no-progress */
} opts_common;

void opts_common_default(opts_common *o);
/* Try to parse argv[*i] (and its value) as a common option. Returns 1 if consumed (advancing *i
 * past the value), 0 if not a common option, -1 on a bad value (message printed). */
int opts_parse_common(opts_common *o, int argc, char **argv, int *i);
/* Same for --temp --top-k --top-p --min-p --repeat-penalty --repeat-last-n --seed. */
int opts_parse_sampling(tern_sampler_params *p, int argc, char **argv, int *i);
void opts_usage_common(FILE *f);
void opts_usage_sampling(FILE *f);
/* Parse an int in [lo, hi]; prints a message naming opt and returns -1 when invalid. */
int opts_int(const char *opt, const char *s, long lo, long hi, int *out);
const char *opts_numerics_name(tern_numerics n);
/* Load the model and (when s != NULL) a session from the options. */
int opts_load(const opts_common *o, tern_model **m, tern_session **s, tern_err *err);
/* Read a whole file (NUL-terminated, caller frees). Prints a message and returns -1 on failure. */
int opts_read_file(const char *path, char **out, size_t *len);

#endif /* TERN_TOOLS_MODEL_OPTS_H */
