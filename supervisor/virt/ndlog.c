/* ndlog.c — see ndlog.h.
 *
 * Each key keeps its entries in a ring: entry number base + i lives at
 * ring[(head + i) % cap_now]. Invariants, per key:
 *   base <= pos[r] <= base + len for every live r that is not lost;
 *   a replica that found its entry dropped (behind the cap) is lost for
 *   that key for good: it gets ND_LOST from then on, reads real values, and
 *   keeps nothing (had it caught up, it would have been handed values read
 *   before the real ones it just got: its clock would have gone back);
 *   entries below the smallest pos of the live replicas not lost are
 *   dropped (trim).
 * Keys are found through an open-addressing index (a server's wall clocks
 * have a key per thread: thousands). The index maps a key to its slot in
 * keys[], which stays in first-seen order; a sweep that frees idle keys
 * compacts keys[] in order and rebuilds the index. Per kind (a key's top
 * byte) the log counts the entries it keeps: in keep mode, a kind reaching
 * the cap ends keep mode for good (the log is incomplete from then on).
 *
 * The start (ndlog_keep_start): when keep mode ends, each key's first
 * entries, up to start_cap per kind over its keys (shared as water fills:
 * keep_start), are copied into the key's start[], never dropped; entry n < nstart is
 * start[n] wherever the ring stands (the ring's copy, while a replica still
 * holds it there, is the same value). Invariants then: nstart <= base + len,
 * and a replica's take of n < nstart is answered from start[] unless it is
 * lost for the key.
 *
 * A ring slot is a cell of 16 bytes, not an entry of 40: a clock's value
 * (seconds, and nanoseconds or microseconds below 2^32, no timezone, no
 * error) under an argument below 2^31, the run's nearly every entry, fits
 * in one (narrow). Any other entry is wide: its cell holds its number in
 * the key's wide ring, a ring of whole entries in the same order (wbase:
 * the number of the oldest kept; the oldest kept wide entry is always the
 * first wide cell from base, so dropping the oldest cell drops it). A
 * server's history for its replacements grows by its clock reads per
 * request: at 40 bytes an entry, diehard grew 145-175 bytes a redis
 * request; in cells, 73. */
#include "ndlog.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct entry {
	uint64_t arg;
	struct nd_value v;
};

/* A ring slot: narrow (tag: the argument; a, b: the value's, the rest 0)
 * or wide (tag WIDE; a: the entry's number in the wide ring). */
struct cell {
	int64_t a;
	uint32_t b;
	uint32_t tag;
};

#define WIDE 0x80000000u

struct keylog {
	uint32_t key;
	uint64_t base;        /* number of the oldest entry kept */
	size_t len;           /* entries kept */
	size_t head;          /* ring slot of entry base */
	size_t size;          /* ring slots allocated */
	struct cell *ring;
	struct entry *wide;   /* the wide entries kept, in order */
	uint64_t wbase;       /* number of the oldest of them */
	size_t wlen, whead, wsize;
	uint64_t pending_arg; /* the leader's argument, until ndlog_put */
	struct nd_value last; /* the value put last, kept even once dropped */
	bool has_last;
	uint64_t *pos;        /* per replica: its next entry number */
	bool *lost;           /* per replica: it fell behind the cap */
	struct cell *start;   /* entries 0 .. nstart - 1, kept for good */
	struct entry *start_wide; /* the wide ones of them, in order */
	size_t nstart, nstart_wide;
};

struct ndlog {
	unsigned k;
	size_t cap;
	bool keep;             /* entries kept from the start, for replacements */
	bool dropped;          /* some entry was dropped: a restart cannot replay all */
	size_t start_cap;      /* entries per kind kept as the start once keep ends */
	size_t started;        /* entries kept as the start, over all kinds */
	bool *live;
	struct keylog *keys;   /* in first-seen order */
	size_t nkeys, keys_size;
	uint32_t *index;       /* open addressing: slot in keys[] + 1, 0 empty */
	size_t index_size;     /* a power of two, > 2 * nkeys; 0 before the first key */
	size_t kept[256];      /* entries kept, per kind (key >> 24) */
	bool (*reclaimable)(uint32_t key);
	size_t swept_at;       /* nkeys after the last sweep */
	uint64_t entries;
};

