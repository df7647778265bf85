/* logcalls.c — the calls answered from the nondeterminism log (take.c):
 * clock_gettime, gettimeofday and time, getrandom (the run's keystream
 * numbered by the call's index), and opens of /dev/urandom and /dev/random
 * (a pipe fed with the keystream, entropy.c). An open is also where files/
 * hears of a file opened to append to (a stream) or made anew (a pid file,
 * maybe). What is written into the caller is checked as virt.c's rules
 * say (after_write). */
#include "virt_int.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <unistd.h>

#include "entropy.h"
#include "exitcode.h"
#include "fastclock.h"
#include "files.h"
#include "filter.h"
#include "log.h"
#include "realclock.h"
#include "remote.h"
#include "vdso.h"

/* getrandom(2) returns at most this much per call, as the kernel did before
 * 5.18, so that one call cannot hold up the loop for long; callers loop,
 * since a large getrandom may return fewer bytes anyway. */
#define GETRANDOM_MAX 33554431u

/* What to do after writing into the caller: answer, or give up on it. */
static enum answer after_write(struct vreplica *vr, const struct seccomp_notif *req, int err,
			       struct seccomp_notif_resp *resp)
{
	if (err == -EPERM || err == -EACCES) {
		/* We may not write into it: the kernel answers, for real. */
		vr->unvirtualized++;
		return CONTINUE;
	}
	if (err == -ESRCH || !virt_waiting(vr, req->id))
		return DROP;
	if (err != 0)
		resp->error = err;
	return ANSWER;
}

enum answer logcalls_clock_gettime(struct vreplica *vr, const struct seccomp_notif *req,
				   struct seccomp_notif_resp *resp)
{
	clockid_t id = (clockid_t)(int32_t)req->data.args[0];
	if (vr->V->fast != NULL && vdso_real_fallback((pid_t)req->pid, req->data.instruction_pointer)) {
		/* A leader's real read through the vDSO, which made the
		 * system call itself (a clock source it cannot read): it
		 * is the real read, in the middle of the leader's claim.
		 * Leaders make the (marked) system call from now on. */
		vr->V->vdso_fallbacks++;
		if (!fastclock_is_real_by_syscall(vr->V->fast)) {
			fastclock_real_by_syscall(vr->V->fast);
			log_event("the vDSO's clock_gettime makes system calls here (its clock source): the fast "
				  "path's leaders read the real clock by system call");
		}
		return CONTINUE;
	}
	if (!realclock_readable(id)) {
		vr->unvirtualized++; /* a dynamic POSIX clock: the caller's fd */
		return CONTINUE;
	}
	struct nd_value v;
	uint64_t index;
	uint32_t key = take_clock_key(vr, id, (pid_t)req->pid);
	if (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)
		key = take_wall_key(vr, id == CLOCK_REALTIME ? WALL_REALTIME : WALL_REALTIME_COARSE, key,
				    (pid_t)req->pid);
	take_value(vr, req, key, 0, take_real_clock, &v, &index);
	if (v.err) {
		resp->error = -v.err;
		return ANSWER;
	}
	struct timespec ts = { .tv_sec = v.a, .tv_nsec = v.b };
	return after_write(vr, req, remote_write_all((pid_t)req->pid, req->data.args[1], &ts, sizeof ts), resp);
}

enum answer logcalls_gettimeofday(struct vreplica *vr, const struct seccomp_notif *req,
				  struct seccomp_notif_resp *resp)
{
	struct nd_value v;
	uint64_t index;
	uint32_t key = take_wall_key(vr, WALL_GETTIMEOFDAY, KEY_GETTIMEOFDAY, (pid_t)req->pid);
	take_value(vr, req, key, 0, take_real_gettimeofday, &v, &index);
	if (v.err) {
		resp->error = -v.err;
		return ANSWER;
	}
	int err = 0;
	if (req->data.args[0] != 0) {
		struct timeval tv = { .tv_sec = v.a, .tv_usec = v.b };
		err = remote_write_all((pid_t)req->pid, req->data.args[0], &tv, sizeof tv);
	}
	if (err == 0 && req->data.args[1] != 0) {
		struct timezone tz = { .tz_minuteswest = v.c, .tz_dsttime = v.d };
		err = remote_write_all((pid_t)req->pid, req->data.args[1], &tz, sizeof tz);
	}
	return after_write(vr, req, err, resp);
}

