/* proxy_floor.c — the least a voting TCP proxy can cost on this machine.
 *
 *   proxy_floor PORT QUORUM BACKEND_PORT...
 *
 * Listens on 127.0.0.1:PORT. For each client it connects to every backend
 * (127.0.0.1:BACKEND_PORT, one plain server each), writes the client's bytes
 * to all of them, and writes to the client each reply prefix as soon as
 * QUORUM backends sent the same bytes; a backend behind is compared when its
 * bytes come. Nothing else: no clocks, no logs, no replacement, no sandbox,
 * one epoll loop, a read and a write per chunk and side. A backend whose
 * bytes differ from the committed ones stays in step by their length (three
 * plain web servers differ in a Date header at a second's turn; diehard's
 * replicas share one clock and do not), the first differences said on
 * stderr. When QUORUM backends ended their side with nothing uncommitted (a
 * server that closes after its reply: HTTP without keep-alive), so does the
 * client's side; the connection ends when every backend ended (a backend
 * behind does all the work the others did), when every backend has bytes at
 * the committed offset and no QUORUM of them share the first, or when the
 * client is gone. The client's end of its side is passed on to every backend
 * as a half-close; a backend gone takes no more bytes. A floor, not a
 * product.
 *
 * What it is for (bench/floor, bench/servers, docs/PERFORMANCE.md): diehard's
 * proxy puts two more hops on a request's path (client → diehard →
 * replicas → diehard → client) and a few more system calls. With one
 * backend and quorum 1 this program is a bare proxy; with three plain
 * servers and quorum 2 it is the fan-out and the vote without anything
 * diehard adds. Their cost against the plain server is what no proxy of
 * this shape can go below here, whatever diehard does. It is lower than
 * diehard's rules allow: a reply goes out at a quorum, not once every
 * replica sent it, so the slowest backend is not paced by the client; it
 * falls behind and reads the requests waiting for it several at a time
 * (nginx behind it: one read for 50 keep-alive requests), cheaper than a
 * replica that takes them one by one.
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
#include <signal.h>
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
	bool eof;       /* the backend ended its side */
};

struct conn {
	int cfd;
	unsigned n;
	struct side s[MAXB];
	struct buf hist; /* committed bytes [hbase, committed) */
	size_t hbase, committed;
	bool client_ended; /* QUORUM backends ended: so did the client's side */
	bool client_gone;  /* a write to the client failed */
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

/* False when the peer is gone. */
static bool write_all(int fd, const unsigned char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EPIPE || errno == ECONNRESET))
			return false;
		if (w <= 0)
			die("write");
		p += w;
		n -= (size_t)w;
	}
	return true;
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

/* Compares backend s's bytes behind the committed offset with the committed
 * ones and consumes them. Bytes that differ are counted and consumed all
 * the same: the backend stays in step by length (three plain web servers
 * differ in a Date header at a second's turn, in as many bytes; diehard's
 * replicas read one clock and do not). */
static unsigned long differed;

static void check_behind(struct conn *c, struct side *s)
{
	if (s->checked >= c->committed)
		return;
	size_t n = c->committed - s->checked;
	if (n > s->b.len)
		n = s->b.len;
	if (memcmp(s->b.p, c->hist.p + (s->checked - c->hbase), n) != 0 && differed++ < 10)
		fprintf(stderr, "proxy_floor: a backend's reply differs from the committed one%s\n",
			differed == 10 ? " (more not shown)" : "");
	buf_drop(&s->b, n);
	s->checked += n;
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

static size_t common(const struct side *a, const struct side *b)
{
	size_t n = a->b.len < b->b.len ? a->b.len : b->b.len, i = 0;
	while (i < n && a->b.p[i] == b->b.p[i])
		i++;
	return i;
}

/* Commits the longest prefix that QUORUM of the backends at the committed
 * offset sent alike and returns its length (*voters: how many were there);
 * the others are compared with it as they come (check_behind). For voter
 * i, the longest prefix of its bytes that QUORUM voters share is the
 * (QUORUM - 1)-th longest of its common prefixes with the others. */
static size_t vote(struct conn *c, unsigned *voters)
{
	struct side *v[MAXB] = { 0 };
	unsigned nv = 0;
	for (unsigned j = 0; j < c->n; j++)
		if (c->s[j].checked == c->committed && c->s[j].b.len > 0)
			v[nv++] = &c->s[j];
	*voters = nv;
	if (nv < quorum)
		return 0;
	size_t best = 0;
	struct side *from = NULL;
	for (unsigned i = 0; i < nv; i++) {
		size_t l[MAXB];
		unsigned nl = 0;
		for (unsigned j = 0; j < nv; j++)
			if (j != i)
				l[nl++] = common(v[i], v[j]);
		for (unsigned a = 1; a < nl; a++) /* descending */
			for (unsigned b = a; b > 0 && l[b] > l[b - 1]; b--) {
				size_t t = l[b];
				l[b] = l[b - 1];
				l[b - 1] = t;
			}
		size_t n = quorum == 1 ? v[i]->b.len : l[quorum - 2];
		if (n > best) {
			best = n;
			from = v[i];
		}
	}
	if (best == 0)
		return 0;
	if (!write_all(c->cfd, from->b.p, best))
		c->client_gone = true;
	buf_add(&c->hist, from->b.p, best);
	c->committed += best;
	return best;
}

/* After a read: every backend brought up to the committed offset (it votes
 * there with the others), the vote, the rest compared with what it
 * committed, the history trimmed; the connection ended when it can go no
 * further. */
static void settle(struct conn *c)
{
	for (unsigned j = 0; j < c->n; j++)
		check_behind(c, &c->s[j]);
	unsigned voters, done = 0, ended = 0;
	size_t voted = vote(c, &voters);
	for (unsigned j = 0; j < c->n; j++) {
		struct side *s = &c->s[j];
		check_behind(c, s);
		ended += s->eof;
		if (s->eof && s->b.len == 0 && s->checked == c->committed)
			done++;
	}
	/* Every backend has bytes there and no QUORUM of them share the
	 * first: none can come (exact for QUORUM 2, all the benches use). */
	if (ended == c->n || c->client_gone || (voted == 0 && voters == c->n && c->n > 1)) {
		conn_close(c);
		return;
	}
	if (done >= quorum && !c->client_ended) {
		if (shutdown(c->cfd, SHUT_WR) != 0 && errno != ENOTCONN)
			die("shutdown");
		c->client_ended = true;
	}
	trim_hist(c);
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
	if (which == 0) {
		if (r <= 0) { /* the client's end: a half-close to every backend */
			if (epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL) != 0)
				die("epoll_ctl");
			for (unsigned j = 0; j < c->n; j++)
				if (shutdown(c->s[j].fd, SHUT_WR) != 0 && errno != ENOTCONN)
					die("shutdown");
			return;
		}
		for (unsigned j = 0; j < c->n; j++)
			(void)write_all(c->s[j].fd, tmp, (size_t)r); /* one gone: its end comes */
		return;
	}
	struct side *s = &c->s[which - 1];
	if (r <= 0) {
		s->eof = true;
		if (epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL) != 0)
			die("epoll_ctl");
	} else {
		buf_add(&s->b, tmp, (size_t)r);
	}
	settle(c);
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
	if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
		die("signal");
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
