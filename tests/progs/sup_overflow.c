/*
 * sup_overflow: a planted heap buffer overflow, for diehard's replicas to mask.
 *
 *   sup_overflow bug     copies a 56-byte string into a 32-byte record
 *   sup_overflow fixed   the same program with that record allocated big enough
 *
 * It allocates NREC records of RECSIZE bytes, writes "record I: intact" into
 * each, then copies a customer name that is too long into record VICTIM with
 * a hand-written loop (so no interposed strcpy/memcpy can cut it short) and
 * prints every record, at most RECSIZE bytes of each.
 *
 * The right answer is what `fixed` prints: the victim's first RECSIZE bytes
 * and every other record intact; it is the same under any allocator.
 *
 * Under glibc the records are consecutive chunks (32 bytes of data, then the
 * next chunk's 8-byte size field), so the 24 extra bytes clobber the size
 * field of record VICTIM+1 and its first 8 bytes: `bug` prints a corrupted
 * record, every time. On DieHard's heap the record sits in a random slot of a
 * size class kept at most 1/M full; the extra bytes land in the next slot,
 * which holds another of our records only with a probability of about
 * (NREC-1) / capacity (about 7/128 here), and then which record is hit is
 * random, so two replicas are rarely wrong in the same way.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NREC 8
#define RECSIZE 32
#define VICTIM 3

static const char name[] = "name: Bartholomew Fitzgerald-Wolfeschlegelstein, Esq..."; /* 55 + NUL */

int main(int argc, char **argv)
{
	if (argc != 2 || (strcmp(argv[1], "bug") != 0 && strcmp(argv[1], "fixed") != 0)) {
		fprintf(stderr, "usage: sup_overflow bug|fixed\n");
		return 2;
	}
	int bug = strcmp(argv[1], "bug") == 0;
	_Static_assert(sizeof name == RECSIZE + 24, "the overflow is 24 bytes");

	char *rec[NREC];
	for (int i = 0; i < NREC; i++) {
		size_t size = i == VICTIM && !bug ? sizeof name : RECSIZE;
		rec[i] = malloc(size);
		if (rec[i] == NULL) {
			perror("malloc");
			return 1;
		}
		snprintf(rec[i], RECSIZE, "record %d: intact", i);
	}

	/* The bug: no bounds check. volatile keeps it a byte loop. */
	volatile char *dst = rec[VICTIM];
	for (size_t j = 0; j < sizeof name; j++)
		dst[j] = name[j];

	for (int i = 0; i < NREC; i++) {
		printf("%d: ", i);
		for (int j = 0; j < RECSIZE && rec[i][j] != '\0'; j++)
			putchar((unsigned char)rec[i][j] >= ' ' && (unsigned char)rec[i][j] < 127 ? rec[i][j] : '?');
		putchar('\n');
	}
	return 0;
}
