/* sampler.h: internals of the token sampler (layer 6) shared with the tests and the server:
 * the random stream and the filtered distribution. The public part is tern_sampler_* in tern.h.
 * Source of truth: llama.cpp's sampler chain (src/llama-sampling.cpp) for order and flag meaning:
 * repetition penalty -> top-k -> top-p -> min-p -> temperature -> draw. */
#ifndef TERN_SAMPLING_SAMPLER_H
#define TERN_SAMPLING_SAMPLER_H

#include "core/core.h"

#include <stdint.h>

/* xoshiro256** (Blackman and Vigna, 2018), seeded through splitmix64 so that any 64-bit seed,
 * 0 included, gives a full-period state. Same seed -> same stream on every platform. */
typedef struct samp_rng { uint64_t s[4]; } samp_rng;
void samp_rng_seed(samp_rng *r, uint64_t seed);
uint64_t samp_rng_next(samp_rng *r);
/* Uniform double in [0, 1) with 53 random bits. */
double samp_rng_uniform(samp_rng *r);
/* A seed from the OS (getrandom), falling back to time and pid; never TERN_SEED_RANDOM. */
uint64_t samp_rng_os_seed(void);

/* Runs the chain on logits (n_vocab floats) and writes the final distribution: ids[i] and its
 * probability probs[i] (after temperature, normalised, summing to 1 within rounding) for the
 * surviving candidates, in the chain's order (descending probability when a sort happened,
 * ascending id otherwise), the sampler's mask applied first as in tern_sampler_sample. Greedy
 * (temp <= 0, or 1 / temp past FLT_MAX) gives one candidate with probability 1.
 * Returns the candidate count (<= n_vocab) or TERN_E_RANGE if cap is smaller than that count
 * (nothing written then). Does not consume random numbers. */
int samp_dist(tern_sampler *s, const float *logits, int32_t *ids, float *probs, int cap);

/* A uniform double in [0, 1) from the sampler's own random stream (the one tern_sampler_sample
 * draws from): for the speculative accept/reject rule (src/spec/spec.c), so that one seed fixes
 * the whole generation. */
double samp_uniform(tern_sampler *s);

#endif /* TERN_SAMPLING_SAMPLER_H */
