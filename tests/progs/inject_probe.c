/*
 * inject_probe: a small program for tests/inject.bats, the fault injector's
 * test (allocator/inject.h).
 *
 *   inject_probe pattern N   mallocs N objects of 100 bytes and prints one
 *                            character per object: 'x' if it got less than
 *                            100 usable bytes (an injected under-allocation),
 *                            '.' otherwise. The pattern shows which
 *                            allocations the injector hit.
 *   inject_probe dangling    allocates an object A and fills it, then 20 more
 *                            of the same size, checks A, and frees them all,
 *                            A last. Prints "intact" or "corrupted": with A
 *                            freed early by the injector, glibc hands A's
 *                            memory to one of the later objects.
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	if (argc >= 3 && strcmp(argv[1], "pattern") == 0) {
		int n = atoi(argv[2]);
		char line[4096];
		if (n < 1 || n >= (int)sizeof line)
			return 2;
		for (int i = 0; i < n; i++) {
			char *p = malloc(100);
			if (p == NULL)
				return 1;
			line[i] = malloc_usable_size(p) < 100 ? 'x' : '.';
			free(p);
		}
		line[n] = '\0';
		puts(line);
		return 0;
	}
	if (argc >= 2 && strcmp(argv[1], "dangling") == 0) {
		char *a = malloc(64), *b[20];
		if (a == NULL)
			return 1;
		memset(a, 'A', 64);
		for (int i = 0; i < 20; i++) {
			if ((b[i] = malloc(64)) == NULL)
				return 1;
			memset(b[i], 'B', 64);
		}
		int intact = 1;
		for (int i = 0; i < 64; i++)
			intact &= a[i] == 'A';
		puts(intact ? "intact" : "corrupted");
		for (int i = 0; i < 20; i++)
			free(b[i]);
		free(a);
		return 0;
	}
	fprintf(stderr, "usage: inject_probe pattern N | dangling\n");
	return 2;
}
