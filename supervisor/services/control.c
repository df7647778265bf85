/* control.c — see control.h. The socket file's life (listen, stale check,
 * removal at exit), the clients on the loop, and the ring of recent events.
 *
 * Each client is a bufferevent with bounds on both sides: its input holds
 * at most one frame (wire.h), its output at most OUT_MAX bytes. One request
 * per connection. Clients are never freed inside a callback that may be
 * running for them (the log hook can fire from anywhere, a client's own
 * callbacks included): a finished client is marked and freed by the reap
 * event on the next turn of the loop.
 *
 * Only processes outside the replicas are served (peer.h judges each
 * connection by the kernel's pidfd of its peer): a replica that read the
 * others' seeds could rebuild their heaps' layout, and their host pids are
 * none of its business. diehard becomes a child subreaper here, so that an
 * orphan of a replica without namespaces stays diehard's descendant and is
 * refused too. Refusals of replicas are counted (the report's
 * control_refused) and said at most once a second: a replica connecting
 * in a loop must not push the real events out of the history. */
#include "control.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "exitcode.h"
#include "log.h"
#include "peer.h"
#include "status.h"
#include "sup.h"
#include "svcenv.h"
#include "wire.h"

#define MAX_CLIENTS 32
#define RING_EVENTS 256
/* A follower's unsent output past this is a reader too slow: dropped.
 * The whole history (256 lines of at most 1 KiB) fits. */
#define OUT_MAX ((size_t)512 << 10)
/* A request must come this soon after the connection; output pending this
 * long without the client reading any of it drops the client. */
#define REQUEST_SECONDS 10
#define WRITE_SECONDS 10

struct entry {
	uint64_t seq;
	double time;
	enum log_kind kind;
	char text[1024];
};

struct client {
	struct control *c;
	struct bufferevent *bev;
	struct client *next;
	bool answered; /* its request was handled */
	bool follow;   /* it gets new events */
	bool closing;  /* closed once its output is written */
	bool doomed;   /* freed by the reap event */
};

struct control {
	struct sup *S;
	struct event *accept_ev;
	struct event *resume_ev; /* accepting again after running out of fds */
	struct event *reap_ev;
	struct client *clients;
	unsigned nclients;
	struct entry ring[RING_EVENTS];
	uint64_t nevents;
	uint64_t refused;        /* connections of the replicas' processes refused */
	uint64_t refused_unsaid; /* of those, not in an event yet */
	double refused_said;     /* when the last such event was */
};

/* The socket file, for the exit handler: removed only by the process that
 * made it, and only while it is still the one it made. */
static struct {
	char *path;
	int fd;
	dev_t dev;
	ino_t ino;
	pid_t owner;
} L = { .fd = -1 };

