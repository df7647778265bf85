/* critical.c — critical memory (Samurai, ../shared/papers/002_*, section 3):
 * the public API of <diehard/critical.h>.
 *
 * Design:
 * - A critical object is three copies: the object the program holds and two
 *   shadows, each allocated separately from the randomized heap (backend.h),
 *   so a stray write that hits one rarely hits another at the same offset.
 *   critical_store writes the shadows, then the object; critical_load
 *   compares the object with one shadow and, when they differ, votes the
 *   three byte by byte under the lock (two agreeing bytes win; with none,
 *   the object's byte is kept and the event counted as unrepairable).
 * - Objects of up to 64 bytes are compared whole on every load (one line or
 *   two, as the loaded bytes), larger ones over the bytes loaded.
 * - Which shadow is compared swaps after every SWAP_PERIOD loads of a thread
 *   on average (section 3.1), so neither shadow gathers errors unseen. The
 *   period is drawn at random each time (uniform in [1, 2 SWAP_PERIOD - 1]):
 *   with a fixed one, a program whose loads repeat with a period near a
 *   multiple of it compared some object with the same shadow every time,
 *   and the other's errors piled up until a second one made a byte
 *   unrepairable (health under DIEHARD_CORRUPT, 1 run in 20).
 * - Shadows start as SENTINEL bytes (figure 3's map_critical): a critical
 *   load of bytes never critically stored finds the shadows agreeing on the
 *   sentinel against the object, and is counted as uninitialized.
 * - Metadata lives outside the heap, in mappings of its own with guard pages
 *   (the paper kept it in the object's header, with a checksum and a copy
 *   in a hash table): a record per object {object, size, shadows,
 *   generation, number, flags} with a keyed checksum. Overflows from heap
 *   objects cannot reach it, and a wild write into it is caught by the
 *   checksum rather than followed to a forged shadow.
 * - From any address to its record: the address's granule (its heap slot,
 *   by the heap's arithmetic, heap.h; else its 4 KiB page) is the key of an
 *   open-addressing table whose entries are the records themselves, one
 *   cache line each, so a lookup costs one line; an object is entered under
 *   every granule it spans (one for a small object), and objects may share
 *   a granule (promoted ranges, foreign pages). A mirror of every record,
 *   by number, restores entries whose checksum fails, and is checked
 *   against them whenever the lock is taken for the object.
 * - A thread keeps the last record it used (section 3.1's one-element cache),
 *   valid until the next removal of any record (an epoch, bumped by frees).
 *
 * Threads (section 3.3): allocation, free, promotion, repair and every
 * change of the table or records take `lock`, and bump `seq` around the
 * change (a sequence lock); lookups take no lock: they read, and retry if
 * seq was odd or moved. Tables only grow (an old one stays mapped for
 * readers still in it, so at most as much again is retired); a table full
 * of deleted entries is rebuilt in place, which readers see as a changed seq.
 *
 * Invariants (under lock): every live record's granules have an entry naming
 * it; records at or past `hw` are never referenced; a free record has lo 0;
 * generations only grow, so a thread's cached generation never matches a
 * reused record.
 */
#include <diehard/critical.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "config.h"
#include "heap.h"
#include "msg.h"
#include "os.h"
#include "sizeclass.h"

#define EXPORT __attribute__((visibility("default")))

#define SENTINEL 0xa5
#define SWAP_PERIOD 100u
#define SMALL_WHOLE 64u   /* objects compared whole on every load */
#define GRANULE_SHIFT 12u
#define RECS_MAX ((size_t)1 << 24)   /* live critical objects at most */
#define RECS_CHUNK 1024u             /* mirror records committed at a time */
#define TABLE_MIN 1024u

enum { REC_PROMOTED = 1u };
enum policy { POLICY_REPAIR, POLICY_WARN, POLICY_TRAP };

/* A record: one object's metadata, in one cache line. The table's entries
 * are records (a copy under each granule the object spans), so a lookup
 * costs one line; the mirror, indexed by record number, is read only to
 * check and restore them. Fields are atomics read relaxed by lock-free
 * lookups (under the sequence lock, a torn read is retried, not used). */
struct rec {
	_Atomic uintptr_t key;   /* in the table: the granule, EMPTY or DELETED */
	_Atomic uintptr_t lo;    /* the object; 0: a free record */
	_Atomic size_t n;        /* its size in bytes (what was asked for) */
	_Atomic uintptr_t sh[2];
	_Atomic uint64_t gen;
	_Atomic uint64_t meta;   /* record number << 32 | flags */
	_Atomic uint64_t check;  /* keyed checksum of the fields but key */
} __attribute__((aligned(64)));
#define EMPTY 0u
#define DELETED 1u

