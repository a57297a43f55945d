/* model_fx.h: helpers for the model, golden and engine tests: load a model / session from
 * ../shared (asserting success), read the golden JSON files, compare logits. */
#ifndef TERN_TESTS_MODEL_FX_H
#define TERN_TESTS_MODEL_FX_H

#include "tern.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

/* Load path (absolute or fixture-relative already resolved) with numerics and threads (fails the
 * test on error). */
tern_model *mfx_load(const char *path, tern_numerics num, int n_threads);
tern_session *mfx_session(tern_model *m, int n_ctx, int n_batch, bool kv_f32);
/* Parse a JSON fixture under ../shared (fx_require'd). Caller cJSON_Delete's it. */
cJSON *mfx_json(const char *rel);
/* Integer array -> malloc'd int32 ids (*n set). */
int32_t *mfx_ids(const cJSON *arr, int *n);
/* Index of the max logit (ties: lowest id). */
int32_t mfx_argmax(const float *l, int n);
/* log-sum-exp in double. */
double mfx_logsumexp(const float *l, int n);
/* max |l[id] - v| over a [[id, v], ...] list. */
double mfx_topk_err(const float *l, const cJSON *topk);
/* -log softmax(l)[tok] with float logits and a double sum (llama-perplexity's log_softmax). */
double mfx_nll(const float *l, int n, int tok);
/* A copy of the GGUF at model with n bytes at byte `at` of tensor name's data replaced by val,
 * written to path. */
void mfx_write_damaged(const char *model, const char *name, uint64_t at, const uint8_t *val, size_t n,
                       const char *path);
/* The same with every byte of the F32 tensor name's data set to 0xff (NaN): a projection of F32
 * data is not scanned at load, so the NaN reaches the logits. */
void mfx_write_nan_tensor(const char *model, const char *name, const char *path);

struct kern_table;
/* The kernel tables to check, by index from 0 until NULL: every table compiled in, then (x86)
 * the AVX-512 VNNI and AVX-VNNI kernels over their tests-only emulations (Makefile), so their
 * logic is checked on any AVX2 host. */
const struct kern_table *mfx_kern_table(int i);

#endif /* TERN_TESTS_MODEL_FX_H */
