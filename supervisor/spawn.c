/* spawn.c — see spawn.h. Everything between fork (or clone) and exec runs
 * in a copy of diehard that may share its locks' state: system calls and
 * plain memory only, nothing that allocates or takes a lock. */
#include "spawn.h"
#include "fastclock.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "caps.h"
#include "exitcode.h"
#include "clockfs.h"
#include "filter.h"
#include "log.h"
#include "peer.h"
#include "sandbox.h"
#include "view.h"

extern char **environ;

/* What execve would say about path: 0 if it can run it. */
static int check_executable(const char *path)
{
	struct stat st;
	if (stat(path, &st) != 0)
		return errno;
	if (S_ISDIR(st.st_mode))
		return EACCES;
	if (access(path, X_OK) != 0)
		return errno;
	return 0;
}

int spawn_resolve(const char *cmd, char **path)
{
	int err = ENOENT;
	if (cmd[0] == '\0')
		goto fail;
	if (strchr(cmd, '/') != NULL) {
		err = check_executable(cmd);
		if (err == 0 && (*path = strdup(cmd)) != NULL)
			return 0;
		goto fail;
	}
	/* execvp: search PATH (default as glibc's), remember EACCES if nothing
	 * runnable is found. */
	const char *search = getenv("PATH");
	if (search == NULL)
		search = "/bin:/usr/bin";
	bool saw_eacces = false;
	for (const char *p = search;; p++) {
		const char *end = strchrnul(p, ':');
		const char *dir = end == p ? "." : p;
		int dlen = end == p ? 1 : (int)(end - p);
		char *candidate;
		if (asprintf(&candidate, "%.*s/%s", dlen, dir, cmd) < 0)
			fatal(EXIT_INTERNAL, "out of memory");
		int e = check_executable(candidate);
		if (e == 0) {
			*path = candidate;
			return 0;
		}
		free(candidate);
		saw_eacces |= e == EACCES;
		if (*end == '\0')
			break;
		p = end;
	}
	err = saw_eacces ? EACCES : ENOENT;
fail:
	log_warn("%s: %s", cmd, strerror(err));
	return err == ENOENT || err == ENOTDIR ? EXIT_NOT_FOUND : EXIT_CANNOT_EXEC;
}

static char *format_var(const char *name, const char *value)
{
	char *s;
	if (asprintf(&s, "%s=%s", name, value) < 0)
		fatal(EXIT_INTERNAL, "out of memory");
	return s;
}

/* Variables of ours the parent environment may hold (a nested diehard, a
 * user's experiment): each replica gets its own instead. */
static bool ours(const char *e)
{
	static const char *const names[] = { "DIEHARD_SEED=", "DIEHARD_FILL=", "DIEHARD_PIDKEY=", "DIEHARD_TRACE=",
					     "DIEHARD_TRACE_AT=", "DIEHARD_FLIP=", "DIEHARD_FENCE_LOG=", "DIEHARD_CLOCKS=", "DIEHARD_VIEWDEVS=" };
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (strncmp(e, names[i], strlen(names[i])) == 0)
			return true;
	return false;
}