struct ndlog *ndlog_new(unsigned k, size_t cap, bool keep)
{
	struct ndlog *log = calloc(1, sizeof *log);
	if (log == NULL)
		return NULL;
	log->k = k;
	log->cap = cap ? cap : 1;
	log->keep = keep;
	log->live = malloc(k * sizeof *log->live);
	if (log->live == NULL) {
		free(log);
		return NULL;
	}
	for (unsigned r = 0; r < k; r++)
		log->live[r] = true;
	return log;
}

void ndlog_free(struct ndlog *log)
{
	if (log == NULL)
		return;
	for (size_t i = 0; i < log->nkeys; i++) {
		free(log->keys[i].ring);
		free(log->keys[i].wide);
		free(log->keys[i].pos);
		free(log->keys[i].start);
		free(log->keys[i].start_wide);
	}
	free(log->keys);
	free(log->index);
	free(log->live);
	free(log);
}

static size_t hash(uint32_t key, size_t size)
{
	return (size_t)((key * 0x9e3779b97f4a7c15ull) >> 32) & (size - 1);
}

static struct keylog *find(const struct ndlog *log, uint32_t key)
{
	if (log->index_size == 0)
		return NULL;
	for (size_t h = hash(key, log->index_size);; h = (h + 1) & (log->index_size - 1)) {
		uint32_t at = log->index[h];
		if (at == 0)
			return NULL;
		if (log->keys[at - 1].key == key)
			return &log->keys[at - 1];
	}
}

static void index_insert(struct ndlog *log, size_t at)
{
	size_t h = hash(log->keys[at].key, log->index_size);
	while (log->index[h] != 0)
		h = (h + 1) & (log->index_size - 1);
	log->index[h] = (uint32_t)(at + 1);
}

/* An index of size slots for keys[0..nkeys): 0, or -1 out of memory. */
static int reindex(struct ndlog *log, size_t size)
{
	uint32_t *index = calloc(size, sizeof *index);
	if (index == NULL)
		return -1;
	free(log->index);
	log->index = index;
	log->index_size = size;
	for (size_t i = 0; i < log->nkeys; i++)
		index_insert(log, i);
	return 0;
}

static void sweep(struct ndlog *log);

static struct keylog *find_or_add(struct ndlog *log, uint32_t key)
{
	struct keylog *kl = find(log, key);
	if (kl != NULL)
		return kl;
	if (log->reclaimable != NULL && !log->keep && log->nkeys >= 64 && log->nkeys >= 2 * log->swept_at)
		sweep(log);
	if (log->nkeys >= UINT32_MAX - 1)
		return NULL;
	if (log->nkeys == log->keys_size) {
		size_t n = log->keys_size ? 2 * log->keys_size : 8;
		struct keylog *grown = realloc(log->keys, n * sizeof *grown);
		if (grown == NULL)
			return NULL;
		log->keys = grown;
		log->keys_size = n;
	}
	if (2 * (log->nkeys + 1) >= log->index_size &&
	    reindex(log, log->index_size ? 2 * log->index_size : 16) != 0)
		return NULL;
	/* pos and lost in one block: pos[k], then lost[k]. */
	uint64_t *pos = calloc(1, log->k * (sizeof *pos + sizeof(bool)));
	if (pos == NULL)
		return NULL;
	kl = &log->keys[log->nkeys];
	*kl = (struct keylog){ .key = key, .pos = pos, .lost = (bool *)(pos + log->k) };
	index_insert(log, log->nkeys++);
	return kl;
}

/* A key nobody needs: no entry kept and every live replica's next call of
 * it would lead, so forgetting it changes no answer. */
static bool idle(const struct ndlog *log, const struct keylog *kl)
{
	if (kl->len != 0 || kl->nstart != 0)
		return false;
	for (unsigned r = 0; r < log->k; r++)
		if (log->live[r] && !kl->lost[r] && kl->pos[r] != kl->base)
			return false;
	return true;
}

/* Frees the idle reclaimable keys (not in keep mode: a replacement may
 * still replay them), keeping the others in first-seen order. */