enum answer logcalls_time(struct vreplica *vr, const struct seccomp_notif *req, struct seccomp_notif_resp *resp)
{
	struct nd_value v;
	uint64_t index;
	take_value(vr, req, take_wall_key(vr, WALL_TIME, KEY_TIME, (pid_t)req->pid), 0, take_real_time, &v, &index);
	int err = 0;
	if (req->data.args[0] != 0) {
		int64_t t = v.a;
		err = remote_write_all((pid_t)req->pid, req->data.args[0], &t, sizeof t);
	}
	resp->val = v.a;
	return after_write(vr, req, err, resp);
}

enum answer logcalls_getrandom(struct vreplica *vr, const struct seccomp_notif *req,
			       struct seccomp_notif_resp *resp)
{
	uint64_t addr = req->data.args[0];
	uint64_t len = req->data.args[1];
	unsigned flags = (unsigned)req->data.args[2];
	if ((flags & ~(unsigned)(GRND_NONBLOCK | GRND_RANDOM | GRND_INSECURE)) != 0 ||
	    (flags & (GRND_RANDOM | GRND_INSECURE)) == (GRND_RANDOM | GRND_INSECURE)) {
		resp->error = -EINVAL;
		return ANSWER;
	}
	if (len > GETRANDOM_MAX)
		len = GETRANDOM_MAX;
	struct nd_value v;
	uint64_t index;
	/* GRND_NONBLOCK and GRND_RANDOM change nothing once the kernel's pool
	 * is ready (it always is by the time a program runs), but a replica
	 * passing other flags than its siblings is behaving differently. */
	uint32_t key = take_process_key(vr, KEY_GETRANDOM, (pid_t)req->pid);
	take_value(vr, req, key, len | (uint64_t)flags << 32, take_no_real, &v, &index);
	struct chacha cc;
	chacha_init_stream(&cc, vr->V->key, DOMAIN_GETRANDOM, take_stream_of(key, index));
	uint8_t buf[16384];
	uint64_t done = 0;
	int err = 0;
	while (done < len) {
		size_t n = len - done < sizeof buf ? (size_t)(len - done) : sizeof buf;
		chacha_read(&cc, buf, n);
		ssize_t w = remote_write((pid_t)req->pid, addr + done, buf, n);
		if (w < 0)
			err = (int)w;
		else
			done += (uint64_t)w;
		if (w != (ssize_t)n)
			break;
	}
	/* Like the kernel: a fault after some bytes returns how many. */
	if (err == -EFAULT || done > 0)
		err = done > 0 ? 0 : -EFAULT;
	resp->val = (int64_t)done;
	return after_write(vr, req, err, resp);
}

/* Which random device path (as the caller sees it) names, if any: a path
 * whose last part is urandom or random (the cheap test, made first), and
 * whose device number says so, so relative paths and links named so count
 * too. */
static uint32_t random_device(pid_t tid, int dirfd, const char *path)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	if (strcmp(base, "urandom") != 0 && strcmp(base, "random") != 0)
		return 0;
	char full[4200];
	if (path[0] == '/')
		snprintf(full, sizeof full, "/proc/%d/root%s", (int)tid, path);
	else if (dirfd == AT_FDCWD)
		snprintf(full, sizeof full, "/proc/%d/cwd/%s", (int)tid, path);
	else
		snprintf(full, sizeof full, "/proc/%d/fd/%d/%s", (int)tid, dirfd, path);
	struct stat st;
	if (stat(full, &st) != 0 || !S_ISCHR(st.st_mode))
		return 0;
	if (st.st_rdev == makedev(1, 9))
		return KEY_URANDOM;
	if (st.st_rdev == makedev(1, 8))
		return KEY_RANDOM;
	return 0;
}