char **spawn_environment(const char *allocator, const uint64_t seed[2], const char *fill, char *const *extra)
{
	size_t n = 0, nextra = 0;
	while (environ[n] != NULL)
		n++;
	while (extra != NULL && extra[nextra] != NULL)
		nextra++;
	char **envp = calloc(n + nextra + 4, sizeof *envp);
	if (envp == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	size_t out = 0;
	const char *preload = NULL;
	for (size_t i = 0; i < n; i++) {
		if (strncmp(environ[i], "LD_PRELOAD=", 11) == 0) {
			preload = environ[i] + 11;
			continue;
		}
		if (ours(environ[i]))
			continue;
		if ((envp[out++] = strdup(environ[i])) == NULL)
			fatal(EXIT_INTERNAL, "out of memory");
	}
	char seedhex[33];
	snprintf(seedhex, sizeof seedhex, "%016" PRIx64 "%016" PRIx64, seed[1], seed[0]);
	envp[out++] = format_var("DIEHARD_SEED", seedhex);
	envp[out++] = format_var("DIEHARD_FILL", fill);
	for (size_t i = 0; i < nextra; i++)
		if ((envp[out++] = strdup(extra[i])) == NULL)
			fatal(EXIT_INTERNAL, "out of memory");
	if (preload != NULL && preload[0] != '\0') {
		char *both;
		if (asprintf(&both, "LD_PRELOAD=%s:%s", allocator, preload) < 0)
			fatal(EXIT_INTERNAL, "out of memory");
		envp[out++] = both;
	} else {
		envp[out++] = format_var("LD_PRELOAD", allocator);
	}
	envp[out] = NULL;
	return envp;
}

void spawn_environment_free(char **envp)
{
	for (char **e = envp; *e != NULL; e++)
		free(*e);
	free(envp);
}

/* The child's messages on its report socket (SOCK_SEQPACKET, close-on-exec:
 * a successful exec closes it, which the parent reads as end of file). */
struct child_msg {
	char tag;  /* 'L' listener (fd attached), 'F' filter refused, 'E' exec failed,
		      'N' namespaces refused, 'U' the program's user namespace
		      refused (root's), 'T' its network namespace refused,
		      'P' the init is up (nothing to do), 'C' the sandboxed
		      program's credentials (its pid), 'G' its caps could not
		      be entered (caps.h), 'V' the file views are made (the
		      staging tmpfs's fd attached: files/view.h), 'W' they
		      could not be; to the init, on the gate: 'R' the program's namespaces are made (its network
		      namespace's fd attached) */
	int err;
};

static bool child_send(int sock, char tag, int err, int fd)
{
	struct child_msg m = { tag, err };
	struct iovec iov = { &m, sizeof m };
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	memset(&ctl, 0, sizeof ctl);
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	if (fd >= 0) {
		msg.msg_control = ctl.buf;
		msg.msg_controllen = sizeof ctl.buf;
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof fd);
	}
	return sendmsg(sock, &msg, MSG_NOSIGNAL) == (ssize_t)sizeof m;
}

/* fds become 0, 1 and 2 (all of them at least 3: diehard reserved 0-2).
 * 0, or an errno. */
static int take_stdio(const int fds[3])
{
	for (int i = 0; i < 3; i++)
		if (dup2(fds[i], i) != i)
			return errno;
	return 0;
}

/* Socket activation: fds 3 .. 3 + n - 1 are diehard's close-on-exec
 * copies of what the manager passed; the program gets them as they are.
 * 0, or an errno. */
static int keep_passed(unsigned n)
{
	for (unsigned fd = 3; fd < 3 + n; fd++) {
		int fl = fcntl((int)fd, F_GETFD);
		if (fl < 0 || fcntl((int)fd, F_SETFD, fl & ~FD_CLOEXEC) != 0)
			return errno;
	}
	return 0;
}

/* Writes the decimal pid over a ten-digit placeholder (no allocation: we
 * are between fork and exec). */
static void own_pid_vars(char **envp)
{
	static const char *const names[] = { "LISTEN_PID=", "WATCHDOG_PID=" };
	pid_t pid = getpid();
	for (char **e = envp; *e != NULL; e++)
		for (size_t i = 0; i < 2; i++) {
			size_t len = strlen(names[i]);
			if (strncmp(*e, names[i], len) != 0 || strlen(*e + len) < 10)
				continue;
			char digits[12];
			int nd = 0;
			unsigned long v = (unsigned long)pid;
			do
				digits[nd++] = (char)('0' + v % 10);
			while ((v /= 10) != 0);
			char *p = *e + len;
			while (nd > 0)
				*p++ = digits[--nd];
			*p = '\0';
		}
}

static void close_all_but(const int *keep, int n, unsigned npass);

/* Makes fd the descriptor at `at`, kept across exec: true if done. */
static bool put_at(int fd, int at)
{
	if (fd != at)
		return dup2(fd, at) == at;
	int fl = fcntl(fd, F_GETFD);
	return fl >= 0 && fcntl(fd, F_SETFD, fl & ~FD_CLOEXEC) == 0;
}

/* The fast clock path's page of the slot and the pages' directory
 * (fastclock.h) at FASTCLOCK_FD and FASTCLOCK_DIR_FD, kept across exec:
 * placed[0] and placed[1], both -1 when there are none or they cannot be
 * placed (the replica then reads clocks the notify way): also when one of
 * the n fds in busy, ours to keep, is one of those numbers (a diehard with
 * thousands of connections). */
