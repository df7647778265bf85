/* diehard/critical.h — critical memory (Samurai): data that stays right
 * through heap corruption.
 *
 * A critical object has two shadow copies on diehard's randomized heap.
 * critical_store writes all three; critical_load compares the object with a
 * shadow and, when they differ, repairs the three by majority vote (byte by
 * byte) before it copies. A stray write into the object (an overflow from a
 * neighbour, a dangling pointer, a corrupted index) is undone at the next
 * critical load instead of silently propagating.
 *
 *   #include <diehard/critical.h>
 *   cc prog.c $(pkg-config --cflags --libs diehard)
 *
 * Plain loads and stores of a critical object still work (they read and
 * write the object itself), but a plain store is not seen by the shadows: the
 * next critical load of those bytes takes it for corruption and repairs it
 * away. Write critical data with critical_store (or critical_promote a range
 * after writing it plainly); read it with critical_load where it matters.
 *
 * Calls on memory that is not critical behave as memmove. A new critical
 * object's shadows hold a sentinel: a critical load of bytes never critically
 * stored is counted as uninitialized and returns the sentinel (0xa5) bytes.
 * Out-of-bounds parts of a critical store are dropped (the bytes past the
 * object's end are not written), of a critical load read plainly; both are
 * counted. critical_free of a pointer that is not a live critical object
 * (twice, or never critical) is counted and ignored.
 *
 * Thread safety (Samurai section 3.3): allocation, free, promotion and repair
 * take one lock; loads and stores take none. As with any data, concurrent
 * critical stores to the same bytes (or a store racing a load) must be
 * ordered by the program's own locks.
 *
 * DIEHARD_CRITICAL=repair (default: repair silently and count), warn (also
 * one line on stderr per event) or trap (abort on the first mismatch: for
 * debugging). docs/CRITICAL.md has the details.
 */
#ifndef DIEHARD_CRITICAL_H
#define DIEHARD_CRITICAL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Allocation: as malloc, calloc, realloc and free. NULL with errno ENOMEM when
 * out of memory; critical_realloc of a pointer that is not critical returns
 * NULL with errno EINVAL (and counts a bad free). */
void *critical_malloc(size_t size);
void *critical_calloc(size_t count, size_t size);
void *critical_realloc(void *p, size_t size);
void critical_free(void *p);

/* memcpy-like: dst (store) or src (load) anywhere inside a critical object. */
void critical_store(void *dst, const void *src, size_t n);
void critical_load(void *dst, const void *src, size_t n);

/* Makes the n bytes at p (memory the program owns: malloc'd, static, on the
 * stack) critical, with their present contents: 0, or -1 with errno EINVAL
 * (n is 0, or the range overlaps a critical one) or ENOMEM. critical_demote
 * drops the shadows again (p as given to critical_promote); critical_free of
 * a promoted object demotes it and then calls free. Demote stack and static
 * ranges before they go out of use. */
int critical_promote(void *p, size_t n);
void critical_demote(void *p);

/* 1 when p is inside a live critical object. */
int critical_is(const void *p);

/* Counts since the start of the process (all threads). */
struct critical_counts {
	unsigned long long objects;          /* live critical objects */
	unsigned long long detected;         /* loads that found the copies disagreeing */
	unsigned long long repaired;         /* ... and set them right by majority */
	unsigned long long unrepairable;     /* ... with no majority for some byte (the object's byte is kept) */
	unsigned long long uninitialized;    /* loads of bytes never critically stored */
	unsigned long long out_of_bounds;    /* loads and stores past an object's end */
	unsigned long long bad_frees;        /* critical_free/realloc/demote of no live critical object */
	unsigned long long metadata_repairs; /* object records restored from their mirror */
};
void critical_counts(struct critical_counts *out);

/* Typed helpers for words and pointers. */
#define DIEHARD_CRITICAL_TYPED(name, type)                                   \
	static inline type critical_load_##name(const type *p)               \
	{                                                                    \
		type v;                                                      \
		critical_load(&v, p, sizeof v);                              \
		return v;                                                    \
	}                                                                    \
	static inline void critical_store_##name(type *p, type v)            \
	{                                                                    \
		critical_store(p, &v, sizeof v);                             \
	}
DIEHARD_CRITICAL_TYPED(u8, uint8_t)
DIEHARD_CRITICAL_TYPED(u16, uint16_t)
DIEHARD_CRITICAL_TYPED(u32, uint32_t)
DIEHARD_CRITICAL_TYPED(u64, uint64_t)
DIEHARD_CRITICAL_TYPED(int, int)
DIEHARD_CRITICAL_TYPED(long, long)
DIEHARD_CRITICAL_TYPED(size, size_t)
DIEHARD_CRITICAL_TYPED(double, double)
#undef DIEHARD_CRITICAL_TYPED

/* A pointer kept in critical memory, at where (any object pointer's place:
 * no cast needed, as the pointer types of a list node's fields differ). */
static inline void *critical_load_ptr(const void *where)
{
	void *v;
	critical_load(&v, where, sizeof v);
	return v;
}
static inline void critical_store_ptr(void *where, const void *v)
{
	critical_store(where, &v, sizeof v);
}

#ifdef __cplusplus
}

namespace diehard {
/* C++: any trivially copyable T. */
template <typename T> inline T critical_get(const T &where)
{
	T v;
	::critical_load(&v, &where, sizeof v);
	return v;
}
template <typename T> inline void critical_set(T &where, const T &v)
{
	::critical_store(&where, &v, sizeof v);
}
}
#endif

#endif
