/* clockfs.c — see clockfs.h.
 *
 * The child, step by step (each a system call whose failure ends it with
 * the step's errno, said by diehard in one line):
 * 1. not root: a user and mount namespace of its own (the user mapped to
 *    itself), whose root may make a file system;
 * 2. a tmpfs for the pages' directory, mounted nowhere (fsopen, fsmount):
 *    no namespace's mount table holds it, so nothing done in one (a
 *    replica's) reaches it;
 * 3. each page a file on a tmpfs of its own, exactly a page in size (so
 *    that a slot that grows its own file runs out of room in its own, not
 *    in another's or the host's memory), bound over its name in the
 *    directory (move_mount onto a mount in no namespace);
 * 4. Landlock: truncation denied to this process from now on, then each
 *    page opened again read-write: those descriptors carry no right to
 *    truncate, whoever holds them (skipped without Landlock ABI 3);
 * 5. a clone of the directory and the pages bound in it, made read-only
 *    whole (mount_setattr, AT_RECURSIVE), and its root opened: the pages'
 *    directory. A detached mount can be changed only
 *    by a process in the mount namespace it came from (this child's,
 *    gone with it) or by one that holds the mount itself: the replicas
 *    get files and a directory on it, never the mount, so they can neither
 *    make it writable again nor clone it (open_tree refuses mounts of
 *    other namespaces);
 * 6. the descriptors sent to diehard (SCM_RIGHTS), and exit. Its mount
 *    fds close with it: the mounts are then unmounted, and live on only
 *    through the descriptors. */
#include "clockfs.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <linux/mount.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14) /* ABI 3 (Linux 6.2) */
#endif

/* The steps, for the child's report (clockfs_make's *why). */
static const char *const steps[] = {
	"",
	"cannot make a user and mount namespace",
	"cannot make a tmpfs",
	"cannot make the pages' file systems",
	"cannot deny truncation (Landlock)",
	"cannot open the pages again",
	"cannot make a read-only mount of the pages",
	"cannot hand the descriptors over",
};
#define NSTEPS (sizeof steps / sizeof steps[0])

/* The child's report: the step that failed (0: none) and its errno, and
 * whether the pages' size is fixed. */
struct report {
	int step, err;
	int sized;
};

static int write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t n = strlen(s);
	ssize_t w = write(fd, s, n);
	int saved = errno;
	close(fd);
	errno = saved;
	return w == (ssize_t)n ? 0 : -1;
}

/* Step 1: the user mapped to itself in a namespace of its own. */
static int own_namespaces(void)
{
	uid_t uid = geteuid();
	gid_t gid = getegid();
	char map[64];
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0)
		return -1;
	/* Our /proc files belong to root while we are not dumpable (diehard
	 * is not, and we are its copy): dumpable for the three writes only,
	 * before there is anything here to take. */
	if (prctl(PR_SET_DUMPABLE, 1) != 0)
		return -1;
	snprintf(map, sizeof map, "%u %u 1\n", (unsigned)uid, (unsigned)uid);
	int r = write_file("/proc/self/uid_map", map) != 0 || write_file("/proc/self/setgroups", "deny") != 0 ? -1 : 0;
	snprintf(map, sizeof map, "%u %u 1\n", (unsigned)gid, (unsigned)gid);
	if (r == 0)
		r = write_file("/proc/self/gid_map", map);
	int saved = errno;
	if (prctl(PR_SET_DUMPABLE, 0) != 0)
		return -1;
	errno = saved;
	return r;
}

/* Landlock's ABI version, or 0. */
static int landlock_abi(void)
{
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	return abi > 0 ? (int)abi : 0;
}

/* Step 4: no truncation from here on (this child truncates nothing more). */
static int deny_truncation(void)
{
	struct landlock_ruleset_attr attr = { .handled_access_fs = LANDLOCK_ACCESS_FS_TRUNCATE };
	int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
	if (rs < 0)
		return -1;
	int r = prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 ? (int)syscall(SYS_landlock_restrict_self, rs, 0) : -1;
	int saved = errno;
	close(rs);
	errno = saved;
	return r;
}

/* Sends n fds and the report over sock. */
static int send_fds(int sock, const int *fds, unsigned n, const struct report *rep)
{
	struct iovec iov = { (void *)rep, sizeof *rep };
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE((CP_MAX_SLOTS + 2) * sizeof(int))];
	} ctl;
	memset(&ctl, 0, sizeof ctl);
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	if (n > 0) {
		msg.msg_control = ctl.buf;
		msg.msg_controllen = CMSG_SPACE(n * sizeof(int));
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(n * sizeof(int));
		memcpy(CMSG_DATA(c), fds, n * sizeof(int));
	}
	return sendmsg(sock, &msg, MSG_NOSIGNAL) == (ssize_t)sizeof *rep ? 0 : -1;
}

