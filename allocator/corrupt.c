/* corrupt.c — the heap corruptor; see corrupt.h.
 *
 * Draws come from one random stream under one spin lock (an injecting run is
 * a test, not a production path), seeded by seed= alone: which allocator
 * calls inject, and what, repeat from run to run of a single-threaded
 * program. Live counts and bitmaps of other threads' stripes are read
 * without their locks (relaxed atomics): a slot freed meanwhile is merely
 * corrupted free memory, which the paper's injector allows too.
 */
#include "corrupt.h"

#include <stdatomic.h>
#include <string.h>

#include "random.h"
#include "sizeclass.h"
#include "spec.h"

#define VAR "DIEHARD_CORRUPT"
/* Random slots tried for a claimed one before the call injects nothing. */
#define PROBES 256u

bool corrupt_on;

static struct {
	atomic_flag lock;
	struct heap *heap;
	uint64_t threshold; /* rate x 2^64 */
	uint64_t bytes;     /* most bytes written at a time; 0: to the slot's end */
	uint64_t lo, hi;    /* slot sizes chosen from */
	struct rng rng;
	_Atomic unsigned long done;
} cor = { .lock = ATOMIC_FLAG_INIT };

void corrupt_start(const char *spec, struct heap *h)
{
	uint64_t seed = 0;
	bool rate = false;
	cor.lo = 0;
	cor.hi = UINT64_MAX;
	struct spec_item it;
	for (const char *at = spec; spec_next(VAR, spec, &at, &it);) {
		const char *v = it.value, *end = it.end;
		if (spec_is(&it, "rate")) {
			cor.threshold = spec_rate(VAR, v, end, spec);
			rate = true;
		} else if (spec_is(&it, "bytes")) {
			cor.bytes = spec_u64(VAR, v, end, spec);
			if (cor.bytes == 0)
				spec_die(VAR, "bytes= must be at least 1 in", spec);
		} else if (spec_is(&it, "seed")) {
			seed = spec_u64(VAR, v, end, spec);
		} else if (spec_is(&it, "size")) {
			const char *dash = memchr(v, '-', (size_t)(end - v));
			if (dash == NULL)
				spec_die(VAR, "expected size=MIN-MAX in", spec);
			cor.lo = spec_u64(VAR, v, dash, spec);
			cor.hi = spec_u64(VAR, dash + 1, end, spec);
			if (cor.lo > cor.hi)
				spec_die(VAR, "size=MIN-MAX needs MIN <= MAX in", spec);
		} else {
			spec_die(VAR, "unknown key (rate, bytes, size, seed)", spec);
		}
	}
	if (!rate)
		spec_die(VAR, "rate= is required in", spec);
	uint64_t key[2] = { seed, 0x636f7272757074ULL };
	rng_derive(&cor.rng, key, 0);
	cor.heap = h;
	corrupt_on = cor.threshold != 0;
}

/* Live objects of stripe i that may be chosen. */
static size_t weight(struct heap *h, unsigned i)
{
	size_t size = sizeclass_size(i / HEAP_STRIPES);
	if (size < cor.lo || size > cor.hi)
		return 0;
	return atomic_load_explicit(&h->parts[i].live, memory_order_relaxed);
}

/* A claimed slot, chosen as corrupt.h says; NULL when none was found. */
static char *pick(struct heap *h, struct rng *r, size_t *size)
{
	size_t total = 0;
	for (unsigned i = 0; i < NCLASSES * HEAP_STRIPES; i++)
		total += weight(h, i);
	if (total == 0)
		return NULL;
	uint64_t x = rng_below(r, total);
	unsigned i = 0;
	for (; i < NCLASSES * HEAP_STRIPES - 1; i++) {
		size_t live = weight(h, i);
		if (x < live)
			break;
		x -= live;
	}
	struct heap_class *c = &h->parts[i];
	size_t cap = atomic_load_explicit(&c->capacity, memory_order_acquire);
	if (cap == 0)
		return NULL;
	for (unsigned t = 0; t < PROBES; t++) {
		size_t s = (size_t)rng_below(r, cap);
		if (bitmap_test(c->bits, s)) {
			*size = (size_t)1 << c->shift;
			return c->base + (s << c->shift);
		}
	}
	return NULL;
}

void corrupt_tick(void)
{
	while (atomic_flag_test_and_set_explicit(&cor.lock, memory_order_acquire))
		;
	struct rng *r = &cor.rng;
	if (rng_next(r) < cor.threshold) {
		size_t size;
		unsigned char *p = (unsigned char *)pick(cor.heap, r, &size);
		if (p != NULL) {
			size_t off = (size_t)rng_below(r, size), room = size - off;
			size_t most = cor.bytes != 0 && cor.bytes < room ? cor.bytes : room;
			size_t len = 1 + (size_t)rng_below(r, most);
			for (size_t i = 0; i < len; i++)
				p[off + i] = (unsigned char)rng_next(r);
			atomic_fetch_add_explicit(&cor.done, 1, memory_order_relaxed);
		}
	}
	atomic_flag_clear_explicit(&cor.lock, memory_order_release);
}

unsigned long corrupt_count(void)
{
	return atomic_load_explicit(&cor.done, memory_order_relaxed);
}
