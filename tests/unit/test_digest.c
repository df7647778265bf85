/* Unit tests of digest.c (SipHash-2-4, 128-bit output): the reference
 * vectors of the SipHash authors (key 00..0f, messages 00, 00 01, ...: the
 * first three), bytes fed in every split against one piece, and keys and
 * messages that differ by one bit giving other digests. */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "digest.h"
#include "tap.h"

static void digest_of(const uint8_t *key, const uint8_t *m, size_t n, uint8_t out[DIGEST_BYTES])
{
	struct digest d;
	digest_init(&d, key);
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

int main(void)
{
	uint8_t key[DIGEST_KEY_BYTES], m[300], out[DIGEST_BYTES], whole[DIGEST_BYTES];
	for (int i = 0; i < DIGEST_KEY_BYTES; i++)
		key[i] = (uint8_t)i;
	for (int i = 0; i < 300; i++)
		m[i] = (uint8_t)(i * 7 + 1);
	static const char *const vectors[] = { "a3817f04ba25a8e66df67214c7550293", "da87c1d86b99af44347659119b22fc45",
					       "8177228da4a45dc7fca38bdef60affe4" };
	uint8_t seq[3] = { 0, 1, 2 };
	for (size_t n = 0; n < 3; n++) {
		digest_of(key, seq, n, out);
		CHECK(hex_is(out, vectors[n]), "digest: reference vector for a %zu-byte message", n);
	}

	/* Every split of 300 bytes into three pieces gives the same digest. */
	digest_of(key, m, sizeof m, whole);
	bool all = true;
	for (size_t a = 0; a <= 40 && all; a++)
		for (size_t b = a; b <= a + 20 && b <= sizeof m; b++) {
			struct digest d;
			digest_init(&d, key);
			digest_update(&d, m, a);
			digest_update(&d, m + a, b - a);
			digest_update(&d, m + b, sizeof m - b);
			digest_final(&d, out);
			all &= memcmp(out, whole, sizeof out) == 0;
		}
	CHECK(all, "digest: 300 bytes fed in three pieces at every split point near the start give one digest");
	struct digest d;
	digest_init(&d, key);
	for (size_t i = 0; i < sizeof m; i++)
		digest_update(&d, m + i, 1);
	digest_final(&d, out);
	CHECK(memcmp(out, whole, sizeof out) == 0, "digest: fed one byte at a time, the same digest");

	/* One flipped bit anywhere, in the message or the key, changes it. */
	bool differ = true;
	for (size_t i = 0; i < sizeof m; i++) {
		m[i] ^= 0x10;
		digest_of(key, m, sizeof m, out);
		differ &= memcmp(out, whole, sizeof out) != 0;
		m[i] ^= 0x10;
	}
	CHECK(differ, "digest: each of 300 one-bit changes of the message changes the digest");
	key[5] ^= 1;
	digest_of(key, m, sizeof m, out);
	CHECK(memcmp(out, whole, sizeof out) != 0, "digest: another key gives another digest");
	key[5] ^= 1;
	/* Length matters: a message and the same with a zero byte more. */
	uint8_t z[9] = { 0 };
	uint8_t a8[DIGEST_BYTES];
	digest_of(key, z, 8, a8);
	digest_of(key, z, 9, out);
	CHECK(memcmp(out, a8, sizeof out) != 0, "digest: 8 zero bytes and 9 zero bytes differ");
	return tap_done();
}
