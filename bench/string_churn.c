/*
 * string_churn — many short strings created, concatenated, copied and freed.
 *
 * Why: text processing (parsers, loggers, template engines) lives on short
 * heap strings of many different lengths with short and unpredictable
 * lifetimes. This spreads the load over every small size class (2 to 401 bytes)
 * instead of the single size that binary_trees hammers, and frees objects in an
 * order unrelated to the order they were made.
 *
 * A table of SLOT_COUNT strings starts full of random strings of length 1-200.
 * Each step picks a random slot and replaces its string with one of: a new
 * random string (length 1-200), the concatenation of two other slots (capped at
 * 400 characters), a copy (strdup) of another slot, or a substring (strndup) of
 * another slot. Every string is hashed (length and a sample of its bytes) when
 * it is freed, so the checksum covers all the text ever made and shows whether
 * the allocator kept it intact.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prng.h"

enum { SLOT_COUNT = 32768, STEPS = 6000000, MAX_FRESH_LENGTH = 200, MAX_CONCAT_LENGTH = 400 };

static uint64_t prng_state = 0x13198a2e03707344u;

static uint64_t prng_next(void)
{
    return prng_step(&prng_state);
}

static size_t prng_below(size_t bound)
{
    return (size_t)(prng_next() % bound);
}

static void *checked(void *pointer)
{
    if (pointer == NULL) {
        fputs("string_churn: out of memory\n", stderr);
        exit(1);
    }
    return pointer;
}

static char *fresh_string(void)
{
    size_t length = 1 + prng_below(MAX_FRESH_LENGTH);
    char *text = checked(malloc(length + 1));
    uint64_t bits = 0;
    for (size_t i = 0; i < length; i++) {
        if (i % 8 == 0)
            bits = prng_next();
        text[i] = (char)('a' + (bits & 0xff) % 26);
        bits >>= 8;
    }
    text[length] = '\0';
    return text;
}

static char *concatenation(const char *first, const char *second)
{
    size_t first_length = strlen(first);
    size_t second_length = strlen(second);
    if (first_length + second_length > MAX_CONCAT_LENGTH)
        second_length = MAX_CONCAT_LENGTH - first_length;
    char *text = checked(malloc(first_length + second_length + 1));
    memcpy(text, first, first_length);
    memcpy(text + first_length, second, second_length);
    text[first_length + second_length] = '\0';
    return text;
}

static char *substring(const char *source)
{
    size_t length = strlen(source);
    size_t start = prng_below(length);
    size_t count = 1 + prng_below(length - start);
    return checked(strndup(source + start, count));
}

/*
 * FNV-1a over the length and up to 16 bytes spread across the string: enough
 * to notice a string the allocator let something else overwrite, without
 * turning the benchmark into a hashing benchmark.
 */
static uint64_t string_hash(const char *text)
{
    size_t length = strlen(text);
    size_t stride = length / 16 + 1;
    uint64_t hash = (0xcbf29ce484222325u ^ length) * 0x100000001b3u;
    for (size_t i = 0; i < length; i += stride)
        hash = (hash ^ (unsigned char)text[i]) * 0x100000001b3u;
    return (hash ^ (unsigned char)text[length - 1]) * 0x100000001b3u;
}

int main(void)
{
    static char *slots[SLOT_COUNT];
    uint64_t checksum = 0;
    uint64_t bytes_made = 0;

    for (size_t i = 0; i < SLOT_COUNT; i++)
        slots[i] = fresh_string();

    for (long step = 0; step < STEPS; step++) {
        size_t target = prng_below(SLOT_COUNT);
        const char *other = slots[prng_below(SLOT_COUNT)];
        const char *another = slots[prng_below(SLOT_COUNT)];
        char *made;
        switch (prng_below(4)) {
        case 0: made = fresh_string(); break;
        case 1: made = concatenation(other, another); break;
        case 2: made = checked(strdup(other)); break;
        default: made = substring(other); break;
        }
        bytes_made += strlen(made);
        /* Free the old string only now: 'other' may have been the target. */
        checksum = checksum * 31 + string_hash(slots[target]);
        free(slots[target]);
        slots[target] = made;
    }

    for (size_t i = 0; i < SLOT_COUNT; i++) {
        checksum = checksum * 31 + string_hash(slots[i]);
        free(slots[i]);
    }
    printf("bytes made %" PRIu64 "\n", bytes_made);
    printf("checksum %016" PRIx64 "\n", checksum);
    return 0;
}
