/*
 * syscall_mix — N rounds of system calls that run a replica's seccomp
 * filter, and one that does not.
 *
 *   syscall_mix N
 *
 * Why: bench/filter times `diehard -k 3 syscall_mix N` under two builds of
 * diehard (the filter's cost per call, interleaved). The kernel skips the
 * filter for a call whose action it has cached as always allowed (Linux
 * 5.11+: no rule looks at its arguments or where it comes from), so a
 * round makes one of each kind:
 *   ioctl(FIONREAD) on a pipe   runs the filter (ioctl has a rule on its
 *                               request: TIOCSTI)
 *   openat(/dev/null, O_RDONLY | O_CLOEXEC) and close
 *                               openat runs the filter (the fast path's
 *                               prefixes, then libseccomp's rules), and is
 *                               let through by the prefix from a library
 *   getppid                     cached: the filter never runs
 *
 * Output: "N rounds" on stdout. Exit status 0; 1 when a call failed; 2 on
 * bad usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 2) {
		fputs("usage: syscall_mix N\n", stderr);
		return 2;
	}
	char *end;
	errno = 0;
	unsigned long long n = strtoull(argv[1], &end, 10);
	if (errno != 0 || end == argv[1] || *end != '\0' || argv[1][0] == '-') {
		fprintf(stderr, "syscall_mix: N must be a whole number, got '%s'\n", argv[1]);
		return 2;
	}
	int p[2];
	if (pipe(p) != 0) {
		perror("syscall_mix: pipe");
		return 1;
	}
	for (unsigned long long i = 0; i < n; i++) {
		int queued;
		if (ioctl(p[0], FIONREAD, &queued) != 0) {
			perror("syscall_mix: ioctl");
			return 1;
		}
		int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (fd < 0 || close(fd) != 0) {
			perror("syscall_mix: open /dev/null");
			return 1;
		}
		(void)getppid();
	}
	printf("%llu rounds\n", n);
	return 0;
}
