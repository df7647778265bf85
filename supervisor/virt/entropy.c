/* entropy.c — see entropy.h. Each pipe's writer is fed a page at a time:
 * writes of PIPE_BUF bytes or less are all-or-nothing, so the keystream is
 * never split by a partial write, and a page is what a pipe frees up.
 * Each pipe holds one page (not the default 16): a program that keeps
 * thousands of random devices open costs 4 KiB of kernel memory, one fd
 * and about 200 bytes here per open; a read of more than a page waits for
 * us to refill it, a wake-up per page. A page is made in one buffer shared
 * by all feeders and the stream rewound if the pipe had no room for it. */
#include "entropy.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

#define PAGE 4096u

struct feeder {
	struct entropy *E;
	int fd;             /* write end */
	struct event *ev;
	struct chacha cc;   /* the stream from the first byte not yet written */
	unsigned *open;     /* the owner's count of live pipes */
	struct feeder *prev, *next;
};

struct entropy {
	struct event_base *base;
	uint8_t key[CHACHA_KEY_BYTES];
	struct feeder *all;
	uint8_t page[PAGE]; /* the page being written, for any feeder */
};

struct entropy *entropy_new(struct event_base *base, const uint8_t key[CHACHA_KEY_BYTES])
{
	struct entropy *E = calloc(1, sizeof *E);
	if (E == NULL)
		return NULL;
	E->base = base;
	memcpy(E->key, key, sizeof E->key);
	return E;
}

static void feeder_free(struct feeder *f)
{
	if (*f->open > 0)
		--*f->open;
	if (f->ev != NULL)
		event_free(f->ev);
	close(f->fd);
	if (f->prev != NULL)
		f->prev->next = f->next;
	else
		f->E->all = f->next;
	if (f->next != NULL)
		f->next->prev = f->prev;
	free(f);
}

void entropy_free(struct entropy *E)
{
	if (E == NULL)
		return;
	while (E->all != NULL)
		feeder_free(E->all);
	free(E);
}

/* Writes until the pipe is full. false once the reader is gone. A write of
 * a page (PIPE_BUF) to a non-blocking pipe is all or nothing. */
static bool feed(struct feeder *f)
{
	for (;;) {
		struct chacha before = f->cc;
		chacha_read(&f->cc, f->E->page, PAGE);
		ssize_t w;
		do
			w = write(f->fd, f->E->page, PAGE);
		while (w < 0 && errno == EINTR);
		if (w == (ssize_t)PAGE)
			continue;
		f->cc = before; /* not written: the same bytes next time */
		if (w < 0 && errno == EAGAIN)
			return true;
		return false; /* EPIPE: every reader closed it */
	}
}

static void on_writable(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct feeder *f = arg;
	if (!feed(f))
		feeder_free(f);
}

int entropy_open(struct entropy *E, uint32_t domain, uint64_t n, int nonblocking, unsigned *open)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0)
		return -1;
	/* Refused (a kernel without F_SETPIPE_SZ): a bigger pipe still works. */
	(void)fcntl(p[1], F_SETPIPE_SZ, (int)PAGE);
	/* The reader's end blocks like the device unless it asked otherwise. */
	if (!nonblocking && fcntl(p[0], F_SETFL, 0) != 0)
		goto fail;
	struct feeder *f = calloc(1, sizeof *f);
	if (f == NULL)
		goto fail;
	f->E = E;
	f->fd = p[1];
	f->open = open;
	++*open;
	chacha_init_stream(&f->cc, E->key, domain, n);
	f->next = E->all;
	if (E->all != NULL)
		E->all->prev = f;
	E->all = f;
	f->ev = event_new(E->base, p[1], EV_WRITE | EV_PERSIST, on_writable, f);
	if (f->ev == NULL || event_add(f->ev, NULL) != 0 || !feed(f)) {
		int saved = f->ev == NULL ? ENOMEM : errno;
		feeder_free(f);
		close(p[0]);
		errno = saved;
		return -1;
	}
	return p[0];
fail:;
	int saved = errno;
	close(p[0]);
	close(p[1]);
	errno = saved;
	return -1;
}
