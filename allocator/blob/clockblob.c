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

#include "clockblob.h"
#include "clockpath.h"

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
	return (int)clockpath_syscall(SYS_sched_yield, 0, 0, 0, 0);
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