static void place_clock_fds(int own, int dir, const int *busy, int n, int placed[2])
{
	placed[0] = placed[1] = -1;
	if (own < 0 || dir < 0)
		return;
	for (int i = 0; i < n; i++)
		if (busy[i] == FASTCLOCK_FD || busy[i] == FASTCLOCK_DIR_FD)
			return;
	/* The directory out of the page's way first. */
	if (dir == FASTCLOCK_FD && (dir = fcntl(dir, F_DUPFD_CLOEXEC, FASTCLOCK_DIR_FD + 1)) < 0)
		return;
	if (!put_at(own, FASTCLOCK_FD))
		return;
	if (!put_at(dir, FASTCLOCK_DIR_FD)) {
		(void)close(FASTCLOCK_FD);
		return;
	}
	placed[0] = FASTCLOCK_FD;
	placed[1] = FASTCLOCK_DIR_FD;
}

/* Before the program's exec, with the clock descriptors placed: nothing
 * it does may change a page's size (clockfs.h). Without a capability over
 * its user namespace the kernel wants no_new_privs first (unsandboxed and
 * unprivileged, as the seccomp filter does). Should it fail, the
 * descriptors go and the replica reads clocks the notify way. */
static void confine_clocks(int placed[2])
{
	if (placed[0] < 0)
		return;
	int err = clockfs_confine();
	if (err == EPERM && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0)
		err = clockfs_confine();
	if (err != 0) {
		(void)close(placed[0]);
		(void)close(placed[1]);
		placed[0] = placed[1] = -1;
	}
}

/* Waits until the sandbox's init closes its end of the gate (a pipe; -1:
 * none): it has exec'd diehard-init and made itself undumpable, so the
 * program, once running, cannot open the init's /proc/1/mem in between. */
static void wait_gate(int gate)
{
	char c;
	ssize_t n;
	if (gate < 0)
		return;
	do
		n = read(gate, &c, 1);
	while (n > 0 || (n < 0 && errno == EINTR));
	close(gate);
}

static int private_listeners(unsigned npass);
static char parent_receive(int sock, int *err, int *fd, pid_t *sender, int *sender_fd);

/* A session of its own, without a controlling terminal: /dev/tty does not
 * open, nothing it does (TIOCSTI, a read that would stop it, setsid games)
 * reaches the terminal diehard was started from, and its process group
 * (its pid: a session's leader leads a group too) is not in the session of
 * diehard's, whose groups it cannot join (setpgid). A terminal's ^C
 * reaches diehard alone, which forwards it, so every replica gets each
 * signal exactly once. First thing, so that the moment it shares
 * diehard's group is short (diehard's own setpgid of it would make this
 * fail: it does none). 0, or an errno. */
static int own_session(void)
{
	return setsid() < 0 ? errno : 0;
}

/* The sandboxed program, before anything else: its own namespaces
 * (sandbox_program_enter; with a network of its own, the passed listening
 * sockets remade in it), then the word to its init on the gate, with the
 * network namespace's fd for the init to join. A refusal is told to
 * diehard ('U' or 'T', so that it retries without that namespace alone)
 * and ends us; the init, whose gate then ends, goes too. */
static void program_namespaces(const struct spawn_request *r, int sock, int gate)
{
	unsigned long step;
	int net_fd;
	int err = sandbox_program_enter(r->ns_flags, &step, &net_fd);
	if (err == 0 && (r->ns_flags & CLONE_NEWNET))
		err = private_listeners(r->npass);
	if (err != 0) {
		child_send(sock, step == CLONE_NEWUSER ? 'U' : 'T', err, -1);
		_exit(EXIT_INTERNAL);
	}
	/* Undelivered, the init is gone: diehard sees it end. */
	if (!child_send(gate, 'R', 0, net_fd))
		_exit(EXIT_INTERNAL);
	if (net_fd >= 0)
		close(net_fd);
}

/* In the child: never returns. Reports the listener and any failure through
 * sock. gate: see wait_gate; sandboxed (gate >= 0), the program makes its
 * own namespaces first (program_namespaces). */
