/* spec_opts.c: speculative-decoding command-line flags (see spec_opts.h). */
#include "spec_opts.h"

#include "model_opts.h"

#include <string.h>

void spec_opts_default(spec_opts *o) {
    memset(o, 0, sizeof *o);
    tern_spec_params_default(&o->p);
}

int spec_opts_parse(spec_opts *o, int argc, char **argv, int *i) {
    const char *a = argv[*i];
    const bool is_spec = !strcmp(a, "--spec"), is_dmax = !strcmp(a, "--draft-max") || !strcmp(a, "--draft");
    const bool is_nmin = !strcmp(a, "--spec-ngram-min"), is_nmax = !strcmp(a, "--spec-ngram-max");
    if (!is_spec && !is_dmax && !is_nmin && !is_nmax) return 0;
    if (*i + 1 >= argc) {
        fprintf(stderr, "tern: %s needs a value\n", a);
        return -1;
    }
    const char *v = argv[++*i];
    if (is_spec) {
        if (!strcmp(v, "lookup")) o->on = true;
        else if (!strcmp(v, "none")) o->on = false;
        else {
            fprintf(stderr, "tern: --spec '%s': expected lookup or none\n", v);
            return -1;
        }
        return 1;
    }
    if (is_dmax) return opts_int(a, v, 1, TERN_SPEC_DRAFT_LIMIT, &o->p.draft_max) ? -1 : 1;
    if (is_nmin) return opts_int(a, v, 1, 16, &o->p.ngram_min) ? -1 : 1;
    return opts_int(a, v, 1, 16, &o->p.ngram_max) ? -1 : 1;
}

void spec_opts_usage(FILE *f) {
    fprintf(f,
            "  --spec lookup           speculative decoding with prompt lookup (n-gram drafts from the\n"
            "                          context; greedy output identical to plain decoding)\n"
            "  --draft-max N           most tokens drafted per verification, 1..%d (default 8)\n"
            "  --spec-ngram-min N      shortest n-gram matched (default 2)\n"
            "  --spec-ngram-max N      longest n-gram matched (default 4)\n",
            TERN_SPEC_DRAFT_LIMIT);
}

void spec_opts_print_stats(FILE *f, const tern_spec_stats *st, double t_gen) {
    fprintf(f, "speculative: %lld drafted, %lld accepted (acceptance %.1f%%), %lld verifications, %lld tokens "
               "(%.2f per forward)",
            (long long)st->n_drafted, (long long)st->n_accepted,
            st->n_drafted ? 100.0 * (double)st->n_accepted / (double)st->n_drafted : 0.0, (long long)st->n_steps,
            (long long)st->n_tokens, st->n_steps ? (double)st->n_tokens / (double)st->n_steps : 0.0);
    if (t_gen > 0) fprintf(f, ", %.2f tokens/s", (double)st->n_tokens / t_gen);
    fputc('\n', f);
}
