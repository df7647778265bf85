/* notify.c — see notify.h.
 *
 * The replicas' notify sockets are files: an abstract address is one of
 * the network namespace that binds it, and a replica with a network of its
 * own (--net private) would not find ours. They live in a directory of
 * diehard's alone (mkdtemp, 0700: only diehard's user, as the replicas are,
 * may send to them), made when the first is, and removed when the run
 * ends, also by a fatal() exit (atexit), by the process that made it
 * only. Each socket is unlinked when its process leaves, and none is
 * reused: a new process in a slot gets a new name. The directory is under
 * $TMPDIR or /tmp, else a RUNTIME_DIRECTORY entry, never the one that holds
 * the control socket (svcenv.h): a replica's NOTIFY_SOCKET must not lead
 * there.
 *
 * Every socket and directory is diehard's user's, as the replicas are, so
 * any replica can send to any socket (a sibling's too): what makes a
 * message count is its sender, which the kernel names with a pidfd
 * (SO_PASSPIDFD: taken when it sent, so it names that process even if the
 * number has gone to another since), judged at once as we read it
 * (peer.h): a process of this socket's replica, alive or not yet reaped;
 * or that replica's first process (the program, sandboxed), whose pidfd
 * diehard holds from its start, even once reaped (the same process:
 * pidfs gives each one an inode of its own). Anything else (a sibling, a
 * sender already reaped, one that cannot be told) is dropped and counted
 * (the report's notify_dropped; an event at most once a second). */
#include "files.h"
#include "notify.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "exitcode.h"
#include "log.h"
#include "peer.h"
#include "sdnotify.h"
#include "sup.h"
#include "svcenv.h"

#define MSG_MAX 4096   /* a notify datagram we read; longer ones are cut (MSG_TRUNC) */
#define STATUS_MAX 256 /* a replica's STATUS= text kept */
#define FDS_MAX 64     /* fds one message may carry (all closed) */
#define ENV_MAX 8

enum nstate { N_STARTING, N_READY, N_RELOADING, N_STOPPING };

struct nslot {
	struct notify *n;
	unsigned index;
	int fd;                 /* its notify socket, or -1 */
	struct event *ev;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* its file; "": none */
	bool running;           /* started and not gone */
	pid_t main_pid;         /* its first process (sandboxed: the program) */
	int main_pidfd;         /* and a pidfd of it, held while the slot's socket
				   is open (-1: none) */
	enum nstate state;
	bool reload_seen;       /* said RELOADING=1 since diehard last told READY=1 */
	char status[STATUS_MAX];
	bool has_status;
	uint64_t wd_usec;       /* 0: no watchdog */
	double wd_last;         /* its last ping (or its start) */
	char *env[ENV_MAX + 1];
};

struct notify {
	struct sup *S;
	const struct svcenv *e;
	struct nslot *slot;
	bool told_ready, reloading, told_stopping;
	char told_status[STATUS_MAX + 128];
	struct event *ping_ev;  /* diehard's own watchdog pings */
	char listen_fds[32];
	char *listen_names;
	unsigned next_sock;     /* the next socket's number in the directory */
	bool no_pidfd;          /* the kernel passes no senders' pidfds: pids */
	uint64_t dropped;       /* messages dropped for their sender */
	uint64_t dropped_unsaid; /* of those, not in an event yet */
	double dropped_said;    /* when the last such event was */
};

/* The sockets' directory (one per process: there is one run). */
static struct {
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* "": not made */
	pid_t owner;
	bool atexit;
} D;

/* Removes the directory and whatever is left in it (at the end, and at
 * exit); a copy of us (a fork) leaves it alone. */
static void dir_remove(void)
{
	if (D.path[0] == '\0' || getpid() != D.owner)
		return;
	DIR *d = opendir(D.path);
	if (d != NULL) {
		struct dirent *e;
		while ((e = readdir(d)) != NULL)
			if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 &&
			    unlinkat(dirfd(d), e->d_name, 0) != 0 && errno != ENOENT)
				log_warn("cannot remove %s/%s: %s", D.path, e->d_name, strerror(errno));
		closedir(d);
	}
	if (rmdir(D.path) != 0 && errno != ENOENT)
		log_warn("cannot remove the notify sockets' directory %s: %s", D.path, strerror(errno));
	D.path[0] = '\0';
}

