/* clockpath.h — the fast path's clock entry points, shared by the two
 * places a replica's patched vDSO leads to: libdiehard.so (clocks.c, in
 * dynamic programs) and the clock blob (blob/clockblob.c, which diehard
 * places in static programs: Go's, glibc's and musl's). Header-only, so
 * each includes its own copy: the blob is freestanding and has no libc.
 *
 * A struct clock_path is one process's view of the run's shared region
 * (clockpage.h) and the markers the filter knows; the entry points read a
 * served clock from the region (cp_read) and make the system call
 * otherwise, or with the fallback marker when cp_read says to ask diehard.
 * Invariants: ready implies view is a whole, checked region (its magic and
 * slot); marked implies the markers are the run's. */
#ifndef DIEHARD_CLOCKPATH_H
#define DIEHARD_CLOCKPATH_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>

#include "clockpage.h"
#include "os.h"

struct clock_path {
	struct cp_view view;
	bool ready;  /* the region is mapped: clock reads take the fast path */
	bool marked; /* the markers are known */
	uint64_t mark_real, mark_fallback, mark_exec;
	uint64_t mark_lane; /* a server's thread asks for its lane (0: none, the blob) */
	/* Set once the vDSO trampoline said it is not there (-ENOSYS: a clock
	 * id it is used for cannot fail that way); any thread may set it. */
	_Atomic bool no_vdso_real;
	/* A leader's gettimeofday (clockpath_real_read): the kernel's
	 * timezone as the last real gettimeofday gave it (minutes west in
	 * the high half, dst in the low), and that call's wall second (0:
	 * none yet), published after the timezone. */
	_Atomic uint64_t tz;
	_Atomic int64_t tz_sec;
};

/* A thread's lane (clockpage.h), where the thread keeps it: its id in the
 * replica's pid namespace and lane + 1 (0: none), written by diehard alone,
 * into the thread that made the notified wall read it was named at. */
struct clockpath_lane {
	uint32_t tid, lane;
};

/* Interrupted calls: a notified call is interruptible until diehard has
 * received it (after that the filter's WAIT_KILLABLE_RECV holds it), and a
 * signal whose handler lacks SA_RESTART then ends it with EINTR, which no
 * clock read returns in the kernel: the program takes what its buffer held
 * for the time (redis's timer set hours ahead by a SIGTERM). Diehard never
 * saw the call, so the entry points make it again (a bounded number of
 * times: an answer that is EINTR itself, which diehard never gives a clock
 * read, ends as it came). */
#define CLOCKPATH_EINTR_TRIES 65536u

/* The layout alone, for diehard, which writes a blob's (graft.c). */
#ifndef CLOCKPATH_LAYOUT_ONLY

/* The vDSO's own clock_gettime (a trampoline diehard writes: vdso.h), or
 * -ENOSYS; each includer defines it. */
static long clockpath_vdso_real(clockid_t id, struct timespec *ts);

/* Clock ids the vDSO reads without a system call while its clock source
 * is one it can read (x86-64's vDSO: the high-resolution ones, the
 * coarse ones, MONOTONIC_RAW). */
static inline bool clockpath_vdso_reads(clockid_t id)
{
	return id == CLOCK_REALTIME || id == CLOCK_MONOTONIC || id == CLOCK_MONOTONIC_RAW ||
	       id == CLOCK_REALTIME_COARSE || id == CLOCK_MONOTONIC_COARSE || id == CLOCK_BOOTTIME ||
	       id == CLOCK_TAI;
}

/* A leader's real clock_gettime: the vDSO's own code when it is there and
 * diehard has not found it making system calls (its page's flag), else the
 * system call with the marker the filter lets through unnotified. */
static inline long clockpath_real_gettime(struct clock_path *P, clockid_t id, struct timespec *ts)
{
	if (clockpath_vdso_reads(id) && !atomic_load_explicit(&P->no_vdso_real, memory_order_relaxed) &&
	    !cp_real_by_syscall(&P->view)) {
		long r = clockpath_vdso_real(id, ts);
		if (r != -ENOSYS)
			return r;
		atomic_store_explicit(&P->no_vdso_real, true, memory_order_relaxed);
	}
	return os_raw_syscall(SYS_clock_gettime, id, (long)ts, (long)P->mark_real, 0, 0, 0);
}

/* A leader's real read (cp_real_fn; arg: the struct clock_path). */
static int clockpath_real_read(unsigned key, struct cp_value *out, void *arg)
{
	struct clock_path *P = arg;
	struct timespec ts;
	key = cp_key_base(key);
	if (key == CP_KEY_GETTIMEOFDAY) {
		/* gettimeofday is CLOCK_REALTIME cut to microseconds (the
		 * kernel's and the vDSO's alike) and the kernel's timezone:
		 * the time read as clock_gettime's is (the vDSO, no system
		 * call: redis reads it twice a request), the timezone that a
		 * real gettimeofday gave in the same wall second; the first
		 * read of each second makes that call (settimeofday's
		 * timezone, which in practice only boot sets, is then at most
		 * a second old: fastclock.c's bounds take the one before a
		 * change for a while). */
		int64_t sec = atomic_load_explicit(&P->tz_sec, memory_order_acquire);
		if (sec != 0 && clockpath_real_gettime(P, CLOCK_REALTIME, &ts) == 0 && ts.tv_sec == sec) {
			uint64_t z = atomic_load_explicit(&P->tz, memory_order_relaxed);
			*out = (struct cp_value){ .a = ts.tv_sec,
						  .b = ts.tv_nsec / 1000,
						  .c = (int32_t)(uint32_t)(z >> 32),
						  .d = (int32_t)(uint32_t)z };
			return 0;
		}
		struct timeval tv;
		struct timezone tz;
		if (os_raw_syscall(SYS_gettimeofday, (long)&tv, (long)&tz, (long)P->mark_real, 0, 0, 0) != 0)
			return -1;
		atomic_store_explicit(&P->tz, (uint64_t)(uint32_t)tz.tz_minuteswest << 32 | (uint32_t)tz.tz_dsttime,
				      memory_order_relaxed);
		atomic_store_explicit(&P->tz_sec, tv.tv_sec, memory_order_release);
		*out = (struct cp_value){ .a = tv.tv_sec, .b = tv.tv_usec, .c = tz.tz_minuteswest, .d = tz.tz_dsttime };
		return 0;
	}
	clockid_t id = key == CP_KEY_TIME ? CLOCK_REALTIME : (clockid_t)key;
	if (clockpath_real_gettime(P, id, &ts) != 0)
		return -1;
	*out = (struct cp_value){ .a = ts.tv_sec, .b = key == CP_KEY_TIME ? 0 : ts.tv_nsec };
	return 0;
}

