/* frames.h — the calling stack's return addresses, by libgcc's unwinder
 * (_Unwind_Backtrace), raw (the supervisor or diehard-symbolize names them),
 * and which of them are libdiehard.so's own: fence reports and --ci traces
 * show the program's frames, not the allocator's.
 *
 * Safe in a signal handler that interrupted the program (not the
 * allocator): the unwinder and dladdr take their own locks only. */
#ifndef DIEHARD_FRAMES_H
#define DIEHARD_FRAMES_H

#include <stdbool.h>
#include <stdint.h>

/* Whether return address pc lies in libdiehard.so itself. */
bool frames_own(uintptr_t pc);

/* Up to max return addresses of the calling stack into pcs, the
 * allocator's leading frames (the call chain down from the entry point)
 * left out; returns how many. */
unsigned frames_capture(uintptr_t *pcs, unsigned max);

#endif