struct table {
	size_t mask;   /* slots - 1 */
	size_t pad[7]; /* the entries on a line of their own */
	struct rec e[];
};

/* A copy of a record, as lookups use it. */
struct view {
	uintptr_t lo;
	size_t n;
	uintptr_t sh[2];
	uint64_t gen;
	uint64_t flags;
	uint32_t rec;
	uint64_t epoch; /* the thread's cache: crit.epoch when it was filled */
};

static struct {
	pthread_mutex_t lock;
	_Atomic unsigned seq;
	struct rec *_Atomic table_e; /* the table's entries, for lookups */
	struct table *table;
	size_t used, deleted; /* entries */
	struct rec *mirror;
	uint32_t *free_recs;
	size_t nfree, committed;
	_Atomic size_t hw; /* records ever used */
	/* Bumped by every removal: a thread's cached record is good while it
	 * is unchanged (one shared line, written only by frees). */
	_Atomic uint64_t epoch;
	uint64_t secret;
	const struct crit_backend *be;
	enum policy policy;
	_Atomic bool ready;
} crit = { .lock = PTHREAD_MUTEX_INITIALIZER };

static pthread_once_t crit_once = PTHREAD_ONCE_INIT;

static _Atomic unsigned long long n_objects, n_detected, n_repaired, n_unrepairable, n_uninit, n_oob,
	n_bad_frees, n_meta_repairs;

static _Thread_local struct view tl_cache __attribute__((tls_model("initial-exec")));
/* Which shadow this thread compares, loads left before it swaps, and the
 * generator of the next period (xorshift; 0 until first used). */
static _Thread_local unsigned tl_which __attribute__((tls_model("initial-exec")));
static _Thread_local unsigned tl_left __attribute__((tls_model("initial-exec")));
static _Thread_local uint32_t tl_rand __attribute__((tls_model("initial-exec")));

