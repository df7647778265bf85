/* viewstat.c — see viewstat.h. The table is read once at start-up and
 * never written after: the wrappers read it without a lock. Everything
 * here is async-signal-safe (close runs in vfork children and handlers):
 * raw system calls and the clock read. */
#include "viewstat.h"

#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "config.h"
#include "viewdev.h"

#define DEVS_MAX 128

bool viewstat_on;

static struct {
	uint64_t real, canon;
} devs[DEVS_MAX];
static unsigned ndevs;

static uint64_t hex(const char **s)
{
	uint64_t v = 0;
	for (;; (*s)++) {
		char c = **s;
		unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0') : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10) : 16;
		if (d == 16)
			return v;
		v = v << 4 | d;
	}
}

/* The nanoseconds every stamp of ours ends in, within its millisecond. */
#define STAMP_MARK 424242
/* Slack before the run's start: the kernel stamps files with a coarse
 * clock that lags the precise one. */
#define START_SLACK 2

static long long since; /* seconds: a later mtime was set during the run */
static char var[4096];  /* "DIEHARD_VIEWDEVS=..." as received, handed to every exec */

extern char **environ;

const char *viewstat_var(void)
{
	return var[0] != '\0' ? var : NULL;
}

void viewstat_hide(void)
{
	/* Its value differs between replicas (their devices' real numbers),
	 * and everything else a replica's environment holds but its seed is
	 * alike: out of the program's sight (exec.c hands it on). */
	static const char name[] = "DIEHARD_VIEWDEVS=";
	for (char **e = environ; var[0] != '\0' && e != NULL && *e != NULL; e++)
		if (strncmp(*e, name, sizeof name - 1) == 0) {
			char **d = e;
			do
				d[0] = d[1];
			while (*d++ != NULL);
			e--;
		}
}

void viewstat_start(void)
{
	const char *s = config_getenv("DIEHARD_VIEWDEVS");
	if (s == NULL || s[0] != 'T' || strlen(s) + sizeof "DIEHARD_VIEWDEVS=" > sizeof var)
		return;
	memcpy(var, "DIEHARD_VIEWDEVS=", sizeof "DIEHARD_VIEWDEVS=" - 1);
	memcpy(var + sizeof "DIEHARD_VIEWDEVS=" - 1, s, strlen(s) + 1);
	s++;
	since = (long long)hex(&s) - START_SLACK;
	if (*s != ',')
		return;
	s++;
	while (*s != '\0' && ndevs < DEVS_MAX) {
		uint64_t real = hex(&s);
		if (*s != ':')
			break;
		s++;
		uint64_t canon = hex(&s);
		devs[ndevs].real = real;
		devs[ndevs].canon = canon;
		ndevs++;
		if (*s != ',')
			break;
		s++;
	}
	viewstat_on = ndevs > 0;
}

/* The canonical number of a view's device; 0: not a view's. */
static uint64_t canon(uint64_t dev)
{
	for (unsigned i = 0; i < ndevs; i++)
		if (devs[i].real == dev)
			return devs[i].canon;
	return 0;
}

/* The agreed time, as a stamp of ours: a read of CLOCK_REALTIME_COARSE,
 * virtualized as every clock (the n-th read of a clock is the same in every
 * replica), and a clock of its own in the log, so that stamps do not move
 * the program's own reads of CLOCK_REALTIME: a replay (--ci's, diehard
 * replay) that stamps fewer files (they were committed since) reads the
 * same times as the run it replays. */
static void stamp_now(struct timespec *ts)
{
	if (clock_gettime(CLOCK_REALTIME_COARSE, ts) != 0)
		ts->tv_sec = ts->tv_nsec = 0;
	/* Never later than the read: make compares a file's time with the
	 * clock's, and warns of one from the future. */
	long n = ts->tv_nsec / 1000000 * 1000000 + STAMP_MARK;
	if (n > ts->tv_nsec)
		n -= 1000000;
	if (n < 0) {
		n += 1000000000;
		ts->tv_sec--;
	}
	ts->tv_nsec = n;
}

/* Whether mtime was set by the kernel during the run: to be stamped. */
static bool raw(long long sec, long nsec)
{
	return sec >= since && nsec % 1000000 != STAMP_MARK;
}

/* Stamps the file; its new time in *ts. false if it could not be. */
static bool stamp(int dir, const char *path, int flags, struct timespec *ts)
{
	struct timespec t[2];
	stamp_now(&t[1]);
	t[0] = t[1];
	long rc;
	if (path == NULL || (path[0] == '\0' && (flags & AT_EMPTY_PATH)))
		rc = syscall(SYS_utimensat, dir, NULL, t, 0);
	else
		rc = syscall(SYS_utimensat, dir, path, t, flags & AT_SYMLINK_NOFOLLOW);
	if (rc != 0)
		return false;
	*ts = t[1];
	return true;
}

/* Whether c is the device of a view's upper layer's files: made in the
 * replica, so a stamp of ours writes only what is already its own. A file
 * of the lower layer is never stamped: the stamp would copy it up, and the
 * copy, a snapshot, would be committed over the real file (which something
 * outside may be writing: diehard's own stdout, redirected). */
static bool upper(uint64_t c)
{
	return major(c) == VIEW_DEV_MAJOR && minor(c) % 4 == VIEW_DEV_UPPER && minor(c) != VIEW_DEV_STAGING;
}

void viewstat_fix(struct stat *st, int dir, const char *path, int flags)
{
	uint64_t c = canon(st->st_dev);
	if (c == 0)
		return;
	st->st_dev = c;
	if (upper(c) && raw(st->st_mtim.tv_sec, st->st_mtim.tv_nsec))
		(void)stamp(dir, path, flags, &st->st_mtim);
	st->st_ctim = st->st_mtim;
	st->st_atim = st->st_mtim;
}

void viewstat_fix_statx(struct statx *stx, int dir, const char *path, int flags)
{
	uint64_t c = canon(makedev(stx->stx_dev_major, stx->stx_dev_minor));
	if (c == 0)
		return;
	stx->stx_dev_major = major(c);
	stx->stx_dev_minor = minor(c);
	if ((stx->stx_mask & STATX_MTIME) && upper(c) && raw(stx->stx_mtime.tv_sec, (long)stx->stx_mtime.tv_nsec)) {
		struct timespec ts;
		if (stamp(dir, path, flags, &ts)) {
			stx->stx_mtime.tv_sec = ts.tv_sec;
			stx->stx_mtime.tv_nsec = (uint32_t)ts.tv_nsec;
		}
	}
	stx->stx_ctime = stx->stx_mtime;
	stx->stx_atime = stx->stx_mtime;
	stx->stx_btime = stx->stx_mtime;
}

const struct timespec *viewstat_times(const struct timespec *times, struct timespec out[2])
{
	if (!viewstat_on)
		return times;
	bool need = times == NULL || times[0].tv_nsec == UTIME_NOW || times[1].tv_nsec == UTIME_NOW;
	if (!need)
		return times;
	struct timespec n;
	stamp_now(&n);
	for (int i = 0; i < 2; i++)
		out[i] = times == NULL || times[i].tv_nsec == UTIME_NOW ? n : times[i];
	return out;
}
