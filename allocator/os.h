/* os.h — the allocator's only contact with the kernel.
 *
 * Everything here works before the C library is fully initialized and never
 * allocates: mmap/mprotect/munmap, getrandom, open/read/write on raw fds.
 * Failures are reported by return value with errno set; callers decide.
 */
#ifndef DIEHARD_OS_H
#define DIEHARD_OS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

size_t os_page_size(void);

/* Reserves len bytes of address space aligned to align (a power of two, at
 * least a page), inaccessible and uncommitted. NULL on failure.
 * Not MAP_NORESERVE: inaccessible memory is never charged, and os_commit then
 * charges what it opens, so the kernel's overcommit policy refuses absurd
 * requests with ENOMEM (as it does for glibc) instead of the OOM killer
 * meeting them later. */
void *os_reserve(size_t len, size_t align);

/* Reserves exactly [hint, hint+len) (page-aligned), or NULL if any of it is
 * taken: never displaces an existing mapping. */
void *os_reserve_at(uintptr_t hint, size_t len);

/* Makes [p, p+len) readable and writable; page-aligned. 0 or -1. */
int os_commit(void *p, size_t len);

/* Returns [p, p+len) to the system. 0 or -1. */
int os_release(void *p, size_t len);

/* Makes [p, p+len) (page-aligned, inside a reservation of ours) inaccessible
 * again and drops its memory, in one call: a fresh PROT_NONE mapping with
 * os_reserve's flags. Not mprotect (the memory would stay) nor
 * MADV_DONTNEED: a range once writable keeps its anon_vma and its commit
 * accounting, and the kernel never merges it with the inaccessible range
 * around it, so every range ever opened would keep a mapping of its own
 * (fence mode ran out of vm.max_map_count at 32,743 objects). Fresh, it
 * merges. 0 or -1. */
int os_discard(void *p, size_t len);

/* Drops the memory of [p, p+len) (page-aligned, read-write, ours): it stays
 * mapped and reads as zeros, so a stray access finds memory, not a fault.
 * A hint: failure is harmless. */
void os_purge(void *p, size_t len);

/* A zeroed read-write mapping of len bytes (rounded up to pages) with an
 * inaccessible guard page on each side, for metadata. NULL on failure. */
void *os_map_guarded(size_t len);
void os_unmap_guarded(void *p, size_t len);

/* Fills buf with len bytes of true randomness (getrandom, else /dev/urandom).
 * False when neither source answers. */
bool os_random(void *buf, size_t len);

/* Reads a small decimal number from a file such as /proc/sys/vm/max_map_count;
 * fallback when it cannot. */
long os_read_number(const char *path, long fallback);

/* Writes all of buf to fd, retrying on EINTR and short writes. */
void os_write_all(int fd, const char *buf, size_t len);

static inline uintptr_t os_align_up(uintptr_t x, uintptr_t a)
{
	return (x + a - 1) & ~(a - 1);
}

/* An object of size bytes (>= 1) on pages of its own (fence.c,
 * archipelago.c): *align raised to 16, the size rounded to it in
 * *rounded, the pages it takes in *npages. False when the alignment is
 * above a page (such objects go to the ordinary heap). */
static inline bool os_page_object(size_t size, size_t *align, size_t page, size_t *rounded, size_t *npages)
{
	if (*align < 16)
		*align = 16;
	if (*align > page)
		return false;
	*rounded = os_align_up(size, *align);
	*npages = os_align_up(*rounded, page) / page;
	return true;
}

/* A system call made right here, without libc's wrapper (no errno): what
 * the kernel returns, -errno on failure. For calls whose arguments carry
 * diehard's markers past the filter (clocks.c, exec.c) and for early.c,
 * which runs while the loader relocates this library, before libc may be
 * called. */
static inline long os_raw_syscall(long nr, long a, long b, long c, long d, long e, long f)
{
	long ret;
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}

#endif
