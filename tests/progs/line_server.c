/*
 * line_server: a small line-protocol TCP server of our own, for the tests of
 * diehard's TCP proxy (tests/tcp.bats); tests/progs/buggy_server.c is the
 * same server with a planted heap bug.
 *
 *   line_server [--addr ADDR] [--odd DIR] [--clock N] [--log FILE] [--loop-clock MS] PORT
 *
 * One process, one thread, epoll and non-blocking sockets: hundreds of
 * clients at once. It listens on ADDR:PORT (ADDR 127.0.0.1 by default; one
 * with a colon is IPv6, e.g. --addr ::) and says so once on stderr. One
 * command a line (a \r before the \n is dropped), one reply a command, each
 * ending in \n:
 *
 *   SET key value   OK            (the table is global: every connection sees it)
 *   GET key         the value, or NIL
 *   INCR key        the new value (a missing key counts as 0), or ERR not an integer
 *   ECHO text       text
 *   LOG text        OK; and two lines on stdout (with --log, appended to FILE,
 *                   opened with O_APPEND at the start), "text 1" and "text 2",
 *                   in an order the heap picks: as threads serving two
 *                   requests at once write one log, each replica in an order
 *                   of its own (tests/daemons.bats)
 *   STAMP text      OK; and a line "SECONDS text" on stdout (with --log, FILE),
 *                   SECONDS the wall clock's second as the event loop last
 *                   read it (with --loop-clock: at its last wake-up, as
 *                   nginx stamps its access log; else read for the command)
 *   BIG n           n bytes (1 <= n <= 2^31): 64-byte lines, byte i of line j
 *                   'a' + (i + j) % 26, byte 63 a \n, and the last byte a \n
 *                   (tests/tools/lineclient.py pattern N prints the same)
 *   STALL           OK; but with --odd DIR, the one process that created DIR
 *                   at its start (a race between replicas: mkdir is atomic)
 *                   never answers and never reads that connection again
 *   CONNECT [addr] port
 *                   an outbound connection to addr (127.0.0.1 by default;
 *                   IPv4 or IPv6), 1 s at most: CONNECTED, or
 *                   CONNECT FAILED: <strerror>
 *   QUIT            BYE, then the server closes the connection
 *   anything else   ERR unknown command (ERR empty line); a line longer than
 *                   1 MiB: ERR line too long, then the connection is closed
 *
 * With --clock N every command reads the wall clock N times first (a server
 * that stamps its requests: bench/replace_server's history fills the call
 * log); replies are the same. With --loop-clock MS the loop wakes at least
 * every MS milliseconds (1 to 10000) and reads the wall clock at every
 * wake-up: how many reads a request comes after depends on how long the
 * server waited before it, in each replica and in a replay of the run
 * another count (tests/daemons.bats).
 *
 * Closing after QUIT or a line too long, the server shuts its write side and
 * reads and drops what the client still sends until the client's EOF, so
 * that the last reply is not lost to a reset.
 *
 * Commands are answered in order; a client may send many at once. At the end
 * of a client's input (EOF or a half-close) the commands received are
 * answered (a last line without \n too), then the connection is closed.
 * Replies larger than the socket buffer are written as the client reads
 * them: BIG makes its bytes 64 KiB at a time, and no further command is run
 * while 256 KiB of replies wait.
 *
 * Every connection's state and buffers, and every key and value, are on the
 * heap, so that a randomized allocator decides where they all are.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#ifndef SERVER_NAME
#define SERVER_NAME "line_server"
#endif

#define MAX_LINE ((size_t)1 << 20)     /* longest command line */
#define IN_LIMIT (MAX_LINE + 4096)     /* input held per connection */
#define OUT_HIGH ((size_t)256 << 10)   /* replies waiting: run no more commands */
#define BIG_STEP ((size_t)64 << 10)    /* BIG's bytes made at a time */
#define NBUCKETS 4096

struct buf {
	char *p;
	size_t off, len, cap; /* bytes [off, len) are pending */
};