static void sweep(struct ndlog *log)
{
	size_t n = 0;
	for (size_t i = 0; i < log->nkeys; i++) {
		struct keylog *kl = &log->keys[i];
		if (log->reclaimable(kl->key) && idle(log, kl)) {
			free(kl->ring);
			free(kl->wide);
			free(kl->pos);
			free(kl->start);
			free(kl->start_wide);
			continue;
		}
		log->keys[n++] = *kl;
	}
	log->nkeys = n;
	log->swept_at = n;
	memset(log->index, 0, log->index_size * sizeof *log->index);
	for (size_t i = 0; i < n; i++)
		index_insert(log, i);
}

void ndlog_reclaim(struct ndlog *log, bool (*which)(uint32_t key))
{
	log->reclaimable = which;
}

/* Entry n's cell (base <= n < base + len <= size, head < size: the sum
 * is below 2 size, so one subtraction wraps it; no division, which the
 * fast clock path's harvest, a few million entries a second, felt). */
static struct cell *slot(const struct keylog *kl, uint64_t n)
{
	size_t i = kl->head + (size_t)(n - kl->base);
	return &kl->ring[i >= kl->size ? i - kl->size : i];
}

/* Wide entry number w's place (wbase <= w < wbase + wlen). */
static struct entry *wide_slot(const struct keylog *kl, uint64_t w)
{
	size_t i = kl->whead + (size_t)(w - kl->wbase);
	return &kl->wide[i >= kl->wsize ? i - kl->wsize : i];
}

/* Entry n (kept in the ring). */
static struct entry get(const struct keylog *kl, uint64_t n)
{
	const struct cell *c = slot(kl, n);
	if (c->tag & WIDE)
		return *wide_slot(kl, (uint64_t)c->a);
	return (struct entry){ .arg = c->tag, .v = { .a = c->a, .b = c->b } };
}

static bool narrow(const struct entry *e)
{
	return e->arg < WIDE && e->v.b >= 0 && e->v.b <= UINT32_MAX && e->v.c == 0 && e->v.d == 0 &&
	       e->v.err == 0;
}

/* A narrow entry's cell. */
static struct cell cell_of(const struct entry *e)
{
	return (struct cell){ .a = e->v.a, .b = (uint32_t)e->v.b, .tag = (uint32_t)e->arg };
}

/* Entry n of the start (n < nstart): its wide ones numbered from 0. */
static struct entry start_get(const struct keylog *kl, uint64_t n)
{
	const struct cell *c = &kl->start[n];
	if (c->tag & WIDE)
		return kl->start_wide[c->a];
	return (struct entry){ .arg = c->tag, .v = { .a = c->a, .b = c->b } };
}

static void drop_oldest(struct ndlog *log, struct keylog *kl)
{
	if (slot(kl, kl->base)->tag & WIDE) {
		kl->whead = kl->whead + 1 == kl->wsize ? 0 : kl->whead + 1;
		kl->wbase++;
		kl->wlen--;
	}
	log->dropped = true;
	log->kept[kl->key >> 24]--;
	kl->head = kl->head + 1 == kl->size ? 0 : kl->head + 1;
	kl->base++;
	kl->len--;
}

/* Drops the entries every live replica has passed (none in keep mode). */
static void trim(struct ndlog *log, struct keylog *kl)
{
	if (log->keep)
		return;
	uint64_t low = kl->base + kl->len;
	for (unsigned r = 0; r < log->k; r++)
		if (log->live[r] && !kl->lost[r] && kl->pos[r] < low)
			low = kl->pos[r];
	while (kl->len > 0 && kl->base < low)
		drop_oldest(log, kl);
}

