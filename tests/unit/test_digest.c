/* Unit tests of digest.c: the outer SipHash-2-4-128 against the reference
 * vectors of the SipHash authors (key 00..0f, messages 00, 00 01, ...: the
 * first three); the NH+SipHash digest fed in every kind of split (within a
 * word, across words and across the 1 KiB segments) against one piece; and
 * messages that differ by one bit, by the order of two words or by length,
 * and seeds that differ, giving other digests. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "digest.h"
#include "tap.h"

#define LEN 5000 /* four whole segments and a partial one */

static void digest_of(const struct digest_key *k, const uint8_t *m, size_t n, uint8_t out[DIGEST_BYTES])
{
	struct digest d;
	digest_init(&d, k);
	digest_update(&d, m, n);
	digest_final(&d, out);
}

static bool hex_is(const uint8_t *got, const char *want)
{
	char hex[2 * DIGEST_BYTES + 1];
	for (int i = 0; i < DIGEST_BYTES; i++)
		snprintf(hex + 2 * i, 3, "%02x", got[i]);
	if (strcmp(hex, want) == 0)
		return true;
	printf("#   got %s\n#   want %s\n", hex, want);
	return false;
}

static bool split3(const struct digest_key *k, const uint8_t *m, size_t n, size_t a, size_t b,
		   const uint8_t whole[DIGEST_BYTES])
{
	struct digest d;
	uint8_t out[DIGEST_BYTES];
	digest_init(&d, k);
	digest_update(&d, m, a);
	digest_update(&d, m + a, b - a);
	digest_update(&d, m + b, n - b);
	digest_final(&d, out);
	return memcmp(out, whole, DIGEST_BYTES) == 0;
}

int main(void)
{
	uint8_t seed[DIGEST_SEED_BYTES], out[DIGEST_BYTES], whole[DIGEST_BYTES];
	static uint8_t m[LEN];
	for (int i = 0; i < DIGEST_SEED_BYTES; i++)
		seed[i] = (uint8_t)i;
	for (int i = 0; i < LEN; i++)
		m[i] = (uint8_t)(i * 7 + 1 + i / 251);

	static const char *const vectors[] = { "a3817f04ba25a8e66df67214c7550293", "da87c1d86b99af44347659119b22fc45",
					       "8177228da4a45dc7fca38bdef60affe4" };
	uint8_t seq[3] = { 0, 1, 2 };
	for (size_t n = 0; n < 3; n++) {
		digest_siphash128(seed, seq, n, out);
		CHECK(hex_is(out, vectors[n]), "siphash128: reference vector for a %zu-byte message", n);
	}

	struct digest_key k;
	digest_key_init(&k, seed);
	digest_of(&k, m, LEN, whole);

	/* Splits: near the start, around every segment boundary, at the end. */
	bool all = true;
	for (size_t a = 0; a <= 40 && all; a++)
		for (size_t b = a; b <= a + 20; b++)
			all &= split3(&k, m, LEN, a, b, whole);
	for (size_t seg = 1024; seg < LEN && all; seg += 1024)
		for (size_t a = seg - 12; a <= seg + 12; a++)
			for (size_t b = a; b <= a + 9; b++)
				all &= split3(&k, m, LEN, a, b, whole);
	for (size_t a = LEN - 20; a <= LEN; a++)
		all &= split3(&k, m, LEN, a, LEN, whole);
	CHECK(all, "digest: 5000 bytes fed in three pieces, split within words, across words and segments: one digest");
	struct digest d;
	digest_init(&d, &k);
	for (size_t i = 0; i < LEN; i++)
		digest_update(&d, m + i, 1);
	digest_final(&d, out);
	CHECK(memcmp(out, whole, sizeof out) == 0, "digest: fed one byte at a time, the same digest");

	/* One flipped bit anywhere changes it; so does swapping two words. */
	bool differ = true;
	for (size_t i = 0; i < LEN; i++) {
		m[i] ^= (uint8_t)(1u << (i % 8));
		digest_of(&k, m, LEN, out);
		differ &= memcmp(out, whole, sizeof out) != 0;
		m[i] ^= (uint8_t)(1u << (i % 8));
	}
	CHECK(differ, "digest: each of 5000 one-bit changes of the message changes the digest");
	uint8_t w[8];
	memcpy(w, m + 2048, 8);
	memcpy(m + 2048, m + 2056, 8);
	memcpy(m + 2056, w, 8);
	digest_of(&k, m, LEN, out);
	CHECK(memcmp(out, whole, sizeof out) != 0, "digest: two 8-byte words swapped give another digest");
	memcpy(m + 2056, m + 2048, 8);
	memcpy(m + 2048, w, 8);
	digest_of(&k, m, LEN, out);
	CHECK(memcmp(out, whole, sizeof out) == 0, "digest: swapped back, the first digest again");

	/* Another seed, another key: another digest. */
	seed[5] ^= 1;
	struct digest_key k2;
	digest_key_init(&k2, seed);
	digest_of(&k2, m, LEN, out);
	CHECK(memcmp(out, whole, sizeof out) != 0, "digest: another seed gives another digest");

	/* Length matters, also where zero padding would hide it. */
	static const uint8_t z[2100];
	static const size_t lens[] = { 0, 1, 7, 8, 9, 1023, 1024, 1025, 1032, 2048, 2049 };
	enum { NLENS = sizeof lens / sizeof lens[0] };
	uint8_t dz[NLENS][DIGEST_BYTES];
	bool distinct = true;
	for (size_t i = 0; i < NLENS; i++) {
		digest_of(&k, z, lens[i], dz[i]);
		for (size_t j = 0; j < i; j++)
			distinct &= memcmp(dz[i], dz[j], DIGEST_BYTES) != 0;
	}
	CHECK(distinct, "digest: runs of 0, 1, 7, 8, 9, 1023, 1024, 1025, 1032, 2048 and 2049 zero bytes all differ");
	return tap_done();
}