struct conn {
	int fd;
	bool eof;      /* the client sent its last byte */
	bool closing;  /* close once the replies are written */
	bool stalled;  /* STALL in the odd process: this connection is dead to us */
	bool shut;     /* our write side is shut: reading to the client's EOF */
	unsigned events;
	unsigned long long big_i, big_n; /* BIG: bytes [big_i, big_n) still to make */
	struct buf in, out;
	char name[96]; /* keeps struct conn out of the small size classes */
};

struct entry {
	struct entry *next;
	char *key;
	char *val;
	size_t hash;
};

static struct entry **table;
static int epfd = -1;
static int reserve_fd = -1; /* closed to accept and drop a client when out of fds */
static bool odd;            /* --odd DIR: we created DIR */
static char *prog = SERVER_NAME;

static void die(const char *what)
{
	fprintf(stderr, "%s: %s: %s\n", prog, what, strerror(errno));
	exit(1);
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n);
	if (p == NULL)
		die("malloc");
	return p;
}

static char *xstrndup(const char *s, size_t n)
{
	char *d = xmalloc(n + 1);
	memcpy(d, s, n);
	d[n] = '\0';
	return d;
}

/* ---- buffers ---- */

static void buf_reserve(struct buf *b, size_t more)
{
	if (b->off > 0 && (b->off == b->len || b->len + more > b->cap)) {
		memmove(b->p, b->p + b->off, b->len - b->off);
		b->len -= b->off;
		b->off = 0;
	}
	if (b->len + more <= b->cap)
		return;
	size_t cap = b->cap ? b->cap : 4096;
	while (cap < b->len + more)
		cap *= 2;
	char *p = realloc(b->p, cap);
	if (p == NULL)
		die("realloc");
	b->p = p;
	b->cap = cap;
}

static void buf_add(struct buf *b, const void *data, size_t n)
{
	buf_reserve(b, n);
	memcpy(b->p + b->len, data, n);
	b->len += n;
}

static void buf_str(struct buf *b, const char *s)
{
	buf_add(b, s, strlen(s));
}

static size_t pending(const struct buf *b)
{
	return b->len - b->off;
}

/* ---- the table ---- */

static size_t hash_of(const char *s)
{
	size_t h = 1469598103934665603u;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211u;
	return h;
}

static struct entry *lookup(const char *key, size_t h)
{
	for (struct entry *e = table[h % NBUCKETS]; e != NULL; e = e->next)
		if (e->hash == h && strcmp(e->key, key) == 0)
			return e;
	return NULL;
}

/* Stores val (taken over) under key. */
static void store(const char *key, char *val)
{
	size_t h = hash_of(key);
	struct entry *e = lookup(key, h);
	if (e != NULL) {
		free(e->val);
		e->val = val;
		return;
	}
	e = xmalloc(sizeof *e);
	e->key = xstrndup(key, strlen(key));
	e->val = val;
	e->hash = h;
	e->next = table[h % NBUCKETS];
	table[h % NBUCKETS] = e;
}

/* A number as a new string on the heap. */
static char *format_int(long long v)
{
	int n = snprintf(NULL, 0, "%lld", v);
	if (n < 0)
		die("snprintf");
#ifdef PLANTED_BUG
	/* THE PLANTED BUG: no room for the terminating NUL. When the number's
	 * length is a size class (16 digits), the NUL lands in the first byte
	 * of the heap slot after it (buggy_server.c says what that does). */
	char *s = xmalloc((size_t)n);
#else
	char *s = xmalloc((size_t)n + 1);
#endif
	size_t size = (size_t)n + 1;
	/* Through a volatile, so that the compiler does not see the bug. */
	volatile size_t vsize = size;
	snprintf(s, vsize, "%lld", v);
	return s;
}

/* ---- commands ---- */

