/*
 * nd_static: a statically linked program that reads the clocks, for the
 * virtualization tests (tests/diehard_virtualize.bats).  It never loads
 * libdiehard.so or any shared library, so glibc's clock functions reach the
 * vDSO directly: the same lines in every replica show that diehard patched
 * the vDSO of a static binary too.
 *
 *   nd_static
 *
 * Prints three lines: "clock_gettime SECONDS.NANOSECONDS" (CLOCK_REALTIME),
 * "gettimeofday SECONDS.MICROSECONDS" and "time SECONDS".
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

int main(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_REALTIME, &ts) != 0) {
		fprintf(stderr, "nd_static: clock_gettime: %s\n", strerror(errno));
		return 1;
	}
	struct timeval tv;
	if (gettimeofday(&tv, NULL) != 0) {
		fprintf(stderr, "nd_static: gettimeofday: %s\n", strerror(errno));
		return 1;
	}
	time_t t = time(NULL);
	if (t == (time_t)-1) {
		fprintf(stderr, "nd_static: time: %s\n", strerror(errno));
		return 1;
	}
	printf("clock_gettime %lld.%09ld\n", (long long)ts.tv_sec, ts.tv_nsec);
	printf("gettimeofday %lld.%06ld\n", (long long)tv.tv_sec, (long)tv.tv_usec);
	printf("time %lld\n", (long long)t);
	if (fflush(stdout) != 0) {
		fprintf(stderr, "nd_static: stdout: %s\n", strerror(errno));
		return 1;
	}
	return 0;
}
