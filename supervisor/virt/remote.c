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

#define TCP_LISTENERS 64    /* listening sockets looked at, at most */
#define TCP_ACCEPTED 1024    /* connections on their ports, at most */

struct tcp_socks {
	unsigned long listen_ino[TCP_LISTENERS];
	unsigned listen_port[TCP_LISTENERS];
	size_t nl;
	unsigned long conn_ino[TCP_ACCEPTED];
	unsigned conn_port[TCP_ACCEPTED];
	size_t nc;
};

/* One of pid's /proc/PID/net tables ("sl local rem st ... inode"; local
 * "ADDR:PORT" in hex; st 0A is LISTEN): its listening sockets, and the
 * others with their local ports. */
static void tcp_table(pid_t pid, const char *table, struct tcp_socks *t)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/net/%s", (int)pid, table);
	FILE *f = fopen(path, "re");
	if (f == NULL)
		return;
	char line[512];
	if (fgets(line, sizeof line, f) == NULL) { /* the header */
		fclose(f);
		return;
	}
	while (fgets(line, sizeof line, f) != NULL) {
		char local[80], st[8];
		unsigned long inode;
		if (sscanf(line, "%*s %79s %*s %7s %*s %*s %*s %*s %*s %lu", local, st, &inode) != 3 || inode == 0)
			continue;
		const char *colon = strrchr(local, ':');
		if (colon == NULL)
			continue;
		unsigned port = (unsigned)strtoul(colon + 1, NULL, 16);
		if (strcmp(st, "0A") == 0 && t->nl < TCP_LISTENERS) {
			t->listen_ino[t->nl] = inode;
			t->listen_port[t->nl++] = port;
		} else if (strcmp(st, "0A") != 0 && t->nc < TCP_ACCEPTED) {
			t->conn_ino[t->nc] = inode;
			t->conn_port[t->nc++] = port;
		}
	}
	fclose(f);
}

static bool listen_port(const struct tcp_socks *t, unsigned port)
{
	for (size_t i = 0; i < t->nl; i++)
		if (t->listen_port[i] == port)
			return true;
	return false;
}

unsigned remote_tcp_roles(pid_t pid)
{
	struct tcp_socks *t = calloc(1, sizeof *t);
	if (t == NULL)
		return 0;
	tcp_table(pid, "tcp", t);
	tcp_table(pid, "tcp6", t);
	unsigned roles = 0;
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
	DIR *d = t->nl > 0 ? opendir(path) : NULL;
	struct dirent *e;
	while (d != NULL && roles != (REMOTE_LISTENS | REMOTE_ACCEPTED) && (e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		char to[64];
		ssize_t len = readlinkat(dirfd(d), e->d_name, to, sizeof to - 1);
		if (len <= 0)
			continue;
		to[len] = '\0';
		unsigned long inode;
		if (sscanf(to, "socket:[%lu]", &inode) != 1)
			continue;
		for (size_t i = 0; i < t->nl; i++)
			if (t->listen_ino[i] == inode)
				roles |= REMOTE_LISTENS;
		for (size_t i = 0; i < t->nc; i++)
			if (t->conn_ino[i] == inode && listen_port(t, t->conn_port[i]))
				roles |= REMOTE_ACCEPTED;
	}
	if (d != NULL)
		closedir(d);
	free(t);
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
