/* digest.c — see digest.h for the construction and its bound.
 *
 * SipHash-2-4 (Aumasson and Bernstein, 2012), 128-bit output variant: v1
 * starts xored with 0xee, the first finalization xors 0xee into v2 and the
 * second 0xdd into v1; written from the paper's description and checked
 * against the reference vectors by the unit test. NH (Black et al., UMAC,
 * 1999): for a segment of 32-bit words m and key words k,
 *   NH = sum over pairs i of (m[2i] + k[2i]) * (m[2i+1] + k[2i+1])
 * with additions mod 2^32 and the sum mod 2^64; the second lane uses the key
 * shifted by four words. Invariant: word w of the message (8 bytes, counted
 * from the start) is pair (w mod 128) of segment (w / 128). */
#include "digest.h"

#include <string.h>

#define PAIRS (DIGEST_SEGMENT / 8) /* 8-byte words per segment */
#define SHIFT 4                    /* second lane's key offset, in 32-bit words */

struct sip {
	uint64_t v0, v1, v2, v3;
};

static inline uint64_t rotl(uint64_t x, unsigned b)
{
	return (x << b) | (x >> (64 - b));
}

static inline void round2(uint64_t *v0, uint64_t *v1, uint64_t *v2, uint64_t *v3)
{
	for (int i = 0; i < 2; i++) {
		*v0 += *v1; *v1 = rotl(*v1, 13); *v1 ^= *v0; *v0 = rotl(*v0, 32);
		*v2 += *v3; *v3 = rotl(*v3, 16); *v3 ^= *v2;
		*v0 += *v3; *v3 = rotl(*v3, 21); *v3 ^= *v0;
		*v2 += *v1; *v1 = rotl(*v1, 17); *v1 ^= *v2; *v2 = rotl(*v2, 32);
	}
}

static inline uint32_t load32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t load64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void sip_init(struct sip *s, const uint8_t key[16])
{
	uint64_t k0 = load64(key), k1 = load64(key + 8);
	s->v0 = k0 ^ 0x736f6d6570736575ull;
	s->v1 = k1 ^ 0x646f72616e646f6dull ^ 0xee;
	s->v2 = k0 ^ 0x6c7967656e657261ull;
	s->v3 = k1 ^ 0x7465646279746573ull;
}

static inline void sip_absorb(struct sip *s, uint64_t m)
{
	s->v3 ^= m;
	round2(&s->v0, &s->v1, &s->v2, &s->v3);
	s->v0 ^= m;
}

/* The last word holds the message length in its top byte (mod 256). */
static void sip_final(struct sip *s, uint64_t last, uint8_t out[16])
{
	sip_absorb(s, last);
	s->v2 ^= 0xee;
	round2(&s->v0, &s->v1, &s->v2, &s->v3);
	round2(&s->v0, &s->v1, &s->v2, &s->v3);
	uint64_t a = s->v0 ^ s->v1 ^ s->v2 ^ s->v3;
	s->v1 ^= 0xdd;
	round2(&s->v0, &s->v1, &s->v2, &s->v3);
	round2(&s->v0, &s->v1, &s->v2, &s->v3);
	uint64_t b = s->v0 ^ s->v1 ^ s->v2 ^ s->v3;
	for (int i = 0; i < 8; i++) {
		out[i] = (uint8_t)(a >> (8 * i));
		out[8 + i] = (uint8_t)(b >> (8 * i));
	}
}

void digest_siphash128(const uint8_t key[16], const void *m, size_t n, uint8_t out[16])
{
	struct sip s;
	sip_init(&s, key);
	const uint8_t *c = m;
	size_t i = 0;
	for (; n - i >= 8; i += 8)
		sip_absorb(&s, load64(c + i));
	uint64_t last = (uint64_t)n << 56;
	for (unsigned j = 0; i + j < n; j++)
		last |= (uint64_t)c[i + j] << (8 * j);
	sip_final(&s, last, out);
}

void digest_key_init(struct digest_key *k, const uint8_t seed[DIGEST_SEED_BYTES])
{
	memcpy(k->sip, seed, sizeof k->sip);
	/* NH key words: SipHash of a counter under the seed, in another domain
	 * (a 9-byte input) than anything the outer hash sees. */
	size_t words = sizeof k->nh / sizeof k->nh[0];
	for (size_t i = 0; i < words; i += 4) {
		uint8_t in[9] = { 'N' }, out[16];
		for (int b = 0; b < 8; b++)
			in[1 + b] = (uint8_t)((uint64_t)i >> (8 * b));
		digest_siphash128(seed, in, sizeof in, out);
		for (size_t j = 0; j < 4 && i + j < words; j++)
			k->nh[i + j] = load32(out + 4 * j);
	}
}

void digest_init(struct digest *d, const struct digest_key *k)
{
	struct sip s;
	sip_init(&s, k->sip);
	*d = (struct digest){ .key = k, .v0 = s.v0, .v1 = s.v1, .v2 = s.v2, .v3 = s.v3 };
}

/* The segment's sums go to SipHash. */
static void end_segment(struct digest *d)
{
	struct sip s = { d->v0, d->v1, d->v2, d->v3 };
	sip_absorb(&s, d->a0);
	sip_absorb(&s, d->a1);
	d->v0 = s.v0, d->v1 = s.v1, d->v2 = s.v2, d->v3 = s.v3;
	d->a0 = d->a1 = 0;
}

/* Hashes n whole words at c, all within the current segment. The fast path:
 * local sums, no branches but the loop's. */
static inline void hash_words(struct digest *d, const uint8_t *c, size_t n)
{
	const uint32_t *k = d->key->nh + 2 * (d->words % PAIRS);
	uint64_t a0 = d->a0, a1 = d->a1;
	for (size_t i = 0; i < n; i++, c += 8, k += 2) {
		uint32_t m0 = load32(c), m1 = load32(c + 4);
		a0 += (uint64_t)(uint32_t)(m0 + k[0]) * (uint32_t)(m1 + k[1]);
		a1 += (uint64_t)(uint32_t)(m0 + k[SHIFT]) * (uint32_t)(m1 + k[SHIFT + 1]);
	}
	d->a0 = a0;
	d->a1 = a1;
	d->words += n;
	if (d->words % PAIRS == 0)
		end_segment(d);
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
			uint8_t w[8];
			for (int i = 0; i < 8; i++)
				w[i] = (uint8_t)(d->tail >> (8 * i));
			hash_words(d, w, 1);
			d->tail = 0;
			have = 0;
		}
	}
	while (n >= 8) {
		size_t room = PAIRS - d->words % PAIRS, take = n / 8 < room ? n / 8 : room;
		hash_words(d, c, take);
		c += 8 * take;
		n -= 8 * take;
	}
	for (unsigned i = 0; i < n; i++)
		d->tail |= (uint64_t)c[i] << (8 * i);
}

void digest_final(struct digest *d, uint8_t out[DIGEST_BYTES])
{
	if (d->len & 7) {
		uint8_t w[8];
		for (int i = 0; i < 8; i++)
			w[i] = (uint8_t)(d->tail >> (8 * i)); /* zero-padded */
		hash_words(d, w, 1);
	}
	if (d->words % PAIRS != 0)
		end_segment(d);
	struct sip s = { d->v0, d->v1, d->v2, d->v3 };
	sip_absorb(&s, d->len);
	sip_final(&s, 0, out);
}
