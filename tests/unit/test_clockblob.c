/* test_clockblob.c — the clock blob (allocator/blob/clockblob.h), as
 * diehard places it in a static program, under ASan and UBSan around it:
 * the built blob copied to two arbitrary places in this process (no
 * relocation may matter), its data page given a struct clock_path over a
 * region of one replica slot, and its entry points called through the
 * head's table. Every read must be published in the slot's page and match
 * what diehard's side harvests, both copies counting as one slot (a forked
 * child's and its parent's reads), monotonic clocks forward; gettimeofday
 * and time real; with ready false, the plain system call and no count.
 * Then the loader (BLOB_LOAD), run here as diehard runs it in a stopped
 * thread, caught at its trap (SIGTRAP) with a handler: the data page mapped
 * afresh, the region mapped from a memfd as clocks.c maps it (the other
 * slot's page and diehard's read-only), the descriptor closed or kept.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "blob/clockblob.h"
#include "clockpage.h"
#define CLOCKPATH_LAYOUT_ONLY
#include "clockpath.h"
#include "tap.h"

__asm__(".pushsection .rodata\n"
	".balign 64\n"
	"test_blob_start:\n"
	".incbin \"" DIEHARD_CLOCKBLOB "\"\n"
	"test_blob_end:\n"
	".popsection\n");
extern const uint8_t test_blob_start[], test_blob_end[];

typedef long gettime_fn(clockid_t, struct timespec *);
typedef long gettimeofday_fn(struct timeval *, struct timezone *);
typedef long time_fn(time_t *);

struct copy {
	uint8_t *at;
	struct clock_path *path;
	gettime_fn *gettime;
	gettimeofday_fn *gettimeofday;
	time_fn *time;
};

static uint64_t word(size_t at)
{
	uint64_t w;
	memcpy(&w, test_blob_start + at, sizeof w);
	return w;
}

/* The blob mapped as the graft maps it: code read and execute, the data
 * page read and write (zeroed), the view written there. */
static struct copy place(const struct clock_path *path)
{
	uint64_t code = word(BLOB_CODE_AT), total = word(BLOB_SIZE_AT);
	struct copy c = { 0 };
	uint8_t *at = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (at == MAP_FAILED)
		abort();
	memcpy(at, test_blob_start, code);
	if (mprotect(at, code, PROT_READ | PROT_EXEC) != 0)
		abort();
	c.at = at;
	c.path = (struct clock_path *)(at + code);
	*c.path = *path;
	c.gettime = (gettime_fn *)(uintptr_t)(at + BLOB_CLOCK_GETTIME);
	c.gettimeofday = (gettimeofday_fn *)(uintptr_t)(at + BLOB_GETTIMEOFDAY);
	c.time = (time_fn *)(uintptr_t)(at + BLOB_TIME);
	return c;
}

/* Diehard's log of harvested entries of CLOCK_MONOTONIC. */
#define READS 30000
static int64_t logged[READS][2];
static uint64_t nlogged;
static int out_of_order;

static void put(unsigned key, uint64_t n, const struct cp_value *v, unsigned by, void *arg)
{
	(void)by;
	(void)arg;
	if (key != CLOCK_MONOTONIC)
		return;
	if (n != nlogged)
		out_of_order++;
	if (n < READS) {
		logged[n][0] = v->a;
		logged[n][1] = v->b;
	}
	nlogged = n + 1;
}

/* The loader's end: its trap's SIGTRAP, with rax, rdx and where. */
static sigjmp_buf at_trap;
static volatile uint64_t trap_rax, trap_rdx, trap_rip;

static void on_trap(int sig, siginfo_t *si, void *ctx)
{
	(void)sig;
	(void)si;
	const ucontext_t *uc = ctx;
	trap_rax = (uint64_t)uc->uc_mcontext.gregs[REG_RAX];
	trap_rdx = (uint64_t)uc->uc_mcontext.gregs[REG_RDX];
	trap_rip = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
	siglongjmp(at_trap, 1);
}

typedef void load_fn(long fd, long dir, unsigned long nslots, unsigned long slot, unsigned long keep,
		     unsigned long mark);

/* Runs a fresh copy's loader over a memfd region of nslots slots, as
 * slot; true when it reached the trap. */
static bool run_loader(struct copy *c, int fd, int dir, unsigned long nslots, unsigned long slot, unsigned long keep)
{
	load_fn *load = (load_fn *)(uintptr_t)(c->at + BLOB_LOAD);
	trap_rax = trap_rdx = trap_rip = 0;
	if (sigsetjmp(at_trap, 1) == 0) {
		load(fd, dir, nslots, slot, keep, 0);
		return false;
	}
	return trap_rip == (uint64_t)(uintptr_t)(c->at + BLOB_TRAP + 1);
}

/* The protections /proc/self/maps gives the mapping that starts at p
 * ("????" if none does). */
