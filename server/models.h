/* models.h: the models a server holds. Either one model given loaded at start (tern serve -m), or
 * every .gguf file of a folder (tern serve --models-dir), each loaded on first use and unloaded,
 * least recently used first, when memory would not hold the next one. A loaded model has its own
 * scheduler, slots and metrics. A request holds its model (srv_models_acquire .. release) from
 * admission to its last byte, and a model held by a request is never unloaded. */
#ifndef TERN_SERVER_MODELS_H
#define TERN_SERVER_MODELS_H

#include "sched.h"

enum { SRV_MODEL_UNLOADED = 0, SRV_MODEL_LOADING, SRV_MODEL_READY, SRV_MODEL_FAILED, SRV_MODEL_UNLOADING };

typedef struct srv_backend {
    char name[256];         /* the id requests name in "model" and /v1/models lists */
    char path[4096];        /* the file; "" for the model given loaded */
    uint64_t file_bytes;
    bool owned;             /* loaded here (and unloadable); false: the caller's model */
    /* while state is SRV_MODEL_READY and users > 0 (or the caller's model): stable */
    tern_model *m;
    srv_sched *sched;
    srv_metrics mx;         /* this model's counters (its scheduler writes them) */
    srv_tools_fmt tools_fmt;
    char template_err[320]; /* "" or why the chat template cannot be rendered: chat requests answer
                             * 500 with it (the model's fault, not the request's) */
    int n_ctx;              /* per slot */
    uint64_t resident;      /* bytes it holds loaded: its file and its slots' caches */
    /* guarded by the table's lock */
    int state;              /* SRV_MODEL_* */
    int users;              /* requests holding it */
    uint64_t last_used;     /* the table's clock at its last acquire */
    srv_error error;        /* why the last load failed (state SRV_MODEL_FAILED) */
} srv_backend;

typedef struct srv_models srv_models;

/* One model, already loaded by the caller (kept loaded; freed by the caller after
 * srv_models_free). Starts its scheduler after the slots' memory check (TERN_E_NOMEM naming -c
 * and -np). */
int srv_models_init_one(srv_models **out, tern_model *m, const srv_config *cfg, const char *name, tern_err *err);
/* Every regular file named *.gguf in dir (not loaded yet; their ids: the names without .gguf).
 * mo: how they load. TERN_E_IO when dir cannot be read, TERN_E_ARG when it holds no .gguf file. */
int srv_models_init_dir(srv_models **out, const char *dir, const tern_model_opts *mo, const srv_config *cfg,
                        tern_err *err);
bool srv_models_multi(const srv_models *t);
/* The model a request names (NULL or "": the only one; with several, 400 asking for "model"),
 * loaded if needed: while another request loads it, this one waits (at most the load timeout,
 * then 503). Unknown: 404 model_not_found; a failed load: its error. Release it when done. */
srv_backend *srv_models_acquire(srv_models *t, const char *name, srv_error *e);
void srv_models_release(srv_models *t, srv_backend *b);
/* POST /models/unload: 409 while requests hold it, 400 when it is not loaded or was given loaded. */
bool srv_models_unload(srv_models *t, const char *name, srv_error *e);
/* The loaded models, each held (release every one); returns how many (at most cap). */
int srv_models_loaded(srv_models *t, srv_backend **out, int cap);
/* GET /v1/models: every model with its state ("loaded", "loading", "unloaded", "failed"). */
char *srv_models_list_json(srv_models *t, long created);
/* The counters of the models unloaded since start, added to out (the server's totals). */
void srv_models_retired(srv_models *t, srv_metrics *out);
void srv_metrics_add(srv_metrics *d, const srv_metrics *x);
/* No request running or queued on any model. */
bool srv_models_idle(srv_models *t);
/* Ends every model's jobs (503), stops the schedulers; srv_models_free frees the rest. */
void srv_models_shutdown(srv_models *t);
void srv_models_free(srv_models *t);

#endif /* TERN_SERVER_MODELS_H */
