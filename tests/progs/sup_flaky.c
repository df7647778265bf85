/*
 * sup_flaky: a planted uninitialized read, round after round, that makes a
 * replica print a wrong line now and then, each wrong replica differently.
 *
 *   sup_flaky ROUNDS ODDS [DELAY_MS]
 *
 * Each round allocates a 256-byte record, initializes only its first 248
 * bytes (the bug: a length off by a word) and prints "round I: S" with S
 * the sum of the record: the bytes, and the last 8 as one word, added only
 * when it is a multiple of ODDS. A replica on a randomly filled heap goes
 * wrong in a round with probability about 1/ODDS, printing a sum off by
 * that random word: two wrong replicas (a majority of three) print the
 * same wrong line only by a chance of 2^-64 (with a random byte instead, 7
 * wrong values of 256, they did, once in some hundred runs). Under glibc
 * a fresh heap reads as zero and it never goes wrong. The right output is
 * the sum of the 248 initialized bytes. DELAY_MS sleeps between rounds
 * (default 0).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: sup_flaky ROUNDS ODDS [DELAY_MS]\n");
		return 2;
	}
	int rounds = atoi(argv[1]), odds = atoi(argv[2]), delay = argc > 3 ? atoi(argv[3]) : 0;
	if (rounds < 0 || odds < 1 || delay < 0) {
		fprintf(stderr, "sup_flaky: bad arguments\n");
		return 2;
	}
	for (int r = 0; r < rounds; r++) {
		unsigned char *rec = malloc(256);
		if (rec == NULL)
			return 1;
		unsigned long sum = 0;
		for (int i = 0; i < 248; i++) {
			rec[i] = (unsigned char)(r * 31 + i);
			sum += rec[i];
		}
		unsigned long last; /* the bug: rec[248..255] were never written */
		memcpy(&last, rec + 248, sizeof last);
		if (last % (unsigned long)odds == 0)
			sum += last;
		printf("round %d: %lu\n", r, sum);
		fflush(stdout);
		free(rec);
		if (delay > 0) {
			struct timespec ts = { delay / 1000, (long)(delay % 1000) * 1000000L };
			nanosleep(&ts, NULL);
		}
	}
	return 0;
}
