/* pool.h — random bytes for big objects without writing them.
 *
 * In fill mode every new object must read as random. Writing random bytes
 * into a 3 GiB buffer that a program sizes generously and never touches
 * (GNU sort does) costs seconds and 3 GiB of memory. Instead, ranges of at
 * least POOL_FROM bytes are mapped copy-on-write from a per-process pool: a
 * memfd of POOL_SIZE random bytes from the process's seeded generator,
 * mapped at a random offset and repeated as needed. A page costs memory only
 * once the program writes it; reading it shows this process's random bytes,
 * so an uninitialized read still differs between replicas.
 *
 * The pool's descriptor is kept above 512 and checked (device and inode)
 * before every use, so a program that closes or reuses descriptors can never
 * make us map one of its files; then big objects are filled eagerly again.
 */
#ifndef DIEHARD_POOL_H
#define DIEHARD_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "random.h"

#define POOL_FROM ((size_t)1 << 20)
#define POOL_SIZE ((size_t)16 << 20)

struct pool {
	int fd;        /* -1 until first use */
	bool failed;   /* no pool: fill eagerly */
	dev_t dev;
	ino_t ino;
};

/* Maps [addr, addr + len) (page-aligned, ours) copy-on-write from the pool.
 * False when there is no usable pool: the range is then untouched. The
 * caller serialises calls. */
bool pool_map(struct pool *p, void *addr, size_t len, struct rng *r);

#endif
