/* realclock.h — what a clock reads now for a given thread of a replica: the
 * value the first replica to reach a clock read is given (take.c), and puts
 * in the log for the others. System-wide clocks are read by the supervisor
 * itself; CPU-time clocks are the calling thread's or process's, which the
 * supervisor reads from outside. */
#ifndef DIEHARD_REALCLOCK_H
#define DIEHARD_REALCLOCK_H

#include <stdbool.h>
#include <sys/types.h>
#include <time.h>

#include "ndlog.h"

/* Linux's encoding of CPU-time clock ids (clock_getcpuclockid(3)). */
#define CPUCLOCK_PERTHREAD 4
#define CPUCLOCK_WHICH(id) ((id) & 3)
#define CPUCLOCK_PID(id) ((pid_t)~((id) >> 3))
#define CPUCLOCK_SCHED 2
#define CPUCLOCK_FD 3 /* not a CPU clock: a dynamic POSIX clock (an fd) */

/* Whether the supervisor can read clock id for a replica at all: not a
 * dynamic POSIX clock (its fd is the replica's, not ours). */
bool realclock_readable(clockid_t id);

/* Reads clock id as thread tid would: v->a seconds, v->b nanoseconds, or
 * v->err as clock_gettime would fail (EINVAL for an unknown clock). */
void realclock_read(clockid_t id, pid_t tid, struct nd_value *v);

#endif
