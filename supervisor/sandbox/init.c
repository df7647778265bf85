/* diehard-init — a sandboxed replica's pid 1 (supervisor/sandbox/sandbox.h).
 *
 *   diehard-init PROG STATUS_FD [NET_FD]
 *
 * Exec'ed by the copy of diehard that made the replica's namespaces and
 * forked the program (PROG, its pid 2), so that nothing of diehard's
 * memory stays in a process the program can name. NET_FD, with a private
 * network, is its end of diehard's socket channel (factory.h); absent or
 * -1 when there is none. Static and small: its exec is part of every
 * replica's start. Signals arrive blocked. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "sandbox.h"

/* A decimal from min up; min - 1 when s is not one. */
static int number(const char *s, int min)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < min || v > INT_MAX)
		return min - 1;
	return (int)v;
}

int main(int argc, char **argv)
{
	if ((argc != 3 && argc != 4) || getpid() != 1)
		return 125; /* not run by diehard */
	int prog = number(argv[1], 2), fd = number(argv[2], 0), net = argc == 4 ? number(argv[3], -1) : -1;
	if (prog < 2 || fd < 0 || net < -1)
		return 125;
	/* Tracing us would only let the program lie about its own status,
	 * but nothing needs to. */
	(void)prctl(PR_SET_DUMPABLE, 0);
	(void)fcntl(fd, F_SETFD, FD_CLOEXEC);
	if (net >= 0)
		(void)fcntl(net, F_SETFD, FD_CLOEXEC);
	sandbox_init_run((pid_t)prog, fd, net);
}
