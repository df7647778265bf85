/* dispute.h — who is odd when replicas make the same call with different
 * arguments (getrandom's size, an open's flags). The first replica to make
 * a call sets the log's entry, but it may be the odd one: so a disagreement
 * opens a dispute, every replica's argument for that call is collected, and
 * once every replica still running has made it (or at the end of the run)
 * the majority's argument decides who diverged. With no majority (k=2, or a
 * three-way split) the replicas that differ from the first are named.
 *
 * Pure code: no I/O; single-threaded. */
#ifndef DIEHARD_DISPUTE_H
#define DIEHARD_DISPUTE_H

#include <stdbool.h>
#include <stdint.h>

struct disputes;

/* The verdict on one replica: it made call (key, index) with got where the
 * majority made it with expected. */
typedef void dispute_odd_fn(void *ctx, unsigned replica, uint32_t key, uint64_t index, uint64_t expected,
			    uint64_t got);

/* The value more than half of values[0..n) hold, if one does. */
bool dispute_majority(const uint64_t *values, unsigned n, uint64_t *majority);

struct disputes *disputes_new(unsigned k, dispute_odd_fn *odd, void *ctx);
void disputes_free(struct disputes *D);

/* Replica r made call (key, index) with arg, differing from the leader's
 * first_arg; made is the set of replicas already known to have made that
 * call with first_arg (bit i: replica i). Opens the dispute if needed. */
void disputes_open(struct disputes *D, uint32_t key, uint64_t index, uint64_t first_arg, uint64_t made,
		   unsigned r, uint64_t arg);

/* Replica r made call (key, index) with arg; counts only if it is disputed. */
void disputes_note(struct disputes *D, uint32_t key, uint64_t index, unsigned r, uint64_t arg);

/* Whether any dispute is open. */
bool disputes_pending(const struct disputes *D);

/* Settles the disputes every replica in waiting has taken part in (all of
 * them if force): calls odd for each replica the verdict names. */
void disputes_settle(struct disputes *D, uint64_t waiting, bool force);

#endif
