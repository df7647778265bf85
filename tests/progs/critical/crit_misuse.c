/* crit_misuse.c — what a program doing critical memory wrong gets:
 *
 *   crit_misuse uninit   a critical load of bytes never critically stored
 *   crit_misuse frees    critical_free twice, of a stack and of a malloc'd pointer
 *   crit_misuse stray    a plain store into critical data, then a critical load
 *
 * Each prints what it loaded (if anything) and the counts.
 */
#include <diehard/critical.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void print_counts(void)
{
	struct critical_counts c;
	critical_counts(&c);
	printf("objects %llu detected %llu repaired %llu unrepairable %llu uninitialized %llu out_of_bounds %llu bad_frees %llu\n",
	       c.objects, c.detected, c.repaired, c.unrepairable, c.uninitialized, c.out_of_bounds, c.bad_frees);
}

int main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "";
	if (strcmp(what, "uninit") == 0) {
		uint64_t *p = critical_malloc(4 * sizeof *p);
		critical_store_u64(&p[0], 7);
		printf("loaded %llx %llx\n", (unsigned long long)critical_load_u64(&p[0]),
		       (unsigned long long)critical_load_u64(&p[1]));
	} else if (strcmp(what, "frees") == 0) {
		void *p = critical_malloc(24);
		char stack[8];
		void *m = malloc(24);
		critical_free(p);
		critical_free(p);
		critical_free(stack);
		critical_free(m);
		free(m);
	} else if (strcmp(what, "stray") == 0) {
		long *p = critical_malloc(8 * sizeof *p);
		for (int i = 0; i < 8; i++)
			critical_store_long(&p[i], 100 + i);
		memset(p, 0x55, 5 * sizeof *p); /* a stray write over five of them */
		long v = critical_load_long(&p[2]); /* repairs all of the object */
		printf("loaded %ld %ld\n", v, p[4]);
	} else {
		fprintf(stderr, "usage: crit_misuse uninit|frees|stray\n");
		return 2;
	}
	print_counts();
	return 0;
}
