/*
 * abuse_escape: a replica trying every way out of its sandbox that a
 * security review found open, for tests/diehard_sandbox.bats.
 *
 *   abuse_escape [--no-scan] [PID...]
 *                           tries each escape against its parent and each
 *                           PID given, and (unless --no-scan) against every
 *                           process it can find in /proc that is not
 *                           itself; prints one line per attempt:
 *                             "<what> <pid>: blocked (<errno>)" or
 *                             "<what> <pid>: OPEN"
 *                           and exits 0.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

static int open_count;

static void say(const char *what, pid_t pid, int ok)
{
	if (ok) {
		printf("%s %d: OPEN\n", what, (int)pid);
		open_count++;
	} else {
		printf("%s %d: blocked (%s)\n", what, (int)pid, strerror(errno));
	}
}

static void attempt(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/mem", (int)pid);
	int fd = open(path, O_RDWR);
	say("open-mem-rw", pid, fd >= 0);
	if (fd >= 0)
		close(fd);
	fd = open(path, O_RDONLY);
	say("open-mem-ro", pid, fd >= 0);
	if (fd >= 0)
		close(fd);
	/* Writing to its stdout through /proc, without truncating anything. */
	snprintf(path, sizeof path, "/proc/%d/fd/1", (int)pid);
	fd = open(path, O_WRONLY | O_APPEND);
	say("open-fd1", pid, fd >= 0);
	if (fd >= 0)
		close(fd);
	char byte;
	struct iovec local = { &byte, 1 }, remote = { (void *)0x400000, 1 };
	errno = 0;
	ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
	/* EFAULT means the call reached the other process's memory. */
	say("process_vm_readv", pid, n >= 0 || errno == EFAULT);
	errno = 0;
	n = process_vm_writev(pid, &local, 1, &remote, 1, 0);
	say("process_vm_writev", pid, n >= 0 || errno == EFAULT);
	long r = ptrace(PTRACE_SEIZE, pid, NULL, NULL);
	say("ptrace-seize", pid, r == 0);
	if (r == 0)
		(void)ptrace(PTRACE_DETACH, pid, NULL, NULL);
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	say("pidfd_open", pid, pidfd >= 0);
	if (pidfd >= 0) {
		int got = -1;
		for (int target = 0; target < 64 && got < 0; target++)
			got = (int)syscall(SYS_pidfd_getfd, pidfd, target, 0);
		say("pidfd_getfd", pid, got >= 0);
		close(pidfd);
	}
	errno = 0;
	r = syscall(SYS_kcmp, getpid(), pid, KCMP_FILE, 1, 1);
	say("kcmp", pid, r >= 0);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	pid_t self = getpid();
	attempt(getppid());
	int first = argc > 1 && strcmp(argv[1], "--no-scan") == 0 ? 2 : 1;
	for (int i = first; i < argc; i++)
		attempt((pid_t)atoi(argv[i]));
	/* Everything else this process can see. */
	DIR *d = first == 1 ? opendir("/proc") : NULL;
	struct dirent *e;
	int seen = 0;
	while (d != NULL && (e = readdir(d)) != NULL) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		if (end == e->d_name || *end != '\0' || pid == self || pid == getppid())
			continue;
		seen++;
		attempt((pid_t)pid);
	}
	if (d != NULL)
		closedir(d);
	printf("others seen in /proc: %d\n", seen);
	/* Terminal input injection. */
	int tty = open("/dev/tty", O_RDWR | O_NOCTTY);
	if (tty >= 0) {
		char c = '\n';
		errno = 0;
		say("tiocsti", 0, ioctl(tty, TIOCSTI, &c) == 0);
		close(tty);
	}
	printf("open: %d\n", open_count);
	return 0;
}
