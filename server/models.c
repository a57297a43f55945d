/* models.c: the models a server holds (see models.h). */
#include "models.h"
#include "api.h"

#include <cjson/cJSON.h>

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

enum { MODELS_MAX = 256, LOAD_WAIT_S = 600 };

struct srv_models {
    srv_config cfg;
    tern_model_opts mo;
    bool multi;             /* a folder of models (else the one given loaded) */
    srv_backend *b;
    int n;
    pthread_mutex_t mu;     /* guards every backend's state, users, last_used, error, and stopping */
    pthread_cond_t cv;      /* a load or an unload finished, or the server is stopping */
    bool stopping;          /* srv_models_shutdown ran: no new load starts, a finished one is stopped */
    uint64_t clock;
    srv_metrics retired;    /* the counters of models unloaded since start (under mu) */
};

/* src as text for a line of the server's log, in dst (size n >= 8): control bytes (0x00-0x1f,
 * 0x7f) as \xNN, as the warning about a name that is not UTF-8 shows them, so a file name holding
 * a newline cannot start a forged line of its own; other bytes as they are (a model id is valid
 * UTF-8, and a multi-byte character is never cut); a text that does not fit ends in "...".
 * Returns dst. */
static const char *log_text(char *dst, size_t n, const char *src) {
    size_t o = 0, i = 0;
    while (src[i]) {
        const unsigned char c = (unsigned char)src[i];
        size_t len = 1;                                /* bytes of src this step takes */
        if (c >= 0xc0)
            while (len < 4 && ((unsigned char)src[i + len] & 0xc0) == 0x80) len++;
        const bool esc = c < 0x20 || c == 0x7f;
        const size_t w = esc ? 4 : len;                /* bytes it writes */
        if (o + w + 4 > n) {                           /* room for it, "..." and the NUL? */
            memcpy(dst + o, "...", 4);
            return dst;
        }
        if (esc) snprintf(dst + o, 5, "\\x%02x", c);
        else memcpy(dst + o, src + i, len);
        o += w;
        i += len;
    }
    dst[o] = '\0';
    return dst;
}

static void metrics_init(srv_metrics *mx) {
    memset(mx, 0, sizeof *mx);
    pthread_mutex_init(&mx->mu, NULL);
}

/* The scheduler of a loaded model, after the slots' memory check (every slot's caches at once,
 * before the first allocates). n_ctx: the server's, capped at the model's trained context in a
 * folder of models (where -c cannot be chosen per model). */
