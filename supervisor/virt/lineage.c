/* lineage.c — see lineage.h.
 *
 * Per slot, a table of the tasks seen (open addressing by host id, rebuilt
 * when it grows and when it is swept). A process's node keeps its clones:
 * how many of each kind it made (the next one's number) and the last
 * CLONES_KEPT of each kind with their snapshots, newest last. The slot
 * keeps its last ORPHAN_FORKS forks apart, named already, for processes
 * whose parent is gone by the time they are first seen.
 *
 * Invariants: a node's place never changes once found (0: unknown); a
 * process's records are in the order their clones were notified, so
 * their snapshots go forward (modulo pid_max); a node is replaced, never
 * reused, when its id's task has another start time. */
#include "lineage.h"

#include <stdlib.h>
#include <string.h>

#define CLONES_KEPT 1024
#define ORPHAN_FORKS 1024
#define ORPHAN_LOOKS 64 /* candidates checked for a gone parent */
#define SWEEP_FLOOR 256

enum { FORK, THREAD };

struct rec {
	pid_t snap;       /* the last pid given when the clone was notified */
	uint32_t ordinal; /* the clone's number among its kind */
	pid_t child;      /* the task found to be its child (0: none yet) */
	uint64_t child_start;
};

struct recs {
	struct rec *r; /* a ring of cap */
	uint32_t cap, len, head; /* head: the oldest */
};

struct node {
	pid_t tid; /* 0: a free entry */
	pid_t tgid;
	uint64_t start;
	uint64_t checked; /* when start was last read (ops.now), 0: never */
	uint64_t place;
	uint32_t clones[2]; /* a process's: made so far, per kind */
	struct recs recs[2];
};

struct orphan {
	pid_t snap, parent;
	uint64_t parent_start;
	uint64_t place; /* the child's */
	bool adopted;   /* CLONE_PARENT: its parent is its maker's */
	pid_t child;    /* the task found to be its child (0: none yet) */
	uint64_t child_start;
};

struct slot {
	pid_t root;
	struct node *nodes;
	size_t cap, n, swept_at;
	struct orphan *orphans; /* a ring of ORPHAN_FORKS */
	unsigned ohead, olen;   /* ohead: where the next goes */
};

struct lineage {
	struct lineage_ops ops;
	unsigned nslots;
	struct slot *s;
};

/* splitmix64's finalizer. */
static uint64_t mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

static uint64_t child_place(uint64_t parent, int kind, uint32_t ordinal)
{
	uint64_t p = mix(parent ^ mix(((uint64_t)ordinal << 1 | (uint64_t)kind) + 0x9e3779b97f4a7c15ull));
	return p != 0 ? p : 1;
}

/* How far forward from `from` id `to` lies, ids wrapping at pid_max. */
static uint32_t ahead(const struct lineage *L, pid_t from, pid_t to)
{
	int64_t m = L->ops.pid_max > 0 ? L->ops.pid_max : (int64_t)1 << 22;
	int64_t d = ((int64_t)to - (int64_t)from) % m;
	return (uint32_t)(d < 0 ? d + m : d);
}

/* Whether task t was made after snapshot snap (and by now, the last id
 * given). */
static bool made_after(const struct lineage *L, pid_t snap, pid_t t, pid_t now)
{
	uint32_t d = ahead(L, snap, t);
	return d != 0 && d <= ahead(L, snap, now);
}

static size_t hash_of(pid_t tid, size_t cap)
{
	return (size_t)mix((uint64_t)(uint32_t)tid) & (cap - 1);
}

static struct node *find(struct slot *s, pid_t tid)
{
	if (s->cap == 0)
		return NULL;
	for (size_t h = hash_of(tid, s->cap);; h = (h + 1) & (s->cap - 1)) {
		if (s->nodes[h].tid == tid)
			return &s->nodes[h];
		if (s->nodes[h].tid == 0)
			return NULL;
	}
}

static void recs_free(struct node *n)
{
	free(n->recs[FORK].r);
	free(n->recs[THREAD].r);
}

/* Puts node (by value) into a table of cap entries with room. */
static struct node *place_into(struct node *nodes, size_t cap, const struct node *n)
{
	size_t h = hash_of(n->tid, cap);
	while (nodes[h].tid != 0)
		h = (h + 1) & (cap - 1);
	nodes[h] = *n;
	return &nodes[h];
}