/* A tmpfs mounted nowhere, of size bytes (a string, "0": no limit) and
 * the root's mode, or -1. */
static int make_tmpfs(const char *size, const char *mode)
{
	int fs = (int)syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC), mnt = -1;
	if (fs >= 0 && syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "size", size, 0) == 0 &&
	    syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "mode", mode, 0) == 0 &&
	    syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) == 0)
		mnt = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOEXEC | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	int saved = errno;
	if (fs >= 0)
		close(fs);
	errno = saved;
	return mnt;
}

/* Page i: its own tmpfs of exactly a page (a slot that grows its file,
 * fallocate or a write past its end, runs out of room in its own, never in
 * another's: a page written through its mapping gets its block when first
 * touched, and one that could not would fault its writer), its file
 * sized, bound over the name in the directory (dir: the directory's
 * tmpfs, mounted nowhere as well). The page's mount fd, or -1 with errno.
 * It stays open until the child exits: closing a detached mount unmounts
 * it, which waits for an RCU grace period (a millisecond or more each,
 * many times over a run's start), and diehard does not wait for the exit. */
static int make_page(int dir, const char *name, size_t size)
{
	char bytes[24];
	snprintf(bytes, sizeof bytes, "%zu", size);
	int mnt = make_tmpfs(bytes, "0755");
	if (mnt < 0)
		return -1;
	int f = openat(mnt, "page", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644), bind = -1;
	if (f < 0 || ftruncate(f, (off_t)size) != 0)
		return -1;
	close(f);
	f = openat(dir, name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644); /* the mount point */
	if (f < 0)
		return -1;
	close(f);
	bind = (int)syscall(SYS_open_tree, mnt, "page", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (bind < 0 || syscall(SYS_move_mount, bind, "", dir, name, MOVE_MOUNT_F_EMPTY_PATH) != 0)
		return -1;
	return mnt;
}

/* The child: steps 1 to 6. Never returns. */
static _Noreturn void make_pages(int sock, unsigned nslots, size_t size)
{
	struct report rep = { 0, 0, 0 };
	int fds[CP_MAX_SLOTS + 2], dir = -1, ro = -1;
	unsigned n = 0;
	char name[4];
	rep.step = 1;
	if (geteuid() != 0 && own_namespaces() != 0)
		goto fail;
	rep.step = 2;
	if ((dir = make_tmpfs("64k", "0755")) < 0)
		goto fail;
	rep.step = 3;
	for (unsigned i = 0; i <= nslots; i++) {
		cp_page_name(i, nslots, name);
		if (make_page(dir, name, size) < 0)
			goto fail;
	}
	rep.step = 4;
	rep.sized = landlock_abi() >= 3;
	if (rep.sized && deny_truncation() != 0)
		goto fail;
	rep.step = 5;
	for (; n <= nslots; n++) {
		cp_page_name(n, nslots, name);
		if ((fds[n] = openat(dir, name, O_RDWR | O_CLOEXEC)) < 0)
			goto fail;
	}
	rep.step = 6;
	/* The directory with the pages bound in it, cloned whole and made
	 * read-only whole. */
	ro = (int)syscall(SYS_open_tree, dir, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOEXEC | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV };
	if (ro < 0 || syscall(SYS_mount_setattr, ro, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) != 0 ||
	    (fds[n] = openat(ro, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		goto fail;
	n++;
	rep.step = 7;
	struct report ok = { 0, 0, rep.sized };
	if (send_fds(sock, fds, n, &ok) != 0)
		goto fail;
	_exit(0);
fail:
	rep.err = errno;
	(void)send_fds(sock, NULL, 0, &rep);
	_exit(1);
}

/* Receives the child's report and its descriptors into fs. */
static int receive(int sock, struct clockfs *fs, struct report *rep)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE((CP_MAX_SLOTS + 2) * sizeof(int))];
	} ctl;
	struct iovec iov = { rep, sizeof *rep };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf };
	ssize_t got;
	do
		got = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
	while (got < 0 && errno == EINTR);
	if (got != (ssize_t)sizeof *rep) {
		*rep = (struct report){ .step = 7, .err = got < 0 ? errno : EPROTO };
		return -1;
	}
	unsigned want = fs->nslots + 2, have = 0;
	int fds[CP_MAX_SLOTS + 2];
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (size_t i = 0; i < n; i++) {
				int fd;
				memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
				if (have < want)
					fds[have++] = fd;
				else
					close(fd);
			}
		}
	if (rep->step != 0 || have != want || (msg.msg_flags & MSG_CTRUNC)) {
		for (unsigned i = 0; i < have; i++)
			close(fds[i]);
		if (rep->step == 0)
			*rep = (struct report){ .step = 7, .err = EPROTO };
		return -1;
	}
	for (unsigned i = 0; i <= fs->nslots; i++)
		fs->page[i] = fds[i];
	fs->dir = fds[fs->nslots + 1];
	return 0;
}

