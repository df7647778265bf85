/*
 * ci_bugs: planted uninitialized reads, one per kind, for diehard --ci.
 *
 *   ci_bugs KIND [fixed]
 *
 * KIND is bit, word, padding, realloc, late or branch. Each allocates on the
 * line marked "ORIGIN: KIND" (the tests find the expected file:line there)
 * and lets never-written bytes of it reach stdout; with "fixed" it writes
 * them first and the output is the same on every heap. Under glibc's malloc
 * a fresh heap is zeros, so every bug prints the same as its fix: invisible.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Through a volatile pointer: GCC would fold malloc + memset into calloc. */
static void *(*volatile alloc)(size_t) = malloc;
static void *(*volatile grow)(void *, size_t) = realloc;

struct flags {
	int id;
	unsigned flag : 1; /* one bit, never set in the bug */
	unsigned rest : 31;
};

struct record {
	char tag;  /* then 3 bytes of padding */
	int value;
	short small; /* then 2 more */
};

static int bit(int fixed)
{
	struct flags *p = alloc(sizeof *p); /* ORIGIN: bit */
	p->id = 7;
	if (fixed)
		p->flag = 0;
	/* The compiler must read the bit: its value is the bug. */
	__asm__ volatile("" : : "r"(p) : "memory");
	printf("record %d\n", p->id);
	puts(p->flag & 1 ? "A" : "a");
	free(p);
	return 0;
}

static int word(int fixed)
{
	long *counts = alloc(4 * sizeof *counts); /* ORIGIN: word */
	counts[0] = 1;
	counts[1] = 2;
	counts[3] = 4;
	if (fixed)
		counts[2] = 0;
	__asm__ volatile("" : : "r"(counts) : "memory");
	for (int i = 0; i < 4; i++)
		printf("count[%d] = %ld\n", i, counts[i]);
	free(counts);
	return 0;
}

static int padding(int fixed)
{
	struct record *r = alloc(2 * sizeof *r); /* ORIGIN: padding */
	if (fixed)
		memset(r, 0, 2 * sizeof *r);
	for (int i = 0; i < 2; i++) {
		r[i].tag = (char)('x' + i);
		r[i].value = 1000 + i;
		r[i].small = (short)i;
	}
	__asm__ volatile("" : : "r"(r) : "memory");
	/* A binary record, padding included, as careless serializers write it. */
	fputs("records:", stdout);
	fwrite(r, sizeof *r, 2, stdout);
	putchar('\n');
	free(r);
	return 0;
}

static int grown(int fixed)
{
	/* Grown into another size class, so that it moves: the new bytes are
	 * the realloc's (one that stays in its block keeps the first
	 * allocation's bytes, and names it: docs/CI.md). */
	char *buf = alloc(16);
	memcpy(buf, "abcdefghijklmnop", 16);
	buf = grow(buf, 100); /* ORIGIN: realloc */
	if (buf == NULL)
		return 1;
	memcpy(buf + 16, "qrst", 4);
	if (fixed)
		memcpy(buf + 20, "uvwx", 4);
	__asm__ volatile("" : : "r"(buf) : "memory");
	/* 24 bytes, as hex: the last four were never written. */
	for (int i = 0; i < 24; i++)
		printf("%02x", (unsigned char)buf[i]);
	putchar('\n');
	free(buf);
	return 0;
}

static int late(int fixed)
{
	/* Megabytes of correct output first: the bug is far from the start. */
	for (int i = 0; i < 100000; i++)
		printf("line %06d of correct output, nothing to see here\n", i);
	unsigned *total = alloc(sizeof *total); /* ORIGIN: late */
	if (fixed)
		*total = 0;
	for (int i = 0; i < 10; i++)
		__asm__ volatile("" : : "r"(total) : "memory");
	printf("total: %u\n", *total);
	free(total);
	return 0;
}

static int branch(int fixed)
{
	int *balance = alloc(16 * sizeof *balance); /* ORIGIN: branch */
	for (int i = 1; i < 16; i++)
		balance[i] = i;
	if (fixed)
		balance[0] = 0;
	__asm__ volatile("" : : "r"(balance) : "memory");
	/* Only a decision depends on it: no byte of it is printed. */
	if (balance[0] > 0)
		puts("in credit");
	else
		puts("not in credit");
	free(balance);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*run)(int);
	} kinds[] = { { "bit", bit }, { "word", word }, { "padding", padding },
		      { "realloc", grown }, { "late", late }, { "branch", branch } };
	if (argc < 2 || argc > 3 || (argc == 3 && strcmp(argv[2], "fixed") != 0))
		goto usage;
	for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
		if (strcmp(argv[1], kinds[i].name) == 0)
			return kinds[i].run(argc == 3);
usage:
	fprintf(stderr, "usage: ci_bugs bit|word|padding|realloc|late|branch [fixed]\n");
	return 2;
}
