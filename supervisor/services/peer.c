/* peer.c — see peer.h.
 *
 * The kernel interfaces are newer than Debian 12's headers (6.1): their
 * numbers are defined here, and each has a fallback that says what it
 * gives up. Every fd opened here is closed before returning. */
#include "peer.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "remote.h"
#include "sup.h"

#ifndef SO_PASSPIDFD
#define SO_PASSPIDFD 76 /* Linux 6.5 */
#endif
#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77 /* Linux 6.5 */
#endif
#define PID_FS_MAGIC 0x50494446 /* pidfs, Linux 6.9 */
#define PIDFS_IOCTL_MAGIC 0xFF
#define PIDFD_GET_PID_NAMESPACE _IO(PIDFS_IOCTL_MAGIC, 5) /* Linux 6.11 */

/* The first published struct pidfd_info (64 bytes; Linux 6.13): the
 * kernel fills what this size holds. Its pid fields are numbers in the
 * caller's pid namespace. */
struct pidfd_info0 {
	uint64_t mask;
	uint64_t cgroupid;
	uint32_t pid, tgid, ppid;
	uint32_t ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
	uint32_t spare;
};
#define PIDFD_GET_INFO0 _IOWR(PIDFS_IOCTL_MAGIC, 11, struct pidfd_info0)
#define PIDFD_INFO_PID 1u

/* Attempts at a walk whose tree changed under it (a parent that exited
 * between two looks at it): a new try each. */
#define WALK_TRIES 8
/* Pid namespaces nest 32 deep at most. */
#define NS_DEPTH_MAX 33

enum life { ALIVE, EXITED, REAPED };

static int pidfd_open_(pid_t pid)
{
	/* pidfds are close-on-exec always. */
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* A pidfd polls readable once its process exited, and hangs up once it
 * is reaped (pidfs; before, a reaped one is only readable). */
static enum life life_of(int pidfd)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };
	int r;
	do
		r = poll(&p, 1, 0);
	while (r < 0 && errno == EINTR);
	if (r < 0 || (p.revents & (POLLHUP | POLLERR | POLLNVAL)))
		return REAPED;
	return p.revents & POLLIN ? EXITED : ALIVE;
}

/* pid's parent, from /proc/PID/stat (remote_stat). */
static bool stat_parent(pid_t pid, pid_t *ppid)
{
	char state;
	return remote_stat(pid, &state, ppid);
}

enum { GONE = -1, UNSEEN = 0, SEEN = 1 };

/* The process pidfd names (hint: its number, 0 if unknown) and its
 * parent, as our namespace numbers them: SEEN; UNSEEN when it or its
 * parent has no number in our namespace (it is not below us); GONE when
 * it was reaped, or cannot be read. */
static int parent_of(int pidfd, pid_t hint, pid_t *pid, pid_t *ppid)
{
	struct pidfd_info0 info = { .mask = PIDFD_INFO_PID };
	if (ioctl(pidfd, PIDFD_GET_INFO0, &info) == 0 && (info.mask & PIDFD_INFO_PID)) {
		*pid = (pid_t)info.tgid;
		*ppid = (pid_t)info.ppid;
		return SEEN;
	}
	if (errno == ESRCH)
		/* A zombie still has its parent: ESRCH is a reaped process,
		 * or a live one our namespace gives no number (or its parent
		 * none). Linux 6.11 and 6.12 say ESRCH to any ioctl on a reaped
		 * process's pidfd, and poll it only readable: not alive is
		 * gone. */
		return life_of(pidfd) == ALIVE ? UNSEEN : GONE;
	/* Before Linux 6.13: /proc by number, which is the pidfd's process
	 * as long as that one is seen alive after the read. */
	if (hint <= 0 || !stat_parent(hint, ppid) || life_of(pidfd) != ALIVE)
		return GONE;
	*pid = hint;
	return SEEN;
}

/* The slot whose first process (its init, sandboxed) is pid, or -1. A
 * process we have not reaped keeps its pid: the number is its alone. */
static int slot_of_pid(const struct sup *S, pid_t pid)
{
	for (unsigned i = 0; i < S->nslots; i++) {
		const struct replica *r = &S->r[i];
		if (r->used && !r->exited && r->pid == pid)
			return (int)i;
	}
	return -1;
}

