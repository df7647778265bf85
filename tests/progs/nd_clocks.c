/*
 * nd_clocks: prints every clock glibc offers, one line per call, with its full
 * value, for the virtualization tests (tests/diehard_virtualize.bats).
 *
 *   nd_clocks
 *
 * Run plainly, or as replicas without virtualization, the lines differ from
 * run to run (and from replica to replica: nanoseconds, CPU time); under
 * diehard's virtualization every replica prints the same lines.  Each line is
 * "NAME SECONDS[.FRACTION]".  The wall-clock values (realtime, coarse
 * realtime, gettimeofday, time, timespec_get, ftime) must agree with each
 * other to within 2 seconds, else the program says so and exits 1.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/timeb.h>
#include <time.h>

static int failed;
static long long wall[8];
static int nwall;

static void note_wall(const char *what, long long sec)
{
	if (nwall < (int)(sizeof wall / sizeof wall[0]))
		wall[nwall++] = sec;
	for (int i = 0; i < nwall; i++) {
		long long d = sec - wall[i];
		if (d > 2 || d < -2) {
			fprintf(stderr, "nd_clocks: %s (%lld) is %lld s away from an earlier wall-clock reading (%lld)\n",
				what, sec, d, wall[i]);
			failed = 1;
		}
	}
}

static void show_clock(const char *name, clockid_t id, int is_wall)
{
	struct timespec ts;
	if (clock_gettime(id, &ts) != 0) {
		fprintf(stderr, "nd_clocks: clock_gettime(%s): %s\n", name, strerror(errno));
		exit(1);
	}
	printf("%s %lld.%09ld\n", name, (long long)ts.tv_sec, ts.tv_nsec);
	if (is_wall)
		note_wall(name, ts.tv_sec);
}

int main(void)
{
	show_clock("CLOCK_REALTIME", CLOCK_REALTIME, 1);
	show_clock("CLOCK_MONOTONIC", CLOCK_MONOTONIC, 0);
	show_clock("CLOCK_MONOTONIC_RAW", CLOCK_MONOTONIC_RAW, 0);
	show_clock("CLOCK_REALTIME_COARSE", CLOCK_REALTIME_COARSE, 1);
	show_clock("CLOCK_MONOTONIC_COARSE", CLOCK_MONOTONIC_COARSE, 0);
	show_clock("CLOCK_BOOTTIME", CLOCK_BOOTTIME, 0);
	show_clock("CLOCK_PROCESS_CPUTIME_ID", CLOCK_PROCESS_CPUTIME_ID, 0);
	show_clock("CLOCK_THREAD_CPUTIME_ID", CLOCK_THREAD_CPUTIME_ID, 0);

	struct timeval tv;
	if (gettimeofday(&tv, NULL) != 0) {
		fprintf(stderr, "nd_clocks: gettimeofday: %s\n", strerror(errno));
		return 1;
	}
	printf("gettimeofday %lld.%06ld\n", (long long)tv.tv_sec, (long)tv.tv_usec);
	note_wall("gettimeofday", tv.tv_sec);
	/* 600 more with the timezone, printing nothing: a leader reads the
	 * time through the vDSO's clock_gettime and asks the kernel for the
	 * timezone at its first read of each second (allocator/clockpath.h);
	 * each must be whole microseconds in the one timezone. */
	struct timezone tz, tz0 = { 0, 0 };
	for (int i = 0; i < 600; i++) {
		if (gettimeofday(&tv, &tz) != 0) {
			fprintf(stderr, "nd_clocks: gettimeofday with a timezone: %s\n", strerror(errno));
			return 1;
		}
		if (i == 0)
			tz0 = tz;
		if (tv.tv_usec < 0 || tv.tv_usec >= 1000000 || tz.tz_minuteswest != tz0.tz_minuteswest ||
		    tz.tz_dsttime != tz0.tz_dsttime) {
			fprintf(stderr, "nd_clocks: gettimeofday read %d: %lld.%ld, timezone %d/%d (the first %d/%d)\n", i,
				(long long)tv.tv_sec, (long)tv.tv_usec, tz.tz_minuteswest, tz.tz_dsttime,
				tz0.tz_minuteswest, tz0.tz_dsttime);
			return 1;
		}
	}

	time_t t1 = time(NULL);
	if (t1 == (time_t)-1) {
		fprintf(stderr, "nd_clocks: time(NULL): %s\n", strerror(errno));
		return 1;
	}
	printf("time(NULL) %lld\n", (long long)t1);
	note_wall("time(NULL)", t1);

	time_t t2 = 0;
	time_t r2 = time(&t2);
	if (r2 == (time_t)-1) {
		fprintf(stderr, "nd_clocks: time(&t): %s\n", strerror(errno));
		return 1;
	}
	if (r2 != t2) {
		fprintf(stderr, "nd_clocks: time(&t) returned %lld but stored %lld\n", (long long)r2, (long long)t2);
		return 1;
	}
	printf("time(&t) %lld\n", (long long)t2);
	note_wall("time(&t)", t2);

	struct timespec ts;
	if (timespec_get(&ts, TIME_UTC) != TIME_UTC) {
		fprintf(stderr, "nd_clocks: timespec_get(TIME_UTC) failed\n");
		return 1;
	}
	printf("timespec_get %lld.%09ld\n", (long long)ts.tv_sec, ts.tv_nsec);
	note_wall("timespec_get", ts.tv_sec);

	struct timeb tb;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
	int fr = ftime(&tb);
#pragma GCC diagnostic pop
	if (fr != 0) {
		fprintf(stderr, "nd_clocks: ftime: %s\n", strerror(errno));
		return 1;
	}
	printf("ftime %lld.%03u\n", (long long)tb.time, (unsigned)tb.millitm);
	note_wall("ftime", tb.time);

	if (fflush(stdout) != 0) {
		fprintf(stderr, "nd_clocks: stdout: %s\n", strerror(errno));
		return 1;
	}
	return failed;
}
