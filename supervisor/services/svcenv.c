/* svcenv.c — see svcenv.h. */
#include "svcenv.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exitcode.h"
#include "log.h"

static struct svcenv env;

const struct svcenv *svcenv_get(void)
{
	return &env;
}

/* A decimal number without sign or junk, up to max. */
static bool parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	if (s == NULL || *s < '0' || *s > '9')
		return false;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0' || v > max)
		return false;
	*out = v;
	return true;
}

/* Whether a variable naming a pid names us (unset: it does, as systemd
 * leaves WATCHDOG_PID unset for the main process). */
static bool for_us(const char *pidvar)
{
	uint64_t pid;
	return pidvar == NULL || (parse_u64(pidvar, INT32_MAX, &pid) && (pid_t)pid == getpid());
}

static void capture_notify(const char *v)
{
	if (v == NULL || v[0] == '\0')
		return;
	size_t n = strlen(v);
	if ((v[0] != '/' && v[0] != '@') || n >= sizeof env.addr.sun_path)
		fatal(EXIT_INTERNAL, "NOTIFY_SOCKET must be a socket path or @abstract name shorter than %zu bytes, "
				     "not '%.64s'", sizeof env.addr.sun_path, v);
	env.addr.sun_family = AF_UNIX;
	memcpy(env.addr.sun_path, v, n);
	if (v[0] == '@')
		env.addr.sun_path[0] = '\0'; /* abstract: the length says where it ends */
	env.addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (v[0] == '/'));
	env.notify = true;
}

static void capture_listen(const char *fds, const char *pid, const char *names)
{
	if (fds == NULL)
		return;
	uint64_t n;
	if (pid == NULL || !for_us(pid))
		return; /* sd_listen_fds(3): meant for another process */
	if (!parse_u64(fds, 4096, &n))
		fatal(EXIT_INTERNAL, "LISTEN_FDS must be a number of descriptors (0 to 4096), not '%.32s'", fds);
	for (unsigned fd = 3; fd < 3 + n; fd++) {
		struct stat st;
		if (fstat((int)fd, &st) != 0)
			fatal(EXIT_INTERNAL, "LISTEN_FDS=%" PRIu64 " but fd %u is not open: %s", n, fd, strerror(errno));
		/* Ours to hand on, never to leak into what we exec ourselves. */
		int fl = fcntl((int)fd, F_GETFD);
		if (fl < 0 || fcntl((int)fd, F_SETFD, fl | FD_CLOEXEC) != 0)
			fatal(EXIT_INTERNAL, "fcntl on the socket-activated fd %u: %s", fd, strerror(errno));
	}
	env.listen_fds = (unsigned)n;
	if (names != NULL && (env.listen_names = strdup(names)) == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
}

/* JOURNAL_STREAM=DEV:INO names the journal's end of our stderr. */
static void capture_journal(const char *v)
{
	unsigned long long dev, ino;
	struct stat st;
	char tail;
	if (v != NULL && sscanf(v, "%llu:%llu%c", &dev, &ino, &tail) == 2 && fstat(2, &st) == 0 &&
	    (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino)
		env.journal = true;
}

void svcenv_capture(void)
{
	capture_notify(getenv("NOTIFY_SOCKET"));
	uint64_t usec;
	const char *wd = getenv("WATCHDOG_USEC");
	if (wd != NULL && for_us(getenv("WATCHDOG_PID"))) {
		if (!parse_u64(wd, UINT64_MAX / 2, &usec) || usec == 0)
			fatal(EXIT_INTERNAL, "WATCHDOG_USEC must be a positive number of microseconds, not '%.32s'", wd);
		env.watchdog_usec = usec;
	}
	capture_listen(getenv("LISTEN_FDS"), getenv("LISTEN_PID"), getenv("LISTEN_FDNAMES"));
	capture_journal(getenv("JOURNAL_STREAM"));
	static const char *const ours[] = { "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID",
					    "LISTEN_FDS",    "LISTEN_PID",    "LISTEN_FDNAMES" };
	for (size_t i = 0; i < sizeof ours / sizeof ours[0]; i++)
		if (unsetenv(ours[i]) != 0)
			fatal(EXIT_INTERNAL, "unsetenv: %s", strerror(errno));
	log_set_journal(env.journal);
}

/* Whether the directory dir (a path, made real when it can be) holds the
 * file at target (a real path). */
static bool holds(const char *dir, size_t len, const char *target)
{
	char d[PATH_MAX];
	if (len == 0 || len >= sizeof d)
		return false;
	memcpy(d, dir, len);
	d[len] = '\0';
	char *real = realpath(d, NULL);
	const char *p = real != NULL ? real : d;
	size_t n = strlen(p);
	while (n > 1 && p[n - 1] == '/')
		n--;
	bool in = strncmp(target, p, n) == 0 && (target[n] == '/' || (n == 1 && p[0] == '/'));
	free(real);
	return in;
}

void svcenv_hide_runtime_dir(const char *path)
{
	const char *v = getenv("RUNTIME_DIRECTORY");
	if (v == NULL || path == NULL)
		return;
	char *target = realpath(path, NULL);
	size_t n = strlen(v);
	char *kept = malloc(n + 1), *hidden = malloc(n + 1);
	if (target == NULL || kept == NULL || hidden == NULL) {
		/* The socket was made a moment ago: only memory can fail here,
		 * and a guess would be worse than stopping. */
		fatal(EXIT_INTERNAL, "cannot resolve the control socket's path %s: %s", path, strerror(errno));
	}
	size_t k = 0, h = 0;
	for (const char *e = v;;) {
		size_t len = strcspn(e, ":");
		bool in = holds(e, len, target);
		char *to = in ? hidden : kept;
		size_t *at = in ? &h : &k;
		if (*at > 0)
			to[(*at)++] = ':';
		memcpy(to + *at, e, len);
		*at += len;
		if (e[len] == '\0')
			break;
		e += len + 1;
	}
	kept[k] = hidden[h] = '\0';
	if (h > 0) {
		if ((k > 0 ? setenv("RUNTIME_DIRECTORY", kept, 1) : unsetenv("RUNTIME_DIRECTORY")) != 0)
			fatal(EXIT_INTERNAL, "setenv: %s", strerror(errno));
		log_event("the replicas' RUNTIME_DIRECTORY leaves out %s, where the control socket is%s%s", hidden,
			  k > 0 ? ": they get " : " (they get none)", k > 0 ? kept : "");
	}
	free(target);
	free(kept);
	free(hidden);
}
