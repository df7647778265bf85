/* test_factory.c — the socket factory's diehard end (supervisor/net/
 * factory.c) against inits in forked children, over a real SOCK_SEQPACKET
 * channel with real descriptors:
 *   - a well-behaved fake init: distinct non-blocking close-on-exec TCP
 *     sockets of the family asked, one request per FACTORY_BATCH taken;
 *   - its errno, with the sockets it made before failing (closed);
 *   - garbage: empty, long and truncated answers, descriptors of the wrong
 *     kind, family or blocking mode, more or fewer than the batch, no
 *     answer (ETIMEDOUT, and the late answer then thrown away), a closed
 *     channel (EPIPE, then at once);
 *   - the real init's loop (sandbox_init_run): its answers, malformed
 *     requests refused with EINVAL, and the channel's end, which neither
 *     ends it nor loses the program's status.
 * Every case checks that no descriptor leaks. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "factory.h"
#include "sandbox.h"
#include "tap.h"

enum mode {
	GOOD,        /* the protocol as it should be */
	ERRNO,       /* EMFILE, with three sockets made before it */
	EMPTY,       /* a message of no bytes */
	LONG,        /* three bytes */
	PIPES,       /* byte 0, pipes for sockets */
	UNIX,        /* byte 0, unix sockets */
	UDP,         /* byte 0, datagram sockets of the family */
	FAMILY,      /* byte 0, TCP sockets of the other family */
	BLOCKING,    /* byte 0, blocking TCP sockets */
	TOO_MANY,    /* byte 0, count + 1 sockets */
	FEWER,       /* byte 0, count - 1 sockets */
	SILENT,      /* no answer to the first request; answers the next ones */
	LATE,        /* answers the first request after 1.5 s, then as GOOD */
	CLOSE,       /* closes the channel on the first request */
};

static bool have_v6;

static int open_fds(void)
{
	int n = 0;
	for (int fd = 0; fd < 4096; fd++)
		n += fcntl(fd, F_GETFD) >= 0;
	return n;
}

static int other(int family)
{
	return family == AF_INET ? AF_INET6 : AF_INET;
}

/* Sends byte and the n descriptors of fds (none: no SCM_RIGHTS). */
static void answer(int ch, const void *bytes, size_t len, const int *fds, unsigned n)
{
	struct iovec iov = { (void *)bytes, len };
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(128 * sizeof(int))];
	} ctl;
	memset(&ctl, 0, sizeof ctl);
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	if (n > 0) {
		msg.msg_control = ctl.buf;
		msg.msg_controllen = CMSG_SPACE(n * sizeof(int));
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(n * sizeof(int));
		memcpy(CMSG_DATA(c), fds, n * sizeof(int));
	}
	if (sendmsg(ch, &msg, MSG_NOSIGNAL) < 0)
		_exit(3);
}

/* n descriptors of the kind mode wants, for a request of family. */
static unsigned make(enum mode mode, int family, unsigned n, int *fds)
{
	unsigned made = 0;
	for (; made < n; made++) {
		int fd, p[2];
		switch (mode) {
		case PIPES:
			if (pipe2(p, O_CLOEXEC) != 0)
				_exit(4);
			close(p[1]);
			fd = p[0];
			break;
		case UNIX:
			fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
			break;
		case UDP:
			fd = socket(family, SOCK_DGRAM | SOCK_NONBLOCK, 0);
			break;
		case FAMILY:
			fd = socket(other(family), SOCK_STREAM | SOCK_NONBLOCK, 0);
			break;
		case BLOCKING:
			fd = socket(family, SOCK_STREAM, 0);
			break;
		default:
			fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
			break;
		}
		if (fd < 0)
			_exit(5);
		fds[made] = fd;
	}
	return made;
}

/* The fake init: answers each request as mode says, logging each request's
 * two bytes to log, until the channel ends. */
