/*
 * stress: randomized multi-threaded allocation workload that checks every
 * object it owns.
 *
 *   stress [THREADS [OPS [SEED]]]      defaults: 4 threads, 40000 ops each, seed 1
 *
 * Each thread keeps a table of live objects and performs a random mix of
 * malloc, calloc (must be zeroed), realloc (grow and shrink; the common
 * prefix must survive), memalign / posix_memalign / aligned_alloc / valloc
 * with alignments from 16 bytes to 1 MiB (must be honoured), and free.  Every
 * object is stamped with a pattern derived from its id and the byte offset,
 * and the whole object is verified before it is freed or reallocated, so an
 * allocator that hands the same memory to two owners, loses data in realloc
 * or returns too little memory is caught.  Objects also travel between
 * threads through a shared pool, so memory is freed by a thread other than
 * the one that allocated it.
 *
 * Each thread also leaves an object to a thread-exit destructor, which
 * checks and frees it and allocates again while the thread is torn down.
 *
 * Halfway through, thread 0 forks while the other threads keep allocating.
 * The child checks what thread 0 owned, keeps allocating single-threaded,
 * then starts two new threads of its own, frees everything and exits 0.  The
 * parent waits for it and fails if it did not exit 0.
 *
 * Prints "stress: ok ..." and exits 0, or prints a diagnostic to stderr and
 * exits 1.
 */
#undef _FORTIFY_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define SLOTS 192
#define POOL 64

typedef struct {
	unsigned char *p;
	size_t size;
	uint64_t id;
	size_t align; /* alignment it was allocated with, 0 if none requested */
} obj_t;

typedef struct {
	int tid;
	int use_pool;
	long ops;
	long fork_at; /* op index at which this thread forks, -1 for never */
	uint64_t rng;
	uint64_t next_id;
	pid_t child;
	obj_t slot[SLOTS];
} worker_t;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t exit_key;
static obj_t pool[POOL];
static int pool_n;
static long page_size;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void die(const char *fmt, ...)
{
	char buf[512];
	int n = snprintf(buf, sizeof buf, "stress[%d]: ", (int)getpid());
	va_list ap;
	va_start(ap, fmt);
	n += vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof buf - 2)
		n = (int)sizeof buf - 2;
	buf[n++] = '\n';
	if (write(2, buf, (size_t)n) < 0) {
		/* nothing more we can do */
	}
	_exit(1);
}

static uint64_t mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static uint64_t rnd(uint64_t *s)
{
	*s += 0x9E3779B97F4A7C15ull;
	return mix(*s);
}

/* The pattern: byte i of an object with id `id` is byte (i % 8) of the
 * little-endian word base ^ ((i / 8) * K). */
#define K 0x9E3779B97F4A7C15ull

static uint64_t word_at(uint64_t id, size_t k)
{
	return mix(id) ^ ((uint64_t)k * K);
}

static unsigned char byte_at(uint64_t base, size_t i)
{
	return (unsigned char)((base ^ ((uint64_t)(i / 8) * K)) >> (8 * (i % 8)));
}

/* Stamp bytes [from, to) of o. */
static void stamp(const obj_t *o, size_t from, size_t to)
{
	uint64_t base = mix(o->id);
	size_t i = from;
	for (; i < to && (i % 8) != 0; i++)
		o->p[i] = byte_at(base, i);
	for (; i + 8 <= to; i += 8)
		*(uint64_t *)(void *)(o->p + i) = word_at(o->id, i / 8);
	for (; i < to; i++)
		o->p[i] = byte_at(base, i);
}

/* Verify bytes [0, n) of o. */
static void verify(const obj_t *o, size_t n, const char *when)
{
	uint64_t base = mix(o->id);
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		if (*(const uint64_t *)(const void *)(o->p + i) != word_at(o->id, i / 8))
			break;
	}
	for (; i < n; i++) {
		if (o->p[i] != byte_at(base, i))
			die("corruption %s: object id=%" PRIu64 " at %p size %zu: byte %zu is 0x%02x, expected 0x%02x",
			    when, o->id, (void *)o->p, o->size, i, o->p[i], byte_at(base, i));
	}
}

static void check_alloc(void *p, size_t size, size_t align, const char *what)
{
	if (p == NULL)
		die("%s(size %zu, align %zu) returned NULL (errno %d)", what, size, align, errno);
	if (align && ((uintptr_t)p & (align - 1)) != 0)
		die("%s(size %zu, align %zu) returned misaligned %p", what, size, align, p);
	if (((uintptr_t)p & 15) != 0 && size >= 16)
		die("%s(size %zu) returned %p, not 16-byte aligned", what, size, p);
	if (malloc_usable_size(p) < size)
		die("%s(size %zu): malloc_usable_size is only %zu", what, size, malloc_usable_size(p));
}

static size_t pick_size(uint64_t *r)
{
	uint64_t x = rnd(r) % 1000;
	if (x < 700)
		return (size_t)(rnd(r) % 129); /* includes 0 */
	if (x < 920)
		return (size_t)(129 + rnd(r) % (4096 - 128));
	if (x < 990)
		return (size_t)(4097 + rnd(r) % (65536 - 4096));
	return (size_t)(65537 + rnd(r) % (320 * 1024 - 65536));
}

