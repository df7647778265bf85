/* Unit tests of ci/fenceparse.c: fence-mode reports as a replica's
 * allocator appends them to its DIEHARD_FENCE_LOG (allocator/fence.c),
 * parsed right; a report still being written left for the next read; and
 * garbage (the file is the replica's) skipped without a crash. */
#include <stdlib.h>
#include <string.h>

#include "fencelog.h"
#include "tap.h"

static const char two[] =
	"diehard: fence: overflow: write at offset 112 of a 100-byte object at 0x7fa55bc07f90 (12 bytes past its end)\n"
	"diehard: fence: the access:\n"
	"    #0 0x55555555559f 0x555555554000 /usr/bin/prog\n"
	"    #1 0x7ffff7dd124a 0x7ffff7da9000 /lib/x86_64-linux-gnu/libc.so.6\n"
	"diehard: fence: allocated by thread 7:\n"
	"    #0 0x5555555554e0 0x555555554000 /usr/bin/prog\n"
	"diehard: fence: aborting (DIEHARD_FENCE_ACTION=abort)\n"
	"diehard: fence: use-after-free: read at offset -3 of a 48-byte object at 0x7f0000001000\n"
	"diehard: fence: the access:\n"
	"    #0 0x5555555552c6 0x555555554000 /usr/bin/prog\n"
	"diehard: fence: allocated by thread 9:\n"
	"    #0 0x5555555554e0 0x555555554000 /usr/bin/prog\n"
	"diehard: fence: freed:\n"
	"    #0 0x5555555552c0 0x555555554000 /usr/bin/prog\n"
	"    #1 0x5555555552c1 0x555555554000 /usr/bin/prog\n"
	"diehard: fence: going on with the page mapped read-write (DIEHARD_FENCE_ACTION=readwrite)\n";

static void release(struct fence_report *r, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fence_report_free(&r[i]);
}

static void test_good(void)
{
	struct fence_report r[4];
	size_t used, more;
	size_t n = fencelog_parse(two, sizeof two - 1, r, 4, &used, &more);
	CHECK(n == 2 && used == sizeof two - 1 && more == 0, "two complete reports, all bytes taken");
	CHECK(strcmp(r[0].kind, "overflow") == 0 && strcmp(r[0].access, "write") == 0 && r[0].offset == 112 &&
		      r[0].size == 100 && r[0].address == 0x7fa55bc07f90 && r[0].thread == 7 && !r[0].freed,
	      "the overflow's fields");
	CHECK(r[0].access_stack.nframes == 2 && r[0].access_stack.frames[0].addr == 0x55555555559f &&
		      r[0].access_stack.frames[0].base == 0x555555554000 &&
		      strcmp(r[0].access_stack.frames[1].module, "/lib/x86_64-linux-gnu/libc.so.6") == 0 &&
		      r[0].alloc_stack.nframes == 1 && r[0].free_stack.nframes == 0,
	      "its stacks");
	CHECK(strcmp(r[0].outcome, "aborting (DIEHARD_FENCE_ACTION=abort)") == 0, "its outcome");
	CHECK(strcmp(r[1].kind, "use-after-free") == 0 && r[1].offset == -3 && r[1].freed &&
		      r[1].free_stack.nframes == 2 && r[1].thread == 9,
	      "the use after free, a negative offset, the free's stack");
	release(r, n);
	n = fencelog_parse(two, sizeof two - 1, r, 1, &used, &more);
	CHECK(n == 1 && more == 1 && used == sizeof two - 1, "past max: counted, not filled");
	release(r, n);
}

static void test_partial(void)
{
	struct fence_report r[4];
	size_t used, more;
	const char *second = strstr(two, "diehard: fence: use-after-free");
	size_t first_len = (size_t)(second - two);
	/* Every cut inside the second report leaves it for later. */
	for (size_t cut = first_len; cut < sizeof two - 1; cut += 7) {
		size_t n = fencelog_parse(two, cut, r, 4, &used, &more);
		CHECK(n == 1 && used == first_len, "cut at %zu: the first report only", cut);
		release(r, n);
	}
	size_t n = fencelog_parse(two, sizeof two - 2, r, 4, &used, &more);
	CHECK(n == 1 && used == first_len, "the outcome line without its newline is not taken");
	release(r, n);
	/* A report cut short by another (the writer died mid-way, then a
	 * fork child wrote its own): the first is dropped. */
	char cut[4096];
	int head = (int)(strstr(two, "    #1") - two);
	snprintf(cut, sizeof cut, "%.*s%s", head, two, second);
	n = fencelog_parse(cut, strlen(cut), r, 4, &used, &more);
	CHECK(n == 1 && strcmp(r[0].kind, "use-after-free") == 0 && used == strlen(cut),
	      "a header interrupting a report starts the next");
	release(r, n);
}

