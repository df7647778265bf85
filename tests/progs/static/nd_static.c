/*
 * nd_static: a statically linked program that reads the clocks, for the
 * virtualization tests (tests/diehard_virtualize.bats).  It never loads
 * libdiehard.so or any shared library, so glibc's clock functions reach the
 * vDSO directly: the same lines in every replica show that diehard patched
 * the vDSO of a static binary too.
 *
 *   nd_static
 *   nd_static urandom plain|cloexec
 *   nd_static fd
 *   nd_static sigtrap
 *
 * Prints three lines: "clock_gettime SECONDS.NANOSECONDS" (CLOCK_REALTIME),
 * "gettimeofday SECONDS.MICROSECONDS" and "time SECONDS". With urandom:
 * one line, 16 bytes in hex read from /dev/urandom opened by a raw openat
 * (O_RDONLY, with O_CLOEXEC or not). With fd: "fd N", the descriptor an
 * open of /dev/null gets (its lowest free one), after a clock read. With
 * sigtrap: "SIGTRAP blocked|unblocked ignored|handled" from /proc/self/status
 * (what the program started with is what it must find: diehard's graft
 * may not change it).
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
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

/* SIGTRAP's bit in the set a /proc/self/status line names. */
static int trap_in(const char *name)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[256];
	int in = -1;
	size_t len = strlen(name);
	while (f != NULL && fgets(line, sizeof line, f) != NULL)
		if (strncmp(line, name, len) == 0)
			in = (int)((strtoull(line + len, NULL, 16) >> (SIGTRAP - 1)) & 1);
	if (f != NULL)
		fclose(f);
	return in;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "urandom") == 0)
		return urandom(O_RDONLY | (strcmp(argv[2], "cloexec") == 0 ? O_CLOEXEC : 0));
	if (argc == 2 && strcmp(argv[1], "fd") == 0) {
		struct timespec now;
		int fd = open("/dev/null", O_RDONLY);
		if (clock_gettime(CLOCK_MONOTONIC, &now) != 0 || fd < 0)
			return 1;
		printf("fd %d\n", fd);
		return fflush(stdout) == 0 ? 0 : 1;
	}
	if (argc == 2 && strcmp(argv[1], "sigtrap") == 0) {
		int blocked = trap_in("SigBlk:"), ignored = trap_in("SigIgn:");
		if (blocked < 0 || ignored < 0)
			return 1;
		printf("SIGTRAP %s %s\n", blocked ? "blocked" : "unblocked", ignored ? "ignored" : "handled");
		return fflush(stdout) == 0 ? 0 : 1;
	}
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
