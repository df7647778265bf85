/* test_bufpool.c — supervisor/net/bufpool.c: buffers given back are handed
 * out again, at most `keep` are kept, buffers of another size are freed,
 * and a buffer is whole and writable however it came (run under ASan: a
 * double hand-out or a leak fails). */
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bufpool.h"
#include "tap.h"

/* bufpool.c's out-of-memory path ends the run through log.c's fatal. */
_Noreturn void fatal(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	exit(code);
}

int main(void)
{
	enum { SIZE = 16384, KEEP = 4 };
	struct bufpool *P = bufpool_new(SIZE, KEEP);
	CHECK(P != NULL && bufpool_idle(P) == 0, "a new pool keeps nothing");

	unsigned char *a = bufpool_get(P), *b = bufpool_get(P);
	CHECK(a != NULL && b != NULL && a != b, "two hand-outs are two buffers");
	memset(a, 0xa5, SIZE);
	memset(b, 0x5a, SIZE);
	bufpool_put(P, a, SIZE);
	CHECK(bufpool_idle(P) == 1, "one given back is kept");
	unsigned char *c = bufpool_get(P);
	CHECK(c == a && bufpool_idle(P) == 0, "the one given back is handed out again");
	memset(c, 0, SIZE); /* whole: ASan would see a write past a short one */
	CHECK(b[0] == 0x5a && b[SIZE - 1] == 0x5a, "another buffer's bytes stay its own");

	/* Grown past the pool's size (conn.c reallocs a side's buffer): freed. */
	unsigned char *g = realloc(c, 2 * SIZE);
	CHECK(g != NULL, "a handed-out buffer can be grown");
	bufpool_put(P, g, 2 * SIZE);
	CHECK(bufpool_idle(P) == 0, "a buffer of another size is freed, not kept");
	bufpool_put(P, NULL, 0);
	CHECK(bufpool_idle(P) == 0, "NULL given back is nothing");

	/* At most KEEP idle: the rest freed (ASan's leak check counts them). */
	unsigned char *many[KEEP + 3];
	for (unsigned i = 0; i < KEEP + 3; i++)
		many[i] = bufpool_get(P);
	for (unsigned i = 0; i < KEEP + 3; i++)
		bufpool_put(P, many[i], SIZE);
	CHECK(bufpool_idle(P) == KEEP, "at most keep idle buffers are kept");
	uintptr_t seen = 0;
	for (unsigned i = 0; i < KEEP; i++) {
		many[i] = bufpool_get(P);
		seen ^= (uintptr_t)many[i];
		memset(many[i], (int)i, SIZE);
	}
	CHECK(bufpool_idle(P) == 0 && seen != 0, "every kept buffer is handed out once");
	for (unsigned i = 0; i < KEEP; i++)
		for (unsigned j = i + 1; j < KEEP; j++)
			CHECK(many[i] != many[j], "hand-outs %u and %u differ", i, j);
	for (unsigned i = 0; i < KEEP; i++)
		bufpool_put(P, many[i], SIZE);
	bufpool_put(P, b, SIZE);
	CHECK(bufpool_idle(P) == KEEP, "one past keep is freed");
	bufpool_free(P); /* frees the idle ones */

	struct bufpool *tiny = bufpool_new(1, 2);
	unsigned char *t = bufpool_get(tiny);
	bufpool_put(tiny, t, 1);
	CHECK(bufpool_get(tiny) == t, "a pool of buffers smaller than a pointer still works");
	bufpool_put(tiny, t, 1);
	bufpool_free(tiny);
	return tap_done();
}