/* Makes the directory in one of $TMPDIR, /tmp and the RUNTIME_DIRECTORY
 * entries left (svcenv.h: none of them holds the control socket), the
 * first where a socket's address fits and mkdtemp works. */
static void dir_make(void)
{
	static const char tail[] = "/diehard-notify-XXXXXX/4294967295.sock";
	const char *tmp = getenv("TMPDIR"), *rt = getenv("RUNTIME_DIRECTORY");
	char tried[256] = "";
	size_t t = 0;
	for (int i = 0; i < 3; i++) {
		const char *c = i == 0 ? tmp : i == 1 ? "/tmp" : rt;
		while (c != NULL && c[0] != '\0') {
			size_t n = i == 2 ? strcspn(c, ":") : strlen(c);
			if (c[0] == '/' && n + sizeof tail <= sizeof D.path) {
				snprintf(D.path, sizeof D.path, "%.*s/diehard-notify-XXXXXX", (int)n, c);
				if (mkdtemp(D.path) != NULL) {
					files_keep(D.path);
					return;
				}
				if (t < sizeof tried)
					t += (size_t)snprintf(tried + t, sizeof tried - t, "%s%.*s: %s", t ? ", " : "", (int)n,
							      c, strerror(errno));
			}
			c = i == 2 && c[n] == ':' ? c + n + 1 : NULL;
		}
	}
	D.path[0] = '\0';
	fatal(EXIT_INTERNAL, "cannot make a directory for the replicas' notify sockets (%s): set TMPDIR to a writable "
			     "directory (PrivateTmp=yes under systemd)", t ? tried : "no directory to try");
}

/* The directory, made now if need be. */
static const char *dir_get(void)
{
	if (D.path[0] != '\0')
		return D.path;
	dir_make();
	D.owner = getpid();
	if (!D.atexit && atexit(dir_remove) != 0) {
		dir_remove();
		fatal(EXIT_INTERNAL, "atexit failed");
	}
	D.atexit = true;
	return D.path;
}

static void on_message(evutil_socket_t fd, short what, void *arg);
static void on_ping(evutil_socket_t fd, short what, void *arg);

