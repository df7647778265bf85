/* graft.h — the fast clock path for program images without libdiehard.so.
 *
 * A static program (Go's usual binaries, glibc's or musl's -static) loads
 * no libdiehard.so, so its patched vDSO had nowhere to jump but a system
 * call: every clock read a round trip to diehard. At such an image's
 * first arch_prctl (vdso.h), diehard grafts the clock blob
 * (allocator/blob/clockblob.h) into it: it traces the thread (ptrace),
 * stops it at once, makes it map the blob and the run's clock region (the
 * system calls run in the thread, one at a time, from the vDSO stub's own
 * system call instruction, its registers restored after), writes the
 * blob and the process's struct clock_path (allocator/clockpath.h: the
 * region's pages, its slot, the markers), and detaches. The caller then
 * points the vDSO's entry points at the blob.
 *
 * A graft that cannot be made (no ptrace, a signal or stop in the way, a
 * failed system call) leaves the image on the notify path, which stays
 * correct: its clock reads were notified until then and are numbered by
 * the same per-slot count. */
#ifndef DIEHARD_GRAFT_H
#define DIEHARD_GRAFT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "clockpage.h"

/* What a graft maps and writes for a replica slot. */
struct graft_region {
	int fd;               /* the clock region's descriptor in the process */
	unsigned nslots, slot;
	uint64_t secret, mark_real, mark_fallback, mark_exec;
};

/* The blob's bytes (embedded at build time). */
const uint8_t *graft_blob(size_t *size);

/* Points the vDSO of the grafted process at the blob at blob (vdso.h),
 * while the thread is still stopped: 0, or -1. */
typedef int graft_patch_fn(uint64_t blob, void *arg);

/* Traces thread tid (PTRACE_SEIZE: it runs on) for a graft: false when
 * it cannot be (then there is none); graft_let_go undoes it without one. */
bool graft_seize(pid_t tid);
void graft_let_go(pid_t tid);

/* Grafts the blob into thread tid (seized), the only thread of a new image, which
 * made its first arch_prctl, was answered, and may be running again: mem
 * is its /proc/TID/mem, site the address of a system call instruction in
 * it (`syscall`, 0f 05: a stub vdso_patch wrote), gr->fd the region's
 * descriptor in it (closed there, whatever happens). Calls patch before
 * letting it go. Returns the blob's address, or 0 with *why when there is
 * none: the thread then goes on as it was (or is gone). Either way it
 * is no longer traced. */
uint64_t graft_clocks(pid_t tid, int mem, uint64_t site, const struct graft_region *gr, graft_patch_fn *patch,
		      void *arg, const char **why);

#endif
