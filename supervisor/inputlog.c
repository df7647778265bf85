/* inputlog.c — see inputlog.h. */
#include "inputlog.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "log.h"

struct inputlog {
	int fd;
	size_t cap;
	size_t bytes;
	size_t released; /* bytes at the front given back */
	bool broken;     /* a write failed: the log is incomplete from here */
};

/* Released in steps, not byte by byte: fallocate is a system call. */
#define RELEASE_STEP ((size_t)4 << 20)

struct inputlog *inputlog_new(size_t cap)
{
	if (cap == 0)
		return NULL;
	struct inputlog *l = calloc(1, sizeof *l);
	if (l == NULL)
		return NULL;
	l->cap = cap;
	l->fd = memfd_create("diehard-input", MFD_CLOEXEC);
	if (l->fd < 0) {
		log_warn("no input log (memfd_create: %s): replicas cannot be replaced", strerror(errno));
		free(l);
		return NULL;
	}
	return l;
}

void inputlog_append(struct inputlog *l, const void *p, size_t n)
{
	if (l == NULL || l->broken)
		return;
	const char *c = p;
	size_t done = 0;
	while (done < n) {
		ssize_t w = pwrite(l->fd, c + done, n - done, (off_t)(l->bytes + done));
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			log_warn("input log: %s; replicas cannot be replaced from here on", strerror(errno));
			l->broken = true;
			return;
		}
		done += (size_t)w;
	}
	l->bytes += n;
	if (l->bytes - l->released > l->cap + RELEASE_STEP) {
		size_t upto = (l->bytes - l->cap) & ~(RELEASE_STEP - 1);
		if (fallocate(l->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)l->released,
			      (off_t)(upto - l->released)) == 0)
			l->released = upto;
	}
}

size_t inputlog_bytes(const struct inputlog *l)
{
	return l ? l->bytes : 0;
}

size_t inputlog_retained_from(const struct inputlog *l)
{
	return l ? l->released : 0;
}

bool inputlog_complete(const struct inputlog *l)
{
	return l != NULL && !l->broken && l->released == 0;
}

ssize_t inputlog_send(struct inputlog *l, size_t off, int fd, size_t max)
{
	if (l == NULL || off < l->released || l->broken) {
		errno = ENODATA;
		return -1;
	}
	if (off >= l->bytes || max == 0)
		return 0;
	size_t n = l->bytes - off < max ? l->bytes - off : max;
	loff_t at = (loff_t)off;
	ssize_t w = splice(l->fd, &at, fd, NULL, n, SPLICE_F_NONBLOCK);
	if (w >= 0 || errno != EINVAL)
		return w;
	/* No splice between these two: through a buffer. */
	char buf[65536];
	if (n > sizeof buf)
		n = sizeof buf;
	ssize_t r = pread(l->fd, buf, n, (off_t)off);
	if (r <= 0) {
		if (r == 0)
			errno = ENODATA;
		return -1;
	}
	return write(fd, buf, (size_t)r);
}

void inputlog_free(struct inputlog *l)
{
	if (l == NULL)
		return;
	close(l->fd);
	free(l);
}

bool inputlog_read(const struct inputlog *l, size_t off, void *buf, size_t n)
{
	if (n == 0)
		return true;
	if (l == NULL || l->broken || off < l->released || off + n > l->bytes)
		return false;
	size_t done = 0;
	while (done < n) {
		ssize_t r = pread(l->fd, (char *)buf + done, n - done, (off_t)(off + done));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return false;
		done += (size_t)r;
	}
	return true;
}
