/* model_opts.h: command-line options shared by `tern run`, `tern bench` and `tern perplexity`
 * (model, threads, context, batch, numerics, mmap, KV cache type, sampling flags with
 * llama.cpp's names), as opts.h tables. */
#ifndef TERN_TOOLS_MODEL_OPTS_H
#define TERN_TOOLS_MODEL_OPTS_H

#include "tern.h"
#include "opts.h"

#include <stdio.h>

typedef struct opts_common {
    const char *model;       /* -m */
    int n_threads;           /* -t (0 = the CPUs this process may run on) */
    int n_ctx;               /* -c; 0 (the default): 4096, or the model's trained context if shorter */
    bool ctx_given;          /* -c was given (opts_apply_common) */
    int ctx_need;            /* most positions the command can use (0: open-ended): without -c, the cap
                              * at the trained context is announced only when it can matter */
    int n_batch;             /* -b (512) */
    tern_numerics numerics;  /* --numerics fast|ggml|f32 */
    bool use_mmap;           /* --mmap */
    int mmap_flag;           /* which of --mmap (1) / --no-mmap (2) was given: both is a usage error */
    bool kv_f32;             /* --cache-type f32 */
    bool no_progress;        /* --no-progress */
} opts_common;

void opts_common_default(opts_common *o);

/* Option tables (opts.h) shared by the model programs; a command lists the ones it takes, in the
 * order its help shows them. Ids 1000..1199 are theirs. */
enum {
    OPTS_MODEL = 1000, OPTS_THREADS, OPTS_CTX, OPTS_BATCH, OPTS_NUMERICS, OPTS_CACHE_TYPE, OPTS_MMAP, OPTS_NO_MMAP,
    OPTS_NO_PROGRESS,
    OPTS_TEMP = 1100, OPTS_TOP_K, OPTS_TOP_P, OPTS_MIN_P, OPTS_REPEAT_PENALTY, OPTS_REPEAT_LAST_N, OPTS_SEED,
    OPTS_LOGIT_BIAS,
};
extern const opt_table opts_tab_model;     /* -m, --model PATH */
extern const opt_table opts_tab_threads;   /* -t, --threads N (1..opts_max_threads()) */
extern const opt_table opts_tab_ctx;       /* -c, --ctx-size N (1..2^24) */
extern const opt_table opts_tab_load;      /* -b, --numerics, --cache-type, --mmap, --no-mmap, --no-progress */
extern const opt_table opts_tab_sampling;  /* --temp --top-k --top-p --min-p --repeat-penalty --repeat-last-n --seed -l */
/* Store a parsed value of one of the tables above; returns false if id is none of theirs. */
bool opts_apply_common(opts_common *o, int id, const opt_val *v);
/* The context of a session of m. n_ctx 0 (no -c): 4096, capped at the model's trained context
 * when that is shorter (stories260K: 2048), as llama-server caps a slot's context, with a one-line
 * notice unless need (> 0: the most positions the command can use) fits under the cap. An -c given (given = true) past the trained context is kept, with a one-line warning
 * (llama.cpp's "possible training context overflow"). Notices go to stderr as "tern CMD: ...". */
int opts_ctx_resolve(const tern_model *m, int n_ctx, bool given, int need);
/* Sampling flags: the sampler's parameters and llama.cpp's repeatable -l TOKEN_ID(+|-)BIAS. */
#define OPTS_BIAS_MAX 256
typedef struct opts_sampling {
    tern_sampler_params p;
    int n_bias;                       /* -l given this many times (stored: the first OPTS_BIAS_MAX) */
    int32_t bias_id[OPTS_BIAS_MAX];
    float bias[OPTS_BIAS_MAX];
} opts_sampling;
void opts_sampling_default(opts_sampling *s);
bool opts_apply_sampling(opts_sampling *s, int id, const opt_val *v);
/* After parsing: false (with the error printed, a usage error) for more than OPTS_BIAS_MAX -l. */
bool opts_sampling_check(const opts_sampling *s);
/* After the load: TERN_OK, or TERN_E_ARG naming the flag for a -l token id outside m's
 * vocabulary (a usage error: the callers exit 2, as for a malformed -l). */
int opts_bias_check(const opts_sampling *s, const tern_model *m, tern_err *err);
/* The sampler of s for session se of m: repeat_last_n -1 becomes the context, the -l biases are
 * applied (checked by opts_bias_check first). */
int opts_sampler_init(const opts_sampling *s, const tern_model *m, const tern_session *se, tern_sampler **out,
                      tern_err *err);
const char *opts_numerics_name(tern_numerics n);
/* The model options the environment sets for every program: TERN_MEM_AVAILABLE (bytes the memory
 * checks assume available) and TERN_PTQ1_0 (auto | transcode | direct). TERN_E_ARG naming the
 * variable when a value is malformed. */
int opts_env_model(tern_model_opts *mo, tern_err *err);
/* TERN_ISA=NAME forces the kernel path for the whole process (tests, benchmarks, a CPU whose
 * fastest path should be avoided). A name tern_set_isa does not know on any architecture is
 * TERN_E_ARG naming the variable, the value and the accepted names; a known path this build or
 * CPU cannot run is a warning on stderr giving the library's reason, and the automatic choice stays. */
int opts_env_isa(tern_err *err);
/* The model options of o and the environment (opts_env_model). */
int opts_model_opts(const opts_common *o, tern_model_opts *mo, tern_err *err);
/* Load the model and (when s != NULL) a session from the options and the environment
 * (opts_env_model), its context by opts_ctx_resolve. A model path that cannot be opened is
 * TERN_E_IO "-m: cannot open 'PATH': REASON" (the OS's reason). */
int opts_load(const opts_common *o, tern_model **m, tern_session **s, tern_err *err);
/* --chat-template NAME checked before any model loads: NULL (the model's own) or a name the
 * tokenizer knows (chatml, qwen3, qwen35 and its aliases). Prints the usage error naming the
 * flag and returns 2, or returns 0. */
int opts_check_chat_template(const char *cmd, const char *name);
/* With no --chat-template (name NULL) and a model whose file has no tokenizer.chat_template,
 * print once on stderr "tern CMD: warning: MODEL has no chat template (tokenizer.chat_template);
 * using ChatML (...)", as llama.cpp warns; returns true if it did. */
bool opts_note_chat_template(const char *cmd, const tern_model *m, const char *name);
/* Prompts are bytes: text that is not valid UTF-8 is still tokenised (byte by byte, so the model
 * sees exactly those bytes, as llama.cpp), but the user is told. Prints "tern CMD: warning: WHAT
 * is not valid UTF-8 (first bad byte 0xXX at offset N of M); it is tokenised byte by byte" and
 * then, if shown (the command echoes the text), " and shown with U+FFFD", else " (the model sees
 * those exact bytes)", on stderr; a NUL byte (valid UTF-8, but in no text) gets its own warning
 * with its offset. Returns true if it warned. */
bool opts_warn_utf8(const char *cmd, const char *what, const char *s, size_t n, bool shown);
/* Damaged weights (NaN, Inf) make the logits non-finite, and the generation stops there
 * (TERN_STOP_LOGITS): when g stopped so, print "tern CMD: " + tern_gen_logits_error's message +
 * "; generation stopped there and THEN" on stderr and return true. */
bool opts_warn_bad_logits(const char *cmd, const tern_gen *g, const char *then);
/* Write s[0..n) to f with invalid UTF-8 replaced by U+FFFD (stdout stays valid UTF-8). */
void opts_write_utf8(FILE *f, const char *s, size_t n);

#endif /* TERN_TOOLS_MODEL_OPTS_H */
