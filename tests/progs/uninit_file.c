/*
 * uninit_file: writes 256 bytes of a fresh malloc'ed object, never
 * initialized, into the file named by its argument. Under diehard --ci each
 * replica's heap is filled differently (docs/CI.md), so the file differs
 * between replicas: a file divergence, which --ci reports with the path
 * (tests/files.bats).
 *
 *   uninit_file PATH
 *
 * Exit: 0 written; 1 the file could not be written; 2 bad usage.
 */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: uninit_file PATH\n");
		return 2;
	}
	unsigned char *p = malloc(256);
	FILE *f = fopen(argv[1], "wb");
	if (p == NULL || f == NULL || fwrite(p, 1, 256, f) != 256 || fclose(f) != 0) {
		perror(argv[1]);
		return 1;
	}
	free(p);
	return 0;
}