/* CONNECT [addr] port: an outbound connection attempt, 1 s at most. */
static void cmd_connect(struct conn *c, char *arg)
{
	const char *host = "127.0.0.1", *portstr = arg;
	char *sp = strchr(arg, ' ');
	if (sp != NULL) {
		*sp = '\0';
		host = arg;
		portstr = sp + 1;
	}
	char *end;
	errno = 0;
	long port = strtol(portstr, &end, 10);
	union {
		struct sockaddr sa;
		struct sockaddr_in sin;
		struct sockaddr_in6 sin6;
	} u;
	memset(&u, 0, sizeof u);
	socklen_t len;
	bool v6 = strchr(host, ':') != NULL;
	if (*portstr == '\0' || *end != '\0' || errno != 0 || port < 1 || port > 65535 ||
	    inet_pton(v6 ? AF_INET6 : AF_INET, host, v6 ? (void *)&u.sin6.sin6_addr : (void *)&u.sin.sin_addr) != 1) {
		buf_str(&c->out, "ERR usage: CONNECT [addr] port\n");
		return;
	}
	if (v6) {
		u.sin6.sin6_family = AF_INET6;
		u.sin6.sin6_port = htons((uint16_t)port);
		len = sizeof u.sin6;
	} else {
		u.sin.sin_family = AF_INET;
		u.sin.sin_port = htons((uint16_t)port);
		len = sizeof u.sin;
	}
	int fd = socket(u.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int err = 0;
	if (fd < 0) {
		err = errno;
	} else {
		if (connect(fd, &u.sa, len) != 0) {
			err = errno;
			if (err == EINPROGRESS) {
				struct pollfd p = {.fd = fd, .events = POLLOUT};
				int r = poll(&p, 1, 1000);
				socklen_t elen = sizeof err;
				if (r < 0)
					err = errno;
				else if (r == 0)
					err = ETIMEDOUT;
				else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0)
					err = errno;
			}
		}
		if (close(fd) != 0)
			die("close");
	}
	if (err == 0) {
		buf_str(&c->out, "CONNECTED\n");
	} else {
		buf_str(&c->out, "CONNECT FAILED: ");
		buf_str(&c->out, strerror(err));
		buf_str(&c->out, "\n");
	}
}

static long clock_reads; /* --clock */
static int log_fd = STDOUT_FILENO; /* --log */
static int loop_ms = -1; /* --loop-clock: epoll_wait's timeout (-1: none) */
static time_t loop_now;  /* the wall clock's second at the loop's last wake-up */

static time_t wall_second(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
		die("clock_gettime");
	return ts.tv_sec;
}

/* Runs one command line (no \n; may hold any bytes). */
static void execute(struct conn *c, char *line, size_t n)
{
	for (long j = 0; j < clock_reads; j++) {
		struct timespec ts;
		if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
			die("clock_gettime");
	}
	if (n > 0 && line[n - 1] == '\r')
		n--;
	line[n] = '\0'; /* the byte after the line is its \n, or spare room */
	if (n == 0) {
		buf_str(&c->out, "ERR empty line\n");
		return;
	}
	char *sp = memchr(line, ' ', n);
	size_t cl = sp ? (size_t)(sp - line) : n;
	char *arg = sp ? sp + 1 : line + n; /* NUL-terminated: a NUL inside cuts it */
#define IS(name) (cl == sizeof name - 1 && memcmp(line, name, cl) == 0)
	if (IS("ECHO")) {
		buf_add(&c->out, arg, (size_t)(line + n - arg));
		buf_str(&c->out, "\n");
	} else if (IS("STAMP")) {
		time_t t = loop_ms >= 0 ? loop_now : wall_second();
		if (dprintf(log_fd, "%lld %s\n", (long long)t, arg) < 0)
			die("write stdout");
		buf_str(&c->out, "OK\n");
	} else if (IS("LOG")) {
		void *mark = xmalloc(48);
		unsigned first = (unsigned)(((uint64_t)(uintptr_t)mark * 0x9e3779b97f4a7c15ull) >> 63);
		free(mark);
		for (unsigned k = 0; k < 2; k++)
			if (dprintf(log_fd, "%s %u\n", arg, (k ^ first) + 1) < 0)
				die("write stdout");
		buf_str(&c->out, "OK\n");
	} else if (IS("SET")) {
		char *vs = strchr(arg, ' ');
		if (vs == NULL || vs == arg) {
			buf_str(&c->out, "ERR usage: SET key value\n");
			return;
		}
		*vs = '\0';
		store(arg, xstrndup(vs + 1, strlen(vs + 1)));
		buf_str(&c->out, "OK\n");
	} else if (IS("GET")) {
		struct entry *e = lookup(arg, hash_of(arg));
		buf_str(&c->out, e ? e->val : "NIL");
		buf_str(&c->out, "\n");
	} else if (IS("INCR")) {
		struct entry *e = lookup(arg, hash_of(arg));
		long long v = 0;
		if (e != NULL) {
			char *end;
			errno = 0;
			v = strtoll(e->val, &end, 10);
			if (*e->val == '\0' || *end != '\0' || errno != 0 || v == LLONG_MAX) {
				buf_str(&c->out, "ERR not an integer\n");
				return;
			}
		}
		char *s = format_int(v + 1);
		buf_str(&c->out, s);
		buf_str(&c->out, "\n");
		store(arg, s);
	} else if (IS("BIG")) {
		char *end;
		errno = 0;
		unsigned long long big = strtoull(arg, &end, 10);
		if (*arg < '0' || *arg > '9' || *end != '\0' || errno != 0 || big < 1 || big > (1ull << 31)) {
			buf_str(&c->out, "ERR usage: BIG n (1 to 2^31)\n");
			return;
		}
		c->big_i = 0;
		c->big_n = big;
	} else if (IS("STALL")) {
		if (odd)
			c->stalled = true;
		else
			buf_str(&c->out, "OK\n");
	} else if (IS("CONNECT")) {
		cmd_connect(c, arg);
	} else if (IS("QUIT")) {
		buf_str(&c->out, "BYE\n");
		c->closing = true;
	} else {
		buf_str(&c->out, "ERR unknown command\n");
	}
#undef IS
}