/* Rebuilds s's table with the nodes keep() accepts (the rest freed),
 * at least twice as large as what remains. false when out of memory
 * (the table is as it was). */
static bool rebuild(struct lineage *L, struct slot *s, bool sweep)
{
	size_t live = 0;
	bool *drop = NULL;
	if (sweep && s->cap != 0) {
		drop = calloc(s->cap, sizeof *drop);
		if (drop == NULL)
			return false;
	}
	for (size_t i = 0; i < s->cap; i++) {
		struct node *n = &s->nodes[i];
		if (n->tid == 0)
			continue;
		if (drop != NULL && n->tid != s->root && L->ops.started(L->ops.ctx, n->tid) != n->start)
			drop[i] = true;
		else
			live++;
	}
	size_t cap = 16;
	while (cap < 2 * (live + 1))
		cap *= 2;
	struct node *nodes = calloc(cap, sizeof *nodes);
	if (nodes == NULL) {
		free(drop);
		return false;
	}
	for (size_t i = 0; i < s->cap; i++) {
		struct node *n = &s->nodes[i];
		if (n->tid == 0)
			continue;
		if (drop != NULL && drop[i])
			recs_free(n);
		else
			place_into(nodes, cap, n);
	}
	free(drop);
	free(s->nodes);
	s->nodes = nodes;
	s->cap = cap;
	s->n = live;
	if (sweep)
		s->swept_at = live;
	return true;
}

/* A new node for tid (none is there), or NULL when out of memory. */
static struct node *add(struct lineage *L, struct slot *s, const struct node *n)
{
	if (s->n >= SWEEP_FLOOR && s->n >= 2 * s->swept_at && !rebuild(L, s, true))
		return NULL;
	if (2 * (s->n + 1) > s->cap && !rebuild(L, s, false))
		return NULL;
	s->n++;
	return place_into(s->nodes, s->cap, n);
}

static void recs_push(struct recs *rs, pid_t snap, uint32_t ordinal)
{
	if (rs->len == rs->cap && rs->cap < CLONES_KEPT) {
		uint32_t cap = rs->cap ? 2 * rs->cap : 8;
		struct rec *r = malloc(cap * sizeof *r);
		if (r == NULL)
			return; /* that child stays unnamed */
		for (uint32_t i = 0; i < rs->len; i++)
			r[i] = rs->r[(rs->head + i) % rs->cap];
		free(rs->r);
		rs->r = r;
		rs->cap = cap;
		rs->head = 0;
	}
	if (rs->len == rs->cap) { /* full at CLONES_KEPT: the oldest goes */
		rs->r[rs->head] = (struct rec){ .snap = snap, .ordinal = ordinal };
		rs->head = (rs->head + 1) % rs->cap;
		return;
	}
	rs->r[(rs->head + rs->len) % rs->cap] = (struct rec){ .snap = snap, .ordinal = ordinal };
	rs->len++;
}

/* The clone among rs that made task t (started at start): the newest whose
 * snapshot precedes t, claimed for t; NULL when there is none, or when it
 * made another task (then t is not rs's owner's child: a subreaper's, a
 * CLONE_PARENT one, or seen only after the pids wrapped past it). */
static struct rec *maker(const struct lineage *L, struct recs *rs, pid_t t, uint64_t start, pid_t now)
{
	for (uint32_t i = rs->len; i-- > 0;) {
		struct rec *r = &rs->r[(rs->head + i) % rs->cap];
		if (!made_after(L, r->snap, t, now))
			continue;
		if (r->child != 0 && (r->child != t || r->child_start != start))
			return NULL;
		r->child = t;
		r->child_start = start;
		return r;
	}
	return NULL;
}

static struct node *resolve(struct lineage *L, struct slot *s, pid_t tid, unsigned depth);

/* A process reparented before it was seen, or made by CLONE_PARENT: the
 * newest of the slot's forks before it that no other task claimed and
 * whose maker no longer runs (or adopted it out). */
