/* factory.c — see factory.h. diehard's end of a replica init's socket
 * channel: a pool of sockets per family, refilled a batch at a time.
 *
 * A refill is one request and one answer, synchronous: the init answers
 * in microseconds, and the proxy wants its socket now. The answer is
 * trusted no further than the protocol: one byte, no more descriptors
 * than were asked for (extra ones are closed), each a non-blocking socket
 * of the family and type asked (else EPROTO, and all of them closed). A
 * late answer (after a timeout) would be read as the next request's:
 * anything waiting on the channel is thrown away before a request. */
#include "factory.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "sandbox.h"

#define REPLY_MS 1000

struct pool {
	int fd[FACTORY_BATCH];
	unsigned n;
};

struct factory {
	int fd;          /* the channel; -1 once the init is gone */
	unsigned char tag; /* the last pid request's, echoed in its answer */
	struct pool pool[6]; /* AF_INET, AF_INET6, AF_UNIX; stream, then datagram */
};

/* The descriptors carried by msg's SCM_RIGHTS: the first max into fds
 * (their number returned), any beyond closed. */
static unsigned take_fds(struct msghdr *msg, int *fds, unsigned max)
{
	unsigned n = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c != NULL; c = CMSG_NXTHDR(msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len < CMSG_LEN(0))
			continue;
		size_t m = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < m; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
			if (n < max)
				fds[n++] = fd;
			else
				close(fd);
		}
	}
	return n;
}

static void close_all(int *fds, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		close(fds[i]);
}

/* Whether fd is what the init promised: a non-blocking socket of family
 * and type (TCP, or UDP). */
static bool is_socket(int fd, int family, int want)
{
	int domain = -1, type = -1, protocol = -1;
	socklen_t len = sizeof domain;
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0 || domain != family)
		return false;
	len = sizeof type;
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != want)
		return false;
	len = sizeof protocol;
	if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &protocol, &len) != 0 ||
	    protocol != (family == AF_UNIX ? 0 : want == SOCK_STREAM ? IPPROTO_TCP : IPPROTO_UDP))
		return false;
	int fl = fcntl(fd, F_GETFL);
	return fl >= 0 && (fl & O_NONBLOCK);
}

/* The init is gone: no more requests. */
static void channel_lost(struct factory *F)
{
	if (F->fd >= 0)
		close(F->fd);
	F->fd = -1;
}

/* Answers nobody waits for any more (a request that timed out) are
 * thrown away, their descriptors closed. */
static void drain(struct factory *F)
{
	for (int rounds = 0; rounds < 64; rounds++) {
		unsigned char byte;
		struct iovec iov = { &byte, 1 };
		union {
			struct cmsghdr h;
			char buf[CMSG_SPACE(FACTORY_BATCH * sizeof(int))];
		} ctl;
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
				      .msg_controllen = sizeof ctl.buf };
		ssize_t n = recvmsg(F->fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return; /* nothing waiting; the channel's end is found by the request */
		int fds[FACTORY_BATCH];
		close_all(fds, take_fds(&msg, fds, FACTORY_BATCH));
	}
}

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* Waits up to REPLY_MS for the channel to be readable. 0 (*hup: the
 * init closed its end, after what may still be read), or an errno
 * (ETIMEDOUT; EPIPE when it ended with nothing to read). */
static int wait_reply(int fd, bool *hup)
{
	double deadline = now_ms() + REPLY_MS;
	for (;;) {
		double left = deadline - now_ms();
		if (left <= 0)
			return ETIMEDOUT;
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int n = poll(&p, 1, (int)left + 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno;
		if (n == 0)
			continue; /* the deadline decides */
		*hup = (p.revents & POLLHUP) != 0;
		if (p.revents & POLLIN)
			return 0;
		return EPIPE; /* POLLHUP, POLLERR, POLLNVAL: nothing will come */
	}
}

/* A request (len bytes) sent, whatever waited before it thrown away: 0,
 * or an errno (EPIPE: the init is gone; ETIMEDOUT: its queue is full of
 * requests, it has not read for a while). */
static int send_request(struct factory *F, const unsigned char *req, size_t len)
{
	if (F->fd < 0)
		return EPIPE;
	drain(F);
	ssize_t sent;
	do
		sent = send(F->fd, req, len, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (sent < 0 && errno == EINTR);
	if (sent == (ssize_t)len)
		return 0;
	int err = sent < 0 ? errno : EPROTO;
	if (err == EPIPE || err == ECONNRESET || err == ENOTCONN) {
		channel_lost(F);
		return EPIPE;
	}
	return err == EAGAIN ? ETIMEDOUT : err;
}

/* One answer read, within REPLY_MS: its bytes into reply (*n; a longer one
 * is MSG_TRUNC in *flags), its descriptors into fds (*got, the first
 * FACTORY_BATCH; more are closed, MSG_CTRUNC). 0, or an errno (EPIPE: the
 * init closed its end with nothing more to read). */
static int read_answer(struct factory *F, unsigned char *reply, size_t size, ssize_t *n, int *fds, unsigned *got,
		       int *flags)
{
	bool hup = false;
	int err = wait_reply(F->fd, &hup);
	if (err == EPIPE)
		channel_lost(F);
	if (err != 0)
		return err;
	struct iovec iov = { reply, size };
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(FACTORY_BATCH * sizeof(int))];
	} ctl;
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
			      .msg_controllen = sizeof ctl.buf };
	do
		*n = recvmsg(F->fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	while (*n < 0 && errno == EINTR);
	if (*n < 0)
		return errno == EAGAIN ? ETIMEDOUT : errno;
	*got = take_fds(&msg, fds, FACTORY_BATCH);
	*flags = msg.msg_flags;
	if (*n == 0 && *got == 0 && hup) {
		/* End of file. */
		channel_lost(F);
		return EPIPE;
	}
	return 0;
}

