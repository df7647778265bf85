/* random.h — the allocator's pseudo-random generator.
 *
 * Design: xoshiro256** (256 bits of state, 64-bit output) written from its
 * published description. It is the source of every placement decision and of
 * every random fill byte, so it must be fast (a handful of cycles, inlined) and
 * have far more state than the 128-bit seed that feeds it. It is not a
 * cryptographic generator and need not be: DieHard's guarantees are
 * probabilistic against accidental errors, not against an adversary who can
 * read the heap.
 *
 * Streams: the process has one 128-bit seed. Each thread, and each child after
 * fork, derives its own stream from (seed, a tag) through splitmix64, so a run
 * is reproducible from the seed alone while threads never share state (no
 * locks on the fast path).
 *
 * Invariant: a state is never all zero (xoshiro's one fixed point).
 */
#ifndef DIEHARD_RANDOM_H
#define DIEHARD_RANDOM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct rng {
	uint64_t s[4];
};

static inline uint64_t rng_rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

/* splitmix64: a good mixer for turning structured input (seed words, counters)
 * into well-distributed state words. Advances *x. */
static inline uint64_t rng_splitmix(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static inline uint64_t rng_next(struct rng *r)
{
	uint64_t *s = r->s;
	uint64_t result = rng_rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rng_rotl(s[3], 45);
	return result;
}

/* Derives a stream from the 128-bit seed and a tag that names the stream
 * (thread ordinal, fork draw). Different tags give unrelated streams. The tag
 * is hashed into two keys, one per seed word, so that no choice of seed (equal
 * words, zeros) makes the state words equal or zero; each state word then
 * depends on both seed words, and a few warm-up rounds diffuse the rest. */
static inline void rng_derive(struct rng *r, const uint64_t seed[2], uint64_t tag)
{
	uint64_t k = tag;
	uint64_t a = seed[0] ^ rng_splitmix(&k);
	uint64_t b = seed[1] ^ rng_splitmix(&k);
	r->s[0] = rng_splitmix(&a);
	r->s[1] = rng_splitmix(&b) + r->s[0];
	r->s[2] = rng_splitmix(&a) ^ r->s[1];
	r->s[3] = rng_splitmix(&b) + r->s[2];
	if ((r->s[0] | r->s[1] | r->s[2] | r->s[3]) == 0)
		r->s[0] = 1;
	for (int i = 0; i < 8; i++)
		(void)rng_next(r);
}

/* A uniform integer in [0, n), n > 0, by the multiply-high method: one
 * multiplication instead of a division. The bias is at most n / 2^64, far
 * below anything observable for heap slot counts. */
static inline uint64_t rng_below(struct rng *r, uint64_t n)
{
	__extension__ typedef unsigned __int128 u128;
	return (uint64_t)(((u128)rng_next(r) * n) >> 64);
}

/* Fills len bytes at p with fresh random bytes (not a repeated word): the
 * words rng_next would give, in order. A chunk of words is drawn on a local
 * copy of the state into a local array, the state stored, then the chunk
 * copied out: stores through p (bytes, which may alias anything) would
 * otherwise make the compiler reload and store the four words at every
 * step (a third of the speed), and a fault on p (an Archipelago page
 * restored in the handler, which draws from this generator too) finds the
 * state already past the words it interrupts, so it never reuses them. */
static inline void rng_fill(struct rng *r, void *p, size_t len)
{
	unsigned char *b = p;
	while (len > 0) {
		uint64_t w[32];
		size_t n = len < sizeof w ? (len + 7) / 8 : 32;
		struct rng l = *r;
		for (size_t i = 0; i < n; i++)
			w[i] = rng_next(&l);
		*r = l;
		size_t c = len < sizeof w ? len : sizeof w;
		__builtin_memcpy(b, w, c);
		b += c;
		len -= c;
	}
}

#endif