/* BIG's next bytes, while few replies wait. */
static void make_big(struct conn *c)
{
	while (c->big_i < c->big_n && pending(&c->out) < OUT_HIGH) {
		size_t n = c->big_n - c->big_i < BIG_STEP ? (size_t)(c->big_n - c->big_i) : BIG_STEP;
		buf_reserve(&c->out, n);
		char *p = c->out.p + c->out.len;
		for (size_t k = 0; k < n; k++) {
			unsigned long long i = c->big_i + k;
			unsigned col = (unsigned)(i % 64);
			if (i == c->big_n - 1 || col == 63)
				p[k] = '\n';
			else
				p[k] = (char)('a' + (col + i / 64) % 26);
		}
		c->out.len += n;
		c->big_i += n;
	}
}

/* Runs the complete commands received, in order, while few replies wait.
 * Returns how many it ran. */
static unsigned run_commands(struct conn *c)
{
	unsigned ran = 0;
	while (!c->closing && !c->stalled && c->big_i >= c->big_n && pending(&c->out) < OUT_HIGH) {
		char *start = c->in.p + c->in.off;
		size_t avail = pending(&c->in);
		char *nl = avail ? memchr(start, '\n', avail) : NULL;
		size_t n;
		if (nl != NULL) {
			n = (size_t)(nl - start);
		} else if (avail > MAX_LINE) {
			buf_str(&c->out, "ERR line too long\n");
			c->closing = true;
			break;
		} else if (c->eof && avail > 0) {
			buf_reserve(&c->in, 1); /* room for the NUL execute writes */
			start = c->in.p + c->in.off;
			n = avail;
		} else {
			break;
		}
		if (n > MAX_LINE) {
			buf_str(&c->out, "ERR line too long\n");
			c->closing = true;
			break;
		}
		execute(c, start, n);
		c->in.off += nl ? n + 1 : n;
		ran++;
	}
	if (c->eof && pending(&c->in) == 0 && !c->stalled)
		c->closing = true;
	return ran;
}

/* ---- connections ---- */

static void conn_close(struct conn *c)
{
	if (close(c->fd) != 0)
		die("close");
	free(c->in.p);
	free(c->out.p);
	free(c);
}

static void set_events(struct conn *c, unsigned events)
{
	if (events == c->events)
		return;
	struct epoll_event ev = {.events = events, .data.ptr = c};
	if (epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev) != 0)
		die("epoll_ctl");
	c->events = events;
}

/* Reads what the client sent, up to IN_LIMIT held. -1: the connection failed. */
static int conn_read(struct conn *c)
{
	while (!c->eof && pending(&c->in) < IN_LIMIT) {
		buf_reserve(&c->in, 16384);
		ssize_t n = recv(c->fd, c->in.p + c->in.len, c->in.cap - c->in.len - 1, 0);
		if (n > 0) {
			c->in.len += (size_t)n;
		} else if (n == 0) {
			c->eof = true;
		} else if (errno == EAGAIN || errno == EWOULDBLOCK) {
			return 0;
		} else if (errno == EINTR) {
			continue;
		} else {
			return -1;
		}
	}
	return 0;
}

