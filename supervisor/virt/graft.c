/* graft.c — see graft.h.
 *
 * The thread is traced only for the graft: seized, interrupted (signals
 * on their way before the stop are delivered), then made to run two
 * things with its registers set for them: mmap of the blob's pages, from
 * the vDSO stub's `syscall` under PTRACE_SYSCALL (its entry and exit
 * stops), and, once the blob is written, the blob's loader, which maps
 * the rest and ends at its trap (one stop). Its registers are restored
 * and it is detached; a signal-delivery-stop met on the way ends the
 * graft there, the signal passed on with the detach. The loader runs with
 * the thread's signals blocked by the tracer (PTRACE_SETSIGMASK, the mask
 * restored before the detach) and a SIGSTOP held back until then, so
 * that it always closes the descriptors it opens. Every step is checked;
 * any failure detaches, the image on the notify path. */
#include "graft.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "blob/clockblob.h"
#define CLOCKPATH_LAYOUT_ONLY
#include "clockpath.h"
#include "remote.h"
#include "vdso.h"

/* The blob, built by the Makefile (DIEHARD_CLOCKBLOB: its path). */
__asm__(".pushsection .rodata\n"
	".balign 64\n"
	".hidden graft_blob_start\n"
	".hidden graft_blob_end\n"
	"graft_blob_start:\n"
	".incbin \"" DIEHARD_CLOCKBLOB "\"\n"
	"graft_blob_end:\n"
	".popsection\n");
extern const uint8_t graft_blob_start[], graft_blob_end[];

const uint8_t *graft_blob(size_t *size)
{
	*size = (size_t)(graft_blob_end - graft_blob_start);
	return graft_blob_start;
}

static uint64_t blob_word(size_t at)
{
	uint64_t w;
	memcpy(&w, graft_blob_start + at, sizeof w);
	return w;
}

/* One graft's state. */
struct graft {
	pid_t tid;
	int signal; /* a signal-delivery-stop met: the graft ends there, passing it on */
	bool stop;  /* a SIGSTOP held back while the loader ran, passed on at the end */
	struct user_regs_struct saved;
};

/* tid's next stop (its wait status, as waitpid gives it), or -1 when it
 * is gone. An exit is left to be reaped where exits are (replica.c: the
 * thread may be a replica's first process, our child): looked at with
 * WNOWAIT, and only a stop is taken. */
static int next_stop(pid_t tid)
{
	siginfo_t si;
	for (;;) {
		memset(&si, 0, sizeof si);
		if (waitid(P_PID, (id_t)tid, &si, WEXITED | WSTOPPED | __WALL | WNOWAIT) == 0)
			break;
		if (errno != EINTR)
			return -1;
	}
	if (si.si_pid != tid || (si.si_code != CLD_TRAPPED && si.si_code != CLD_STOPPED))
		return -1;
	memset(&si, 0, sizeof si);
	if (waitid(P_PID, (id_t)tid, &si, WSTOPPED | __WALL | WNOHANG) != 0 || si.si_pid != tid)
		return -1;
	return si.si_status << 8 | 0x7f; /* the stop's code: signal and event bits */
}

/* The saved registers with rip and six arguments, both as a system call
 * takes them (rdi, rsi, rdx, r10, r8, r9) and as a function does (rcx for
 * the fourth), and no system call to restart (orig_rax -1). */
static struct user_regs_struct regs_for(const struct graft *g, uint64_t rip, const uint64_t a[6])
{
	struct user_regs_struct r = g->saved;
	r.rip = rip;
	r.orig_rax = (uint64_t)-1;
	r.rdi = a[0];
	r.rsi = a[1];
	r.rdx = a[2];
	r.rcx = r.r10 = a[3];
	r.r8 = a[4];
	r.r9 = a[5];
	return r;
}

/* Runs system call nr in the stopped thread from site: true and its
 * result in *ret, or false when the thread did not get through it: gone,
 * or stopped for a signal on its way (g->signal: the graft ends at that
 * stop, so that the signal goes on with its own siginfo). */