static _Noreturn void fake_init(int ch, int log, enum mode mode)
{
	for (unsigned round = 0;; round++) {
		unsigned char req[4];
		ssize_t n = recv(ch, req, sizeof req, 0);
		if (n <= 0)
			_exit(0);
		if (write(log, req, (size_t)n) != n)
			_exit(6);
		int family = req[0] == 4 ? AF_INET : AF_INET6;
		unsigned count = req[1];
		enum mode m = round == 0 ? mode : mode == SILENT || mode == LATE ? GOOD : mode;
		int fds[128];
		unsigned char zero[3] = { 0, 0, 0 };
		unsigned made = 0;
		switch (m) {
		case ERRNO: {
			unsigned char e = EMFILE;
			made = make(GOOD, family, 3, fds);
			answer(ch, &e, 1, fds, made);
			break;
		}
		case EMPTY:
			answer(ch, zero, 0, NULL, 0);
			break;
		case LONG:
			made = make(GOOD, family, count, fds);
			answer(ch, zero, 3, fds, made);
			break;
		case TOO_MANY:
			made = make(GOOD, family, count + 1, fds);
			answer(ch, zero, 1, fds, made);
			break;
		case FEWER:
			made = make(GOOD, family, count - 1, fds);
			answer(ch, zero, 1, fds, made);
			break;
		case SILENT:
			break;
		case LATE: {
			struct timespec t = { 1, 500000000 };
			nanosleep(&t, NULL);
			made = make(GOOD, family, count, fds);
			answer(ch, zero, 1, fds, made);
			break;
		}
		case CLOSE:
			_exit(0);
		default:
			made = make(m, family, count, fds);
			answer(ch, zero, 1, fds, made);
			break;
		}
		for (unsigned i = 0; i < made; i++)
			close(fds[i]);
	}
}

struct child {
	pid_t pid;
	int log; /* the requests it got */
	struct factory *F;
};

static struct child start(enum mode mode)
{
	int ch[2], log[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ch) != 0 || pipe2(log, O_CLOEXEC | O_NONBLOCK) != 0) {
		perror("socketpair");
		exit(2);
	}
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		exit(2);
	}
	if (pid == 0) {
		close(ch[0]);
		close(log[0]);
		fake_init(ch[1], log[1], mode);
	}
	close(ch[1]);
	close(log[1]);
	struct child c = { pid, log[0], factory_new(ch[0]) };
	if (c.F == NULL) {
		fprintf(stderr, "factory_new failed\n");
		exit(2);
	}
	return c;
}

/* Requests the child has had since the last look. */
static int requests(struct child *c)
{
	unsigned char buf[256];
	ssize_t n;
	int got = 0;
	while ((n = read(c->log, buf, sizeof buf)) > 0)
		got += (int)n;
	return got / 2;
}

static void finish(struct child *c)
{
	factory_free(c->F);
	close(c->log);
	int st;
	(void)waitpid(c->pid, &st, 0);
}

static bool is_good(int fd, int family)
{
	int domain = -1, type = -1;
	socklen_t len = sizeof domain;
	int fl = fcntl(fd, F_GETFL), fdfl = fcntl(fd, F_GETFD);
	bool ok = getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0 && domain == family;
	len = sizeof type;
	ok = ok && getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_STREAM;
	return ok && fl >= 0 && (fl & O_NONBLOCK) && fdfl >= 0 && (fdfl & FD_CLOEXEC);
}

