/* origin.h — where uninitialized heap bytes that reached the output came
 * from, found by re-execution instead of instrumentation.
 *
 * A replica whose fill is keyed (allocator/config.h: pattern, inverse,
 * zero) is replayed from its recording (replay.h) with the fill of a set of
 * allocations flipped (every bit inverted, DIEHARD_FLIP). If its output
 * changes, some never-written byte of those allocations reached it.
 * Bisection over processes, threads, allocation numbers and then bytes
 * finds one allocation and the bytes of it that matter; one more replay
 * with DIEHARD_TRACE_AT records its stack, symbolized here (symbolize.h).
 *
 * Deterministic for a single-threaded process tree whose replay reproduces
 * the recording; otherwise the result carries a note. */
#ifndef DIEHARD_ORIGIN_H
#define DIEHARD_ORIGIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "recording.h"
#include "trace.h"

struct origin {
	bool searched;        /* a search ran (the replica's fill is keyed) */
	bool fill_matters;    /* flipping all its fill changed its output */
	bool found;           /* one allocation was isolated */
	unsigned replica;     /* the replica searched */
	struct trace_alloc alloc; /* the allocation and its stack (symbolized) */
	uint64_t first_byte, last_byte; /* of it, that change the output */
	bool bytes_found;
	int stream;           /* where flipping it shows first: 0 stdout, 1 stderr, -1 the status */
	uint64_t offset, line, column; /* byte offset, and its line and column (from 1) */
	unsigned runs;        /* replays run */
	double seconds;
	bool reproduced;      /* the unflipped replay matched the recording */
	char note[256];       /* why the answer may not be the whole story */
};

/* Searches replica id of the recording at path (rec is it, parsed). self
 * is diehard's executable; budget bounds the search in seconds. */
void origin_search(const char *self, const char *path, const Diehard__Recording *rec, unsigned id, double budget,
		   struct origin *out);
void origin_free(struct origin *o);

#endif
