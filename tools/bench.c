/* bench.c: `tern bench`: llama-bench-style prompt-processing (ppN) and text-generation (tgN)
 * speeds, mean +- stddev over -r repeats after one warm-up, per thread count. tg is also given
 * as a fraction of the decode ceiling = memory bandwidth measured in the same run (tern_membw)
 * / decode bytes per token (DESIGN.md "Performance model": the model's bytes_per_token, weights
 * and recurrent state, plus the K/V rows a step reads, averaged over the test's positions). Tokens are random ids
 * from a fixed seed; each test starts from an empty context, or with -d N after N tokens already
 * evaluated before each repeat and not timed (llama-bench's -d: "tg128 @ d4096").
 * The bandwidth probe runs with the test's own thread count: BW_PASSES passes after the load, and
 * for a tg test whose bytes per token do not fit in the last-level cache BW_REP_PASSES more right
 * before each repeat, so that a repeat is held to the bandwidth of its own minute (on a shared
 * host the neighbours move it by a third between minutes). A repeat's ceiling is the best of the
 * passes before it; the table gives the median of the repeats' fractions with their range, the
 * bandwidth's best, minimum and median over every pass of the test. A repeat above its ceiling
 * (the probe then read low: the machine was busy while it ran) is left out of the median and
 * counted; a row whose every repeat is above says so instead of a share.
 * --busy-cpu N starts a competing busy-loop process pinned to CPU N for the whole run and stops
 * it at the end: the figure of a busy machine.
 * --interleave loads the model once per thread count, all of them at once, and runs each
 * repeat of a test on every count in turn (the order reversed every other repeat): a shared
 * host's neighbours move single runs by a third or more between seconds, and the rows of one
 * test then see the same seconds, so their ratio (-t 2 over -t 1 beside a competitor) is not
 * that drift. Without it, each count's model is loaded, run through every test and freed in turn.
 * -np N runs each tg test as N sequences decoded in lockstep, one token of each per forward pass
 * (tern_batch_eval, as tern serve batches its slots; llama-batched-bench's S_TG): the row
 * "tgL xN" gives the aggregate t/s (N L tokens over the time of L passes), and its ceiling counts
 * the weights once and the K/V rows of all N sequences per pass. pp tests are one sequence. */
#include "cli.h"
#include "tern.h"
#include "model_opts.h"
#include "bench_share.h"
#include "core/core.h"

#include <math.h>
#include <sched.h>
#include <signal.h>
#ifndef _WIN32
#include <sys/wait.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#define BW_PASSES 7
#define BW_REP_PASSES 5

enum { BENCH_PP = 1, BENCH_TG, BENCH_DEPTH, BENCH_THREADS, BENCH_REPS, BENCH_JSON, BENCH_OUTPUT, BENCH_PROFILE, BENCH_BUSY,
       BENCH_NP, BENCH_INTERLEAVE };
#define BENCH_NP_MAX 64
static const opt_def bench_defs[] = {
    {BENCH_PP, "-p, --n-prompt", OPT_LIST, "LIST", 0, 1 << 20, NULL, "prompt lengths (pp tests; default 64,512; 0 = none)"},
    {BENCH_TG, "-n, --n-gen", OPT_LIST, "LIST", 0, 1 << 20, NULL, "generation lengths (tg tests; default 128; 0 = none)"},
    {BENCH_DEPTH, "-d, --n-depth", OPT_LIST, "LIST", 0, 1 << 20, NULL,
     "context depths: each test runs after this many tokens already in the context (default 0)"},
    {BENCH_THREADS, "-t, --threads", OPT_LIST, "LIST", 1, OPT_HI_THREADS, NULL, "thread counts (default 1,2)"},
    {BENCH_REPS, "-r, --repetitions", OPT_INT, "N", 1, 1000, NULL, "repeats after one warm-up (default 5)"},
    {BENCH_JSON, "--json", OPT_FLAG, NULL, 0, 0, NULL, "one JSON object per line instead of the markdown table"},
    {BENCH_OUTPUT, "-o, --output", OPT_CHOICE, "F", 0, 0, "md|json|jsonl", "md (default) | json (one JSON array of the rows, as llama-bench) | jsonl (as --json)"},
    {BENCH_PROFILE, "--profile", OPT_FLAG, NULL, 0, 0, NULL, "per-op time profile of each test (kernels, norms, attention, barriers)"},
    {BENCH_BUSY, "--busy-cpu", OPT_INT, "N", 0, 1023, NULL,
     "run a competing busy-loop process pinned to CPU N during the whole run (a busy machine)"},
    {BENCH_NP, "-np, --parallel", OPT_LIST, "LIST", 1, BENCH_NP_MAX, NULL,
     "sequences decoded together in each tg test, one token of each per forward pass; t/s is their aggregate (default 1)"},
    {BENCH_INTERLEAVE, "--interleave", OPT_FLAG, NULL, 0, 0, NULL,
     "load the model once per thread count, all at once, and alternate their repeats, so that the rows of one test "
     "see the same seconds of a shared machine (memory: one copy of the model per count)"},
};