struct notify *notify_new(struct sup *S)
{
	struct notify *n = calloc(1, sizeof *n);
	if (n == NULL || (n->slot = calloc(S->nslots, sizeof *n->slot)) == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	n->S = S;
	n->e = svcenv_get();
	for (unsigned i = 0; i < S->nslots; i++)
		n->slot[i] = (struct nslot){ .n = n, .index = i, .fd = -1, .main_pidfd = -1 };
	if (n->e->notify)
		report_attach(S->report, "notify_dropped", json_integer(0));
	if (n->e->listen_fds > 0) {
		snprintf(n->listen_fds, sizeof n->listen_fds, "LISTEN_FDS=%u", n->e->listen_fds);
		if (n->e->listen_names != NULL && asprintf(&n->listen_names, "LISTEN_FDNAMES=%s", n->e->listen_names) < 0)
			fatal(EXIT_INTERNAL, "out of memory");
	}
	if (n->e->notify && n->e->watchdog_usec > 0) {
		/* Pings at half the interval, as sd_watchdog_enabled(3) advises. */
		uint64_t half = n->e->watchdog_usec / 2;
		struct timeval tv = { .tv_sec = (time_t)(half / 1000000), .tv_usec = (suseconds_t)(half % 1000000) };
		n->ping_ev = event_new(S->base, -1, EV_PERSIST, on_ping, n);
		if (n->ping_ev == NULL || event_add(n->ping_ev, &tv) != 0)
			fatal(EXIT_INTERNAL, "cannot start the watchdog timer");
		log_event("watchdog: diehard pings every %.3f s while a majority of replicas is healthy", half / 1e6);
	}
	return n;
}

static void slot_close(struct nslot *ns)
{
	if (ns->ev != NULL)
		event_free(ns->ev);
	ns->ev = NULL;
	if (ns->fd >= 0)
		close(ns->fd);
	ns->fd = -1;
	if (ns->path[0] != '\0' && unlink(ns->path) != 0 && errno != ENOENT)
		log_warn("cannot remove a replica's notify socket %s: %s", ns->path, strerror(errno));
	ns->path[0] = '\0';
	ns->running = false;
	if (ns->main_pidfd >= 0)
		close(ns->main_pidfd);
	ns->main_pidfd = -1;
	ns->main_pid = 0;
}

/* A datagram socket bound to a new name in the directory, reading the
 * senders' credentials. */
static void slot_open(struct notify *n, struct nslot *ns)
{
	const char *dir = dir_get();
	ns->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (ns->fd < 0)
		fatal(EXIT_INTERNAL, "cannot make a replica's notify socket: %s", strerror(errno));
	int on = 1, len = 0, err = 0;
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	if (setsockopt(ns->fd, SOL_SOCKET, SO_PASSCRED, &on, sizeof on) != 0)
		fatal(EXIT_INTERNAL, "cannot make a replica's notify socket: %s", strerror(errno));
	/* A name no replica can guess ahead (the directory is the replicas'
	 * user's, on the shared file system: one that bound the next names
	 * itself would make every later bind fail), and on a name taken all
	 * the same, another. */
	for (unsigned tries = 0; tries < 64; tries++) {
		uint64_t r;
		if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
			r = (uint64_t)n->next_sock * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
		len = snprintf(a.sun_path, sizeof a.sun_path, "%s/%u-%016" PRIx64 ".sock", dir, n->next_sock++, r);
		if (len < 0 || (size_t)len >= sizeof a.sun_path)
			fatal(EXIT_INTERNAL, "a notify socket's path is too long: %s", a.sun_path);
		if (bind(ns->fd, (struct sockaddr *)&a,
			 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + (size_t)len + 1)) == 0) {
			err = 0;
			break;
		}
		err = errno;
		if (err != EADDRINUSE)
			break;
	}
	if (err != 0)
		fatal(EXIT_INTERNAL, "cannot bind a replica's notify socket %s: %s", a.sun_path, strerror(err));
	if (!n->no_pidfd && !peer_pass_pidfd(ns->fd)) {
		n->no_pidfd = true;
		log_event("notify: no senders' pidfds from this kernel (SO_PASSPIDFD: %s; Linux 6.5): senders are "
			  "judged by pid, which a sender that exits may free for another process before it is read",
			  strerror(errno));
	}
	memcpy(ns->path, a.sun_path, (size_t)len + 1);
	ns->ev = event_new(n->S->base, ns->fd, EV_READ | EV_PERSIST, on_message, ns);
	if (ns->ev == NULL || event_add(ns->ev, NULL) != 0)
		fatal(EXIT_INTERNAL, "cannot watch a replica's notify socket");
}

static void slot_read(struct notify *n, struct nslot *ns);
static void tell(struct notify *n);

