/* bitmap.h — the per-class allocation bitmap: one bit per slot, 1 = in use.
 *
 * Writers hold the class lock, so set and clear are a relaxed load and a
 * relaxed store (plain moves on x86), not read-modify-write instructions.
 * The words are atomic only so that lock-free readers (malloc_usable_size,
 * realloc) read them without a data race.
 */
#ifndef DIEHARD_BITMAP_H
#define DIEHARD_BITMAP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef _Atomic uint64_t bitmap_word;

/* Bits set in x. Inline: without -mpopcnt (Debian's x86-64 baseline)
 * __builtin_popcountll is a library call. */
static inline unsigned bitmap_count(uint64_t x)
{
	x -= (x >> 1) & 0x5555555555555555ULL;
	x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
	x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0fULL;
	return (unsigned)((x * 0x0101010101010101ULL) >> 56);
}

static inline bool bitmap_test(bitmap_word *bits, size_t i)
{
	uint64_t m = (uint64_t)1 << (i & 63);
	return (atomic_load_explicit(&bits[i >> 6], memory_order_relaxed) & m) != 0;
}

/* Sets bit i; true when it was clear. Caller holds the lock. */
static inline bool bitmap_try_set(bitmap_word *bits, size_t i)
{
	uint64_t m = (uint64_t)1 << (i & 63);
	bitmap_word *w = &bits[i >> 6];
	uint64_t v = atomic_load_explicit(w, memory_order_relaxed);
	if (v & m)
		return false;
	atomic_store_explicit(w, v | m, memory_order_relaxed);
	return true;
}

/* Clears bit i; true when it was set. Caller holds the lock. Without a
 * branch on the outcome (a bit already clear is stored back unchanged):
 * heap_release runs it once per freed slot. */
static inline bool bitmap_clear(bitmap_word *bits, size_t i)
{
	uint64_t m = (uint64_t)1 << (i & 63);
	bitmap_word *w = &bits[i >> 6];
	uint64_t v = atomic_load_explicit(w, memory_order_relaxed);
	atomic_store_explicit(w, v & ~m, memory_order_relaxed);
	return (v & m) != 0;
}

#endif