/* A lingering close, once the last reply is written: our write side shut,
 * then the client's unread bytes read and dropped until its EOF, so that
 * closing with them unread does not reset the connection (which can lose the
 * last reply on the way). 0: wait for more; otherwise close now. */
static int conn_drain(struct conn *c)
{
	if (!c->shut) {
		if (shutdown(c->fd, SHUT_WR) != 0)
			return -1;
		c->shut = true;
	}
	char scratch[16384];
	for (;;) {
		ssize_t n = recv(c->fd, scratch, sizeof scratch, 0);
		if (n > 0)
			continue;
		if (n == 0)
			return 1;
		if (errno == EINTR)
			continue;
		return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
	}
}

/* Writes pending replies: 1 all written, 0 the socket is full, -1 failed. */
static int conn_write(struct conn *c)
{
	while (pending(&c->out) > 0) {
		ssize_t n = send(c->fd, c->out.p + c->out.off, pending(&c->out), MSG_NOSIGNAL);
		if (n >= 0) {
			c->out.off += (size_t)n;
		} else if (errno == EAGAIN || errno == EWOULDBLOCK) {
			return 0;
		} else if (errno == EINTR) {
			continue;
		} else {
			return -1;
		}
	}
	c->out.off = c->out.len = 0;
	return 1;
}

static void conn_event(struct conn *c, unsigned events)
{
	if (c->stalled) {
		/* The odd process's stalled connection: never read again. Out of
		 * the epoll set, so that its hang-up does not wake us forever. */
		if (epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd, NULL) != 0)
			die("epoll_ctl");
		return;
	}
	if (!c->closing && (events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP)) && conn_read(c) != 0) {
		conn_close(c);
		return;
	}
	for (;;) {
		make_big(c);
		unsigned ran = run_commands(c);
		make_big(c);
		int w = conn_write(c);
		if (w < 0) {
			conn_close(c);
			return;
		}
		if (w == 0 || c->stalled || c->closing)
			break;
		if (ran == 0 && c->big_i >= c->big_n)
			break;
	}
	if (c->closing && pending(&c->out) == 0 && c->big_i >= c->big_n) {
		if (c->eof || conn_drain(c) != 0)
			conn_close(c);
		else
			set_events(c, EPOLLIN | EPOLLRDHUP);
		return;
	}
	if (c->stalled) {
		if (epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd, NULL) != 0)
			die("epoll_ctl");
		return;
	}
	unsigned want = 0;
	if (!c->eof && !c->closing && pending(&c->in) < IN_LIMIT)
		want |= EPOLLIN | EPOLLRDHUP;
	if (pending(&c->out) > 0 || c->big_i < c->big_n)
		want |= EPOLLOUT;
	set_events(c, want);
}

static void accept_all(int lfd)
{
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if ((errno == EMFILE || errno == ENFILE) && reserve_fd >= 0) {
				/* Out of descriptors: take the client and drop it, so
				 * that it is told at once and we do not spin. */
				if (close(reserve_fd) != 0)
					die("close");
				fd = accept(lfd, NULL, NULL);
				if (fd >= 0 && close(fd) != 0)
					die("close");
				reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
				if (fd < 0)
					return;
				fprintf(stderr, "%s: out of file descriptors: a client dropped\n", prog);
				continue;
			}
			die("accept4");
		}
		struct conn *c = xmalloc(sizeof *c);
		memset(c, 0, sizeof *c);
		c->fd = fd;
		c->events = EPOLLIN | EPOLLRDHUP;
		struct epoll_event ev = {.events = c->events, .data.ptr = c};
		if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) != 0)
			die("epoll_ctl");
	}
}

