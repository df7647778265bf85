/* mdwe_exec PROGRAM ARGS...: runs PROGRAM under memory-deny-write-execute
 * (prctl PR_SET_MDWE, Linux 6.3, inherited by its children): no mapping
 * may become writable and executable, so libdiehard cannot patch its own
 * vDSO and must ask diehard. Exits 77 where the kernel has no MDWE. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#ifndef PR_SET_MDWE
#define PR_SET_MDWE 65
#define PR_MDWE_REFUSE_EXEC_GAIN 1
#endif

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: mdwe_exec PROGRAM ARGS...\n");
		return 2;
	}
	if (prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0, 0, 0) != 0) {
		fprintf(stderr, "mdwe_exec: PR_SET_MDWE: %s\n", strerror(errno));
		return 77;
	}
	execv(argv[1], argv + 1);
	fprintf(stderr, "mdwe_exec: %s: %s\n", argv[1], strerror(errno));
	return 127;
}
