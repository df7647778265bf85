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
 * The small-object heap uses a pool of its own, smaller (HEAP_POOL_SIZE), for
 * its classes of 16 KiB and more (heap.c, "Fill from the pool"): mapped at an
 * offset that follows the address (pool_map_along), so that the mappings of
 * one class lie end to end in the file and the kernel merges them into one
 * mapping per pool length, and a slot's bytes come back with MADV_DONTNEED.
 *
 * The pool's file is sealed once written (no write, no resize), and its
 * descriptor is kept above 512 and checked (device and inode) before every
 * use, so a program that closes or reuses descriptors can never
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
#define HEAP_POOL_SIZE ((size_t)256 << 10)

struct pool {
	int fd;        /* -1 until first use */
	bool failed;   /* no pool: fill eagerly */
	size_t size;   /* bytes, a whole number of pages */
	size_t salt;   /* pool_map_along: the page of the pool address 0 maps */
	dev_t dev;
	ino_t ino;
};

/* An unused pool of size bytes: its file is made at the first map. */
void pool_init(struct pool *p, size_t size);

/* Makes the pool's file now (from r), or checks it is still ours; false
 * (and for good) when there is no usable pool. */
bool pool_open(struct pool *p, struct rng *r);

/* Closes the pool's file (the mappings stay). */
void pool_close(struct pool *p);

/* Maps [addr, addr + len) (page-aligned, ours) copy-on-write from the pool,
 * from a random offset. False when there is no usable pool: the range is
 * then untouched. The caller serialises calls. */
bool pool_map(struct pool *p, void *addr, size_t len, struct rng *r);

/* The same, from the offset the address gives ((addr / page + salt) modulo
 * the pool's pages): ranges mapped end to end continue each other in the
 * file. False when there is no usable pool or a map failed: the range is
 * then partly mapped, its bytes still ours to write. maps, when not NULL,
 * gets the number of mappings made. */
bool pool_map_along(struct pool *p, void *addr, size_t len, struct rng *r, size_t *maps);

#endif