/* A child process that spins on CPU `cpu` until killed; -1 if it cannot be started or pinned
 * (always on Windows, which has no fork: --busy-cpu is then refused with that message). */
#ifdef _WIN32
static pid_t busy_start(int cpu) { (void)cpu; return -1; }
static void busy_stop(pid_t pid) { (void)pid; }
#else
static pid_t busy_start(int cpu) {
    cpu_set_t set;
#ifdef __linux__
    CPU_ZERO(&set);                                   /* a CPU outside our mask competes with nothing */
    if (sched_getaffinity(0, sizeof set, &set) == 0 && !CPU_ISSET(cpu, &set)) return -1;
#endif
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
#ifdef __linux__
        /* killed with bench, however bench ends (a signal to bench alone included) */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(3);
#else
        (void)parent;
#endif
        if (sched_setaffinity(0, sizeof set, &set) != 0) _exit(3);
        volatile unsigned long x = 0;
        for (;;) x++;
    }
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);                             /* it has pinned itself, or exited */
    int st;
    if (waitpid(pid, &st, WNOHANG) == pid) return -1;
    return pid;
}

static void busy_stop(pid_t pid) {
    if (pid <= 0) return;
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}
#endif

static void bench_usage(FILE *f, const opt_table *t, int n_t) {
    fprintf(f, "usage: tern bench -m MODEL [-p 64,512] [-n 128] [-d 0] [-t 1,2] [-r 5] [--json] [options]\n");
    opts_help(f, t, n_t);
}

/* Sum of per-repeat profiles (each taken around the timed part only). */
static void prof_add(tern_profile *a, const tern_profile *b) {
    a->total_s += b->total_s;
    a->embed_s += b->embed_s;
    a->norm_s += b->norm_s;
    a->quant_s += b->quant_s;
    a->matmul_s += b->matmul_s;
    a->matmul_busy_s += b->matmul_busy_s;
    a->attn_s += b->attn_s;
    a->swiglu_s += b->swiglu_s;
    a->recur_s += b->recur_s;
    a->n_forward += b->n_forward;
}

/* The positive entries of a parsed list (0 = none). */
static void take_list(const opt_val *v, int *out, int *n) {
    *n = 0;
    for (int k = 0; k < v->n_list; k++)
        if (v->list[k] > 0) out[(*n)++] = v->list[k];
}

/* The model's file name as a JSON string body (json) or a markdown table cell (!json) into out
 * (cap >= 8): JSON escapes '"', '\\' and control characters, markdown escapes '|' (a cell
 * boundary) and writes control characters as '?'; bytes that are not UTF-8 become U+FFFD in both,
 * so every line stays valid UTF-8. Cut at a whole character when out is full. */
static void bench_name(const char *s, bool json, char *out, size_t cap) {
    size_t o = 0;
    for (size_t i = 0; s[i];) {
        char e[8];
        int n;
        const unsigned char c = (unsigned char)s[i];
        const int len = tern_utf8_seq((const unsigned char *)s + i, (int)strnlen(s + i, 4));
        if (len <= 0) {   /* invalid or truncated: U+FFFD for the maximal invalid part */
            n = snprintf(e, sizeof e, "\xef\xbf\xbd");
            i += len < 0 ? (size_t)-len : strlen(s + i);
        } else if (len > 1) {
            memcpy(e, s + i, (size_t)len);
            n = len;
            i += (size_t)len;
        } else {
            if (json && (c == '"' || c == '\\')) n = snprintf(e, sizeof e, "\\%c", c);
            else if (json && c < 0x20) n = snprintf(e, sizeof e, "\\u%04x", c);
            else if (!json && c == '|') n = snprintf(e, sizeof e, "\\|");
            else if (!json && (c < 0x20 || c == 0x7f)) n = snprintf(e, sizeof e, "?");
            else e[0] = (char)c, n = 1;
            i++;
        }
        if (o + (size_t)n + 1 > cap) break;
        memcpy(out + o, e, (size_t)n);
        o += (size_t)n;
    }
    out[o] = 0;
}

