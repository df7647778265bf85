/* graft.h — the fast clock path for program images without libdiehard.so.
 *
 * A static program (Go's usual binaries, glibc's or musl's -static) loads
 * no libdiehard.so, so its patched vDSO had nowhere to jump but a system
 * call: every clock read a round trip to diehard. At such an image's
 * first arch_prctl (vdso.h), diehard grafts the clock blob
 * (allocator/blob/clockblob.h) into it: it traces the thread (ptrace),
 * stops it as the call returns, makes it map the blob (a system call run
 * from the vDSO stub's own system call instruction), writes the blob,
 * runs the blob's loader in it (which maps the run's clock region), writes
 * the process's struct clock_path (allocator/clockpath.h: the region's
 * pages, its slot, the markers), points the vDSO's entry points at the
 * blob, restores the thread's registers and detaches.
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
	int fd;               /* the slot's page's descriptor in the process, or -1 */
	int dir;              /* the pages' directory's descriptor in it, or -1 */
	bool own_fd;          /* fd and dir are the process's own (FASTCLOCK_FD,
				 FASTCLOCK_DIR_FD): kept */
	unsigned nslots, slot;
	uint64_t secret, mark_real, mark_fallback, mark_exec;
};

/* The blob's bytes (embedded at build time). */
const uint8_t *graft_blob(size_t *size);

/* The steps, at a new image's first arch_prctl (received, not yet
 * answered): graft_seize (false: no graft, nothing else to do); the
 * caller hands the process the region's descriptor (SECCOMP_IOCTL_NOTIF_
 * ADDFD); graft_interrupt, so that the thread stops as the call returns,
 * before it runs anything more (the call's wait is killable only, once
 * received: the interrupt does not break it); the caller answers the call;
 * graft_clocks, which waits for that stop and always lets the thread go.
 * If the interrupt or the answer failed, the thread is gone. */
bool graft_seize(pid_t tid);
bool graft_interrupt(pid_t tid);

/* Or, for an image stopped at its exec (traced there: PTRACE_EVENT_EXEC),
 * graft_clocks with at_exec and the region's descriptor the process
 * inherited (own_fd): no seize, interrupt or answer. */

/* Grafts the blob into thread tid, the only thread of its new image:
 * mem is its /proc/TID/mem, vdso its vDSO's address (patched with system
 * calls: the stubs' `syscall` instructions are where the graft's system
 * calls run), gr->fd and gr->dir the page's and the directory's
 * descriptors in it (-1: none; closed there otherwise, unless a signal cut
 * the graft short). Points the vDSO
 * at the blob while the thread is still stopped. Returns the blob's
 * address, or 0 with *why when there is none; either way the thread goes
 * on where it stopped, untraced (or is gone). */
uint64_t graft_clocks(pid_t tid, int mem, uint64_t vdso, const struct graft_region *gr, bool at_exec,
		      const char **why);

#endif