static uint64_t orphan_place(struct lineage *L, struct slot *s, pid_t t, uint64_t start, pid_t now)
{
	unsigned looked = 0;
	for (unsigned i = 0; i < s->olen && looked < ORPHAN_LOOKS; i++) {
		struct orphan *o = &s->orphans[(s->ohead + ORPHAN_FORKS - 1 - i) % ORPHAN_FORKS];
		if (!made_after(L, o->snap, t, now))
			continue;
		looked++;
		if (o->child != 0 && (o->child != t || o->child_start != start))
			continue;
		if (o->adopted || !L->ops.running(L->ops.ctx, o->parent, o->parent_start)) {
			o->child = t;
			o->child_start = start;
			return o->place;
		}
	}
	return 0;
}

/* The place of a task first seen, t (what /proc says of it: ti). */
static uint64_t find_place(struct lineage *L, struct slot *s, pid_t t, const struct lineage_task *ti,
			   unsigned depth)
{
	pid_t now = L->ops.last_pid(L->ops.ctx);
	if (ti->tgid != t) { /* a thread: its process's clone */
		struct node *p = resolve(L, s, ti->tgid, depth + 1);
		if (p == NULL || p->place == 0)
			return 0;
		const struct rec *r = maker(L, &p->recs[THREAD], t, ti->start, now);
		return r != NULL ? child_place(p->place, THREAD, r->ordinal) : 0;
	}
	if (t == s->root)
		return LINEAGE_ROOT;
	struct node *p = NULL;
	if (ti->ppid > 0 && ti->ppid != t && find(s, ti->ppid) != NULL)
		p = resolve(L, s, ti->ppid, depth + 1);
	if (p != NULL && p->tgid == p->tid && p->place != 0) {
		const struct rec *r = maker(L, &p->recs[FORK], t, ti->start, now);
		if (r != NULL)
			return child_place(p->place, FORK, r->ordinal);
	}
	return orphan_place(L, s, t, ti->start, now);
}

/* Task tid's node, found (and its place) when first seen; NULL when it is
 * gone or memory is short. Parents are followed a bounded way up. */
static struct node *resolve(struct lineage *L, struct slot *s, pid_t tid, unsigned depth)
{
	if (tid <= 0 || depth > 64)
		return NULL;
	struct node *n = find(s, tid);
	uint64_t now = L->ops.now != NULL ? L->ops.now(L->ops.ctx) : 0;
	if (n != NULL && n->start != 0 && n->checked != 0 && now - n->checked < LINEAGE_RECHECK_NS)
		return n;
	if (n != NULL && n->start != 0 && L->ops.started(L->ops.ctx, tid) == n->start) {
		n->checked = now;
		return n;
	}
	struct lineage_task ti;
	if (!L->ops.task(L->ops.ctx, tid, &ti))
		return NULL;
	uint64_t place = find_place(L, s, tid, &ti, depth);
	n = find(s, tid); /* the search may have rebuilt the table */
	struct node fresh = { .tid = tid, .tgid = ti.tgid, .start = ti.start, .checked = now, .place = place };
	if (n != NULL) { /* its id's earlier task ended: replaced */
		recs_free(n);
		*n = fresh;
		return n;
	}
	return add(L, s, &fresh);
}

struct lineage *lineage_new(unsigned nslots, const struct lineage_ops *ops)
{
	struct lineage *L = calloc(1, sizeof *L);
	if (L == NULL)
		return NULL;
	L->ops = *ops;
	L->nslots = nslots;
	L->s = calloc(nslots ? nslots : 1, sizeof *L->s);
	if (L->s == NULL) {
		free(L);
		return NULL;
	}
	return L;
}

static void slot_clear(struct slot *s)
{
	for (size_t i = 0; i < s->cap; i++)
		if (s->nodes[i].tid != 0)
			recs_free(&s->nodes[i]);
	free(s->nodes);
	free(s->orphans);
	*s = (struct slot){ 0 };
}

void lineage_free(struct lineage *L)
{
	if (L == NULL)
		return;
	for (unsigned i = 0; i < L->nslots; i++)
		slot_clear(&L->s[i]);
	free(L->s);
	free(L);
}

void lineage_start(struct lineage *L, unsigned slot, pid_t root)
{
	if (L == NULL || slot >= L->nslots)
		return;
	struct slot *s = &L->s[slot];
	slot_clear(s);
	s->root = root;
	(void)resolve(L, s, root, 0);
}

