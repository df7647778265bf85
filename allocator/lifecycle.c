/* lifecycle.c — birth, fork and death of the process's allocator.
 *
 * Start-up happens inside the first malloc, possibly from ld.so before libc
 * has finished initializing, possibly from two threads at once. It must not
 * allocate, use stdio or call dlsym. The first caller builds the instance;
 * others wait for it; a recursive call from the builder itself (which would
 * mean start-up allocates) fails instead of deadlocking.
 *
 * fork: every lock is taken before the fork and released in the parent; the
 * child re-initializes them, since the threads that might have held them are
 * gone, and moves to its own random stream.
 *
 * Exit: with DIEHARD_STATS=1 a destructor prints one summary line.
 */
#include "diehard.h"
#include "inject.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include "archipelago.h"
#include "cache.h"
#include "clocks.h"
#include "viewstat.h"
#include "corrupt.h"
#include "fence.h"
#include "exec.h"
#include "forkmask.h"
#include "frames.h"
#include "keyed.h"
#include "msg.h"
#include "stream.h"

struct diehard diehard;
_Atomic int diehard_state = DIEHARD_UNINIT;
_Atomic bool diehard_plain = false;

static __thread bool starting_here __attribute__((tls_model("initial-exec")));

/* With stats on: a private copy of stderr, since many programs (coreutils,
 * gzip) close fd 2 before they exit, and the file it was, to make sure a
 * copy closed and reused by the program is never written to. */
static int report_fd = -1;
static struct stat report_file;

static void keep_stderr(void)
{
	if (fstat(STDERR_FILENO, &report_file) != 0)
		return;
	report_fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 64);
}

/* The descriptor to report on, or -1 when neither copy is still the file
 * stderr was at start-up. */
static int report_target(void)
{
	int fds[2] = { report_fd, STDERR_FILENO };
	for (int i = 0; i < 2; i++) {
		struct stat now;
		if (fds[i] >= 0 && fstat(fds[i], &now) == 0 && now.st_dev == report_file.st_dev &&
		    now.st_ino == report_file.st_ino)
			return fds[i];
	}
	return report_fd < 0 ? STDERR_FILENO : -1;
}

/* Per class, up to 32 GiB of address space; reserving costs nothing. */
#define REGION_SHIFT_WANTED 35u

static void fork_prepare(void)
{
	stream_fork_prepare();
	if (fence_on)
		fence_lock();
	if (arch_on)
		arch_lock();
	large_lock(diehard.large);
	heap_lock_all(diehard.heap);
	forkmask_block();
}

static void fork_parent(void)
{
	forkmask_restore();
	heap_unlock_all(diehard.heap);
	large_unlock(diehard.large);
	if (fence_on)
		fence_unlock();
	if (arch_on)
		arch_unlock();
}

static void fork_child(void)
{
	forkmask_restore();
	heap_reset_locks(diehard.heap);
	large_reset_lock(diehard.large);
	if (fence_on)
		fence_reset_lock();
	if (arch_on)
		arch_reset_lock();
	stream_fork_child();
	keyed_fork_child();
	clocks_fork_child();
}

static void say_cannot_start(void)
{
	struct msg m = { .len = 0 };
	msg_str(&m, "diehard: cannot reserve the heap's address space; every allocation will fail");
	msg_send(&m);
}

bool diehard_start(void)
{
	int expected = DIEHARD_UNINIT;
	if (atomic_compare_exchange_strong(&diehard_state, &expected, DIEHARD_STARTING)) {
		starting_here = true;
		config_load(&diehard.cfg);
		stream_seed(diehard.cfg.seed);
		diehard.heap = heap_create(&diehard.cfg, REGION_SHIFT_WANTED);
		if (diehard.heap != NULL)
			diehard.large = large_create(&diehard.cfg, diehard.heap);
		starting_here = false;
		if (diehard.heap == NULL || diehard.large == NULL) {
			atomic_store_explicit(&diehard_state, DIEHARD_FAILED, memory_order_release);
			say_cannot_start();
			return false;
		}
		if (diehard.cfg.stats)
			keep_stderr();
		/* entry.c's free is weak here: the unit tests link the allocator
		 * without its entry points, and never inject. */
		const char *inject = config_getenv("DIEHARD_INJECT");
		if (inject != NULL && inject[0] != '\0' && diehard_free_object != NULL)
			inject_start(inject, diehard_free_object);
		const char *corrupt = config_getenv("DIEHARD_CORRUPT");
		if (corrupt != NULL && corrupt[0] != '\0')
			corrupt_start(corrupt, diehard.heap);
		keyed_start();
		clocks_start();
		viewstat_start();
		if (diehard.cfg.fence.on && !fence_start(&diehard.cfg.fence)) {
			struct msg m = { .len = 0 };
			msg_str(&m, "diehard: fence: cannot reserve the fence region or install its handler; fence mode is off");
			msg_send(&m);
		}
		if (diehard.cfg.arch_hot != 0 && !arch_start(diehard.cfg.arch_hot, diehard.heap)) {
			struct msg m = { .len = 0 };
			msg_str(&m, "diehard: archipelago: cannot reserve its region or install its handler; the mode is off");
			msg_send(&m);
		}
		atomic_store_explicit(&diehard_plain,
				      !diehard.cfg.fill && !diehard.cfg.stats && !keyed_on && !inject_on && !arch_on &&
					      !corrupt_on,
				      memory_order_release);
		atomic_store_explicit(&diehard_state, DIEHARD_READY, memory_order_release);
		/* Only now: these may themselves allocate. Without the thread-exit
		 * key the caches stay off, which is slower but correct. */
		(void)cache_setup(diehard.heap);
		if (pthread_atfork(fork_prepare, fork_parent, fork_child) != 0) {
			struct msg m = { .len = 0 };
			msg_str(&m, "diehard: pthread_atfork failed; fork while another thread allocates may hang");
			msg_send(&m);
		}
		return true;
	}
	if (starting_here)
		return false;
	int s;
	while ((s = atomic_load_explicit(&diehard_state, memory_order_acquire)) == DIEHARD_STARTING)
		sched_yield();
	return s == DIEHARD_READY;
}

