/*
 * nd_clock_signals: clock reads under a storm of signals, for
 * tests/diehard_virtualize.bats.
 *
 *   nd_clock_signals N
 *
 * A second thread sends the main thread SIGUSR1 as fast as it can, up to
 * PER_READ signals a read; the handler does nothing and is installed
 * without SA_RESTART. The main thread makes N clock reads in turn:
 * clock_gettime(CLOCK_MONOTONIC), gettimeofday and time. None of them
 * fails natively, nor goes back. Under diehard a read that asks diehard
 * (a notified call) can be hit by the signal before diehard took it: the
 * kernel then ends it with EINTR, and a program that does not look
 * (redis) takes whatever its buffer held for the time. The bound per read
 * keeps the run's length from hanging on the machine's load: an unbounded
 * storm can interrupt every try before diehard takes it, for as long as
 * diehard is not scheduled in time (10 s once, on a loaded CI machine).
 * Prints "N reads: F failed, B went back" (the same line in every replica
 * when all is well: how many signals came is not printed); exits 1 when a
 * read failed or went back, 2 on a setup error.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* Signals sent during one read at most; the storm then waits for the
 * next read. */
#define PER_READ 16

static atomic_int done;
static atomic_long reading; /* the read the main thread is at */
static pid_t target;

static void on_signal(int sig)
{
	(void)sig;
}

static void *storm(void *arg)
{
	(void)arg;
	pid_t pid = getpid();
	long last = -1;
	unsigned sent = 0;
	while (!atomic_load(&done)) {
		long at = atomic_load(&reading);
		if (at != last) {
			last = at;
			sent = 0;
		}
		if (sent < PER_READ) {
			(void)syscall(SYS_tgkill, pid, target, SIGUSR1);
			sent++;
		} else
			sched_yield();
	}
	return NULL;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 0;
	if (n <= 0) {
		fprintf(stderr, "usage: nd_clock_signals N\n");
		return 2;
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = 0; /* no SA_RESTART: an interrupted call fails with EINTR */
	if (sigaction(SIGUSR1, &sa, NULL) != 0) {
		perror("sigaction");
		return 2;
	}
	target = (pid_t)syscall(SYS_gettid);
	pthread_t t;
	int rc = pthread_create(&t, NULL, storm, NULL);
	if (rc != 0) {
		fprintf(stderr, "pthread_create: %s\n", strerror(rc));
		return 2;
	}
	long failed = 0, back = 0;
	struct timespec last_mono = { 0, 0 };
	struct timeval last_tv = { 0, 0 };
	time_t last_t = 0;
	for (long i = 0; i < n; i++) {
		atomic_store(&reading, i);
		switch (i % 3) {
		case 0: {
			struct timespec ts;
			if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) {
				failed++;
				break;
			}
			if (ts.tv_sec < last_mono.tv_sec || (ts.tv_sec == last_mono.tv_sec && ts.tv_nsec < last_mono.tv_nsec))
				back++;
			last_mono = ts;
			break;
		}
		case 1: {
			struct timeval tv;
			if (gettimeofday(&tv, NULL) != 0) {
				failed++;
				break;
			}
			/* The wall clock may be stepped; a second back is not. */
			if (tv.tv_sec + 1 < last_tv.tv_sec)
				back++;
			last_tv = tv;
			break;
		}
		default: {
			time_t x = time(NULL);
			if (x == (time_t)-1 || x < 1000000000) {
				failed++;
				break;
			}
			if (x + 1 < last_t)
				back++;
			last_t = x;
			break;
		}
		}
	}
	atomic_store(&done, 1);
	if ((rc = pthread_join(t, NULL)) != 0) {
		fprintf(stderr, "pthread_join: %s\n", strerror(rc));
		return 2;
	}
	printf("%ld reads: %ld failed, %ld went back\n", n, failed, back);
	return failed != 0 || back != 0;
}
