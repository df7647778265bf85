/* remote.c — see remote.h. */
#include "remote.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define PAGE 4096u

ssize_t remote_write(pid_t tid, uint64_t addr, const void *buf, size_t n)
{
	struct iovec local = { (void *)buf, n };
	struct iovec remote = { (void *)(uintptr_t)addr, n };
	ssize_t w = process_vm_writev(tid, &local, 1, &remote, 1, 0);
	return w < 0 ? -errno : w;
}

int remote_write_all(pid_t tid, uint64_t addr, const void *buf, size_t n)
{
	ssize_t w = remote_write(tid, addr, buf, n);
	if (w < 0)
		return (int)w;
	return (size_t)w == n ? 0 : -EFAULT;
}

int remote_read_all(pid_t tid, uint64_t addr, void *buf, size_t n)
{
	struct iovec local = { buf, n };
	struct iovec remote = { (void *)(uintptr_t)addr, n };
	ssize_t r = process_vm_readv(tid, &local, 1, &remote, 1, 0);
	if (r < 0)
		return -errno;
	return (size_t)r == n ? 0 : -EFAULT;
}

int remote_read_string(pid_t tid, uint64_t addr, char *buf, size_t size)
{
	size_t got = 0;
	while (got + 1 < size) {
		size_t page_left = PAGE - ((addr + got) & (PAGE - 1));
		size_t want = size - 1 - got < page_left ? size - 1 - got : page_left;
		struct iovec local = { buf + got, want };
		struct iovec remote = { (void *)(uintptr_t)(addr + got), want };
		ssize_t r = process_vm_readv(tid, &local, 1, &remote, 1, 0);
		if (r <= 0)
			return r < 0 ? -errno : -EFAULT;
		if (memchr(buf + got, '\0', (size_t)r) != NULL)
			return 0;
		got += (size_t)r;
	}
	return -ENAMETOOLONG;
}

int remote_status(pid_t tid, char *buf, size_t size)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/status", (int)tid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, size - 1);
	int err = errno;
	close(fd);
	if (n < 0) {
		errno = err;
		return -1;
	}
	buf[n] = '\0';
	return 0;
}

/* pid's /proc/PID/stat read into buf: what follows its name ("PID (COMM)
 * S PPID ..."), or NULL when it cannot be read (gone). COMM may hold
 * anything, but no more than 16 bytes, so the last ')' is its end. */
static const char *stat_fields(pid_t pid, char *buf, size_t size)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	ssize_t n = read(fd, buf, size - 1);
	close(fd);
	if (n <= 0)
		return NULL;
	buf[n] = '\0';
	const char *end = strrchr(buf, ')');
	return end != NULL ? end + 1 : NULL;
}

bool remote_stat(pid_t pid, char *state, pid_t *ppid)
{
	char buf[512];
	const char *f = stat_fields(pid, buf, sizeof buf);
	char s;
	int p;
	if (f == NULL || sscanf(f, " %c %d", &s, &p) != 2 || p < 0)
		return false;
	*state = s;
	*ppid = p;
	return true;
}

uint64_t remote_start_time(pid_t tid, char *state)
{
	char buf[1024];
	const char *p = stat_fields(tid, buf, sizeof buf);
	if (p != NULL && state != NULL && sscanf(p, " %c", state) != 1)
		return 0;
	/* p is at the space before field 3: field 22 is 19 spaces on. */
	for (int field = 3; p != NULL && field < 22; field++)
		p = strchr(p + 1, ' ');
	if (p == NULL)
		return 0;
	char *end;
	unsigned long long v = strtoull(p + 1, &end, 10);
	return end != p + 1 ? (uint64_t)v : 0;
}

/* The number after field (a "\nName:" of /proc/TID/status) in buf, or
 * -1. */
static long status_field(const char *buf, const char *field)
{
	const char *t = strstr(buf, field);
	if (t == NULL)
		return -1;
	t += strlen(field);
	char *end;
	long v = strtol(t, &end, 10);
	return end == t || v < 0 || v > INT_MAX ? -1 : v;
}