static int backend_start(const srv_models *t, srv_backend *b, tern_err *err) {
    const srv_config *cfg = &t->cfg;
    tern_err ferr = {0};   /* an unknown template: a warning here, and each chat request fails with it (500) */
    const int family = prompt_chat_family(b->m, cfg->chat_template, &ferr);
    b->template_err[0] = '\0';
    if (family < 0) {
        snprintf(b->template_err, sizeof b->template_err, "%.*s", (int)sizeof b->template_err - 1, ferr.msg);   /* cut to fit */
        char id[1024];
        fprintf(stderr, "tern serve: warning: '%s': %s; chat requests will fail (completions work)\n",
                log_text(id, sizeof id, b->name), ferr.msg);
    }
    b->tools_fmt = family == PROMPT_FAMILY_QWEN3    ? SRV_TOOLS_QWEN3
                   : family == PROMPT_FAMILY_CHATML ? SRV_TOOLS_CHATML
                                                    : SRV_TOOLS_QWEN35;
    tern_model_info info;
    tern_model_get_info(b->m, &info);
    b->n_ctx = cfg->n_ctx;
    if (t->multi && info.n_ctx_train > 0 && info.n_ctx_train < b->n_ctx) b->n_ctx = info.n_ctx_train;
    tern_session_opts so;
    tern_session_opts_default(&so);
    so.n_ctx = b->n_ctx;
    so.n_batch = cfg->n_batch;
    so.kv_f32 = cfg->kv_f32;
    so.n_checkpoints = SRV_CHECKPOINTS;
    uint64_t kv1 = 0, st1 = 0, avail = 0;
    tern_session_mem(b->m, &so, &kv1, &st1, &avail);   /* a given budget: less this model's own bytes */
    const uint64_t need = (uint64_t)cfg->parallel * (kv1 + st1);
    if (avail && need > avail) {
        char stp[96] = "";
        if (st1) snprintf(stp, sizeof stp, " + %.1f MB recurrent state", (double)st1 / 1e6);
        return tern_err_set(err, TERN_E_NOMEM,
                           "%d slot%s (-np %d) with context %d (-c) need %.1f MB: per slot %.1f MB KV cache%s; only %.1f MB "
                           "available: lower -c or -np", cfg->parallel, cfg->parallel == 1 ? "" : "s", cfg->parallel, b->n_ctx, (double)need / 1e6,
                           (double)kv1 / 1e6, stp, (double)avail / 1e6);
    }
    b->resident = b->file_bytes + need;
    metrics_init(&b->mx);
    const int chunk = cfg->prefill_chunk > 0 && cfg->prefill_chunk < cfg->n_batch ? cfg->prefill_chunk : cfg->n_batch;
    const int rc = srv_sched_init(&b->sched, b->m, &b->mx, cfg->parallel, b->n_ctx, cfg->n_batch, chunk, cfg->queue_max,
                                  cfg->kv_f32, cfg->spec ? &cfg->spec_p : NULL, err);
    if (rc != TERN_OK) {
        pthread_mutex_destroy(&b->mx.mu);
        return rc;
    }
    if (cfg->script_reply) {                          /* tests: a reply given in advance */
        int32_t ids[4096];
        int n = 0;
        tern_err terr = {0};
        if (tern_tokenize(b->m, cfg->script_reply, strlen(cfg->script_reply), false, true, ids, 4096, &n, &terr) != TERN_OK ||
            srv_sched_set_script(b->sched, ids, n) != TERN_OK) {
            srv_sched_free(b->sched);
            b->sched = NULL;
            pthread_mutex_destroy(&b->mx.mu);
            return tern_err_set(err, TERN_E_ARG, "script_reply: %s", terr.msg[0] ? terr.msg : "out of memory");
        }
    }
    return TERN_OK;
}

/* Adds x's counters to d (the sums /metrics reports). */
void srv_metrics_add(srv_metrics *d, const srv_metrics *x) {
    d->requests_cancelled += x->requests_cancelled;
    d->tokens_prompt += x->tokens_prompt;
    d->tokens_cached += x->tokens_cached;
    d->tokens_generated += x->tokens_generated;
    const srv_hist *xs[3] = {&x->ttft, &x->tpot, &x->itl};
    srv_hist *ds[3] = {&d->ttft, &d->tpot, &d->itl};
    for (int h = 0; h < 3; h++) {
        for (int i = 0; i < SRV_HIST_N; i++) ds[h]->count[i] += xs[h]->count[i];
        ds[h]->n += xs[h]->n;
        ds[h]->sum += xs[h]->sum;
    }
    d->decode_steps += x->decode_steps;
    d->decode_batched += x->decode_batched;
    d->decode_seqs += x->decode_seqs;
    if (x->decode_batch_max > d->decode_batch_max) d->decode_batch_max = x->decode_batch_max;
    d->prefill_chunks += x->prefill_chunks;
    d->shared_passes += x->shared_passes;
    d->mixed_steps += x->mixed_steps;
    d->decode_only_steps += x->decode_only_steps;
    d->decode_only_tokens += x->decode_only_tokens;
    d->decode_only_seconds += x->decode_only_seconds;
    d->spec_steps += x->spec_steps;
    d->spec_drafted += x->spec_drafted;
    d->spec_accepted += x->spec_accepted;
}

void srv_models_retired(srv_models *t, srv_metrics *out) {
    pthread_mutex_lock(&t->mu);
    srv_metrics_add(out, &t->retired);
    pthread_mutex_unlock(&t->mu);
}

/* Stops and frees a loaded model's scheduler (its jobs end with 503) and, when owned, the model;
 * its counters go to the table's retired sums, so the server's totals never go down. */