static void release(worker_t *w, obj_t *o)
{
	(void)w;
	verify(o, o->size, "before free");
	free(o->p);
	o->p = NULL;
}

static void op_malloc(worker_t *w, obj_t *o)
{
	o->size = pick_size(&w->rng);
	o->id = w->next_id++;
	o->align = 0;
	o->p = malloc(o->size);
	check_alloc(o->p, o->size, 0, "malloc");
	stamp(o, 0, o->size);
}

static void op_calloc(worker_t *w, obj_t *o)
{
	size_t total = pick_size(&w->rng);
	size_t n = 1 + (size_t)(rnd(&w->rng) % 16);
	size_t each = total / n + 1;
	o->size = n * each;
	o->id = w->next_id++;
	o->align = 0;
	o->p = calloc(n, each);
	check_alloc(o->p, o->size, 0, "calloc");
	for (size_t i = 0; i < o->size; i++)
		if (o->p[i] != 0)
			die("calloc(%zu, %zu) = %p: byte %zu is 0x%02x, not zero", n, each, (void *)o->p, i, o->p[i]);
	stamp(o, 0, o->size);
}

static void op_aligned(worker_t *w, obj_t *o)
{
	size_t align = (size_t)1 << (4 + rnd(&w->rng) % 17); /* 16 B .. 1 MiB */
	size_t size = align >= 65536 ? (size_t)(1 + rnd(&w->rng) % 8192) : pick_size(&w->rng) + 1;
	int how = (int)(rnd(&w->rng) % 4);
	void *p = NULL;
	o->id = w->next_id++;
	switch (how) {
	case 0:
		p = memalign(align, size);
		check_alloc(p, size, align, "memalign");
		break;
	case 1: {
		int rc = posix_memalign(&p, align, size);
		if (rc != 0)
			die("posix_memalign(align %zu, size %zu) failed: %s", align, size, strerror(rc));
		check_alloc(p, size, align, "posix_memalign");
		break;
	}
	case 2:
		size = (size + align - 1) / align * align; /* C11: a multiple of the alignment */
		if (size > (size_t)1 << 20)
			size = (size_t)1 << 20;
		p = aligned_alloc(align, size);
		check_alloc(p, size, align, "aligned_alloc");
		break;
	default:
		align = (size_t)page_size;
		p = valloc(size);
		check_alloc(p, size, align, "valloc");
		break;
	}
	o->p = p;
	o->size = size;
	o->align = align;
	stamp(o, 0, o->size);
}

static void op_realloc(worker_t *w, obj_t *o)
{
	size_t old = o->size, nsize;
	uint64_t how = rnd(&w->rng) % 3;
	if (how == 0)
		nsize = old * 2 + (size_t)(rnd(&w->rng) % 64) + 1; /* grow */
	else if (how == 1)
		nsize = old / 2; /* shrink */
	else
		nsize = pick_size(&w->rng);
	if (nsize > 400 * 1024)
		nsize = 400 * 1024;
	if (nsize == 0)
		nsize = 1;
	verify(o, old, "before realloc");
	unsigned char *q = realloc(o->p, nsize);
	check_alloc(q, nsize, 0, "realloc");
	o->p = q;
	o->size = nsize;
	o->align = 0;
	verify(o, old < nsize ? old : nsize, "after realloc");
	if (nsize > old)
		stamp(o, old, nsize);
}

/* Hand an object to the shared pool, or adopt one from it. */
static void op_pool(obj_t *o)
{
	pthread_mutex_lock(&pool_lock);
	if (o->p != NULL && pool_n < POOL) {
		pool[pool_n++] = *o;
		o->p = NULL;
	} else if (o->p == NULL && pool_n > 0) {
		*o = pool[--pool_n];
	}
	pthread_mutex_unlock(&pool_lock);
	if (o->p != NULL)
		verify(o, o->size, "after crossing threads");
}

static void child_after_fork(worker_t *w);

static void run_ops(worker_t *w, long ops)
{
	for (long n = 0; n < ops; n++) {
		if (n == w->fork_at) {
			fflush(NULL);
			pid_t pid = fork();
			if (pid < 0)
				die("fork: %s", strerror(errno));
			if (pid == 0)
				child_after_fork(w); /* does not return */
			w->child = pid;
		}
		obj_t *o = &w->slot[rnd(&w->rng) % SLOTS];
		uint64_t r = rnd(&w->rng) % 100;
		if (o->p == NULL) {
			if (r < 55)
				op_malloc(w, o);
			else if (r < 70)
				op_calloc(w, o);
			else if (r < 78)
				op_aligned(w, o);
			else if (r < 85 && w->use_pool)
				op_pool(o);
			else
				op_malloc(w, o);
		} else {
			if (r < 50)
				release(w, o);
			else if (r < 80)
				op_realloc(w, o);
			else if (r < 85 && w->use_pool)
				op_pool(o);
			else
				verify(o, o->size, "while live");
		}
	}
}

