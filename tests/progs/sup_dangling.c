/*
 * sup_dangling: a planted dangling-pointer write, for diehard's replicas to mask.
 *
 *   sup_dangling bug     frees the session object, then writes through the
 *                        stale pointer after allocating new records
 *   sup_dangling fixed   the same program, freeing the session only at the end
 *
 * The program allocates NTEMP scratch objects and a session object (all
 * RECSIZE bytes), frees (bug) the session and then the scratch objects,
 * allocates NREC records and writes "record I: intact" into each, then
 * "closes" the session by writing through its pointer, and prints the
 * records.
 *
 * The right answer is what `fixed` prints: every record intact.
 *
 * glibc keeps the last 7 freed chunks of a size in a last-in first-out cache,
 * so the 7th new record is the freed session and the stale write corrupts it:
 * `bug` prints a wrong record every time. DieHard hands out a freed slot again
 * only at random among the free slots of a class kept at most 1/M full (the
 * session is freed first, so it is back among them by the time the records
 * are allocated), so the stale write lands in free memory with high
 * probability; when it does hit a record, which one is random, so two
 * replicas are rarely wrong in the same way.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NTEMP 40
#define NREC 8
#define RECSIZE 32

static void *xmalloc(size_t n)
{
	void *p = malloc(n);
	if (p == NULL) {
		perror("malloc");
		exit(1);
	}
	return p;
}

int main(int argc, char **argv)
{
	if (argc != 2 || (strcmp(argv[1], "bug") != 0 && strcmp(argv[1], "fixed") != 0)) {
		fprintf(stderr, "usage: sup_dangling bug|fixed\n");
		return 2;
	}
	int bug = strcmp(argv[1], "bug") == 0;

	char *temp[NTEMP];
	for (int i = 0; i < NTEMP; i++) {
		temp[i] = xmalloc(RECSIZE);
		snprintf(temp[i], RECSIZE, "scratch %d", i);
	}
	char *session = xmalloc(RECSIZE);
	snprintf(session, RECSIZE, "session: alice, open");

	/* Through a volatile pointer: GCC knows what free means and would
	 * otherwise move or drop it, given the use after it. */
	void (*volatile release)(void *) = free;
	if (bug)
		release(session); /* the bug: session is used below */
	for (int i = 0; i < NTEMP; i++)
		free(temp[i]);

	char *rec[NREC];
	for (int i = 0; i < NREC; i++) {
		rec[i] = xmalloc(RECSIZE);
		snprintf(rec[i], RECSIZE, "record %d: intact", i);
	}

	/* The stale write. volatile keeps the compiler from reasoning about it. */
	static const char closed[RECSIZE] = "session: alice, CLOSED (stale)";
	volatile char *s = session;
	for (size_t j = 0; j < RECSIZE; j++)
		s[j] = closed[j];

	for (int i = 0; i < NREC; i++) {
		printf("%d: ", i);
		for (int j = 0; j < RECSIZE && rec[i][j] != '\0'; j++)
			putchar((unsigned char)rec[i][j] >= ' ' && (unsigned char)rec[i][j] < 127 ? rec[i][j] : '?');
		putchar('\n');
	}
	if (!bug)
		free(session);
	return 0;
}
