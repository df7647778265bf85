/* proxy_floor.c — the least a voting TCP proxy can cost on this machine.
 *
 *   proxy_floor PORT QUORUM BACKEND_PORT...
 *
 * Listens on 127.0.0.1:PORT. For each client it connects to every backend
 * (127.0.0.1:BACKEND_PORT, one plain server each), writes the client's bytes
 * to all of them, and writes to the client each reply prefix as soon as
 * QUORUM backends sent the same bytes; a backend behind is compared when its
 * bytes come. Nothing else: no clocks, no logs, no replacement, no sandbox,
 * one epoll loop, a read and a write per chunk and side. Any backend that
 * differs, or closes, ends the connection (a floor, not a product).
 *
 * What it is for (bench/servers_floor, docs/PERFORMANCE.md): diehard's
 * proxy puts two more hops on a request's path (client → diehard →
 * replicas → diehard → client) and a few more system calls. With one
 * backend and quorum 1 this program is a bare proxy; with three plain
 * servers and quorum 2 it is the fan-out and the vote without anything
 * diehard adds. Their cost against the plain server is what no proxy of
 * this shape can go below here, whatever diehard does.
 *
 * Invariants per connection: backend j has checked the stream up to
 * b[j].checked (its bytes before it agreed with the committed ones) and
 * holds [checked, end) in its buffer; hist holds the committed bytes
 * [hbase, committed), hbase = min over backends of checked, so a backend
 * behind is compared against them. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAXB 8
#define CHUNK 65536

struct buf {
	unsigned char *p;
	size_t len, cap;
};

struct side {
	int fd;
	struct buf b;   /* bytes [checked, end) */
	size_t checked; /* stream offset of b.p[0] */
};

struct conn {
	int cfd;
	unsigned n;
	struct side s[MAXB];
	struct buf hist; /* committed bytes [hbase, committed) */
	size_t hbase, committed;
	bool dead;         /* closed in this batch of events: freed after it */
	struct conn *next; /* in the batch's list of the dead */
};

static unsigned nback, quorum;
static int ports[MAXB];
static int ep;
static struct conn *dead_list;

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static void buf_add(struct buf *b, const unsigned char *p, size_t n)
{
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->len + n)
			cap *= 2;
		if ((b->p = realloc(b->p, cap)) == NULL)
			die("realloc");
		b->cap = cap;
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
}

static void buf_drop(struct buf *b, size_t n)
{
	memmove(b->p, b->p + n, b->len - n);
	b->len -= n;
}

static void write_all(int fd, const unsigned char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			die("write");
		p += w;
		n -= (size_t)w;
	}
}

/* Epoll's data: the connection and which side (0 the client, j + 1 backend j). */
static void watch(int fd, struct conn *c, unsigned which)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = (uint64_t)(uintptr_t)c << 4 | which };
	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0)
		die("epoll_ctl");
}

static int tcp_connect(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int one = 1;
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
	    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
		die("connect");
	return fd;
}

/* Closes c's sockets (epoll forgets them); c itself is freed after the
 * batch of events, which may still name it. */
static void conn_close(struct conn *c)
{
	close(c->cfd);
	for (unsigned j = 0; j < c->n; j++)
		close(c->s[j].fd);
	c->dead = true;
	c->next = dead_list;
	dead_list = c;
}

static void free_dead(void)
{
	while (dead_list != NULL) {
		struct conn *c = dead_list;
		dead_list = c->next;
		for (unsigned j = 0; j < c->n; j++)
			free(c->s[j].b.p);
		free(c->hist.p);
		free(c);
	}
}

/* Compares backend j's bytes behind the committed offset with the committed
 * ones and consumes them; false when they differ. */
static bool check_behind(struct conn *c, struct side *s)
{
	if (s->checked >= c->committed)
		return true;
	size_t n = c->committed - s->checked;
	if (n > s->b.len)
		n = s->b.len;
	if (memcmp(s->b.p, c->hist.p + (s->checked - c->hbase), n) != 0)
		return false;
	buf_drop(&s->b, n);
	s->checked += n;
	return true;
}