static void release_all(worker_t *w)
{
	for (int i = 0; i < SLOTS; i++)
		if (w->slot[i].p != NULL)
			release(w, &w->slot[i]);
}

/* Runs when a worker thread exits, in an order relative to any destructor
 * of the allocator's own that the program does not control: frees the
 * thread's farewell object and allocates again. */
static void exit_dtor(void *arg)
{
	obj_t *o = arg;
	verify(o, o->size, "in a thread-exit destructor");
	free(o->p);
	o->p = malloc(3000);
	check_alloc(o->p, 3000, 0, "malloc in a thread-exit destructor");
	o->size = 3000;
	stamp(o, 0, o->size);
	verify(o, o->size, "in a thread-exit destructor");
	free(o->p);
	free(o);
}

static void *worker_main(void *arg)
{
	worker_t *w = arg;
	obj_t *farewell = malloc(sizeof *farewell);
	if (farewell == NULL)
		die("malloc(farewell) failed");
	farewell->id = w->next_id++;
	farewell->size = 500;
	farewell->align = 0;
	farewell->p = malloc(farewell->size);
	check_alloc(farewell->p, farewell->size, 0, "malloc");
	stamp(farewell, 0, farewell->size);
	pthread_setspecific(exit_key, farewell);
	run_ops(w, w->ops);
	return NULL;
}

static worker_t *new_worker(int tid, long ops, uint64_t seed, int use_pool)
{
	worker_t *w = calloc(1, sizeof *w);
	if (w == NULL)
		die("calloc(worker) failed");
	w->tid = tid;
	w->ops = ops;
	w->use_pool = use_pool;
	w->fork_at = -1;
	w->rng = seed * 1000003u + (uint64_t)tid;
	w->next_id = ((uint64_t)(unsigned)tid << 40) | ((seed & 0xffff) << 24);
	return w;
}

/* In the child: only the forking thread exists.  The pool and the other
 * threads' tables are snapshots that may be mid-update, so they are left
 * alone; this thread's own objects must be intact. */
static void child_after_fork(worker_t *w)
{
	w->use_pool = 0;
	w->fork_at = -1;
	w->next_id |= (uint64_t)1 << 62;
	for (int i = 0; i < SLOTS; i++)
		if (w->slot[i].p != NULL)
			verify(&w->slot[i], w->slot[i].size, "in the child after fork");
	run_ops(w, w->ops / 4);

	pthread_t th[2];
	worker_t *cw[2];
	for (int t = 0; t < 2; t++) {
		cw[t] = new_worker(100 + t, w->ops / 4, w->rng, 0);
		int rc = pthread_create(&th[t], NULL, worker_main, cw[t]);
		if (rc != 0)
			die("child: pthread_create: %s", strerror(rc));
	}
	run_ops(w, w->ops / 8);
	for (int t = 0; t < 2; t++) {
		pthread_join(th[t], NULL);
		release_all(cw[t]);
		free(cw[t]);
	}
	release_all(w);
	exit(0);
}

int main(int argc, char **argv)
{
	int nthreads = argc > 1 ? atoi(argv[1]) : 4;
	long ops = argc > 2 ? atol(argv[2]) : 40000;
	uint64_t seed = argc > 3 ? strtoull(argv[3], NULL, 0) : 1;
	if (nthreads < 1 || nthreads > 64 || ops < 1) {
		fprintf(stderr, "usage: stress [THREADS(1-64) [OPS [SEED]]]\n");
		return 2;
	}
	page_size = sysconf(_SC_PAGESIZE);
	if (pthread_key_create(&exit_key, exit_dtor) != 0)
		die("pthread_key_create failed");

	worker_t **w = calloc((size_t)nthreads, sizeof *w);
	pthread_t *th = calloc((size_t)nthreads, sizeof *th);
	if (w == NULL || th == NULL)
		die("calloc failed");
	for (int t = 0; t < nthreads; t++)
		w[t] = new_worker(t, ops, seed, nthreads > 1);
	w[0]->fork_at = ops / 2;
	for (int t = 0; t < nthreads; t++) {
		int rc = pthread_create(&th[t], NULL, worker_main, w[t]);
		if (rc != 0)
			die("pthread_create: %s", strerror(rc));
	}
	for (int t = 0; t < nthreads; t++)
		pthread_join(th[t], NULL);

	/* Everything left is freed by the main thread, whoever allocated it. */
	for (int t = 0; t < nthreads; t++)
		release_all(w[t]);
	for (int i = 0; i < pool_n; i++) {
		verify(&pool[i], pool[i].size, "in the pool at exit");
		free(pool[i].p);
	}

	int status;
	if (waitpid(w[0]->child, &status, 0) != w[0]->child)
		die("waitpid: %s", strerror(errno));
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		if (WIFSIGNALED(status))
			die("the forked child was killed by signal %d", WTERMSIG(status));
		die("the forked child exited with status %d", WEXITSTATUS(status));
	}
	for (int t = 0; t < nthreads; t++)
		free(w[t]);
	free(w);
	free(th);
	printf("stress: ok threads=%d ops=%ld child=ok\n", nthreads, ops);
	return 0;
}
