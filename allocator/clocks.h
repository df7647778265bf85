/* clocks.h — the replicas' fast path for clock reads (clocks.c). */
#ifndef DIEHARD_CLOCKS_H
#define DIEHARD_CLOCKS_H

#include <stdint.h>

/* Maps the region DIEHARD_CLOCKS names, if any (at start-up). */
void clocks_start(void);

/* The run's marker for calls the filter lets through unnotified (a leader's
 * real clock read; an open that is not of a random device), or 0 when the
 * fast path is not set up in this process. */
uint64_t clocks_mark(void);

#endif