static bool run(struct graft *g, uint64_t site, long nr, const uint64_t a[6], int64_t *ret)
{
	struct user_regs_struct r = regs_for(g, site, a);
	r.rax = (uint64_t)nr;
	if (g->signal != 0 || ptrace(PTRACE_SETREGS, g->tid, 0, &r) != 0)
		return false;
	/* Its entry and exit stops; a trap stop reported late (the interrupt
	 * after a group stop) is passed over. */
	for (int stops = 0, others = 0; stops < 2;) {
		if (ptrace(PTRACE_SYSCALL, g->tid, 0, 0) != 0)
			return false;
		int st = next_stop(g->tid);
		if (st < 0)
			return false;
		if (WSTOPSIG(st) == (SIGTRAP | 0x80))
			stops++;
		else if (st >> 16 == PTRACE_EVENT_STOP && others++ < 4)
			continue;
		else {
			g->signal = WSTOPSIG(st);
			return false;
		}
	}
	if (ptrace(PTRACE_GETREGS, g->tid, 0, &r) != 0)
		return false;
	*ret = (int64_t)r.rax;
	return true;
}

/* Runs the blob's loader (clockblob.h) in the stopped thread, the blob
 * mapped at at: true and its rax and rdx at the trap, or false as for
 * run(). */
static bool load(struct graft *g, uint64_t at, const uint64_t a[6], int64_t *rax, int64_t *rdx)
{
	struct user_regs_struct r = regs_for(g, at + BLOB_LOAD, a);
	/* Below the red zone, aligned as at a call. */
	r.rsp = ((g->saved.rsp - 512) & ~(uint64_t)15) - 8;
	if (g->signal != 0 || ptrace(PTRACE_SETREGS, g->tid, 0, &r) != 0)
		return false;
	for (int others = 0;;) {
		if (ptrace(PTRACE_CONT, g->tid, 0, 0) != 0)
			return false;
		int st = next_stop(g->tid);
		if (st < 0)
			return false;
		if (st >> 16 == PTRACE_EVENT_STOP && others++ < 4)
			continue; /* the interrupt, reported late */
		if (st >> 16 == 0 && WSTOPSIG(st) == SIGSTOP) {
			/* The one signal its mask cannot hold off (graft_clocks):
			 * kept for the end, so that the loader closes what it
			 * opened. */
			g->stop = true;
			continue;
		}
		if (st >> 16 != 0 || ptrace(PTRACE_GETREGS, g->tid, 0, &r) != 0)
			return false;
		if (WSTOPSIG(st) != SIGTRAP || r.rip != at + BLOB_TRAP + 1) {
			g->signal = WSTOPSIG(st); /* a signal of its own on its way */
			return false;
		}
		*rax = (int64_t)r.rax;
		*rdx = (int64_t)r.rdx;
		return true;
	}
}

static bool ok(int64_t ret)
{
	return ret >= 0 || ret < -4095;
}

/* Waits for the thread's stop (the interrupt's, or its group's): true
 * there, false when it is gone. Signals met on the way are delivered. */
static bool stopped(struct graft *g)
{
	for (;;) {
		int st = next_stop(g->tid);
		if (st < 0)
			return false;
		if (st >> 16 == PTRACE_EVENT_STOP)
			return true;
		if (ptrace(PTRACE_CONT, g->tid, 0, (void *)(uintptr_t)WSTOPSIG(st)) != 0)
			return false;
	}
}

bool graft_seize(pid_t tid)
{
	return ptrace(PTRACE_SEIZE, tid, 0, PTRACE_O_TRACESYSGOOD) == 0;
}

bool graft_interrupt(pid_t tid)
{
	return ptrace(PTRACE_INTERRUPT, tid, 0, 0) == 0;
}

/* Whether signal sig is in the mask of /proc/TID/status's line key
 * ("\nSigBlk:", a mask in hex): 1 or 0, or -1 when the line is missing. */
static int status_bit(const char *status, const char *key, int sig)
{
	const char *line = strstr(status, key);
	if (line == NULL)
		return -1;
	return (strtoull(line + strlen(key), NULL, 16) & 1ull << (sig - 1)) != 0;
}

/* Whether a SIGCONT is pending for thread tid (held off by the loader's
 * mask): one sent after a SIGSTOP load held back, which it would have
 * undone. */
static bool cont_pending(pid_t tid)
{
	char buf[4096];
	return remote_status(tid, buf, sizeof buf) == 0 &&
	       (status_bit(buf, "\nSigPnd:", SIGCONT) > 0 || status_bit(buf, "\nShdPnd:", SIGCONT) > 0);
}