static int listen_on(const char *addr, long port)
{
	union {
		struct sockaddr sa;
		struct sockaddr_in sin;
		struct sockaddr_in6 sin6;
	} u;
	memset(&u, 0, sizeof u);
	socklen_t len;
	int family;
	if (strchr(addr, ':') != NULL) {
		family = AF_INET6;
		u.sin6.sin6_family = AF_INET6;
		u.sin6.sin6_port = htons((uint16_t)port);
		if (inet_pton(AF_INET6, addr, &u.sin6.sin6_addr) != 1) {
			fprintf(stderr, "%s: not an IPv6 address: %s\n", prog, addr);
			exit(2);
		}
		len = sizeof u.sin6;
	} else {
		family = AF_INET;
		u.sin.sin_family = AF_INET;
		u.sin.sin_port = htons((uint16_t)port);
		if (inet_pton(AF_INET, addr, &u.sin.sin_addr) != 1) {
			fprintf(stderr, "%s: not an IPv4 address: %s\n", prog, addr);
			exit(2);
		}
		len = sizeof u.sin;
	}
	int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		die("socket");
	int one = 1;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0)
		die("setsockopt");
	if (bind(fd, &u.sa, len) != 0)
		die("bind");
	if (listen(fd, SOMAXCONN) != 0)
		die("listen");
	len = sizeof u;
	if (getsockname(fd, &u.sa, &len) != 0)
		die("getsockname");
	fprintf(stderr, "%s: listening on %s port %u\n", prog, addr,
		(unsigned)ntohs(family == AF_INET ? u.sin.sin_port : u.sin6.sin6_port));
	return fd;
}

static void usage(void)
{
	fprintf(stderr, "usage: %s [--addr ADDR] [--odd DIR] [--clock N] [--log FILE] [--loop-clock MS] PORT\n", prog);
	exit(2);
}

int main(int argc, char **argv)
{
	const char *addr = "127.0.0.1", *odd_dir = NULL;
	int i = 1;
	for (; i < argc && argv[i][0] == '-' && argv[i][1] == '-'; i += 2) {
		if (i + 1 >= argc)
			usage();
		if (strcmp(argv[i], "--addr") == 0)
			addr = argv[i + 1];
		else if (strcmp(argv[i], "--odd") == 0)
			odd_dir = argv[i + 1];
		else if (strcmp(argv[i], "--log") == 0) {
			if ((log_fd = open(argv[i + 1], O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) < 0)
				die(argv[i + 1]);
		}
		else if (strcmp(argv[i], "--clock") == 0) {
			char *e;
			errno = 0;
			clock_reads = strtol(argv[i + 1], &e, 10);
			if (*argv[i + 1] == '\0' || *e != '\0' || errno != 0 || clock_reads < 0 || clock_reads > 1000)
				usage();
		} else if (strcmp(argv[i], "--loop-clock") == 0) {
			char *e;
			errno = 0;
			long ms = strtol(argv[i + 1], &e, 10);
			if (*argv[i + 1] == '\0' || *e != '\0' || errno != 0 || ms < 1 || ms > 10000)
				usage();
			loop_ms = (int)ms;
		} else
			usage();
	}
	if (i != argc - 1)
		usage();
	char *end;
	errno = 0;
	long port = strtol(argv[i], &end, 10);
	if (*argv[i] == '\0' || *end != '\0' || errno != 0 || port < 0 || port > 65535)
		usage();

	if (odd_dir != NULL) {
		if (mkdir(odd_dir, 0700) == 0)
			odd = true;
		else if (errno != EEXIST)
			die(odd_dir);
	}
	if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
		die("signal");
	table = calloc(NBUCKETS, sizeof *table);
	if (table == NULL)
		die("calloc");
	reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (reserve_fd < 0)
		die("/dev/null");
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (epfd < 0)
		die("epoll_create1");
	int lfd = listen_on(addr, port);
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
	if (epoll_ctl(epfd, EPOLL_CTL_ADD, lfd, &ev) != 0)
		die("epoll_ctl");

	struct epoll_event evs[128];
	for (;;) {
		int n = epoll_wait(epfd, evs, 128, loop_ms);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("epoll_wait");
		}
		if (loop_ms >= 0)
			loop_now = wall_second();
		for (int k = 0; k < n; k++) {
			if (evs[k].data.ptr == NULL)
				accept_all(lfd);
			else
				conn_event(evs[k].data.ptr, evs[k].events);
		}
	}
}
