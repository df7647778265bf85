/* large.c — see large.h for the design. Every function taking the lock says
 * so; static helpers run with it held. */
#include "large.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "os.h"

#define TABLE_INITIAL_SLOTS 512u
/* Address space the quarantine may hold inaccessible. It counts toward
 * RLIMIT_AS, so it stays modest. */
#define QUARANTINE_BYTES ((size_t)4 << 30)
/* Resident memory the quarantine may keep for reuse (see quarantine_put),
 * the largest object it keeps, and how many later frees an entry waits before it is reused (so a
 * dangling pointer to a just-freed object still faults for a while). */
#define RETAIN_BYTES_MAX ((size_t)64 << 20)
#define RETAIN_BYTES_MIN ((size_t)4 << 20)
#define RETAIN_OBJECT_MAX ((size_t)16 << 20)
#define RETAIN_MIN_AGE 4u

static size_t home_slot(const struct large *l, uintptr_t key)
{
	uint64_t h = (uint64_t)(key >> 12) * 0x9e3779b97f4a7c15ULL;
	return (size_t)(h ^ (h >> 31)) & (l->slots - 1);
}

static size_t table_find(const struct large *l, uintptr_t key)
{
	for (size_t i = home_slot(l, key);; i = (i + 1) & (l->slots - 1)) {
		if (l->table[i].user == key)
			return i;
		if (l->table[i].user == 0)
			return SIZE_MAX;
	}
}

static void table_put(struct large *l, const struct large_entry *e)
{
	size_t i = home_slot(l, e->user);
	while (l->table[i].user != 0)
		i = (i + 1) & (l->slots - 1);
	l->table[i] = *e;
	l->count++;
}

/* Makes room for one more entry, keeping the load at most one half, so probe
 * sequences stay short and always end at an empty slot. */
static bool table_reserve(struct large *l)
{
	if ((l->count + 1) * 2 <= l->slots)
		return true;
	struct large_entry *old = l->table;
	size_t old_slots = l->slots;
	struct large_entry *fresh = os_map_guarded(2 * old_slots * sizeof *fresh);
	if (fresh == NULL)
		return false;
	l->table = fresh;
	l->slots = 2 * old_slots;
	l->count = 0;
	for (size_t i = 0; i < old_slots; i++)
		if (old[i].user != 0)
			table_put(l, &old[i]);
	os_unmap_guarded(old, old_slots * sizeof *old);
	return true;
}

/* Deletion for linear probing: shift later members of the cluster back so no
 * lookup stops early at the hole. */
static void table_remove_at(struct large *l, size_t i)
{
	size_t mask = l->slots - 1;
	size_t j = i;
	for (;;) {
		j = (j + 1) & mask;
		if (l->table[j].user == 0)
			break;
		size_t k = home_slot(l, l->table[j].user);
		/* Move j into i unless its home lies cyclically in (i, j]. */
		bool stays = (i <= j) ? (i < k && k <= j) : (i < k || k <= j);
		if (!stays) {
			l->table[i] = l->table[j];
			i = j;
		}
	}
	l->table[i].user = 0;
	l->count--;
}

struct large *large_create(const struct config *cfg, struct heap *counter)
{
	struct large *l = os_map_guarded(sizeof *l);
	if (l == NULL)
		return NULL;
	l->table = os_map_guarded(TABLE_INITIAL_SLOTS * sizeof *l->table);
	if (l->table == NULL) {
		int saved = errno;
		os_unmap_guarded(l, sizeof *l);
		errno = saved;
		return NULL;
	}
	l->slots = TABLE_INITIAL_SLOTS;
	l->fill = cfg->fill;
	pool_init(&l->pool, POOL_SIZE);
	l->counter = cfg->stats ? counter : NULL;
	/* A guarded object costs up to three mappings; leave the other half of
	 * the limit to the program and our regions. */
	long max_maps = os_read_number("/proc/sys/vm/max_map_count", 65530);
	l->guard_budget = max_maps > 64 ? (size_t)max_maps / 6 : 8;
	if (pthread_mutex_init(&l->lock, NULL) != 0) {
		large_destroy(l);
		errno = ENOMEM;
		return NULL;
	}
	return l;
}

void large_destroy(struct large *l)
{
	pool_close(&l->pool);
	for (size_t i = 0; i < l->slots; i++)
		if (l->table[i].user != 0)
			(void)os_release((void *)l->table[i].map, l->table[i].map_len);
	for (size_t i = 0; i < LARGE_QUARANTINE; i++)
		if (l->quarantine[i].map != 0)
			(void)os_release((void *)l->quarantine[i].map, l->quarantine[i].map_len);
	os_unmap_guarded(l->table, l->slots * sizeof *l->table);
	os_unmap_guarded(l, sizeof *l);
}

