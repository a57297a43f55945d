/* rng.c: the sampler's random stream: xoshiro256** seeded through splitmix64.
 * Source of truth: Blackman and Vigna, "Scrambled linear pseudorandom number generators" (2018),
 * reference constants; splitmix64 from Steele, Lea and Flood (2014). Portable, no libc rand(). */
#include "sampling/sampler.h"

#include "core/os.h"

#include <time.h>
#include <unistd.h>

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void samp_rng_seed(samp_rng *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);   /* never all zero */
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t samp_rng_next(samp_rng *r) {
    uint64_t *s = r->s;
    const uint64_t out = rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

double samp_rng_uniform(samp_rng *r) {
    return (double)(samp_rng_next(r) >> 11) * 0x1.0p-53;    /* 53 bits: exact in a double */
}

uint64_t samp_rng_os_seed(void) {
    uint64_t v = 0;
    if (os_random_bytes(&v, sizeof v) != 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x = (uint64_t)ts.tv_sec * 1000000007ULL ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
        v = splitmix64(&x);
    }
    if (v == TERN_SEED_RANDOM) v--;
    return v;
}