static void count(_Atomic unsigned long long *c)
{
	atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

/* ---- start-up ---- */

static void fork_prepare(void)
{
	pthread_mutex_lock(&crit.lock);
}

static void fork_parent(void)
{
	pthread_mutex_unlock(&crit.lock);
}

static void fork_child(void)
{
	pthread_mutex_init(&crit.lock, NULL);
}

static struct table *table_new(size_t slots)
{
	size_t len = sizeof(struct table) + slots * sizeof(struct rec);
	struct table *t = os_map_guarded(len);
	if (t == NULL)
		return NULL;
	t->mask = slots - 1;
	return t; /* fresh pages: every key EMPTY */
}

static void table_publish(struct table *t)
{
	crit.table = t;
	atomic_store_explicit(&crit.table_e, t->e, memory_order_release);
}

static enum policy policy_from_env(void)
{
	const char *s = config_getenv("DIEHARD_CRITICAL");
	if (s == NULL || s[0] == '\0' || strcmp(s, "repair") == 0)
		return POLICY_REPAIR;
	if (strcmp(s, "warn") == 0)
		return POLICY_WARN;
	if (strcmp(s, "trap") == 0)
		return POLICY_TRAP;
	struct msg m = { .len = 0 };
	msg_str(&m, "diehard: critical: DIEHARD_CRITICAL must be repair, warn or trap; using repair");
	msg_send(&m);
	return POLICY_REPAIR;
}

static void start(void)
{
	crit.be = crit_backend();
	if (crit.be == NULL)
		return;
	size_t page = os_page_size();
	size_t bytes = os_align_up(RECS_MAX * sizeof(struct rec), page);
	size_t fbytes = os_align_up(RECS_MAX * sizeof(uint32_t), page);
	/* One page more than needed on each side: guards, never committed. */
	char *b = os_reserve(bytes + 2 * page, page);
	char *f = os_reserve(fbytes + 2 * page, page);
	struct table *t = table_new(TABLE_MIN);
	if (b == NULL || f == NULL || t == NULL || os_commit(f + page, fbytes) != 0 ||
	    !os_random(&crit.secret, sizeof crit.secret)) {
		struct msg m = { .len = 0 };
		msg_str(&m, "diehard: critical: cannot map its metadata; critical_malloc will fail");
		msg_send(&m);
		return;
	}
	crit.mirror = (struct rec *)(b + page);
	crit.free_recs = (uint32_t *)(f + page);
	table_publish(t);
	crit.policy = policy_from_env();
	(void)pthread_atfork(fork_prepare, fork_parent, fork_child);
	atomic_store_explicit(&crit.ready, true, memory_order_release);
}

static bool started(void)
{
	return pthread_once(&crit_once, start) == 0 && atomic_load_explicit(&crit.ready, memory_order_acquire);
}

/* ---- records ---- */

/* Independent multiplications (they overlap in the pipeline), one final mix. */
static uint64_t checksum(const struct view *v)
{
	uint64_t h = v->lo * 0x9e3779b97f4a7c15ULL ^ v->n * 0xc2b2ae3d27d4eb4fULL ^
		     v->sh[0] * 0x165667b19e3779f9ULL ^ v->sh[1] * 0xd6e8feb86659fd93ULL ^
		     v->gen * 0xff51afd7ed558ccdULL ^ (((uint64_t)v->rec << 32 | v->flags) * 0xc4ceb9fe1a85ec53ULL);
	h = (h ^ crit.secret) * 0x9e3779b97f4a7c15ULL;
	return h ^ (h >> 32);
}

/* Reads record x into v; true when its checksum holds. */
static bool rec_load(const struct rec *x, struct view *v)
{
	v->lo = atomic_load_explicit(&x->lo, memory_order_relaxed);
	v->n = atomic_load_explicit(&x->n, memory_order_relaxed);
	v->sh[0] = atomic_load_explicit(&x->sh[0], memory_order_relaxed);
	v->sh[1] = atomic_load_explicit(&x->sh[1], memory_order_relaxed);
	v->gen = atomic_load_explicit(&x->gen, memory_order_relaxed);
	uint64_t meta = atomic_load_explicit(&x->meta, memory_order_relaxed);
	v->rec = (uint32_t)(meta >> 32);
	v->flags = (uint32_t)meta;
	return atomic_load_explicit(&x->check, memory_order_relaxed) == checksum(v);
}

static void rec_store(struct rec *x, const struct view *v)
{
	atomic_store_explicit(&x->lo, v->lo, memory_order_relaxed);
	atomic_store_explicit(&x->n, v->n, memory_order_relaxed);
	atomic_store_explicit(&x->sh[0], v->sh[0], memory_order_relaxed);
	atomic_store_explicit(&x->sh[1], v->sh[1], memory_order_relaxed);
	atomic_store_explicit(&x->gen, v->gen, memory_order_relaxed);
	atomic_store_explicit(&x->meta, (uint64_t)v->rec << 32 | v->flags, memory_order_relaxed);
	atomic_store_explicit(&x->check, checksum(v), memory_order_relaxed);
}

static void seq_begin(void)
{
	unsigned s = atomic_load_explicit(&crit.seq, memory_order_relaxed);
	atomic_store_explicit(&crit.seq, s + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
}

static void seq_end(void)
{
	unsigned s = atomic_load_explicit(&crit.seq, memory_order_relaxed);
	atomic_store_explicit(&crit.seq, s + 1, memory_order_release);
}

/* ---- granules and the table ---- */

/* The granule holding address p: its heap slot's start, or its page. */
static uintptr_t granule_of(uintptr_t p, uintptr_t *next)
{
	struct heap *h = crit.be->heap;
	if (h != NULL && heap_contains(h, (void *)p)) {
		uintptr_t size = (uintptr_t)1 << sizeclass_shift(heap_class_index(h, (void *)p));
		*next = (p & ~(size - 1)) + size;
		return p & ~(size - 1);
	}
	uintptr_t g = p & ~(((uintptr_t)1 << GRANULE_SHIFT) - 1);
	*next = g + ((uintptr_t)1 << GRANULE_SHIFT);
	return g;
}

static size_t hash_of(uintptr_t g)
{
	uint64_t h = (uint64_t)g * 0x9e3779b97f4a7c15ULL;
	return (size_t)(h >> 20 ^ h);
}

/* The live record whose range holds p, in the entries e (mask); 1 found, 0
 * not, -1 an entry of p's granule fails its checksum (find_locked mends
 * it). Lock-free: the caller checks the sequence lock. */
static int table_find(const struct rec *e, size_t mask, uintptr_t p, struct view *v)
{
	uintptr_t next, g = granule_of(p, &next);
	size_t i = hash_of(g) & mask;
	int bad = 0;
	for (size_t probes = 0; probes <= mask; probes++, i = (i + 1) & mask) {
		uintptr_t k = atomic_load_explicit(&e[i].key, memory_order_relaxed);
		if (k == EMPTY)
			break;
		if (k != g)
			continue;
		if (!rec_load(&e[i], v))
			bad = -1;
		else if (v->lo != 0 && p - v->lo < v->n)
			return 1;
	}
	return bad;
}

static void table_put(struct table *t, uintptr_t g, const struct view *v)
{
	size_t i = hash_of(g) & t->mask;
	for (;;) {
		uintptr_t k = atomic_load_explicit(&t->e[i].key, memory_order_relaxed);
		if (k == EMPTY || k == DELETED) {
			rec_store(&t->e[i], v);
			atomic_store_explicit(&t->e[i].key, g, memory_order_relaxed);
			if (k == DELETED)
				crit.deleted--;
			crit.used++;
			return;
		}
		i = (i + 1) & t->mask;
	}
}

/* Under lock and seq: granule g's entries made right again from the
 * mirror: entries failing their checksum are deleted, and every live
 * record covering g that has no sound entry gets one. (A scan of every
 * record: only after a stray write into the table.) */
static void mend_granule(uintptr_t g)
{
	struct table *t = crit.table;
	size_t i = hash_of(g) & t->mask;
	for (size_t probes = 0; probes <= t->mask; probes++, i = (i + 1) & t->mask) {
		uintptr_t k = atomic_load_explicit(&t->e[i].key, memory_order_relaxed);
		struct view v;
		if (k == EMPTY)
			break;
		if (k == g && !rec_load(&t->e[i], &v)) {
			atomic_store_explicit(&t->e[i].key, DELETED, memory_order_relaxed);
			crit.used--;
			crit.deleted++;
		}
	}
	size_t hw = atomic_load_explicit(&crit.hw, memory_order_relaxed);
	for (size_t r = 0; r < hw; r++) {
		struct view m, v;
		uintptr_t next;
		if (!rec_load(&crit.mirror[r], &m) || m.lo == 0 || g < granule_of(m.lo, &next) || g >= m.lo + m.n)
			continue;
		if (table_find(t->e, t->mask, g < m.lo ? m.lo : g, &v) == 1 && v.rec == m.rec)
			continue;
		table_put(t, g, &m);
		count(&n_meta_repairs);
	}
}

/* Under lock: as table_find, mending p's granule first when one of its
 * entries fails its checksum, and the mirror of what it finds. */
static bool find_locked(uintptr_t p, struct view *v)
{
	int found = table_find(crit.table->e, crit.table->mask, p, v);
	if (found < 0) {
		uintptr_t next;
		seq_begin();
		mend_granule(granule_of(p, &next));
		seq_end();
		found = table_find(crit.table->e, crit.table->mask, p, v);
	}
	if (found <= 0)
		return false;
	struct view m;
	if (!rec_load(&crit.mirror[v->rec], &m) || m.lo != v->lo || m.gen != v->gen) {
		rec_store(&crit.mirror[v->rec], v);
		count(&n_meta_repairs);
	}
	return true;
}

/* Under lock and seq: room for `more` entries, growing into a new table or
 * rebuilding this one without its deleted entries. False: out of memory. */
static bool table_room(size_t more)
{
	struct table *t = crit.table;
	size_t slots = t->mask + 1;
	if ((crit.used + crit.deleted + more) * 2 <= slots)
		return true;
	size_t want = slots;
	while ((crit.used + more) * 4 > want)
		want *= 2;
	/* Live entries (key and record), saved: a rebuild in place clears
	 * the table first. */
	size_t keep_len = crit.used * sizeof(struct rec) + 1;
	struct rec *keep = os_map_guarded(keep_len);
	if (keep == NULL)
		return false;
	size_t n = 0;
	for (size_t i = 0; i < slots; i++) {
		struct view v;
		uintptr_t k = atomic_load_explicit(&t->e[i].key, memory_order_relaxed);
		if (k != EMPTY && k != DELETED && rec_load(&t->e[i], &v)) {
			rec_store(&keep[n], &v);
			atomic_store_explicit(&keep[n++].key, k, memory_order_relaxed);
		}
	}
	struct table *to = t;
	if (want != slots) {
		to = table_new(want);
		if (to == NULL) {
			os_unmap_guarded(keep, keep_len);
			return false;
		}
	} else {
		for (size_t i = 0; i < slots; i++)
			atomic_store_explicit(&t->e[i].key, EMPTY, memory_order_relaxed);
	}
	crit.used = crit.deleted = 0;
	for (size_t i = 0; i < n; i++) {
		struct view v;
		(void)rec_load(&keep[i], &v);
		table_put(to, atomic_load_explicit(&keep[i].key, memory_order_relaxed), &v);
	}
	os_unmap_guarded(keep, keep_len);
	/* A grown-out table stays mapped: a lookup may still be reading it. */
	table_publish(to);
	return true;
}

static size_t granules_in(uintptr_t lo, size_t n)
{
	size_t k = 0;
	for (uintptr_t g = lo, next; g < lo + n; g = next) {
		(void)granule_of(g, &next);
		k++;
	}
	return k;
}

/* ---- adding and removing objects (under lock) ---- */

static bool rec_add(uintptr_t lo, size_t n, uintptr_t s0, uintptr_t s1, uint32_t flags)
{
	uint32_t r;
	if (crit.nfree > 0)
		r = crit.free_recs[--crit.nfree];
	else {
		if (crit.hw == RECS_MAX)
			return false;
		if (crit.hw == crit.committed) {
			if (os_commit(&crit.mirror[crit.committed], RECS_CHUNK * sizeof(struct rec)) != 0)
				return false;
			crit.committed += RECS_CHUNK;
		}
		r = (uint32_t)crit.hw;
	}
	/* The generation goes on from the record's last: a thread's cached
	 * copy of a freed object never matches its successor. */
	struct view v = { .lo = lo, .n = n, .sh = { s0, s1 }, .flags = flags, .rec = r };
	v.gen = atomic_load_explicit(&crit.mirror[r].gen, memory_order_relaxed) + 1;
	seq_begin();
	bool ok = table_room(granules_in(lo, n));
	if (ok) {
		if (r == crit.hw)
			atomic_store_explicit(&crit.hw, r + 1, memory_order_relaxed);
		rec_store(&crit.mirror[r], &v);
		for (uintptr_t g = lo, next; g < lo + n; g = next)
			table_put(crit.table, granule_of(g, &next), &v);
	}
	seq_end();
	if (!ok) {
		crit.free_recs[crit.nfree++] = r;
		return false;
	}
	count(&n_objects);
	return true;
}

static void rec_remove(const struct view *v)
{
	struct table *t = crit.table;
	seq_begin();
	for (uintptr_t g = v->lo, next; g < v->lo + v->n; g = next) {
		g = granule_of(g, &next);
		size_t i = hash_of(g) & t->mask;
		for (size_t probes = 0; probes <= t->mask; probes++, i = (i + 1) & t->mask) {
			uintptr_t k = atomic_load_explicit(&t->e[i].key, memory_order_relaxed);
			if (k == EMPTY)
				break;
			if (k == g && atomic_load_explicit(&t->e[i].meta, memory_order_relaxed) >> 32 == v->rec) {
				atomic_store_explicit(&t->e[i].key, DELETED, memory_order_relaxed);
				crit.used--;
				crit.deleted++;
				break;
			}
		}
	}
	struct view dead = { .gen = v->gen + 1, .rec = v->rec };
	rec_store(&crit.mirror[v->rec], &dead);
	atomic_fetch_add_explicit(&crit.epoch, 1, memory_order_relaxed);
	seq_end();
	crit.free_recs[crit.nfree++] = v->rec;
	atomic_fetch_sub_explicit(&n_objects, 1, memory_order_relaxed);
}

/* ---- lookups ---- */

/* The live critical object holding p, lock-free; false when none. */
static bool view_of(uintptr_t p, struct view *v)
{
	struct view *c = &tl_cache;
	if (c->lo != 0 && p - c->lo < c->n && atomic_load_explicit(&crit.epoch, memory_order_acquire) == c->epoch) {
		*v = *c;
		return true;
	}
	if (!atomic_load_explicit(&crit.ready, memory_order_acquire))
		return false;
	for (;;) {
		unsigned s = atomic_load_explicit(&crit.seq, memory_order_acquire);
		if (s & 1) {
			__builtin_ia32_pause();
			continue;
		}
		uint64_t epoch = atomic_load_explicit(&crit.epoch, memory_order_relaxed);
		/* The entries, and the mask of the table they belong to. */
		const struct rec *e = atomic_load_explicit(&crit.table_e, memory_order_acquire);
		size_t mask = ((const struct table *)((const char *)e - offsetof(struct table, e)))->mask;
		int found = table_find(e, mask, p, v);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&crit.seq, memory_order_relaxed) != s)
			continue;
		if (found < 0) {
			pthread_mutex_lock(&crit.lock);
			found = find_locked(p, v);
			pthread_mutex_unlock(&crit.lock);
		}
		if (found > 0) {
			*c = *v;
			c->epoch = epoch;
		}
		return found > 0;
	}
}