/* Reserves reserve bytes at an address aligned to align, with a guard page
 * each side when guard, and makes the first rw (<= reserve) accessible; the
 * rest stays inaccessible, room for growing in place. Fills e; false with
 * errno on failure. */
static bool map_object(size_t rw, size_t reserve, size_t align, bool guard, struct large_entry *e)
{
	size_t page = os_page_size();
	size_t g = guard ? page : 0;
	size_t slack = align > page ? align - page : 0;
	if (reserve > SIZE_MAX - 2 * g - slack) {
		errno = ENOMEM;
		return false;
	}
	size_t total = reserve + 2 * g + slack;
	void *raw = mmap(NULL, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED)
		return false;
	uintptr_t start = (uintptr_t)raw;
	uintptr_t user = os_align_up(start + g, align);
	uintptr_t map = user - g;
	size_t map_len = reserve + 2 * g;
	if (map > start)
		(void)munmap(raw, map - start);
	if (start + total > map + map_len)
		(void)munmap((void *)(map + map_len), start + total - (map + map_len));
	if (os_commit((void *)user, rw) != 0) {
		int saved = errno;
		(void)munmap((void *)map, map_len);
		errno = saved;
		return false;
	}
	e->user = user;
	e->size = rw;
	e->map = map;
	e->map_len = map_len;
	e->align = align;
	return true;
}

/* Adds or removes bytes of live large objects; with the lock held. */
static void count_live(struct large *l, size_t bytes, bool add)
{
	if (add)
		l->live_bytes += bytes;
	else
		l->live_bytes -= bytes;
	if (l->counter != NULL)
		heap_count_bytes(l->counter, bytes, add);
}

static bool is_guarded(const struct large_entry *e)
{
	return e->map != e->user;
}

/* Bytes e may grow to in place: its reservation less the trailing guard. */
static size_t room_of(const struct large_entry *e)
{
	return e->map + e->map_len - e->user - (is_guarded(e) ? os_page_size() : 0);
}

/* Removes quarantine entry q for good. */
static void quarantine_drop(struct large *l, struct large_entry *q)
{
	(void)os_release((void *)q->map, q->map_len);
	l->q_bytes -= q->map_len;
	if (q->retained)
		l->retained_bytes -= q->size;
	*q = (struct large_entry){ 0 };
}

/* Gives a retained entry's pages back to the system; its addresses stay. */
static void quarantine_release_pages(struct large *l, struct large_entry *q)
{
	l->retained_bytes -= q->size;
	q->retained = false;
	if (mmap((void *)q->user, q->size, PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) == MAP_FAILED)
		quarantine_drop(l, q);
}

/* Takes a dead object's address range out of use: inaccessible, kept
 * reserved for a while. keep_pages: its memory stays resident (within
 * RETAIN_BYTES) so a later allocation can reuse it without page faults;
 * otherwise the memory goes back to the system now. */
static void quarantine_put(struct large *l, const struct large_entry *e, bool keep_pages)
{
	bool keep = keep_pages && e->size <= RETAIN_OBJECT_MAX;
	bool hidden = keep ? mprotect((void *)e->user, e->size, PROT_NONE) == 0
			   : mmap((void *)e->map, e->map_len, PROT_NONE,
				  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) != MAP_FAILED;
	if (e->map_len > QUARANTINE_BYTES / 4 || !hidden) {
		(void)os_release((void *)e->map, e->map_len);
		return;
	}
	/* Evict from the oldest end until the newcomer fits the budget. */
	for (size_t k = 0; k < LARGE_QUARANTINE; k++) {
		struct large_entry *old = &l->quarantine[(l->q_next + k) % LARGE_QUARANTINE];
		if (k > 0 && l->q_bytes + e->map_len <= QUARANTINE_BYTES)
			break;
		if (old->map != 0)
			quarantine_drop(l, old);
	}
	struct large_entry *q = &l->quarantine[l->q_next];
	*q = *e;
	q->retained = keep;
	q->seq = ++l->q_seq;
	l->q_bytes += e->map_len;
	l->q_next = (l->q_next + 1) % LARGE_QUARANTINE;
	if (keep)
		l->retained_bytes += e->size;
	/* Kept memory is bounded by half the live large objects' (between 4
	 * and 64 MiB), so it cannot dominate the resident size. */
	size_t budget = l->live_bytes / 2;
	budget = budget < RETAIN_BYTES_MIN ? RETAIN_BYTES_MIN : budget > RETAIN_BYTES_MAX ? RETAIN_BYTES_MAX : budget;
	for (size_t k = 0; k < LARGE_QUARANTINE && l->retained_bytes > budget; k++) {
		struct large_entry *old = &l->quarantine[(l->q_next + k) % LARGE_QUARANTINE];
		if (old->map != 0 && old->retained)
			quarantine_release_pages(l, old);
	}
}