static char *var(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *var(const char *fmt, ...)
{
	va_list ap;
	char *s;
	va_start(ap, fmt);
	int r = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (r < 0)
		fatal(EXIT_INTERNAL, "out of memory");
	return s;
}

char *const *notify_replica_env(struct notify *n, unsigned slot)
{
	struct nslot *ns = &n->slot[slot];
	slot_close(ns);
	for (unsigned i = 0; i < ENV_MAX && ns->env[i] != NULL; i++) {
		free(ns->env[i]);
		ns->env[i] = NULL;
	}
	ns->state = N_STARTING;
	ns->reload_seen = false;
	ns->has_status = false;
	ns->wd_usec = 0;
	unsigned k = 0;
	if (n->e->notify) {
		slot_open(n, ns);
		ns->env[k++] = var("NOTIFY_SOCKET=%s", ns->path);
		if (n->e->watchdog_usec > 0) {
			ns->wd_usec = n->e->watchdog_usec;
			ns->env[k++] = var("WATCHDOG_USEC=%" PRIu64, n->e->watchdog_usec);
			/* Room for any pid: spawn.c writes the process's own. */
			ns->env[k++] = var("WATCHDOG_PID=%s", "0000000000");
		}
	}
	if (n->e->listen_fds > 0) {
		ns->env[k++] = var("%s", n->listen_fds);
		if (n->listen_names != NULL)
			ns->env[k++] = var("%s", n->listen_names);
		ns->env[k++] = var("LISTEN_PID=%s", "0000000000");
	}
	ns->env[k] = NULL;
	return ns->env;
}

void notify_replica_started(struct notify *n, unsigned slot, int program_pidfd)
{
	struct nslot *ns = &n->slot[slot];
	struct replica *r = &n->S->r[slot];
	ns->running = true;
	ns->wd_last = sup_now();
	if (ns->main_pidfd >= 0)
		close(ns->main_pidfd);
	/* Sandboxed, the program's pidfd came from the program itself
	 * (spawn.c); else, by number, checked to be the init's child (a
	 * residual race on kernels without SO_PASSPIDFD). Without namespaces
	 * the program is our own child, not reaped yet: its number is its. */
	ns->main_pid = r->program_pid > 0 ? r->program_pid : r->pid;
	ns->main_pidfd = program_pidfd >= 0 ? program_pidfd
			 : peer_pidfd_child(ns->main_pid, r->program_pid > 0 ? r->pid : getpid());
}

void notify_replica_gone(struct notify *n, unsigned slot)
{
	struct nslot *ns = &n->slot[slot];
	/* What it sent before it left still counts (READY=1 just before an
	 * exit): read first, then close. A killed one is out of the vote
	 * already, and on_message drops its words. */
	if (ns->fd >= 0)
		slot_read(n, ns);
	slot_close(ns);
	/* What the manager hears of it comes with the next tick (no
	 * recursion into replica_kill from here). */
}


/* Whether the message's sender (pidfd from SCM_PIDFD: -1 none, -2 one the
 * kernel could not make; pid from SCM_CREDENTIALS) is a process of slot
 * ns's replica now; why says what it is when not. */
static bool sender_ok(struct notify *n, struct nslot *ns, int pidfd, pid_t pid, char *why, size_t size)
{
	/* The replica's first process, reaped or not: a program that says
	 * READY=1 and exits at once keeps its word. */
	if (pidfd >= 0 ? peer_same_process(pidfd, ns->main_pidfd)
		       : pid > 0 && pid == ns->main_pid && (pidfd == -2 || n->no_pidfd))
		return true;
	struct peer v = peer_judge(n->S, n->no_pidfd ? -1 : pidfd >= 0 ? pidfd : -2, pid, false);
	if (v.kind == PEER_REPLICA && v.slot == (int)ns->index)
		return true;
	if (v.kind == PEER_REPLICA && v.slot >= 0)
		snprintf(why, size, "is replica %u's", n->S->r[v.slot].id);
	else if (v.kind == PEER_REPLICA)
		snprintf(why, size, "was started or adopted by diehard, no replica can be told for it");
	else if (v.kind == PEER_OUTSIDE)
		snprintf(why, size, "is no replica's");
	else
		snprintf(why, size, "cannot be told: %s", v.why);
	return false;
}

/* A message dropped for its sender: counted, said at most once a second
 * (a replica that sends in a loop must not flood -v or the control
 * socket's history); now: what is left unsaid. */
static void dropped(struct notify *n, const struct replica *r, pid_t pid, const char *why, bool now)
{
	if (r != NULL) {
		n->dropped++;
		n->dropped_unsaid++;
		report_attach(n->S->report, "notify_dropped", json_integer((json_int_t)n->dropped));
	}
	double t = sup_now();
	if (n->dropped_unsaid == 0 || (!now && n->dropped_said > 0 && t - n->dropped_said < 1.0))
		return;
	if (r == NULL)
		log_event("notify_dropped: %" PRIu64 " more notify messages dropped for their senders (%" PRIu64 " in all)",
			  n->dropped_unsaid, n->dropped);
	else if (n->dropped_unsaid > 1)
		log_event("notify_dropped: %" PRIu64 " notify messages dropped for their senders (%" PRIu64 " in all), "
			  "the last to replica %u's socket from pid %d, which %s",
			  n->dropped_unsaid, n->dropped, r->id, (int)pid, why);
	else
		log_event("notify_dropped: a message to replica %u's notify socket from pid %d dropped: the sender %s",
			  r->id, (int)pid, why);
	n->dropped_unsaid = 0;
	n->dropped_said = t;
}

/* One line KEY=VALUE of a replica's message. */
static void handle(struct notify *n, struct nslot *ns, const char *line, size_t len)
{
	struct sup *S = n->S;
	struct replica *r = &S->r[ns->index];
#define IS(key) (len >= sizeof key - 1 && memcmp(line, key, sizeof key - 1) == 0)
	const char *v = memchr(line, '=', len);
	size_t vlen = v != NULL ? len - (size_t)(v + 1 - line) : 0;
	if (v != NULL)
		v++;
	if (IS("READY=1") && len == 7) {
		if (ns->state != N_READY)
			log_event("replica %u says READY=1", r->id);
		ns->state = N_READY;
	} else if (IS("RELOADING=1") && len == 11) {
		log_event("replica %u says RELOADING=1", r->id);
		ns->state = N_RELOADING;
		ns->reload_seen = true;
	} else if (IS("STOPPING=1") && len == 10) {
		log_event("replica %u says STOPPING=1", r->id);
		ns->state = N_STOPPING;
	} else if (IS("STATUS=")) {
		size_t m = vlen < STATUS_MAX - 1 ? vlen : STATUS_MAX - 1;
		memcpy(ns->status, v, m);
		ns->status[m] = '\0';
		ns->has_status = true;
	} else if (IS("WATCHDOG=1") && len == 10) {
		ns->wd_last = sup_now();
	} else if (IS("WATCHDOG=trigger") && len == 16) {
		replica_kill(S, r, "watchdog: the replica asked for it (WATCHDOG=trigger)");
	} else if (IS("WATCHDOG_USEC=")) {
		char num[24];
		size_t m = vlen < sizeof num - 1 ? vlen : sizeof num - 1;
		memcpy(num, v, m);
		num[m] = '\0';
		char *end;
		unsigned long long u = strtoull(num, &end, 10);
		if (end != num && *end == '\0' && u > 0)
			ns->wd_usec = u;
	} else if (IS("MAINPID=")) {
		log_event("replica %u's MAINPID= dropped: the main pid is diehard's", r->id);
	} else if (IS("BARRIER=1") || IS("FDSTORE=") || IS("FDNAME=")) {
		/* Their fds are closed by the caller, which is the barrier's answer. */
	} else if (len > 0) {
		log_event("replica %u: notify message '%.*s' not passed on", r->id, (int)(len < 64 ? len : 64), line);
	}
#undef IS
}

/* Reads and handles the messages waiting on ns's socket (at most 64). */
static void slot_read(struct notify *n, struct nslot *ns)
{
	int fd = ns->fd;
	for (int rounds = 0; rounds < 64 && ns->fd == fd; rounds++) {
		char buf[MSG_MAX];
		union {
			struct cmsghdr h;
			char b[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(sizeof(int)) + CMSG_SPACE(FDS_MAX * sizeof(int))];
		} ctl;
		struct iovec iov = { buf, sizeof buf };
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b,
				      .msg_controllen = sizeof ctl.b };
		ssize_t got = recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC | MSG_TRUNC);
		if (got < 0) {
			if (errno != EAGAIN && errno != EINTR)
				log_warn("reading a replica's notify socket: %s", strerror(errno));
			break;
		}
		pid_t sender = 0;
		int fds[FDS_MAX], pidfd = -1;
		size_t nfds = 0;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
			if (c->cmsg_level != SOL_SOCKET)
				continue;
			if (c->cmsg_type == SCM_CREDENTIALS && c->cmsg_len >= CMSG_LEN(sizeof(struct ucred))) {
				struct ucred cred;
				memcpy(&cred, CMSG_DATA(c), sizeof cred);
				sender = cred.pid;
			} else if (c->cmsg_type == PEER_SCM_PIDFD && c->cmsg_len >= CMSG_LEN(sizeof(int)) && pidfd == -1) {
				/* A negative one is the kernel's errno: no pidfd
				 * could be made (its sender is gone). */
				memcpy(&pidfd, CMSG_DATA(c), sizeof pidfd);
				if (pidfd < 0)
					pidfd = -2;
			} else if (c->cmsg_type == SCM_RIGHTS) {
				size_t m = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
				for (size_t i = 0; i < m && nfds < FDS_MAX; i++)
					memcpy(&fds[nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			}
		}
		const struct replica *r = &n->S->r[ns->index];
		char why[128];
		if (!n->no_pidfd && pidfd == -1)
			pidfd = -2; /* asked for, not given: no pidfd could be made */
		if (!ns->running || !(r->live || r->joining)) {
			/* Left the vote: its words no longer count. */
		} else if (!sender_ok(n, ns, pidfd, sender, why, sizeof why)) {
			dropped(n, r, sender, why, false);
		} else {
			size_t len = (size_t)got < sizeof buf ? (size_t)got : sizeof buf;
			size_t at = 0;
			while (at < len && ns->fd == fd) {
				const char *nl = memchr(buf + at, '\n', len - at);
				size_t end = nl != NULL ? (size_t)(nl - buf) : len;
				handle(n, ns, buf + at, end - at);
				at = end + 1;
			}
		}
		/* Every message handled before it: a BARRIER=1's fd closes now. */
		for (size_t i = 0; i < nfds; i++)
			close(fds[i]);
		if (pidfd >= 0)
			close(pidfd);
	}
}

