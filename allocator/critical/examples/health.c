/* health.c — critical memory's example: the Olden "health" simulation's
 * shape (a tree of villages, each with a hospital whose patients move
 * between linked lists), with every list node and village record critical.
 *
 *   health [--plain] [--counts] [levels] [steps]
 *
 * --plain runs the unprotected twin: the same program with malloc and plain
 * loads and stores. Both print, for every 64 steps and at the end, how many
 * patients were treated and a checksum of every list's contents; run alone
 * they print the same lines. With DIEHARD_CORRUPT writing random bytes into
 * random heap objects (libdiehard.so preloaded), the plain twin's lists are
 * corrupted (wrong lines, a crash or a loop) while the critical one's are
 * repaired: --counts prints on stderr how often (a line that differs from
 * replica to replica under diehard, whose heaps differ: leave it off there).
 *
 * Build: cc health.c $(pkg-config --cflags --libs diehard)
 */
#include <diehard/critical.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static bool plain;

/* ---- memory: critical or plain ---- */

static void *mem_alloc(size_t n)
{
	void *p = plain ? calloc(1, n) : critical_calloc(1, n);
	if (p == NULL) {
		fprintf(stderr, "health: out of memory\n");
		exit(1);
	}
	return p;
}

static void mem_free(void *p)
{
	if (plain)
		free(p);
	else
		critical_free(p);
}

static void *get_ptr(void *const *where)
{
	return plain ? *where : critical_load_ptr(where);
}

static void set_ptr(void **where, void *v)
{
	if (plain)
		*where = v;
	else
		critical_store_ptr(where, v);
}

static long get_long(const long *where)
{
	return plain ? *where : critical_load_long(where);
}

static void set_long(long *where, long v)
{
	if (plain)
		*where = v;
	else
		critical_store_long(where, v);
}

/* ---- the simulation ---- */

struct patient {
	long id;
	long hosps_visited;
	long time;        /* total time in hospitals */
	long time_left;   /* in the current stage */
};

struct node { /* a list cell */
	struct node *next;
	struct patient *patient;
};

struct list {
	struct node *head;
	long length;
};

struct village {
	struct village *child[4];
	struct village *parent;
	long level;
	long seed;
	long free_personnel;
	struct list waiting, assess, inside, up;
	long treated;
};

static long draw(struct village *v) /* the village's own generator: repeatable */
{
	long s = get_long(&v->seed);
	s = (s * 1103515245 + 12345) & 0x7fffffff;
	set_long(&v->seed, s);
	return s;
}

static void list_push(struct list *l, struct patient *p)
{
	struct node *n = mem_alloc(sizeof *n);
	set_ptr((void **)&n->patient, p);
	/* appended at the tail, as health does */
	struct node **at = &l->head;
	for (struct node *c; (c = get_ptr((void *const *)at)) != NULL;)
		at = &c->next;
	set_ptr((void **)at, n);
	set_long(&l->length, get_long(&l->length) + 1);
}

static void list_remove(struct list *l, struct patient *p)
{
	struct node **at = &l->head;
	for (struct node *c; (c = get_ptr((void *const *)at)) != NULL; at = &c->next)
		if (get_ptr((void *const *)&c->patient) == p) {
			set_ptr((void **)at, get_ptr((void *const *)&c->next));
			set_long(&l->length, get_long(&l->length) - 1);
			mem_free(c);
			return;
		}
}

static struct village *build(int level, struct village *parent, long label)
{
	struct village *v = mem_alloc(sizeof *v);
	set_ptr((void **)&v->parent, parent);
	set_long(&v->level, level);
	set_long(&v->seed, label * 2654435761L % 0x7fffffff + 1);
	set_long(&v->free_personnel, 1L << level);
	if (level > 0)
		for (int i = 0; i < 4; i++)
			set_ptr((void **)&v->child[i], build(level - 1, v, label * 4 + i + 1));
	return v;
}

static long next_id;

