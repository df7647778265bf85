/* dispute.c — see dispute.h. Disputes are rare (a replica behaving
 * differently), so they live in a short list searched linearly; the common
 * case, disputes_note with none open, is one test. */
#include "dispute.h"

#include <stdlib.h>

#include "voter.h"

struct dispute {
	uint32_t key;
	uint64_t index;
	uint64_t first_arg;
	uint64_t made;               /* replicas whose argument is known */
	uint64_t arg[VOTER_MAX];
	struct dispute *next;
};

#define MAX_OPEN 1024

struct disputes {
	unsigned k;
	unsigned nopen;
	dispute_odd_fn *odd;
	void *ctx;
	struct dispute *open;
};

struct disputes *disputes_new(unsigned k, dispute_odd_fn *odd, void *ctx)
{
	struct disputes *D = calloc(1, sizeof *D);
	if (D != NULL)
		*D = (struct disputes){ .k = k, .odd = odd, .ctx = ctx };
	return D;
}

void disputes_free(struct disputes *D)
{
	if (D == NULL)
		return;
	while (D->open != NULL) {
		struct dispute *d = D->open;
		D->open = d->next;
		free(d);
	}
	free(D);
}

static struct dispute *find(const struct disputes *D, uint32_t key, uint64_t index)
{
	for (struct dispute *d = D->open; d != NULL; d = d->next)
		if (d->key == key && d->index == index)
			return d;
	return NULL;
}

void disputes_open(struct disputes *D, uint32_t key, uint64_t index, uint64_t first_arg, uint64_t made, unsigned r,
		   uint64_t arg)
{
	struct dispute *d = find(D, key, index);
	if (d == NULL) {
		/* A replica gone wrong could open millions: past the bound (or
		 * out of memory) a disagreement goes unjudged; the count check
		 * at the end still sees the replica. */
		if (D->nopen == MAX_OPEN || (d = calloc(1, sizeof *d)) == NULL)
			return;
		D->nopen++;
		d->key = key;
		d->index = index;
		d->first_arg = first_arg;
		for (unsigned i = 0; i < D->k && i < VOTER_MAX; i++)
			if (made & ((uint64_t)1 << i) && !(d->made & ((uint64_t)1 << i))) {
				d->arg[i] = first_arg;
				d->made |= (uint64_t)1 << i;
			}
		d->next = D->open;
		D->open = d;
	}
	disputes_note(D, key, index, r, arg);
}

void disputes_note(struct disputes *D, uint32_t key, uint64_t index, unsigned r, uint64_t arg)
{
	if (D->open == NULL || r >= VOTER_MAX)
		return;
	struct dispute *d = find(D, key, index);
	if (d == NULL)
		return;
	d->arg[r] = arg;
	d->made |= (uint64_t)1 << r;
}

bool disputes_pending(const struct disputes *D)
{
	return D->open != NULL;
}

bool dispute_majority(const uint64_t *values, unsigned n, uint64_t *majority)
{
	for (unsigned i = 0; i < n; i++) {
		unsigned same = 0;
		for (unsigned j = 0; j < n; j++)
			same += values[j] == values[i];
		if (2 * same > n) {
			*majority = values[i];
			return true;
		}
	}
	return false;
}

static void verdict(const struct disputes *D, const struct dispute *d)
{
	uint64_t made[VOTER_MAX] = { 0 };
	unsigned n = 0;
	for (unsigned i = 0; i < D->k; i++)
		if (d->made & ((uint64_t)1 << i))
			made[n++] = d->arg[i];
	uint64_t majority;
	if (!dispute_majority(made, n, &majority))
		majority = d->first_arg;
	for (unsigned i = 0; i < D->k; i++)
		if ((d->made & ((uint64_t)1 << i)) && d->arg[i] != majority)
			D->odd(D->ctx, i, d->key, d->index, majority, d->arg[i]);
}

void disputes_settle(struct disputes *D, uint64_t waiting, bool force)
{
	struct dispute **p = &D->open;
	while (*p != NULL) {
		struct dispute *d = *p;
		if (force || (waiting & ~d->made) == 0) {
			*p = d->next;
			D->nopen--;
			verdict(D, d);
			free(d);
		} else {
			p = &d->next;
		}
	}
}
