/* clocks.c — the replicas' fast path for virtualized clock reads (issue 16,
 * clockpage.h): diehard patches the vDSO's clock_gettime, gettimeofday and
 * time to jump here when this library is loaded, and hands every replica
 * the shared region in DIEHARD_CLOCKS:
 *
 *   DIEHARD_CLOCKS=fd=N,dir=M,slots=K,secret=HEX,real=HEX,fallback=HEX
 *
 * (fd: this replica's own page, a file it may write, whose header names
 * its slot (so that the variable is the same in every replica, as their
 * environments are); dir: the directory of every page's file, on a mount
 * the kernel keeps read-only (supervisor/virt/clockfs.c); secret: the
 * entries' checksum key; real: the marker that lets a leader's
 * clock_gettime, and the opens here, through the filter unnotified;
 * fallback: the marker of a read that asks diehard for entry n: in the
 * call's first unused argument, n in the next).
 * The K + 1 pages are mapped side by side, this slot's read-write from fd,
 * the others read-only from their files in dir: no write of this process
 * reaches another slot's page or diehard's (docs/SANDBOX.md).
 *
 * Without DIEHARD_CLOCKS (not under diehard, or --no-virtualize), or for a
 * clock the fast path does not serve, every entry point makes the system
 * call, as the patched vDSO did before (and diehard's filter notifies it).
 *
 * diehard's side: supervisor/virt/fastclock.c; the protocol: clockpage.h;
 * docs/NONDETERMINISM.md, "The fast path". */
#include "clocks.h"
#include "clockpage.h"
#define CLOCKPATH_LANES
#include "clockpath.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "os.h"
#include "spec.h"

#define EXPORT __attribute__((visibility("default")))
#define VAR "DIEHARD_CLOCKS"

static struct clock_path path;

/* A word on a page the kernel zeroes in a forked child (MADV_WIPEONFORK),
 * 1 in the process that set it: a child made without glibc's fork (a raw
 * fork system call, _Fork, clone without CLONE_VM) runs no fork handler,
 * and its one thread would go on in its parent's lane. NULL: no such page
 * (a kernel before 4.14): no lanes. */
static _Atomic uint32_t *not_forked;

static uint64_t hex(const char *s, const char *end)
{
	uint64_t v = 0;
	if (s == end)
		spec_die(VAR, "empty number", NULL);
	for (const char *c = s; c < end; c++) {
		int d = *c >= '0' && *c <= '9' ? *c - '0' : *c >= 'a' && *c <= 'f' ? *c - 'a' + 10 : -1;
		if (d < 0 || v >> 60)
			spec_die(VAR, "not a hex number", NULL);
		v = v << 4 | (uint64_t)d;
	}
	return v;
}

/* The CPUs this process may run on (its affinity mask at start; UINT_MAX
 * when the mask cannot be read, as on a machine past 1024 CPUs). */
static unsigned cpus_to_run_on(void)
{
	uint64_t mask[16];
	long n = os_raw_syscall(SYS_sched_getaffinity, 0, (long)sizeof mask, (long)mask, 0, 0, 0);
	if (n <= 0 || n > (long)sizeof mask)
		return UINT_MAX;
	unsigned cpus = 0;
	for (long i = 0; i < n / 8; i++)
		cpus += (unsigned)__builtin_popcountll(mask[i]);
	return cpus > 0 ? cpus : UINT_MAX;
}