/* One step of one village, children first (as health's sim). */
static void step(struct village *v)
{
	if (get_long(&v->level) > 0)
		for (int i = 0; i < 4; i++)
			step(get_ptr((void *const *)&v->child[i]));

	/* Patients sent up by the children arrive here. */
	struct node *c;
	while ((c = get_ptr((void *const *)&v->up.head)) != NULL) {
		struct patient *p = get_ptr((void *const *)&c->patient);
		list_remove(&v->up, p);
		list_push(&v->waiting, p);
	}
	/* Inside: treated patients leave. */
	for (c = get_ptr((void *const *)&v->inside.head); c != NULL;) {
		struct patient *p = get_ptr((void *const *)&c->patient);
		c = get_ptr((void *const *)&c->next);
		long left = get_long(&p->time_left) - 1;
		set_long(&p->time_left, left);
		set_long(&p->time, get_long(&p->time) + 1);
		if (left == 0) {
			set_long(&v->free_personnel, get_long(&v->free_personnel) + 1);
			list_remove(&v->inside, p);
			set_long(&v->treated, get_long(&v->treated) + 1);
			mem_free(p);
		}
	}
	/* Assessed: treated here or sent up. */
	for (c = get_ptr((void *const *)&v->assess.head); c != NULL;) {
		struct patient *p = get_ptr((void *const *)&c->patient);
		c = get_ptr((void *const *)&c->next);
		long left = get_long(&p->time_left) - 1;
		set_long(&p->time_left, left);
		set_long(&p->time, get_long(&p->time) + 1);
		if (left > 0)
			continue;
		list_remove(&v->assess, p);
		struct village *up = get_ptr((void *const *)&v->parent);
		if (draw(v) % 10 < 9 || up == NULL) {
			set_long(&p->time_left, 10);
			list_push(&v->inside, p);
		} else {
			set_long(&v->free_personnel, get_long(&v->free_personnel) + 1);
			list_push(&up->up, p);
		}
	}
	/* Waiting: assessed when staff is free. */
	for (c = get_ptr((void *const *)&v->waiting.head); c != NULL;) {
		struct patient *p = get_ptr((void *const *)&c->patient);
		c = get_ptr((void *const *)&c->next);
		set_long(&p->time, get_long(&p->time) + 1);
		long staff = get_long(&v->free_personnel);
		if (staff == 0)
			continue;
		set_long(&v->free_personnel, staff - 1);
		set_long(&p->time_left, 3);
		set_long(&p->hosps_visited, get_long(&p->hosps_visited) + 1);
		list_remove(&v->waiting, p);
		list_push(&v->assess, p);
	}
	/* A new patient, now and then. */
	if (draw(v) % 1000 < 300) {
		struct patient *p = mem_alloc(sizeof *p);
		set_long(&p->id, ++next_id);
		list_push(&v->waiting, p);
	}
}

static uint64_t mixin(uint64_t h, long v)
{
	h ^= (uint64_t)v;
	return h * 0x100000001b3ULL;
}

static uint64_t list_sum(uint64_t h, const struct list *l)
{
	long n = 0;
	for (struct node *c = get_ptr((void *const *)&l->head); c != NULL; c = get_ptr((void *const *)&c->next)) {
		struct patient *p = get_ptr((void *const *)&c->patient);
		h = mixin(h, get_long(&p->id));
		h = mixin(h, get_long(&p->time));
		h = mixin(h, get_long(&p->hosps_visited));
		n++;
	}
	return mixin(h, n - get_long(&l->length));
}

static uint64_t village_sum(uint64_t h, struct village *v, long *treated)
{
	*treated += get_long(&v->treated);
	h = list_sum(h, &v->waiting);
	h = list_sum(h, &v->assess);
	h = list_sum(h, &v->inside);
	h = list_sum(h, &v->up);
	if (get_long(&v->level) > 0)
		for (int i = 0; i < 4; i++)
			h = village_sum(h, get_ptr((void *const *)&v->child[i]), treated);
	return h;
}

/* Results go out with write(2) from the stack: stdio's buffer is a heap
 * object, which the corruptor would reach too. */
static void say(long step_no, struct village *top)
{
	long treated = 0;
	uint64_t h = village_sum(0xcbf29ce484222325ULL, top, &treated);
	char line[96];
	int n = snprintf(line, sizeof line, "step %ld treated %ld sum %016llx\n", step_no, treated,
			 (unsigned long long)h);
	if (write(STDOUT_FILENO, line, (size_t)n) != n)
		exit(1);
}

int main(int argc, char **argv)
{
	int a = 1;
	bool counts = false;
	for (; a < argc && strncmp(argv[a], "--", 2) == 0; a++) {
		if (strcmp(argv[a], "--plain") == 0)
			plain = true;
		else if (strcmp(argv[a], "--counts") == 0)
			counts = true;
		else
			break;
	}
	int levels = a < argc ? atoi(argv[a++]) : 3;
	long steps = a < argc ? atol(argv[a++]) : 512;
	if (levels < 0 || levels > 6 || steps < 0) {
		fprintf(stderr, "usage: health [--plain] [--counts] [levels 0-6] [steps]\n");
		return 2;
	}
	struct village *top = build(levels, NULL, 0);
	for (long s = 1; s <= steps; s++) {
		step(top);
		if (s % 64 == 0 || s == steps)
			say(s, top);
	}
	if (counts && !plain) {
		struct critical_counts c;
		critical_counts(&c);
		fprintf(stderr, "health: critical objects %llu, detected %llu, repaired %llu, unrepairable %llu\n",
			c.objects, c.detected, c.repaired, c.unrepairable);
	}
	return 0;
}
