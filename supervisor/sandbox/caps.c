/* caps.c — see caps.h. Paths come from the kernel's own files (cgpath.h
 * checks them); every directory is made by us, with our pid in its name.
 * caps_enter runs in a cloned copy of diehard: system calls only. */
#include "caps.h"
#include "cgpath.h"
#include "sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/magic.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <time.h>
#include <unistd.h>

/* The kernel's files we read are small; /proc/self/mountinfo is the
 * largest (a line per mount): a host with thousands of mounts still fits. */
#define TEXT_MAX ((size_t)4 << 20)

struct caps_replica {
	struct caps *c;
	unsigned n;                /* its directories: a prefix (below) and n */
	bool ended;                /* only its removal is left */
	struct caps_replica *next;
};

struct caps {
	pid_t owner;               /* the process that made the directories */
	uint64_t limit[CAPS_KINDS];
	enum caps_by by[CAPS_KINDS];
	char how[CAPS_KINDS][192];
	bool userns;
	/* A replica's cgroup is a prefix and its number: under cgroup v2
	 * RUN/r<n>, one for both caps, RUN = <our cgroup>/diehard-<ns>-<pid>;
	 * under v1, with no RUN (one mkdir and rmdir fewer per hierarchy),
	 * <our cgroup>/diehard-<ns>-<pid>-r<n> in the pids (CAPS_TASKS) and the
	 * memory (CAPS_MEMORY) hierarchy. pre: the path to write to; rel: as
	 * /proc/PID/cgroup names it (to check a process is ours before killing
	 * it); base: where the sweep looks. */
	char v2run[PATH_MAX], v2pre[PATH_MAX], v2rel[PATH_MAX];
	char v1base[CAPS_KINDS][PATH_MAX], v1pre[CAPS_KINDS][PATH_MAX], v1rel[CAPS_KINDS][PATH_MAX];
	bool swap;                 /* the host has swap: v1 caps memory.memsw too */
	unsigned long ns;          /* our pid namespace (run_name) */
	bool swept;                /* the first tick looked for runs left behind */
	unsigned next;
	struct caps_replica *list;
	/* While caps_new chooses: /proc/self/cgroup and mountinfo, read once. */
	char *cgroup, *mountinfo;
	size_t cgroup_len, mountinfo_len;
};

static const char *const v1_controller[CAPS_KINDS] = { "pids", "memory" };

/* The caps whose directories an exit removes (one per process). */
static struct caps *exiting;

/* A whole file, NUL-terminated, malloc'ed; its length in *len. NULL with
 * errno (EFBIG past TEXT_MAX). */
static char *read_all(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	size_t size = 4096, n = 0;
	char *buf = malloc(size);
	while (buf != NULL) {
		if (n + 1 >= size) {
			if (size >= TEXT_MAX) {
				free(buf);
				buf = NULL;
				errno = EFBIG;
				break;
			}
			char *bigger = realloc(buf, size * 2);
			if (bigger == NULL) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = bigger;
			size *= 2;
		}
		ssize_t r = read(fd, buf + n, size - n - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int err = errno;
			free(buf);
			buf = NULL;
			errno = err;
			break;
		}
		if (r == 0) {
			buf[n] = '\0';
			*len = n;
			break;
		}
		n += (size_t)r;
	}
	int err = errno;
	close(fd);
	errno = err;
	return buf;
}

/* A small file (a cgroup's own) into buf, NUL-terminated: its length, or
 * -1 with errno. */
static ssize_t read_small(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n;
	do
		n = read(fd, buf, size - 1);
	while (n < 0 && errno == EINTR);
	int err = errno;
	close(fd);
	if (n < 0) {
		errno = err;
		return -1;
	}
	buf[n] = '\0';
	return n;
}

/* dir/name into out; false when it does not fit. */
static bool join(char *out, size_t size, const char *dir, const char *name)
{
	int n = snprintf(out, size, "%s/%s", dir, name);
	return n > 0 && (size_t)n < size;
}

/* A replica's directory (prefix and number), and a file in it (NULL: none). */
static bool replica_path(char *out, size_t size, const char *prefix, unsigned n, const char *file)
{
	int len = file != NULL ? snprintf(out, size, "%s%u/%s", prefix, n, file) : snprintf(out, size, "%s%u", prefix, n);
	return len > 0 && (size_t)len < size;
}

void caps_size_text(char *buf, size_t size, uint64_t v)
{
	static const char suffix[] = "KMGT";
	int i = -1;
	while (i < 3 && v != 0 && v % 1024 == 0) {
		v /= 1024;
		i++;
	}
	if (i < 0)
		snprintf(buf, size, "%llu", (unsigned long long)v);
	else
		snprintf(buf, size, "%llu%c", (unsigned long long)v, suffix[i]);
}