char *control_default_path(void)
{
	const char *dir = getenv("RUNTIME_DIRECTORY");
	if (dir == NULL || dir[0] == '\0' || dir[0] == ':')
		return NULL;
	size_t n = strcspn(dir, ":");
	char *p = malloc(n + sizeof "/control");
	if (p == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	memcpy(p, dir, n);
	memcpy(p + n, "/control", sizeof "/control");
	return p;
}

static void unlink_socket(void)
{
	if (L.path == NULL || getpid() != L.owner)
		return;
	struct stat st;
	if (lstat(L.path, &st) == 0 && st.st_dev == L.dev && st.st_ino == L.ino && unlink(L.path) != 0)
		log_warn("cannot remove the control socket %s: %s", L.path, strerror(errno));
	free(L.path);
	L.path = NULL;
}

/* Whether someone listens at the socket file path: a stale file (its
 * diehard died) refuses connections. */
static bool socket_live(const struct sockaddr_un *a, const char *path)
{
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		fatal(EXIT_INTERNAL, "socket: %s", strerror(errno));
	int r = connect(s, (const struct sockaddr *)a, sizeof *a);
	int err = errno;
	close(s);
	if (r == 0)
		return true;
	if (err == ECONNREFUSED)
		return false;
	/* EAGAIN: its backlog is full, so it is very much alive. */
	if (err == EAGAIN)
		return true;
	fatal(EXIT_INTERNAL, "the control socket %s exists and cannot be checked: %s", path, strerror(err));
}

void control_listen(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	if (path[0] == '\0' || strlen(path) >= sizeof a.sun_path)
		fatal(EXIT_INTERNAL, "the control socket path '%s' is %s", path,
		      path[0] ? "too long for a unix socket (107 bytes at most)" : "empty");
	memcpy(a.sun_path, path, strlen(path) + 1);
	struct stat st;
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode))
			fatal(EXIT_INTERNAL, "the control socket %s exists and is not a socket", path);
		if (socket_live(&a, path))
			fatal(EXIT_INTERNAL, "the control socket %s is in use by another process", path);
		if (unlink(path) != 0 && errno != ENOENT)
			fatal(EXIT_INTERNAL, "cannot remove the stale control socket %s: %s", path, strerror(errno));
	} else if (errno != ENOENT) {
		fatal(EXIT_INTERNAL, "the control socket %s: %s", path, strerror(errno));
	}
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s < 0)
		fatal(EXIT_INTERNAL, "socket: %s", strerror(errno));
	/* Created 0600 from the start: no moment where another user could
	 * connect. The chmod after makes it so under any umask. */
	mode_t old = umask(0177);
	int r = bind(s, (const struct sockaddr *)&a, sizeof a);
	int err = errno;
	umask(old);
	if (r != 0)
		fatal(EXIT_INTERNAL, "cannot create the control socket %s: %s", path, strerror(err));
	if (lstat(path, &st) != 0)
		fatal(EXIT_INTERNAL, "the control socket %s: %s", path, strerror(errno));
	L.path = strdup(path);
	L.dev = st.st_dev;
	L.ino = st.st_ino;
	L.owner = getpid();
	L.fd = s;
	if (L.path == NULL || atexit(unlink_socket) != 0)
		fatal(EXIT_INTERNAL, "out of memory");
	if (chmod(path, 0600) != 0)
		fatal(EXIT_INTERNAL, "cannot make the control socket %s private: %s", path, strerror(errno));
	if (listen(s, 16) != 0)
		fatal(EXIT_INTERNAL, "cannot listen on the control socket %s: %s", path, strerror(errno));
	/* Nothing in the replicas' environment leads here. */
	svcenv_hide_runtime_dir(path);
}

static void doom(struct client *cl)
{
	if (cl->doomed)
		return;
	cl->doomed = true;
	cl->follow = false;
	bufferevent_disable(cl->bev, EV_READ | EV_WRITE);
	event_active(cl->c->reap_ev, EV_TIMEOUT, 1);
}

static void on_reap(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct control *c = arg;
	for (struct client **p = &c->clients; *p != NULL;) {
		struct client *cl = *p;
		if (!cl->doomed) {
			p = &cl->next;
			continue;
		}
		*p = cl->next;
		bufferevent_free(cl->bev);
		free(cl);
		c->nclients--;
	}
}

/* Queues a framed message; a client that would hold more than OUT_MAX
 * unsent is not keeping up and is dropped. */
static void send_bytes(struct client *cl, const uint8_t *p, size_t n)
{
	if (cl->doomed)
		return;
	if (evbuffer_get_length(bufferevent_get_output(cl->bev)) + n > OUT_MAX) {
		log_event("control: a client reads too slowly: dropped");
		doom(cl);
		return;
	}
	if (bufferevent_write(cl->bev, p, n) != 0) {
		log_event("control: cannot queue output for a client: dropped");
		doom(cl);
	}
}

static void send_response(struct client *cl, Diehard__ControlResponse *m)
{
	m->version = WIRE_VERSION;
	size_t n;
	uint8_t *buf = wire_pack(&m->base, &n);
	if (buf == NULL) {
		log_warn("control: a response does not fit a frame: client dropped");
		doom(cl);
		return;
	}
	send_bytes(cl, buf, n);
	free(buf);
}

/* Closes the connection once what is queued has been written. */
static void finish(struct client *cl)
{
	cl->follow = false;
	if (evbuffer_get_length(bufferevent_get_output(cl->bev)) == 0)
		doom(cl);
	else
		cl->closing = true;
}

static void refuse(struct client *cl, const char *why)
{
	log_event("control: refused a client: %s", why);
	Diehard__ControlError e = DIEHARD__CONTROL_ERROR__INIT;
	e.message = (char *)why;
	Diehard__ControlResponse m = DIEHARD__CONTROL_RESPONSE__INIT;
	m.what_case = DIEHARD__CONTROL_RESPONSE__WHAT_ERROR;
	m.error = &e;
	send_response(cl, &m);
	bufferevent_disable(cl->bev, EV_READ);
	finish(cl);
}