static void backend_stop(srv_models *t, srv_backend *b) {
    if (b->sched) {
        srv_sched_free(b->sched);
        pthread_mutex_lock(&t->mu);
        srv_metrics_add(&t->retired, &b->mx);
        pthread_mutex_unlock(&t->mu);
        pthread_mutex_destroy(&b->mx.mu);
    }
    b->sched = NULL;
    if (b->owned) tern_model_free(b->m);
    if (b->owned) b->m = NULL;
}

static srv_models *table_new(const srv_config *cfg, int n) {
    srv_models *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->b = calloc((size_t)(n > 0 ? n : 1), sizeof *t->b);
    if (!t->b) {
        free(t);
        return NULL;
    }
    t->cfg = *cfg;
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    return t;
}

int srv_models_init_one(srv_models **out, tern_model *m, const srv_config *cfg, const char *name, tern_err *err) {
    *out = NULL;
    srv_models *t = table_new(cfg, 1);
    if (!t) return tern_err_set(err, TERN_E_NOMEM, "out of memory");
    srv_backend *b = &t->b[0];
    t->n = 1;
    snprintf(b->name, sizeof b->name, "%s", name);
    b->m = m;
    const int rc = backend_start(t, b, err);
    if (rc != TERN_OK) {
        srv_models_free(t);
        return rc;
    }
    b->state = SRV_MODEL_READY;
    *out = t;
    return TERN_OK;
}

static int by_name(const void *a, const void *b) {
    return strcmp(((const srv_backend *)a)->name, ((const srv_backend *)b)->name);
}

int srv_models_init_dir(srv_models **out, const char *dir, const tern_model_opts *mo, const srv_config *cfg,
                        tern_err *err) {
    *out = NULL;
    DIR *d = opendir(dir);
    if (!d) return tern_err_set(err, TERN_E_IO, "--models-dir '%s': %s", dir, strerror(errno));
    srv_models *t = table_new(cfg, MODELS_MAX);
    if (!t) {
        closedir(d);
        return tern_err_set(err, TERN_E_NOMEM, "out of memory");
    }
    t->multi = true;
    t->mo = *mo;
    int skipped = 0, refused = 0;
    for (struct dirent *de; (de = readdir(d));) {
        const size_t k = strlen(de->d_name);
        if (k < 5 || strcmp(de->d_name + k - 5, ".gguf") != 0) continue;
        if (t->n == MODELS_MAX) { skipped++; continue; }
        srv_backend *b = &t->b[t->n];
        struct stat st;
        char shown[4 * sizeof b->path + 1];           /* the path or name in a warning, as log_text shows it */
        /* an entry that cannot be served is named on stderr (as -m refuses a FIFO), the others are served */
        refused++;                                     /* until it is taken */
        if (snprintf(b->path, sizeof b->path, "%s/%s", dir, de->d_name) >= (int)sizeof b->path) {
            fprintf(stderr, "tern serve: warning: --models-dir: '%s/%s': the path is longer than %zu bytes; not served\n",
                    dir, log_text(shown, 64, de->d_name), sizeof b->path - 1);
            continue;
        }
        if (k == 5) {                                  /* the id is the name less .gguf */
            fprintf(stderr, "tern serve: warning: --models-dir: '%s': the name is empty before .gguf (a model id is that "
                            "name); not served\n", log_text(shown, sizeof shown, b->path));
            continue;
        }
        const size_t ok = api_utf8_bad_at(de->d_name, k - 5);
        if (ok != k - 5) {                             /* a request names the model in JSON text: UTF-8 */
            /* the name with bytes outside printable ASCII as \xNN */
            size_t o = 0;
            for (size_t i = 0; i < k && o + 5 < sizeof shown; i++) {
                const unsigned char c = (unsigned char)de->d_name[i];
                o += (size_t)snprintf(shown + o, sizeof shown - o, c >= 0x20 && c < 0x7f ? "%c" : "\\x%02x", c);
            }
            fprintf(stderr, "tern serve: warning: --models-dir: '%s/%s': the name is not valid UTF-8 (byte 0x%02x at offset %zu), "
                            "and a model id is that name; not served\n", dir, shown, (unsigned)(unsigned char)de->d_name[ok], ok);
            continue;
        }
        if (stat(b->path, &st) != 0) {
            const int e = errno;
            fprintf(stderr, "tern serve: warning: --models-dir: '%s': %s; not served\n", log_text(shown, sizeof shown, b->path),
                    strerror(e));
            continue;
        }
        if (!S_ISREG(st.st_mode)) {
            const char *kind = S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO"
                             : S_ISCHR(st.st_mode) ? "a character device" : S_ISBLK(st.st_mode) ? "a block device"
                             : S_ISSOCK(st.st_mode) ? "a socket" : "not a regular file";
            fprintf(stderr, "tern serve: warning: --models-dir: '%s' is %s, expected a regular file (a GGUF model); not served\n",
                    log_text(shown, sizeof shown, b->path), kind);
            continue;
        }
        if (k - 5 >= sizeof b->name) {
            fprintf(stderr, "tern serve: warning: --models-dir: '%s': the name is longer than %zu bytes before .gguf; not served\n",
                    log_text(shown, sizeof shown, b->path), sizeof b->name - 1);
            continue;
        }
        memcpy(b->name, de->d_name, k - 5);
        b->name[k - 5] = '\0';
        b->file_bytes = (uint64_t)st.st_size;
        b->owned = true;
        t->n++;
        refused--;
    }
    closedir(d);
    if (t->n == 0) {
        srv_models_free(t);
        if (refused)
            return tern_err_set(err, TERN_E_ARG, "--models-dir '%s': none of its %d .gguf entries can be served (the warnings "
                                "above say why)", dir, refused);
        return tern_err_set(err, TERN_E_ARG, "--models-dir '%s': no .gguf file in it", dir);
    }
    if (skipped)
        fprintf(stderr, "tern serve: --models-dir: %d file%s past the first %d %s not served\n", skipped,
                skipped == 1 ? "" : "s", MODELS_MAX, skipped == 1 ? "is" : "are");
    qsort(t->b, (size_t)t->n, sizeof *t->b, by_name);
    *out = t;
    return TERN_OK;
}

