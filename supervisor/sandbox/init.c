/* diehard-init — a sandboxed replica's pid 1 (supervisor/sandbox/sandbox.h).
 *
 *   diehard-init PROG STATUS_FD NET_FD GATE_FD LAST_PID_FD
 *
 * Exec'ed by the copy of diehard that made the replica's namespaces and
 * forked the program (PROG, its pid 2), so that nothing of diehard's
 * memory stays in a process the program can name. NET_FD, with a private
 * network, is its end of diehard's socket channel (factory.h); -1 when
 * there is none. GATE_FD: our end of the socket pair the program waits on
 * before its exec (closed once we are undumpable: sandbox_init_run).
 * LAST_PID_FD: the namespace's ns_last_pid, open for reading and writing
 * (diehard's requests on the channel), or -1. Static
 * and small: its exec is part of every replica's start. Signals arrive
 * blocked. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
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
	if (argc != 6 || getpid() != 1)
		return 125; /* not run by diehard */
	int prog = number(argv[1], 2), fd = number(argv[2], 0), net = number(argv[3], -1), gate = number(argv[4], -1),
	    last = number(argv[5], -1);
	if (prog < 2 || fd < 0 || net < -1 || gate < -1 || last < -1)
		return 125;
	(void)fcntl(fd, F_SETFD, FD_CLOEXEC);
	if (net >= 0)
		(void)fcntl(net, F_SETFD, FD_CLOEXEC);
	if (last >= 0)
		(void)fcntl(last, F_SETFD, FD_CLOEXEC);
	sandbox_init_run((pid_t)prog, fd, net, gate, last);
}