/* ---- events ---- */

/* "diehard: critical: WHAT at offsets A-B of a N-byte critical object at
 * 0x..." with warn or trap; trap then aborts. */
static void report(const char *what, const struct view *v, size_t off, size_t len)
{
	if (crit.policy == POLICY_REPAIR)
		return;
	struct msg m = { .len = 0 };
	msg_str(&m, "diehard: critical: ");
	msg_str(&m, what);
	msg_str(&m, " at offsets ");
	msg_u64(&m, off);
	msg_str(&m, "-");
	msg_u64(&m, off + len - 1);
	msg_str(&m, " of a ");
	msg_u64(&m, v->n);
	msg_str(&m, "-byte critical object at 0x");
	msg_hex(&m, v->lo, 12);
	msg_send(&m);
	if (crit.policy == POLICY_TRAP)
		abort();
}

static void report_pointer(const char *what, const void *p)
{
	if (crit.policy == POLICY_REPAIR)
		return;
	struct msg m = { .len = 0 };
	msg_str(&m, "diehard: critical: ");
	msg_str(&m, what);
	msg_str(&m, " 0x");
	msg_hex(&m, (uintptr_t)p, 12);
	msg_str(&m, ", ignored");
	msg_send(&m);
	if (crit.policy == POLICY_TRAP)
		abort();
}

