/* envkeep.h — whether an exec's environment keeps libdiehard.so and the
 * run's fast clock path (issue 16's zero-stop images): the check exec.c
 * makes on its own process's execs, and diehard (images.c) on an exec it
 * sees unmarked. Pure: no allocation, no stdio, async-signal-safe. */
#ifndef DIEHARD_ENVKEEP_H
#define DIEHARD_ENVKEEP_H

#include <stdbool.h>
#include <stddef.h>

struct envkeep {
	bool preload; /* LD_PRELOAD names the library (its last LD_PRELOAD) */
	bool clocks;  /* DIEHARD_CLOCKS is the run's, byte for byte */
};

/* Takes one environment entry ("NAME=value") into k: lib (lib_len bytes)
 * as an element of LD_PRELOAD (':' or ' ' apart), clocks as the whole
 * "DIEHARD_CLOCKS=..." entry. */
void envkeep_entry(struct envkeep *k, const char *entry, const char *lib, size_t lib_len, const char *clocks);

/* Whether the entries taken keep both. */
static inline bool envkeep_ok(const struct envkeep *k)
{
	return k->preload && k->clocks;
}

#endif
