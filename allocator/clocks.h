/* clocks.h — the replicas' fast path for clock reads (clocks.c). */
#ifndef DIEHARD_CLOCKS_H
#define DIEHARD_CLOCKS_H

/* Maps the region DIEHARD_CLOCKS names, if any (at start-up). */
void clocks_start(void);

#endif
