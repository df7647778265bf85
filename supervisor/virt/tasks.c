/* tasks.c — the replicas' process trees (virt_int.h): each clone a replica
 * makes is notified (filter.c) and noted in the run's lineage (lineage.h)
 * before the kernel makes the task, and lineage's questions about tasks
 * are answered from /proc and from diehard's pid namespace's last pid. */
#include "virt_int.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "exitcode.h"
#include "lineage.h"
#include "log.h"
#include "remote.h"

static int last_pid_fd = -1;

static bool task_of(void *ctx, pid_t tid, struct lineage_task *t)
{
	(void)ctx;
	if (!remote_family(tid, &t->tgid, &t->ppid))
		return false;
	t->start = remote_start_time(tid, NULL);
	return t->start != 0;
}

static uint64_t started(void *ctx, pid_t tid)
{
	(void)ctx;
	return remote_start_time(tid, NULL);
}

static bool running(void *ctx, pid_t pid, uint64_t start)
{
	(void)ctx;
	char state;
	return remote_start_time(pid, &state) == start && state != 'Z' && state != 'X';
}

static pid_t last_pid(void *ctx)
{
	(void)ctx;
	char buf[32];
	ssize_t n = pread(last_pid_fd, buf, sizeof buf - 1, 0);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	return (pid_t)strtol(buf, NULL, 10);
}

static uint64_t now_ns(void *ctx)
{
	(void)ctx;
	struct timespec t;
	if (clock_gettime(CLOCK_MONOTONIC, &t) != 0)
		return 0; /* every lookup then reads /proc */
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* A number from a /proc/sys file, or fallback. */
static long sysctl_number(const char *path, long fallback)
{
	char buf[32];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fallback;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return fallback;
	buf[n] = '\0';
	long v = strtol(buf, NULL, 10);
	return v > 0 ? v : fallback;
}

struct lineage *tasks_lineage(unsigned nslots)
{
	last_pid_fd = open("/proc/sys/kernel/ns_last_pid", O_RDONLY | O_CLOEXEC);
	if (last_pid_fd < 0) {
		log_event("processes numbered by their pids, not by their places in the process tree: cannot read "
			  "/proc/sys/kernel/ns_last_pid (%s)", strerror(errno));
		return NULL;
	}
	struct lineage_ops ops = { .task = task_of, .started = started, .running = running, .last_pid = last_pid, .now = now_ns,
				   .pid_max = (pid_t)sysctl_number("/proc/sys/kernel/pid_max", 1 << 22) };
	struct lineage *L = lineage_new(nslots, &ops);
	if (L == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	return L;
}

/* The hex mask after field (a "\nName:" of /proc/TID/status) in buf. */
static uint64_t status_mask(const char *buf, const char *field)
{
	const char *t = strstr(buf, field);
	return t != NULL ? strtoull(t + strlen(field), NULL, 16) : 0;
}

/* Whether thread tid has a signal pending that it does not block: the
 * kernel then restarts its clone (copy_process, -ERESTARTNOINTR) once the
 * handler ran, and the clone is notified again. */
static bool restarts(pid_t tid)
{
	char buf[2048];
	if (remote_status(tid, buf, sizeof buf) != 0)
		return false;
	uint64_t pending = status_mask(buf, "\nSigPnd:") | status_mask(buf, "\nShdPnd:");
	return (pending & ~status_mask(buf, "\nSigBlk:")) != 0;
}

enum answer tasks_clone(struct vreplica *vr, const struct seccomp_notif *req)
{
	uint64_t flags = 0;
	switch (req->data.nr) {
	case SYS_clone: flags = req->data.args[0]; break;
	case SYS_clone3:
		/* The flags lead struct clone_args; a pointer the kernel will
		 * refuse makes no task. */
		if (req->data.args[1] < sizeof flags ||
		    remote_read_all((pid_t)req->pid, req->data.args[0], &flags, sizeof flags) != 0)
			return CONTINUE;
		break;
	default: break; /* fork, vfork */
	}
	/* A signal pending now makes the kernel restart the call: counted
	 * then. One that comes after this look, before the kernel's, is
	 * counted twice (docs/NONDETERMINISM.md, "Process numbering"), but
	 * for a fork that runs libdiehard's fork handlers, which block them
	 * (allocator/forkmask.c). */
	if (restarts((pid_t)req->pid))
		return CONTINUE;
	enum lineage_clone kind = flags & CLONE_THREAD ? LINEAGE_THREAD
				  : flags & CLONE_PARENT ? LINEAGE_ADOPTED
							 : LINEAGE_FORK;
	lineage_clone(vr->V->lineage, vr->index, (pid_t)req->pid, kind);
	if (kind == LINEAGE_FORK)
		anchor_fork(vr, (pid_t)req->pid);
	return CONTINUE;
}
