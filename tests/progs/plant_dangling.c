/*
 * plant_dangling: a planted premature free, read through its dangling
 * pointer after further allocations, to measure how often the randomized
 * heap (alone, or under `diehard -k 3`) masks it.
 *
 *   plant_dangling [-r] [N [SIZE [A [F]]]]       defaults: 1000 32 100 0
 *
 * It allocates N objects of SIZE bytes and fills object i with a pattern that
 * is a function of (i, byte offset) alone, frees object N/2 (the bug: it is
 * still used below), then frees F other objects, rightly (N/2 + 1 onwards,
 * never used again: a program that frees as it goes), then makes A more
 * allocations of SIZE bytes, filling the a-th with the pattern of index
 * N + a, and finally reads the freed object through its dangling pointer and
 * prints one line:
 *
 *   dangling N SIZE intact|overwritten HEX
 *
 * where HEX is the FNV-1a 64 of the SIZE bytes read and "intact" says they
 * are still the freed object's pattern. The N - 1 - F others stay live to
 * the end; nothing else is allocated before the read (stdio's buffer comes
 * after).
 *
 * The right answer is "intact" with the pattern's digest (what A = 0 prints
 * on a heap that leaves freed memory alone): the same for every A and F.
 * libdiehard.so's thread cache keeps a thread's frees pending, unusable,
 * until 32 of a class have gathered (cache.h), so with F < 31 the freed slot
 * is never handed out again in this program: always intact. With F >= 31 it
 * is back in the heap, handed out again only at random among the free slots
 * of its class, so it is usually still intact; when one of the A
 * allocations did get it, the bytes read are that allocation's pattern, and
 * which one got it decides the wrong digest: two randomized heaps are rarely
 * wrong in the same way. glibc writes its free-list links into the first 16
 * bytes of the freed chunk at once, and hands the chunk out again to the
 * next allocation of its size: "overwritten" every time.
 *
 * -r also says on stderr, before the read, how many of the A allocations
 * overlap the freed object's bytes:
 *
 *   reused K
 *
 * "reused 0" on DieHard's heap (which writes nothing into freed memory) is a
 * masked run, without a reference to compare with. (stderr, so that stdout
 * is the same line with or without -r.)
 *
 * Sizes over 64 KiB are DieHard's large objects, unmapped when freed: the
 * read then faults. Keep SIZE at 64 KiB or less.
 *
 * Exit: 0 the line was printed; 1 an allocation or a write failed; 2 bad
 * usage.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plant.h"

static void *xmalloc(size_t n)
{
	void *p = malloc(n);
	if (p == NULL) {
		perror("plant_dangling: malloc");
		exit(1);
	}
	return p;
}

int main(int argc, char **argv)
{
	bool report;
	int a = plant_options(argc, argv, 4, "plant_dangling [-r] [N [SIZE [A [F]]]]", &report);
	size_t n = a < argc ? plant_number("plant_dangling", argv[a++], "N", 1, 10000000) : 1000;
	size_t size = a < argc ? plant_number("plant_dangling", argv[a++], "SIZE", 1, 1 << 16) : 32;
	size_t more = a < argc ? plant_number("plant_dangling", argv[a++], "A", 0, 10000000) : 100;
	size_t frees = a < argc ? plant_number("plant_dangling", argv[a++], "F", 0, 10000000) : 0;
	if (frees > n - 1 - n / 2) {
		fprintf(stderr, "plant_dangling: F must be at most N - 1 - N/2 (%zu)\n", n - 1 - n / 2);
		return 2;
	}

	unsigned char **obj = calloc(n + more, sizeof *obj);
	if (obj == NULL) {
		perror("plant_dangling: calloc");
		return 1;
	}
	for (size_t i = 0; i < n; i++) {
		obj[i] = xmalloc(size);
		for (size_t j = 0; j < size; j++)
			obj[i][j] = plant_pattern(i, j);
	}
	size_t victim = n / 2;
	unsigned char *stale = obj[victim];

	/* The bug. Through a volatile pointer: GCC knows what free means and
	 * would otherwise reason about the use after it. */
	void (*volatile release)(void *) = free;
	release(stale);
	for (size_t i = victim + 1; i <= victim + frees; i++) {
		free(obj[i]);
		obj[i] = NULL;
	}

	for (size_t i = n; i < n + more; i++) {
		obj[i] = xmalloc(size);
		for (size_t j = 0; j < size; j++)
			obj[i][j] = plant_pattern(i, j);
	}

	if (report) {
		uintptr_t lo = (uintptr_t)stale, hi = lo + size;
		size_t reused = 0;
		for (size_t i = n; i < n + more; i++) {
			uintptr_t p = (uintptr_t)obj[i];
			reused += p < hi && p + size > lo;
		}
		if (fprintf(stderr, "reused %zu\n", reused) < 0 || fflush(stderr) != 0)
			return 1;
	}

	/* The use after free: read through the dangling pointer. volatile
	 * keeps the compiler from reasoning about it. */
	volatile const unsigned char *s = stale;
	uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a 64 */
	bool intact = true;
	for (size_t j = 0; j < size; j++) {
		unsigned char c = s[j];
		intact &= c == plant_pattern(victim, j);
		h ^= c;
		h *= 0x100000001b3ULL;
	}
	if (printf("dangling %zu %zu %s %016" PRIx64 "\n", n, size, intact ? "intact" : "overwritten", h) < 0 ||
	    fflush(stdout) != 0) {
		perror("plant_dangling: stdout");
		return 1;
	}
	return 0;
}