/* The run's directory name: our pid, and our pid namespace (so that the
 * sweep below judges only runs whose pid it can look up). */
static void run_name(char *buf, size_t size, unsigned long *ns)
{
	struct stat st;
	*ns = stat("/proc/self/ns/pid", &st) == 0 ? (unsigned long)st.st_ino : 0;
	snprintf(buf, size, "diehard-%lu-%ld", *ns, (long)getpid());
}

/* Removes dir's subdirectories and dir (empty cgroups: rmdir is all a
 * cgroup needs). */
static void remove_tree(const char *dir)
{
	DIR *d = opendir(dir);
	if (d != NULL) {
		struct dirent *e;
		while ((e = readdir(d)) != NULL) {
			char sub[PATH_MAX];
			if (e->d_type == DT_DIR && strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 &&
			    join(sub, sizeof sub, dir, e->d_name))
				(void)rmdir(sub);
		}
		closedir(d);
	}
	(void)rmdir(dir);
}

/* The run directories left in base by a diehard of our pid namespace that
 * is gone (killed outright: no atexit ran), removed. A populated one
 * (processes that outlived it) stays: rmdir refuses. */
static void sweep(const char *base, unsigned long ns)
{
	DIR *d = opendir(base);
	if (d == NULL)
		return;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		unsigned long ino;
		long pid;
		int used = 0;
		if (e->d_type != DT_DIR || sscanf(e->d_name, "diehard-%lu-%ld%n", &ino, &pid, &used) != 2 ||
		    ino != ns || pid <= 0 || pid == (long)getpid())
			continue;
		/* RUN (v2), or a replica's own (v1: -r<n>). */
		const char *rest = e->d_name + used;
		if (rest[0] != '\0' && (strncmp(rest, "-r", 2) != 0 || rest[2] == '\0' || strspn(rest + 2, "0123456789") != strlen(rest + 2)))
			continue;
		if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		char dir[PATH_MAX];
		if (join(dir, sizeof dir, base, e->d_name))
			remove_tree(dir);
	}
	closedir(d);
}

/* The initial cgroup namespace's inode (the kernel's PROC_CGROUP_INIT_INO). */
#define INIT_CGROUP_NS_INO 0xEFFFFFFBUL

/* The directory of our cgroup rel where systemd mounts its hierarchy: v2
 * at /sys/fs/cgroup (unified) or /sys/fs/cgroup/unified (hybrid), a v1
 * controller's at /sys/fs/cgroup/<controller>. Taken when we are in the
 * initial cgroup namespace (in another, rel is relative to its root, and a
 * mount made outside it shows the whole hierarchy: a diehard inside a
 * sandboxed replica would make its cgroups outside the replica's), statfs
 * says that is a cgroup file system of the version, our cgroup's directory
 * is there, and (v1, below the root) it has the controller's own file:
 * reading /proc/self/mountinfo costs ~90 us here, the start's largest part. */