static uint8_t *pack_event(const struct entry *e, size_t *n)
{
	Diehard__Event ev = DIEHARD__EVENT__INIT;
	ev.seq = e->seq;
	ev.time = e->time;
	ev.kind = e->kind == LOG_WARN ? DIEHARD__EVENT__KIND__WARNING : DIEHARD__EVENT__KIND__EVENT;
	ev.text = (ProtobufCBinaryData){ strlen(e->text), (uint8_t *)e->text };
	Diehard__ControlResponse m = DIEHARD__CONTROL_RESPONSE__INIT;
	m.version = WIRE_VERSION;
	m.what_case = DIEHARD__CONTROL_RESPONSE__WHAT_EVENT;
	m.event = &ev;
	return wire_pack(&m.base, n);
}

static void answer(struct client *cl, const Diehard__ControlRequest *req)
{
	struct control *c = cl->c;
	cl->answered = true;
	/* From now on only writes are timed: a follower may stay quiet. */
	struct timeval wt = { WRITE_SECONDS, 0 };
	bufferevent_set_timeouts(cl->bev, NULL, &wt);
	if (req->what_case == DIEHARD__CONTROL_REQUEST__WHAT_STATUS) {
		Diehard__RunStatus *st = status_build(c->S);
		Diehard__ControlResponse m = DIEHARD__CONTROL_RESPONSE__INIT;
		m.what_case = DIEHARD__CONTROL_RESPONSE__WHAT_STATUS;
		m.status = st;
		send_response(cl, &m);
		status_free(st);
		finish(cl);
		return;
	}
	uint64_t first = c->nevents > RING_EVENTS ? c->nevents - RING_EVENTS : 0;
	for (uint64_t i = first; i < c->nevents && !cl->doomed; i++) {
		size_t n;
		uint8_t *buf = pack_event(&c->ring[i % RING_EVENTS], &n);
		if (buf == NULL) {
			doom(cl);
			break;
		}
		send_bytes(cl, buf, n);
		free(buf);
	}
	if (req->events->has_follow && req->events->follow && !cl->doomed)
		cl->follow = true;
	else
		finish(cl);
}

static void on_read(struct bufferevent *bev, void *arg)
{
	struct client *cl = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t n = evbuffer_get_length(in), len = 0;
	if (cl->doomed || cl->closing) {
		evbuffer_drain(in, n);
		return;
	}
	if (cl->answered) {
		evbuffer_drain(in, n);
		refuse(cl, "one request per connection");
		return;
	}
	if (n == 0)
		return;
	const uint8_t *p = evbuffer_pullup(in, -1);
	if (p == NULL) {
		doom(cl);
		return;
	}
	char why[160];
	switch (wire_frame(p, n, &len)) {
	case WIRE_MORE:
		return;
	case WIRE_TOO_BIG:
		evbuffer_drain(in, n);
		snprintf(why, sizeof why, "a message longer than %zu bytes", WIRE_MAX);
		refuse(cl, why);
		return;
	case WIRE_FRAME:
		break;
	}
	if (n > WIRE_HEADER + len) {
		evbuffer_drain(in, n);
		refuse(cl, "one request per connection");
		return;
	}
	Diehard__ControlRequest *req = wire_decode_request(p + WIRE_HEADER, len, why, sizeof why);
	evbuffer_drain(in, n);
	if (req == NULL) {
		refuse(cl, why);
		return;
	}
	answer(cl, req);
	diehard__control_request__free_unpacked(req, NULL);
}

static void on_write(struct bufferevent *bev, void *arg)
{
	struct client *cl = arg;
	if (cl->closing && evbuffer_get_length(bufferevent_get_output(bev)) == 0)
		doom(cl);
}

static void on_bev_event(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	struct client *cl = arg;
	if (what & BEV_EVENT_TIMEOUT)
		log_event("control: a client %s for %d s: dropped", what & BEV_EVENT_READING ?
			  "sent no request" : "read nothing", what & BEV_EVENT_READING ? REQUEST_SECONDS : WRITE_SECONDS);
	/* EOF, an error, a timeout: the connection is over. */
	doom(cl);
}

/* An error sent straight to a connection that gets no client state (a
 * stranger, one too many, a replica), best effort: the socket buffer of a
 * new connection takes a short frame at once, or the client sees it
 * closed. said: the refusal is an event already. */
