/*
 * nd_loop: many clock reads in a row, for the virtualization tests
 * (tests/diehard_virtualize.bats): every one of them is answered by diehard
 * under virtualization, and the program must still finish (and see time go
 * forward).
 *
 *   nd_loop [N]
 *
 * Makes N (default 100000) calls of clock_gettime(CLOCK_MONOTONIC), checks
 * that the clock never steps back, and prints "N calls".  Exits 1 on a
 * backwards step or an error.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv)
{
	long n = 100000;
	if (argc > 2) {
		fprintf(stderr, "usage: nd_loop [N]\n");
		return 2;
	}
	if (argc == 2) {
		char *end;
		errno = 0;
		n = strtol(argv[1], &end, 10);
		if (errno != 0 || end == argv[1] || *end != '\0' || n < 1) {
			fprintf(stderr, "nd_loop: bad count '%s'\n", argv[1]);
			return 2;
		}
	}
	struct timespec prev = {0, 0}, ts;
	for (long i = 0; i < n; i++) {
		if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) {
			fprintf(stderr, "nd_loop: clock_gettime: %s\n", strerror(errno));
			return 1;
		}
		if (ts.tv_sec < prev.tv_sec || (ts.tv_sec == prev.tv_sec && ts.tv_nsec < prev.tv_nsec)) {
			fprintf(stderr, "nd_loop: CLOCK_MONOTONIC went back at call %ld: %lld.%09ld after %lld.%09ld\n",
				i, (long long)ts.tv_sec, ts.tv_nsec, (long long)prev.tv_sec, prev.tv_nsec);
			return 1;
		}
		prev = ts;
	}
	printf("%ld calls\n", n);
	if (fflush(stdout) != 0) {
		fprintf(stderr, "nd_loop: stdout: %s\n", strerror(errno));
		return 1;
	}
	return 0;
}
