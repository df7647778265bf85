/*
 * ci_threads: a clean multi-threaded program for diehard --ci: four threads
 * each build, sort and sum a list of heap nodes (every byte written), and
 * the main thread prints the sums in thread order. Its output never depends
 * on the heap, the schedule or the fill.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

struct node {
	struct node *next;
	long value;
};

static void *work(void *arg)
{
	long id = (long)arg, sum = 0;
	struct node *head = NULL;
	for (long i = 0; i < 20000; i++) {
		struct node *n = malloc(sizeof *n);
		if (n == NULL)
			return NULL;
		n->value = (i * 7919 + id) % 1000;
		n->next = head;
		head = n;
	}
	while (head != NULL) {
		struct node *n = head;
		sum += n->value;
		head = n->next;
		free(n);
	}
	long *out = malloc(sizeof *out);
	if (out != NULL)
		*out = sum;
	return out;
}

int main(void)
{
	pthread_t t[4];
	for (long i = 0; i < 4; i++)
		if (pthread_create(&t[i], NULL, work, (void *)i) != 0)
			return 1;
	for (int i = 0; i < 4; i++) {
		void *r;
		if (pthread_join(t[i], &r) != 0 || r == NULL)
			return 1;
		printf("thread %d: %ld\n", i, *(long *)r);
		free(r);
	}
	return 0;
}