/* What in thread tid's /proc/TID/status forbids a graft, or NULL: another
 * thread could be running the vDSO's entry points while they change; and
 * the loader ends at an int3, whose SIGTRAP the kernel forces, which would
 * unblock a blocked one and reset an ignored one to the default, for
 * good. */
static const char *unfit(pid_t tid)
{
	char buf[4096];
	if (remote_status(tid, buf, sizeof buf) != 0)
		return "its status cannot be read";
	const char *threads = strstr(buf, "\nThreads:");
	int blocked = status_bit(buf, "\nSigBlk:", SIGTRAP), ignored = status_bit(buf, "\nSigIgn:", SIGTRAP);
	if (threads == NULL || blocked < 0 || ignored < 0)
		return "its status cannot be read";
	if (strtol(threads + strlen("\nThreads:"), NULL, 10) != 1)
		return "it has started threads";
	if (blocked || ignored)
		return "it blocks or ignores SIGTRAP";
	return NULL;
}

/* The CPUs thread tid may run on, or UINT_MAX when unknown. */
static unsigned cpus_of(pid_t tid)
{
	cpu_set_t set;
	if (sched_getaffinity(tid, sizeof set, &set) != 0)
		return UINT32_MAX;
	int n = CPU_COUNT(&set);
	return n > 0 ? (unsigned)n : UINT32_MAX;
}

/* At an exec stop: on to the exec's syscall-exit-stop, where the new
 * image's registers are as it will start (resumed from the exec stop under
 * PTRACE_SYSCALL, that stop comes first). */
static bool past_exec(struct graft *g)
{
	if (ptrace(PTRACE_SETOPTIONS, g->tid, 0, PTRACE_O_TRACEEXEC | PTRACE_O_TRACESYSGOOD) != 0 ||
	    ptrace(PTRACE_SYSCALL, g->tid, 0, 0) != 0)
		return false;
	int st = next_stop(g->tid);
	if (st < 0)
		return false;
	if (WSTOPSIG(st) != (SIGTRAP | 0x80)) {
		if (st >> 16 == 0)
			g->signal = WSTOPSIG(st);
		return false;
	}
	return true;
}

