/* prng.h — the benchmarks' own random choices: xorshift64*, small, fast,
 * and the same on every machine, so that every run of a benchmark does the
 * same work whatever allocator is under it. */
#ifndef BENCH_PRNG_H
#define BENCH_PRNG_H

#include <stdint.h>

/* The next number of the sequence in *state (which must not be 0). */
static inline uint64_t prng_step(uint64_t *state)
{
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return *state * 0x2545f4914f6cdd1du;
}

#endif