int ndlog_take(struct ndlog *log, unsigned r, uint32_t key, uint64_t arg, uint64_t *index, struct nd_value *value,
	       uint64_t *expected)
{
	struct keylog *kl = find_or_add(log, key);
	if (kl == NULL) {
		errno = ENOMEM;
		return -1;
	}
	uint64_t n = kl->pos[r]++;
	*index = n;
	if (n < kl->nstart && !kl->lost[r]) {
		const struct entry e = start_get(kl, n);
		*value = e.v;
		*expected = e.arg;
		return e.arg == arg ? ND_FOLLOW : ND_MISMATCH;
	}
	if (n < kl->base || kl->lost[r]) {
		kl->lost[r] = true;
		return ND_LOST;
	}
	if (n == kl->base + kl->len) {
		kl->pending_arg = arg;
		return ND_LEAD;
	}
	const struct entry e = get(kl, n);
	*value = e.v;
	*expected = e.arg;
	trim(log, kl);
	return e.arg == arg ? ND_FOLLOW : ND_MISMATCH;
}

static void append(struct ndlog *log, struct keylog *kl, const struct nd_value *value);

void ndlog_put(struct ndlog *log, unsigned r, uint32_t key, const struct nd_value *value)
{
	struct keylog *kl = find(log, key);
	if (kl == NULL || kl->pos[r] != kl->base + kl->len + 1)
		return; /* not after a ND_LEAD of r: nothing to record */
	append(log, kl, value);
}

int ndlog_preload(struct ndlog *log, uint32_t key, uint64_t arg, const struct nd_value *value)
{
	struct keylog *kl = find_or_add(log, key);
	if (kl == NULL) {
		errno = ENOMEM;
		return -1;
	}
	kl->pending_arg = arg;
	append(log, kl, value);
	return 0;
}

size_t ndlog_kept(const struct ndlog *log, uint32_t key)
{
	const struct keylog *kl = find(log, key);
	return kl ? kl->len : 0;
}

bool ndlog_entry(const struct ndlog *log, uint32_t key, size_t n, uint64_t *arg, struct nd_value *value)
{
	const struct keylog *kl = find(log, key);
	if (kl == NULL || n >= kl->len)
		return false;
	const struct entry e = get(kl, kl->base + n);
	*arg = e.arg;
	*value = e.v;
	return true;
}

/* The entries kind's keys would keep as their start if each kept at most
 * level of its first ones. */
static size_t start_sum(const struct ndlog *log, unsigned kind, size_t level)
{
	size_t sum = 0;
	for (size_t i = 0; i < log->nkeys; i++) {
		const struct keylog *kl = &log->keys[i];
		if (kl->key >> 24 == kind && kl->base == 0)
			sum += kl->len < level ? kl->len : level;
	}
	return sum;
}

/* Keep mode ends: each key's first entries become its start, at most
 * start_cap per kind, shared as water fills: every key keeps its first
 * `level` entries (all of them if it has fewer), the highest level the
 * kind's budget allows. A key a start-up read a few times keeps all its
 * entries, whatever another key of the kind read (a server's monotonic
 * clock, read a million times, does not take its wall clock's share). Out
 * of memory, a key keeps no start: a new replica is then lost on it, as
 * without one. */
static void keep_start(struct ndlog *log)
{
	size_t level[256] = { 0 };
	for (unsigned c = 0; c < 256 && log->start_cap > 0; c++) {
		if (log->kept[c] == 0)
			continue;
		size_t lo = 0, hi = log->cap;
		while (lo < hi) {
			size_t mid = lo + (hi - lo + 1) / 2;
			if (start_sum(log, c, mid) <= log->start_cap)
				lo = mid;
			else
				hi = mid - 1;
		}
		level[c] = lo;
	}
	for (size_t i = 0; i < log->nkeys; i++) {
		struct keylog *kl = &log->keys[i];
		size_t m = kl->len < level[kl->key >> 24] ? kl->len : level[kl->key >> 24];
		if (kl->base != 0 || m == 0)
			continue;
		size_t w = 0;
		for (size_t j = 0; j < m; j++)
			w += (slot(kl, j)->tag & WIDE) != 0;
		kl->start = malloc(m * sizeof *kl->start);
		kl->start_wide = w != 0 ? malloc(w * sizeof *kl->start_wide) : NULL;
		if (kl->start == NULL || (w != 0 && kl->start_wide == NULL)) {
			free(kl->start);
			free(kl->start_wide);
			kl->start = NULL;
			kl->start_wide = NULL;
			continue;
		}
		w = 0;
		for (size_t j = 0; j < m; j++) {
			struct entry e = get(kl, j);
			if (narrow(&e)) {
				kl->start[j] = cell_of(&e);
			} else {
				kl->start_wide[w] = e;
				kl->start[j] = (struct cell){ .a = (int64_t)w++, .tag = WIDE };
			}
		}
		kl->nstart = m;
		kl->nstart_wide = w;
		log->started += m;
	}
}

