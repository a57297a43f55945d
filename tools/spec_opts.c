/* spec_opts.c: speculative-decoding command-line flags (see spec_opts.h). */
#include "spec_opts.h"

#include <string.h>

static const opt_def d_spec[] = {
    {SPEC_OPT_SPEC, "--spec", OPT_CHOICE, "KIND", 0, 0, "lookup|none",
     "lookup: speculative decoding with n-gram prompt-lookup drafts\n"
     "                          (greedy output identical to plain decoding) | none (default)"},
    {SPEC_OPT_DRAFT_MAX, "--draft-max, --draft", OPT_INT, "N", 1, TERN_SPEC_DRAFT_LIMIT, NULL,
     "most tokens drafted per verification (default 3)"},
    {SPEC_OPT_NGRAM_MIN, "--spec-ngram-min", OPT_INT, "N", 1, 16, NULL, "shortest n-gram matched (default 2)"},
    {SPEC_OPT_NGRAM_MAX, "--spec-ngram-max", OPT_INT, "N", 1, 16, NULL, "longest n-gram matched (default 4)"},
};
const opt_table spec_opts_tab = {d_spec, (int)(sizeof d_spec / sizeof d_spec[0])};
const opt_table spec_opts_tab_tuning = {d_spec + 1, (int)(sizeof d_spec / sizeof d_spec[0]) - 1};

void spec_opts_default(spec_opts *o) {
    memset(o, 0, sizeof *o);
    tern_spec_params_default(&o->p);
}

bool spec_opts_apply(spec_opts *o, int id, const opt_val *v) {
    switch (id) {
    case SPEC_OPT_SPEC: o->on = v->choice == 0; break;
    case SPEC_OPT_DRAFT_MAX: o->p.draft_max = (int)v->i; break;
    case SPEC_OPT_NGRAM_MIN: o->p.ngram_min = (int)v->i; o->min_given = true; break;
    case SPEC_OPT_NGRAM_MAX: o->p.ngram_max = (int)v->i; o->max_given = true; break;
    default: return false;
    }
    static const char *const names[] = {"--draft-max", "--spec-ngram-min", "--spec-ngram-max"};
    if (id != SPEC_OPT_SPEC && !o->tuning) o->tuning = names[id - SPEC_OPT_DRAFT_MAX];
    return true;
}

int spec_opts_check(const spec_opts *o) {
    const char *cmd = opts_cmd();
    if (o->p.ngram_min > o->p.ngram_max) {
        char exp[96], got[16];
        if (o->max_given) {   /* the upper end given too low */
            snprintf(exp, sizeof exp, "an integer in %d..16 (at least --spec-ngram-min)", o->p.ngram_min);
            snprintf(got, sizeof got, "%d", o->p.ngram_max);
            opts_bad_value(cmd, "--spec-ngram-max", exp, got);
        } else {              /* the lower end given above the default upper end */
            snprintf(exp, sizeof exp, "an integer in 1..%d (at most --spec-ngram-max, default %d)", o->p.ngram_max, o->p.ngram_max);
            snprintf(got, sizeof got, "%d", o->p.ngram_min);
            opts_bad_value(cmd, "--spec-ngram-min", exp, got);
        }
        return 2;
    }
    if (o->tuning && !o->on)
        fprintf(stderr, "tern %s: warning: %s has no effect without --spec lookup (speculative decoding is off)\n", cmd, o->tuning);
    return 0;
}

void spec_opts_print_stats(FILE *f, const tern_spec_stats *st, double t_gen) {
    fprintf(f, "speculative: %lld drafted, %lld accepted (acceptance %.1f%%), %lld verification%s, %lld token%s "
               "(%.2f per forward)",
            (long long)st->n_drafted, (long long)st->n_accepted,
            st->n_drafted ? 100.0 * (double)st->n_accepted / (double)st->n_drafted : 0.0, (long long)st->n_steps,
            st->n_steps == 1 ? "" : "s", (long long)st->n_tokens, st->n_tokens == 1 ? "" : "s",
            st->n_steps ? (double)st->n_tokens / (double)st->n_steps : 0.0);
    if (t_gen > 0) fprintf(f, ", %.2f tokens/s", (double)st->n_tokens / t_gen);
    fputc('\n', f);
}