static _Noreturn void child(const struct spawn_request *r, char *const *sh_argv, pid_t parent, int sock, int gate)
{
	int err;
	/* Under its caps before anything else (sandboxed, the init was). */
	if (r->caps != NULL && (err = caps_enter(r->caps, false, false)) != 0) {
		child_send(sock, 'G', err, -1);
		_exit(EXIT_INTERNAL);
	}
	/* Die with the supervisor: otherwise a replica outlives it, and its
	 * virtualized system calls would fail forever. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) {
		err = errno ? errno : ESRCH;
		goto fail;
	}
	if ((err = own_session()) != 0)
		goto fail;
	if (gate >= 0)
		program_namespaces(r, sock, gate);
	if ((err = take_stdio(r->fds)) != 0)
		goto fail;
	/* Only fds 0-2 and the passed sockets are inherited (sock is
	 * close-on-exec). */
	if ((err = keep_passed(r->npass)) != 0)
		goto fail;
	int busy[] = { sock, gate }, placed[2];
	place_clock_fds(r->clock_fd, r->clock_dir, busy, 2, placed);
	int keep[] = { sock, gate, placed[0], placed[1] };
	close_all_but(keep, 4, r->npass);
	confine_clocks(placed);
	/* The supervisor ignores SIGPIPE for itself; the program gets what
	 * diehard was started with. */
	if (!r->pipe_ignored)
		signal(SIGPIPE, SIG_DFL);
	/* Our handlers (the loop's) must not run here, where they would tell
	 * the supervisor of a signal it never got: back to the default before
	 * signals are let in (exec would reset them anyway). */
	for (int sig = 1; sig < NSIG; sig++) {
		struct sigaction sa;
		if (sigaction(sig, NULL, &sa) == 0 && sa.sa_handler != SIG_IGN && sa.sa_handler != SIG_DFL)
			signal(sig, SIG_DFL);
	}
	/* The supervisor raised its own fd limit (logcalls.c holds a pipe per open
	 * random device); the program gets the one diehard was started with. */
	if (r->nofile != NULL && setrlimit(RLIMIT_NOFILE, r->nofile) != 0) {
		err = errno;
		goto fail;
	}
	sigset_t none;
	sigemptyset(&none);
	if (sigprocmask(SIG_SETMASK, &none, NULL) != 0) {
		err = errno;
		goto fail;
	}
	/* Sandboxed: our pid, as diehard sees it, for it to kill us itself
	 * (a kill through the init would come late). */
	if (r->ns_flags != 0 && !child_send(sock, 'C', 0, -1)) {
		err = errno;
		goto fail;
	}
	/* Last, so nothing above is notified; the listener reaches the
	 * supervisor before exec, so before any notified call. */
	if (r->filter != NULL) {
		int listener = filter_install(r->filter, r->listener);
		if (listener < 0) {
			child_send(sock, 'F', errno, -1);
			_exit(EXIT_INTERNAL);
		}
		if (r->listener) {
			child_send(sock, 'L', 0, listener);
			close(listener);
		}
	}
	if (r->stop_before_exec) {
		/* Yama: gdb is no ancestor of ours. Then the word that we are
		 * set up (spawn_finish stops waiting for exec's EOF). */
		(void)prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
		if (!child_send(sock, 'S', 0, -1) || raise(SIGSTOP) != 0) {
			err = errno;
			goto fail;
		}
	}
	wait_gate(gate);
	own_pid_vars(r->envp);
	if (r->views != NULL)
		view_fill_env(r->envp);
	/* With the marker: the replica's environment preloads libdiehard
	 * (exec.c's check, which this process does not run). */
	syscall(SYS_execve, r->path, r->argv, r->envp, r->exec_mark);
	err = errno;
	/* As execvp: a file the kernel cannot run (a script without #!) is
	 * run by the shell. */
	if (err == ENOEXEC && sh_argv != NULL) {
		syscall(SYS_execve, sh_argv[0], sh_argv, r->envp, r->exec_mark);
		err = errno;
	}
fail:
	child_send(sock, 'E', err, -1);
	_exit(err == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_EXEC);
}

/* Closes every fd from 3 + npass on but the n in keep (all above the
 * passed sockets: they were made after diehard took those; -1s are
 * skipped). */
static void close_all_but(const int *keep, int n, unsigned npass)
{
	int sorted[6], m = 0;
	for (int i = 0; i < n && m < 6; i++) {
		if (keep[i] < 0)
			continue;
		int j = m++;
		for (; j > 0 && sorted[j - 1] > keep[i]; j--)
			sorted[j] = sorted[j - 1];
		sorted[j] = keep[i];
	}
	unsigned from = 3 + npass;
	for (int i = 0; i < m; i++) {
		unsigned fd = (unsigned)sorted[i];
		if (fd > from)
			(void)close_range(from, fd - 1, 0);
		if (fd + 1 > from)
			from = fd + 1;
	}
	(void)close_range(from, ~0U, 0);
}

