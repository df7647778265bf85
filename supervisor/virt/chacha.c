/* chacha.c — see chacha.h. Written from RFC 8439 section 2.3; its test
 * vectors are in tests/unit/test_ndlog.c. */
#include "chacha.h"

#include <string.h>

static inline uint32_t rotl(uint32_t x, int n)
{
	return (x << n) | (x >> (32 - n));
}

static inline uint32_t load32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

#define QUARTER(a, b, c, d)                  \
	do {                                 \
		a += b; d ^= a; d = rotl(d, 16); \
		c += d; b ^= c; b = rotl(b, 12); \
		a += b; d ^= a; d = rotl(d, 8);  \
		c += d; b ^= c; b = rotl(b, 7);  \
	} while (0)

/* One 64-byte block for the current counter, then the counter moves on. */
static void next_block(struct chacha *c)
{
	uint32_t x[16];
	memcpy(x, c->state, sizeof x);
	for (int i = 0; i < 10; i++) {
		QUARTER(x[0], x[4], x[8], x[12]);
		QUARTER(x[1], x[5], x[9], x[13]);
		QUARTER(x[2], x[6], x[10], x[14]);
		QUARTER(x[3], x[7], x[11], x[15]);
		QUARTER(x[0], x[5], x[10], x[15]);
		QUARTER(x[1], x[6], x[11], x[12]);
		QUARTER(x[2], x[7], x[8], x[13]);
		QUARTER(x[3], x[4], x[9], x[14]);
	}
	for (int i = 0; i < 16; i++) {
		uint32_t v = x[i] + c->state[i];
		c->block[4 * i] = (uint8_t)v;
		c->block[4 * i + 1] = (uint8_t)(v >> 8);
		c->block[4 * i + 2] = (uint8_t)(v >> 16);
		c->block[4 * i + 3] = (uint8_t)(v >> 24);
	}
	c->state[12]++;
	c->used = 0;
}

void chacha_init(struct chacha *c, const uint8_t key[CHACHA_KEY_BYTES], const uint8_t nonce[CHACHA_NONCE_BYTES],
		 uint32_t counter)
{
	/* "expand 32-byte k" */
	c->state[0] = 0x61707865;
	c->state[1] = 0x3320646e;
	c->state[2] = 0x79622d32;
	c->state[3] = 0x6b206574;
	for (int i = 0; i < 8; i++)
		c->state[4 + i] = load32(key + 4 * i);
	c->state[12] = counter;
	for (int i = 0; i < 3; i++)
		c->state[13 + i] = load32(nonce + 4 * i);
	c->used = CHACHA_BLOCK_BYTES;
}

void chacha_init_stream(struct chacha *c, const uint8_t key[CHACHA_KEY_BYTES], uint32_t domain, uint64_t n)
{
	uint8_t nonce[CHACHA_NONCE_BYTES];
	for (int i = 0; i < 4; i++)
		nonce[i] = (uint8_t)(domain >> (8 * i));
	for (int i = 0; i < 8; i++)
		nonce[4 + i] = (uint8_t)(n >> (8 * i));
	chacha_init(c, key, nonce, 0);
}

void chacha_read(struct chacha *c, void *out, size_t n)
{
	uint8_t *p = out;
	while (n > 0) {
		if (c->used == CHACHA_BLOCK_BYTES)
			next_block(c);
		size_t take = CHACHA_BLOCK_BYTES - c->used;
		if (take > n)
			take = n;
		memcpy(p, c->block + c->used, take);
		c->used += (unsigned)take;
		p += take;
		n -= take;
	}
}