static void refuse_fd(int s, const char *why, bool said)
{
	if (!said)
		log_event("control: refused a connection: %s", why);
	Diehard__ControlError e = DIEHARD__CONTROL_ERROR__INIT;
	e.message = (char *)why;
	Diehard__ControlResponse m = DIEHARD__CONTROL_RESPONSE__INIT;
	m.version = WIRE_VERSION;
	m.what_case = DIEHARD__CONTROL_RESPONSE__WHAT_ERROR;
	m.error = &e;
	size_t n;
	uint8_t *buf = wire_pack(&m.base, &n);
	if (buf != NULL && send(s, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && !said)
		log_event("control: cannot send the refusal: %s", strerror(errno));
	free(buf);
	close(s);
}

/* Says the refusals of the replicas' processes, at most once a second
 * (now: always, what is left unsaid). */
static void say_refused(struct control *c, const struct peer *v, pid_t pid, bool now)
{
	double t = sup_now();
	if (c->refused_unsaid == 0 || (!now && c->refused_said > 0 && t - c->refused_said < 1.0))
		return;
	if (v == NULL) {
		log_event("control: %" PRIu64 " more connections from the replicas' processes refused (%" PRIu64 " in all)",
			  c->refused_unsaid, c->refused);
		c->refused_unsaid = 0;
		return;
	}
	char who[192];
	if (v->kind == PEER_REPLICA && v->slot >= 0)
		snprintf(who, sizeof who, "replica %u's process (pid %d)", c->S->r[v->slot].id, (int)pid);
	else if (v->kind == PEER_REPLICA)
		snprintf(who, sizeof who, "a process diehard started or adopted (pid %d)", (int)pid);
	else
		snprintf(who, sizeof who, "pid %d, which cannot be told (%s)", (int)pid, v->why);
	if (c->refused_unsaid > 1)
		log_event("control: refused %" PRIu64 " connections from the replicas' processes (%" PRIu64
			  " in all), the last from %s",
			  c->refused_unsaid, c->refused, who);
	else
		log_event("control: refused a connection from %s: the replicas may not use the control socket", who);
	c->refused_unsaid = 0;
	c->refused_said = t;
}

/* Refuses a connection from a replica's process, or from one that cannot
 * be told apart from them. What it is told names no pid or replica. */
static void refuse_replica(struct control *c, int s, const struct peer *v, pid_t pid)
{
	c->refused++;
	c->refused_unsaid++;
	report_attach(c->S->report, "control_refused", json_integer((json_int_t)c->refused));
	say_refused(c, v, pid, false);
	char why[224];
	if (v->kind == PEER_REPLICA)
		snprintf(why, sizeof why, "%s",
			 "permission denied: the replicas' processes (and what they start) may not use the control socket");
	else
		snprintf(why, sizeof why, "permission denied: cannot tell whether this process is outside the replicas (%s)",
			 v->why);
	refuse_fd(s, why, true);
}

static void client_new(struct control *c, int s)
{
	struct ucred cred;
	socklen_t cl_len = sizeof cred;
	if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cred, &cl_len) != 0) {
		log_event("control: SO_PEERCRED: %s", strerror(errno));
		close(s);
		return;
	}
	char why[128];
	if (cred.uid != 0 && cred.uid != geteuid()) {
		snprintf(why, sizeof why, "permission denied: uid %u is neither diehard's (%u) nor root",
			 (unsigned)cred.uid, (unsigned)geteuid());
		refuse_fd(s, why, false);
		return;
	}
	pid_t pid;
	int pidfd = peer_of_socket(s, &pid);
	if (pid == getpid()) {
		/* diehard never asks itself: such a connection was made for
		 * its replicas (a proxied unix connection, net/outbound.c). */
		if (pidfd >= 0)
			close(pidfd);
		refuse_fd(s, "permission denied: a connection diehard made for its replicas", false);
		return;
	}
	struct peer v = peer_judge(c->S, pidfd, pid, true);
	if (pidfd >= 0)
		close(pidfd);
	if (v.kind != PEER_OUTSIDE) {
		refuse_replica(c, s, &v, pid);
		return;
	}
	if (c->nclients >= MAX_CLIENTS) {
		snprintf(why, sizeof why, "too many clients (%d at once)", MAX_CLIENTS);
		refuse_fd(s, why, false);
		return;
	}
	struct client *cl = calloc(1, sizeof *cl);
	struct bufferevent *bev = bufferevent_socket_new(c->S->base, s, BEV_OPT_CLOSE_ON_FREE);
	if (cl == NULL || bev == NULL) {
		log_warn("control: out of memory for a client");
		free(cl);
		if (bev != NULL)
			bufferevent_free(bev);
		else
			close(s);
		return;
	}
	*cl = (struct client){ .c = c, .bev = bev, .next = c->clients };
	c->clients = cl;
	c->nclients++;
	bufferevent_setcb(bev, on_read, on_write, on_bev_event, cl);
	/* Never more than one frame is read in: a client cannot make us hold
	 * more than 64 KiB of what it sends. */
	bufferevent_setwatermark(bev, EV_READ, 0, WIRE_HEADER + WIRE_MAX);
	struct timeval rt = { REQUEST_SECONDS, 0 }, wt = { WRITE_SECONDS, 0 };
	bufferevent_set_timeouts(bev, &rt, &wt);
	if (bufferevent_enable(bev, EV_READ) != 0) {
		log_warn("control: cannot watch a client");
		doom(cl);
	}
}