/* Under lock: votes bytes [off, off + len) of the three copies. */
static void vote(const struct view *v, size_t off, size_t len)
{
	unsigned char *o = (unsigned char *)v->lo, *a = (unsigned char *)v->sh[0], *b = (unsigned char *)v->sh[1];
	size_t wrong = 0, lost = 0, uninit = 0, first = 0, last = 0;
	for (size_t i = off; i < off + len; i++) {
		unsigned char x = o[i], y = a[i], z = b[i];
		if (x == y && y == z)
			continue;
		if (wrong++ == 0)
			first = i;
		last = i;
		if (y == z) {
			if (y == SENTINEL)
				uninit++;
			o[i] = y;
		} else if (x == y) {
			b[i] = x;
		} else if (x == z) {
			a[i] = x;
		} else {
			lost++;
			a[i] = b[i] = x;
		}
	}
	if (wrong == 0)
		return;
	if (uninit == wrong) {
		count(&n_uninit);
		report("load of bytes never critically stored (uninitialized; they read as the sentinel 0xa5)", v, first,
		       last - first + 1);
		return;
	}
	count(&n_detected);
	if (lost != 0) {
		count(&n_unrepairable);
		report("copies disagreed with no majority (the object's bytes kept)", v, first, last - first + 1);
	} else {
		count(&n_repaired);
		report("copies disagreed; repaired by majority", v, first, last - first + 1);
	}
}

