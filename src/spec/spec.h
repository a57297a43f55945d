/* spec.h: internals of the speculative decoder (tern_spec_* in tern.h) exposed to the tests. */
#ifndef TERN_SPEC_SPEC_H
#define TERN_SPEC_SPEC_H

#include "tern.h"

/* The prompt-lookup draft that tern_spec_step would verify after the history + last: up to k
 * (<= TERN_SPEC_DRAFT_LIMIT) tokens written to draft; returns how many (0: no n-gram match) or a
 * negative TERN_E_* (TERN_E_NOMEM while growing the index). Leaves the history as it was (the
 * index may grow). */
int spec_lookup(tern_spec *sp, int32_t last, int32_t *draft, int k, tern_err *err);

/* The model sp was created for (tern_gen checks a spec against its own model). */
const tern_model *spec_model(const tern_spec *sp);

#endif /* TERN_SPEC_SPEC_H */