static void stats(const double *v, int n, double *mean, double *sd) {
    double s = 0, q = 0;
    for (int i = 0; i < n; i++) s += v[i];
    *mean = s / n;
    for (int i = 0; i < n; i++) q += (v[i] - *mean) * (v[i] - *mean);
    *sd = n > 1 ? sqrt(q / (n - 1)) : 0;
}

/* One thread count's model under test, its sessions (ss[0]: pp tests and one-sequence tg; all
 * max_np of them: -np) and the current test's repeats. */
typedef struct {
    tern_model *m;
    tern_session *ss[BENCH_NP_MAX];
    tern_model_info info;
    float *logits;                  /* -np N: the logits of a lockstep pass, N x n_vocab */
    double bwp[BW_PASSES], bw;      /* the probe after the load (sorted), its best pass */
    bool model_in_cache;
    uint64_t kv_pos, state1;        /* K/V bytes of one position over every layer; one sequence's state */
    double *tv, *fr, *bwall;        /* per repeat: t/s, share of its ceiling; every probe pass of the test */
    int n_bw;
    double bytes, bw_r;             /* the test's bytes per pass (0: no ceiling); the current repeat's ceiling */
    bool in_cache, rep_probe;
    tern_profile prof;
} bench_unit;

/* What every unit of a run shares: the tests, the token ids, the output. */
typedef struct {
    const opts_common *oc;
    const int *pp, *tg, *dep, *np;
    int n_pp, n_tg, n_dep, n_np, reps, max_np;
    bool json, array, profile;
    int busy_cpu;
    int *n_rows;
    const int32_t *ids;
    const char *name;
    unsigned long long llc;
} bench_cfg;

static void unit_free(bench_unit *u, int max_np) {
    for (int q = 0; q < max_np; q++) tern_session_free(u->ss[q]);
    tern_model_free(u->m);
    free(u->logits);
    free(u->tv);
    free(u->fr);
    free(u->bwall);
    memset(u, 0, sizeof *u);
}

/* Load the model at `threads` threads with its sessions, and probe the bandwidth with them. 0 or
 * 1 (the error printed). */
static int unit_load(bench_unit *u, opts_common *oc, int threads, int max_np, int reps) {
    tern_err err = {0};
    memset(u, 0, sizeof *u);
    oc->n_threads = threads;
    u->tv = malloc((size_t)reps * sizeof *u->tv);
    u->fr = malloc((size_t)reps * sizeof *u->fr);
    u->bwall = malloc(((size_t)reps * BW_REP_PASSES + BW_PASSES) * sizeof *u->bwall);
    if (!u->tv || !u->fr || !u->bwall) { fprintf(stderr, "tern bench: out of memory\n"); return 1; }
    if (opts_load(oc, &u->m, &u->ss[0], &err)) {
        fprintf(stderr, "tern bench: %s\n", err.msg[0] ? err.msg : tern_strerror(err.code));
        return 1;
    }
    tern_model_get_info(u->m, &u->info);
    tern_session *const s = u->ss[0];
    if (max_np > 1) {   /* the other sequences of -np: sessions like the first */
        tern_session_opts so;
        tern_session_opts_default(&so);
        so.n_ctx = tern_session_n_ctx(s);
        so.n_batch = tern_session_n_batch(s);
        so.kv_f32 = oc->kv_f32;
        uint64_t kv_one = 0, st_one = 0, avail = 0;
        tern_session_mem(u->m, &so, &kv_one, &st_one, &avail);
        const double need = (double)(max_np - 1) * (double)(kv_one + st_one);
        if (avail > 0 && need > (double)avail) {   /* as tern serve -np: checked before any allocates */
            fprintf(stderr, "tern bench: -np %d: %d more sequences of %d tokens need %.1f MB of caches, %.1f MB are "
                            "available; expected fewer sequences or a shorter test (-n, -d)\n",
                    max_np, max_np - 1, so.n_ctx, need / 1e6, (double)avail / 1e6);
            return 1;
        }
        for (int q = 1; q < max_np; q++)
            if (tern_session_init(&u->ss[q], u->m, &so, &err)) {
                fprintf(stderr, "tern bench: %s\n", err.msg[0] ? err.msg : tern_strerror(err.code));
                return 1;
            }
        u->logits = malloc((size_t)max_np * (size_t)u->info.n_vocab * sizeof *u->logits);
        if (!u->logits) {
            fprintf(stderr, "tern bench: -np %d: out of memory for %d x %d logits\n", max_np, max_np, u->info.n_vocab);
            return 1;
        }
    }
    if (tern_membw_passes(u->info.n_threads, (size_t)512 << 20, BW_PASSES, u->bwp, &err)) {
        fprintf(stderr, "tern bench: bandwidth probe: %s\n", err.msg);
        err.code = TERN_OK;
    }
    qsort(u->bwp, BW_PASSES, sizeof u->bwp[0], bench_cmp_dbl);
    u->bw = u->bwp[BW_PASSES - 1];                    /* best pass: the ceiling */
    /* cache residency of the model's bytes per token, probed once per load; a test's K/V
     * rows can still take it past the cache's size (checked per test) */
    u->model_in_cache = opts_fits_llc(u->info.n_threads, (double)u->info.bytes_per_token, u->bw);
    tern_session_opts so1;
    tern_session_opts_default(&so1);
    so1.n_ctx = 1;
    so1.kv_f32 = oc->kv_f32;
    tern_session_mem(u->m, &so1, &u->kv_pos, &u->state1, NULL);
    return 0;
}