static const char *protection(const void *p)
{
	static char perms[4][5];
	static unsigned next;
	char *out = perms[next++ % 4];
	strcpy(out, "????");
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	while (f != NULL && fgets(line, sizeof line, f) != NULL) {
		unsigned long lo;
		char pr[5];
		if (sscanf(line, "%lx-%*x %4s", &lo, pr) == 2 && lo == (unsigned long)(uintptr_t)p) {
			memcpy(out, pr, 5);
			break;
		}
	}
	if (f != NULL)
		fclose(f);
	return out;
}

static int64_t ns(const struct timespec *t)
{
	return (int64_t)t->tv_sec * 1000000000 + t->tv_nsec;
}

int main(void)
{
	uint64_t code = word(BLOB_CODE_AT), total = word(BLOB_SIZE_AT);
	CHECK((size_t)(test_blob_end - test_blob_start) == total && code % 4096 == 0 && total > code &&
		      total - code >= sizeof(struct clock_path),
	      "the built blob: its head gives its code and total sizes (%llu, %llu bytes)", (unsigned long long)code,
	      (unsigned long long)total);

	/* One replica slot and diehard's page. */
	size_t page = cp_page_size();
	uint8_t *region = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (region == MAP_FAILED)
		return 1;
	struct clock_path path;
	memset(&path, 0, sizeof path);
	path.view.nslots = 1;
	path.view.self = 0;
	path.view.secret = 0x5eed5eed12345678ull;
	for (unsigned i = 0; i <= 1; i++) {
		path.view.pages[i] = (struct cp_page *)(region + i * page);
		cp_page_init(path.view.pages[i], i, 1);
	}
	atomic_store(&path.view.pages[1]->used, 1);
	path.mark_real = 1ull << 63 | 0x1234;
	path.mark_fallback = 1ull << 63 | 0x5678;
	path.marked = true;
	struct cp_view dh = path.view;
	dh.self = 1;

	CHECK(test_blob_start[BLOB_CLOCK_GETTIME] == 0xe9 && test_blob_start[BLOB_GETTIMEOFDAY] == 0xe9 &&
		      test_blob_start[BLOB_TIME] == 0xe9 && test_blob_start[BLOB_LOAD] == 0xe9 &&
		      test_blob_start[BLOB_TRAP] == 0xcc,
	      "the head: jumps to the entry points and the loader, the trap (int3) where clockblob.h says");
	struct copy a = place(&path), b = place(&path);

	/* Not ready: the plain system call, nothing counted. */
	a.path->ready = false;
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	long r = a.gettime(CLOCK_MONOTONIC, &t);
	CHECK(r == 0 && ns(&t) >= ns(&t0) && atomic_load(&path.view.pages[0]->count[CLOCK_MONOTONIC]) == 0,
	      "not ready: the system call's real value, no read counted");
	a.path->ready = true;
	b.path->ready = true;

	/* Reads through both copies, diehard harvesting now and then. */
	int64_t got[READS];
	int backwards = 0, failed = 0;
	for (int i = 0; i < READS; i++) {
		struct copy *c = (i / 100) % 2 ? &b : &a;
		if (c->gettime(CLOCK_MONOTONIC, &t) != 0)
			failed++;
		got[i] = ns(&t);
		if (i > 0 && got[i] < got[i - 1])
			backwards++;
		if (i % 1000 == 999)
			(void)cp_harvest(&dh, CLOCK_MONOTONIC, UINT64_MAX, put, NULL);
	}
	(void)cp_harvest(&dh, CLOCK_MONOTONIC, UINT64_MAX, put, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t);
	CHECK(failed == 0 && backwards == 0 && got[0] >= ns(&t0) && got[READS - 1] <= ns(&t),
	      "%d reads through two copies: real, monotonic (%d failed, %d went back)", READS, failed, backwards);
	CHECK(atomic_load(&path.view.pages[0]->count[CLOCK_MONOTONIC]) == READS,
	      "the slot's page counts every read of both copies (%llu)",
	      (unsigned long long)atomic_load(&path.view.pages[0]->count[CLOCK_MONOTONIC]));
	int differ = 0;
	for (uint64_t n = 0; n < nlogged && n < READS; n++)
		if (logged[n][0] * 1000000000 + logged[n][1] != got[n])
			differ++;
	CHECK(nlogged == READS && out_of_order == 0 && differ == 0,
	      "diehard's harvest has every entry in order, each the value the read returned (%llu harvested, %d differ)",
	      (unsigned long long)nlogged, differ);

	/* gettimeofday (with the timezone) and time: real. */
	struct timeval tv;
	struct timezone tz = { -1, -1 };
	time_t now = time(NULL), seen = 0;
	long g = a.gettimeofday(&tv, &tz);
	long s = b.time(&seen);
	CHECK(g == 0 && tv.tv_sec >= now && tv.tv_sec <= now + 1 && tv.tv_usec >= 0 && tv.tv_usec < 1000000 &&
		      tz.tz_minuteswest != -1,
	      "gettimeofday through the blob: the real time and a timezone");
	CHECK(s == seen && seen >= now && seen <= now + 1, "time through the blob: the real time, returned and stored");
	CHECK(atomic_load(&path.view.pages[0]->count[CP_KEY_GETTIMEOFDAY]) == 1 &&
		      atomic_load(&path.view.pages[0]->count[CP_KEY_TIME]) == 1,
	      "each counted in the slot's page");

	/* A clock the path does not serve (a CPU-time clock): the system call. */
	r = a.gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	CHECK(r == 0 && atomic_load(&path.view.pages[0]->count[CLOCK_PROCESS_CPUTIME_ID]) == 0,
	      "a CPU-time clock: the system call, not counted");
	r = a.gettime((clockid_t)-9999, &t);
	CHECK(r == -22, "a bad clock id: the system call's -EINVAL (%ld)", r);

	/* The loader, over the files of 2 slots' pages and diehard's (a
	 * directory of them, clockfs.h), as slot 1. */
	struct sigaction sa = { .sa_sigaction = on_trap, .sa_flags = SA_SIGINFO };
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGTRAP, &sa, NULL) != 0)
		return 1;
	char tmp[] = "/tmp/test-clockblob-XXXXXX";
	if (mkdtemp(tmp) == NULL)
		return 1;
	int dir = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	for (unsigned i = 0; dir >= 0 && i <= 2; i++) {
		char name[4];
		cp_page_name(i, 2, name);
		int f = openat(dir, name, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (f < 0 || ftruncate(f, (off_t)page) != 0)
			return 1;
		close(f);
	}
	int fd = dir < 0 ? -1 : openat(dir, "1", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return 1;
	size_t len = 3 * page;
	struct copy c = place(&path);
	c.path->ready = true; /* the loader maps the data page afresh: zeros */
	bool trapped = run_loader(&c, fd, dir, 2, 1, 0);
	uint8_t *reg = (uint8_t *)(uintptr_t)trap_rax;
	CHECK(trapped && trap_rdx == 0 && trap_rax != 0 && trap_rax < (uint64_t)-4096,
	      "the loader ends at its trap: the region's address, no step failed (rdx %llu)",
	      (unsigned long long)trap_rdx);
	CHECK(c.path->ready == false, "the data page mapped afresh over its part (zeros)");
	CHECK(fcntl(fd, F_GETFD) == -1 && errno == EBADF && fcntl(dir, F_GETFD) == -1 && errno == EBADF,
	      "the page's and the directory's descriptors closed");
	if (trapped && trap_rdx == 0) {
		/* Writable: slot 1's page; read-only: slot 0's and diehard's
		 * (as /proc/self/maps has them). */
		CHECK(strcmp(protection(reg), "r--s") == 0 && strcmp(protection(reg + page), "rw-s") == 0 &&
			      strcmp(protection(reg + 2 * page), "r--s") == 0,
		      "its own page read-write, slot 0's and diehard's read-only (%s %s %s)", protection(reg),
		      protection(reg + page), protection(reg + 2 * page));
		munmap(reg, len);
	}
	dir = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	fd = dir < 0 ? -1 : openat(dir, "0", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return 1;
	struct copy k = place(&path);
	trapped = run_loader(&k, fd, dir, 2, 0, 1);
	CHECK(trapped && trap_rdx == 0 && fcntl(fd, F_GETFD) >= 0 && fcntl(dir, F_GETFD) >= 0,
	      "keep: the same, the descriptors left open");
	if (trapped && trap_rdx == 0)
		munmap((void *)(uintptr_t)trap_rax, len);
	struct copy e = place(&path);
	trapped = run_loader(&e, 9999, dir, 2, 0, 0);
	CHECK(trapped && trap_rdx == 4 && (int64_t)trap_rax == -EBADF,
	      "a bad page descriptor: the step that failed (its mmap) and its error (step %llu)",
	      (unsigned long long)trap_rdx);
	close(fd);
	dir = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct copy m = place(&path);
	fd = openat(dir, "0", O_RDWR | O_CLOEXEC);
	(void)unlinkat(dir, "1", 0);
	trapped = run_loader(&m, fd, dir, 2, 0, 0);
	CHECK(trapped && trap_rdx == 3 && (int64_t)trap_rax == -ENOENT,
	      "a page missing from the directory: the step that failed (its open) and its error (step %llu)",
	      (unsigned long long)trap_rdx);
	for (unsigned i = 0; i <= 2; i++) {
		char name[4];
		cp_page_name(i, 2, name);
		(void)unlinkat(dir, name, 0);
	}
	close(dir);
	(void)rmdir(tmp);
	return tap_done();
}
