/* stream.c — see stream.h. */
#include "stream.h"

#include <stdatomic.h>

__thread struct stream stream_self __attribute__((tls_model("initial-exec")));

static uint64_t root_seed[2];
static _Atomic uint64_t next_thread;
static uint64_t fork_tag;

/* Tags of fork streams have the top bit set, thread ordinals do not, so the
 * two families of streams never coincide. */
#define FORK_TAG_BIT ((uint64_t)1 << 63)

void stream_seed(const uint64_t seed[2])
{
	root_seed[0] = seed[0];
	root_seed[1] = seed[1];
	atomic_store(&next_thread, 0);
}

void stream_start(void)
{
	uint64_t n = atomic_fetch_add_explicit(&next_thread, 1, memory_order_relaxed);
	rng_derive(&stream_self.rng, root_seed, n & ~FORK_TAG_BIT);
	stream_self.ordinal = n & ~FORK_TAG_BIT;
	stream_self.ready = true;
}

void stream_fork_prepare(void)
{
	fork_tag = rng_next(stream_get()) | FORK_TAG_BIT;
}

void stream_fork_child(void)
{
	rng_derive(&stream_self.rng, root_seed, fork_tag);
	stream_self.ready = true;
	/* The child's future threads get a root of their own: otherwise thread n
	 * of the child would replay thread n of the parent. */
	uint64_t x = fork_tag;
	root_seed[0] ^= rng_splitmix(&x);
	root_seed[1] ^= rng_splitmix(&x);
	atomic_store(&next_thread, 0);
}