/* One repeat of a test on unit u (r = -1: the warm-up, not recorded). 0 or 1 (err set). */
static int unit_rep(bench_unit *u, const bench_cfg *c, int r, int kind, int len, int depth, int npar, tern_err *err) {
    for (int q = 0; q < npar; q++) {        /* the depth's tokens: not timed */
        tern_session_reset(u->ss[q]);
        if (depth > 0 && !tern_session_eval(u->ss[q], c->ids, depth, err)) return 1;
    }
    u->bw_r = u->bw;
    if (r >= 0 && u->rep_probe) {
        double pr[BW_REP_PASSES] = {0};
        if (tern_membw_passes(u->info.n_threads, (size_t)512 << 20, BW_REP_PASSES, pr, err)) {
            fprintf(stderr, "tern bench: bandwidth probe: %s\n", err->msg);
            err->code = TERN_OK;
        }
        u->bw_r = 0;
        for (int k = 0; k < BW_REP_PASSES; k++) {
            u->bwall[u->n_bw++] = pr[k];
            u->bw_r = pr[k] > u->bw_r ? pr[k] : u->bw_r;
        }
    }
    if (r >= 0 && c->profile) tern_profile_enable(true);
    tern_session *const s = u->ss[0];
    const int32_t *tk = c->ids + depth;
    const double t0 = now_s();
    if (kind == 0) {
        if (!tern_session_eval(s, tk, len, err)) return 1;
    } else if (npar == 1) {
        for (int k = 0; k < len; k++)
            if (!tern_session_eval(s, &tk[k], 1, err)) return 1;
    } else {
        for (int k = 0; k < len; k++) {   /* sequence q reads the ids from its own offset */
            int32_t tq[BENCH_NP_MAX];
            for (int q = 0; q < npar; q++) tq[q] = tk[(k + 7 * q) % len];
            if (tern_batch_eval(u->ss, tq, npar, u->logits, err)) return 1;
        }
    }
    const double dt = now_s() - t0;
    if (r >= 0 && c->profile) {
        tern_profile pr;
        tern_profile_get(&pr);
        tern_profile_enable(false);
        prof_add(&u->prof, &pr);
    }
    if (r >= 0) {
        u->tv[r] = (double)npar * len / dt;
        u->fr[r] = kind == 1 && u->bytes > 0 && u->bw_r > 0 ? u->tv[r] / (npar * u->bw_r * 1e9 / u->bytes) : NAN;
    }
    return 0;
}