static void test_garbage(void)
{
	static const char *const bad[] = {
		"diehard: fence: nonsense: write at offset 1 of a 2-byte object at 0x10\n"
		"diehard: fence: aborting\n",
		"diehard: fence: overflow: scribble at offset 1 of a 2-byte object at 0x10\n"
		"diehard: fence: aborting\n",
		"diehard: fence: overflow: write at offset x of a 2-byte object at 0x10\n"
		"diehard: fence: aborting\n",
		"diehard: fence: overflow write at offset 1 of a 2-byte object at 0x10\n"
		"diehard: fence: aborting\n",
		"    #0 0x1 0x0 /x\ndiehard: fence: going on\n",
		"diehard: fence: : \n\n\n",
	};
	struct fence_report r[4];
	size_t used, more;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		size_t n = fencelog_parse(bad[i], strlen(bad[i]), r, 4, &used, &more);
		CHECK(n == 0 && more == 0, "malformed text %zu: no report", i);
	}
	/* Frames that do not parse, or name a relative module, are skipped. */
	char text[2048];
	snprintf(text, sizeof text,
		 "diehard: fence: underflow: read at offset -1 of a 64-byte object at 0x7f0000002fff\n"
		 "diehard: fence: the access:\n"
		 "    #0 0xzz 0x0 /x\n"
		 "    #1 0x10 0x0 relative\n"
		 "    #2 0x10 0x0 /ok\n"
		 "diehard: fence: allocated by thread 1:\n"
		 "diehard: fence: aborting\n");
	size_t n = fencelog_parse(text, strlen(text), r, 4, &used, &more);
	CHECK(n == 1 && r[0].access_stack.nframes == 1 && strcmp(r[0].access_stack.frames[0].module, "/ok") == 0,
	      "bad frames skipped, the good one kept");
	release(r, n);
	/* Random bytes, NULs, lines far longer than PATH_MAX, many frames. */
	srand(7);
	size_t len = 1 << 20;
	char *junk = malloc(len);
	for (int round = 0; round < 20; round++) {
		for (size_t i = 0; i < len; i++) {
			int c = rand() % 64;
			junk[i] = c == 0 ? '\n' : c == 1 ? '\0' : (char)(rand() % 256);
		}
		if (round % 2 == 1) /* well-formed reports spliced into the noise */
			for (size_t at = 1000; at + sizeof two < len; at += 50000)
				memcpy(junk + at, two, sizeof two - 1);
		n = fencelog_parse(junk, len, r, 4, &used, &more);
		CHECK(used <= len && n <= 4, "random round %d: bounded (%zu reports, %zu more)", round, n, more);
		release(r, n);
	}
	memset(junk, 'a', len);
	memcpy(junk, two, sizeof two - 1);
	n = fencelog_parse(junk, len, r, 4, &used, &more);
	CHECK(n == 2 && used == sizeof two - 1, "a megabyte without a newline after reports");
	release(r, n);
	size_t pos = 0;
	pos += (size_t)snprintf(junk, len, "diehard: fence: overflow: read at offset 8 of a 8-byte object at 0x1\n"
					   "diehard: fence: the access:\n");
	for (int i = 0; i < 100; i++)
		pos += (size_t)snprintf(junk + pos, len - pos, "    #%d 0x%x 0x0 /m\n", i, i + 1);
	pos += (size_t)snprintf(junk + pos, len - pos, "diehard: fence: aborting\n");
	n = fencelog_parse(junk, pos, r, 4, &used, &more);
	CHECK(n == 1 && r[0].access_stack.nframes == TRACE_MAX_FRAMES, "a stack is capped at %d frames",
	      TRACE_MAX_FRAMES);
	release(r, n);
	free(junk);
}

int main(void)
{
	test_good();
	test_partial();
	test_garbage();
	return tap_done();
}
