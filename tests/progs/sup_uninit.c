/*
 * sup_uninit: a planted read of uninitialized heap memory, for diehard to catch.
 *
 *   sup_uninit bug     prints a checksum of a malloc'ed buffer it never wrote
 *   sup_uninit fixed   the same program, clearing the buffer first
 *
 * Under glibc a fresh buffer from a new process's heap is all zeros, so `bug`
 * prints the same line as `fixed` on every run: the bug is invisible. With
 * DIEHARD_FILL=random (which diehard sets) every replica's buffer holds
 * different random bytes, so the replicas print different checksums and
 * no majority can form.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIZE 64

int main(int argc, char **argv)
{
	if (argc != 2 || (strcmp(argv[1], "bug") != 0 && strcmp(argv[1], "fixed") != 0)) {
		fprintf(stderr, "usage: sup_uninit bug|fixed\n");
		return 2;
	}
	/* Through a volatile pointer: GCC would turn malloc + memset into
	 * calloc, which returns zeros under any allocator. */
	void *(*volatile alloc)(size_t) = malloc;
	unsigned char *buf = alloc(SIZE);
	if (buf == NULL) {
		perror("malloc");
		return 1;
	}
	if (strcmp(argv[1], "fixed") == 0)
		memset(buf, 0, SIZE);
	/* The bytes may have been set elsewhere (by the allocator): the compiler
	 * must read them. */
	__asm__ volatile("" : : "r"(buf) : "memory");
	uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */
	for (int i = 0; i < SIZE; i++)
		h = (h ^ buf[i]) * 0x100000001b3ULL;
	printf("checksum: %016" PRIx64 "\n", h);
	free(buf);
	return 0;
}