/* The row of unit u's finished test (and its profile line). */
static void unit_row(bench_unit *u, const bench_cfg *c, const char *test, int kind, int depth, int npar, double kv_tok) {
    const tern_model_info *info = &u->info;
    const int reps = c->reps;
    double mean, sd;
    stats(u->tv, reps, &mean, &sd);
    qsort(u->bwall, (size_t)u->n_bw, sizeof u->bwall[0], bench_cmp_dbl);
    const double bw_hi = u->bwall[u->n_bw - 1], bw_lo = u->bwall[0], bw_med = u->bwall[u->n_bw / 2];
    const double ceil_tps = kind == 1 && u->bytes > 0 ? npar * bw_hi * 1e9 / u->bytes : 0;
    double frac_raw = NAN, fr_lo = NAN, fr_hi = NAN;
    int n_above = 0;
    if (kind == 1 && u->bytes > 0 && !isnan(u->fr[0])) {   /* bench_share.h: repeats above 1 left out */
        const bench_share sh = bench_share_of(u->fr, reps, u->in_cache);
        frac_raw = sh.med;
        n_above = sh.n_above;
        if (!sh.none) fr_lo = sh.lo, fr_hi = sh.hi;
    }
    const bool above = n_above > 0 && n_above == reps;
    const double frac = above ? NAN : frac_raw;
    if (c->json) {
        char ceil_s[32] = "null";   /* pp rows: no decode ceiling */
        if (ceil_tps > 0) snprintf(ceil_s, sizeof ceil_s, "%.4f", ceil_tps);
        if (c->array) printf(*c->n_rows ? ",\n" : "[\n");
        (*c->n_rows)++;
        printf("{\"model\": \"%s\", \"arch\": \"%s\", \"size_bytes\": %llu, \"isa\": \"%s\", "
               "\"numerics\": \"%s\", \"test\": \"%s\", \"n_depth\": %d, \"n_parallel\": %d, \"threads\": %d, \"n_batch\": %d, \"reps\": %d, "
               "\"t_s\": %.4f, \"t_s_stddev\": %.4f, \"bw_gbytes_per_s\": %.3f, \"bytes_per_token\": %.0f, "
               "\"kv_bytes_per_token\": %.0f, "
               "\"bw_min_gbytes_per_s\": %.3f, \"bw_median_gbytes_per_s\": %.3f, \"bw_passes\": %d, "
               "\"ceiling_t_s\": %s, \"busy_cpu\": %d, \"cache_resident\": %s, ",
               c->name, info->arch, (unsigned long long)info->weight_bytes, info->isa,
               opts_numerics_name(c->oc->numerics), test, depth, npar, info->n_threads, c->oc->n_batch, reps, mean, sd, bw_hi,
               kind == 1 ? u->bytes : (double)info->bytes_per_token, kv_tok, bw_lo, bw_med, u->n_bw, ceil_s, c->busy_cpu,
               u->in_cache ? "true" : "false");
        if (isnan(frac) || u->in_cache) printf("\"frac_of_ceiling\": null");   /* as the table's "-" */
        else printf("\"frac_of_ceiling\": %.4f, \"frac_min\": %.4f, \"frac_max\": %.4f", frac, fr_lo, fr_hi);
        if (above) printf(", \"above_ceiling\": %.4f", frac_raw);
        if (kind == 1 && !u->in_cache && !isnan(frac_raw)) printf(", \"reps_above_ceiling\": %d", n_above);
        printf(c->array ? "}" : "}\n");
    } else {
        char pct[160] = "-";
        if (above)
            snprintf(pct, sizeof pct, "no result: %.0f%% is above the ceiling (the probe read slower than "
                     "the model: a busy machine, or weights served in part by the cache)", 100 * frac_raw);
        else if (!isnan(frac) && u->in_cache)
            snprintf(pct, sizeof pct, "- (fits in cache: not bound by DRAM)");
        else if (!isnan(frac) && n_above)
            snprintf(pct, sizeof pct, "%.1f%% (%.1f-%.1f; %d of %d repeats above the ceiling, left out)", 100 * frac,
                     100 * fr_lo, 100 * fr_hi, n_above, reps);
        else if (!isnan(frac))
            snprintf(pct, sizeof pct, "%.1f%% (%.1f-%.1f)", 100 * frac, 100 * fr_lo, 100 * fr_hi);
        printf("| %s | %.1f MB | %s | %s | %s | %d | %s | %.2f ± %.2f | %.1f (%.1f/%.1f) | %s |\n", c->name,
               (double)info->weight_bytes / 1e6, info->arch, info->isa, opts_numerics_name(c->oc->numerics),
               info->n_threads, test, mean, sd, bw_hi, bw_lo, bw_med, pct);
    }
    const tern_profile *prof = &u->prof;
    if (c->profile && prof->total_s > 0) {
        const double T = prof->total_s, nt = info->n_threads;
        const double wait = prof->matmul_s * nt - prof->matmul_busy_s;
        const double other = T - prof->embed_s - prof->norm_s - prof->quant_s - prof->matmul_s - prof->attn_s -
                             prof->swiglu_s - prof->recur_s;
        fprintf(c->array ? stderr : stdout, "%sprofile %s t=%d: %.3f s in %ld forwards: matmul %.1f%% (of which barrier wait + imbalance "
               "%.1f%%), attention %.1f%%, qk-norm/rope/kv-store/residual %.1f%%, rmsnorm|swiglu+quantise %.1f%%, "
               "swiglu %.1f%%, recurrence %.1f%%, embed %.1f%%, other %.1f%%\n",
               c->json ? "# " : "", test, info->n_threads, T, prof->n_forward, 100 * prof->matmul_s / T,
               100 * wait / nt / T, 100 * prof->attn_s / T, 100 * prof->norm_s / T, 100 * prof->quant_s / T,
               100 * prof->swiglu_s / T, 100 * prof->recur_s / T, 100 * prof->embed_s / T, 100 * other / T);
    }
    fflush(stdout);
}