static void on_resume(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct control *c = arg;
	if (event_add(c->accept_ev, NULL) != 0)
		log_warn("control: cannot watch the socket again: no more clients");
}

static void on_accept(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct control *c = arg;
	for (int i = 0; i < 16; i++) {
		int s = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (s >= 0) {
			client_new(c, s);
			continue;
		}
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED)
			return;
		/* Out of fds or memory: the pending connection would wake us
		 * at once again; pause for a second instead of spinning. */
		log_event("control: cannot accept a client: %s; pausing for 1 s", strerror(errno));
		struct timeval second = { 1, 0 };
		if (event_del(c->accept_ev) != 0 || evtimer_add(c->resume_ev, &second) != 0)
			log_warn("control: cannot pause the socket");
		return;
	}
}

/* log.h's hook: every line, into the ring and to every follower. */
static void on_log(void *arg, enum log_kind kind, const char *line)
{
	struct control *c = arg;
	/* A forked child (before its exec) shares our loop's epoll set: it
	 * must not touch it. */
	if (getpid() != L.owner)
		return;
	struct entry *e = &c->ring[c->nevents % RING_EVENTS];
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	e->seq = c->nevents++;
	e->time = (double)t.tv_sec + (double)t.tv_nsec / 1e9;
	e->kind = kind;
	snprintf(e->text, sizeof e->text, "%s", line);
	bool any = false;
	for (struct client *cl = c->clients; cl != NULL; cl = cl->next)
		any |= cl->follow;
	if (!any)
		return;
	size_t n;
	uint8_t *buf = pack_event(e, &n);
	for (struct client *cl = c->clients; cl != NULL; cl = cl->next)
		if (cl->follow) {
			if (buf == NULL)
				doom(cl);
			else
				send_bytes(cl, buf, n);
		}
	free(buf);
}

struct control *control_open(struct sup *S)
{
	if (S->o->control_path == NULL || L.fd < 0)
		return NULL;
	struct control *c = calloc(1, sizeof *c);
	if (c == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	c->S = S;
	c->accept_ev = event_new(S->base, L.fd, EV_READ | EV_PERSIST, on_accept, c);
	c->resume_ev = evtimer_new(S->base, on_resume, c);
	c->reap_ev = event_new(S->base, -1, 0, on_reap, c);
	if (c->accept_ev == NULL || c->resume_ev == NULL || c->reap_ev == NULL || event_add(c->accept_ev, NULL) != 0)
		fatal(EXIT_INTERNAL, "cannot watch the control socket");
	/* Before the first replica: orphans of replicas without namespaces
	 * are then adopted by diehard, not by the system's init, and stay
	 * recognizably the replicas' (peer.h); replica.c reaps them with
	 * its other children. */
	if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0)
		fatal(EXIT_INTERNAL, "prctl(PR_SET_CHILD_SUBREAPER): %s", strerror(errno));
	report_attach(S->report, "control_refused", json_integer(0));
	log_set_hook(on_log, c);
	return c;
}

void control_close(struct control *c)
{
	if (c == NULL)
		return;
	say_refused(c, NULL, 0, true);
	log_set_hook(NULL, NULL);
	/* The loop has stopped: one non-blocking write each of what is left
	 * (the end of a follower's stream), never a wait for a slow reader. */
	while (c->clients != NULL) {
		struct client *cl = c->clients;
		c->clients = cl->next;
		struct evbuffer *out = bufferevent_get_output(cl->bev);
		if (!cl->doomed)
			while (evbuffer_get_length(out) > 0 && evbuffer_write(out, bufferevent_getfd(cl->bev)) > 0)
				;
		bufferevent_free(cl->bev);
		free(cl);
	}
	event_free(c->accept_ev);
	event_free(c->resume_ev);
	event_free(c->reap_ev);
	if (close(L.fd) != 0)
		log_warn("control socket: close: %s", strerror(errno));
	L.fd = -1;
	unlink_socket();
	free(c);
}
