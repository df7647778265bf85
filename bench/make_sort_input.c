/*
 * make_sort_input — writes the deterministic text file that the "sort" real
 * command sorts.
 *
 *   make_sort_input BYTES > FILE
 *
 * Why: the real-command benchmark needs about 50 MB of text that is the same on
 * every machine and every run (so sort's output can be compared between
 * allocators), without shipping it in the repository. Lines look like a log or
 * a word list: two to six lowercase words of 1-12 letters and a number, so sort
 * has long common prefixes and many duplicates to deal with. Output stops at
 * the first line that would go past BYTES.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prng.h"

static uint64_t prng_state = 0xbe5466cf34e90c6cu;

static uint64_t prng_next(void)
{
    return prng_step(&prng_state);
}

/* Skewed toward a small alphabet at the start, so words repeat and share prefixes. */
static size_t put_word(char *line)
{
    size_t length = 1 + (size_t)(prng_next() % 12);
    for (size_t i = 0; i < length; i++) {
        uint64_t bits = prng_next();
        unsigned letters = i < 2 ? 6 : 26;
        line[i] = (char)('a' + bits % letters);
    }
    return length;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fputs("usage: make_sort_input BYTES > FILE\n", stderr);
        return 2;
    }
    char *end;
    errno = 0;
    unsigned long long limit = strtoull(argv[1], &end, 10);
    if (errno != 0 || *end != '\0' || end == argv[1]) {
        fprintf(stderr, "make_sort_input: bad byte count '%s'\n", argv[1]);
        return 2;
    }

    char line[256];
    unsigned long long written = 0;
    for (;;) {
        size_t length = 0;
        int words = 2 + (int)(prng_next() % 5);
        for (int w = 0; w < words; w++) {
            length += put_word(line + length);
            line[length++] = ' ';
        }
        int printed = snprintf(line + length, sizeof line - length, "%llu\n",
                               (unsigned long long)(prng_next() % 1000000));
        if (printed < 0 || (size_t)printed >= sizeof line - length) {
            fputs("make_sort_input: line too long\n", stderr);
            return 1;
        }
        length += (size_t)printed;
        if (written + length > limit)
            break;
        if (fwrite(line, 1, length, stdout) != length) {
            perror("make_sort_input: write");
            return 1;
        }
        written += length;
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        perror("make_sort_input: write");
        return 1;
    }
    return 0;
}
