/* Unit tests of ci/trace.c: a replica's trace file parsed right, and
 * garbage (the file is the replica's) skipped without a crash. */
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "trace.h"

static void test_good(void)
{
	static const char text[] =
		"P 2 2 /usr/bin/prog\n"
		"N 2 0 17\n"
		"N 2 1 5\n"
		"N 2 0 19\n"
		"A 2 0 7 24 32 malloc\n"
		"F 0000555555555189 0000555555554000 /usr/bin/prog\n"
		"F 00007ffff7dd124a 00007ffff7da9000 /lib/x86_64-linux-gnu/libc.so.6\n"
		"E\n"
		"B double 00007ffff0001000\n"
		"F 0000555555555200 0000555555554000 /usr/bin/prog\n"
		"E\n";
	struct trace *t = calloc(1, sizeof *t);
	trace_parse(t, text, sizeof text - 1);
	CHECK(t->processes == 1 && strcmp(t->exe, "/usr/bin/prog") == 0, "one process, its program");
	CHECK(t->nstreams == 2 && t->streams[0].count == 19 && t->streams[0].counted && t->streams[1].count == 5,
	      "two threads, the larger count kept");
	CHECK(t->alloc.found && t->alloc.pkey == 2 && t->alloc.n == 7 && t->alloc.size == 24 && t->alloc.usable == 32 &&
		      strcmp(t->alloc.fn, "malloc") == 0,
	      "the traced allocation");
	CHECK(t->alloc.stack.nframes == 2 && t->alloc.stack.frames[0].addr == 0x555555555189 &&
		      t->alloc.stack.frames[0].base == 0x555555554000 &&
		      strcmp(t->alloc.stack.frames[1].module, "/lib/x86_64-linux-gnu/libc.so.6") == 0,
	      "its frames");
	CHECK(t->nbad == 1 && strcmp(t->bad[0].kind, "double") == 0 && t->bad[0].ptr == 0x7ffff0001000 &&
		      t->bad[0].stack.nframes == 1,
	      "the bad free and its frame");
	CHECK(t->skipped == 0, "nothing skipped");
	trace_free(t);
	free(t);
}

static void test_garbage(void)
{
	static const char *const lines[] = {
		"F 1 2 /x\n",                /* a frame outside a stack */
		"A 1 2 3\n",                 /* too few fields */
		"N -1 0 1\n",                /* negative */
		"N 1 0 99999999999999999999999\n", /* overflow */
		"B triple 10\n",
		"B double zz\n",
		"Q what\n",
		"PP 1 2 x\n",
		"N 1 0 5 extra\n",
		"\n",
	};
	struct trace *t = calloc(1, sizeof *t);
	for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
		trace_parse(t, lines[i], strlen(lines[i]));
		CHECK(t->nstreams == 0 && !t->alloc.found && t->nbad == 0 && t->processes == 0,
		      "garbage line %zu is skipped", i);
		trace_free(t);
	}
	/* A line longer than any buffer, NULs, no final newline. */
	size_t n = 100000;
	char *big = malloc(n);
	memset(big, 'F', n);
	big[5000] = '\0';
	big[n - 1] = '7';
	trace_parse(t, big, n);
	CHECK(t->skipped >= 1 && t->nstreams == 0, "a huge line with a NUL is skipped");
	trace_free(t);
	/* Random bytes, and random lines of the right letters: no crash, and
	 * never more than the bounds. */
	unsigned seed = 12345;
	for (int round = 0; round < 2000; round++) {
		size_t len = (size_t)(rand_r(&seed) % 4000);
		for (size_t i = 0; i < len; i++) {
			static const char alphabet[] = "PNAFEB 0123456789abcdef/\n-x";
			big[i] = round % 2 ? (char)rand_r(&seed) : alphabet[rand_r(&seed) % (sizeof alphabet - 1)];
		}
		trace_parse(t, big, len);
		if (t->nbad > TRACE_MAX_BAD || t->nstreams > TRACE_MAX_STREAMS || t->alloc.stack.nframes > TRACE_MAX_FRAMES)
			break;
		trace_free(t);
		if (round == 1999)
			CHECK(1, "2000 rounds of garbage parsed within bounds");
	}
	/* Past the bounds: stacks, bad frees, streams. */
	char line[64];
	size_t o = 0;
	o += (size_t)snprintf(big + o, n - o, "A 0 0 1 1 16 malloc\n");
	for (int i = 0; i < 100; i++)
		o += (size_t)snprintf(big + o, n - o, "F %x 0 /m\n", i + 1);
	for (int i = 0; i < 40; i++)
		o += (size_t)snprintf(big + o, n - o, "B invalid %x\n", i + 1);
	for (int i = 0; i < 1000; i++) {
		snprintf(line, sizeof line, "N 0 %d 1\n", i);
		o += (size_t)snprintf(big + o, n - o, "%s", line);
	}
	trace_parse(t, big, o);
	CHECK(t->alloc.stack.nframes == TRACE_MAX_FRAMES && t->nbad == TRACE_MAX_BAD && t->nstreams == TRACE_MAX_STREAMS,
	      "frames, bad frees and streams stop at their bounds");
	trace_free(t);
	free(big);
	free(t);
}

int main(void)
{
	test_good();
	test_garbage();
	return tap_done();
}
