/* digest.h — a keyed 128-bit digest of committed output, so that a
 * replacement replica's old output can be checked against what was committed
 * long ago without keeping the bytes.
 *
 * Construction (UMAC's shape): the bytes are cut into 1 KiB segments; each is
 * compressed by NH, a universal hash that costs one 32x32->64 multiply per
 * 4 bytes and lane, in two lanes with Toeplitz-shifted keys; the two 64-bit
 * sums of every segment, then the total length, go through SipHash-2-4 with
 * 128-bit output. SipHash alone was a quarter of the supervisor's time while
 * a replacement caught up over a 1 GB stream (bench/replace); this runs at
 * several GB/s on one core.
 *
 * The key is drawn per run and never leaves the supervisor, so a replica
 * cannot aim for a collision: two different blocks of equal length get the
 * same digest with probability about 2^-64 (NH's two lanes; SipHash adds
 * nothing to that bound but hides NH's structure), blocks of different
 * lengths never collide by construction of the last input. Comparison of
 * current output stays byte for byte (voter.h); digests are for what the
 * history ring no longer holds.
 *
 * Incremental: bytes may be fed in any pieces; the digest is that of their
 * concatenation. Pure code, no I/O. */
#ifndef DIEHARD_DIGEST_H
#define DIEHARD_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#define DIGEST_SEED_BYTES 16
#define DIGEST_BYTES 16
#define DIGEST_SEGMENT 1024 /* bytes per NH segment */

/* Expanded once per run from a random seed; read-only afterwards. */
struct digest_key {
	uint8_t sip[16];
	uint32_t nh[DIGEST_SEGMENT / 4 + 4]; /* + the second lane's shift */
};

struct digest {
	const struct digest_key *key;
	uint64_t v0, v1, v2, v3; /* SipHash state over segment sums */
	uint64_t a0, a1;         /* NH sums of the current segment */
	uint64_t words;          /* 8-byte words hashed so far */
	uint64_t tail;           /* up to 7 bytes not yet hashed, little-endian */
	uint64_t len;            /* bytes fed so far */
};

void digest_key_init(struct digest_key *k, const uint8_t seed[DIGEST_SEED_BYTES]);
void digest_init(struct digest *d, const struct digest_key *k);
void digest_update(struct digest *d, const void *p, size_t n);
/* The digest of everything fed; d is left unusable until digest_init. */
void digest_final(struct digest *d, uint8_t out[DIGEST_BYTES]);

/* SipHash-2-4 with 128-bit output of one message: the outer hash, exposed so
 * that the unit test can check it against the reference vectors. */
void digest_siphash128(const uint8_t key[16], const void *m, size_t n, uint8_t out[16]);

#endif
