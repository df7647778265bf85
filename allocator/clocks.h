/* clocks.h — the replicas' fast path for clock reads (clocks.c). */
#ifndef DIEHARD_CLOCKS_H
#define DIEHARD_CLOCKS_H

#include <stdint.h>

/* Maps the region DIEHARD_CLOCKS names, if any (at start-up). */
void clocks_start(void);

/* The run's marker for calls the filter lets through unnotified (a leader's
 * real clock read; an open that is not of a random device), or 0 when not
 * under diehard's fast path (no DIEHARD_CLOCKS). Known even in a process
 * whose region could not be mapped (a child that lost fd 1000): the filter
 * is the run's. */
uint64_t clocks_mark(void);

/* The run's marker for a call that asks diehard (a clock read's fallback;
 * an open of a random device, which the filter would otherwise let through
 * with O_CLOEXEC), or 0 as for clocks_mark. */
uint64_t clocks_ask_mark(void);

/* The run's marker of an exec whose image will load libdiehard (exec.c),
 * or 0: none in DIEHARD_CLOCKS (not under diehard's zero-stop images). */
uint64_t clocks_exec_mark(void);

/* In a forked child (lifecycle.c's fork handler): the forking thread's
 * clock lane is not the child's. */
void clocks_fork_child(void);

#endif
