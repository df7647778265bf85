/*
 * phase_shift — a program whose working set moves from one object size to
 * another: each phase builds a table of objects of one size, churns it, and
 * frees it before the next phase starts with a larger size.
 *
 * Why: long-running programs change what they allocate (a server loads its
 * configuration, then serves requests; a compiler parses, then optimises).
 * An allocator that keeps each size class at its own peak holds the sum of
 * the phases' peaks; one that gives memory back holds about the largest.
 * This is the benchmark where that shows in the peak resident size.
 *
 * PHASES phases of TABLE objects; phase p's objects are SIZES[p] bytes. A
 * phase fills the table, then CHURN times replaces a random entry (its first
 * byte is checked and hashed, the object freed and a new one allocated and
 * filled), then frees the whole table. A fixed-seed PRNG picks the entries,
 * so the checksum is the same under every allocator.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prng.h"

enum { PHASES = 3, TABLE = 200000, CHURN = 4 * TABLE };
static const size_t SIZES[PHASES] = { 48, 200, 900 };

static uint64_t prng_state = 0x452821e638d01377u;

static uint64_t prng_next(void)
{
    return prng_step(&prng_state);
}

static unsigned char *make(size_t size, uint64_t tag)
{
    unsigned char *p = malloc(size);
    if (p == NULL) {
        fputs("phase_shift: out of memory\n", stderr);
        exit(1);
    }
    memset(p, (int)(tag & 0xff), size);
    return p;
}

int main(void)
{
    static unsigned char *table[TABLE];
    static uint8_t tags[TABLE];
    uint64_t sum = 0;
    for (int phase = 0; phase < PHASES; phase++) {
        size_t size = SIZES[phase];
        for (int i = 0; i < TABLE; i++) {
            tags[i] = (uint8_t)prng_next();
            table[i] = make(size, tags[i]);
        }
        for (int r = 0; r < CHURN; r++) {
            int i = (int)(prng_next() % TABLE);
            if (table[i][0] != tags[i] || table[i][size - 1] != tags[i]) {
                fputs("phase_shift: an object changed under the program\n", stderr);
                return 1;
            }
            sum = sum * 31 + tags[i];
            free(table[i]);
            tags[i] = (uint8_t)prng_next();
            table[i] = make(size, tags[i]);
        }
        for (int i = 0; i < TABLE; i++) {
            sum = sum * 31 + table[i][size / 2];
            free(table[i]);
        }
    }
    printf("phase_shift: checksum %016" PRIx64 "\n", sum);
    return 0;
}