/* Every test on the n units together: per repeat each unit in turn (the order reversed every other
 * repeat), then a row per unit. 0 or 1 (the error printed). */
static int bench_tests(const bench_cfg *c, bench_unit *units, int n) {
    tern_err err = {0};
    for (int dk = 0; dk < 2 * c->n_dep; dk++) {   /* per depth: the pp tests, then the tg tests */
        const int di = dk / 2, kind = dk % 2;
        /* tg tests: each length at each -np count */
        const int nl = kind == 0 ? c->n_pp : c->n_tg * c->n_np, depth = c->dep[di];
        for (int li = 0; li < nl; li++) {
            const int len = kind == 0 ? c->pp[li] : c->tg[li / c->n_np], npar = kind == 0 ? 1 : c->np[li % c->n_np];
            char test[64];   /* "tg1048576 x64 @ d1048576" at most */
            char par[16] = "";
            if (npar > 1) snprintf(par, sizeof par, " x%d", npar);
            if (depth > 0) snprintf(test, sizeof test, "%s%d%s @ d%d", kind == 0 ? "pp" : "tg", len, par, depth);
            else snprintf(test, sizeof test, "%s%d%s", kind == 0 ? "pp" : "tg", len, par);
            double kv_tok = 0;
            for (int i = 0; i < n; i++) {
                bench_unit *u = &units[i];
                /* bytes per pass of a tg test: the model's (weights, recurrent state of each
                 * sequence) and the K/V rows read, on average depth + (len + 1) / 2 positions per
                 * sequence */
                kv_tok = kind == 1 ? (double)npar * (double)u->kv_pos * (depth + (len + 1) / 2.0) : 0;
                /* a recurrent model's bytes per token hold one sequence's state, which the budget
                 * does not give apart from the weights: its -np rows take no ceiling */
                u->bytes = u->info.bytes_per_token && (npar == 1 || u->state1 == 0) ? (double)u->info.bytes_per_token + kv_tok : 0;
                u->in_cache = u->model_in_cache && u->bytes <= (double)c->llc;
                /* tg from DRAM: probe passes before each repeat (their ceiling); else the load's */
                u->rep_probe = kind == 1 && u->bytes > 0 && !u->in_cache;
                u->n_bw = BW_PASSES;
                memcpy(u->bwall, u->bwp, sizeof u->bwp);
                memset(&u->prof, 0, sizeof u->prof);
            }
            if (depth + len >= 4096) {   /* a long test: said before it starts, so it does not look hung */
                char after[64] = "";
                if (depth) snprintf(after, sizeof after, " after the %d of the depth (not timed)", depth);
                char each[64];
                if (npar > 1) snprintf(each, sizeof each, "%d sequences of %d tokens", npar, len);
                else snprintf(each, sizeof each, "%d token%s", len, len == 1 ? "" : "s");
                for (int i = 0; i < n; i++)
                    fprintf(stderr, "tern bench: %s at %d thread%s: %d runs (a warm-up and -r %d), each evaluating %s%s; "
                                    "this can take a while\n",
                            test, units[i].info.n_threads, units[i].info.n_threads == 1 ? "" : "s", c->reps + 1, c->reps,
                            each, after);
            }
            for (int r = -1; r < c->reps; r++)           /* r = -1: warm-up */
                for (int k = 0; k < n; k++) {
                    const int i = r % 2 ? n - 1 - k : k;   /* each unit first as often as last */
                    if (unit_rep(&units[i], c, r, kind, len, depth, npar, &err)) {
                        fprintf(stderr, "tern bench: %s\n", err.msg[0] ? err.msg : tern_strerror(err.code));
                        return 1;
                    }
                }
            for (int i = 0; i < n; i++) unit_row(&units[i], c, test, kind, depth, npar, kv_tok);
        }
    }
    return 0;
}

