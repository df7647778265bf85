/* chacha.h — the ChaCha20 stream cipher's keystream (RFC 8439), used as the
 * run's shared random source: every replica's n-th getrandom and every
 * replica's n-th /dev/urandom stream are the keystream for nonce n under one
 * key read from the real /dev/urandom when diehard starts. The same key and
 * nonce give the same bytes in every replica; a new run gets a new key, and
 * the bytes stay as unpredictable as the kernel's.
 *
 * Pure code: no I/O, no allocation. */
#ifndef DIEHARD_CHACHA_H
#define DIEHARD_CHACHA_H

#include <stddef.h>
#include <stdint.h>

#define CHACHA_KEY_BYTES 32
#define CHACHA_BLOCK_BYTES 64

struct chacha {
	uint32_t state[16];
	uint8_t block[CHACHA_BLOCK_BYTES];
	unsigned used; /* bytes of block already handed out */
};

#define CHACHA_NONCE_BYTES 12

/* Starts the keystream for (key, nonce) at block counter, as RFC 8439 lays
 * them out. */
void chacha_init(struct chacha *c, const uint8_t key[CHACHA_KEY_BYTES], const uint8_t nonce[CHACHA_NONCE_BYTES],
		 uint32_t counter);

/* The keystream numbered (domain, n): nonce = domain (32 bits) then n (64
 * bits), little-endian, counter 0. */
void chacha_init_stream(struct chacha *c, const uint8_t key[CHACHA_KEY_BYTES], uint32_t domain, uint64_t n);

/* The next n bytes of the keystream. */
void chacha_read(struct chacha *c, void *out, size_t n);

#endif