bool srv_models_multi(const srv_models *t) { return t->multi; }

/* Ends an unload begun under the lock (state UNLOADING): frees the model, then marks it unloaded
 * and wakes the requests that wait to load it again. */
static void backend_finish_unload(srv_models *t, srv_backend *b) {
    backend_stop(t, b);
    pthread_mutex_lock(&t->mu);
    b->state = SRV_MODEL_UNLOADED;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

/* Unloads the least recently used loaded model that no request holds, other than keep; false
 * when there is none. Called without the lock. */
static bool evict_one(srv_models *t, const srv_backend *keep) {
    pthread_mutex_lock(&t->mu);
    srv_backend *v = NULL;
    for (int i = 0; i < t->n; i++) {
        srv_backend *b = &t->b[i];
        if (b != keep && b->owned && b->state == SRV_MODEL_READY && b->users == 0 && (!v || b->last_used < v->last_used))
            v = b;
    }
    if (v) v->state = SRV_MODEL_UNLOADING;            /* requests for it wait until it is gone */
    pthread_mutex_unlock(&t->mu);
    if (!v) return false;
    char id[1024];
    fprintf(stderr, "tern serve: unloading '%s' to make room\n", log_text(id, sizeof id, v->name));
    backend_finish_unload(t, v);
    return true;
}

/* Loads b (state LOADING, held by the caller): the file, then its scheduler; when either does not
 * fit in memory, the least recently used idle model is unloaded and the step tried again. */
static int backend_load(srv_models *t, srv_backend *b, srv_error *e) {
    tern_err err = {0};
    int rc;
    for (;;) {
        /* A memory figure given in the options (TERN_MEM_AVAILABLE) is the whole budget: the
         * models loaded already take their share of it (the OS's own figure counts them itself). */
        tern_model_opts mo = t->mo;
        if (mo.mem_available) {
            uint64_t used = 0;
            pthread_mutex_lock(&t->mu);
            for (int i = 0; i < t->n; i++)
                if (t->b[i].state == SRV_MODEL_READY) used += t->b[i].resident;
            pthread_mutex_unlock(&t->mu);
            mo.mem_available = mo.mem_available > used ? mo.mem_available - used : 1;
        }
        err = (tern_err){0};
        rc = tern_model_load(&b->m, b->path, &mo, &err);
        if (rc == TERN_E_NOMEM && evict_one(t, b)) continue;
        if (rc != TERN_OK) break;
        err = (tern_err){0};
        rc = backend_start(t, b, &err);
        if (rc != TERN_OK) {
            tern_model_free(b->m);
            b->m = NULL;
        }
        /* the slots did not fit: the model was loaded with the budget left before the unload, so
         * it is loaded again with the budget the unloaded model leaves */
        if (rc == TERN_E_NOMEM && evict_one(t, b)) continue;
        break;
    }
    if (rc != TERN_OK) {
        /* the client reads the reason without the server's path to the file (the log has it) */
        char id[1024], why_log[4 * sizeof err.msg];   /* the loader's message quotes the path */
        fprintf(stderr, "tern serve: could not load '%s': %s\n", log_text(id, sizeof id, b->name),
                log_text(why_log, sizeof why_log, err.msg));
        const size_t np = strlen(b->path);
        const char *why = !strncmp(err.msg, b->path, np) && !strncmp(err.msg + np, ": ", 2) ? err.msg + np + 2 : err.msg;
        srv_fail(e, rc == TERN_E_NOMEM ? 503 : 500, rc == TERN_E_NOMEM ? "unavailable_error" : "server_error", "model",
                 "model '%.100s' could not be loaded: %s", b->name, why);
    } else {
        tern_model_info info;
        tern_model_get_info(b->m, &info);
        char id[1024];
        fprintf(stderr, "tern serve: loaded '%s' (%d slot%s, context %d, %s, %d thread%s)\n", log_text(id, sizeof id, b->name),
                t->cfg.parallel,
                t->cfg.parallel == 1 ? "" : "s", b->n_ctx, info.isa, info.n_threads, info.n_threads == 1 ? "" : "s");
    }
    return rc;
}

srv_backend *srv_models_acquire(srv_models *t, const char *name, srv_error *e) {
    srv_backend *b = NULL;
    if (!t->multi) b = &t->b[0];                      /* one model: the request's "model" is a label */
    else if (!name || !*name) {
        srv_fail(e, 400, "invalid_request_error", "model", "'model' is required: this server serves several models "
                                                           "(GET /v1/models lists them)");
        return NULL;
    } else
        for (int i = 0; i < t->n && !b; i++)
            if (!strcmp(t->b[i].name, name)) b = &t->b[i];
    if (!b) return api_model_not_found(e, name), NULL;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += LOAD_WAIT_S;
    pthread_mutex_lock(&t->mu);
    for (;;) {
        if (t->stopping) {
            pthread_mutex_unlock(&t->mu);
            srv_fail(e, 503, "unavailable_error", NULL, "the server is shutting down");
            return NULL;
        }
        if (b->state == SRV_MODEL_READY) {
            b->users++;
            b->last_used = ++t->clock;
            pthread_mutex_unlock(&t->mu);
            return b;
        }
        if (b->state == SRV_MODEL_LOADING || b->state == SRV_MODEL_UNLOADING) {   /* wait for it, bounded */
            if (pthread_cond_timedwait(&t->cv, &t->mu, &until) == ETIMEDOUT) {
                pthread_mutex_unlock(&t->mu);
                srv_fail(e, 503, "unavailable_error", "model", "the model '%.200s' is still loading after %d s", b->name,
                         LOAD_WAIT_S);
                return NULL;
            }
            continue;
        }
        b->state = SRV_MODEL_LOADING;                 /* unloaded or failed before: this request loads it */
        pthread_mutex_unlock(&t->mu);
        srv_error le;
        const int rc = backend_load(t, b, &le);
        pthread_mutex_lock(&t->mu);
        b->state = rc == TERN_OK ? SRV_MODEL_READY : SRV_MODEL_FAILED;
        if (rc != TERN_OK) b->error = le;
        /* a load that finished after srv_models_shutdown: its scheduler stops now (srv_models_free
         * frees it), and the loop's next pass answers 503 */
        if (rc == TERN_OK && t->stopping) srv_sched_shutdown(b->sched);
        pthread_cond_broadcast(&t->cv);
        if (rc != TERN_OK) {
            pthread_mutex_unlock(&t->mu);
            *e = le;
            return NULL;
        }
    }
}

void srv_models_release(srv_models *t, srv_backend *b) {
    if (!b) return;
    pthread_mutex_lock(&t->mu);
    b->users--;
    pthread_mutex_unlock(&t->mu);
}

bool srv_models_unload(srv_models *t, const char *name, srv_error *e) {
    srv_backend *b = NULL;
    for (int i = 0; i < t->n && !b; i++)
        if (name && !strcmp(t->b[i].name, name)) b = &t->b[i];
    if (!b) return api_model_not_found(e, name);
    pthread_mutex_lock(&t->mu);
    if (!b->owned || b->state != SRV_MODEL_READY || b->users > 0) {
        const int users = b->users, state = b->state;
        pthread_mutex_unlock(&t->mu);
        if (!b->owned) return srv_fail(e, 400, "invalid_request_error", "model", "'%.200s' was given at start and stays loaded", b->name);
        if (state != SRV_MODEL_READY) return srv_fail(e, 400, "invalid_request_error", "model", "'%.200s' is not loaded", b->name);
        return srv_fail(e, 409, "invalid_request_error", "model", "'%.200s' is in use by %d request%s; unload it when idle",
                        b->name, users, users == 1 ? "" : "s");
    }
    b->state = SRV_MODEL_UNLOADING;
    pthread_mutex_unlock(&t->mu);
    backend_finish_unload(t, b);
    return true;
}

int srv_models_loaded(srv_models *t, srv_backend **out, int cap) {
    int k = 0;
    pthread_mutex_lock(&t->mu);
    for (int i = 0; i < t->n && k < cap; i++)
        if (t->b[i].state == SRV_MODEL_READY) {
            t->b[i].users++;
            out[k++] = &t->b[i];
        }
    pthread_mutex_unlock(&t->mu);
    return k;
}

char *srv_models_list_json(srv_models *t, long created) {
    static const char *names[] = {"unloaded", "loading", "loaded", "failed", "unloading"};
    cJSON *root = cJSON_CreateObject(), *data;
    cJSON_AddStringToObject(root, "object", "list");
    data = cJSON_AddArrayToObject(root, "data");
    pthread_mutex_lock(&t->mu);
    for (int i = 0; i < t->n; i++) {
        cJSON *m = cJSON_CreateObject();
        char *id = api_utf8_dup(t->b[i].name, strlen(t->b[i].name));
        cJSON_AddStringToObject(m, "id", id ? id : "");
        free(id);
        cJSON_AddStringToObject(m, "object", "model");
        cJSON_AddNumberToObject(m, "created", (double)created);
        cJSON_AddStringToObject(m, "owned_by", "tern");
        if (t->multi) cJSON_AddStringToObject(cJSON_AddObjectToObject(m, "status"), "value", names[t->b[i].state]);
        cJSON_AddItemToArray(data, m);
    }
    pthread_mutex_unlock(&t->mu);
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

bool srv_models_idle(srv_models *t) {
    srv_backend *b[MODELS_MAX];
    const int n = srv_models_loaded(t, b, MODELS_MAX);
    bool idle = true;
    for (int i = 0; i < n; i++) {
        int active, queued;
        srv_sched_load(b[i]->sched, &active, &queued);
        idle = idle && active == 0 && queued == 0;
        srv_models_release(t, b[i]);
    }
    return idle;
}

void srv_models_shutdown(srv_models *t) {
    if (!t) return;
    pthread_mutex_lock(&t->mu);
    t->stopping = true;
    /* only the loaded: a loading model's scheduler is stopped when its load finishes (acquire), an
     * unloading one's is being freed by the thread that unloads it (no request holds it) */
    for (int i = 0; i < t->n; i++)
        if (t->b[i].state == SRV_MODEL_READY) srv_sched_shutdown(t->b[i].sched);
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

void srv_models_free(srv_models *t) {
    if (!t) return;
    for (int i = 0; i < t->n; i++) backend_stop(t, &t->b[i]);
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
    free(t->b);
    free(t);
}
