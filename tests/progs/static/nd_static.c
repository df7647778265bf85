/*
 * nd_static: a statically linked program that reads the clocks, for the
 * virtualization tests (tests/diehard_virtualize.bats).  It never loads
 * libdiehard.so or any shared library, so glibc's clock functions reach the
 * vDSO directly: the same lines in every replica show that diehard patched
 * the vDSO of a static binary too.
 *
 *   nd_static
 *   nd_static urandom plain|cloexec
 *
 * Prints three lines: "clock_gettime SECONDS.NANOSECONDS" (CLOCK_REALTIME),
 * "gettimeofday SECONDS.MICROSECONDS" and "time SECONDS". With urandom:
 * one line, 16 bytes in hex read from /dev/urandom opened by a raw openat
 * (O_RDONLY, with O_CLOEXEC or not).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static int urandom(int flags)
{
	int fd = (int)syscall(SYS_openat, AT_FDCWD, "/dev/urandom", flags, 0);
	unsigned char b[16];
	if (fd < 0 || read(fd, b, sizeof b) != (ssize_t)sizeof b) {
		fprintf(stderr, "nd_static: /dev/urandom: %s\n", strerror(errno));
		return 1;
	}
	close(fd);
	for (size_t i = 0; i < sizeof b; i++)
		printf("%02x", b[i]);
	printf("\n");
	return fflush(stdout) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "urandom") == 0)
		return urandom(O_RDONLY | (strcmp(argv[2], "cloexec") == 0 ? O_CLOEXEC : 0));
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
