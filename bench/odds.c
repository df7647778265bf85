/*
 * odds — how the heap's placement measures against DieHard's odds: the
 * slot next to an object is free with probability 1 - (its class's
 * density), independently of the object (paper 001, section 4).
 *
 *   odds N SIZE        (run under libdiehard: LD_PRELOAD, DIEHARD_SEED)
 *
 * Allocates N objects of SIZE bytes and keeps them all, then prints one
 * line of numbers, over the objects sorted by address:
 *   span       slots from the lowest object to the highest (SIZE apart);
 *   density    N / span: the class's fill where the objects lie;
 *   neighbour  the fraction of objects whose next slot holds another
 *              object: uniform placement over the span gives
 *              (N - 1) / (span - 1), about the density;
 *   expected   that uniform figure;
 *   eighths    the density of each eighth of the span, lowest first
 *              (uniform placement: each near the density).
 * bench/odds runs it over seeds, sizes and counts and compares the
 * neighbour rate with the uniform one.
 *
 * Addresses only, no dereference: nothing here depends on the allocator
 * beyond malloc's contract.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static int by_address(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	char *end;
	long n = argc == 3 ? strtol(argv[1], &end, 10) : 0;
	long size = argc == 3 && *end == '\0' ? strtol(argv[2], &end, 10) : 0;
	if (argc != 3 || *end != '\0' || n < 2 || n > 10000000 || size < 1 || size > 1 << 20) {
		fputs("usage: odds N SIZE (2 <= N <= 10000000, 1 <= SIZE <= 1048576)\n", stderr);
		return 2;
	}
	uintptr_t *at = malloc((size_t)n * sizeof *at);
	if (at == NULL) {
		perror("odds: malloc");
		return 1;
	}
	for (long i = 0; i < n; i++) {
		void *p = malloc((size_t)size);
		if (p == NULL) {
			perror("odds: malloc");
			return 1;
		}
		at[i] = (uintptr_t)p;
	}
	qsort(at, (size_t)n, sizeof *at, by_address);
	/* The slot: the smallest gap between two objects, which under a
	 * size-class allocator is the class's slot size (SIZE rounded up). */
	uintptr_t slot = UINTPTR_MAX;
	for (long i = 0; i + 1 < n; i++)
		if (at[i + 1] - at[i] < slot)
			slot = at[i + 1] - at[i];
	if (slot == 0 || slot == UINTPTR_MAX) {
		fputs("odds: two objects at one address\n", stderr);
		return 1;
	}
	double span = (double)((at[n - 1] - at[0]) / slot + 1);
	long next = 0;
	for (long i = 0; i + 1 < n; i++)
		next += at[i + 1] - at[i] == slot;
	long eighth[8] = { 0 };
	for (long i = 0; i < n; i++)
		eighth[(size_t)((double)((at[i] - at[0]) / slot) * 8 / span)]++;
	printf("span %.0f density %.4f neighbour %.4f expected %.4f eighths", span, (double)n / span,
	       (double)next / (double)n, (double)(n - 1) / (span - 1));
	for (int e = 0; e < 8; e++)
		printf(" %.3f", (double)eighth[e] / (span / 8));
	printf("\n");
	return 0;
}