static void on_message(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct nslot *ns = arg;
	slot_read(ns->n, ns);
	notify_tick(ns->n);
}

/* The text a quorum of live replicas agree on, or NULL. */
static const char *agreed_status(struct notify *n, unsigned quorum)
{
	struct sup *S = n->S;
	for (unsigned i = 0; i < S->nslots; i++) {
		const struct nslot *a = &n->slot[i];
		if (!S->r[i].live || !a->has_status)
			continue;
		unsigned same = 0;
		for (unsigned j = 0; j < S->nslots; j++)
			same += S->r[j].live && n->slot[j].has_status && strcmp(n->slot[j].status, a->status) == 0;
		if (same >= quorum)
			return a->status;
	}
	return NULL;
}

static unsigned count_state(struct notify *n, enum nstate st)
{
	unsigned c = 0;
	for (unsigned i = 0; i < n->S->nslots; i++)
		c += n->S->r[i].live && n->slot[i].state == st;
	return c;
}

/* Live replicas that said RELOADING=1 since the last READY=1 diehard told
 * (and, with ready, are ready again). */
static unsigned count_reloaded(struct notify *n, bool ready)
{
	unsigned c = 0;
	for (unsigned i = 0; i < n->S->nslots; i++)
		c += n->S->r[i].live && n->slot[i].reload_seen &&
		     (!ready || n->slot[i].state == N_READY);
	return c;
}