/* fd, passed on (socket activation), is a TCP socket listening in
 * diehard's network: the program's clients would never come to it from
 * its own (they come through diehard's proxy, net.h, which keeps that
 * one). In its place, at the same fd, a socket listening on the same
 * address in the replica's network: same family, IPV6_V6ONLY and file
 * status flags, SO_REUSEADDR as systemd sets it. An address of one of the
 * host's interfaces is not in there (only the loopback is): it is bound
 * all the same (IP_FREEBIND), so that the program listens where it was
 * told. Anything else passed (unix sockets, FIFOs, UDP) stays. 0, or an
 * errno. */
static int private_listener(int fd)
{
	int listening = 0, domain = 0, type = 0, protocol = 0;
	socklen_t len = sizeof listening;
	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0)
		return errno == ENOTSOCK ? 0 : errno;
	len = sizeof domain;
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0)
		return errno;
	len = sizeof type;
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0)
		return errno;
	len = sizeof protocol;
	if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &protocol, &len) != 0)
		return errno;
	if (!listening || (domain != AF_INET && domain != AF_INET6) || type != SOCK_STREAM || protocol != IPPROTO_TCP)
		return 0;
	struct sockaddr_storage addr;
	socklen_t alen = sizeof addr;
	int v6only = 0, fl = fcntl(fd, F_GETFL);
	len = sizeof v6only;
	if (fl < 0 || getsockname(fd, (struct sockaddr *)&addr, &alen) != 0 ||
	    (domain == AF_INET6 && getsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, &len) != 0))
		return errno;
	int s = socket(domain, SOCK_STREAM | SOCK_CLOEXEC | (fl & O_NONBLOCK ? SOCK_NONBLOCK : 0), IPPROTO_TCP);
	if (s < 0)
		return errno;
	int on = 1, err = 0;
	if (setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0 ||
	    (domain == AF_INET6 && setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof v6only) != 0)) {
		err = errno;
	} else if (bind(s, (struct sockaddr *)&addr, alen) != 0) {
		err = errno;
		if (err == EADDRNOTAVAIL &&
		    (domain == AF_INET ? setsockopt(s, IPPROTO_IP, IP_FREEBIND, &on, sizeof on)
				       : setsockopt(s, IPPROTO_IPV6, IPV6_FREEBIND, &on, sizeof on)) == 0 &&
		    bind(s, (struct sockaddr *)&addr, alen) == 0)
			err = 0;
	}
	if (err == 0 && listen(s, 4096) != 0)
		err = errno;
	if (err == 0 && dup2(s, fd) != fd)
		err = errno;
	close(s);
	return err;
}

/* private_listener for each fd passed on. 0, or an errno. */
static int private_listeners(unsigned npass)
{
	for (unsigned i = 0; i < npass; i++) {
		int err = private_listener(3 + (int)i);
		if (err != 0)
			return err;
	}
	return 0;
}

/* The sandboxed child, pid 1 of its namespaces: sets them up, forks the
 * program (child() above, as pid 2) and becomes its init. All signals
 * are blocked on entry. net_fd: its end of the socket channel, or -1. */
