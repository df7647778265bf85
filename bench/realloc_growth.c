/*
 * realloc_growth — buffers grown with realloc, by small steps and by doubling.
 *
 * Why: growable arrays and string builders (vectors, read-whole-file loops,
 * output buffers) call realloc over and over. The cost depends on whether the
 * allocator can grow in place or must copy, and on how it moves a buffer from
 * small size classes to large (mmap-backed) objects. Several buffers grow at
 * once, interleaved, so no buffer always sits at the end of the heap.
 *
 * Each round grows BUFFER_COUNT buffers to a random target of 64 KiB - 4 MiB.
 * Half the buffers grow by small steps (1-256 bytes, the "append a line"
 * pattern), half by doubling (the "amortised vector" pattern). Every byte is
 * written from a pattern when it is appended; after each realloc the bytes
 * around the old end and a sample of earlier bytes are checked, and the whole
 * buffer is checked before it is freed. Any byte lost in a move is reported
 * and makes the program fail.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "prng.h"

enum { BUFFER_COUNT = 8, ROUNDS = 12, MIN_TARGET = 64 << 10, MAX_TARGET = 4 << 20 };

struct growing_buffer {
    unsigned char *bytes;
    size_t length;
    size_t target;
    int doubles;      /* grow by doubling, else by small steps */
    unsigned salt;    /* makes each buffer's byte pattern different */
};

static uint64_t prng_state = 0xa4093822299f31d0u;

static uint64_t prng_next(void)
{
    return prng_step(&prng_state);
}

static size_t prng_below(size_t bound)
{
    return (size_t)(prng_next() % bound);
}

static unsigned char pattern_byte(size_t index, unsigned salt)
{
    return (unsigned char)((index * 2654435761u) >> 13 ^ salt);
}

static void check_byte(const struct growing_buffer *buffer, size_t index)
{
    if (buffer->bytes[index] != pattern_byte(index, buffer->salt)) {
        fprintf(stderr, "realloc_growth: byte %zu of a %zu-byte buffer was lost\n",
                index, buffer->length);
        exit(1);
    }
}

static void start_buffer(struct growing_buffer *buffer, unsigned salt)
{
    buffer->bytes = NULL;
    buffer->length = 0;
    buffer->target = MIN_TARGET + prng_below(MAX_TARGET - MIN_TARGET + 1);
    buffer->doubles = (int)(prng_next() & 1);
    buffer->salt = salt;
}

/* One growth step; returns 1 while the buffer is still below its target. */
static int grow_buffer(struct growing_buffer *buffer)
{
    size_t old_length = buffer->length;
    size_t new_length;
    if (buffer->doubles)
        new_length = old_length == 0 ? 16 : old_length * 2;
    else
        new_length = old_length + 1 + prng_below(256);
    if (new_length > buffer->target)
        new_length = buffer->target;

    unsigned char *bytes = realloc(buffer->bytes, new_length);
    if (bytes == NULL) {
        fputs("realloc_growth: out of memory\n", stderr);
        exit(1);
    }
    buffer->bytes = bytes;
    for (size_t i = old_length; i < new_length; i++)
        bytes[i] = pattern_byte(i, buffer->salt);
    buffer->length = new_length;

    if (old_length > 0) {
        check_byte(buffer, 0);
        check_byte(buffer, old_length - 1);
        check_byte(buffer, prng_below(old_length));
    }
    return new_length < buffer->target;
}

/* Checks every byte, frees the buffer and returns a hash of its contents. */
static uint64_t finish_buffer(struct growing_buffer *buffer)
{
    uint64_t hash = buffer->length;
    for (size_t i = 0; i < buffer->length; i++) {
        check_byte(buffer, i);
        hash = hash * 31 + buffer->bytes[i];
    }
    free(buffer->bytes);
    buffer->bytes = NULL;
    return hash;
}

int main(void)
{
    struct growing_buffer buffers[BUFFER_COUNT];
    uint64_t checksum = 0;
    uint64_t reallocs = 0;

    for (int round = 0; round < ROUNDS; round++) {
        for (unsigned b = 0; b < BUFFER_COUNT; b++)
            start_buffer(&buffers[b], (unsigned)round * BUFFER_COUNT + b);
        int growing = BUFFER_COUNT;
        while (growing > 0) {
            growing = 0;
            for (unsigned b = 0; b < BUFFER_COUNT; b++) {
                if (buffers[b].length < buffers[b].target) {
                    growing += grow_buffer(&buffers[b]);
                    reallocs++;
                }
            }
        }
        for (unsigned b = 0; b < BUFFER_COUNT; b++)
            checksum = checksum * 31 + finish_buffer(&buffers[b]);
    }
    printf("reallocs %" PRIu64 "\n", reallocs);
    printf("checksum %016" PRIx64 "\n", checksum);
    return 0;
}
