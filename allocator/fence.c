/* fence.c — Kefence's fence mode; see fence.h for the design.
 *
 * Invariants (under the lock): map[p] != 0 exactly for the pages of records
 * that are live or in the quarantine; a live record's pages are read-write,
 * a quarantined one's inaccessible; the pages at first - 1 and first +
 * npages of a record are never another record's; next_page is the first page
 * the bump pointer may hand out (pages below it are in use or were, until
 * the region wraps).
 */
#include "fence.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include "config.h"
#include "msg.h"
#include "os.h"
#include "segv.h"
#include "frames.h"

#define FENCE_REGION_MAX ((size_t)64 << 30)
#define FENCE_REGION_MIN ((size_t)1 << 30)
/* Records: live objects (at most a quarter of vm.max_map_count, 16382 by
 * default) and the quarantine. Past it, objects are not fenced. */
#define FENCE_RECORDS ((size_t)1 << 17)
/* Freed objects whose records are kept (their pages inaccessible and not
 * reused) before retirement: a stale access within the next this many
 * fenced frees is reported with the free's stack. */
#define FENCE_QUARANTINE ((size_t)65536)
#define FENCE_FRAMES 16

enum rec_state { REC_FREE, REC_LIVE, REC_QUARANTINED };

struct fence_rec {
	uintptr_t user;
	size_t size;
	size_t first;    /* page index of its first page */
	uint32_t npages;
	uint32_t qnext;  /* quarantine FIFO, or the free list */
	uint8_t state;
	uint8_t side;    /* 0: against the page after (overflow), 1: before */
	uint8_t nalloc, nfree;
	uint32_t thread;
	uintptr_t alloc_pcs[FENCE_FRAMES];
	uintptr_t free_pcs[FENCE_FRAMES];
};

bool fence_on;
uintptr_t fence_lo, fence_hi;

static struct fence_config cfg;
static size_t page;
static size_t npages;              /* of the region */
static _Atomic uint32_t *map;      /* page -> record index */
static struct fence_rec *recs;
static size_t rec_bump = 1, rec_free;
static size_t next_page = 1;
static bool wrapped;
static uint32_t q_head, q_tail;
static size_t q_count;
static size_t live, budget;
static size_t fenced, unfenced, faults;
static bool said_budget;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char helper[PATH_MAX];

/* Report buffers: one report at a time (the reporting flag). */
static char exe_path[PATH_MAX];

/* ---- settings ---- */

static bool parse_u64(const char **s, uint64_t *v)
{
	const char *p = *s;
	uint64_t x = 0;
	if (*p < '0' || *p > '9')
		return false;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (x > (UINT64_MAX - 9) / 10)
			return false;
		x = x * 10 + (uint64_t)(*p - '0');
	}
	if (*p == 'k' || *p == 'K') {
		if (x > UINT64_MAX >> 10)
			return false;
		x <<= 10, p++;
	}
	*v = x;
	*s = p;
	return true;
}

bool fence_parse(const char *s, struct fence_config *f)
{
	struct fence_config g = { .on = true, .rate = 1, .min = 0, .max = SIZE_MAX, .action = f->action };
	uint64_t n;
	if (strncmp(s, "all", 3) == 0) {
		s += 3;
	} else if (strncmp(s, "1/", 2) == 0) {
		s += 2;
		if (!parse_u64(&s, &n) || n == 0 || n > (1u << 30))
			return false;
		g.rate = n;
	} else {
		return false;
	}
	if (*s == ':') {
		uint64_t lo, hi;
		s++;
		if (!parse_u64(&s, &lo) || *s++ != '-' || !parse_u64(&s, &hi) || lo > hi)
			return false;
		g.min = (size_t)lo;
		g.max = (size_t)hi;
	}
	if (*s != '\0')
		return false;
	*f = g;
	return true;
}