static void test_good(int family, const char *name)
{
	int before = open_fds();
	struct child c = start(GOOD);
	int fds[FACTORY_BATCH * 2 + 1];
	bool good = true, distinct = true;
	int n = 0;
	for (; n < FACTORY_BATCH; n++) {
		fds[n] = factory_take(c.F, family);
		good = good && fds[n] >= 0 && is_good(fds[n], family);
	}
	CHECK(good, "%s: %d sockets taken, each TCP of the family, non-blocking, close-on-exec", name, FACTORY_BATCH);
	/* The child may not have logged yet: it logs before answering. */
	CHECK(requests(&c) == 1, "%s: one request for the first %d", name, FACTORY_BATCH);
	fds[n] = factory_take(c.F, family);
	good = fds[n] >= 0 && is_good(fds[n], family);
	n++;
	CHECK(good && requests(&c) == 1, "%s: take number %d refills the pool with one more request", name, FACTORY_BATCH + 1);
	for (; n < 2 * FACTORY_BATCH + 1; n++)
		fds[n] = factory_take(c.F, family);
	for (int i = 0; i < n; i++)
		for (int j = i + 1; j < n; j++)
			distinct = distinct && fds[i] >= 0 && fds[i] != fds[j];
	CHECK(distinct, "%s: %d sockets held at once are distinct", name, n);
	CHECK(requests(&c) == 1, "%s: a third request once %d are taken", name, 2 * FACTORY_BATCH + 1);
	for (int i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	finish(&c);
	CHECK(open_fds() == before, "%s: nothing leaked (the pool's rest closed by factory_free)", name);
}

/* One take against mode: fails with want, leaks nothing. */
static void test_bad(enum mode mode, int want, const char *name)
{
	int before = open_fds();
	struct child c = start(mode);
	errno = 0;
	int fd = factory_take(c.F, AF_INET);
	int err = errno;
	CHECK(fd == -1 && err == want, "%s: -1 with %s (got %d, %s)", name, strerror(want), fd, strerror(err));
	if (fd >= 0)
		close(fd);
	finish(&c);
	CHECK(open_fds() == before, "%s: every descriptor received closed", name);
}

static void test_family_mix(void)
{
	int before = open_fds();
	struct child c = start(GOOD);
	int a = factory_take(c.F, AF_INET), b = factory_take(c.F, AF_INET6), d = factory_take(c.F, AF_APPLETALK);
	int err = errno;
	CHECK(a >= 0 && is_good(a, AF_INET) && b >= 0 && is_good(b, AF_INET6), "a pool per family");
	CHECK(requests(&c) == 2, "one request per family");
	CHECK(d == -1 && err == EAFNOSUPPORT, "another family: EAFNOSUPPORT, nothing asked");
	close(a);
	close(b);
	finish(&c);
	CHECK(open_fds() == before, "a pool per family: nothing leaked");
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void test_timeouts(void)
{
	int before = open_fds();
	struct child c = start(SILENT);
	double t0 = now();
	int fd = factory_take(c.F, AF_INET);
	int err = errno;
	double t = now() - t0;
	CHECK(fd == -1 && err == ETIMEDOUT && t >= 0.9 && t < 3, "no answer: ETIMEDOUT after a second (%.2f s)", t);
	fd = factory_take(c.F, AF_INET);
	CHECK(fd >= 0 && is_good(fd, AF_INET), "the next request is answered");
	if (fd >= 0)
		close(fd);
	finish(&c);
	CHECK(open_fds() == before, "no answer: nothing leaked");

	before = open_fds();
	c = start(LATE);
	fd = factory_take(c.F, AF_INET);
	err = errno;
	CHECK(fd == -1 && err == ETIMEDOUT, "a late answer: ETIMEDOUT first");
	struct timespec pause = { 1, 0 };
	nanosleep(&pause, NULL); /* the late answer is waiting now */
	fd = factory_take(c.F, AF_INET);
	CHECK(fd >= 0 && is_good(fd, AF_INET), "the late answer is thrown away, the next request answered");
	CHECK(requests(&c) == 2, "two requests in all");
	if (fd >= 0)
		close(fd);
	finish(&c);
	CHECK(open_fds() == before, "a late answer: its descriptors closed");
}

static void test_closed(void)
{
	int before = open_fds();
	struct child c = start(CLOSE);
	int fd = factory_take(c.F, AF_INET);
	int err = errno;
	CHECK(fd == -1 && err == EPIPE, "the channel closed on a request: EPIPE (%s)", strerror(err));
	double t0 = now();
	fd = factory_take(c.F, AF_INET);
	err = errno;
	CHECK(fd == -1 && err == EPIPE && now() - t0 < 0.5, "and EPIPE at once after that");
	finish(&c);
	CHECK(open_fds() == before, "closed channel: nothing leaked");

	/* Gone before anything was asked. */
	c = start(CLOSE);
	int st;
	kill(c.pid, SIGKILL);
	waitpid(c.pid, &st, 0);
	fd = factory_take(c.F, AF_INET6);
	err = errno;
	CHECK(fd == -1 && err == EPIPE, "an init gone before the request: EPIPE (%s)", strerror(err));
	factory_free(c.F);
	close(c.log);
	CHECK(open_fds() == before, "an init gone: nothing leaked");
}

/* Raw requests to the real init: the answer's byte and descriptor count. */
static int raw(int ch, const unsigned char *req, size_t len, int *nfds)
{
	if (send(ch, req, len, MSG_NOSIGNAL) != (ssize_t)len)
		return -1;
	unsigned char byte[2];
	struct iovec iov = { byte, sizeof byte };
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(128 * sizeof(int))];
	} ctl;
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf };
	ssize_t n = recvmsg(ch, &msg, MSG_CMSG_CLOEXEC);
	if (n != 1)
		return -1;
	*nfds = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
		size_t m = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < m; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
			close(fd);
			++*nfds;
		}
	}
	return byte[0];
}