/* Healthy: live and pinged within its interval (or without a watchdog). */
static unsigned count_healthy(struct notify *n, double t)
{
	unsigned c = 0;
	for (unsigned i = 0; i < n->S->nslots; i++) {
		const struct nslot *ns = &n->slot[i];
		c += n->S->r[i].live && !n->S->r[i].exited &&
		     (ns->wd_usec == 0 || t - ns->wd_last <= (double)ns->wd_usec / 1e6);
	}
	return c;
}

static void on_ping(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct notify *n = arg;
	struct sup *S = n->S;
	unsigned healthy = count_healthy(n, sup_now()), quorum = sup_quorum(S);
	/* Degraded with no way back (no replica can be replaced any more):
	 * the manager's restart brings k replicas again. */
	char why[160];
	bool joining = false;
	for (unsigned i = 0; i < S->nslots; i++)
		joining |= S->r[i].joining;
	bool stuck = sup_state(S) != SUP_VOTING && !joining && !replace_replayable(S, why, sizeof why);
	if (healthy >= quorum && healthy > 0 && !stuck)
		sdnotify_send("WATCHDOG=1");
	else if (stuck)
		log_event("watchdog: %u of %u replicas vote and none can be replaced (%s): not pinging the manager",
			  sup_live_count(S), S->k, why);
	else
		log_event("watchdog: %u replicas healthy, a quorum is %u: not pinging the manager", healthy, quorum);
}