/* A ring of len elements of elem bytes (its first in slot *head of size)
 * in n slots, unrolled so that its first sits in slot 0. A ring not
 * wrapped (head 0: nothing dropped yet, as in keep mode) is already in
 * order: realloc keeps it where it is when it can (glibc moves a large
 * block's pages by mremap), where a copy would touch every page again,
 * twice the faults of a log that grows to millions of entries (the fast
 * clock path's harvest). Returns the new ring (*head then 0), or NULL out
 * of memory, buf as it was. */
static void *ring_grow(void *buf, size_t elem, size_t size, size_t *head, size_t len, size_t n)
{
	if (*head == 0)
		return realloc(buf, n * elem);
	unsigned char *grown = malloc(n * elem);
	if (grown == NULL)
		return NULL;
	size_t first = size - *head < len ? size - *head : len;
	memcpy(grown, (unsigned char *)buf + *head * elem, first * elem);
	memcpy(grown + first * elem, buf, (len - first) * elem);
	free(buf);
	*head = 0;
	return grown;
}

/* Room in the wide ring for one more entry, grown (ring_grow) when full, up to the cap (wlen <= len < cap before an append).
 * Out of memory, the oldest entries make room: all of the key's up to its
 * oldest wide one, or all of them and this one too when none is wide
 * (those behind read real values from there: ND_LOST). Returns whether
 * the entry goes in. */
static bool wide_room(struct ndlog *log, struct keylog *kl)
{
	if (kl->wlen < kl->wsize)
		return true;
	size_t n = kl->wsize ? 2 * kl->wsize : 2;
	if (n > log->cap)
		n = log->cap;
	struct entry *wide =
		n <= kl->wsize ? NULL : ring_grow(kl->wide, sizeof *wide, kl->wsize, &kl->whead, kl->wlen, n);
	if (wide != NULL) {
		kl->wide = wide;
		kl->wsize = n;
		return true;
	}
	while (kl->wlen == kl->wsize && kl->len > 0)
		drop_oldest(log, kl);
	if (kl->wlen < kl->wsize)
		return true;
	log->dropped = true;
	kl->base++;
	return false;
}

/* Adds the leader's entry (its argument in pending_arg) at the end. */
static void append(struct ndlog *log, struct keylog *kl, const struct nd_value *value)
{
	if (log->keep && log->kept[kl->key >> 24] >= log->cap) {
		/* The kind's cap: the start can no longer be kept. From here
		 * on entries go once every live replica has taken them. */
		log->keep = false;
		log->dropped = true;
		keep_start(log);
		for (size_t i = 0; i < log->nkeys; i++)
			trim(log, &log->keys[i]);
	}
	if (kl->len == log->cap)
		drop_oldest(log, kl);
	if (kl->len == kl->size) {
		/* Grow the ring (ring_grow: entry base in slot 0). */
		size_t n = kl->size ? 2 * kl->size : 2;
		if (n > log->cap)
			n = log->cap;
		struct cell *ring = ring_grow(kl->ring, sizeof *ring, kl->size, &kl->head, kl->len, n);
		if (ring != NULL) {
			kl->ring = ring;
			kl->size = n;
		} else if (kl->len == 0) {
			/* Keep what we have; the oldest entry makes room. */
			log->dropped = true;
			kl->base++;
			return;
		} else {
			drop_oldest(log, kl);
		}
	}
	struct entry e = { .arg = kl->pending_arg, .v = *value };
	if (!narrow(&e) && !wide_room(log, kl))
		return;
	kl->len++;
	struct cell *c = slot(kl, kl->base + kl->len - 1);
	if (narrow(&e)) {
		*c = cell_of(&e);
	} else {
		uint64_t w = kl->wbase + kl->wlen++;
		*wide_slot(kl, w) = e;
		*c = (struct cell){ .a = (int64_t)w, .tag = WIDE };
	}
	kl->last = *value;
	kl->has_last = true;
	log->kept[kl->key >> 24]++;
	log->entries++;
	trim(log, kl);
}

