/* frames.h — the calling stack's return addresses, by libgcc's unwinder
 * (_Unwind_Backtrace), raw (the supervisor or diehard-symbolize names them),
 * and which of them are libdiehard.so's own: fence reports and --ci traces
 * show the program's frames, not the allocator's.
 *
 * The unwinder is loaded by frames_load, where allocating is safe (the
 * library's constructor); before that, or where it cannot be loaded, every
 * stack is empty. The captures are safe in a signal handler that
 * interrupted the program (not the allocator): the unwinder and dladdr
 * take their own locks only. */
#ifndef DIEHARD_FRAMES_H
#define DIEHARD_FRAMES_H

#include <stdbool.h>
#include <stdint.h>

/* Whether return address pc lies in libdiehard.so itself. */
bool frames_own(uintptr_t pc);

/* Opens libgcc_s.so.1 for the unwinder, once; false if it cannot be. It
 * allocates: not from inside the allocator. */
bool frames_load(void);

/* Up to max return addresses of the calling stack into pcs, the
 * allocator's leading frames (the call chain down from the entry point)
 * left out; returns how many. */
unsigned frames_capture(uintptr_t *pcs, unsigned max);

/* In a signal handler: the interrupted stack, from the frame whose pc is
 * ip (the faulting instruction, reached through the signal frame; given
 * as ip + 1, as if it were a return address) outwards; 0 if the unwinder
 * does not reach it. */
unsigned frames_capture_from(uintptr_t ip, uintptr_t *pcs, unsigned max);

#endif
