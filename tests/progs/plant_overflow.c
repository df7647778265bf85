/*
 * plant_overflow: a planted heap overflow of a chosen size among many live
 * objects, to measure how often the randomized heap (alone, or under
 * `diehard -k 3`) masks it.
 *
 *   plant_overflow [-r] [N [SIZE [OVER]]]       defaults: 1000 32 32
 *
 * It allocates N objects of SIZE bytes, fills object i with a pattern that is
 * a function of (i, byte offset) alone, then writes OVER bytes past the end
 * of object N/2 (the victim) with a volatile byte loop, so no interposed
 * memcpy or strcpy can cut it short, and prints one line:
 *
 *   digest N SIZE HEX
 *
 * where HEX is the FNV-1a 64 of every object's first SIZE bytes in index
 * order. Nothing is freed and nothing else is allocated before the digest is
 * taken (stdio's buffer comes after).
 *
 * The right answer is the line printed with OVER = 0 (OVER is not in it, so
 * the two lines compare as they are): it is the same under any allocator.
 * An overflow that lands in free memory leaves it unchanged; one that
 * reaches another live object changes it, and which object it reaches
 * decides the wrong digest, so two randomized heaps are rarely wrong in the
 * same way. Under glibc the objects are consecutive chunks and the overflow
 * always reaches the next one: for SIZE 32, 8 bytes of slack, the next
 * chunk's size field, then its data: a wrong digest every time OVER > 16.
 *
 * -r also says on stderr, before the overflow, where it will land:
 *
 *   hits K            K live objects overlap [victim + SIZE, victim + SIZE + OVER)
 *
 * "hits 0" is a clean heap: the digest is right. It needs no reference
 * digest, so LD_PRELOAD runs can count clean heaps directly. (stderr, so
 * that stdout stays the same line with or without -r. Under diehard stderr
 * is voted too, and two replicas hit differently both say "hits 1": leave
 * -r out there.)
 *
 * Sizes over 64 KiB are DieHard's large objects, each in a mapping of its
 * own before a guard page: an overflow past its last page faults.
 *
 * Exit: 0 the digest was printed; 1 an allocation or a write failed;
 * 2 bad usage.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plant.h"

int main(int argc, char **argv)
{
	bool report;
	int a = plant_options(argc, argv, 3, "plant_overflow [-r] [N [SIZE [OVER]]]", &report);
	size_t n = a < argc ? plant_number("plant_overflow", argv[a++], "N", 1, 10000000) : 1000;
	size_t size = a < argc ? plant_number("plant_overflow", argv[a++], "SIZE", 1, 1 << 20) : 32;
	size_t over = a < argc ? plant_number("plant_overflow", argv[a++], "OVER", 0, 1 << 20) : 32;

	unsigned char **obj = calloc(n, sizeof *obj);
	if (obj == NULL) {
		perror("plant_overflow: calloc");
		return 1;
	}
	for (size_t i = 0; i < n; i++) {
		obj[i] = malloc(size);
		if (obj[i] == NULL) {
			perror("plant_overflow: malloc");
			return 1;
		}
		for (size_t j = 0; j < size; j++)
			obj[i][j] = plant_pattern(i, j);
	}
	size_t victim = n / 2;

	if (report) {
		/* Live objects the overflow will reach, by address alone. */
		uintptr_t lo = (uintptr_t)obj[victim] + size, hi = lo + over;
		size_t hits = 0;
		for (size_t i = 0; i < n && over > 0; i++) {
			uintptr_t p = (uintptr_t)obj[i];
			hits += i != victim && p < hi && p + size > lo;
		}
		if (fprintf(stderr, "hits %zu\n", hits) < 0 || fflush(stderr) != 0)
			return 1;
	}

	/* The bug: OVER bytes past the victim's end. volatile keeps it a
	 * byte loop the compiler cannot turn into a memset call. */
	volatile unsigned char *dst = obj[victim] + size;
	for (size_t j = 0; j < over; j++)
		dst[j] = (unsigned char)(0xa5 ^ j);

	uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a 64 */
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < size; j++) {
			h ^= obj[i][j];
			h *= 0x100000001b3ULL;
		}
	if (printf("digest %zu %zu %016" PRIx64 "\n", n, size, h) < 0 || fflush(stdout) != 0) {
		perror("plant_overflow: stdout");
		return 1;
	}
	return 0;
}
