/* stream.h — each thread's own random stream.
 *
 * The process seed (config.h) is the root. Thread number n (in order of first
 * allocation) draws from rng_derive(seed, n); a child created by fork draws
 * from a stream derived from one value its parent drew at the fork, so both
 * continue deterministically and differently. A single-threaded program under
 * a fixed DIEHARD_SEED therefore makes exactly the same choices every run.
 *
 * The state is initial-exec TLS: no lock and no __tls_get_addr (which may call
 * malloc) on the allocation fast path.
 */
#ifndef DIEHARD_STREAM_H
#define DIEHARD_STREAM_H

#include <stdbool.h>
#include <stdint.h>

#include "random.h"

struct stream {
	struct rng rng;
	bool ready;
	uint64_t ordinal; /* the thread's number, in order of first allocation */
	uint64_t nalloc;  /* keyed.h: its allocations numbered so far */
};

extern __thread struct stream stream_self __attribute__((tls_model("initial-exec")));

/* Sets the root seed; call once, before any stream_get(). */
void stream_seed(const uint64_t seed[2]);

/* Starts the calling thread's stream (slow path of stream_get). */
void stream_start(void);

static inline struct rng *stream_get(void)
{
	if (__builtin_expect(!stream_self.ready, 0))
		stream_start();
	return &stream_self.rng;
}

/* fork: prepare draws the child's tag from the parent's stream; child
 * re-derives its stream from it. */
void stream_fork_prepare(void);
void stream_fork_child(void);

#endif
