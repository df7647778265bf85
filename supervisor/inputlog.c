/* inputlog.c — see inputlog.h.
 *
 * Appends land in a tail buffer first and reach the memfd a tail at a time
 * (a server's connection log appends two records a request: one pwrite each
 * was a third of the proxy's system calls). Invariant: the log's bytes are
 * the memfd's [0, bytes - tail_n) followed by tail[0, tail_n); every reader
 * (send, read, complete) flushes first, so it sees them all in the memfd,
 * but a read of bytes all in the tail, copied from there.
 * The memfd is memory too: nothing is less durable for waiting here. */
#include "inputlog.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "log.h"

#define TAIL_CAP ((size_t)64 << 10)

struct inputlog {
	int fd;
	size_t cap;
	size_t bytes;    /* appended so far, the tail's included */
	size_t released; /* bytes at the front given back */
	bool broken;     /* a write failed: the log is incomplete from here */
	size_t tail_n;
	unsigned char tail[TAIL_CAP];
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

/* Writes n bytes at the memfd's offset at; false (the log broken, said
 * once) when it cannot. */
static bool put(struct inputlog *l, const void *p, size_t n, size_t at)
{
	const char *c = p;
	size_t done = 0;
	while (done < n) {
		ssize_t w = pwrite(l->fd, c + done, n - done, (off_t)(at + done));
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			log_warn("input log: %s; replicas cannot be replaced from here on", strerror(errno));
			l->broken = true;
			return false;
		}
		done += (size_t)w;
	}
	return true;
}

/* Gives back the front past cap, in steps (fallocate is a system call),
 * of what the memfd holds. */
static void release(struct inputlog *l)
{
	size_t held = l->bytes - l->tail_n;
	if (held - l->released > l->cap + RELEASE_STEP) {
		size_t upto = (held - l->cap) & ~(RELEASE_STEP - 1);
		if (fallocate(l->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)l->released,
			      (off_t)(upto - l->released)) == 0)
			l->released = upto;
	}
}

/* The tail into the memfd. */
static void flush(struct inputlog *l)
{
	if (l->tail_n == 0)
		return;
	size_t n = l->tail_n;
	l->tail_n = 0;
	if (!l->broken && put(l, l->tail, n, l->bytes - n))
		release(l);
}

void inputlog_append(struct inputlog *l, const void *p, size_t n)
{
	if (l == NULL || l->broken || n == 0)
		return;
	if (n > TAIL_CAP - l->tail_n) {
		flush(l);
		if (l->broken)
			return; /* the log ends where the write failed */
	}
	if (n >= TAIL_CAP) {
		/* Too big for the tail: straight in (the tail is empty). */
		l->bytes += n;
		if (put(l, p, n, l->bytes - n))
			release(l);
		return;
	}
	memcpy(l->tail + l->tail_n, p, n);
	l->tail_n += n;
	l->bytes += n;
}

size_t inputlog_bytes(const struct inputlog *l)
{
	return l ? l->bytes : 0;
}

size_t inputlog_retained_from(const struct inputlog *l)
{
	return l ? l->released : 0;
}

bool inputlog_complete(struct inputlog *l)
{
	if (l != NULL)
		flush(l);
	return l != NULL && !l->broken && l->released == 0;
}

ssize_t inputlog_send(struct inputlog *l, size_t off, int fd, size_t max)
{
	if (l != NULL)
		flush(l);
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

bool inputlog_read(struct inputlog *l, size_t off, void *buf, size_t n)
{
	if (n == 0)
		return true;
	if (l != NULL && !l->broken && off >= l->bytes - l->tail_n && off <= l->bytes && n <= l->bytes - off) {
		/* All in the tail (a record just appended: the connection log
		 * walks each one while replacements are fed): no flush. */
		memcpy(buf, l->tail + (off - (l->bytes - l->tail_n)), n);
		return true;
	}
	if (l != NULL)
		flush(l);
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
