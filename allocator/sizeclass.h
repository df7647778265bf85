/* sizeclass.h — power-of-two size classes.
 *
 * Class c holds objects of exactly 16 << c bytes, from 16 B (malloc's 16-byte
 * alignment) to SMALL_MAX. Requests are rounded up to the class size, so a slot
 * of class c is always aligned to its own size (regions are aligned to their
 * size): that makes memalign trivial and lets free and the bounded string
 * functions find an object's start with a mask (paper section 4.4).
 *
 * Objects above SMALL_MAX go to large.c, each in its own mapping with guard
 * pages. 64 KiB (not the paper's 16 KiB) keeps mmap/munmap system calls off the
 * path of medium-sized objects, which real programs allocate often; slots of
 * the large classes are only touched as far as the program writes them.
 */
#ifndef DIEHARD_SIZECLASS_H
#define DIEHARD_SIZECLASS_H

#include <stddef.h>

#define SMALL_MIN_SHIFT 4u
#define SMALL_MAX_SHIFT 16u
#define SMALL_MIN ((size_t)1 << SMALL_MIN_SHIFT)
#define SMALL_MAX ((size_t)1 << SMALL_MAX_SHIFT)
#define NCLASSES (SMALL_MAX_SHIFT - SMALL_MIN_SHIFT + 1)

/* The class of a request of size bytes; size <= SMALL_MAX. */
static inline unsigned sizeclass_of(size_t size)
{
	if (size <= SMALL_MIN)
		return 0;
	return (unsigned)(64 - __builtin_clzll((unsigned long long)(size - 1))) - SMALL_MIN_SHIFT;
}

static inline unsigned sizeclass_shift(unsigned c)
{
	return c + SMALL_MIN_SHIFT;
}

static inline size_t sizeclass_size(unsigned c)
{
	return (size_t)1 << sizeclass_shift(c);
}

#endif