/* Thread tid's thread group, from /proc/TID/status (its name, escaped
 * there, cannot hold a line of its own). -1 with errno. */
pid_t remote_thread_group(pid_t tid)
{
	char buf[1024];
	if (remote_status(tid, buf, sizeof buf) != 0)
		return -1;
	long v = status_field(buf, "\nTgid:");
	if (v <= 0) {
		errno = ESRCH;
		return -1;
	}
	return (pid_t)v;
}

/* A growable array of unsigned longs. */
struct ulongs {
	unsigned long *v;
	size_t n, cap;
};

static bool ulongs_add(struct ulongs *a, unsigned long x)
{
	if (a->n == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 64;
		unsigned long *v = realloc(a->v, cap * sizeof *v);
		if (v == NULL)
			return false;
		a->v = v;
		a->cap = cap;
	}
	a->v[a->n++] = x;
	return true;
}

static int ulong_cmp(const void *x, const void *y)
{
	unsigned long a = *(const unsigned long *)x, b = *(const unsigned long *)y;
	return a < b ? -1 : a > b;
}

static bool ulongs_has(const struct ulongs *a, unsigned long x)
{
	return a->n > 0 && bsearch(&x, a->v, a->n, sizeof x, ulong_cmp) != NULL;
}

/* pid's socket inodes, from /proc/PID/fd, sorted: false when the
 * directory cannot be read. */
static bool socket_inodes(pid_t pid, struct ulongs *ino)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
	DIR *d = opendir(path);
	if (d == NULL)
		return false;
	bool ok = true;
	struct dirent *e;
	while (ok && (e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		char to[64];
		ssize_t len = readlinkat(dirfd(d), e->d_name, to, sizeof to - 1);
		if (len <= 0)
			continue;
		to[len] = '\0';
		unsigned long inode;
		if (sscanf(to, "socket:[%lu]", &inode) == 1)
			ok = ulongs_add(ino, inode);
	}
	closedir(d);
	if (ok && ino->n > 1)
		qsort(ino->v, ino->n, sizeof *ino->v, ulong_cmp);
	return ok;
}

/* Whether one of pid's sockets (mine) listens in one of its /proc/PID/net
 * tables ("sl local rem st ... inode"; st 0A is LISTEN): 1, 0, or -1 when
 * the table cannot be read (tcp6 without IPv6 is no table: 0). */
static int tcp_listens(pid_t pid, const char *table, const struct ulongs *mine)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/net/%s", (int)pid, table);
	FILE *f = fopen(path, "re");
	if (f == NULL)
		return errno == ENOENT ? 0 : -1;
	char line[512];
	int found = fgets(line, sizeof line, f) != NULL ? 0 : -1; /* the header */
	while (found == 0 && fgets(line, sizeof line, f) != NULL) {
		char st[8];
		unsigned long inode;
		if (sscanf(line, "%*s %*s %*s %7s %*s %*s %*s %*s %*s %lu", st, &inode) == 2 && strcmp(st, "0A") == 0 &&
		    ulongs_has(mine, inode))
			found = 1;
	}
	fclose(f);
	return found;
}

unsigned remote_tcp_roles(pid_t pid)
{
	struct ulongs mine = { 0 };
	unsigned roles = 0;
	if (!socket_inodes(pid, &mine)) {
		roles = REMOTE_UNREADABLE;
	} else if (mine.n > 0) {
		int v4 = tcp_listens(pid, "tcp", &mine), v6 = v4 == 1 ? 0 : tcp_listens(pid, "tcp6", &mine);
		roles = v4 < 0 || v6 < 0 ? REMOTE_UNREADABLE : v4 + v6 > 0 ? REMOTE_LISTENS : 0;
	}
	free(mine.v);
	return roles;
}

bool remote_family(pid_t tid, pid_t *tgid, pid_t *ppid)
{
	char buf[1024];
	if (remote_status(tid, buf, sizeof buf) != 0)
		return false;
	long g = status_field(buf, "\nTgid:"), p = status_field(buf, "\nPPid:");
	if (g <= 0 || p < 0)
		return false;
	*tgid = (pid_t)g;
	*ppid = (pid_t)p;
	return true;
}
