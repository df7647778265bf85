/* clockblob.c — the clock fast path for programs without libdiehard.so
 * (static programs: Go's, glibc's, musl's), as a blob diehard places in
 * each such image (clockblob.h; supervisor/virt/graft.c): the entry
 * points the patched vDSO jumps to, over the same protocol as
 * libdiehard's (clockpath.h, ../clockpage.c).
 *
 * Freestanding: no libc, no relocations, no thread-local storage, no
 * floating-point or vector registers (a Go runtime calls the vDSO from its
 * own code). Its one datum is the process's struct clock_path, which
 * diehard writes before the image runs; until then (and if diehard could
 * not) ready is false and every read makes the system call. */
#include <sched.h>
#include <fcntl.h>
#include <sys/mman.h>

#include "clockblob.h"
#include "clockpath.h"
#include "os.h"

#define HIDDEN __attribute__((visibility("hidden")))

struct clock_path blob_path __attribute__((section(".data.path"))) HIDDEN = { .ready = false };

/* The head: the entry table, the layout words and the trampoline, at the
 * offsets clockblob.h gives (the linker script puts it first). */
__asm__(".pushsection .text.head,\"ax\",@progbits\n"
	"blob_head:\n"
	"\tjmp blob_clock_gettime\n"
	"\t.balign 8, 0xcc\n"
	"\tjmp blob_gettimeofday\n"
	"\t.balign 8, 0xcc\n"
	"\tjmp blob_time\n"
	"\t.balign 8, 0xcc\n"
	"\t.quad blob_data_start - blob_head\n"
	"\t.quad blob_end - blob_head\n"
	"\tjmp blob_load\n"
	"\t.balign 8, 0xcc\n"
	"blob_trap:\n"
	"\tint3\n"
	"\tjmp blob_trap\n"
	"\t.balign 64, 0xcc\n"
	"blob_real:\n"
	"\tmovq $-38, %rax\n"            /* -ENOSYS until diehard writes it */
	"\tret\n"
	"\t.fill 56, 1, 0xcc\n"
	".popsection\n");

long blob_real(clockid_t id, struct timespec *ts) HIDDEN;

static long clockpath_vdso_real(clockid_t id, struct timespec *ts)
{
	return blob_real(id, ts);
}

/* clockpage.c's one call out. */
int sched_yield(void)
{
	return (int)os_raw_syscall(SYS_sched_yield, 0, 0, 0, 0, 0, 0);
}

/* The loader (clockblob.h, BLOB_LOAD). Runs on the thread's stack below
 * its red zone, once, before the process runs on; never returns. */
extern char blob_data_start[] HIDDEN, blob_end[] HIDDEN;

static bool failed(long r)
{
	return r < 0 && r > -4096;
}

__attribute__((noreturn, used)) void blob_load(long fd, long dir, unsigned long nslots, unsigned long slot,
						 unsigned long keep, unsigned long mark) HIDDEN;
void blob_load(long fd, long dir, unsigned long nslots, unsigned long slot, unsigned long keep, unsigned long mark)
{
	unsigned long page = cp_page_size();
	long step = 1, region = 0;
	long r = os_raw_syscall(SYS_mmap, (long)blob_data_start, blob_end - blob_data_start, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	if (r != (long)blob_data_start)
		goto out;
	step = 2;
	region = r = os_raw_syscall(SYS_mmap, 0, (long)((nslots + 1) * page), PROT_NONE,
				    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (failed(r) || r == 0 || slot >= nslots || nslots > CP_MAX_SLOTS)
		goto out;
	/* Each page side by side: the slot's own read-write from fd, the
	 * others read-only from their files in dir (opened with the marker,
	 * which the filter leaves in the kernel, then closed). */
	for (unsigned long i = 0; i <= nslots; i++) {
		long f = fd;
		step = 3;
		if (i != slot) {
			char name[4];
			cp_page_name((unsigned)i, (unsigned)nslots, name);
			f = os_raw_syscall(SYS_openat, dir, (long)name, O_RDONLY | O_CLOEXEC, 0, (long)mark, 0);
			if (failed(f)) {
				r = f;
				goto out;
			}
		}
		step = 4;
		r = os_raw_syscall(SYS_mmap, region + (long)(i * page), (long)page,
				   i == slot ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED | MAP_FIXED, f, 0);
		if (i != slot)
			(void)os_raw_syscall(SYS_close, f, 0, 0, 0, 0, 0);
		if (r != region + (long)(i * page))
			goto out;
	}
	step = 0;
	r = region;
out:
	/* The descriptors go whatever happened, unless they are the
	 * process's own. */
	if (!keep && (os_raw_syscall(SYS_close, fd, 0, 0, 0, 0, 0) | os_raw_syscall(SYS_close, dir, 0, 0, 0, 0, 0)) != 0 &&
	    step == 0) {
		step = 5;
		r = -EBADF;
	}
	__asm__ volatile("jmp blob_trap" : : "a"(r), "d"(step));
	__builtin_unreachable();
}

long blob_clock_gettime(clockid_t id, struct timespec *ts) HIDDEN;
long blob_clock_gettime(clockid_t id, struct timespec *ts)
{
	return clockpath_clock_gettime(&blob_path, id, ts);
}

long blob_gettimeofday(struct timeval *tv, struct timezone *tz) HIDDEN;
long blob_gettimeofday(struct timeval *tv, struct timezone *tz)
{
	return clockpath_gettimeofday(&blob_path, tv, tz);
}

long blob_time(time_t *t) HIDDEN;
long blob_time(time_t *t)
{
	return clockpath_time(&blob_path, t);
}