/* memcmp and memmove, inline for words (most critical data: pointers,
 * counters); memmove since src and dst may overlap. */
static inline bool same(const void *a, const void *b, size_t len)
{
	if (len <= 64 && len % 8 == 0) {
		uint64_t diff = 0;
		for (size_t i = 0; i < len; i += 8) {
			uint64_t x, y;
			__builtin_memcpy(&x, (const char *)a + i, 8);
			__builtin_memcpy(&y, (const char *)b + i, 8);
			diff |= x ^ y;
		}
		return diff == 0;
	}
	if (len == 8) {
		uint64_t x, y;
		__builtin_memcpy(&x, a, 8);
		__builtin_memcpy(&y, b, 8);
		return x == y;
	}
	if (len == 4) {
		uint32_t x, y;
		__builtin_memcpy(&x, a, 4);
		__builtin_memcpy(&y, b, 4);
		return x == y;
	}
	return memcmp(a, b, len) == 0;
}

static inline void copy(void *dst, const void *src, size_t len)
{
	if (len == 8) {
		uint64_t x;
		__builtin_memcpy(&x, src, 8);
		__builtin_memcpy(dst, &x, 8);
	} else if (len == 4) {
		uint32_t x;
		__builtin_memcpy(&x, src, 4);
		__builtin_memcpy(dst, &x, 4);
	} else {
		memmove(dst, src, len);
	}
}

/* Compares the object's bytes [off, off + len) with one shadow (which one
 * swaps every SWAP_PERIOD loads of the thread, on average); votes the three under the
 * lock when they differ. */
static void check(const struct view *v, size_t off, size_t len)
{
	/* A small object is compared whole (the same cache line or two as the
	 * bytes loaded): an error in a field the program seldom loads is then
	 * seen at the next load of any field, before a second one can join it. */
	if (v->n <= SMALL_WHOLE) {
		off = 0;
		len = v->n;
	}
	const unsigned char *o = (const unsigned char *)v->lo + off;
	if (__builtin_expect(tl_left == 0, 0)) {
		uint32_t x = tl_rand != 0 ? tl_rand : 0x9e3779b9u; /* the same in every run: runs repeat */
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		tl_rand = x;
		tl_left = 1 + x % (2 * SWAP_PERIOD - 1);
		tl_which ^= 1u;
	}
	tl_left--;
	unsigned which = tl_which;
	if (same(o, (const unsigned char *)v->sh[which] + off, len))
		return;
	pthread_mutex_lock(&crit.lock);
	struct view now;
	/* Still the same object (not freed meanwhile by a racing thread)? */
	if (find_locked(v->lo, &now) && now.gen == v->gen)
		vote(&now, 0, now.n); /* all of it: a stray write seldom stops at the bytes loaded */
	pthread_mutex_unlock(&crit.lock);
}

/* ---- the API ---- */

