/*
 * abuse_owner: a replica making the kernel act on diehard for it, without
 * a kill or ptrace of its own (tests/abuse_entry.bats), and one stalling
 * whoever reads its memory:
 *
 *   abuse_owner PID LOCKDIR
 *       the replica that creates LOCKDIR first (the others print "done")
 *       tries, against PID (diehard: its parent when unsandboxed), each of:
 *       a descriptor whose owner is PID with SIGKILL as its signal
 *       (F_SETOWN_EX, F_SETSIG, O_ASYNC), F_SETOWN, FIOSETOWN; its
 *       RLIMIT_CPU set to 1 s (prlimit); its scheduling, priority and I/O
 *       priority (sched_setaffinity, sched_setscheduler, setpriority,
 *       ioprio_set); every process of the user's priority (PRIO_USER);
 *       and userfaultfd (the system call and /dev/userfaultfd's ioctl).
 *       One line per attempt in LOCKDIR/log: "<what>: <errno name>" or
 *       "<what>: DONE". Then it prints "done" like the others.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <linux/userfaultfd.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static FILE *logf;

static void said(const char *what, long r)
{
	fprintf(logf, "%s: %s\n", what, r >= 0 ? "DONE" : strerrorname_np(errno));
	fflush(logf);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fputs("usage: abuse_owner PID LOCKDIR\n", stderr);
		return 2;
	}
	pid_t target = (pid_t)strtol(argv[1], NULL, 10);
	if (mkdir(argv[2], 0777) == 0) {
		char path[4096];
		snprintf(path, sizeof path, "%s/log", argv[2]);
		if ((logf = fopen(path, "w")) == NULL)
			return 1;
		int p[2];
		if (pipe(p) != 0)
			return 1;
		struct f_owner_ex o = { F_OWNER_PID, target };
		said("F_SETOWN_EX", fcntl(p[0], F_SETOWN_EX, &o));
		said("F_SETSIG SIGKILL", fcntl(p[0], F_SETSIG, SIGKILL));
		said("F_SETOWN", fcntl(p[0], F_SETOWN, target));
		int owner = target;
		said("FIOSETOWN", ioctl(p[0], FIOSETOWN, &owner));
		/* Were the owner set, this would signal it. */
		(void)fcntl(p[0], F_SETFL, O_ASYNC | O_NONBLOCK);
		(void)!write(p[1], "x", 1);
		struct rlimit cpu = { 1, 1 };
		said("prlimit RLIMIT_CPU", prlimit(target, RLIMIT_CPU, &cpu, NULL));
		cpu_set_t one;
		CPU_ZERO(&one);
		CPU_SET(0, &one);
		said("sched_setaffinity", sched_setaffinity(target, sizeof one, &one));
		struct sched_param sp = { 0 };
		said("sched_setscheduler", sched_setscheduler(target, SCHED_IDLE, &sp));
		said("setpriority PRIO_PROCESS", setpriority(PRIO_PROCESS, (id_t)target, 19));
		said("setpriority PRIO_USER", setpriority(PRIO_USER, 0, 19));
		said("ioprio_set", syscall(SYS_ioprio_set, 1 /* IOPRIO_WHO_PROCESS */, target, 7 << 13));
		said("userfaultfd", syscall(SYS_userfaultfd, O_CLOEXEC));
		int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
		if (dev >= 0)
			said("USERFAULTFD_IOC_NEW", ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC));
		fclose(logf);
	}
	puts("done");
	return 0;
}
