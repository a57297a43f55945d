/* arch.c: architecture name (general.architecture) -> hooks. To add an architecture, define
 * `const model_arch model_arch_<name>` in src/model/<name>.c, list it in archs[] and in
 * model_arch_names(), and give it a fixture in tests/test_arch.c (which fails until every step is
 * done). */
#include "model/model.h"

#include <string.h>

extern const model_arch model_arch_llama;
extern const model_arch model_arch_qwen3;
extern const model_arch model_arch_qwen35;

static const model_arch *const archs[] = {
    &model_arch_llama,
    &model_arch_qwen3,
    &model_arch_qwen35,
};

const model_arch *model_arch_find(const char *name) {
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (strcmp(archs[i]->name, name) == 0) return archs[i];
    return NULL;
}

int model_arch_count(void) { return (int)(sizeof archs / sizeof archs[0]); }

const model_arch *model_arch_at(int i) { return i >= 0 && i < model_arch_count() ? archs[i] : NULL; }

const char *model_arch_names(void) { return "llama, qwen3, qwen35"; }