int clockfs_make(struct clockfs *fs, unsigned nslots, size_t size, const char **why)
{
	*fs = (struct clockfs){ .nslots = nslots, .dir = -1 };
	for (unsigned i = 0; i <= CP_MAX_SLOTS; i++)
		fs->page[i] = -1;
	int sv[2];
	if (nslots == 0 || nslots > CP_MAX_SLOTS) {
		*why = "too many replica slots";
		errno = EINVAL;
		return -1;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
		*why = steps[7];
		return -1;
	}
	/* Signals blocked around the fork: the child must not run diehard's
	 * handlers (it makes only system calls, then exits). */
	sigset_t all, old;
	sigfillset(&all);
	if (sigprocmask(SIG_BLOCK, &all, &old) != 0) {
		int saved = errno;
		close(sv[0]);
		close(sv[1]);
		*why = steps[7];
		errno = saved;
		return -1;
	}
	pid_t pid = fork();
	if (pid == 0) {
		close(sv[0]);
		make_pages(sv[1], nslots, size);
	}
	int fork_errno = errno;
	(void)sigprocmask(SIG_SETMASK, &old, NULL);
	close(sv[1]);
	struct report rep = { 7, fork_errno, 0 };
	int r = pid < 0 ? -1 : receive(sv[0], fs, &rep);
	close(sv[0]);
	/* Reaped later (supervisor.c's SIGCHLD: an unknown child is reaped
	 * and forgotten), not waited for: its exit unmounts its mounts, each
	 * after an RCU grace period, while diehard goes on; the pages live on
	 * through the descriptors. A child that failed has sent its report and
	 * is gone just the same. */
	(void)pid;
	if (r != 0) {
		*why = rep.step > 0 && (size_t)rep.step < NSTEPS ? steps[rep.step] : steps[7];
		errno = rep.err;
		return -1;
	}
	fs->sized = rep.sized != 0;
	/* Checked, not trusted to be what was asked: each page a file of the
	 * size, the directory a directory. */
	for (unsigned i = 0; i <= nslots; i++) {
		struct stat st;
		if (fstat(fs->page[i], &st) != 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size != size) {
			clockfs_close(fs);
			*why = steps[3];
			errno = EPROTO;
			return -1;
		}
	}
	return 0;
}

void clockfs_close(struct clockfs *fs)
{
	for (unsigned i = 0; i <= CP_MAX_SLOTS; i++)
		if (fs->page[i] >= 0) {
			close(fs->page[i]);
			fs->page[i] = -1;
		}
	if (fs->dir >= 0)
		close(fs->dir);
	fs->dir = -1;
}

int clockfs_confine(void)
{
	if (landlock_abi() < 3)
		return 0;
	/* REFER too: a Landlock ruleset denies every link or rename into
	 * another directory (EXDEV) unless it grants REFER, handled or not;
	 * granted beneath the root with truncation, the replica renames
	 * across its directories as it would without us (redis moves its
	 * append-only file into its directory so). */
	struct landlock_ruleset_attr attr = { .handled_access_fs = LANDLOCK_ACCESS_FS_TRUNCATE |
								     LANDLOCK_ACCESS_FS_REFER };
	int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
	if (rs < 0)
		return errno;
	int root = open("/", O_PATH | O_CLOEXEC), err = 0;
	struct landlock_path_beneath_attr beneath = { .allowed_access = LANDLOCK_ACCESS_FS_TRUNCATE |
									 LANDLOCK_ACCESS_FS_REFER,
						      .parent_fd = root };
	if (root < 0 || syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &beneath, 0) != 0 ||
	    syscall(SYS_landlock_restrict_self, rs, 0) != 0)
		err = errno;
	if (root >= 0)
		close(root);
	close(rs);
	return err;
}