void lineage_clone(struct lineage *L, unsigned slot, pid_t tid, enum lineage_clone kind)
{
	if (L == NULL || slot >= L->nslots)
		return;
	struct slot *s = &L->s[slot];
	struct node *t = resolve(L, s, tid, 0);
	if (t == NULL)
		return;
	struct node *p = t->tgid == t->tid ? t : resolve(L, s, t->tgid, 0);
	if (p == NULL)
		return;
	pid_t snap = L->ops.last_pid(L->ops.ctx);
	int which = kind == LINEAGE_THREAD ? THREAD : FORK;
	uint32_t ordinal = p->clones[which]++;
	/* A CLONE_PARENT child is its maker's n-th, but its parent's child
	 * in /proc: found among the slot's forks, never among p's. */
	if (kind != LINEAGE_ADOPTED)
		recs_push(&p->recs[which], snap, ordinal);
	if (kind == LINEAGE_THREAD || p->place == 0)
		return;
	if (s->orphans == NULL && (s->orphans = calloc(ORPHAN_FORKS, sizeof *s->orphans)) == NULL)
		return;
	s->orphans[s->ohead] = (struct orphan){ .snap = snap, .parent = p->tid, .parent_start = p->start,
						.place = child_place(p->place, FORK, ordinal),
						.adopted = kind == LINEAGE_ADOPTED };
	s->ohead = (s->ohead + 1) % ORPHAN_FORKS;
	if (s->olen < ORPHAN_FORKS)
		s->olen++;
}

uint64_t lineage_place(struct lineage *L, unsigned slot, pid_t tid)
{
	if (L == NULL || slot >= L->nslots || L->s[slot].root <= 0)
		return 0;
	struct node *n = resolve(L, &L->s[slot], tid, 0);
	return n != NULL ? n->place : 0;
}

/* The top bits of a place, never 0. */
static uint32_t cut(uint64_t place, unsigned bits)
{
	if (place == 0)
		return 0;
	uint32_t k = (uint32_t)(place >> (64 - bits));
	return k != 0 ? k : 1;
}

uint32_t lineage_process(struct lineage *L, unsigned slot, pid_t tid)
{
	if (L == NULL || slot >= L->nslots || L->s[slot].root <= 0)
		return 0;
	struct slot *s = &L->s[slot];
	struct node *n = resolve(L, s, tid, 0);
	if (n != NULL && n->tgid != n->tid)
		n = find(s, n->tgid); /* resolved with the thread, alive with it */
	return n != NULL ? cut(n->place, 24) : 0;
}

uint32_t lineage_thread(struct lineage *L, unsigned slot, pid_t tid)
{
	return cut(lineage_place(L, slot, tid), 22);
}

struct counts {
	uint64_t place;
	uint32_t clones[2];
};

static int by_place(const void *a, const void *b)
{
	uint64_t x = ((const struct counts *)a)->place, y = ((const struct counts *)b)->place;
	return x < y ? -1 : x > y;
}

void lineage_align(struct lineage *L, unsigned to, unsigned from)
{
	if (L == NULL || to >= L->nslots || from >= L->nslots || to == from)
		return;
	struct slot *a = &L->s[to], *b = &L->s[from];
	struct counts *c = malloc((b->n + 1) * sizeof *c);
	if (c == NULL)
		return;
	size_t n = 0;
	for (size_t j = 0; j < b->cap; j++) {
		const struct node *m = &b->nodes[j];
		if (m->tid != 0 && m->tid == m->tgid && m->place != 0)
			c[n++] = (struct counts){ m->place, { m->clones[FORK], m->clones[THREAD] } };
	}
	qsort(c, n, sizeof *c, by_place);
	for (size_t i = 0; i < a->cap; i++) {
		struct node *p = &a->nodes[i];
		if (p->tid == 0 || p->tid != p->tgid || p->place == 0)
			continue;
		struct counts key = { .place = p->place };
		const struct counts *m = bsearch(&key, c, n, sizeof *c, by_place);
		/* Several entries of one place (an ended process and its
		 * namesake): the largest counts. */
		for (; m != NULL && m > c && m[-1].place == p->place; m--)
			;
		for (; m != NULL && m < c + n && m->place == p->place; m++)
			for (int k = FORK; k <= THREAD; k++)
				if (m->clones[k] > p->clones[k])
					p->clones[k] = m->clones[k];
	}
	free(c);
}

size_t lineage_known(const struct lineage *L, unsigned slot)
{
	return L != NULL && slot < L->nslots ? L->s[slot].n : 0;
}
