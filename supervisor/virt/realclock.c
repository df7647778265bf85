/* realclock.c — see realclock.h. */
#include "realclock.h"
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* clock_gettime's id for the CPU clock of process pid. */
#define PROCESS_CPUCLOCK(pid, which) ((clockid_t)((~(unsigned)(pid)) << 3) | (which))

bool realclock_readable(clockid_t id)
{
	return id >= 0 || CPUCLOCK_WHICH(id) != CPUCLOCK_FD;
}

/* Reads up to size-1 bytes of /proc/TID/name into buf. 0 or an errno (an
 * absent thread is EINVAL, as for its clock). */
static int read_proc(pid_t tid, const char *name, char *buf, size_t size)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/%s", (int)tid, name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT || errno == ESRCH ? EINVAL : errno;
	ssize_t n = read(fd, buf, size - 1);
	int err = n < 0 ? errno : 0;
	close(fd);
	if (err)
		return err == ESRCH ? EINVAL : err;
	buf[n] = '\0';
	return 0;
}

static void set_ns(struct nd_value *v, unsigned long long ns)
{
	v->a = (int64_t)(ns / 1000000000ull);
	v->b = (int64_t)(ns % 1000000000ull);
}

/* A thread's CPU time: which = SCHED is the scheduler's runtime in ns, as
 * CLOCK_THREAD_CPUTIME_ID; PROF and VIRT are user+system and user time in
 * clock ticks. Another process's thread clocks cannot be read with
 * clock_gettime, so /proc it is. */
static int thread_cputime(pid_t tid, int which, struct nd_value *v)
{
	char buf[512];
	int err = read_proc(tid, which == CPUCLOCK_SCHED ? "schedstat" : "stat", buf, sizeof buf);
	if (err)
		return err;
	unsigned long long ns;
	if (which == CPUCLOCK_SCHED) {
		if (sscanf(buf, "%llu", &ns) != 1)
			return EINVAL;
	} else {
		/* Fields 14 and 15 (utime, stime), after the parenthesised
		 * command name, which may hold spaces. */
		const char *p = strrchr(buf, ')');
		unsigned long long ut, st;
		if (p == NULL || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
			return EINVAL;
		long hz = sysconf(_SC_CLK_TCK);
		ns = (which == 1 ? ut : ut + st) * (1000000000ull / (unsigned long long)(hz > 0 ? hz : 100));
	}
	set_ns(v, ns);
	return 0;
}

/* The process (thread group) of thread tid. */
static pid_t thread_group(pid_t tid)
{
	char buf[1024];
	if (read_proc(tid, "status", buf, sizeof buf) != 0)
		return tid;
	const char *p = strstr(buf, "\nTgid:");
	int tgid;
	return p != NULL && sscanf(p + 6, "%d", &tgid) == 1 ? (pid_t)tgid : tid;
}

/* A process's CPU clock, by pid: the kernel reads another process's clock
 * only through its leader's pid, so a thread's is turned into its
 * process's on a refusal. */
static int process_cputime(pid_t pid, int which, struct nd_value *v)
{
	struct timespec ts;
	if (clock_gettime(PROCESS_CPUCLOCK(pid, which), &ts) != 0) {
		pid_t group = errno == EINVAL ? thread_group(pid) : pid;
		if (group == pid || clock_gettime(PROCESS_CPUCLOCK(group, which), &ts) != 0)
			return errno;
	}
	v->a = ts.tv_sec;
	v->b = ts.tv_nsec;
	return 0;
}

/* The pid a clock id names, which the caller (tid) gave in its own pid
 * namespace, in ours: 0 for the caller itself, -1 for no such process. */
static pid_t named(pid_t tid, pid_t who)
{
	if (who == 0)
		return 0;
	pid_t g = sandbox_global_pid(tid, who);
	return g > 0 ? g : -1;
}

void realclock_read(clockid_t id, pid_t tid, struct nd_value *v)
{
	*v = (struct nd_value){ 0 };
	if (id == CLOCK_THREAD_CPUTIME_ID) {
		v->err = thread_cputime(tid, CPUCLOCK_SCHED, v);
	} else if (id == CLOCK_PROCESS_CPUTIME_ID) {
		v->err = process_cputime(tid, CPUCLOCK_SCHED, v);
	} else if (id < 0 && (id & CPUCLOCK_PERTHREAD)) {
		pid_t who = named(tid, CPUCLOCK_PID(id));
		v->err = who < 0 ? EINVAL : thread_cputime(who ? who : tid, CPUCLOCK_WHICH(id), v);
	} else if (id < 0) {
		pid_t who = named(tid, CPUCLOCK_PID(id));
		v->err = who < 0 ? EINVAL : process_cputime(who ? who : tid, CPUCLOCK_WHICH(id), v);
	} else {
		struct timespec ts;
		if (clock_gettime(id, &ts) != 0) {
			v->err = errno;
			return;
		}
		v->a = ts.tv_sec;
		v->b = ts.tv_nsec;
	}
}