/* One round trip: count sockets of family and type into P. 0, or an
 * errno. */
static int refill(struct factory *F, int family, int type, struct pool *P)
{
	unsigned char req[2] = {
		(unsigned char)((family == AF_INET ? 4 : family == AF_INET6 ? 6 : 1) | (type == SOCK_DGRAM ? FACTORY_UDP : 0)),
		FACTORY_BATCH
	};
	int err = send_request(F, req, sizeof req);
	if (err != 0)
		return err;
	/* Room for one byte more than the answer's, and for the batch's
	 * descriptors exactly: a longer message is MSG_TRUNC, more
	 * descriptors MSG_CTRUNC. */
	unsigned char reply[2];
	int fds[FACTORY_BATCH], flags;
	unsigned got;
	ssize_t n;
	if ((err = read_answer(F, reply, sizeof reply, &n, fds, &got, &flags)) != 0)
		return err;
	if (n != 1 || (flags & (MSG_TRUNC | MSG_CTRUNC))) {
		close_all(fds, got);
		return EPROTO;
	}
	if (reply[0] != 0) {
		close_all(fds, got);
		return reply[0];
	}
	bool ok = got == FACTORY_BATCH;
	for (unsigned i = 0; ok && i < got; i++)
		ok = is_socket(fds[i], family, type);
	if (!ok) {
		close_all(fds, got);
		return EPROTO;
	}
	memcpy(P->fd, fds, got * sizeof(int));
	P->n = got;
	return 0;
}

struct factory *factory_new(int fd)
{
	struct factory *F = calloc(1, sizeof *F);
	if (F == NULL) {
		/* Taken over all the same: the caller forgets it. */
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	F->fd = fd;
	return F;
}

void factory_free(struct factory *F)
{
	if (F == NULL)
		return;
	channel_lost(F);
	for (int p = 0; p < 6; p++)
		close_all(F->pool[p].fd, F->pool[p].n);
	free(F);
}

int factory_last_pid(struct factory *F, long set, pid_t *value)
{
	if (set > INT32_MAX)
		return EINVAL;
	uint32_t v = set < 0 ? 0 : (uint32_t)set;
	unsigned char tag = ++F->tag;
	unsigned char req[7] = { SANDBOX_LAST_PID, set < 0 ? 0 : 1, tag, (unsigned char)v, (unsigned char)(v >> 8),
				 (unsigned char)(v >> 16), (unsigned char)(v >> 24) };
	int err = send_request(F, req, set < 0 ? 3 : 7);
	if (err != 0)
		return err;
	/* The answer with our tag: an older one (its request timed out) is
	 * read and thrown away, descriptors and all. */
	for (int rounds = 0; rounds < 16; rounds++) {
		unsigned char reply[8];
		int fds[FACTORY_BATCH], flags;
		unsigned nfds;
		ssize_t n;
		if ((err = read_answer(F, reply, sizeof reply, &n, fds, &nfds, &flags)) != 0)
			return err;
		close_all(fds, nfds);
		if (n != 6 || reply[1] != tag)
			continue; /* someone else's late answer */
		if (reply[0] != 0)
			return reply[0];
		uint32_t got = (uint32_t)reply[2] | (uint32_t)reply[3] << 8 | (uint32_t)reply[4] << 16 |
			       (uint32_t)reply[5] << 24;
		if (got > INT32_MAX)
			return EPROTO;
		*value = (pid_t)got;
		return 0;
	}
	return EPROTO;
}

int factory_take(struct factory *F, int family)
{
	return factory_take_type(F, family, SOCK_STREAM);
}

int factory_take_type(struct factory *F, int family, int type)
{
	if (family != AF_INET && family != AF_INET6 && family != AF_UNIX) {
		errno = EAFNOSUPPORT;
		return -1;
	}
	if (type != SOCK_STREAM && type != SOCK_DGRAM) {
		errno = EPROTOTYPE;
		return -1;
	}
	struct pool *P = &F->pool[(family == AF_INET ? 0 : family == AF_INET6 ? 1 : 2) + (type == SOCK_DGRAM ? 3 : 0)];
	if (P->n == 0) {
		int err = refill(F, family, type, P);
		if (err != 0) {
			errno = err;
			return -1;
		}
	}
	return P->fd[--P->n];
}
