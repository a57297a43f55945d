/* bench.c: `tern bench`: llama-bench-style prompt-processing (ppN) and text-generation (tgN)
 * speeds, mean +- stddev over -r repeats after one warm-up, per thread count. tg is also given
 * as a fraction of the decode ceiling = memory bandwidth measured in the same run (tern_membw)
 * / decode byte budget (bytes_per_token, DESIGN.md "Performance model"). Tokens are random ids
 * from a fixed seed; each test starts from an empty context (as llama-bench). */
#include "cli.h"
#include "tern.h"
#include "model_opts.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void bench_usage(FILE *f) {
    fprintf(f,
            "usage: tern bench -m MODEL [-p 64,512] [-n 128] [-t 1,2] [-r 5] [--json] [options]\n"
            "  -p LIST                 prompt lengths (pp tests; 0 or empty = none)\n"
            "  -n LIST                 generation lengths (tg tests; 0 = none)\n"
            "  -t LIST                 thread counts\n"
            "  -r N                    repeats (default 5)\n"
            "  --json                  one JSON object per line instead of the markdown table\n"
            "  --profile               per-op time profile of each test (kernels, norms, attention, barriers)\n"
            "  -b N, --numerics M, --cache-type T, --mmap   as `tern run`\n");
}

static int parse_list(const char *opt, const char *s, int *out, int max, int *n) {
    *n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        const long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v > 1 << 20 || *n == max) {
            fprintf(stderr, "tern bench: %s '%s': expected a comma-separated list of integers\n", opt, s);
            return -1;
        }
        if (v > 0) out[(*n)++] = (int)v;
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') { fprintf(stderr, "tern bench: %s '%s': bad list\n", opt, s); return -1; }
    }
    return 0;
}

static void stats(const double *v, int n, double *mean, double *sd) {
    double s = 0, q = 0;
    for (int i = 0; i < n; i++) s += v[i];
    *mean = s / n;
    for (int i = 0; i < n; i++) q += (v[i] - *mean) * (v[i] - *mean);
    *sd = n > 1 ? sqrt(q / (n - 1)) : 0;
}