/* Reuses the oldest retained range that fits rw bytes at alignment align
 * (and is not more than twice that), freed at least RETAIN_MIN_AGE frees
 * ago. Its stale contents stay: callers that need zeros do not come here. */
static bool quarantine_reuse(struct large *l, size_t rw, size_t align, struct large_entry *out)
{
	for (size_t k = 0; k < LARGE_QUARANTINE; k++) {
		struct large_entry *q = &l->quarantine[(l->q_next + k) % LARGE_QUARANTINE];
		if (q->map == 0 || !q->retained || q->size < rw || q->size / 2 > rw ||
		    (q->user & (align - 1)) != 0 || l->q_seq - q->seq < RETAIN_MIN_AGE)
			continue;
		struct large_entry e = *q;
		l->retained_bytes -= q->size;
		l->q_bytes -= q->map_len;
		*q = (struct large_entry){ 0 };
		if ((e.size > rw && mmap((void *)(e.user + rw), e.size - rw, PROT_NONE,
					 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) == MAP_FAILED) ||
		    os_commit((void *)e.user, rw) != 0) {
			(void)os_release((void *)e.map, e.map_len);
			return false;
		}
		e.size = rw;
		e.retained = false;
		*out = e;
		return true;
	}
	return false;
}

static bool in_quarantine(const struct large *l, uintptr_t p)
{
	for (size_t i = 0; i < LARGE_QUARANTINE; i++)
		if (l->quarantine[i].user == p)
			return true;
	return false;
}

/* Random bytes for [addr, addr + len) of a live object: mapped lazily from
 * the pool when big (pool.h), written now otherwise. Takes the lock for the
 * pool (mappings change under it). */
static void fill_range(struct large *l, struct rng *r, uintptr_t addr, size_t len)
{
	if (len >= POOL_FROM) {
		pthread_mutex_lock(&l->lock);
		bool mapped = pool_map(&l->pool, (void *)addr, len, r);
		pthread_mutex_unlock(&l->lock);
		if (mapped)
			return;
	}
	rng_fill(r, (void *)addr, len);
}

/* Takes the lock. */
void *large_alloc(struct large *l, size_t size, size_t align, struct rng *r, bool fill, bool zeroed)
{
	size_t page = os_page_size();
	if (align < page)
		align = page;
	if (size > SIZE_MAX - page) {
		errno = ENOMEM;
		return NULL;
	}
	size_t rw = os_align_up(size == 0 ? 1 : size, page);
	struct large_entry e;

	pthread_mutex_lock(&l->lock);
	bool guard = l->guarded < l->guard_budget;
	bool ok = table_reserve(l) &&
		  ((!zeroed && quarantine_reuse(l, rw, align, &e)) || map_object(rw, rw, align, guard, &e));
	if (!ok && guard && errno == ENOMEM)
		ok = map_object(rw, rw, align, false, &e); /* out of mappings? try lean */
	if (ok) {
		table_put(l, &e);
		l->guarded += is_guarded(&e);
		l->unguarded += !is_guarded(&e);
		count_live(l, rw, true);
		l->allocations++;
	}
	pthread_mutex_unlock(&l->lock);
	if (!ok) {
		errno = ENOMEM;
		return NULL;
	}
	if (fill)
		fill_range(l, r, e.user, rw);
	return (void *)e.user;
}

/* Takes the lock. */
enum heap_verdict large_free(struct large *l, void *p)
{
	enum heap_verdict v = HEAP_FREED;
	pthread_mutex_lock(&l->lock);
	size_t i = table_find(l, (uintptr_t)p);
	if (i == SIZE_MAX) {
		v = in_quarantine(l, (uintptr_t)p) ? HEAP_DOUBLE : HEAP_INVALID;
	} else {
		struct large_entry e = l->table[i];
		table_remove_at(l, i);
		l->guarded -= is_guarded(&e);
		count_live(l, e.size, false);
		l->frees++;
		quarantine_put(l, &e, true);
	}
	pthread_mutex_unlock(&l->lock);
	return v;
}

/* Takes the lock. */
size_t large_usable(struct large *l, const void *p)
{
	pthread_mutex_lock(&l->lock);
	size_t i = table_find(l, (uintptr_t)p);
	size_t n = i == SIZE_MAX ? 0 : l->table[i].size;
	pthread_mutex_unlock(&l->lock);
	return n;
}

/* Shrinks e in place: the tail becomes fresh inaccessible memory, which both
 * frees it and serves as the object's new trailing guard. */
static bool shrink_in_place(struct large_entry *e, size_t rw)
{
	if (mmap((void *)(e->user + rw), e->size - rw, PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) == MAP_FAILED)
		return false;
	e->size = rw;
	return true;
}

