/*
 * nd_efault: clock and random system calls with bad arguments, for the
 * virtualization tests (tests/diehard_virtualize.bats): a virtualized call
 * must fail in the replica exactly as the kernel would make it fail (a bad
 * pointer is EFAULT, never a crash of the replica or of diehard).
 *
 *   nd_efault
 *
 * Makes the raw system calls through syscall(2) (no vDSO, no libc checks):
 *   clock_gettime(CLOCK_REALTIME, 16)  -> EFAULT
 *   gettimeofday(16, NULL)             -> EFAULT
 *   time(16)                           -> EFAULT
 *   getrandom(16, 16, 0)               -> EFAULT
 *   clock_gettime(12345, &ts)          -> EINVAL
 *   getrandom(buf, 16, 0x100)          -> EINVAL
 * and prints one line per check, "CALL: ERRNO ok" (or "CALL: ... FAIL").
 * Then shows the clock still works: "CLOCK_REALTIME SECONDS.NANOSECONDS".
 * Exits 0 only if every check gave the expected error.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define BAD ((void *)16)

static int failed;

static void expect(const char *call, long r, int want)
{
	int e = errno;
	if (r == -1 && e == want) {
		printf("%s: %s ok\n", call, strerrorname_np(want));
		return;
	}
	if (r == -1)
		printf("%s: %s, expected %s FAIL\n", call, strerrorname_np(e) ? strerrorname_np(e) : "?",
		       strerrorname_np(want));
	else
		printf("%s: returned %ld, expected %s FAIL\n", call, r, strerrorname_np(want));
	failed = 1;
}

int main(void)
{
	struct timespec ts;
	unsigned char buf[16];
	long r;

	errno = 0;
	r = syscall(SYS_clock_gettime, CLOCK_REALTIME, BAD);
	expect("clock_gettime(CLOCK_REALTIME, 16)", r, EFAULT);

	errno = 0;
	r = syscall(SYS_gettimeofday, BAD, NULL);
	expect("gettimeofday(16, NULL)", r, EFAULT);

#ifdef SYS_time
	errno = 0;
	r = syscall(SYS_time, BAD);
	expect("time(16)", r, EFAULT);
#else
	printf("time(16): EFAULT ok (no time system call here)\n");
#endif

	errno = 0;
	r = syscall(SYS_getrandom, BAD, 16, 0);
	expect("getrandom(16, 16, 0)", r, EFAULT);

	errno = 0;
	r = syscall(SYS_clock_gettime, 12345, &ts);
	expect("clock_gettime(12345, &ts)", r, EINVAL);

	errno = 0;
	r = syscall(SYS_getrandom, buf, sizeof buf, 0x100);
	expect("getrandom(buf, 16, 0x100)", r, EINVAL);

	if (clock_gettime(CLOCK_REALTIME, &ts) != 0) {
		fprintf(stderr, "nd_efault: clock_gettime: %s\n", strerror(errno));
		return 1;
	}
	printf("CLOCK_REALTIME %lld.%09ld\n", (long long)ts.tv_sec, ts.tv_nsec);
	if (fflush(stdout) != 0) {
		fprintf(stderr, "nd_efault: stdout: %s\n", strerror(errno));
		return 1;
	}
	return failed;
}
