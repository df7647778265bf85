/*
 * sup_hang: a planted uninitialized read that hangs the program on about one
 * heap layout in four, for diehard's straggler and replacement tests.
 *
 *   sup_hang [LINES]   prints "line I" for I < LINES (default 3), then
 *                      "answer 42" and exits 0.
 *
 * Between the first lines and the answer it reads a flag from a heap object
 * it never initialized (the bug) and spins forever when its two low bits are
 * zero. Under glibc a fresh object from a new heap reads as zero: it always
 * hangs. On DieHard's heap with random fill, the flag is a random byte: one
 * replica in four spins, silently, and the others finish with the right
 * output. The supervisor must kill the spinning ones (stragglers once
 * another finished) and replace them, never hang.
 */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	int lines = argc > 1 ? atoi(argv[1]) : 3;
	for (int i = 0; i < lines; i++)
		printf("line %d\n", i);
	fflush(stdout);
	volatile unsigned char *flags = malloc(64); /* never initialized: the bug */
	if (flags == NULL)
		return 1;
	while ((flags[17] & 3) == 0)
		; /* spins: no output, no exit */
	printf("answer 42\n");
	return 0;
}