enum answer logcalls_open(struct vreplica *vr, const struct seccomp_notif *req, struct seccomp_notif_resp *resp)
{
	bool at = req->data.nr == SYS_openat;
	int dirfd = at ? (int)(int32_t)req->data.args[0] : AT_FDCWD;
	int flags = (int)req->data.args[at ? 2 : 1];
	/* A file opened to append to: voted as a stream (files/logs.h). */
	if ((flags & O_APPEND) && (flags & O_ACCMODE) != O_RDONLY)
		files_appending(vr->V->S, vr->index, (pid_t)req->pid);
	/* A file made anew: a daemon's pid file, maybe (files/pidfile.h). */
	if ((flags & (O_CREAT | O_TRUNC)) == (O_CREAT | O_TRUNC)) {
		char made[4096];
		if (remote_read_string((pid_t)req->pid, req->data.args[at ? 1 : 0], made, sizeof made) == 0)
			files_creating(vr->V->S, vr->index, (pid_t)req->pid, dirfd, made);
	}
	/* Only plain reads are virtualized; writing to the device (feeding the
	 * kernel's pool) goes on as it would. The filter already leaves such
	 * opens in the kernel; the same mask keeps this handler right alone. */
	if ((flags & FILTER_NOT_A_DEVICE_READ) != 0)
		return CONTINUE;
	char path[4096];
	uint32_t key = 0;
	/* An unreadable path: the kernel will say what is wrong with it. */
	if (remote_read_string((pid_t)req->pid, req->data.args[at ? 1 : 0], path, sizeof path) == 0)
		key = random_device((pid_t)req->pid, dirfd, path);
	if (key == 0) {
		vr->opens_checked++;
		return CONTINUE;
	}
	if (!virt_waiting(vr, req->id))
		return DROP;
	struct nd_value v;
	uint64_t index;
	int kept = flags & (O_NONBLOCK | O_CLOEXEC);
	uint32_t kind = key;
	key = take_process_key(vr, kind, (pid_t)req->pid);
	/* A mismatch is reported; the replica still gets the n-th stream. */
	take_value(vr, req, key, (uint64_t)kept, take_no_real, &v, &index);
	/* Each open holds one of our fds: past a share of our limit, the
	 * program's open fails as if its own limit were reached (at the same
	 * open in every replica that keeps them all open), and diehard keeps
	 * the fds it needs to go on. */
	struct virt *V = vr->V;
	if (V->random_open[vr->index] >= V->random_cap) {
		if (!V->cap_said)
			log_warn("replica %u keeps %u random devices open: further opens fail with EMFILE",
				 V->S->r[vr->index].id, V->random_cap);
		V->cap_said = true;
		resp->error = -EMFILE;
		return virt_waiting(vr, req->id) ? ANSWER : DROP;
	}
	int fd = entropy_open(V->entropy, kind == KEY_URANDOM ? DOMAIN_URANDOM : DOMAIN_RANDOM, take_stream_of(key, index),
			      (flags & O_NONBLOCK) != 0, &V->random_open[vr->index]);
	if (fd < 0) {
		/* Said once a run (a replica opening thousands of them would
		 * flood stderr): the rest are counted, in the report too. */
		if (vr->V->open_failures++ == 0)
			log_warn("cannot virtualize an open of /dev/%s: %s (it reads the real device; further "
				 "such opens are counted, not said)",
				 kind == KEY_URANDOM ? "urandom" : "random", strerror(errno));
		vr->unvirtualized++;
		return CONTINUE;
	}
	/* Installs the fd and answers with its number, in one step. With
	 * signals blocked: the kernel marks the call answered before it waits
	 * for the fd to be installed, so a signal (a replica's SIGCHLD) in
	 * that wait would make the caller's open return 0 with no fd, and the
	 * restarted ioctl fail with ENOENT. */
	struct seccomp_notif_addfd add = { .id = req->id, .flags = SECCOMP_ADDFD_FLAG_SEND, .srcfd = (uint32_t)fd,
					   .newfd = 0, .newfd_flags = (uint32_t)(flags & O_CLOEXEC) };
	sigset_t all, old;
	sigfillset(&all);
	if (sigprocmask(SIG_BLOCK, &all, &old) != 0)
		fatal(EXIT_INTERNAL, "sigprocmask: %s", strerror(errno));
	int added = ioctl(vr->fd, SECCOMP_IOCTL_NOTIF_ADDFD, &add);
	int add_errno = errno;
	if (sigprocmask(SIG_SETMASK, &old, NULL) != 0)
		fatal(EXIT_INTERNAL, "sigprocmask: %s", strerror(errno));
	errno = add_errno;
	if (added < 0 && errno != ENOENT) {
		/* EMFILE and the like: the caller's error, as the open's. */
		int err = errno;
		close(fd);
		resp->error = -err;
		return virt_waiting(vr, req->id) ? ANSWER : DROP;
	}
	close(fd);
	return DROP; /* answered by the ioctl */
}
