/*
 * digest_speed — how fast the supervisor digests committed output, against
 * SipHash-2-4 alone and against memcmp (what a byte-for-byte check costs).
 *
 *   digest_speed [MEGABYTES]   (default 1000)
 *
 * Why: diehard digests every committed byte in 64 KiB blocks (so that a
 * replacement's old output can be checked without keeping it), and a
 * replacement's output older than the history ring is digested again, all on
 * the supervisor's one thread. This prints GB/s for: the digest
 * (supervisor/digest.c: NH over 1 KiB segments, SipHash-2-4 over their sums),
 * SipHash-2-4-128 over the same blocks (what the digest used before), and
 * memcmp of two equal blocks. One 64 KiB buffer of pseudo-random bytes is fed
 * again and again: it stays in cache, as the ring's hot end does.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "digest.h"

#define BLOCK (64 * 1024)

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	long mb = argc > 1 ? atol(argv[1]) : 1000;
	if (mb <= 0) {
		fprintf(stderr, "usage: digest_speed [MEGABYTES]\n");
		return 1;
	}
	size_t blocks = (size_t)mb * 1000000 / BLOCK;
	static uint8_t a[BLOCK], b[BLOCK];
	uint64_t x = 88172645463325252ULL;
	for (size_t i = 0; i < BLOCK; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		a[i] = b[i] = (uint8_t)x;
	}
	uint8_t seed[DIGEST_SEED_BYTES] = { 1, 2, 3 }, out[DIGEST_BYTES], acc = 0;
	struct digest_key key;
	digest_key_init(&key, seed);

	double t = now();
	for (size_t i = 0; i < blocks; i++) {
		struct digest d;
		digest_init(&d, &key);
		digest_update(&d, a, BLOCK);
		digest_final(&d, out);
		acc ^= out[0];
	}
	double t_digest = now() - t;

	t = now();
	for (size_t i = 0; i < blocks; i++) {
		digest_siphash128(seed, a, BLOCK, out);
		acc ^= out[0];
	}
	double t_sip = now() - t;

	/* Called through a volatile pointer: the compiler cannot hoist it. */
	int (*volatile cmp)(const void *, const void *, size_t) = memcmp;
	t = now();
	for (size_t i = 0; i < blocks; i++)
		acc ^= (uint8_t)(cmp(a, b, BLOCK) != 0);
	double t_cmp = now() - t;

	double gb = (double)blocks * BLOCK / 1e9;
	printf("digest (NH + SipHash)   %6.2f GB/s\n", gb / t_digest);
	printf("SipHash-2-4-128 alone   %6.2f GB/s\n", gb / t_sip);
	printf("memcmp                  %6.2f GB/s\n", gb / t_cmp);
	printf("(%.2f GB each; checksum %u)\n", gb, acc);
	return 0;
}