uint64_t graft_clocks(pid_t tid, int mem, uint64_t vdso, const struct graft_region *gr, bool at_exec,
		      const char **why)
{
	struct graft g = { .tid = tid };
	if (!(at_exec ? past_exec(&g) : stopped(&g))) {
		*why = g.signal != 0 ? "a signal came in the middle" : "it ended or stopped";
		if (at_exec)
			(void)ptrace(PTRACE_DETACH, tid, 0, (void *)(uintptr_t)g.signal);
		return 0;
	}
	size_t size;
	const uint8_t *blob = graft_blob(&size);
	uint64_t code = blob_word(BLOB_CODE_AT), total = blob_word(BLOB_SIZE_AT), site = vdso_site(vdso);
	size_t page = cp_page_size();
	int64_t at = 0, region = 0, r = 0;
	bool done = false, closed = gr->own_fd, masked = false;
	/* Every signal but the loader's trap's and a fault's: the kernel
	 * forces those, and a forced signal that is blocked has its handler
	 * reset. */
	const uint64_t forced = 1ull << (SIGTRAP - 1) | 1ull << (SIGSEGV - 1) | 1ull << (SIGBUS - 1) |
				1ull << (SIGILL - 1) | 1ull << (SIGFPE - 1);
	uint64_t mask = 0, all = ~forced;
	if (ptrace(PTRACE_GETREGS, tid, 0, &g.saved) != 0) {
		*why = strerror(errno);
		goto detach;
	}
	const char *refused = NULL;
	if (gr->fd < 0 || gr->dir < 0)
		refused = "no descriptor of the clock pages could be handed to it";
	else if (total != size || code % 4096 != 0 || code < BLOB_REAL + BLOB_REAL_BYTES || total <= code ||
		 total - code < sizeof(struct clock_path) || site == 0)
		refused = "the clock blob is not as built";
	/* Where the thread stopped is where it goes on: not in an entry point
	 * about to change (nor about to restart a call made from one). */
	else if (vdso_in_entry(vdso, g.saved.rip) || vdso_in_entry(vdso, g.saved.rip - 2))
		refused = "it stopped in the vDSO";
	else
		refused = unfit(tid);
	*why = refused != NULL ? refused : "a system call in it failed";
	if (refused != NULL)
		goto out;
	/* The blob: its pages mapped executable, never writable (a process
	 * under memory-deny-write-execute may not make them so), and written
	 * through mem; its loader then maps its data pages writable over
	 * theirs, and the region, and closes the descriptor. */
	if (!run(&g, site, SYS_mmap, (uint64_t[6]){ 0, total, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS,
						    (uint64_t)-1, 0 }, &at) || !ok(at) || at == 0)
		goto out;
	if (pwrite(mem, blob, code, (off_t)at) != (ssize_t)code) {
		*why = "cannot write the blob";
		goto out;
	}
	int64_t step = -1;
	/* The loader runs with every signal blocked but SIGSTOP (held back
	 * by load), SIGKILL, and those the kernel forces (above): one that
	 * stopped it between a page's openat and its close would end the
	 * graft there, the page left open at the lowest free number, the one
	 * the program's next file takes. The mask is the tracer's to restore
	 * (below), whatever becomes of the loader; a signal that came
	 * meanwhile is delivered once the thread runs on with it. */
	masked = ptrace(PTRACE_GETSIGMASK, tid, sizeof mask, &mask) == 0 &&
		 ptrace(PTRACE_SETSIGMASK, tid, sizeof all, &all) == 0;
	bool loaded = load(&g, (uint64_t)at,
			   (uint64_t[6]){ (uint64_t)gr->fd, (uint64_t)gr->dir, gr->nslots, gr->slot, gr->own_fd, gr->mark_real },
			   &region, &step);
	closed = closed || loaded;
	if (!loaded || step != 0 || !ok(region) || region == 0) {
		*why = loaded ? "its loader failed" : "its loader did not finish";
		goto out;
	}
	/* The process's view, in its addresses. */
	struct clock_path path;
	memset(&path, 0, sizeof path);
	for (unsigned i = 0; i <= gr->nslots; i++)
		path.view.pages[i] = (struct cp_page *)(uintptr_t)(region + (int64_t)(i * page));
	path.view.nslots = gr->nslots;
	path.view.self = gr->slot;
	path.view.secret = gr->secret;
	path.view.crowded = gr->nslots > cpus_of(tid);
	path.mark_real = gr->mark_real;
	path.mark_fallback = gr->mark_fallback;
	path.mark_exec = gr->mark_exec;
	path.marked = true;
	path.ready = true;
	if (pwrite(mem, &path, sizeof path, (off_t)(at + (int64_t)code)) != (ssize_t)sizeof path) {
		*why = "cannot write the blob's data";
		goto out;
	}
	done = vdso_patch(mem, vdso, 0, (uint64_t)at) == 1;
	if (!done)
		*why = "cannot patch its vDSO";
out:
	if (g.signal != 0)
		*why = "a signal came in the middle";
	/* The descriptors go (the process had them only for this), unless a
	 * signal stopped the graft: that stop is where it goes on. */
	for (unsigned i = 0; i < 2 && !closed; i++) {
		int fd = i == 0 ? gr->fd : gr->dir;
		if (fd >= 0)
			(void)run(&g, site, SYS_close, (uint64_t[6]){ (uint64_t)fd, 0, 0, 0, 0, 0 }, &r);
	}
	if (masked && ptrace(PTRACE_SETSIGMASK, tid, sizeof mask, &mask) != 0)
		done = false;
	if (ptrace(PTRACE_SETREGS, tid, 0, &g.saved) != 0)
		done = false; /* gone: nothing of it runs on */
detach:
	/* A SIGSTOP held back goes on in place of the stop's own signal (the
	 * loader's trap), unless the graft ended at another's, or a SIGCONT
	 * sent since would have undone it. */
	if (g.stop && g.signal == 0 && cont_pending(tid))
		g.stop = false;
	(void)ptrace(PTRACE_DETACH, tid, 0, (void *)(uintptr_t)(g.signal != 0 ? g.signal : g.stop ? SIGSTOP : 0));
	return done ? (uint64_t)at : 0;
}
