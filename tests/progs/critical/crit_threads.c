/* crit_threads.c — per-thread critical data: each of N threads keeps its
 * own critical linked list (built, traversed and changed over and over)
 * and checks it against what it expects; main says "threads ok" and the
 * counts, or what went wrong. Run with DIEHARD_CORRUPT (libdiehard.so
 * preloaded) the lists must still come out right.
 *
 *   crit_threads [threads] [rounds] [--fork]
 *
 * --fork: after the threads, fork; the child checks and changes a list made
 * before the fork (its copy), the parent its own.
 */
#include <diehard/critical.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct node {
	struct node *next;
	long value;
};

struct list {
	struct node *head;
};

static struct list *make(long n, long base)
{
	struct list *l = critical_calloc(1, sizeof *l);
	for (long i = n - 1; i >= 0; i--) {
		struct node *x = critical_calloc(1, sizeof *x);
		critical_store_long(&x->value, base + i);
		critical_store_ptr(&x->next, critical_load_ptr(&l->head));
		critical_store_ptr(&l->head, x);
	}
	return l;
}

/* Sum of the values, and how many nodes. */
static long sum(struct list *l, long *n)
{
	long s = 0;
	*n = 0;
	for (struct node *x = critical_load_ptr(&l->head); x != NULL; x = critical_load_ptr(&x->next)) {
		s += critical_load_long(&x->value);
		++*n;
	}
	return s;
}

/* Every value up by one, the first node moved to the end: allocation and
 * free churn, so the corruptor (which ticks on allocator calls) runs. */
static void change(struct list *l)
{
	struct node *first = critical_load_ptr(&l->head), *x = first, *last = NULL;
	for (; x != NULL; x = critical_load_ptr(&x->next)) {
		critical_store_long(&x->value, critical_load_long(&x->value) + 1);
		last = x;
	}
	struct node *copy = critical_calloc(1, sizeof *copy);
	critical_store_long(&copy->value, critical_load_long(&first->value));
	critical_store_ptr(&l->head, critical_load_ptr(&first->next));
	critical_store_ptr(&last->next, copy);
	critical_free(first);
}

static long rounds = 200;
#define NODES 200L

static void *worker(void *arg)
{
	long id = (long)arg, n;
	struct list *l = make(NODES, id * 1000000);
	for (long r = 1; r <= rounds; r++) {
		change(l);
		long want = NODES * (id * 1000000 + r) + NODES * (NODES - 1) / 2;
		if (sum(l, &n) != want || n != NODES) {
			fprintf(stderr, "thread %ld: round %ld: wrong list\n", id, r);
			return (void *)1;
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	long threads = argc > 1 ? atol(argv[1]) : 4;
	if (argc > 2)
		rounds = atol(argv[2]);
	int forking = argc > 3 && strcmp(argv[3], "--fork") == 0;
	if (threads < 1 || threads > 64 || rounds < 1) {
		fprintf(stderr, "usage: crit_threads [threads 1-64] [rounds] [--fork]\n");
		return 2;
	}
	struct list *before = make(NODES, 0);
	pthread_t t[64];
	for (long i = 0; i < threads; i++)
		if (pthread_create(&t[i], NULL, worker, (void *)(i + 1)) != 0) {
			perror("crit_threads: pthread_create");
			return 1;
		}
	int bad = 0;
	for (long i = 0; i < threads; i++) {
		void *r;
		pthread_join(t[i], &r);
		bad |= r != NULL;
	}
	if (forking) {
		pid_t pid = fork();
		if (pid < 0) {
			perror("crit_threads: fork");
			return 1;
		}
		change(before);
		long n, s = sum(before, &n);
		if (s != NODES * 1 + NODES * (NODES - 1) / 2 || n != NODES) {
			fprintf(stderr, "%s: list made before fork is wrong\n", pid == 0 ? "child" : "parent");
			bad = 1;
		}
		if (pid == 0)
			_exit(bad);
		int st;
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			bad = 1;
	}
	struct critical_counts c;
	critical_counts(&c);
	printf("%s: repaired %llu unrepairable %llu\n", bad ? "threads WRONG" : "threads ok", c.repaired, c.unrepairable);
	return bad;
}