static _Noreturn void init_child(const struct spawn_request *r, char *const *sh_argv, int sock, int status_fd,
				 int net_fd, unsigned long init_flags, uid_t uid, gid_t gid)
{
	int err;
	/* Under its caps before anything else: the program and all it starts
	 * inherit them. */
	if (r->caps != NULL && (err = caps_enter(r->caps, true, (init_flags & CLONE_NEWUSER) != 0)) != 0) {
		child_send(sock, 'G', err, -1);
		_exit(EXIT_INTERNAL);
	}
	char refused = 'N';
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) {
		err = errno;
		goto fail;
	}
	/* Our parent cannot be named from here: a message it will never read
	 * (it died before the line above) fails, and we go. */
	if (!child_send(sock, 'P', 0, -1))
		_exit(EXIT_INTERNAL);
	if ((err = own_session()) != 0 || (err = sandbox_enter(init_flags, uid, gid)) != 0)
		goto fail;
	/* The file views (as root, a new root), then the private /dev on
	 * top of whichever tree is ours, then the kernel's knobs read-only. */
	if (r->views != NULL) {
		int staging;
		const char *step;
		if ((err = view_enter(r->views, &staging, &step)) != 0) {
			refused = 'W';
			goto fail;
		}
		bool sent = child_send(sock, 'V', 0, staging);
		close(staging);
		if (!sent)
			_exit(EXIT_INTERNAL);
	}
	/* The namespace's last pid, for diehard to align a fresh server's
	 * with its siblings' (factory.h): opened before /proc/sys turns
	 * read-only. Best effort: -1 leaves pids as they come. */
	int last_pid = net_fd >= 0 ? open("/proc/sys/kernel/ns_last_pid", O_RDWR | O_CLOEXEC) : -1;
	if ((err = sandbox_enter_dev(init_flags)) != 0 ||
	    (sandbox_program_user(r->ns_flags) && (err = sandbox_guard_kernel()) != 0))
		goto fail;
	/* The program's 0-2 pass through us; nothing else of diehard's does. */
	if ((err = take_stdio(r->fds)) != 0)
		goto fail;
	int keep[] = { sock, status_fd, net_fd, last_pid, -1, -1 };
	place_clock_fds(r->clock_fd, r->clock_dir, keep, 4, &keep[4]);
	close_all_but(keep, 6, r->npass);
	/* Our handlers (the loop's) are diehard's; the program inherits the
	 * dispositions (child() resets them too). SIGCHLD must not be
	 * ignored here, or its children would never reach waitpid. */
	for (int sig = 1; sig < NSIG; sig++) {
		struct sigaction sa;
		if (sigaction(sig, NULL, &sa) == 0 && sa.sa_handler != SIG_IGN && sa.sa_handler != SIG_DFL)
			signal(sig, SIG_DFL);
	}
	signal(SIGCHLD, SIG_DFL);
	struct spawn_request prog = *r;
	prog.fds[0] = 0, prog.fds[1] = 1, prog.fds[2] = 2;
	prog.caps = NULL;
	prog.clock_fd = keep[4];
	prog.clock_dir = keep[5];
	/* The gate: the program's word that its namespaces are made comes
	 * on it, then our end's close lets it exec (wait_gate). */
	int gate[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, gate) != 0) {
		err = errno;
		goto fail;
	}
	pid_t pid = fork();
	if (pid == 0) {
		close(status_fd);
		if (net_fd >= 0)
			close(net_fd);
		if (last_pid >= 0)
			close(last_pid);
		close(gate[1]);
		child(&prog, sh_argv, 1, sock, gate[0]);
	}
	if (pid < 0) {
		err = errno;
		goto fail;
	}
	close(gate[0]);
	/* Its namespaces made (a refusal it told diehard itself: we go), its
	 * user namespace mapped, its network joined: diehard's sockets
	 * (factory.h) are made in there. */
	int word = 0, prog_net = -1, no_pidfd = -1; /* the gate passes no pidfds */
	pid_t ignored;
	if (parent_receive(gate[1], &word, &prog_net, &ignored, &no_pidfd) != 'R')
		_exit(EXIT_INTERNAL);
	if (sandbox_program_user(r->ns_flags) && (err = sandbox_map_program(pid)) != 0) {
		refused = 'U';
		goto fail;
	}
	if (prog_net >= 0) {
		if (setns(prog_net, CLONE_NEWNET) != 0) {
			err = errno;
			refused = 'T';
			goto fail;
		}
		close(prog_net);
	}
	/* The program's pipes are its own: diehard sees their end when the
	 * program (and what it started) closes them, not when we do; and the
	 * passed sockets are its alone. */
	close(sock);
	for (int i = 0; i < 3; i++)
		close(i);
	for (int i = 4; i < 6; i++)
		if (keep[i] >= 0)
			close(keep[i]);
	if (r->npass > 0)
		(void)close_range(3, 3 + r->npass - 1, 0);
	sandbox_init_exec(r->init_path, pid, status_fd, net_fd, gate[1], last_pid);
fail:
	child_send(sock, refused, err, -1);
	_exit(EXIT_INTERNAL);
}

/* One message from the child: its tag, or 0 at end of file (the exec
 * worked); an attached fd goes to *fd; sandboxed, the sender's pid and, where
 * the kernel passes one, its pidfd (*sender_fd, the caller's to close). */