int cmd_bench(int argc, char **argv) {
    opts_common oc;
    opts_common_default(&oc);
    oc.no_progress = true;
    int pp[16] = {64, 512}, n_pp = 2, tg[16] = {128}, n_tg = 1, th[16] = {1, 2}, n_th = 2, reps = 5;
    int dep[16] = {0}, n_dep = 1, np[16] = {1}, n_np = 1;
    bool json = false, json_flag = false, profile = false, interleave = false;
    int busy_cpu = -1, out_fmt = -1;   /* -o's choice (0: md), -1 when not given */
    pid_t busy = 0;
    const opt_table tabs[] = {opts_tab_model, OPT_TABLE(bench_defs), opts_tab_load};
    const int n_tabs = (int)(sizeof tabs / sizeof tabs[0]);
    for (int i = 1; i < argc; i++) {
        opt_val v;
        const int id = opts_next("bench", tabs, n_tabs, argc, argv, &i, &v);
        if (id == OPT_HELP) { bench_usage(stdout, tabs, n_tabs); return 0; }
        if (id == OPT_ERR) return 2;
        if (id == OPT_POSITIONAL) return opts_unexpected("bench", v.str);
        if (opts_apply_common(&oc, id, &v)) continue;
        switch (id) {
        case BENCH_PP: take_list(&v, pp, &n_pp); break;
        case BENCH_TG: take_list(&v, tg, &n_tg); break;
        case BENCH_DEPTH:   /* 0 is a depth (an empty context), not "none" */
            n_dep = v.n_list;
            for (int k = 0; k < v.n_list; k++) dep[k] = v.list[k];
            break;
        case BENCH_THREADS: take_list(&v, th, &n_th); break;
        case BENCH_REPS: reps = (int)v.i; break;
        case BENCH_JSON: json_flag = true; break;
        case BENCH_OUTPUT: out_fmt = v.choice; break;
        case BENCH_PROFILE: profile = true; break;
        case BENCH_BUSY: busy_cpu = (int)v.i; break;
        case BENCH_NP: take_list(&v, np, &n_np); break;
        case BENCH_INTERLEAVE: interleave = true; break;
        default: break;
        }
    }
    if (json_flag && (out_fmt == 0 || out_fmt == 1)) {   /* never drop one of two contradicting choices silently */
        fprintf(stderr, "tern bench: --json (a JSON object per line) and -o %s (%s) choose different outputs; use one of them; "
                        "see tern bench --help\n", out_fmt ? "json" : "md", out_fmt ? "one JSON array" : "the table");
        return 2;
    }
    json = json_flag || out_fmt > 0;
    const bool array = out_fmt == 1;   /* -o json: the rows as one array; --json, -o jsonl: a row per line */
    int n_rows = 0;
    if (!oc.model) { fprintf(stderr, "tern bench: -m MODEL is required; see tern bench --help\n"); return 2; }
    if (n_pp == 0 && n_tg == 0) {   /* llama-bench would print an empty table */
        fprintf(stderr, "tern bench: -p and -n: nothing to measure (every prompt and generation length is 0); "
                        "expected at least one length above 0 in -p or -n\n");
        return 2;
    }
    if (n_th == 0) { th[0] = 0; n_th = 1; }
    int max_len = 1;
    for (int i = 0; i < n_pp; i++) max_len = pp[i] > max_len ? pp[i] : max_len;
    for (int i = 0; i < n_tg; i++) max_len = tg[i] > max_len ? tg[i] : max_len;
    int max_dep = 0;
    for (int i = 0; i < n_dep; i++) max_dep = dep[i] > max_dep ? dep[i] : max_dep;
    int max_np = 1;
    for (int i = 0; i < n_np; i++) max_np = np[i] > max_np ? np[i] : max_np;
    oc.n_ctx = max_dep + max_len;
    if (n_tg > 0 && oc.n_ctx < max_np) oc.n_ctx = max_np;   /* a session's n_batch is at most its context */
    if (oc.n_batch > max_len) oc.n_batch = max_len;
    if (n_tg > 0 && oc.n_batch < max_np) oc.n_batch = max_np;   /* sessions[0]'s scratch holds a pass of every sequence */

    int status = 1;
    int32_t *ids = NULL;
    bench_unit units[16];
    memset(units, 0, sizeof units);
    const unsigned long long llc = opts_llc_bytes();
    const char *base = strrchr(oc.model, '/') ? strrchr(oc.model, '/') + 1 : oc.model;
    char name[1024];
    bench_name(base, json, name, sizeof name);
    bench_cfg cfg = {.oc = &oc, .pp = pp, .tg = tg, .dep = dep, .np = np, .n_pp = n_pp, .n_tg = n_tg, .n_dep = n_dep,
                     .n_np = n_tg > 0 ? n_np : 1, .reps = reps, .max_np = n_tg > 0 ? max_np : 1, .json = json,
                     .array = array, .profile = profile, .busy_cpu = busy_cpu, .n_rows = &n_rows, .name = name, .llc = llc};
    if (busy_cpu >= 0) {
        busy = busy_start(busy_cpu);
        if (busy < 0) {
            fprintf(stderr, "tern bench: --busy-cpu %d: cannot start a busy loop pinned to CPU %d "
                            "(expected a CPU this process may run on)\n", busy_cpu, busy_cpu);
            busy = 0;
            goto out;
        }
        if (!json) printf("competitor: a busy-loop process pinned to CPU %d for the whole run\n\n", busy_cpu);
        fflush(stdout);
    }
    /* --interleave: every thread count loaded at once, one group; else one group per count */
    const int group = interleave ? n_th : 1;
    for (int g = 0; g < n_th; g += group) {
        for (int i = 0; i < group; i++) {
            if (unit_load(&units[i], &oc, th[g + i], cfg.max_np, reps)) goto fail;
            if (i == 0 && group > 1) {   /* the other copies, checked before any loads */
                tern_session_opts so;
                tern_session_opts_default(&so);
                so.n_ctx = tern_session_n_ctx(units[0].ss[0]);
                so.kv_f32 = oc.kv_f32;
                uint64_t kv_one = 0, st_one = 0, avail = 0;
                tern_session_mem(units[0].m, &so, &kv_one, &st_one, &avail);
                const double copy = (double)units[0].info.weight_bytes + (double)cfg.max_np * (double)(kv_one + st_one);
                if (avail > 0 && (group - 1) * copy > (double)avail) {
                    fprintf(stderr, "tern bench: --interleave: %d more copies of the model for -t's other counts need %.0f "
                                    "bytes (%.0f each, its caches included), %llu bytes are available with the first loaded; "
                                    "expected fewer thread counts, or no --interleave (one count's model at a time)\n",
                            group - 1, (group - 1) * copy, copy, (unsigned long long)avail);
                    goto fail;
                }
            }
        }
        if (g == 0) {
            const tern_model_info *mi = &units[0].info;
            if (mi->n_ctx_train > 0 && oc.n_ctx > mi->n_ctx_train)   /* as run -c says: timed all the same */
                fprintf(stderr, "tern bench: warning: the longest test reaches position %d (-d + its length), past the "
                                "model's trained context (%d tokens); its speed is measured all the same\n",
                        oc.n_ctx, mi->n_ctx_train);
            if (!json) {   /* after the first load: a model that fails leaves no table header */
                printf("| model | size | arch | isa | numerics | threads | test | t/s | bw GB/s best (min/median) | %% of ceiling |\n");
                printf("| --- | ---: | --- | --- | --- | ---: | ---: | ---: | ---: | ---: |\n");
            }
            ids = malloc(((size_t)max_dep + (size_t)max_len) * sizeof *ids);
            if (!ids) { fprintf(stderr, "tern bench: out of memory\n"); goto fail; }
            uint64_t rng = 0x9e3779b97f4a7c15ull;
            for (int i = 0; i < max_dep + max_len; i++) {
                rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                ids[i] = (int32_t)((rng >> 33) % (uint64_t)mi->n_vocab);
            }
            cfg.ids = ids;
        }
        if (bench_tests(&cfg, units, group)) goto fail;
        for (int i = 0; i < group; i++) unit_free(&units[i], cfg.max_np);
    }
    if (!json)
        printf("\nbw: the memory read bandwidth probed with the test's threads, the best pass (the min/median of the "
               "passes): %d passes after the load, then %d right before each tg repeat of a model read from DRAM.\n"
               "%% of ceiling (tg only): tg t/s over the decode ceiling, bandwidth / bytes read per token (weights, recurrent "
               "state, the K/V rows read); per repeat against the best pass right before it; the median of the "
               "repeats (their min-max), leaving out any repeat above its ceiling (the probe read slower than the model: a "
               "busy machine, or a model served in part by the cache).\n"
               "A model whose bytes per token fit in the last-level cache (%.1f MB here) is not bound by the "
               "bandwidth: its tg rows take no probe per repeat and show no share (up to an eighth of the cache by "
               "size; above that, only where a buffer of that size reads at 1.5x the probe or more).\n",
               BW_PASSES, BW_REP_PASSES, (double)llc / 1e6);
    status = 0;
fail:
    for (int i = 0; i < n_th; i++) unit_free(&units[i], cfg.max_np);
out:
    if (array && (n_rows || status == 0)) printf(n_rows ? "\n]\n" : "[]\n");   /* rows printed before a failure stay valid JSON */
    busy_stop(busy);
    free(ids);
    return status;
}