/* The ancestry walk (peer.h). Each step takes the parent's number from the
 * process's pidfd, opens a pidfd of that number, and reads the process's
 * parent again: the same number means the pidfd is that parent (a process
 * is reparented only to an ancestor alive at the time, older than it, never
 * to the newcomer a freed number may have gone to). */
static struct peer walk(const struct sup *S, int pidfd, pid_t pid)
{
	struct peer v = { .kind = PEER_UNKNOWN, .slot = -1 };
	pid_t self = getpid();
	for (int attempt = 0; attempt < WALK_TRIES; attempt++) {
		int cur = pidfd;
		pid_t cur_pid = pid;
		bool retry = false;
		for (int depth = 0; depth <= PEER_DEPTH_MAX && !retry; depth++) {
			pid_t p = 0, pp = 0;
			int seen = parent_of(cur, cur_pid, &p, &pp);
			int slot = seen == SEEN ? slot_of_pid(S, p) : -1;
			if (seen == GONE && depth == 0) {
				snprintf(v.why, sizeof v.why, "it has exited");
			} else if (seen == GONE) {
				retry = true; /* an ancestor left: its children have new parents */
				continue;
			} else if (seen == UNSEEN) {
				v.kind = PEER_OUTSIDE;
				snprintf(v.why, sizeof v.why, "not below diehard's pid namespace");
			} else if (slot >= 0) {
				v.kind = PEER_REPLICA;
				v.slot = slot;
				snprintf(v.why, sizeof v.why, "a descendant of replica slot %d's first process", slot);
			} else if (p == self && depth == 0) {
				v.kind = PEER_OUTSIDE;
				snprintf(v.why, sizeof v.why, "diehard itself");
			} else if (pp == self) {
				v.kind = PEER_REPLICA;
				snprintf(v.why, sizeof v.why, "a descendant of diehard");
			} else if (pp <= 1) {
				/* Our namespace's init (or the top): diehard is
				 * not above it, diehard being no init. */
				v.kind = PEER_OUTSIDE;
				snprintf(v.why, sizeof v.why, "no descendant of diehard");
			} else {
				int next = pidfd_open_(pp);
				pid_t p2 = 0, pp2 = 0;
				bool same = next >= 0 && parent_of(cur, cur_pid, &p2, &pp2) == SEEN && pp2 == pp;
				if (cur != pidfd)
					close(cur);
				cur = next;
				cur_pid = pp;
				if (!same)
					retry = true;
				continue;
			}
			if (cur != pidfd && cur >= 0)
				close(cur);
			return v;
		}
		if (cur != pidfd && cur >= 0)
			close(cur);
		if (!retry) {
			snprintf(v.why, sizeof v.why, "its process tree is deeper than %d", PEER_DEPTH_MAX);
			return v;
		}
	}
	snprintf(v.why, sizeof v.why, "its process tree kept changing while it was looked at");
	return v;
}

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* The pid namespace of the process pidfd names, opened, or -1. */
static int pidns_open(int pidfd, pid_t pid)
{
	int ns = ioctl(pidfd, PIDFD_GET_PID_NAMESPACE, 0);
	if (ns >= 0 || (errno != ENOTTY && errno != EINVAL && errno != EOPNOTSUPP) || pid <= 0)
		return ns;
	/* Before Linux 6.11: by number, trusted once the process is seen
	 * alive after the open. */
	char path[40];
	snprintf(path, sizeof path, "/proc/%d/ns/pid", (int)pid);
	ns = open(path, O_RDONLY | O_CLOEXEC);
	if (ns >= 0 && life_of(pidfd) != ALIVE) {
		close(ns);
		ns = -1;
	}
	return ns;
}

/* The sandboxed replica whose pid namespace holds the process, its own or
 * an ancestor of its own: the slot; -1 none (ours, or not below ours at
 * all); -2 cannot tell (no permission to see it, or it has exited). A
 * replica's namespace is read from its init, our child not yet reaped. */