static char parent_receive(int sock, int *err, int *fd, pid_t *sender, int *sender_fd)
{
	struct child_msg m = { 0, 0 };
	struct iovec iov = { &m, sizeof m };
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int)) + CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(sizeof(int))];
	} ctl;
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
			      .msg_controllen = sizeof ctl.buf };
	ssize_t n;
	do
		n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		return 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			memcpy(fd, CMSG_DATA(c), sizeof *fd);
		} else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
			/* The kernel's word, in our pid namespace (SO_PASSCRED). */
			struct ucred cred;
			memcpy(&cred, CMSG_DATA(c), sizeof cred);
			*sender = cred.pid;
		} else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == PEER_SCM_PIDFD) {
			/* SO_PASSPIDFD: the sender, pinned (services/peer.h). */
			int pfd;
			memcpy(&pfd, CMSG_DATA(c), sizeof pfd);
			if (pfd >= 0 && *sender_fd < 0)
				*sender_fd = pfd;
			else if (pfd >= 0)
				close(pfd);
		}
	*err = m.err;
	return m.tag;
}

/* clone(2) as fork: no new stack, the child returns here. glibc's fork
 * cannot make namespaces, and its clone() wants a stack; the child only
 * makes system calls before it execs (or, the init, forever). */
static pid_t clone_fork(unsigned long flags)
{
	return (pid_t)syscall(SYS_clone, flags | SIGCHLD, NULL, NULL, NULL, 0);
}

/* Closes the fds of p that are open (-1: not). */
static void close_pair(int p[2])
{
	for (int i = 0; i < 2; i++)
		if (p[i] >= 0)
			close(p[i]);
	p[0] = p[1] = -1;
}

pid_t spawn_start(const struct spawn_request *r, struct spawn_pending *sp, struct spawn_result *res)
{
	*res = (struct spawn_result){ .listener = -1, .status_fd = -1, .net_fd = -1, .program_pidfd = -1,
				      .views_fd = -1 };
	*sp = (struct spawn_pending){ .pid = -1, .sock = -1, .status_fd = -1, .net_fd = -1 };
	int sock[2] = { -1, -1 }, status[2] = { -1, -1 }, net[2] = { -1, -1 };
	int on = 1;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sock) != 0 ||
	    /* Sandboxed, the program's pid in our namespace comes with its 'C'. */
	    (r->ns_flags != 0 && setsockopt(sock[0], SOL_SOCKET, SO_PASSCRED, &on, sizeof on) != 0) ||
	    (r->ns_flags != 0 && pipe2(status, O_CLOEXEC) != 0) ||
	    ((r->ns_flags & CLONE_NEWNET) && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, net) != 0)) {
		int saved = errno;
		close_pair(sock);
		close_pair(status);
		close_pair(net);
		errno = saved;
		return -1;
	}
	/* Sandboxed, and the kernel has it: the program's pidfd with its 'C'
	 * (notify.c knows its last words by it, even once it is reaped). */
	if (r->ns_flags != 0)
		(void)peer_pass_pidfd(sock[0]);
	/* /bin/sh PATH ARGS..., for a file execve refuses with ENOEXEC. */
	size_t argc = 0;
	while (r->argv[argc] != NULL)
		argc++;
	char **sh_argv = calloc(argc + 2, sizeof *sh_argv);
	if (sh_argv != NULL) {
		sh_argv[0] = (char *)"/bin/sh";
		sh_argv[1] = (char *)r->path;
		for (size_t i = 1; i < argc; i++)
			sh_argv[i + 1] = r->argv[i];
	}
	/* Signals stay blocked from fork until the child has put its handlers
	 * back to the defaults (child() unblocks them; the init never does). */
	sigset_t all, old;
	sigfillset(&all);
	pid_t pid = -1;
	uid_t uid = geteuid();
	gid_t gid = getegid();
	/* The network namespace is the program's to make, and as root its
	 * user namespace too (sandbox.h): the slowest to create, made in
	 * parallel so. */
	unsigned long init_flags = sandbox_init_flags(r->ns_flags);
	if (sigprocmask(SIG_BLOCK, &all, &old) == 0) {
		pid_t parent = getpid();
		/* A cgroup v2 to start in: cloned straight into it (caps.h). */
		if (r->caps != NULL && r->caps->cgroup_fd >= 0)
			pid = caps_clone(r->caps, init_flags);
		else
			pid = r->ns_flags != 0 ? clone_fork(init_flags) : fork();
		if (pid == 0) {
			close(sock[0]);
			if (r->ns_flags != 0) {
				close(status[0]);
				if (net[0] >= 0)
					close(net[0]);
				init_child(r, sh_argv, sock[1], status[1], net[1], init_flags, uid, gid);
			}
			child(r, sh_argv, parent, sock[1], -1);
		}
		int fork_errno = errno;
		if (sigprocmask(SIG_SETMASK, &old, NULL) != 0)
			fatal(EXIT_INTERNAL, "sigprocmask: %s", strerror(errno));
		errno = fork_errno;
	}
	int saved = errno;
	free(sh_argv);
	close(sock[1]);
	if (status[1] >= 0)
		close(status[1]);
	if (net[1] >= 0)
		close(net[1]);
	if (pid < 0) {
		close(sock[0]);
		if (status[0] >= 0)
			close(status[0]);
		if (net[0] >= 0)
			close(net[0]);
		/* The kernel refused the namespaces themselves, or the cgroup. */
		if (r->caps != NULL && r->caps->cgroup_fd >= 0 && caps_clone_refused(saved))
			res->caps_errno = saved;
		else if (r->ns_flags != 0)
			res->ns_errno = saved;
		errno = saved;
		return -1;
	}
	/* No setpgid of the child from here: it makes a session of its own
	 * (own_session), which a group leader cannot. Until it has, a signal
	 * for its group goes to it alone (replica_signal), which is all the
	 * group then holds. */
	*sp = (struct spawn_pending){ .pid = pid, .sock = sock[0], .status_fd = status[0], .net_fd = net[0],
				      .want_listener = r->filter != NULL && r->listener };
	return pid;
}