/* The critical object holding p, p's offset in it and how many of the n
 * bytes from p are inside it; false when p is not critical (nor n > 0). */
static inline bool locate(const void *p, size_t n, struct view *v, size_t *off, size_t *in)
{
	if (n == 0 || !view_of((uintptr_t)p, v))
		return false;
	*off = (uintptr_t)p - v->lo;
	*in = v->n - *off < n ? v->n - *off : n;
	return true;
}

EXPORT void critical_load(void *dst, const void *src, size_t n)
{
	struct view v;
	size_t off, in;
	if (!locate(src, n, &v, &off, &in)) {
		memmove(dst, src, n);
		return;
	}
	check(&v, off, in);
	copy(dst, src, in);
	if (in < n) {
		count(&n_oob);
		report("load past the end", &v, off, n);
		memmove((char *)dst + in, (const char *)src + in, n - in);
	}
}

EXPORT void critical_store(void *dst, const void *src, size_t n)
{
	struct view v;
	size_t off, in;
	if (!locate(dst, n, &v, &off, &in)) {
		memmove(dst, src, n);
		return;
	}
	/* The object last: src may be the object itself (storing what a plain
	 * write put there). */
	copy((char *)v.sh[0] + off, src, in);
	copy((char *)v.sh[1] + off, src, in);
	copy(dst, src, in);
	if (in < n) {
		count(&n_oob);
		report("store past the end (dropped)", &v, off, n);
	}
}

/* Under lock: a new critical object of n bytes, uninitialized (shadows of
 * sentinel bytes) or, zero, initialized to zero. */
static void *make_locked(size_t n, bool zero)
{
	const struct crit_backend *be = crit.be;
	void *o = be->alloc(n), *a = be->alloc(n), *b = be->alloc(n);
	if (o == NULL || a == NULL || b == NULL ||
	    !rec_add((uintptr_t)o, n, (uintptr_t)a, (uintptr_t)b, 0)) {
		if (o != NULL)
			be->release(o);
		if (a != NULL)
			be->release(a);
		if (b != NULL)
			be->release(b);
		errno = ENOMEM;
		return NULL;
	}
	/* The object reads zero (figure 3's map_critical), its critical value
	 * is the sentinel until stored: the two always differ. */
	memset(o, 0, n);
	memset(a, zero ? 0 : SENTINEL, n);
	memset(b, zero ? 0 : SENTINEL, n);
	return o;
}

/* A new critical object of size bytes (started, locked). */
static void *make(size_t size, bool zero)
{
	if (!started()) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_lock(&crit.lock);
	void *p = make_locked(size == 0 ? 1 : size, zero);
	pthread_mutex_unlock(&crit.lock);
	return p;
}

EXPORT void *critical_malloc(size_t size)
{
	return make(size, false);
}

