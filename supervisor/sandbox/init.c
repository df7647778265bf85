/* diehard-init — a sandboxed replica's pid 1 (supervisor/sandbox/sandbox.h).
 *
 *   diehard-init PROG STATUS_FD
 *
 * Exec'ed by the copy of diehard that made the replica's namespaces and
 * forked the program (PROG, its pid 2), so that nothing of diehard's
 * memory stays in a process the program can name. Static and small: its
 * exec is part of every replica's start. Signals arrive blocked. */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "sandbox.h"

int main(int argc, char **argv)
{
	if (argc != 3 || getpid() != 1)
		return 125; /* not run by diehard */
	int fd = atoi(argv[2]);
	/* Tracing us would only let the program lie about its own status,
	 * but nothing needs to. */
	(void)prctl(PR_SET_DUMPABLE, 0);
	(void)fcntl(fd, F_SETFD, FD_CLOEXEC);
	sandbox_init_run((pid_t)atoi(argv[1]), fd);
}