int cmd_bench(int argc, char **argv) {
    opts_common oc;
    opts_common_default(&oc);
    oc.no_progress = true;
    int pp[16] = {64, 512}, n_pp = 2, tg[16] = {128}, n_tg = 1, th[16] = {1, 2}, n_th = 2, reps = 5;
    bool json = false, profile = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if ((!strcmp(a, "-t") || !strcmp(a, "--threads")) && i + 1 < argc) {
            if (parse_list(a, argv[++i], th, 16, &n_th)) return 2;
            continue;
        }
        const int r = opts_parse_common(&oc, argc, argv, &i);
        if (r < 0) return 2;
        if (r > 0) continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { bench_usage(stdout); return 0; }
        else if ((!strcmp(a, "-p") || !strcmp(a, "--n-prompt")) && i + 1 < argc) {
            if (parse_list(a, argv[++i], pp, 16, &n_pp)) return 2;
        } else if ((!strcmp(a, "-n") || !strcmp(a, "--n-gen")) && i + 1 < argc) {
            if (parse_list(a, argv[++i], tg, 16, &n_tg)) return 2;
        } else if ((!strcmp(a, "-r") || !strcmp(a, "--repetitions")) && i + 1 < argc) {
            if (opts_int(a, argv[++i], 1, 1000, &reps)) return 2;
        } else if (!strcmp(a, "--profile")) {
            profile = true;
        } else if (!strcmp(a, "--json") || !strcmp(a, "-o")) {
            json = true;
            if (!strcmp(a, "-o") && i + 1 < argc) i++;
        } else {
            fprintf(stderr, "tern bench: unknown or incomplete option '%s'\n", a);
            bench_usage(stderr);
            return 2;
        }
    }
    if (!oc.model) { fprintf(stderr, "tern bench: -m MODEL is required\n"); bench_usage(stderr); return 2; }
    if (n_th == 0) { th[0] = 0; n_th = 1; }
    int max_len = 1;
    for (int i = 0; i < n_pp; i++) max_len = pp[i] > max_len ? pp[i] : max_len;
    for (int i = 0; i < n_tg; i++) max_len = tg[i] > max_len ? tg[i] : max_len;
    oc.n_ctx = max_len;
    if (oc.n_batch > max_len) oc.n_batch = max_len;

    int status = 1;
    tern_err err = {0};
    int32_t *ids = malloc((size_t)max_len * sizeof *ids);
    double *tv = malloc((size_t)reps * sizeof *tv);
    if (!ids || !tv) { fprintf(stderr, "tern bench: out of memory\n"); goto out; }
    if (!json) {
        printf("| model | size | arch | isa | numerics | threads | test | t/s | bw GB/s | %% of ceiling |\n");
        printf("| --- | ---: | --- | --- | --- | ---: | ---: | ---: | ---: | ---: |\n");
    }
    for (int it = 0; it < n_th; it++) {
        tern_model *m = NULL;
        tern_session *s = NULL;
        oc.n_threads = th[it];
        if (opts_load(&oc, &m, &s, &err)) {
            fprintf(stderr, "tern bench: %s: %s\n", tern_strerror(err.code), err.msg);
            goto out;
        }
        tern_model_info info;
        tern_model_get_info(m, &info);
        uint64_t rng = 0x9e3779b97f4a7c15ull;
        for (int i = 0; i < max_len; i++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            ids[i] = (int32_t)((rng >> 33) % (uint64_t)info.n_vocab);
        }
        double bw = 0;
        if (tern_membw(info.n_threads, (size_t)512 << 20, 3, &bw, &err)) {
            fprintf(stderr, "tern bench: bandwidth probe: %s\n", err.msg);
            bw = 0;
            err.code = TERN_OK;
        }
        const double ceil_tps = info.bytes_per_token ? bw * 1e9 / (double)info.bytes_per_token : 0;
        const char *base = strrchr(oc.model, '/') ? strrchr(oc.model, '/') + 1 : oc.model;
        for (int kind = 0; kind < 2; kind++) {
            const int nl = kind == 0 ? n_pp : n_tg;
            for (int li = 0; li < nl; li++) {
                const int len = kind == 0 ? pp[li] : tg[li];
                for (int r = -1; r < reps; r++) {           /* r = -1: warm-up */
                    if (r == 0 && profile) tern_profile_enable(true);
                    tern_session_reset(s);
                    const double t0 = now_s();
                    if (kind == 0) {
                        if (!tern_session_eval(s, ids, len, &err)) goto fail;
                    } else {
                        for (int k = 0; k < len; k++)
                            if (!tern_session_eval(s, &ids[k], 1, &err)) goto fail;
                    }
                    const double dt = now_s() - t0;
                    if (r >= 0) tv[r] = len / dt;
                }
                double mean, sd;
                stats(tv, reps, &mean, &sd);
                tern_profile prof;
                tern_profile_get(&prof);
                tern_profile_enable(false);
                const double frac = kind == 1 && ceil_tps > 0 ? mean / ceil_tps : NAN;
                char test[32];
                snprintf(test, sizeof test, "%s%d", kind == 0 ? "pp" : "tg", len);
                if (json) {
                    printf("{\"model\": \"%s\", \"arch\": \"%s\", \"size_bytes\": %llu, \"isa\": \"%s\", "
                           "\"numerics\": \"%s\", \"test\": \"%s\", \"threads\": %d, \"n_batch\": %d, \"reps\": %d, "
                           "\"t_s\": %.4f, \"t_s_stddev\": %.4f, \"bw_gbytes_per_s\": %.3f, \"bytes_per_token\": %llu, "
                           "\"ceiling_t_s\": %.4f, \"frac_of_ceiling\": ",
                           base, info.arch, (unsigned long long)info.weight_bytes, info.isa,
                           opts_numerics_name(oc.numerics), test, info.n_threads, oc.n_batch, reps, mean, sd, bw,
                           (unsigned long long)info.bytes_per_token, kind == 1 ? ceil_tps : 0.0);
                    if (isnan(frac)) printf("null}\n");
                    else printf("%.4f}\n", frac);
                } else {
                    char pct[32] = "-";
                    if (!isnan(frac)) snprintf(pct, sizeof pct, "%.1f%%", 100 * frac);
                    printf("| %s | %.1f MB | %s | %s | %s | %d | %s | %.2f ± %.2f | %.1f | %s |\n", base,
                           (double)info.weight_bytes / 1e6, info.arch, info.isa, opts_numerics_name(oc.numerics),
                           info.n_threads, test, mean, sd, bw, pct);
                }
                if (profile && prof.total_s > 0) {
                    const double T = prof.total_s, nt = info.n_threads;
                    const double wait = prof.matmul_s * nt - prof.matmul_busy_s;
                    const double other = T - prof.embed_s - prof.norm_s - prof.quant_s - prof.matmul_s - prof.attn_s -
                                         prof.swiglu_s;
                    printf("%sprofile %s t=%d: %.3f s in %ld forwards: matmul %.1f%% (of which barrier wait + imbalance "
                           "%.1f%%), attention %.1f%%, norms/rope/kv-store/residual %.1f%%, quantise %.1f%%, "
                           "swiglu %.1f%%, embed %.1f%%, other %.1f%%\n",
                           json ? "# " : "", test, info.n_threads, T, prof.n_forward, 100 * prof.matmul_s / T,
                           100 * wait / nt / T, 100 * prof.attn_s / T, 100 * prof.norm_s / T, 100 * prof.quant_s / T,
                           100 * prof.swiglu_s / T, 100 * prof.embed_s / T, 100 * other / T);
                }
                fflush(stdout);
            }
        }
        tern_session_free(s);
        tern_model_free(m);
        continue;
    fail:
        fprintf(stderr, "tern bench: %s: %s\n", tern_strerror(err.code), err.msg);
        tern_session_free(s);
        tern_model_free(m);
        goto out;
    }
    if (!json)
        printf("\ntg %% of ceiling: tg t/s / (bandwidth / decode bytes per token), bandwidth measured in the same run\n");
    status = 0;
out:
    free(ids);
    free(tv);
    return status;
}
