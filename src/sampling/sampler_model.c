/* sampler_model.c: tern_sampler_init for a loaded model. Kept apart from sampler.c so that code
 * which samples over a bare vocabulary size (tests, tools) does not link the engine. */
#include "sampling/sampler.h"

int tern_sampler_init(tern_sampler **out, const tern_model *m, const tern_sampler_params *p, tern_err *err) {
    if (out) *out = NULL;
    if (!m) return tern_err_set(err, TERN_E_ARG, "tern_sampler_init: model is NULL");
    tern_model_info info;
    tern_model_get_info(m, &info);
    return tern_sampler_init_vocab(out, info.n_vocab, p, err);
}