pid_t spawn_finish(struct spawn_pending *sp, struct spawn_result *res)
{
	int err = 0, failed = 0;
	char tag;
	pid_t sender = 0;
	int sender_fd = -1;
	while ((tag = parent_receive(sp->sock, &err, &res->listener, &sender, &sender_fd)) != 0) {
		/* Each message carries its sender's pidfd: the program's 'C'
		 * keeps its own, the others' are closed. */
		if (tag == 'C' && res->program_pidfd < 0) {
			res->program_pidfd = sender_fd;
			sender_fd = -1;
		}
		if (sender_fd >= 0)
			close(sender_fd);
		sender_fd = -1;
		if (tag == 'C')
			res->program_pid = sender;
		else if (tag == 'E')
			res->exec_errno = failed = err;
		else if (tag == 'N' || tag == 'U' || tag == 'T') {
			res->ns_errno = failed = err ? err : EPROTO;
			res->ns_refused = tag == 'U' ? CLONE_NEWUSER : tag == 'T' ? CLONE_NEWNET : 0;
		}
		else if (tag == 'G')
			res->caps_errno = failed = err ? err : EIO;
		else if (tag == 'W')
			res->views_errno = failed = err ? err : EIO;
		else if (tag == 'V' && res->views_fd < 0) {
			/* parent_receive put its fd where a listener goes. */
			res->views_fd = res->listener;
			res->listener = -1;
		}
		else if (tag == 'F')
			failed = err ? err : EINVAL;
		else if (tag == 'S')
			break; /* stopped before exec, for a debugger */
	}
	close(sp->sock);
	sp->sock = -1;
	pid_t pid = sp->pid;
	if (failed || (sp->want_listener && res->listener < 0)) {
		if (res->listener >= 0)
			close(res->listener);
		res->listener = -1;
		if (res->program_pidfd >= 0)
			close(res->program_pidfd);
		res->program_pidfd = -1;
		if (res->views_fd >= 0)
			close(res->views_fd);
		res->views_fd = -1;
		/* Without its listener the program may have exec'ed: its
		 * first notified call would wait for us forever. */
		(void)kill(pid, SIGKILL);
		(void)waitpid(pid, NULL, 0);
		if (sp->status_fd >= 0)
			close(sp->status_fd);
		sp->status_fd = -1;
		if (sp->net_fd >= 0)
			close(sp->net_fd);
		sp->net_fd = -1;
		errno = failed ? failed : EPROTO;
		return -1;
	}
	res->status_fd = sp->status_fd;
	sp->status_fd = -1;
	res->net_fd = sp->net_fd;
	sp->net_fd = -1;
	return pid;
}

pid_t spawn_replica(const struct spawn_request *r, struct spawn_result *res)
{
	struct spawn_pending sp;
	if (spawn_start(r, &sp, res) < 0)
		return -1;
	return spawn_finish(&sp, res);
}
