/* model_opts.c: shared option parsing for the model programs (see model_opts.h). */
#include "model_opts.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void opts_common_default(opts_common *o) {
    memset(o, 0, sizeof *o);
    o->n_ctx = 4096;
    o->n_batch = 512;
    o->numerics = TERN_NUMERICS_FAST;
}

int opts_int(const char *opt, const char *s, long lo, long hi, int *out) {
    char *end;
    errno = 0;
    const long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "tern: %s '%s': expected an integer in %ld..%ld\n", opt, s, lo, hi);
        return -1;
    }
    *out = (int)v;
    return 0;
}

static int opts_float(const char *opt, const char *s, double lo, double hi, float *out) {
    char *end;
    errno = 0;
    const double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) {
        fprintf(stderr, "tern: %s '%s': expected a number in %g..%g\n", opt, s, lo, hi);
        return -1;
    }
    *out = (float)v;
    return 0;
}

const char *opts_numerics_name(tern_numerics n) {
    return n == TERN_NUMERICS_GGML ? "ggml" : n == TERN_NUMERICS_F32 ? "f32" : "fast";
}

int opts_parse_common(opts_common *o, int argc, char **argv, int *i) {
    const char *a = argv[*i];
    const bool has = *i + 1 < argc;
    const char *v = has ? argv[*i + 1] : NULL;
    if (!strcmp(a, "--mmap")) { o->use_mmap = true; return 1; }
    if (!strcmp(a, "--no-mmap")) { o->use_mmap = false; return 1; }
    if (!strcmp(a, "--no-progress")) { o->no_progress = true; return 1; }
    if (!has) return 0;
    int r = 0;
    if (!strcmp(a, "-m") || !strcmp(a, "--model")) o->model = v;
    else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) r = opts_int(a, v, 0, 1024, &o->n_threads);
    else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) r = opts_int(a, v, 1, 1 << 24, &o->n_ctx);
    else if (!strcmp(a, "-b") || !strcmp(a, "--batch-size")) r = opts_int(a, v, 1, 1 << 16, &o->n_batch);
    else if (!strcmp(a, "--numerics")) {
        if (!strcmp(v, "fast")) o->numerics = TERN_NUMERICS_FAST;
        else if (!strcmp(v, "ggml")) o->numerics = TERN_NUMERICS_GGML;
        else if (!strcmp(v, "f32")) o->numerics = TERN_NUMERICS_F32;
        else { fprintf(stderr, "tern: --numerics '%s': expected fast, ggml or f32\n", v); return -1; }
    } else if (!strcmp(a, "--cache-type") || !strcmp(a, "-ctk")) {
        if (!strcmp(v, "f16")) o->kv_f32 = false;
        else if (!strcmp(v, "f32")) o->kv_f32 = true;
        else { fprintf(stderr, "tern: --cache-type '%s': expected f16 or f32\n", v); return -1; }
    } else return 0;
    if (r) return -1;
    (*i)++;
    return 1;
}

int opts_parse_sampling(tern_sampler_params *p, int argc, char **argv, int *i) {
    const char *a = argv[*i];
    if (*i + 1 >= argc) return 0;
    const char *v = argv[*i + 1];
    int r = 0;
    if (!strcmp(a, "--temp")) r = opts_float(a, v, 0, 1e6, &p->temp);
    else if (!strcmp(a, "--top-k")) r = opts_int(a, v, -1, 1 << 30, &p->top_k);
    else if (!strcmp(a, "--top-p")) r = opts_float(a, v, 0, 1, &p->top_p);
    else if (!strcmp(a, "--min-p")) r = opts_float(a, v, 0, 1, &p->min_p);
    else if (!strcmp(a, "--repeat-penalty")) r = opts_float(a, v, 0, 1e6, &p->repeat_penalty);
    else if (!strcmp(a, "--repeat-last-n")) r = opts_int(a, v, -1, 1 << 24, &p->repeat_last_n);
    else if (!strcmp(a, "--seed") || !strcmp(a, "-s")) {
        char *end;
        errno = 0;
        const unsigned long long s = strtoull(v, &end, 10);
        if (errno || end == v || *end) { fprintf(stderr, "tern: --seed '%s': expected an unsigned integer\n", v); return -1; }
        p->seed = (uint64_t)s;
    } else return 0;
    if (r) return -1;
    (*i)++;
    return 1;
}

void opts_usage_common(FILE *f) {
    fprintf(f,
            "  -t, --threads N         threads (default: all cores)\n"
            "  -c, --ctx-size N        context length (default 4096)\n"
            "  -b, --batch-size N      prompt tokens per forward pass (default 512)\n"
            "  --numerics M            fast (default) | ggml (reference Q8_0 rounding) | f32 (dequantised)\n"
            "  --cache-type T          KV cache f16 (default) | f32\n"
            "  --mmap                  map the file instead of reading it into memory\n"
            "  --no-progress           no load progress bar\n");
}

void opts_usage_sampling(FILE *f) {
    fprintf(f,
            "sampling (llama.cpp order: repeat penalty -> top-k -> top-p -> min-p -> temperature):\n"
            "  --temp T (0.8; 0 = greedy)  --top-k N (40)  --top-p P (0.95)  --min-p P (0.05)\n"
            "  --repeat-penalty F (1.0 = off)  --repeat-last-n N (64)  --seed N (random)\n");
}

int opts_load(const opts_common *o, tern_model **m, tern_session **s, tern_err *err) {
    *m = NULL;
    if (s) *s = NULL;
    tern_model_opts mo;
    tern_model_opts_default(&mo);
    mo.n_threads = o->n_threads;
    mo.use_mmap = o->use_mmap;
    mo.numerics = o->numerics;
    mo.progress = !o->no_progress;
    int rc = tern_model_load(m, o->model, &mo, err);
    if (rc || !s) return rc;
    tern_session_opts so;
    tern_session_opts_default(&so);
    so.n_ctx = o->n_ctx;
    so.n_batch = o->n_batch;
    so.kv_f32 = o->kv_f32;
    rc = tern_session_init(s, *m, &so, err);
    if (rc) { tern_model_free(*m); *m = NULL; }
    return rc;
}

int opts_read_file(const char *path, char **out, size_t *len) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "tern: cannot open '%s'\n", path); return -1; }
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap + 1);
    while (b) {
        const size_t got = fread(b + n, 1, cap - n, f);
        n += got;
        if (n < cap) break;
        cap *= 2;
        char *nb = realloc(b, cap + 1);
        if (!nb) { free(b); b = NULL; }
        else b = nb;
    }
    const int bad = ferror(f);
    fclose(f);
    if (!b || bad) { free(b); fprintf(stderr, "tern: cannot read '%s'\n", path); return -1; }
    b[n] = 0;
    *out = b;
    *len = n;
    return 0;
}