void clocks_start(void)
{
	const char *spec = config_getenv(VAR);
	if (spec == NULL || spec[0] == '\0')
		return;
	uint64_t fd = UINT64_MAX, dir = UINT64_MAX, slots = 0;
	struct spec_item it;
	for (const char *at = spec; spec_next(VAR, spec, &at, &it);) {
		if (spec_is(&it, "fd"))
			fd = spec_u64(VAR, it.value, it.end, spec);
		else if (spec_is(&it, "dir"))
			dir = spec_u64(VAR, it.value, it.end, spec);
		else if (spec_is(&it, "slots"))
			slots = spec_u64(VAR, it.value, it.end, spec);
		else if (spec_is(&it, "secret"))
			path.view.secret = hex(it.value, it.end);
		else if (spec_is(&it, "real"))
			path.mark_real = hex(it.value, it.end);
		else if (spec_is(&it, "fallback"))
			path.mark_fallback = hex(it.value, it.end);
		else if (spec_is(&it, "lane"))
			path.mark_lane = hex(it.value, it.end);
		else if (spec_is(&it, "exec"))
			path.mark_exec = hex(it.value, it.end);
		else if (spec_is(&it, "vdso") || spec_is(&it, "images"))
			continue; /* early.c's */
		else
			spec_die(VAR, "unknown key (fd, dir, slots, secret, real, fallback, lane, vdso, images, exec)", spec);
	}
	if (fd > 1 << 20 || dir > 1 << 20 || slots == 0 || slots > CP_MAX_SLOTS)
		spec_die(VAR, "fd, dir and slots are needed, slots <= 62, in", spec);
	path.marked = path.mark_real != 0 && path.mark_fallback != 0;
	size_t page = cp_page_size(), len = (slots + 1) * page;
	/* The fds may be anything by now (a program that closed them and
	 * opened other files there, then exec'd): our page's file and a
	 * directory, or nothing (a shorter file would fault past its end). */
	struct stat st, dst;
	struct {
		uint64_t magic;
		uint32_t slot, nslots;
	} head; /* the page's first words */
	_Static_assert(offsetof(struct cp_page, slot) == 8 && offsetof(struct cp_page, nslots) == 12, "header");
	if (fstat((int)fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size < page ||
	    fstat((int)dir, &dst) != 0 || !S_ISDIR(dst.st_mode) ||
	    os_raw_syscall(SYS_pread64, (long)fd, (long)&head, (long)sizeof head, 0, 0, 0) != (long)sizeof head ||
	    head.magic != CP_MAGIC || head.slot >= slots || head.nslots != slots)
		return;
	unsigned slot = head.slot;
	char *base = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (base == MAP_FAILED)
		return; /* the system-call path still works */
	for (unsigned i = 0; i <= slots; i++) {
		long f = (long)fd;
		if (i != slot) {
			/* With the marker the filter leaves the open in the
			 * kernel (it is no random device). */
			char name[4];
			cp_page_name(i, (unsigned)slots, name);
			f = os_raw_syscall(SYS_openat, (long)dir, (long)name, O_RDONLY | O_CLOEXEC, 0,
					   (long)path.mark_real, 0);
		}
		void *at = f < 0 ? MAP_FAILED
				 : mmap(base + i * page, page, i == slot ? PROT_READ | PROT_WRITE : PROT_READ,
					MAP_SHARED | MAP_FIXED, (int)f, 0);
		if (i != slot && f >= 0)
			(void)os_raw_syscall(SYS_close, f, 0, 0, 0, 0, 0);
		if (at == MAP_FAILED) {
			(void)munmap(base, len);
			return;
		}
	}
	/* Lanes' page (not_forked): where it cannot be had, none. */
	void *wipe = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (wipe != MAP_FAILED && madvise(wipe, 4096, MADV_WIPEONFORK) == 0) {
		not_forked = wipe;
		atomic_store_explicit(not_forked, 1, memory_order_relaxed);
	} else if (wipe != MAP_FAILED) {
		(void)munmap(wipe, 4096);
	}
	path.view.nslots = (unsigned)slots;
	path.view.self = slot;
	path.view.crowded = slots > cpus_to_run_on();
	for (unsigned i = 0; i <= slots; i++)
		path.view.pages[i] = (struct cp_page *)(base + i * page);
	if (path.view.pages[slots]->magic != CP_MAGIC || path.view.pages[slot]->slot != slot) {
		(void)munmap(base, len);
		return;
	}
	path.ready = true;
}

/* The calling thread's lane (clockpath.h's struct clockpath_lane): diehard
 * writes it into the thread whose notified wall read it named for a lane
 * (the read carries its address), so a thread that comes later with a
 * dead one's id starts with none. gen: the process's generation when the
 * thread asked (lanes_here): a lane of another generation is its parent's,
 * copied by a fork. Each read checks diehard's page still names the thread
 * (a slot's new process, diehard's own change). */
static __thread struct {
	struct clockpath_lane l;
	uint64_t gen;
} my_lane;

/* The process's generation: one more in a forked child than its parent's
 * (not_forked found zeroed), so that no thread of the child, however many
 * it starts before its first read, goes on in a lane of its parent's. */
static _Atomic uint64_t generation = 1;

/* Whether this process may use lanes (the page that tells a forked child
 * is there), its generation moved on first in a forked child. */
static bool lanes_here(void)
{
	if (not_forked == NULL)
		return false;
	if (atomic_load_explicit(not_forked, memory_order_acquire) == 0) {
		atomic_fetch_add_explicit(&generation, 1, memory_order_acq_rel);
		atomic_store_explicit(not_forked, 1, memory_order_release);
	}
	return true;
}

static int clockpath_lane(struct clock_path *P)
{
	if (!lanes_here() || my_lane.l.lane == 0 || my_lane.l.lane > CP_LANES || P->view.self >= CP_MAX_SLOTS ||
	    my_lane.gen != atomic_load_explicit(&generation, memory_order_acquire))
		return -1;
	const struct cp_page *dh = P->view.pages[P->view.nslots];
	unsigned j = my_lane.l.lane - 1, self = P->view.self;
	if (atomic_load_explicit(&dh->lane_tid[self][j], memory_order_acquire) != my_lane.l.tid) {
		my_lane.l.lane = 0; /* taken back */
		return -1;
	}
	return atomic_load_explicit(&dh->divert[self][j], memory_order_acquire) != 0 ? -1 : (int)j;
}

static uint64_t clockpath_lane_slot(struct clock_path *P)
{
	(void)P;
	if (!lanes_here())
		return 0;
	uint64_t gen = atomic_load_explicit(&generation, memory_order_acquire);
	if (my_lane.l.lane != 0 && my_lane.gen == gen)
		return 0; /* it has one (diverted now and then) */
	my_lane.l.lane = 0;
	my_lane.gen = gen;
	return (uint64_t)(uintptr_t)&my_lane.l;
}

void clocks_fork_child(void)
{
	my_lane.l.tid = 0;
	my_lane.l.lane = 0;
}

uint64_t clocks_mark(void)
{
	return path.marked ? path.mark_real : 0;
}

uint64_t clocks_ask_mark(void)
{
	return path.marked ? path.mark_fallback : 0;
}

uint64_t clocks_exec_mark(void)
{
	return path.mark_exec;
}

/* diehard_vdso_real_clock_gettime: the vDSO's own clock_gettime, for a
 * leader's real read. diehard writes it into this process's copy of the
 * page when it patches the vDSO (supervisor/virt/vdso.c): the instructions
 * its jump displaced from the vDSO's entry point, then a jump back past
 * them. Until then (an entry point it could not relocate, or not under the
 * fast path) it returns -ENOSYS. 64 bytes, aligned, so that the write
 * stays within one page. */
__asm__(".pushsection .text\n"
	".p2align 6\n"
	".globl diehard_vdso_real_clock_gettime\n"
	".type diehard_vdso_real_clock_gettime, @function\n"
	".globl dh_vdso_real\n"
	".hidden dh_vdso_real\n"
	"diehard_vdso_real_clock_gettime:\n"
	"dh_vdso_real:\n"
	"\tmovq $-38, %rax\n" /* -ENOSYS */
	"\tret\n"
	"\t.fill 56, 1, 0xcc\n"
	".size diehard_vdso_real_clock_gettime, 64\n"
	".popsection\n");
long dh_vdso_real(clockid_t id, struct timespec *ts);

static long clockpath_vdso_real(clockid_t id, struct timespec *ts)
{
	return dh_vdso_real(id, ts);
}

EXPORT long diehard_vdso_clock_gettime(clockid_t id, struct timespec *ts)
{
	return clockpath_clock_gettime(&path, id, ts);
}

EXPORT long diehard_vdso_gettimeofday(struct timeval *tv, struct timezone *tz)
{
	return clockpath_gettimeofday(&path, tv, tz);
}

EXPORT long diehard_vdso_time(time_t *t)
{
	return clockpath_time(&path, t);
}

/* Hidden aliases for early.c, which runs before the GOT is filled. */
extern __typeof(diehard_vdso_clock_gettime) dh_vdso_clock_gettime
	__attribute__((alias("diehard_vdso_clock_gettime"), visibility("hidden")));
extern __typeof(diehard_vdso_gettimeofday) dh_vdso_gettimeofday
	__attribute__((alias("diehard_vdso_gettimeofday"), visibility("hidden")));
extern __typeof(diehard_vdso_time) dh_vdso_time __attribute__((alias("diehard_vdso_time"), visibility("hidden")));