void ndlog_retire(struct ndlog *log, unsigned r)
{
	if (r >= log->k || !log->live[r])
		return;
	log->live[r] = false;
	for (size_t i = 0; i < log->nkeys; i++)
		trim(log, &log->keys[i]);
}

bool ndlog_restart(struct ndlog *log, unsigned r)
{
	if (r >= log->k)
		return false;
	log->live[r] = true;
	for (size_t i = 0; i < log->nkeys; i++) {
		log->keys[i].pos[r] = 0;
		log->keys[i].lost[r] = false;
	}
	return ndlog_complete(log);
}

static void to_front(struct ndlog *log, struct keylog *kl, unsigned r)
{
	if (kl->pos[r] >= kl->base + kl->len)
		return;
	kl->pos[r] = kl->base + kl->len;
	kl->lost[r] = false;
	trim(log, kl);
}

void ndlog_to_front(struct ndlog *log, unsigned r, bool (*which)(uint32_t key))
{
	if (r >= log->k)
		return;
	for (size_t i = 0; i < log->nkeys; i++)
		if (which(log->keys[i].key))
			to_front(log, &log->keys[i], r);
}

void ndlog_to_front_key(struct ndlog *log, unsigned r, uint32_t key)
{
	struct keylog *kl = find(log, key);
	if (r < log->k && kl != NULL)
		to_front(log, kl, r);
}

bool ndlog_complete(const struct ndlog *log)
{
	return log->keep && !log->dropped;
}

void ndlog_keep_start(struct ndlog *log, size_t per_kind)
{
	log->start_cap = per_kind;
}

size_t ndlog_started(const struct ndlog *log)
{
	return log->started;
}

size_t ndlog_memory(const struct ndlog *log)
{
	size_t n = log->keys_size * sizeof *log->keys;
	for (size_t i = 0; i < log->nkeys; i++)
		n += (log->keys[i].size + log->keys[i].nstart) * sizeof(struct cell) +
		     (log->keys[i].wsize + log->keys[i].nstart_wide) * sizeof(struct entry) +
		     log->k * (sizeof(uint64_t) + sizeof(bool));
	return n + log->index_size * sizeof *log->index;
}

const struct nd_value *ndlog_last(const struct ndlog *log, uint32_t key)
{
	const struct keylog *kl = find(log, key);
	return kl != NULL && kl->has_last ? &kl->last : NULL;
}

uint64_t ndlog_front(const struct ndlog *log, uint32_t key)
{
	const struct keylog *kl = find(log, key);
	return kl ? kl->base + kl->len : 0;
}

uint64_t ndlog_count(const struct ndlog *log, unsigned r, uint32_t key)
{
	const struct keylog *kl = find(log, key);
	return kl ? kl->pos[r] : 0;
}

size_t ndlog_keys(const struct ndlog *log, uint32_t *keys, size_t max)
{
	for (size_t i = 0; i < log->nkeys && i < max; i++)
		keys[i] = log->keys[i].key;
	return log->nkeys;
}

bool ndlog_value(const struct ndlog *log, uint32_t key, uint64_t n, struct nd_value *value)
{
	const struct keylog *kl = find(log, key);
	if (kl != NULL && n < kl->nstart) {
		*value = start_get(kl, n).v;
		return true;
	}
	if (kl == NULL || n < kl->base || n - kl->base >= kl->len)
		return false;
	*value = get(kl, n).v;
	return true;
}

void ndlog_seek(struct ndlog *log, unsigned r, uint32_t key, uint64_t n)
{
	struct keylog *kl = find(log, key);
	if (kl == NULL || r >= log->k)
		return;
	if (n > kl->base + kl->len)
		n = kl->base + kl->len;
	kl->pos[r] = n;
	if (n >= kl->base || n < kl->nstart)
		kl->lost[r] = false;
	trim(log, kl);
}

uint64_t ndlog_entries(const struct ndlog *log)
{
	return log->entries;
}
