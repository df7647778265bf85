/* strings.c — string and memory copies that never write past the end of a
 * destination object in the small heap (paper section 4.4).
 *
 * The destination's slot is found from its address alone (slots are aligned
 * to their power-of-two size), so the check is two comparisons and a mask.
 * A copy that would overflow is cut at the slot's end (strings stay
 * NUL-terminated inside it) and counted. Large objects need no check: their
 * guard pages already stop an overflow.
 *
 * The real work is done by glibc's fortified entry points (__memcpy_chk and
 * friends), which are exported but not interposed by us, so there is no
 * dlsym and no recursion. The allocator is built with -fno-builtin copies so
 * the compiler does not fold them back into calls to our own symbols.
 */
#include <string.h>

#include "diehard.h"

#define EXPORT __attribute__((visibility("default")))

extern void *__memcpy_chk(void *dst, const void *src, size_t len, size_t dstlen);
extern char *__strncpy_chk(char *dst, const char *src, size_t len, size_t dstlen);

/* Bytes that may be written at d, or SIZE_MAX when d is not in the heap. */
static inline size_t room_at(const void *d)
{
	if (atomic_load_explicit(&diehard_state, memory_order_acquire) != DIEHARD_READY ||
	    !diehard.cfg.safe_strings || !heap_contains(diehard.heap, d))
		return SIZE_MAX;
	return heap_room(diehard.heap, d);
}

static void count_truncation(void)
{
	atomic_fetch_add_explicit(&diehard.heap->truncated_copies, 1, memory_order_relaxed);
}

static inline void *copy(void *d, const void *s, size_t n)
{
	return __memcpy_chk(d, s, n, n);
}

/* Copies the string s (len bytes, without its NUL) to d, which has room
 * bytes; cut and terminated inside room when it does not fit. */
static void copy_string(char *d, const char *s, size_t len, size_t room)
{
	if (len < room) {
		copy(d, s, len + 1);
		return;
	}
	count_truncation();
	copy(d, s, room - 1);
	d[room - 1] = '\0';
}

EXPORT char *strcpy(char *d, const char *s)
{
	copy_string(d, s, strlen(s), room_at(d));
	return d;
}

EXPORT char *strncpy(char *d, const char *s, size_t n)
{
	size_t room = room_at(d);
	if (n > room) {
		count_truncation();
		n = room;
	}
	return __strncpy_chk(d, s, n, n);
}

EXPORT char *strcat(char *d, const char *s)
{
	size_t room = room_at(d);
	size_t dlen = strlen(d);
	if (dlen >= room) {
		/* d's own string already runs past its object: write nothing. */
		count_truncation();
		return d;
	}
	copy_string(d + dlen, s, strlen(s), room == SIZE_MAX ? SIZE_MAX : room - dlen);
	return d;
}

EXPORT void *memcpy(void *d, const void *s, size_t n)
{
	size_t room = room_at(d);
	if (__builtin_expect(n > room, 0)) {
		count_truncation();
		n = room;
	}
	return copy(d, s, n);
}
