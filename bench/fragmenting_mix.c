/*
 * fragmenting_mix — a large live heap of mixed sizes, randomly replaced.
 *
 * Why: long-running programs (caches, interpreters, servers) keep a big set of
 * objects of very different sizes alive and replace them in random order. Freed
 * holes then rarely fit the next request, so the heap fragments, and both speed
 * and peak memory show how the allocator copes. This is the benchmark where the
 * resident set matters most.
 *
 * POOL_SIZE slots are filled, then REPLACEMENTS times a random slot's object is
 * checked, freed, and replaced by a new one. Sizes run from 8 bytes to 64 KiB
 * and are skewed toward small ones, roughly as in real programs:
 *   60% 8-64 B, 25% 65-512 B, 10% 513 B-4 KiB, 4% 4-16 KiB, 1% 16-64 KiB.
 * Every object is filled with a byte drawn for it, and its size and fill byte
 * are kept beside the pointer; on free the first, last and a middle byte must
 * still match, so overlapping objects are caught. The checksum hashes the
 * sizes and fill bytes of everything freed.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prng.h"

enum { POOL_SIZE = 40000, REPLACEMENTS = 4000000 };

struct slot {
    unsigned char *bytes;
    uint32_t size;
    uint32_t fill_byte;
};

static uint64_t prng_state = 0x452821e638d01377u;

static uint64_t prng_next(void)
{
    return prng_step(&prng_state);
}

static uint32_t between(uint32_t low, uint32_t high)
{
    return low + (uint32_t)(prng_next() % (high - low + 1));
}

static uint32_t skewed_size(void)
{
    uint32_t percent = (uint32_t)(prng_next() % 100);
    if (percent < 60)
        return between(8, 64);
    if (percent < 85)
        return between(65, 512);
    if (percent < 95)
        return between(513, 4096);
    if (percent < 99)
        return between(4097, 16384);
    return between(16385, 65536);
}

static void fill_slot(struct slot *slot)
{
    slot->size = skewed_size();
    slot->fill_byte = (uint32_t)(prng_next() >> 56);
    slot->bytes = malloc(slot->size);
    if (slot->bytes == NULL) {
        fputs("fragmenting_mix: out of memory\n", stderr);
        exit(1);
    }
    memset(slot->bytes, (int)slot->fill_byte, slot->size);
}

/* Checks the object is intact, frees it, and returns a hash of what it was. */
static uint64_t empty_slot(struct slot *slot)
{
    const unsigned char *bytes = slot->bytes;
    if (bytes[0] != slot->fill_byte || bytes[slot->size / 2] != slot->fill_byte ||
        bytes[slot->size - 1] != slot->fill_byte) {
        fprintf(stderr, "fragmenting_mix: a %" PRIu32 "-byte object was overwritten\n",
                slot->size);
        exit(1);
    }
    free(slot->bytes);
    slot->bytes = NULL;
    return ((uint64_t)slot->size << 8 | slot->fill_byte) * 0x9e3779b97f4a7c15u;
}

int main(void)
{
    static struct slot pool[POOL_SIZE];
    uint64_t checksum = 0;
    uint64_t live_bytes = 0, peak_live_bytes = 0;

    for (size_t i = 0; i < POOL_SIZE; i++) {
        fill_slot(&pool[i]);
        live_bytes += pool[i].size;
    }
    peak_live_bytes = live_bytes;

    for (long step = 0; step < REPLACEMENTS; step++) {
        struct slot *slot = &pool[prng_next() % POOL_SIZE];
        live_bytes -= slot->size;
        checksum = checksum * 31 + empty_slot(slot);
        fill_slot(slot);
        live_bytes += slot->size;
        if (live_bytes > peak_live_bytes)
            peak_live_bytes = live_bytes;
    }

    for (size_t i = 0; i < POOL_SIZE; i++)
        checksum = checksum * 31 + empty_slot(&pool[i]);
    printf("peak live bytes %" PRIu64 "\n", peak_live_bytes);
    printf("checksum %016" PRIx64 "\n", checksum);
    return 0;
}
