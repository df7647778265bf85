/*
 * nd_vdso_real: a fast-path leader's real clock read that the vDSO makes by
 * system call, for tests/fastclock.bats. Leaders read the real clock
 * through libdiehard's trampoline into the vDSO's own clock_gettime
 * (supervisor/virt/vdso.h); where the clock source cannot be read in user
 * space, the vDSO itself makes the system call, from inside its code. This
 * makes that happen on any machine: it calls the trampoline with the
 * process's CPU-time clock, which the vDSO always reads by system call.
 * Then it reads CLOCK_MONOTONIC N times.
 *
 *   nd_vdso_real N
 *
 * Prints "trampoline: ok" (it returned 0 and a CPU time), "trampoline:
 * absent" (no libdiehard.so, or it was never written: -ENOSYS) or
 * "trampoline: error E", then "N reads, forward". Exits 1 if the clock
 * stepped back or a read failed.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef long real_fn(clockid_t, struct timespec *);

int main(int argc, char **argv)
{
	char *end;
	long n = argc == 2 ? strtol(argv[1], &end, 10) : 0;
	if (argc != 2 || *end != '\0' || n < 1) {
		fprintf(stderr, "usage: nd_vdso_real N\n");
		return 2;
	}
	void *sym = dlsym(RTLD_DEFAULT, "diehard_vdso_real_clock_gettime");
	if (sym == NULL) {
		printf("trampoline: absent\n");
	} else {
		real_fn *fn;
		memcpy(&fn, &sym, sizeof fn);
		struct timespec ts = { -1, -1 };
		long r = fn(CLOCK_PROCESS_CPUTIME_ID, &ts);
		if (r == -ENOSYS)
			printf("trampoline: absent\n");
		else if (r == 0 && ts.tv_sec >= 0 && ts.tv_nsec >= 0 && ts.tv_nsec < 1000000000)
			printf("trampoline: ok\n");
		else
			printf("trampoline: error %ld\n", r);
	}
	struct timespec last = { 0, 0 };
	for (long i = 0; i < n; i++) {
		struct timespec ts;
		if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) {
			perror("nd_vdso_real: clock_gettime");
			return 1;
		}
		if (ts.tv_sec < last.tv_sec || (ts.tv_sec == last.tv_sec && ts.tv_nsec < last.tv_nsec)) {
			fprintf(stderr, "nd_vdso_real: the clock went back at read %ld\n", i);
			return 1;
		}
		last = ts;
	}
	printf("%ld reads, forward\n", n);
	return 0;
}