void diehard_report(void)
{
	struct heap_totals t;
	struct heap *h = diehard.heap;
	struct large *l = diehard.large;

	/* Frees still pending in this thread's cache count as done. (Other
	 * threads still running at exit keep theirs: up to 32 per class.) */
	cache_drain(h);
	heap_totals(h, &t);
	large_lock(l);
	size_t large_allocations = l->allocations, large_frees = l->frees;
	size_t large_live = l->count, unguarded = l->unguarded;
	large_unlock(l);

	struct msg m = { .len = 0 };
	msg_str(&m, "diehard: stats pid=");
	msg_u64(&m, (uint64_t)getpid());
	msg_str(&m, " seed=");
	msg_hex(&m, diehard.cfg.seed[1], 16);
	msg_hex(&m, diehard.cfg.seed[0], 16);
	msg_field(&m, " allocations=", t.allocations + large_allocations);
	msg_field(&m, " frees=", t.frees + large_frees);
	msg_field(&m, " peak_live_bytes=", atomic_load(&h->peak_bytes));
	msg_field(&m, " double_frees=", atomic_load(&h->double_frees));
	msg_field(&m, " invalid_frees=", atomic_load(&h->invalid_frees));
	msg_field(&m, " truncated_copies=", atomic_load(&h->truncated_copies));
	msg_field(&m, " live_objects=", t.live_objects + large_live);
	msg_field(&m, " heap_committed=", t.committed);
	msg_field(&m, " unguarded_large=", unguarded);
	msg_field(&m, " m=", diehard.cfg.m_fixed / M_ONE);
	msg_str(&m, ".");
	msg_u64(&m, (diehard.cfg.m_fixed % M_ONE) * 100 / M_ONE / 10);
	msg_u64(&m, (diehard.cfg.m_fixed % M_ONE) * 100 / M_ONE % 10);
	if (fence_on) {
		struct fence_totals ft;
		fence_totals(&ft);
		msg_field(&m, " fenced=", ft.fenced);
		msg_field(&m, " unfenced=", ft.unfenced);
		msg_field(&m, " fence_faults=", ft.faults);
	}
	if (arch_on) {
		struct arch_totals at;
		arch_totals(&at);
		msg_field(&m, " arch_objects=", at.objects);
		msg_field(&m, " arch_hot=", at.hot);
		msg_field(&m, " arch_cold=", at.cold);
		msg_field(&m, " arch_pinned=", at.pinned);
		msg_field(&m, " arch_compacted_bytes=", at.compacted_bytes);
		msg_field(&m, " arch_restores=", at.restores);
		msg_field(&m, " arch_stray_pages=", at.stray_pages);
	}
	if (corrupt_on)
		msg_field(&m, " corrupted=", corrupt_count());
	static const char *const fills[] = { " fill=none", " fill=random", " fill=pattern", " fill=inverse", " fill=zero" };
	msg_str(&m, fills[diehard.cfg.fill_mode]);
	int fd = report_target();
	if (fd >= 0)
		msg_send_to(&m, fd);
}

/* Programs that never allocate (gzip) still get their statistics line, and
 * start-up costs are paid at load rather than inside a first malloc.
 *
 * The unwinder is loaded here, where the loader's work is done and we are
 * not inside the allocator, in the modes that may want stacks: fence, and
 * every keyed mode, not only the --ci trace that records them. Loading it
 * allocates, and keyed modes number allocations: a --ci replay that traces
 * must number the program's allocations as the runs it replays did, traced
 * or not. Allocations made before, by the constructors of libraries that
 * run before ours, have no stacks. */
__attribute__((constructor)) static void start_at_load(void)
{
	bool ready = diehard_ready();
	exec_start(); /* after the start: it reads clocks.c's exec marker */
	viewstat_hide();
	if (ready && (fence_on || keyed_on) && !frames_load()) {
		struct msg m = { .len = 0 };
		msg_str(&m, "diehard: cannot load libgcc_s.so.1 for stacks; reports will have none");
		msg_send(&m);
	}
}

__attribute__((destructor)) static void report_at_exit(void)
{
	if (atomic_load(&diehard_state) == DIEHARD_READY && diehard.cfg.stats)
		diehard_report();
	if (atomic_load(&diehard_state) == DIEHARD_READY)
		keyed_thread_exit();
}