static void test_real_init(void)
{
	int before = open_fds();
	int ch[2], status[2], pidp[2];
	/* A file in ns_last_pid's place: the init reads and writes it as
	 * text, as it would the kernel's. */
	char lp_path[] = "/tmp/test_factory_lastpid.XXXXXX";
	int lp = mkostemp(lp_path, O_CLOEXEC);
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ch) != 0 || pipe2(status, O_CLOEXEC) != 0 ||
	    pipe2(pidp, O_CLOEXEC) != 0 || lp < 0 || unlink(lp_path) != 0 || write(lp, "1234\n", 5) != 5) {
		perror("socketpair");
		exit(2);
	}
	sigset_t all, old;
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	pid_t init = fork();
	if (init == 0) {
		/* As spawn.c makes it: every signal blocked, the program its
		 * child. */
		close(ch[0]);
		close(status[0]);
		close(pidp[0]);
		pid_t prog = fork();
		if (prog == 0) {
			sigprocmask(SIG_SETMASK, &old, NULL);
			for (;;)
				pause();
		}
		if (write(pidp[1], &prog, sizeof prog) != (ssize_t)sizeof prog)
			_exit(7);
		close(pidp[1]);
		sandbox_init_run(prog, status[1], ch[1], -1, lp);
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	close(lp);
	close(ch[1]);
	close(status[1]);
	close(pidp[1]);
	pid_t prog = 0;
	if (init < 0 || read(pidp[0], &prog, sizeof prog) != (ssize_t)sizeof prog) {
		perror("the real init");
		exit(2);
	}
	close(pidp[0]);

	int nfds = -1;
	unsigned char bad_family[2] = { 5, 1 }, zero[2] = { 4, 0 }, many[2] = { 4, SANDBOX_SOCKETS_MAX + 1 },
		      most[2] = { 4, SANDBOX_SOCKETS_MAX }, longer[3] = { 4, 1, 0 };
	CHECK(raw(ch[0], bad_family, 2, &nfds) == EINVAL && nfds == 0, "real init: family 5 refused (EINVAL)");
	CHECK(raw(ch[0], zero, 2, &nfds) == EINVAL && nfds == 0, "real init: count 0 refused");
	CHECK(raw(ch[0], many, 2, &nfds) == EINVAL && nfds == 0, "real init: count %d refused", SANDBOX_SOCKETS_MAX + 1);
	CHECK(raw(ch[0], longer, 3, &nfds) == EINVAL && nfds == 0, "real init: a 3-byte request refused");
	CHECK(raw(ch[0], bad_family, 1, &nfds) == EINVAL && nfds == 0, "real init: a 1-byte request refused");
	CHECK(raw(ch[0], most, 2, &nfds) == 0 && nfds == SANDBOX_SOCKETS_MAX, "real init: %d sockets in one answer",
	      SANDBOX_SOCKETS_MAX);
	unsigned char udp_bad[2] = { 5 | FACTORY_UDP, 1 }, udp_two[2] = { 6 | FACTORY_UDP, 2 };
	CHECK(raw(ch[0], udp_bad, 2, &nfds) == EINVAL && nfds == 0, "real init: UDP of family 5 refused (EINVAL)");
	if (have_v6)
		CHECK(raw(ch[0], udp_two, 2, &nfds) == 0 && nfds == 2, "real init: 2 UDP sockets of IPv6");

	int dup = fcntl(ch[0], F_DUPFD_CLOEXEC, 3);
	struct factory *F = factory_new(dup);
	int a = factory_take(F, AF_INET);
	CHECK(a >= 0 && is_good(a, AF_INET), "real init: factory_take gets an AF_INET socket");
	if (have_v6) {
		int b = factory_take(F, AF_INET6);
		CHECK(b >= 0 && is_good(b, AF_INET6), "real init: and an AF_INET6 one");
		if (b >= 0)
			close(b);
	}
	if (a >= 0)
		close(a);
	/* UDP sockets: a pool of their own, from a request of its own. */
	int u = factory_take_type(F, AF_INET, SOCK_DGRAM), type = -1, proto = -1;
	socklen_t tl = sizeof type, pl = sizeof proto;
	CHECK(u >= 0 && getsockopt(u, SOL_SOCKET, SO_TYPE, &type, &tl) == 0 && type == SOCK_DGRAM &&
		      getsockopt(u, SOL_SOCKET, SO_PROTOCOL, &proto, &pl) == 0 && proto == IPPROTO_UDP &&
		      (fcntl(u, F_GETFL) & O_NONBLOCK),
	      "real init: factory_take_type gets a non-blocking UDP socket");
	int t2 = factory_take(F, AF_INET);
	CHECK(t2 >= 0 && is_good(t2, AF_INET), "real init: TCP still from its own pool after UDP");
	errno = 0;
	CHECK(factory_take_type(F, AF_INET, SOCK_RAW) == -1 && errno == EPROTOTYPE, "real init: other types refused");
	/* Unix sockets of the init's network namespace (abstract names). */
	int us = factory_take_type(F, AF_UNIX, SOCK_STREAM), ud = factory_take_type(F, AF_UNIX, SOCK_DGRAM);
	tl = sizeof type;
	int ut = -1;
	CHECK(us >= 0 && ud >= 0 && getsockopt(ud, SOL_SOCKET, SO_TYPE, &ut, &tl) == 0 && ut == SOCK_DGRAM,
	      "real init: unix stream and datagram sockets");
	if (us >= 0)
		close(us);
	if (ud >= 0)
		close(ud);
	if (u >= 0)
		close(u);
	if (t2 >= 0)
		close(t2);
	/* The namespace's last pid: read, written, garbage refused. */
	pid_t last = 0;
	CHECK(factory_last_pid(F, -1, &last) == 0 && last == 1234, "real init: the last pid read (1234)");
	CHECK(factory_last_pid(F, 56789, &last) == 0 && last == 56789, "real init: the last pid written (56789)");
	CHECK(factory_last_pid(F, -1, &last) == 0 && last == 56789, "real init: and read back");
	CHECK(factory_last_pid(F, (long)INT32_MAX + 1, &last) == EINVAL, "real init: past INT32_MAX refused here");
	unsigned char bad_ops[][7] = { { 'P', 2, 9, 0, 0, 0, 0 }, { 'P', 1, 9, 0xff, 0xff, 0xff, 0xff },
				       { 'P', 0, 9, 1, 0, 0, 0 }, { 'P', 0, 0, 0, 0, 0, 0 } };
	size_t bad_len[] = { 3, 7, 4, 2 };
	for (size_t i = 0; i < 4; i++) {
		unsigned char ans[8];
		ssize_t n = send(ch[0], bad_ops[i], bad_len[i], MSG_NOSIGNAL) == (ssize_t)bad_len[i]
				    ? recv(ch[0], ans, sizeof ans, 0)
				    : -1;
		CHECK(n == 6 && ans[0] == EINVAL, "real init: malformed last pid request %zu refused (EINVAL)", i);
	}
	/* A late answer (a request nobody waits for any more) is told from
	 * the one awaited by its tag. */
	unsigned char stale[3] = { 'P', 0, 200 };
	CHECK(send(ch[0], stale, sizeof stale, MSG_NOSIGNAL) == 3, "real init: a request whose answer goes unread");
	struct timespec pause = { 0, 50000000 };
	nanosleep(&pause, NULL);
	int lerr = factory_last_pid(F, 4321, &last);
	CHECK(lerr == 0 && last == 4321, "real init: the next answer is its own, not the late one (%d, %d)", lerr, (int)last);
	CHECK(factory_last_pid(F, -1, &last) == 0 && last == 4321, "real init: read back after them");
	int after = factory_take(F, AF_INET);
	CHECK(after >= 0, "real init: sockets still come after them");
	if (after >= 0)
		close(after);
	/* The channel's end: the init goes on. */
	factory_free(F);
	close(ch[0]);
	struct timespec t = { 0, 100000000 };
	nanosleep(&t, NULL);
	int st;
	CHECK(waitpid(init, &st, WNOHANG) == 0, "real init: the channel's end does not end it");
	/* The program's end does, with its status. */
	kill(prog, SIGKILL);
	int pst = 0;
	ssize_t r = read(status[0], &pst, sizeof pst);
	CHECK(r == (ssize_t)sizeof pst && WIFSIGNALED(pst) && WTERMSIG(pst) == SIGKILL,
	      "real init: the program's status still comes (killed by SIGKILL)");
	CHECK(waitpid(init, &st, 0) == init && WIFEXITED(st) && WEXITSTATUS(st) == 0, "real init: exits 0 then");
	close(status[0]);
	CHECK(open_fds() == before, "real init: nothing leaked");
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	int s6 = socket(AF_INET6, SOCK_STREAM, 0);
	have_v6 = s6 >= 0;
	if (s6 >= 0)
		close(s6);
	test_good(AF_INET, "AF_INET");
	if (have_v6)
		test_good(AF_INET6, "AF_INET6");
	else
		printf("# no IPv6 here: AF_INET6 pools not tested\n");
	test_family_mix();
	test_bad(ERRNO, EMFILE, "the init's errno");
	test_bad(EMPTY, EPROTO, "an empty answer");
	test_bad(LONG, EPROTO, "a 3-byte answer");
	test_bad(PIPES, EPROTO, "pipes for sockets");
	test_bad(UNIX, EPROTO, "unix sockets");
	test_bad(UDP, EPROTO, "UDP sockets");
	if (have_v6)
		test_bad(FAMILY, EPROTO, "sockets of the other family");
	test_bad(BLOCKING, EPROTO, "blocking sockets");
	test_bad(TOO_MANY, EPROTO, "more descriptors than asked");
	test_bad(FEWER, EPROTO, "fewer descriptors than asked");
	test_timeouts();
	test_closed();
	test_real_init();
	return tap_done();
}
