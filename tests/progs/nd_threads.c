/*
 * nd_threads: four threads read the clocks at once, for the virtualization
 * tests (tests/diehard_virtualize.bats): calls from several threads of one
 * replica must all be answered, and each thread must still see time go
 * forward.
 *
 *   nd_threads [N]
 *
 * Each thread makes N (default 10000) rounds of clock_gettime(CLOCK_MONOTONIC)
 * and gettimeofday, and every 100th round reads its own and its process's
 * CPU time (CLOCK_THREAD_CPUTIME_ID, CLOCK_PROCESS_CPUTIME_ID: the latter
 * from a thread that is not the process's leader), and checks that none
 * ever steps back within the thread.  Prints only "ok: 4 threads x N rounds" (never a time, which would
 * differ from run to run); exits 1 on a backwards step or an error.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#define THREADS 4

static long rounds = 10000;

/* Reads clock into *ts and checks it did not step back from *prev. */
static int forward(long id, long round, clockid_t clock, const char *name, struct timespec *prev)
{
	struct timespec ts;
	if (clock_gettime(clock, &ts) != 0) {
		fprintf(stderr, "nd_threads: thread %ld: clock_gettime(%s): %s\n", id, name, strerror(errno));
		return 1;
	}
	if (ts.tv_sec < prev->tv_sec || (ts.tv_sec == prev->tv_sec && ts.tv_nsec < prev->tv_nsec)) {
		fprintf(stderr, "nd_threads: thread %ld: %s went back at round %ld: %lld.%09ld after %lld.%09ld\n", id,
			name, round, (long long)ts.tv_sec, ts.tv_nsec, (long long)prev->tv_sec, prev->tv_nsec);
		return 1;
	}
	*prev = ts;
	return 0;
}

static void *work(void *arg)
{
	long id = (long)(size_t)arg;
	struct timespec prev_ts = {0, 0}, ts;
	struct timeval prev_tv = {0, 0}, tv;
	struct timespec prev_thread = {0, 0}, prev_process = {0, 0};
	for (long i = 0; i < rounds; i++) {
		if (i % 100 == 0 && (forward(id, i, CLOCK_THREAD_CPUTIME_ID, "CLOCK_THREAD_CPUTIME_ID", &prev_thread) ||
				     forward(id, i, CLOCK_PROCESS_CPUTIME_ID, "CLOCK_PROCESS_CPUTIME_ID", &prev_process)))
			return (void *)1;
		if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) {
			fprintf(stderr, "nd_threads: thread %ld: clock_gettime: %s\n", id, strerror(errno));
			return (void *)1;
		}
		if (ts.tv_sec < prev_ts.tv_sec || (ts.tv_sec == prev_ts.tv_sec && ts.tv_nsec < prev_ts.tv_nsec)) {
			fprintf(stderr, "nd_threads: thread %ld: CLOCK_MONOTONIC went back at round %ld: %lld.%09ld after %lld.%09ld\n",
				id, i, (long long)ts.tv_sec, ts.tv_nsec, (long long)prev_ts.tv_sec, prev_ts.tv_nsec);
			return (void *)1;
		}
		prev_ts = ts;
		if (gettimeofday(&tv, NULL) != 0) {
			fprintf(stderr, "nd_threads: thread %ld: gettimeofday: %s\n", id, strerror(errno));
			return (void *)1;
		}
		if (tv.tv_sec < prev_tv.tv_sec || (tv.tv_sec == prev_tv.tv_sec && tv.tv_usec < prev_tv.tv_usec)) {
			fprintf(stderr, "nd_threads: thread %ld: gettimeofday went back at round %ld: %lld.%06ld after %lld.%06ld\n",
				id, i, (long long)tv.tv_sec, (long)tv.tv_usec, (long long)prev_tv.tv_sec, (long)prev_tv.tv_usec);
			return (void *)1;
		}
		prev_tv = tv;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc > 2) {
		fprintf(stderr, "usage: nd_threads [N]\n");
		return 2;
	}
	if (argc == 2) {
		char *end;
		errno = 0;
		rounds = strtol(argv[1], &end, 10);
		if (errno != 0 || end == argv[1] || *end != '\0' || rounds < 1) {
			fprintf(stderr, "nd_threads: bad count '%s'\n", argv[1]);
			return 2;
		}
	}
	pthread_t t[THREADS];
	for (long i = 0; i < THREADS; i++) {
		int e = pthread_create(&t[i], NULL, work, (void *)(size_t)i);
		if (e != 0) {
			fprintf(stderr, "nd_threads: pthread_create: %s\n", strerror(e));
			return 1;
		}
	}
	int bad = 0;
	for (int i = 0; i < THREADS; i++) {
		void *r;
		int e = pthread_join(t[i], &r);
		if (e != 0) {
			fprintf(stderr, "nd_threads: pthread_join: %s\n", strerror(e));
			return 1;
		}
		if (r != NULL)
			bad = 1;
	}
	if (bad)
		return 1;
	printf("ok: %d threads x %ld rounds\n", THREADS, rounds);
	if (fflush(stdout) != 0) {
		fprintf(stderr, "nd_threads: stdout: %s\n", strerror(errno));
		return 1;
	}
	return 0;
}