void notify_tick(struct notify *n)
{
	struct sup *S = n->S;
	double t = sup_now();
	for (unsigned i = 0; i < S->nslots; i++) {
		struct nslot *ns = &n->slot[i];
		struct replica *r = &S->r[i];
		if (!ns->running || ns->wd_usec == 0 || r->exited || !(r->live || r->joining))
			continue;
		double limit = (double)ns->wd_usec / 1e6;
		if (t - ns->wd_last > limit) {
			char why[128];
			snprintf(why, sizeof why, "watchdog: no WATCHDOG=1 for more than %.3f s", limit);
			replica_kill(S, r, why);
		}
	}
	if (n->e->notify && !S->stopping)
		tell(n);
}

/* Tells the manager what changed: readiness, reload, status. */
static void tell(struct notify *n)
{
	struct sup *S = n->S;
	unsigned quorum = sup_quorum(S);
	char text[sizeof n->told_status + 64];
	size_t o = 0;
	if (!n->told_ready && count_state(n, N_READY) >= quorum) {
		o += (size_t)snprintf(text + o, sizeof text - o, "READY=1\nMAINPID=%d\n", (int)getpid());
		n->told_ready = true;
		log_event("ready: a majority of the replicas said READY=1");
	} else if (n->told_ready && !n->reloading && count_reloaded(n, false) >= quorum) {
		/* A datagram of its own: systemd reads the keys of one message
		 * in its own order, READY=1 before RELOADING=1. */
		sdnotify_send("RELOADING=1");
		n->reloading = true;
		log_event("reloading: a majority of the replicas said RELOADING=1");
	}
	if (n->reloading && count_reloaded(n, true) >= quorum) {
		/* Each replica's reload is an edge, not a state: one that is
		 * ready again before the others began still counts. */
		o += (size_t)snprintf(text + o, sizeof text - o, "READY=1\n");
		n->reloading = false;
		for (unsigned i = 0; i < S->nslots; i++)
			n->slot[i].reload_seen = false;
		log_event("ready again: a majority of the replicas said READY=1 after reloading");
	}
	char status[sizeof n->told_status];
	const char *agreed = agreed_status(n, quorum);
	/* Divergences as the report (and diehard status) count them: of the
	 * output and of the exit status. */
	unsigned divergences = report_divergence_count(S->report, false) + report_divergence_count(S->report, true);
	enum sup_state vs = sup_state(S);
	snprintf(status, sizeof status, "%u/%u replicas live%s, %u replaced, %u divergences%s%s", sup_voter_count(S),
		 S->k, vs == SUP_DEGRADED ? " (degraded)" : vs == SUP_REFUSING ? " (refusing: fewer than --min-voters)" : "",
		 S->respawns, divergences, agreed ? "; " : "", agreed ? agreed : "");
	if (strcmp(status, n->told_status) != 0) {
		memcpy(n->told_status, status, sizeof status);
		o += (size_t)snprintf(text + o, sizeof text - o, "STATUS=%s\n", status);
	}
	if (o > 0)
		sdnotify_send(text);
}

void notify_stopping(struct notify *n)
{
	if (n->told_stopping || !n->e->notify)
		return;
	n->told_stopping = true;
	sdnotify_send("STOPPING=1");
}

void notify_finish(struct notify *n)
{
	/* A majority that said READY=1 and ended before a tick told it
	 * (exits are read at once) was ready all the same. */
	if (n->e->notify)
		tell(n);
	if (n->e->notify && !n->told_ready)
		log_warn("the service manager was never told READY=1: %u of the %u live replicas said it, a majority "
			 "was needed", count_state(n, N_READY), sup_live_count(n->S));
	notify_stopping(n);
	dropped(n, NULL, 0, NULL, true);
	for (unsigned i = 0; i < n->S->nslots; i++)
		slot_close(&n->slot[i]);
	dir_remove();
	if (n->ping_ev != NULL)
		event_free(n->ping_ev);
	n->ping_ev = NULL;
}
