/* Unit tests of voter/pastdigits.c: times that differ in their digits are
 * alike, any other byte is not (letters, punctuation, a digit against a
 * non-digit, bytes around '0' and '9'); the prefix stops at the first such
 * byte; and randomized against the invariant of pastdigits.h (alike over n
 * exactly when the masks are equal). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pastdigits.h"
#include "tap.h"

static size_t alike(const char *a, const char *b)
{
	size_t n = strlen(a) < strlen(b) ? strlen(a) : strlen(b);
	return pastdigits_alike((const unsigned char *)a, (const unsigned char *)b, n);
}

int main(void)
{
	const char *t1 = "127.0.0.1 - - [30/Nov/2026:20:39:59 +0000] \"GET / HTTP/1.1\" 200 4096\n";
	const char *t2 = "127.0.0.1 - - [30/Nov/2026:20:40:00 +0000] \"GET / HTTP/1.1\" 200 4096\n";
	CHECK(alike(t1, t2) == strlen(t1), "an access-log line a second later is alike");
	CHECK(alike("1:M 30 Nov 2026 20:29:04.127 * DB saved on disk\n", "1:M 30 Nov 2026 20:29:04.135 * DB saved on disk\n") ==
		      strlen("1:M 30 Nov 2026 20:29:04.127 * DB saved on disk\n"),
	      "a redis line a few milliseconds later is alike");
	CHECK(alike("GET /a 200\n", "GET /b 200\n") == 5, "a letter differs: the prefix ends before it");
	CHECK(alike("size 12\n", "size 1x\n") == 6, "a digit against a letter differs");
	CHECK(alike("t=1/2\n", "t=1:2\n") == 3, "':' and '/', just past '9' and before '0', differ");
	CHECK(alike("", "") == 0, "nothing is alike over nothing");
	CHECK(alike("abc", "abc") == 3, "equal bytes are alike");

	/* Every pair of byte values: alike exactly when equal or both digits. */
	unsigned bad = 0;
	for (unsigned x = 0; x < 256; x++)
		for (unsigned y = 0; y < 256; y++) {
			unsigned char a = (unsigned char)x, b = (unsigned char)y;
			int want = x == y || (x >= '0' && x <= '9' && y >= '0' && y <= '9');
			bad += (pastdigits_alike(&a, &b, 1) == 1) != want;
		}
	CHECK(bad == 0, "each pair of byte values: alike iff equal or both digits (%u wrong)", bad);

	unsigned char m[8];
	pastdigits_mask(m, (const unsigned char *)"a1b9:/0x", 8);
	CHECK(memcmp(m, "a0b0:/0x", 8) == 0, "the mask makes every digit '0' and leaves the rest");

	/* Randomized: the invariant, on strings over a small alphabet. */
	srand(4242);
	unsigned wrong = 0, alikes = 0;
	for (unsigned round = 0; round < 20000; round++) {
		unsigned char a[64], b[64], ma[64], mb[64];
		size_t n = (size_t)(rand() % 64);
		static const char alpha[] = "0123456789:/ aZ\n";
		for (size_t i = 0; i < n; i++) {
			a[i] = (unsigned char)alpha[rand() % 16];
			b[i] = rand() % 4 == 0 ? (unsigned char)alpha[rand() % 16] : a[i];
		}
		pastdigits_mask(ma, a, n);
		pastdigits_mask(mb, b, n);
		size_t p = pastdigits_alike(a, b, n);
		alikes += p == n;
		wrong += (p == n) != (memcmp(ma, mb, n) == 0);
		/* The prefix is the masks' common prefix. */
		size_t q = 0;
		while (q < n && ma[q] == mb[q])
			q++;
		wrong += p != q;
	}
	CHECK(wrong == 0 && alikes > 100, "20000 random pairs: alike over n iff the masks are equal (%u wrong, %u alike)",
	      wrong, alikes);
	return tap_done();
}