static int ns_slot(const struct sup *S, int pidfd, pid_t pid)
{
	static struct stat self;
	static bool have_self;
	if (!have_self && stat("/proc/self/ns/pid", &self) != 0)
		return -2;
	have_self = true;
	/* Each slot's namespace, kept for its process (by id: a new process
	 * in the slot has a new one) until it is reaped: its init holds the
	 * namespace until then, so no other can take its inode number. */
	static struct {
		unsigned id;
		pid_t pid;
		bool known, own; /* own: in our namespace (not sandboxed) */
		struct stat ns;
	} cache[VOTER_MAX];
	struct stat slot_ns[VOTER_MAX];
	int slot_of[VOTER_MAX];
	unsigned n = 0;
	for (unsigned i = 0; i < S->nslots && i < VOTER_MAX; i++) {
		const struct replica *r = &S->r[i];
		if (!r->used || r->exited || r->pid <= 0)
			continue;
		if (!cache[i].known || cache[i].id != r->id || cache[i].pid != r->pid) {
			char path[40];
			snprintf(path, sizeof path, "/proc/%d/ns/pid", (int)r->pid);
			if (stat(path, &cache[i].ns) != 0)
				continue;
			cache[i].known = true;
			cache[i].id = r->id;
			cache[i].pid = r->pid;
			cache[i].own = same_file(&cache[i].ns, &self);
		}
		if (!cache[i].own) {
			slot_ns[n] = cache[i].ns;
			slot_of[n++] = (int)i;
		}
	}
	int ns = pidns_open(pidfd, pid);
	if (ns < 0)
		return -2;
	int found = -1;
	for (int depth = 0; depth < NS_DEPTH_MAX && ns >= 0; depth++) {
		struct stat st;
		if (fstat(ns, &st) != 0) {
			found = -2;
			break;
		}
		if (same_file(&st, &self))
			break;
		for (unsigned j = 0; j < n && found < 0; j++)
			if (same_file(&st, &slot_ns[j]))
				found = slot_of[j];
		if (found >= 0)
			break;
		/* EPERM: the parent is not below our namespace, nor is this
		 * one then: none of the replicas'. */
		int parent = ioctl(ns, NS_GET_PARENT);
		close(ns);
		ns = parent;
	}
	if (ns >= 0)
		close(ns);
	return found;
}

struct peer peer_judge(const struct sup *S, int pidfd, pid_t pid, bool live)
{
	struct peer v = { .kind = PEER_UNKNOWN, .slot = -1 };
	int fd = pidfd;
	if (fd < -1 || (fd == -1 && (pid <= 0 || (fd = pidfd_open_(pid)) < 0))) {
		snprintf(v.why, sizeof v.why, pid <= 0 && fd == -1 ? "the kernel did not name it" : "it has exited");
		return v;
	}
	if (live && life_of(fd) != ALIVE) {
		snprintf(v.why, sizeof v.why, "it has exited");
	} else {
		int slot = ns_slot(S, fd, pid);
		if (slot >= 0) {
			v.kind = PEER_REPLICA;
			v.slot = slot;
			snprintf(v.why, sizeof v.why, "in replica slot %d's pid namespace", slot);
		} else {
			v = walk(S, fd, pid);
		}
	}
	if (fd != pidfd)
		close(fd);
	return v;
}

int peer_pidfd_child(pid_t pid, pid_t parent)
{
	int fd = pid > 0 ? pidfd_open_(pid) : -1;
	pid_t p, pp;
	if (fd >= 0 && parent > 0 && (parent_of(fd, pid, &p, &pp) != SEEN || pp != parent)) {
		close(fd);
		fd = -1;
	}
	return fd;
}

bool peer_same_process(int a, int b)
{
	struct statfs fs;
	struct stat sa, sb;
	return a >= 0 && b >= 0 && fstatfs(a, &fs) == 0 && fs.f_type == PID_FS_MAGIC && fstat(a, &sa) == 0 &&
	       fstat(b, &sb) == 0 && same_file(&sa, &sb);
}

int peer_of_socket(int s, pid_t *pid)
{
	struct ucred cred;
	socklen_t len = sizeof cred;
	*pid = getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 ? cred.pid : 0;
	int fd = -1;
	len = sizeof fd;
	int r = getsockopt(s, SOL_SOCKET, SO_PEERPIDFD, &fd, &len);
	if (r == 0 && len == sizeof fd && fd >= 0)
		return fd;
	/* Only a kernel without the option falls back to the pid. */
	return r != 0 && errno == ENOPROTOOPT ? -1 : -2;
}

bool peer_pass_pidfd(int s)
{
	int on = 1;
	return setsockopt(s, SOL_SOCKET, SO_PASSPIDFD, &on, sizeof on) == 0;
}