static bool std_mount(const char *controller, const char *rel, char *dir, size_t dsize)
{
	struct stat ns;
	if (stat("/proc/self/ns/cgroup", &ns) != 0 || ns.st_ino != INIT_CGROUP_NS_INO)
		return false;
	static const char *const v2[] = { "/sys/fs/cgroup", "/sys/fs/cgroup/unified" };
	char v1[64];
	const char *cand[2];
	int n = 0;
	if (controller == NULL) {
		cand[n++] = v2[0];
		cand[n++] = v2[1];
	} else {
		snprintf(v1, sizeof v1, "/sys/fs/cgroup/%s", controller);
		cand[n++] = v1;
	}
	for (int i = 0; i < n; i++) {
		struct statfs sf;
		struct stat st;
		if (statfs(cand[i], &sf) != 0 ||
		    sf.f_type != (controller == NULL ? CGROUP2_SUPER_MAGIC : CGROUP_SUPER_MAGIC) ||
		    !cgpath_dir(cand[i], "/", rel, dir, dsize) || stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
			continue;
		if (controller == NULL || strcmp(rel, "/") == 0)
			return true;
		char own[PATH_MAX];
		return join(own, sizeof own, dir, strcmp(controller, "pids") == 0 ? "pids.max" : "memory.limit_in_bytes") &&
		       access(own, F_OK) == 0;
	}
	return false;
}

/* Our cgroup's directory and its path (as /proc/PID/cgroup names it) in
 * the hierarchy of controller (v1), or in the v2 one (NULL): where systemd
 * would mount it, else where /proc/self/mountinfo says. */
static bool own_cgroup(struct caps *c, const char *controller, char *dir, size_t dsize, char *rel, size_t rsize)
{
	if (c->cgroup == NULL)
		c->cgroup = read_all("/proc/self/cgroup", &c->cgroup_len);
	if (c->cgroup == NULL || !cgpath_own(c->cgroup, c->cgroup_len, controller, rel, rsize))
		return false;
	if (std_mount(controller, rel, dir, dsize))
		return true;
	if (c->mountinfo == NULL)
		c->mountinfo = read_all("/proc/self/mountinfo", &c->mountinfo_len);
	char mnt[PATH_MAX], root[PATH_MAX];
	return c->mountinfo != NULL &&
	       cgpath_mount(c->mountinfo, c->mountinfo_len, controller, mnt, sizeof mnt, root, sizeof root) &&
	       cgpath_dir(mnt, root, rel, dir, dsize);
}

/* Whether the file at dir/name lists every word of words. */
static bool lists(const char *dir, const char *name, const char *const *words, int n)
{
	char path[PATH_MAX], buf[1024];
	if (!join(path, sizeof path, dir, name))
		return false;
	ssize_t len = read_small(path, buf, sizeof buf);
	if (len < 0)
		return false;
	for (int i = 0; i < n; i++)
		if (!cgpath_has_word(buf, (size_t)len, words[i]))
			return false;
	return true;
}

/* cgroup v2, for every cap asked: our cgroup must offer the controllers
 * and let us make children; RUN's subtree gets them. Alone in a cgroup
 * whose children cannot have them yet (the no-internal-processes rule),
 * diehard first moves itself into RUN/supervisor, a leaf. */
static bool try_v2(struct caps *c, const char *name)
{
	const char *words[CAPS_KINDS];
	char enable[64] = "";
	int n = 0;
	for (int k = 0; k < CAPS_KINDS; k++)
		if (c->limit[k] != 0) {
			words[n++] = v1_controller[k];
			strcat(enable, n > 1 ? " +" : "+");
			strcat(enable, v1_controller[k]);
		}
	char base[PATH_MAX], rel[PATH_MAX], run[PATH_MAX], runrel[PATH_MAX], path[PATH_MAX];
	if (!own_cgroup(c, NULL, base, sizeof base, rel, sizeof rel) || !lists(base, "cgroup.controllers", words, n))
		return false;
	if (!join(run, sizeof run, base, name) ||
	    !join(runrel, sizeof runrel, strcmp(rel, "/") == 0 ? "" : rel, name))
		return false;
	if (mkdir(run, 0755) != 0 && errno != EEXIST)
		return false;
	if (!lists(base, "cgroup.subtree_control", words, n)) {
		/* Enabling them below our cgroup needs it empty: only if we
		 * are alone in it (a service's main process). */
		char procs[256], mine[32];
		ssize_t len;
		snprintf(mine, sizeof mine, "%ld", (long)getpid());
		if (!join(path, sizeof path, base, "cgroup.procs") || (len = read_small(path, procs, sizeof procs)) < 0 ||
		    !cgpath_only_pid(procs, (size_t)len, (long)getpid()))
			goto fail;
		char leaf[PATH_MAX];
		if (!join(leaf, sizeof leaf, run, "supervisor") || (mkdir(leaf, 0755) != 0 && errno != EEXIST) ||
		    !join(path, sizeof path, leaf, "cgroup.procs") || sandbox_write_file(path, mine) != 0)
			goto fail;
		if (!join(path, sizeof path, base, "cgroup.subtree_control") || sandbox_write_file(path, enable) != 0)
			return false; /* we stay in our leaf: harmless */
	}
	if (!join(path, sizeof path, run, "cgroup.subtree_control") || sandbox_write_file(path, enable) != 0)
		goto fail;
	if (!join(c->v2pre, sizeof c->v2pre - 16, run, "r") || !join(c->v2rel, sizeof c->v2rel - 16, runrel, "r")) {
		c->v2pre[0] = c->v2rel[0] = '\0';
		goto fail;
	}
	snprintf(c->v2run, sizeof c->v2run, "%s", run);
	for (int k = 0; k < CAPS_KINDS; k++)
		if (c->limit[k] != 0) {
			c->by[k] = CAPS_BY_CGROUP2;
			snprintf(c->how[k], sizeof c->how[k], "cgroup v2 %s", k == CAPS_TASKS ? "pids.max" : "memory.max");
		}
	return true;
fail:
	(void)rmdir(run);
	return false;
}

/* cgroup v1, for cap k: its hierarchy mounted, and our cgroup in it ours
 * to write to (the replicas' children make their own there). */
static bool try_v1(struct caps *c, int k, const char *name)
{
	char base[PATH_MAX], rel[PATH_MAX];
	if (!own_cgroup(c, v1_controller[k], base, sizeof base, rel, sizeof rel) || access(base, W_OK | X_OK) != 0)
		return false;
	int a = snprintf(c->v1pre[k], sizeof c->v1pre[k], "%s/%s-r", base, name);
	int b = snprintf(c->v1rel[k], sizeof c->v1rel[k], "%s/%s-r", strcmp(rel, "/") == 0 ? "" : rel, name);
	if (a <= 0 || (size_t)a >= sizeof c->v1pre[k] - 16 || b <= 0 || (size_t)b >= sizeof c->v1rel[k] - 16) {
		c->v1pre[k][0] = '\0';
		return false;
	}
	snprintf(c->v1base[k], sizeof c->v1base[k], "%s", base);
	c->by[k] = CAPS_BY_CGROUP1;
	snprintf(c->how[k], sizeof c->how[k], "cgroup v1 %s", k == CAPS_TASKS ? "pids.max" : "memory.limit_in_bytes");
	return true;
}

/* The task cap without a cgroup: RLIMIT_NPROC, where it counts the
 * replica's processes alone. */
static void tasks_by_rlimit(struct caps *c)
{
	if (c->limit[CAPS_TASKS] == 0 || c->by[CAPS_TASKS] == CAPS_BY_CGROUP1 || c->by[CAPS_TASKS] == CAPS_BY_CGROUP2)
		return;
	if (getuid() == 0 || geteuid() == 0) {
		c->by[CAPS_TASKS] = CAPS_BY_NONE;
		snprintf(c->how[CAPS_TASKS], sizeof c->how[CAPS_TASKS],
			 "no cgroup to make, and RLIMIT_NPROC does not count root's processes");
	} else if (!c->userns) {
		c->by[CAPS_TASKS] = CAPS_BY_NONE;
		snprintf(c->how[CAPS_TASKS], sizeof c->how[CAPS_TASKS],
			 "no cgroup to make, and without a user namespace of its own RLIMIT_NPROC would count "
			 "every process of the user");
	} else {
		c->by[CAPS_TASKS] = CAPS_BY_RLIMIT;
		snprintf(c->how[CAPS_TASKS], sizeof c->how[CAPS_TASKS], "RLIMIT_NPROC in its user namespace");
	}
}

/* The lowest limit in file from dir up to its hierarchy's mount point (a
 * limit binds the whole subtree): v2's memory.max, v1's
 * memory.limit_in_bytes ("max", or v1's huge "unlimited", are no limit). */
static uint64_t lowest_limit(char *dir, size_t mount_len, const char *file)
{
	uint64_t low = UINT64_MAX;
	for (;;) {
		char path[PATH_MAX], buf[64];
		uint64_t v;
		if (join(path, sizeof path, dir, file) && read_small(path, buf, sizeof buf) > 0 &&
		    sscanf(buf, "%" SCNu64, &v) == 1 && v < low)
			low = v;
		char *slash = strrchr(dir, '/');
		if (slash == NULL || (size_t)(slash - dir) < mount_len)
			return low;
		*slash = '\0';
	}
}

/* The length of the mount point in dir, the directory of the cgroup rel. */
static size_t mount_len(const char *dir, const char *rel)
{
	size_t dlen = strlen(dir), rlen = strcmp(rel, "/") == 0 ? 0 : strlen(rel);
	return dlen >= rlen ? dlen - rlen : 0;
}

/* The memory the host gives us (caps_new); also whether it has swap.
 * Without share, the RAM alone. */
static uint64_t memory_budget(struct caps *c, bool share)
{
	struct sysinfo si;
	uint64_t budget = 0;
	if (sysinfo(&si) == 0) {
		budget = (uint64_t)si.totalram * si.mem_unit;
		c->swap = si.totalswap != 0;
	}
	if (!share)
		return budget;
	char dir[PATH_MAX], rel[PATH_MAX];
	uint64_t limit = UINT64_MAX, v;
	if (own_cgroup(c, NULL, dir, sizeof dir, rel, sizeof rel) &&
	    (v = lowest_limit(dir, mount_len(dir, rel), "memory.max")) < limit)
		limit = v;
	if (own_cgroup(c, "memory", dir, sizeof dir, rel, sizeof rel) &&
	    (v = lowest_limit(dir, mount_len(dir, rel), "memory.limit_in_bytes")) < limit)
		limit = v;
	return limit < budget ? limit : budget;
}

static void at_exit(void)
{
	if (exiting != NULL && exiting->owner == getpid())
		caps_free(exiting);
}

struct caps *caps_new(uint64_t max_tasks, uint64_t max_memory, unsigned memory_share, bool userns)
{
	struct caps *c = calloc(1, sizeof *c);
	if (c == NULL)
		return NULL;
	c->owner = getpid();
	uint64_t budget = memory_budget(c, max_memory == 0 && memory_share > 0);
	if (max_memory == 0 && memory_share > 0) {
		max_memory = budget / memory_share & ~(((uint64_t)1 << 20) - 1);
		if (max_memory < CAPS_MEMORY_MIN)
			max_memory = CAPS_MEMORY_MIN;
	}
	c->limit[CAPS_TASKS] = max_tasks;
	c->limit[CAPS_MEMORY] = max_memory;
	c->userns = userns;
	for (int k = 0; k < CAPS_KINDS; k++)
		snprintf(c->how[k], sizeof c->how[k], "off");
	if (max_tasks == 0 && max_memory == 0)
		goto done;
	char name[64];
	run_name(name, sizeof name, &c->ns);
	if (!try_v2(c, name))
		for (int k = 0; k < CAPS_KINDS; k++)
			if (c->limit[k] != 0)
				(void)try_v1(c, k, name);
	if (max_memory != 0 && c->by[CAPS_MEMORY] == CAPS_BY_NONE) {
		c->by[CAPS_MEMORY] = CAPS_BY_RLIMIT;
		snprintf(c->how[CAPS_MEMORY], sizeof c->how[CAPS_MEMORY], "RLIMIT_DATA, per process");
	}
	tasks_by_rlimit(c);
	if (c->v2run[0] != '\0' || c->v1pre[0][0] != '\0' || c->v1pre[1][0] != '\0') {
		static bool registered;
		if (!registered && atexit(at_exit) == 0)
			registered = true;
		exiting = c;
	}
done:
	free(c->cgroup);
	free(c->mountinfo);
	c->cgroup = c->mountinfo = NULL;
	return c;
}

void caps_set_userns(struct caps *c, bool userns)
{
	if (c == NULL)
		return;
	c->userns = userns;
	tasks_by_rlimit(c);
}

enum caps_by caps_by(const struct caps *c, enum caps_kind k)
{
	return c != NULL ? c->by[k] : CAPS_BY_NONE;
}

uint64_t caps_limit(const struct caps *c, enum caps_kind k)
{
	return c != NULL ? c->limit[k] : 0;
}

const char *caps_how(const struct caps *c, enum caps_kind k)
{
	return c != NULL ? c->how[k] : "off";
}

/* Closes the fds of sp that are open. */
void caps_spawn_done(struct caps_spawn *sp)
{
	if (sp->cgroup_fd >= 0)
		close(sp->cgroup_fd);
	sp->cgroup_fd = -1;
}

/* Writes cap k into the replica's cgroup v2 directory dir: 0, or an
 * errno. */
static int set_limit_v2(const struct caps *c, int k, const char *dir)
{
	char path[PATH_MAX], value[32];
	snprintf(value, sizeof value, "%llu", (unsigned long long)c->limit[k]);
	if (!join(path, sizeof path, dir, k == CAPS_TASKS ? "pids.max" : "memory.max"))
		return ENAMETOOLONG;
	int err = sandbox_write_file(path, value);
	if (err != 0 || k == CAPS_TASKS)
		return err;
	/* No swap beyond the cap (the file exists only with swap); the OOM
	 * killer takes the replica whole. */
	if (join(path, sizeof path, dir, "memory.swap.max") && (err = sandbox_write_file(path, "0")) != 0 && err != ENOENT)
		return err;
	if (join(path, sizeof path, dir, "memory.oom.group") && (err = sandbox_write_file(path, "1")) != 0 && err != ENOENT)
		return err;
	return 0;
}

/* Removes the replica's directories: true when none is left. */
static bool remove_dirs(struct caps_replica *cr)
{
	struct caps *c = cr->c;
	char dir[PATH_MAX];
	bool gone = true;
	if (c->v2run[0] != '\0' && replica_path(dir, sizeof dir, c->v2pre, cr->n, NULL))
		gone &= rmdir(dir) == 0 || errno == ENOENT;
	for (int k = 0; k < CAPS_KINDS; k++)
		if (c->by[k] == CAPS_BY_CGROUP1 && replica_path(dir, sizeof dir, c->v1pre[k], cr->n, NULL))
			gone &= rmdir(dir) == 0 || errno == ENOENT;
	return gone;
}

struct caps_replica *caps_replica_new(struct caps *c, struct caps_spawn *sp)
{
	memset(sp, 0, sizeof *sp);
	sp->cgroup_fd = -1;
	errno = 0;
	if (c == NULL)
		return NULL;
	if (c->by[CAPS_MEMORY] == CAPS_BY_RLIMIT)
		sp->data = c->limit[CAPS_MEMORY];
	if (c->by[CAPS_TASKS] == CAPS_BY_RLIMIT)
		sp->nproc = c->limit[CAPS_TASKS];
	bool v2 = c->v2run[0] != '\0';
	bool v1 = c->by[CAPS_TASKS] == CAPS_BY_CGROUP1 || c->by[CAPS_MEMORY] == CAPS_BY_CGROUP1;
	if (!v2 && !v1)
		return NULL;
	struct caps_replica *cr = calloc(1, sizeof *cr);
	if (cr == NULL)
		return NULL;
	*cr = (struct caps_replica){ .c = c, .n = c->next++ };
	char dir[PATH_MAX];
	int err = 0;
	if (v2) {
		/* Made here: the child is cloned into it. */
		if (!replica_path(dir, sizeof dir, c->v2pre, cr->n, NULL))
			err = ENAMETOOLONG;
		else if (mkdir(dir, 0755) != 0)
			err = errno;
		for (int k = 0; k < CAPS_KINDS && err == 0; k++)
			if (c->limit[k] != 0)
				err = set_limit_v2(c, k, dir);
		if (err == 0 && (sp->cgroup_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
			err = errno;
	}
	/* v1: the child makes them (caps_enter). */
	for (int k = 0; k < CAPS_KINDS && err == 0; k++)
		if (c->by[k] == CAPS_BY_CGROUP1) {
			if (!replica_path(sp->v1[k].dir, sizeof sp->v1[k].dir, c->v1pre[k], cr->n, NULL))
				err = ENAMETOOLONG;
			snprintf(sp->v1[k].cap, sizeof sp->v1[k].cap, "%llu", (unsigned long long)c->limit[k]);
		}
	sp->memsw = c->swap;
	if (err != 0) {
		caps_spawn_done(sp);
		(void)remove_dirs(cr);
		free(cr);
		errno = err;
		return NULL;
	}
	cr->next = c->list;
	c->list = cr;
	return cr;
}

/* Lowers the limit res to at most cap (the hard limit too, so the
 * program cannot raise it back; a lower one stays). */
static int lower_rlimit(int res, uint64_t cap)
{
	struct rlimit rl;
	if (getrlimit(res, &rl) != 0)
		return errno;
	if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max > cap)
		rl.rlim_max = cap;
	if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > rl.rlim_max)
		rl.rlim_cur = rl.rlim_max;
	return setrlimit(res, &rl) == 0 ? 0 : errno;
}

/* dir and name joined into buf (PATH_MAX bytes) without stdio: caps_enter
 * runs between fork and exec. */
static const char *child_path(char *buf, const char *dir, const char *name)
{
	size_t d = strnlen(dir, PATH_MAX - 64), n = strlen(name);
	memcpy(buf, dir, d);
	buf[d] = '/';
	memcpy(buf + d + 1, name, n + 1);
	return buf;
}

/* Writes s to path: 0, or an errno. Async-signal-safe. */
static int child_write(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	size_t n = strlen(s);
	int err = write(fd, s, n) == (ssize_t)n ? 0 : errno ? errno : EIO;
	close(fd);
	return err;
}

/* Makes the replica's cgroup of hierarchy k (its directory may be there
 * already: a start made again without namespaces), writes its cap, and
 * moves this thread into it. */
static int child_enter_v1(const struct caps_spawn *sp, int k)
{
	char path[PATH_MAX];
	int err;
	if (mkdir(sp->v1[k].dir, 0755) != 0 && errno != EEXIST)
		return errno;
	if (k == CAPS_TASKS) {
		err = child_write(child_path(path, sp->v1[k].dir, "pids.max"), sp->v1[k].cap);
	} else {
		err = child_write(child_path(path, sp->v1[k].dir, "memory.limit_in_bytes"), sp->v1[k].cap);
		/* With swap, none past the cap. */
		if (err == 0 && sp->memsw)
			err = child_write(child_path(path, sp->v1[k].dir, "memory.memsw.limit_in_bytes"), sp->v1[k].cap);
	}
	/* "0" is the writer itself: one thread, ours alone, moved without the
	 * kernel's global lock (caps.h). */
	if (err == 0)
		err = child_write(child_path(path, sp->v1[k].dir, "tasks"), "0");
	return err;
}

int caps_enter(const struct caps_spawn *sp, bool sandboxed, bool own_userns)
{
	bool in_cgroup = sp->cgroup_fd >= 0;
	int err;
	if (sp->v2_move && sp->cgroup_fd >= 0) {
		int fd = openat(sp->cgroup_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
		if (fd < 0)
			return errno;
		err = write(fd, "0", 1) == 1 ? 0 : errno ? errno : EIO;
		close(fd);
		if (err != 0)
			return err;
	}
	for (int k = 0; k < CAPS_KINDS; k++)
		if (sp->v1[k].dir[0] != '\0') {
			if ((err = child_enter_v1(sp, k)) != 0)
				return err;
			in_cgroup = true;
		}
	/* Refused (a service manager's RestrictNamespaces=), the replicas
	 * still run under their caps; only the view and v2's fence are lost. */
	if (sandboxed && in_cgroup)
		(void)unshare(CLONE_NEWCGROUP);
	if (sp->data != 0 && (err = lower_rlimit(RLIMIT_DATA, sp->data)) != 0)
		return err;
	if (sp->nproc != 0 && own_userns && (err = lower_rlimit(RLIMIT_NPROC, sp->nproc)) != 0)
		return err;
	return 0;
}

pid_t caps_clone(struct caps_spawn *sp, unsigned long flags)
{
	if (!sp->v2_move) {
		struct clone_args args;
		memset(&args, 0, sizeof args);
		args.flags = flags | CLONE_INTO_CGROUP;
		args.exit_signal = SIGCHLD;
		args.cgroup = (uint64_t)sp->cgroup_fd;
		pid_t pid = (pid_t)syscall(SYS_clone3, &args, sizeof args);
		if (pid >= 0 || errno != ENOSYS)
			return pid;
		sp->v2_move = true;
	}
	return (pid_t)syscall(SYS_clone, flags | SIGCHLD, NULL, NULL, NULL, 0);
}

bool caps_clone_refused(int err)
{
	return err == EBADF || err == EACCES || err == ENOENT || err == EBUSY || err == EOPNOTSUPP || err == EAGAIN;
}

/* The counter key of the file name in the replica's directory (prefix, n). */
static bool counter(const char *prefix, unsigned n, const char *file, const char *key, uint64_t *v)
{
	char path[PATH_MAX], buf[1024];
	if (!replica_path(path, sizeof path, prefix, n, file))
		return false;
	ssize_t len = read_small(path, buf, sizeof buf);
	return len >= 0 && cgpath_counter(buf, (size_t)len, key, v);
}

int caps_replica_over(struct caps_replica *cr, char *why, size_t size)
{
	if (cr == NULL || cr->ended)
		return -1;
	struct caps *c = cr->c;
	char limit[32];
	uint64_t v;
	if (c->by[CAPS_TASKS] == CAPS_BY_CGROUP2 || c->by[CAPS_TASKS] == CAPS_BY_CGROUP1) {
		bool v2 = c->by[CAPS_TASKS] == CAPS_BY_CGROUP2;
		if (counter(v2 ? c->v2pre : c->v1pre[CAPS_TASKS], cr->n, "pids.events", "max", &v) && v > 0) {
			snprintf(why, size, "over its task cap (pids.max %llu, cgroup %s): %llu fork%s refused",
				 (unsigned long long)c->limit[CAPS_TASKS], v2 ? "v2" : "v1", (unsigned long long)v,
				 v == 1 ? "" : "s");
			return CAPS_TASKS;
		}
	}
	if (c->by[CAPS_MEMORY] == CAPS_BY_CGROUP2 || c->by[CAPS_MEMORY] == CAPS_BY_CGROUP1) {
		bool v2 = c->by[CAPS_MEMORY] == CAPS_BY_CGROUP2;
		if (counter(v2 ? c->v2pre : c->v1pre[CAPS_MEMORY], cr->n, v2 ? "memory.events" : "memory.oom_control",
			    "oom_kill", &v) &&
		    v > 0) {
			caps_size_text(limit, sizeof limit, c->limit[CAPS_MEMORY]);
			snprintf(why, size, "over its memory cap (%s %s, cgroup %s): out of memory, the kernel killed %s",
				 v2 ? "memory.max" : "memory.limit_in_bytes", limit, v2 ? "v2" : "v1",
				 v2 ? "it" : "a process of it");
			return CAPS_MEMORY;
		}
	}
	return -1;
}

/* Whether the process pidfd was opened on (pid) is in the cgroup rel of
 * the hierarchy of controller (NULL: v2), as its /proc/PID/cgroup says.
 * The pidfd holds the process: a pid reused by then names another, whose
 * file does not name our cgroup, or which is ours anyway. */
static bool in_cgroup(long pid, const char *controller, const char *rel)
{
	char path[64], buf[4096], own[PATH_MAX];
	snprintf(path, sizeof path, "/proc/%ld/cgroup", pid);
	ssize_t len = read_small(path, buf, sizeof buf);
	return len > 0 && cgpath_own(buf, (size_t)len, controller, own, sizeof own) && strcmp(own, rel) == 0;
}

/* Whether pid is among the n in set. */
static bool seen(const long *set, size_t n, long pid)
{
	for (size_t i = 0; i < n; i++)
		if (set[i] == pid)
			return true;
	return false;
}

/* Kills every process listed in dir/cgroup.procs, each through a pidfd
 * once it is seen to be in the cgroup rel (a pid read from the list may
 * have been reused since), round after round until a round lists none that
 * was not signalled already: a process forked meanwhile is listed in the
 * next round, and a process with SIGKILL pending forks no more. Bounded,
 * in case a list never settles. */
static void kill_listed(const char *dir, const char *controller, const char *rel)
{
	char path[PATH_MAX];
	if (!join(path, sizeof path, dir, "cgroup.procs"))
		return;
	long *done = NULL;
	size_t ndone = 0, size = 0;
	for (int round = 0; round < 256; round++) {
		size_t len;
		char *list = read_all(path, &len);
		if (list == NULL)
			break;
		bool fresh = false;
		for (char *p = list, *end; *p != '\0'; p = end) {
			long pid = strtol(p, &end, 10);
			if (end == p)
				break;
			while (*end == '\n')
				end++;
			if (pid <= 0 || seen(done, ndone, pid))
				continue;
			fresh = true;
			int fd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
			if (fd >= 0 && in_cgroup(pid, controller, rel))
				(void)syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0);
			if (fd >= 0)
				close(fd);
			if (ndone == size) {
				size_t n = size ? 2 * size : 64;
				long *bigger = realloc(done, n * sizeof *bigger);
				if (bigger == NULL)
					continue; /* signalled again next round */
				done = bigger;
				size = n;
			}
			done[ndone++] = pid;
		}
		free(list);
		if (!fresh)
			break;
	}
	free(done);
}

void caps_replica_kill(struct caps_replica *cr)
{
	if (cr == NULL)
		return;
	struct caps *c = cr->c;
	char dir[PATH_MAX], path[PATH_MAX], rel[PATH_MAX];
	if (c->v2run[0] != '\0' && replica_path(dir, sizeof dir, c->v2pre, cr->n, NULL)) {
		/* cgroup.kill (Linux 5.14) kills it whole, forks racing it too. */
		if (join(path, sizeof path, dir, "cgroup.kill") && sandbox_write_file(path, "1") == 0)
			return;
		if (replica_path(rel, sizeof rel, c->v2rel, cr->n, NULL))
			kill_listed(dir, NULL, rel);
	}
	for (int k = 0; k < CAPS_KINDS; k++)
		if (c->by[k] == CAPS_BY_CGROUP1 && replica_path(dir, sizeof dir, c->v1pre[k], cr->n, NULL) &&
		    replica_path(rel, sizeof rel, c->v1rel[k], cr->n, NULL))
			kill_listed(dir, v1_controller[k], rel);
}

/* Takes cr out of the list and frees it. */
static void forget(struct caps_replica *cr)
{
	for (struct caps_replica **p = &cr->c->list; *p != NULL; p = &(*p)->next)
		if (*p == cr) {
			*p = cr->next;
			break;
		}
	free(cr);
}

void caps_replica_end(struct caps_replica *cr, bool kill)
{
	if (cr == NULL)
		return;
	if (kill)
		caps_replica_kill(cr);
	cr->ended = true;
	if (remove_dirs(cr))
		forget(cr);
}

/* sweep in the directory that holds run. */
static void sweep_beside(const char *run, unsigned long ns)
{
	char base[PATH_MAX];
	const char *slash = strrchr(run, '/');
	if (run[0] == '\0' || slash == NULL || slash == run)
		return;
	snprintf(base, sizeof base, "%.*s", (int)(slash - run), run);
	sweep(base, ns);
}

void caps_tick(struct caps *c)
{
	if (c == NULL)
		return;
	/* Not at the start, where every run would pay for it. */
	if (!c->swept) {
		c->swept = true;
		sweep_beside(c->v2run, c->ns);
		for (int k = 0; k < CAPS_KINDS; k++)
			if (c->v1base[k][0] != '\0')
				sweep(c->v1base[k], c->ns);
	}
	for (struct caps_replica *cr = c->list, *next; cr != NULL; cr = next) {
		next = cr->next;
		if (cr->ended && remove_dirs(cr))
			forget(cr);
	}
}

void caps_free(struct caps *c)
{
	if (c == NULL || c->owner != getpid())
		return;
	if (exiting == c)
		exiting = NULL;
	for (struct caps_replica *cr = c->list; cr != NULL; cr = cr->next) {
		caps_replica_kill(cr);
		cr->ended = true;
	}
	/* Killed processes leave their cgroup as they exit: a few
	 * milliseconds, but never more than a second of ours. */
	for (int i = 0; i < 1000 && c->list != NULL; i++) {
		caps_tick(c);
		if (c->list != NULL) {
			struct timespec ms = { 0, 1000000 };
			nanosleep(&ms, NULL);
		}
	}
	while (c->list != NULL)
		forget(c->list);
	if (c->v2run[0] != '\0')
		(void)rmdir(c->v2run); /* with us in RUN/supervisor, it stays: the next sweep's */
	free(c);
}