/* Commits the longest prefix QUORUM backends at the committed offset share. */
static bool vote(struct conn *c)
{
	struct side *v[MAXB] = { 0 };
	unsigned nv = 0;
	for (unsigned j = 0; j < c->n; j++)
		if (c->s[j].checked == c->committed && c->s[j].b.len > 0)
			v[nv++] = &c->s[j];
	if (nv < quorum)
		return true;
	/* The quorum-th longest of the voters' pending bytes. */
	for (unsigned i = 1; i < nv; i++)
		for (unsigned j = i; j > 0 && v[j]->b.len > v[j - 1]->b.len; j--) {
			struct side *t = v[j];
			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	size_t n = v[quorum - 1]->b.len;
	for (unsigned i = 1; i < quorum; i++)
		if (memcmp(v[i]->b.p, v[0]->b.p, n) != 0)
			return false;
	write_all(c->cfd, v[0]->b.p, n);
	buf_add(&c->hist, v[0]->b.p, n);
	c->committed += n;
	for (unsigned i = 0; i < quorum; i++) {
		buf_drop(&v[i]->b, n);
		v[i]->checked += n;
	}
	for (unsigned i = quorum; i < nv; i++)
		if (!check_behind(c, v[i]))
			return false;
	return true;
}

static void trim_hist(struct conn *c)
{
	size_t low = c->committed;
	for (unsigned j = 0; j < c->n; j++)
		if (c->s[j].checked < low)
			low = c->s[j].checked;
	if (low > c->hbase) {
		buf_drop(&c->hist, low - c->hbase);
		c->hbase = low;
	}
}

static void on_event(struct conn *c, unsigned which)
{
	unsigned char tmp[CHUNK];
	if (c->dead)
		return;
	int fd = which == 0 ? c->cfd : c->s[which - 1].fd;
	ssize_t r = read(fd, tmp, sizeof tmp);
	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (r <= 0) {
		conn_close(c); /* either side's end ends it: a floor */
		return;
	}
	if (which == 0) {
		for (unsigned j = 0; j < c->n; j++)
			write_all(c->s[j].fd, tmp, (size_t)r);
		return;
	}
	struct side *s = &c->s[which - 1];
	buf_add(&s->b, tmp, (size_t)r);
	if (!check_behind(c, s) || !vote(c)) {
		fprintf(stderr, "proxy_floor: the backends' replies differ\n");
		conn_close(c);
		return;
	}
	trim_hist(c);
}

int main(int argc, char **argv)
{
	if (argc < 4 || argc - 3 > MAXB) {
		fprintf(stderr, "usage: proxy_floor PORT QUORUM BACKEND_PORT... (at most %d)\n", MAXB);
		return 2;
	}
	int port = atoi(argv[1]);
	quorum = (unsigned)atoi(argv[2]);
	nback = (unsigned)(argc - 3);
	for (unsigned j = 0; j < nback; j++)
		ports[j] = atoi(argv[3 + j]);
	if (port <= 0 || quorum < 1 || quorum > nback) {
		fprintf(stderr, "proxy_floor: bad port or quorum\n");
		return 2;
	}
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
	    bind(lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(lfd, 1024) != 0)
		die("listen");
	if ((ep = epoll_create1(EPOLL_CLOEXEC)) < 0)
		die("epoll_create1");
	struct epoll_event lev = { .events = EPOLLIN, .data.u64 = 0 };
	if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &lev) != 0)
		die("epoll_ctl");
	for (;;) {
		struct epoll_event evs[64];
		int n = epoll_wait(ep, evs, 64, -1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die("epoll_wait");
		for (int i = 0; i < n; i++) {
			if (evs[i].data.u64 == 0) {
				int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
				if (cfd < 0)
					continue;
				struct conn *c = calloc(1, sizeof *c);
				if (c == NULL || setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
					die("accept");
				c->cfd = cfd;
				c->n = nback;
				for (unsigned j = 0; j < nback; j++) {
					c->s[j].fd = tcp_connect(ports[j]);
					watch(c->s[j].fd, c, j + 1);
				}
				watch(cfd, c, 0);
				continue;
			}
			on_event((struct conn *)(uintptr_t)(evs[i].data.u64 >> 4), (unsigned)(evs[i].data.u64 & 15));
		}
		free_dead();
	}
}
