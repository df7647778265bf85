/* digest.h — a keyed 128-bit digest (SipHash-2-4 with 128-bit output) of
 * committed output, so that a replacement replica's old output can be
 * checked against what was committed long ago without keeping the bytes.
 *
 * The key is drawn per run and never leaves the supervisor, so a replica
 * cannot aim for a collision: two different blocks get the same digest with
 * probability 2^-128 per comparison. Comparison of current output stays byte
 * for byte (voter.h); digests are for what the history ring no longer holds.
 *
 * Incremental: bytes may be fed in any pieces; the digest is that of their
 * concatenation. Pure code, no I/O. */
#ifndef DIEHARD_DIGEST_H
#define DIEHARD_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#define DIGEST_KEY_BYTES 16
#define DIGEST_BYTES 16

struct digest {
	uint64_t v0, v1, v2, v3;
	uint64_t tail;   /* up to 7 bytes not yet absorbed, little-endian */
	uint64_t len;    /* bytes fed so far */
};

void digest_init(struct digest *d, const uint8_t key[DIGEST_KEY_BYTES]);
void digest_update(struct digest *d, const void *p, size_t n);
/* The digest of everything fed; d is left unusable until digest_init. */
void digest_final(struct digest *d, uint8_t out[DIGEST_BYTES]);

#endif
