/* model_fx.c: helpers for the model tests (see model_fx.h). */
#include "model_fx.h"
#include "test.h"

#include "format/gguf.h"
#include "format/qtypes.h"
#include "kernels/kern_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

tern_model *mfx_load(const char *path, tern_numerics num, int n_threads) {
    tern_model_opts o;
    tern_model_opts_default(&o);
    o.numerics = num;
    o.n_threads = n_threads;
    tern_model *m = NULL;
    tern_err err = {0};
    const int rc = tern_model_load(&m, path, &o, &err);
    if (rc) fail_msg("load %s: %s: %s", path, tern_strerror(rc), err.msg);
    return m;
}

tern_session *mfx_session(tern_model *m, int n_ctx, int n_batch, bool kv_f32) {
    tern_session_opts o;
    tern_session_opts_default(&o);
    o.n_ctx = n_ctx;
    o.n_batch = n_batch;
    o.kv_f32 = kv_f32;
    tern_session *s = NULL;
    tern_err err = {0};
    const int rc = tern_session_init(&s, m, &o, &err);
    if (rc) fail_msg("session: %s: %s", tern_strerror(rc), err.msg);
    return s;
}

cJSON *mfx_json(const char *rel) {
    char path[1024];
    fx_require(path, sizeof path, rel);
    size_t len;
    char *txt = fx_read_file(path, &len);
    if (!txt) fail_msg("cannot read %s", path);
    cJSON *j = cJSON_ParseWithLength(txt, len);
    free(txt);
    if (!j) fail_msg("bad JSON in %s", path);
    return j;
}

int32_t *mfx_ids(const cJSON *arr, int *n) {
    *n = cJSON_GetArraySize(arr);
    int32_t *ids = malloc(((size_t)*n + 1) * sizeof *ids);
    assert_non_null(ids);
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, arr) ids[i++] = (int32_t)e->valuedouble;
    return ids;
}

int32_t mfx_argmax(const float *l, int n) {
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (l[i] > l[best]) best = i;
    return best;
}

double mfx_logsumexp(const float *l, int n) {
    double mx = l[0];
    for (int i = 1; i < n; i++) mx = l[i] > mx ? l[i] : mx;
    double s = 0;
    for (int i = 0; i < n; i++) s += exp((double)l[i] - mx);
    return mx + log(s);
}

double mfx_topk_err(const float *l, const cJSON *topk) {
    double e = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, topk) {
        const int id = (int)cJSON_GetArrayItem(p, 0)->valuedouble;
        const double v = cJSON_GetArrayItem(p, 1)->valuedouble;
        const double d = fabs((double)l[id] - v);
        if (d > e) e = d;
    }
    return e;
}

double mfx_nll(const float *l, int n, int tok) {
    float mx = l[0];
    for (int i = 1; i < n; i++) mx = l[i] > mx ? l[i] : mx;
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += expf(l[i] - mx);
    return -((double)(l[tok] - mx) - log(sum));
}

/* Reads model, lets edit change tensor name's bytes in memory, writes the result to path. */
static void write_edited(const char *model, const char *name, const char *path, uint64_t at, const uint8_t *val,
                         size_t n) {
    size_t len = 0;
    uint8_t *buf = (uint8_t *)fx_read_file(model, &len);
    assert_non_null(buf);
    gguf_ctx *g = NULL;
    tern_err err = {0};
    if (gguf_open_mem(&g, buf, len, &err) != TERN_OK) fail_msg("%s: %s", model, err.msg);
    const gguf_tensor *t = gguf_find_tensor(g, name);
    if (!t) fail_msg("%s: no tensor '%s'", model, name);
    if (val) {
        if (at + n > t->nbytes) fail_msg("%s: bytes %llu + %zu past tensor '%s'", model, (unsigned long long)at, n, name);
        memcpy(t->data + at, val, n);
    } else {
        if (t->type != QT_F32 || t->nbytes == 0) fail_msg("%s: '%s' is not an F32 tensor", model, name);
        memset(t->data, 0xff, (size_t)t->nbytes);
    }
    gguf_close(g);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0) fail_msg("cannot write %s", path);
    free(buf);
}

void mfx_write_damaged(const char *model, const char *name, uint64_t at, const uint8_t *val, size_t n,
                       const char *path) {
    assert_non_null(val);
    write_edited(model, name, path, at, val, n);
}

void mfx_write_nan_tensor(const char *model, const char *name, const char *path) {
    write_edited(model, name, path, 0, NULL, 0);
}

#if defined(__x86_64__)
extern const kern_table kern_table_avx512vnni_emu;
extern const kern_table kern_table_avxvnni_emu;
extern const kern_table kern_table_amx_emu;
#endif
const struct kern_table *mfx_kern_table(int i) {
    int n = 0;
    while (kern_tables[n]) n++;
    if (i < n) return kern_tables[i];
#if defined(__x86_64__)
    if (i == n) return &kern_table_avx512vnni_emu;
    if (i == n + 1) return &kern_table_avxvnni_emu;
    if (i == n + 2) return &kern_table_amx_emu;
#endif
    return NULL;
}