/* Lanes: an includer that has thread-local storage defines CLOCKPATH_LANES
 * and these two: the calling thread's lane (-1: none, or diverted), and
 * the address of its struct clockpath_lane for a server's wall read made
 * through diehard (0: none to ask for). The blob does not: a static
 * server's wall reads go to diehard. */
#ifdef CLOCKPATH_LANES
static int clockpath_lane(struct clock_path *P);
static uint64_t clockpath_lane_slot(struct clock_path *P);
#else
static inline int clockpath_lane(struct clock_path *P)
{
	(void)P;
	return -1;
}

static inline uint64_t clockpath_lane_slot(struct clock_path *P)
{
	(void)P;
	return 0;
}
#endif

/* The marker and its argument a read made as a system call carries after
 * its own arguments: a fallback's (ask: the entry n it asks diehard for),
 * or a wall read's asking for the thread's lane (where the thread keeps
 * it: diehard writes it there), else none. */
static inline void clockpath_call_args(struct clock_path *P, bool ask, uint64_t n, bool wall, long *mark, long *arg)
{
	uint64_t at = !ask && wall && P->ready && P->mark_lane != 0 && cp_serving(&P->view) ? clockpath_lane_slot(P) : 0;
	*mark = ask ? (long)P->mark_fallback : at != 0 ? (long)P->mark_lane : 0;
	*arg = ask ? (long)n : (long)at;
}

/* The fast path's read of key: 1 and *v, or 0 with *ask set when the
 * system call must carry the fallback marker and *n. A server's base wall
 * key is read in the calling thread's lane, if it has one. */
static inline int clockpath_fast(struct clock_path *P, unsigned key, struct cp_value *v, uint64_t *n, bool *ask)
{
	*ask = false;
	if (!P->ready || !cp_served(key))
		return 0;
	int w = cp_wall_of(key);
	if (w >= 0 && cp_serving(&P->view)) {
		int lane = clockpath_lane(P);
		if (lane < 0)
			return 0;
		key = cp_lane_key((unsigned)lane, (unsigned)w);
	}
	switch (cp_read(&P->view, key, clockpath_real_read, P, v, n)) {
	case CP_LED:
	case CP_FOLLOWED:
		return 1;
	case CP_FALLBACK:
		*ask = true;
		return 0;
	case CP_OFF:
		return 0;
	}
	return 0;
}

/* A clock's system call as the entry points make it: again while it ends
 * with EINTR (above), CLOCKPATH_EINTR_TRIES times at most. */
static inline long clockpath_call(long nr, long a, long b, long c, long d)
{
	long r;
	unsigned tries = 0;
	do
		r = os_raw_syscall(nr, a, b, c, d, 0, 0);
	while (r == -EINTR && ++tries < CLOCKPATH_EINTR_TRIES);
	return r;
}

static inline long clockpath_clock_gettime(struct clock_path *P, clockid_t id, struct timespec *ts)
{
	struct cp_value v;
	uint64_t n = 0;
	bool ask = false;
	if (id >= 0 && clockpath_fast(P, (unsigned)id, &v, &n, &ask)) {
		ts->tv_sec = v.a;
		ts->tv_nsec = v.b;
		return 0;
	}
	long mark, arg;
	clockpath_call_args(P, ask, n, id >= 0 && cp_wall_of((unsigned)id) >= 0, &mark, &arg);
	return clockpath_call(SYS_clock_gettime, id, (long)ts, mark, arg);
}

static inline long clockpath_gettimeofday(struct clock_path *P, struct timeval *tv, struct timezone *tz)
{
	struct cp_value v;
	uint64_t n = 0;
	bool ask = false;
	if (clockpath_fast(P, CP_KEY_GETTIMEOFDAY, &v, &n, &ask)) {
		if (tv != NULL) {
			tv->tv_sec = v.a;
			tv->tv_usec = v.b;
		}
		if (tz != NULL) {
			tz->tz_minuteswest = v.c;
			tz->tz_dsttime = v.d;
		}
		return 0;
	}
	long mark, arg;
	clockpath_call_args(P, ask, n, true, &mark, &arg);
	return clockpath_call(SYS_gettimeofday, (long)tv, (long)tz, mark, arg);
}

static inline long clockpath_time(struct clock_path *P, time_t *t)
{
	struct cp_value v;
	uint64_t n = 0;
	bool ask = false;
	if (clockpath_fast(P, CP_KEY_TIME, &v, &n, &ask)) {
		if (t != NULL)
			*t = v.a;
		return v.a;
	}
	long mark, arg;
	clockpath_call_args(P, ask, n, true, &mark, &arg);
	return clockpath_call(SYS_time, (long)t, mark, arg, 0);
}

#endif /* CLOCKPATH_LAYOUT_ONLY */
#endif
