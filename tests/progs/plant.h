/* plant.h — what plant_overflow.c and plant_dangling.c share: their
 * command-line numbers and the contents they write into objects. */
#ifndef PLANT_H
#define PLANT_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* s as a number from min to max, or a one-line error naming prog and what,
 * and exit 2. */
static inline unsigned long plant_number(const char *prog, const char *s, const char *what, unsigned long min,
					 unsigned long max)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || s[0] == '-' || v < min || v > max) {
		fprintf(stderr, "%s: %s must be a number from %lu to %lu, not '%s'\n", prog, what, min, max, s);
		exit(2);
	}
	return v;
}

/* The arguments' [-r] (*report), then at most `most` numbers: returns the
 * index of the first number; prints usage and exits 2 on anything else. */
static inline int plant_options(int argc, char **argv, int most, const char *usage, bool *report)
{
	int a = 1;
	*report = a < argc && strcmp(argv[a], "-r") == 0;
	a += *report;
	if (argc - a > most || (a < argc && argv[a][0] == '-')) {
		fprintf(stderr, "usage: %s\n", usage);
		exit(2);
	}
	return a;
}

/* Byte j of object i: a function of (i, j) alone (splitmix64's finalizer). */
static inline unsigned char plant_pattern(uint64_t i, uint64_t j)
{
	uint64_t z = (i << 32 ^ j) + 0x9e3779b97f4a7c15ULL;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return (unsigned char)(z ^ (z >> 31));
}

#endif
