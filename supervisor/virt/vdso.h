/* vdso.h — makes a process's vDSO clock functions enter the kernel.
 *
 * On x86-64, glibc, Go and static programs read clocks through the vDSO,
 * which never makes a system call, so the seccomp filter would see nothing.
 * The supervisor overwrites the entry points of clock_gettime, gettimeofday
 * and time in each new program image with `mov eax, NR; syscall; ret` (made
 * again when it ends with EINTR: vdso.c), and
 * getrandom's with `return -ENOSYS` (its callers then make the real call).
 * It does so when the image makes its first arch_prctl, which every x86-64
 * program makes to set up thread-local storage before running any code of
 * its own; forked children inherit the patched page.
 *
 * With the fast clock path (fastclock.h), a process that has libdiehard.so
 * loaded gets jumps into its diehard_vdso_* functions instead, which read
 * most clocks from the replicas' shared log and make the system call only
 * when they must. A leader among them reads the real clock through the
 * vDSO's own clock_gettime: the patch also writes, into that process's
 * copy of libdiehard's diehard_vdso_real_clock_gettime, the instructions
 * the jump displaced and a jump back past them (where they can run there:
 * prologue.h).
 *
 * The vDSO is the same image in every process of this kernel, so the entry
 * points' offsets are read once from the supervisor's own vDSO. */
#ifndef DIEHARD_VDSO_H
#define DIEHARD_VDSO_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Finds the entry points in our own vDSO. 0, or -1 when there is no vDSO or
 * it lacks a clock entry point (then nothing needs patching: every call
 * enters the kernel anyway). */
int vdso_init(void);

/* The vDSO's address and the AT_RANDOM bytes' in the process of thread
 * tid, from /proc/TID/auxv (0 for what it lacks). 0 or -errno. */
int vdso_auxv(pid_t tid, uint64_t *vdso, uint64_t *random);

/* The fast clock path (fastclock.h): the clock entry points of a process
 * that has the allocator at this path loaded jump to its
 * diehard_vdso_* functions instead (movabs rax, address; jmp rax), where
 * the vDSO's entry point is long enough for that. */
void vdso_jump_to(const char *allocator);

/* Whether the fast path's leaders can read the real clock_gettime through
 * the vDSO's own code: its entry point's displaced instructions can run
 * from a trampoline in libdiehard.so (prologue.h), which vdso_patch writes
 * with the jumps. Without it they make the system call (with the run's
 * marker: fastclock.h). */
bool vdso_real_clock(void);

/* Whether a clock_gettime of thread tid that entered the kernel at ip (the
 * address past its system call instruction) was made by the vDSO's own
 * clock_gettime, past its entry point: a leader's real read through the
 * trampoline that the vDSO made by a system call (a clock source it cannot
 * read in user space). Reads tid's auxv only when ip is where such a call
 * would be within its page. */
bool vdso_real_fallback(pid_t tid, uint64_t ip);

/* Where libdiehard.so starts in process pid (vdso_jump_to's, at file
 * offset 0), or 0 when it is not loaded there (or the fast path is not
 * set up); near: the address the process made its arch_prctl from (the
 * dynamic loader's, usually: the library is looked for just below it
 * first). */
uint64_t vdso_library(pid_t pid, uint64_t near);

/* Whether the vDSO at base of the process whose /proc/PID/mem is mem was
 * patched already (a later arch_prctl of the same image, a thread, a
 * forked child, an image that patched itself: its first entry point is
 * no longer the vDSO's own), or needs nothing (no vDSO, no entry points). */
bool vdso_patched(int mem, uint64_t base);

/* Patches the vDSO at base through mem, an open /proc/PID/mem: jumps into
 * libdiehard.so at lib (vdso_library), or else into the clock blob at
 * blob (graft.h), or with both 0 system calls. 1 when it did (so this is
 * a new program image), 0 when there was nothing to patch, or -errno. */
int vdso_patch(int mem, uint64_t base, uint64_t lib, uint64_t blob);

/* Whether ip is within the bytes a patch writes at an entry point of the
 * vDSO at base. */
bool vdso_in_entry(uint64_t base, uint64_t ip);

/* In a vDSO at base patched with system calls: the address of a system
 * call instruction (in a stub), for graft.h; 0 if none. */
uint64_t vdso_site(uint64_t base);

/* The entry points' offsets and lengths in the vDSO and the bytes a jump
 * displaces, as libdiehard's early.c reads them from DIEHARD_CLOCKS
 * (vdso=...): its length, 0 when there is nothing to say. */
size_t vdso_recipe(char *buf, size_t size);

#endif