EXPORT void *critical_calloc(size_t count_, size_t size)
{
	size_t total;
	if (__builtin_mul_overflow(count_, size, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	return make(total, true);
}

/* Under lock: the live object starting exactly at p. */
static bool object_at(const void *p, struct view *v)
{
	return atomic_load_explicit(&crit.ready, memory_order_relaxed) && find_locked((uintptr_t)p, v) && v->lo == (uintptr_t)p;
}

/* Under lock: drops object v's record and shadows; frees the object too
 * unless keep. */
static void drop_locked(const struct view *v, bool keep)
{
	rec_remove(v);
	crit.be->release((void *)v->sh[0]);
	crit.be->release((void *)v->sh[1]);
	if (keep)
		return;
	if (v->flags & REC_PROMOTED)
		crit.be->free_foreign((void *)v->lo);
	else
		crit.be->release((void *)v->lo);
}

EXPORT void critical_free(void *p)
{
	struct view v;
	if (p == NULL)
		return;
	if (!started()) {
		count(&n_bad_frees);
		return;
	}
	pthread_mutex_lock(&crit.lock);
	bool ok = object_at(p, &v);
	if (ok)
		drop_locked(&v, false);
	pthread_mutex_unlock(&crit.lock);
	if (!ok) {
		count(&n_bad_frees);
		report_pointer("critical_free of a pointer that is not a live critical object:", p);
	}
}

EXPORT void *critical_realloc(void *p, size_t size)
{
	struct view v;
	if (p == NULL)
		return critical_malloc(size);
	if (size == 0) {
		critical_free(p);
		return NULL;
	}
	if (!started()) {
		count(&n_bad_frees);
		errno = EINVAL;
		return NULL;
	}
	pthread_mutex_lock(&crit.lock);
	if (!object_at(p, &v)) {
		pthread_mutex_unlock(&crit.lock);
		count(&n_bad_frees);
		report_pointer("critical_realloc of a pointer that is not a live critical object:", p);
		errno = EINVAL;
		return NULL;
	}
	/* The old contents, voted right, into all three new copies; the grown
	 * tail's shadows keep the sentinel. */
	vote(&v, 0, v.n);
	void *q = make_locked(size, false);
	if (q != NULL) {
		struct view nv;
		size_t keep = v.n < size ? v.n : size;
		if (find_locked((uintptr_t)q, &nv)) {
			memcpy(q, p, keep);
			memcpy((void *)nv.sh[0], p, keep);
			memcpy((void *)nv.sh[1], p, keep);
		}
		drop_locked(&v, false);
	}
	pthread_mutex_unlock(&crit.lock);
	return q;
}

/* Under lock: whether [lo, lo + n) overlaps a live critical object. */
static bool overlaps_locked(uintptr_t lo, size_t n)
{
	const struct table *t = crit.table;
	for (uintptr_t g0 = lo, next; g0 < lo + n; g0 = next) {
		uintptr_t g = granule_of(g0, &next);
		size_t i = hash_of(g) & t->mask;
		for (size_t probes = 0; probes <= t->mask; probes++, i = (i + 1) & t->mask) {
			uintptr_t k = atomic_load_explicit(&t->e[i].key, memory_order_relaxed);
			struct view v;
			if (k == EMPTY)
				break;
			if (k == g && rec_load(&t->e[i], &v) && v.lo != 0 && v.lo < lo + n && lo < v.lo + v.n)
				return true;
		}
	}
	return false;
}

EXPORT int critical_promote(void *p, size_t n)
{
	if (n == 0 || p == NULL || (uintptr_t)p + n < (uintptr_t)p) {
		errno = EINVAL;
		return -1;
	}
	if (!started()) {
		errno = ENOMEM;
		return -1;
	}
	pthread_mutex_lock(&crit.lock);
	int rc = -1;
	if (overlaps_locked((uintptr_t)p, n)) {
		errno = EINVAL;
		goto out;
	}
	void *a = crit.be->alloc(n), *b = crit.be->alloc(n);
	if (a == NULL || b == NULL || !rec_add((uintptr_t)p, n, (uintptr_t)a, (uintptr_t)b, REC_PROMOTED)) {
		if (a != NULL)
			crit.be->release(a);
		if (b != NULL)
			crit.be->release(b);
		errno = ENOMEM;
		goto out;
	}
	memcpy(a, p, n);
	memcpy(b, p, n);
	rc = 0;
out:
	pthread_mutex_unlock(&crit.lock);
	return rc;
}

EXPORT void critical_demote(void *p)
{
	struct view v;
	if (p == NULL)
		return;
	bool ok = false;
	if (started()) {
		pthread_mutex_lock(&crit.lock);
		ok = object_at(p, &v) && (v.flags & REC_PROMOTED);
		if (ok)
			drop_locked(&v, true);
		pthread_mutex_unlock(&crit.lock);
	}
	if (!ok) {
		count(&n_bad_frees);
		report_pointer("critical_demote of a pointer that is not a promoted object:", p);
	}
}

EXPORT int critical_is(const void *p)
{
	struct view v;
	return view_of((uintptr_t)p, &v) ? 1 : 0;
}

EXPORT void critical_counts(struct critical_counts *out)
{
	out->objects = atomic_load(&n_objects);
	out->detected = atomic_load(&n_detected);
	out->repaired = atomic_load(&n_repaired);
	out->unrepairable = atomic_load(&n_unrepairable);
	out->uninitialized = atomic_load(&n_uninit);
	out->out_of_bounds = atomic_load(&n_oob);
	out->bad_frees = atomic_load(&n_bad_frees);
	out->metadata_repairs = atomic_load(&n_meta_repairs);
}

bool crit_test_parts(const void *p, void **object, void *shadow[2], void **entry, void **mirror)
{
	struct view v;
	if (!started())
		return false;
	pthread_mutex_lock(&crit.lock);
	bool ok = find_locked((uintptr_t)p, &v);
	if (ok) {
		*object = (void *)v.lo;
		shadow[0] = (void *)v.sh[0];
		shadow[1] = (void *)v.sh[1];
		*mirror = &crit.mirror[v.rec];
		*entry = NULL;
		const struct table *t = crit.table;
		uintptr_t next, g = granule_of(v.lo, &next);
		for (size_t i = hash_of(g) & t->mask;; i = (i + 1) & t->mask)
			if (atomic_load_explicit(&t->e[i].key, memory_order_relaxed) == g &&
			    atomic_load_explicit(&t->e[i].meta, memory_order_relaxed) >> 32 == v.rec) {
				*entry = (void *)&t->e[i];
				break;
			}
	}
	pthread_mutex_unlock(&crit.lock);
	return ok;
}