bool fence_parse_action(const char *s, enum fence_action *a)
{
	if (strcmp(s, "abort") == 0)
		*a = FENCE_ABORT;
	else if (strcmp(s, "readonly") == 0)
		*a = FENCE_READONLY;
	else if (strcmp(s, "readwrite") == 0)
		*a = FENCE_READWRITE;
	else
		return false;
	return true;
}

/* ---- stacks ---- */

static uint8_t capture(uintptr_t *pcs)
{
	return (uint8_t)frames_capture(pcs, FENCE_FRAMES);
}

/* ---- the region ---- */

static void find_helper(void)
{
	Dl_info info;
	if (dladdr((void *)fence_start, &info) != 0 && info.dli_fbase != NULL && info.dli_fname != NULL &&
	    info.dli_fname[0] == '/') {
		const char *slash = strrchr(info.dli_fname, '/');
		size_t dir = (size_t)(slash - info.dli_fname) + 1;
		static const char name[] = "diehard-symbolize";
		if (dir + sizeof name <= sizeof helper) {
			memcpy(helper, info.dli_fname, dir);
			memcpy(helper + dir, name, sizeof name);
			if (access(helper, X_OK) == 0)
				return;
		}
	}
#ifdef DIEHARD_LIBEXECDIR
	static const char installed[] = DIEHARD_LIBEXECDIR "/diehard-symbolize";
	if (sizeof installed <= sizeof helper && access(installed, X_OK) == 0) {
		memcpy(helper, installed, sizeof installed);
		return;
	}
#endif
	helper[0] = '\0';
}