/* Moves e's pages to a new mapping of rw bytes (rw > e->size); the grown part
 * reads as zero. Fills moved; false with errno on failure, e untouched.
 * *old_kept says whether e's range is still mapped (then it is ours to
 * quarantine) or already a hole that another thread's mmap may take at any
 * moment (then only its guard pages are ours to release). */
static bool grow_by_moving(struct large *l, const struct large_entry *e, size_t rw,
			   struct large_entry *moved, bool *old_kept)
{
	bool guard = is_guarded(e) || l->guarded < l->guard_budget;
	/* A realloc'ed object tends to be realloc'ed again: reserve twice its
	 * size so the next growths happen in place. Only what is asked for is
	 * accessible; the rest costs address space, not memory. */
	size_t reserve = e->size <= SIZE_MAX / 4 && 2 * e->size > rw ? 2 * e->size : rw;
	if (!map_object(rw, reserve, e->align, guard, moved))
		return false;
	/* map_object committed the new range; mremap puts the old pages (no
	 * copy) over its start, and the committed zero pages stay after them. */
	*old_kept = true;
	void *r = mremap((void *)e->user, e->size, e->size,
			 MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP, (void *)moved->user);
	if (r == MAP_FAILED && errno == EINVAL) { /* kernel before 5.7 */
		*old_kept = false;
		r = mremap((void *)e->user, e->size, e->size, MREMAP_MAYMOVE | MREMAP_FIXED,
			   (void *)moved->user);
	}
	if (r == MAP_FAILED && errno == EFAULT) {
		/* The object spans several mappings (filled from the pool), which
		 * mremap refuses: copy it instead, and keep the old range. */
		memcpy((void *)moved->user, (void *)e->user, e->size);
		*old_kept = true;
		r = (void *)moved->user;
	}
	if (r == MAP_FAILED) {
		int saved = errno;
		(void)os_release((void *)moved->map, moved->map_len);
		errno = saved;
		return false;
	}
	return true;
}

static void release_guards(const struct large_entry *e)
{
	if (e->user > e->map)
		(void)os_release((void *)e->map, e->user - e->map);
	uintptr_t end = e->user + e->size;
	if (e->map + e->map_len > end)
		(void)os_release((void *)end, e->map + e->map_len - end);
}

/* Takes the lock. */
void *large_resize(struct large *l, void *p, size_t size, struct rng *r, bool *known)
{
	size_t page = os_page_size();
	if (size > SIZE_MAX - page) {
		*known = large_usable(l, p) != 0;
		errno = ENOMEM;
		return NULL;
	}
	size_t rw = os_align_up(size, page);
	void *result = NULL;
	size_t old_size = 0;

	pthread_mutex_lock(&l->lock);
	size_t i = table_find(l, (uintptr_t)p);
	*known = i != SIZE_MAX;
	if (!*known)
		goto out;
	struct large_entry *e = &l->table[i];
	old_size = e->size;
	if (rw <= e->size) {
		if (rw == e->size || shrink_in_place(e, rw)) {
			count_live(l, old_size - rw, false);
			result = p;
		}
		goto out;
	}
	if (rw <= room_of(e)) {
		/* Growing into the reservation: one mprotect, no move. */
		if (os_commit((void *)(e->user + e->size), rw - e->size) == 0) {
			e->size = rw;
			count_live(l, rw - old_size, true);
			result = p;
		}
		goto out;
	}
	struct large_entry moved;
	bool old_kept;
	if (!table_reserve(l))
		goto out;
	e = &l->table[table_find(l, (uintptr_t)p)]; /* the table may have moved */
	if (!grow_by_moving(l, e, rw, &moved, &old_kept))
		goto out;
	struct large_entry old = *e;
	table_remove_at(l, table_find(l, (uintptr_t)p));
	table_put(l, &moved);
	l->guarded += (size_t)is_guarded(&moved) - (size_t)is_guarded(&old);
	l->unguarded += !is_guarded(&moved) && is_guarded(&old);
	count_live(l, rw - old.size, true);
	if (old_kept)
		quarantine_put(l, &old, false); /* the stale pointer now faults */
	else
		release_guards(&old);
	result = (void *)moved.user;
out:
	pthread_mutex_unlock(&l->lock);
	if (result == NULL && *known)
		errno = ENOMEM;
	if (result != NULL && rw > old_size && l->fill)
		fill_range(l, r, (uintptr_t)result + old_size, rw - old_size);
	return result;
}

void large_lock(struct large *l)
{
	pthread_mutex_lock(&l->lock);
}

void large_unlock(struct large *l)
{
	pthread_mutex_unlock(&l->lock);
}

void large_reset_lock(struct large *l)
{
	pthread_mutex_init(&l->lock, NULL);
}
