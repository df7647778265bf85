/* digest.c — see digest.h. SipHash-2-4 (Aumasson and Bernstein, 2012), the
 * 128-bit output variant: v1 starts xored with 0xee, the first finalization
 * xors 0xee into v2 and the second 0xdd into v1. Written from the paper's
 * description; the unit test checks the reference vectors. */
#include "digest.h"

#include <string.h>

static inline uint64_t rotl(uint64_t x, unsigned b)
{
	return (x << b) | (x >> (64 - b));
}

static inline void round2(struct digest *d)
{
	for (int i = 0; i < 2; i++) {
		d->v0 += d->v1; d->v1 = rotl(d->v1, 13); d->v1 ^= d->v0; d->v0 = rotl(d->v0, 32);
		d->v2 += d->v3; d->v3 = rotl(d->v3, 16); d->v3 ^= d->v2;
		d->v0 += d->v3; d->v3 = rotl(d->v3, 21); d->v3 ^= d->v0;
		d->v2 += d->v1; d->v1 = rotl(d->v1, 17); d->v1 ^= d->v2; d->v2 = rotl(d->v2, 32);
	}
}

static inline uint64_t load64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static inline void absorb(struct digest *d, uint64_t m)
{
	d->v3 ^= m;
	round2(d);
	d->v0 ^= m;
}

void digest_init(struct digest *d, const uint8_t key[DIGEST_KEY_BYTES])
{
	uint64_t k0 = load64(key), k1 = load64(key + 8);
	d->v0 = k0 ^ 0x736f6d6570736575ull;
	d->v1 = k1 ^ 0x646f72616e646f6dull ^ 0xee;
	d->v2 = k0 ^ 0x6c7967656e657261ull;
	d->v3 = k1 ^ 0x7465646279746573ull;
	d->tail = 0;
	d->len = 0;
}

void digest_update(struct digest *d, const void *p, size_t n)
{
	const uint8_t *c = p;
	unsigned have = (unsigned)(d->len & 7);
	d->len += n;
	/* Finish a word begun by an earlier piece. */
	while (have != 0 && n > 0) {
		d->tail |= (uint64_t)*c++ << (8 * have);
		n--;
		if (++have == 8) {
			absorb(d, d->tail);
			d->tail = 0;
			have = 0;
		}
	}
	for (; n >= 8; n -= 8, c += 8)
		absorb(d, load64(c));
	for (unsigned i = 0; i < n; i++)
		d->tail |= (uint64_t)c[i] << (8 * i);
}

void digest_final(struct digest *d, uint8_t out[DIGEST_BYTES])
{
	absorb(d, d->tail | d->len << 56);
	d->v2 ^= 0xee;
	round2(d);
	round2(d);
	uint64_t a = d->v0 ^ d->v1 ^ d->v2 ^ d->v3;
	d->v1 ^= 0xdd;
	round2(d);
	round2(d);
	uint64_t b = d->v0 ^ d->v1 ^ d->v2 ^ d->v3;
	for (int i = 0; i < 8; i++) {
		out[i] = (uint8_t)(a >> (8 * i));
		out[8 + i] = (uint8_t)(b >> (8 * i));
	}
}