bool fence_start(const struct fence_config *f)
{
	cfg = *f;
	page = os_page_size();
	size_t len = FENCE_REGION_MAX;
	void *lo = NULL;
	while ((lo = os_reserve(len, page)) == NULL && len > FENCE_REGION_MIN)
		len /= 2;
	if (lo == NULL)
		return false;
	npages = len / page;
	map = mmap(NULL, npages * sizeof *map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	recs = mmap(NULL, FENCE_RECORDS * sizeof *recs, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (map == MAP_FAILED || recs == MAP_FAILED) {
		if (map != MAP_FAILED)
			(void)munmap((void *)map, npages * sizeof *map);
		if (recs != MAP_FAILED)
			(void)munmap(recs, FENCE_RECORDS * sizeof *recs);
		(void)os_release(lo, len);
		return false;
	}
	fence_lo = (uintptr_t)lo;
	fence_hi = fence_lo + len;
	budget = (size_t)os_read_number("/proc/sys/vm/max_map_count", 65530) / 4;
	find_helper();
	if (!segv_install())
		return false;
	fence_on = true;
	return true;
}

__thread uint32_t fence_countdown __attribute__((tls_model("initial-exec")));

bool fence_wanted(size_t size, struct rng *r)
{
	if (fence_countdown > 1) {
		fence_countdown--;
		return false;
	}
	/* Due: the next gap is uniform in [1, 2 rate - 1], mean rate. */
	fence_countdown = cfg.rate == 1 ? 1 : 1 + (uint32_t)rng_below(r, 2 * cfg.rate - 1);
	return size >= cfg.min && size <= cfg.max;
}

static void say_budget(void)
{
	if (said_budget)
		return;
	said_budget = true;
	struct msg m = { .len = 0 };
	msg_str(&m, "diehard: fence: ");
	msg_u64(&m, budget);
	msg_str(&m, " objects fenced at once (a quarter of vm.max_map_count); later ones are not fenced until some are freed");
	msg_send(&m);
}

/* Retires the oldest quarantined record: its pages free for the bump
 * pointer once it wraps (their memory went at the free). With the lock. */
static void retire_oldest(void)
{
	uint32_t ri = q_head;
	struct fence_rec *rec = &recs[ri];
	q_head = rec->qnext;
	if (q_head == 0)
		q_tail = 0;
	q_count--;
	for (size_t p = rec->first; p < rec->first + rec->npages; p++)
		atomic_store_explicit(&map[p], 0, memory_order_relaxed);
	rec->state = REC_FREE;
	rec->qnext = (uint32_t)rec_free;
	rec_free = ri;
}

static bool pages_free(size_t from, size_t n)
{
	for (size_t p = from; p < from + n; p++)
		if (atomic_load_explicit(&map[p], memory_order_relaxed) != 0)
			return false;
	return true;
}

/* n pages with a free page before and after; the first, or SIZE_MAX. */
static size_t take_pages(size_t n)
{
	for (int round = 0; round < 2; round++) {
		while (next_page + n + 1 <= npages) {
			if (!wrapped || pages_free(next_page - 1, n + 2)) {
				size_t first = next_page;
				next_page += n + 1;
				return first;
			}
			next_page++;
		}
		wrapped = true;
		next_page = 1;
	}
	return SIZE_MAX;
}

void *fence_alloc(size_t size, size_t align, struct rng *r, bool fill, bool zeroed)
{
	size_t rounded, n;
	if (!os_page_object(size, &align, page, &rounded, &n))
		return NULL;
	uint8_t side = rng_next(r) & 1;
	uintptr_t pcs[FENCE_FRAMES];
	uint8_t npcs = capture(pcs);

	pthread_mutex_lock(&lock);
	if (live >= budget) {
		unfenced++;
		say_budget();
		pthread_mutex_unlock(&lock);
		return NULL;
	}
	if (n > UINT32_MAX || (rec_free == 0 && rec_bump == FENCE_RECORDS)) {
		unfenced++;
		pthread_mutex_unlock(&lock);
		return NULL;
	}
	size_t first = take_pages(n);
	while (first == SIZE_MAX && q_head != 0) {
		retire_oldest();
		first = take_pages(n);
	}
	if (first == SIZE_MAX) {
		unfenced++;
		pthread_mutex_unlock(&lock);
		return NULL;
	}
	char *start = (char *)(fence_lo + first * page);
	if (wrapped)
		(void)mprotect(start - page, (n + 2) * page, PROT_NONE);
	if (mprotect(start, n * page, PROT_READ | PROT_WRITE) != 0) {
		unfenced++;
		pthread_mutex_unlock(&lock);
		return NULL;
	}
	size_t ri = rec_free != 0 ? rec_free : rec_bump++;
	struct fence_rec *rec = &recs[ri];
	if (ri == rec_free)
		rec_free = rec->qnext;
	rec->size = size;
	rec->first = first;
	rec->npages = (uint32_t)n;
	rec->side = side;
	rec->user = side == 0 ? (uintptr_t)start + n * page - rounded : (uintptr_t)start;
	rec->nalloc = npcs;
	memcpy(rec->alloc_pcs, pcs, sizeof pcs);
	rec->nfree = 0;
	rec->qnext = 0;
	rec->thread = (uint32_t)syscall(SYS_gettid);
	rec->state = REC_LIVE;
	for (size_t p = first; p < first + n; p++)
		atomic_store_explicit(&map[p], (uint32_t)ri, memory_order_release);
	live++;
	fenced++;
	void *user = (void *)rec->user;
	pthread_mutex_unlock(&lock);

	/* Fresh and retired pages read zero (MADV_DONTNEED); a guard page that
	 * a continued fault mapped may not, and is reused once wrapped. */
	if (zeroed && wrapped)
		memset(user, 0, size);
	else if (fill)
		rng_fill(r, user, size);
	return user;
}

/* The live or quarantined record whose object starts at p, or 0. */
static uint32_t record_at(const void *p)
{
	size_t pg = ((uintptr_t)p - fence_lo) / page;
	uint32_t ri = atomic_load_explicit(&map[pg], memory_order_acquire);
	if (ri == 0 || recs[ri].user != (uintptr_t)p)
		return 0;
	return ri;
}

int fence_free(void *p)
{
	uintptr_t pcs[FENCE_FRAMES];
	uint8_t npcs = capture(pcs);
	pthread_mutex_lock(&lock);
	uint32_t ri = record_at(p);
	int verdict = ri == 0 ? 2 : recs[ri].state == REC_QUARANTINED ? 1 : 0;
	if (verdict == 0) {
		struct fence_rec *rec = &recs[ri];
		/* Inaccessible, memory released, merged with the guards around it:
		 * a freed object costs no mapping (os_discard says why). */
		(void)os_discard((char *)(fence_lo + rec->first * page), rec->npages * page);
		rec->state = REC_QUARANTINED;
		rec->nfree = npcs;
		memcpy(rec->free_pcs, pcs, sizeof pcs);
		rec->qnext = 0;
		if (q_tail != 0)
			recs[q_tail].qnext = ri;
		else
			q_head = ri;
		q_tail = ri;
		q_count++;
		live--;
		if (q_count > FENCE_QUARANTINE)
			retire_oldest();
	}
	pthread_mutex_unlock(&lock);
	return verdict;
}

size_t fence_usable(const void *p)
{
	pthread_mutex_lock(&lock);
	uint32_t ri = record_at(p);
	size_t size = ri != 0 && recs[ri].state == REC_LIVE ? recs[ri].size : 0;
	pthread_mutex_unlock(&lock);
	return size;
}

void fence_lock(void)
{
	pthread_mutex_lock(&lock);
}

void fence_unlock(void)
{
	pthread_mutex_unlock(&lock);
}

void fence_reset_lock(void)
{
	pthread_mutex_init(&lock, NULL);
}

void fence_totals(struct fence_totals *t)
{
	pthread_mutex_lock(&lock);
	t->fenced = fenced;
	t->unfenced = unfenced;
	t->live = live;
	t->faults = faults;
	pthread_mutex_unlock(&lock);
}

/* ---- the report ---- */

/* v in hexadecimal, as few digits as it takes. */
static void hex(struct msg *m, uint64_t v)
{
	int digits = 1;
	while (digits < 16 && v >> (4 * digits) != 0)
		digits++;
	msg_hex(m, v, digits);
}

/* Where a report's lines go: a descriptor (stderr, the pipe to
 * diehard-symbolize), or a buffer written to DIEHARD_FENCE_LOG in one
 * write(2), so processes appending to one log never interleave reports. */
struct sink {
	int fd;      /* -1: the buffer */
	char *buf;
	size_t len, cap;
};

static void put(struct sink *s, struct msg *m)
{
	if (s->fd >= 0) {
		msg_send_to(m, s->fd);
		return;
	}
	if (s->len + m->len + 1 > s->cap)
		return; /* the rest of a report too long for the log is dropped */
	memcpy(s->buf + s->len, m->buf, m->len);
	s->len += m->len;
	s->buf[s->len++] = '\n';
}

/* One frame: "    #i 0xPC 0xBASE MODULE", which diehard-symbolize rewrites;
 * without it, "    #i MODULE+0xOFF". */
static void frame_line(struct sink *s, unsigned i, uintptr_t pc, bool raw)
{
	struct msg m = { .len = 0 };
	Dl_info info;
	bool known = dladdr((void *)(pc - 1), &info) != 0 && info.dli_fname != NULL;
	msg_str(&m, "    #");
	msg_u64(&m, i);
	if (raw) {
		msg_str(&m, " 0x");
		hex(&m, pc);
		msg_str(&m, " 0x");
		hex(&m, known ? (uint64_t)(uintptr_t)info.dli_fbase : 0);
		msg_str(&m, " ");
	} else {
		msg_str(&m, " ");
	}
	const char *path = known && info.dli_fname[0] != '\0' ? info.dli_fname : NULL;
	if (path == NULL || path[0] != '/') {
		ssize_t n = readlink("/proc/self/exe", exe_path, sizeof exe_path - 1);
		exe_path[n > 0 ? n : 0] = '\0';
		path = exe_path;
	}
	msg_str(&m, path);
	if (!raw) {
		msg_str(&m, "+0x");
		hex(&m, pc - (known ? (uintptr_t)info.dli_fbase : 0));
	}
	put(s, &m);
}

static void stack_lines(struct sink *s, const char *title, const uintptr_t *pcs, unsigned n, bool raw)
{
	if (title != NULL) {
		struct msg m = { .len = 0 };
		msg_str(&m, title);
		put(s, &m);
	}
	for (unsigned i = 0; i < n; i++)
		frame_line(s, i, pcs[i], raw);
}

/* The faulting access's stack: the interrupted frame first. */
struct fault_unwind {
	uintptr_t pcs[FENCE_FRAMES];
	unsigned n;
};

/* Writes the report to s (a pipe to diehard-symbolize, stderr, the log). */
static void write_report(struct sink *s, bool raw, const char *kind, const char *access, const struct fence_rec *rec,
			 intptr_t offset, const struct fault_unwind *fu, const char *outcome)
{
	struct msg m = { .len = 0 };
	msg_str(&m, "diehard: fence: ");
	msg_str(&m, kind);
	msg_str(&m, ": ");
	msg_str(&m, access);
	msg_str(&m, " at offset ");
	if (offset < 0) {
		msg_str(&m, "-");
		msg_u64(&m, (uint64_t)-offset);
	} else {
		msg_u64(&m, (uint64_t)offset);
	}
	msg_str(&m, " of a ");
	msg_u64(&m, rec->size);
	msg_str(&m, "-byte object at 0x");
	hex(&m, rec->user);
	if (offset >= (intptr_t)rec->size) {
		msg_str(&m, " (");
		msg_u64(&m, (uint64_t)offset - rec->size);
		msg_str(&m, " bytes past its end)");
	}
	put(s, &m);
	stack_lines(s, "diehard: fence: the access:", fu->pcs, fu->n, raw);
	m.len = 0;
	msg_str(&m, "diehard: fence: allocated by thread ");
	msg_u64(&m, rec->thread);
	msg_str(&m, ":");
	put(s, &m);
	stack_lines(s, NULL, rec->alloc_pcs, rec->nalloc, raw);
	if (rec->state == REC_QUARANTINED)
		stack_lines(s, "diehard: fence: freed:", rec->free_pcs, rec->nfree, raw);
	m.len = 0;
	msg_str(&m, "diehard: fence: ");
	msg_str(&m, outcome);
	put(s, &m);
}

/* The log's buffer: one report at a time (the reporting flag). */
static char log_buf[32768];

/* The report: appended to DIEHARD_FENCE_LOG when it is set (raw frames:
 * diehard reads them, or diehard-symbolize < LOG), else on stderr, through
 * diehard-symbolize when there is one: a child (a raw clone, so no fork
 * handler runs in this possibly broken process) execs it reading a pipe;
 * its stderr is ours. */
static void report(const char *kind, const char *access, const struct fence_rec *rec, intptr_t offset,
		   const struct fault_unwind *fu, const char *outcome)
{
	if (cfg.log != NULL) {
		int fd = open(cfg.log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
		if (fd >= 0) {
			struct sink s = { .fd = -1, .buf = log_buf, .cap = sizeof log_buf };
			write_report(&s, true, kind, access, rec, offset, fu, outcome);
			ssize_t w;
			while ((w = write(fd, log_buf, s.len)) < 0 && errno == EINTR)
				;
			close(fd);
			if (w == (ssize_t)s.len)
				return;
		}
		struct msg m = { .len = 0 };
		msg_str(&m, "diehard: fence: cannot write DIEHARD_FENCE_LOG ");
		msg_str(&m, cfg.log);
		msg_str(&m, ": the report follows here");
		msg_send(&m);
	}
	int fds[2];
	if (helper[0] != '\0' && pipe2(fds, O_CLOEXEC) == 0) {
		pid_t pid = (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
		if (pid == 0) {
			if (dup2(fds[0], 0) < 0)
				_exit(127);
			char *const argv[] = { helper, NULL };
			char *const envp[] = { NULL };
			execve(helper, argv, envp);
			_exit(127);
		}
		close(fds[0]);
		if (pid > 0) {
			struct sink s = { .fd = fds[1] };
			write_report(&s, true, kind, access, rec, offset, fu, outcome);
			close(fds[1]);
			int status = 0;
			pid_t w;
			while ((w = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
				;
			/* ECHILD: the program reaps its children itself; the
			 * helper had the report. */
			if (w < 0 || (WIFEXITED(status) && WEXITSTATUS(status) == 0))
				return;
		} else {
			close(fds[1]);
		}
	}
	struct sink s = { .fd = 2 };
	write_report(&s, false, kind, access, rec, offset, fu, outcome);
}

static atomic_flag reporting = ATOMIC_FLAG_INIT;

bool fence_fault(const siginfo_t *si, void *uctx)
{
	uintptr_t a = (uintptr_t)si->si_addr;
	while (atomic_flag_test_and_set(&reporting))
		;
	size_t pg = (a - fence_lo) / page;
	bool write = false;
#if defined(__x86_64__)
	write = (((ucontext_t *)uctx)->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#endif
	uint32_t here = atomic_load(&map[pg]);
	uint32_t left = pg > 0 ? atomic_load(&map[pg - 1]) : 0;
	uint32_t right = pg + 1 < npages ? atomic_load(&map[pg + 1]) : 0;
	const struct fence_rec *rec = NULL;
	const char *kind = NULL;
	if (here != 0) {
		rec = &recs[here];
		kind = rec->state == REC_QUARANTINED ? "use-after-free" : "fault in a live object";
	} else if (left != 0 || right != 0) {
		/* A guard page: the nearer neighbour's. */
		const struct fence_rec *l = left != 0 ? &recs[left] : NULL, *r = right != 0 ? &recs[right] : NULL;
		uintptr_t dl = l != NULL ? a - (l->user + l->size) : UINTPTR_MAX;
		uintptr_t dr = r != NULL ? r->user - a : UINTPTR_MAX;
		rec = dl <= dr ? l : r;
		kind = rec->state == REC_QUARANTINED ? "use-after-free" : rec == l ? "overflow" : "underflow";
	}
	if (rec == NULL) {
		atomic_flag_clear(&reporting);
		return false; /* a wild access into the region's free pages */
	}
	struct fault_unwind fu = { .n = 0 };
#if defined(__x86_64__)
	fu.n = frames_capture_from((uintptr_t)((ucontext_t *)uctx)->uc_mcontext.gregs[REG_RIP], fu.pcs, FENCE_FRAMES);
#endif
	intptr_t offset = (intptr_t)(a - rec->user);
	const char *access = write ? "write" : "read";
#if !defined(__x86_64__)
	access = "access";
#endif
	faults++;
	int prot = 0;
	const char *outcome = "aborting (DIEHARD_FENCE_ACTION=abort)";
	if (cfg.action == FENCE_READWRITE) {
		prot = PROT_READ | PROT_WRITE;
		outcome = "going on with the page mapped read-write (DIEHARD_FENCE_ACTION=readwrite)";
	} else if (cfg.action == FENCE_READONLY && !write) {
		prot = PROT_READ;
		outcome = "going on with the page mapped read-only (DIEHARD_FENCE_ACTION=readonly)";
	} else if (cfg.action == FENCE_READONLY) {
		outcome = "aborting: a write, and DIEHARD_FENCE_ACTION=readonly";
	}
	report(kind, access, rec, offset, &fu, outcome);
	if (prot != 0 && mprotect((void *)(fence_lo + pg * page), page, prot) == 0) {
		atomic_flag_clear(&reporting);
		return true;
	}
	/* Abort: the default action, and the access faults again. */
	segv_default();
	return true;
}
