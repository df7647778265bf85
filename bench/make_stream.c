/*
 * make_stream — writes the deterministic byte stream that bench/supervisor
 * pushes through `diehard -k 3 cat`.
 *
 *   make_stream BYTES > FILE
 *
 * Why: the supervisor benchmark moves about 1 GB through the replicas' pipes
 * and checks that what diehard commits is byte for byte the input, so the input
 * must be the same on every run and every machine, without shipping a gigabyte
 * in the repository or depending on openssl. The bytes come from a fixed-seed
 * xorshift64* generator: incompressible and without the long runs of equal
 * bytes that would let a comparison look faster than it is. Output is exactly
 * BYTES bytes, written in 1 MiB blocks.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prng.h"

enum { BLOCK_BYTES = 1 << 20 };

static uint64_t prng_state = 0x9e3779b97f4a7c15u;

static uint64_t prng_next(void)
{
    return prng_step(&prng_state);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fputs("usage: make_stream BYTES > FILE\n", stderr);
        return 2;
    }
    char *end;
    errno = 0;
    unsigned long long remaining = strtoull(argv[1], &end, 10);
    if (errno != 0 || *end != '\0' || end == argv[1]) {
        fprintf(stderr, "make_stream: bad byte count '%s'\n", argv[1]);
        return 2;
    }

    static unsigned char block[BLOCK_BYTES];
    while (remaining > 0) {
        /* Little-endian by hand, so the bytes do not depend on the machine. */
        for (size_t i = 0; i < BLOCK_BYTES; i += 8) {
            uint64_t word = prng_next();
            for (size_t j = 0; j < 8; j++)
                block[i + j] = (unsigned char)(word >> (8 * j));
        }
        size_t length = remaining < BLOCK_BYTES ? (size_t)remaining : BLOCK_BYTES;
        if (fwrite(block, 1, length, stdout) != length) {
            perror("make_stream: write");
            return 1;
        }
        remaining -= length;
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        perror("make_stream: write");
        return 1;
    }
    return 0;
}
