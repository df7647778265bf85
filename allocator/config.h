/* config.h — the allocator's settings, read once from the environment.
 *
 * The supervisor talks to the allocator only through these variables (see the
 * README for the user-facing description):
 *   DIEHARD_SEED          1-32 hex digits: the 128-bit seed (default: getrandom)
 *   DIEHARD_M             heap expansion factor, 1.1 to 1024 (default 2)
 *   DIEHARD_WINDOW        placement window in slots: a power of two from 64 to
 *                         2^24, or "all" (0) for the whole class (default 4096;
 *                         heap.h says what it trades)
 *   DIEHARD_PLACEMENT     "scattered" (default): each slot random in the
 *                         window; "clustered": batches by bitmap word (heap.h)
 *   DIEHARD_FILL          "random": fill new objects and fresh heap with random bytes;
 *                         "pattern:HEX", "inverse:HEX", "zero": keyed fills (keyed.h)
 *   DIEHARD_FLIP          P/T/lo-hi[/blo-bhi]: invert some keyed fills (keyed.h)
 *   DIEHARD_TRACE         FILE: the trace keyed.h describes
 *   DIEHARD_TRACE_AT      P/T/N: trace that allocation's stack
 *   DIEHARD_PIDKEY        "1": keyed fills are keyed by pid (pid namespaces)
 *   DIEHARD_STATS         "1": one summary line on stderr at exit
 *   DIEHARD_SAFE_STRINGS  "0": do not bound strcpy and friends to heap objects
 *   DIEHARD_FENCE         all | 1/N [:MIN-MAX]: fence mode (fence.h)
 *   DIEHARD_FENCE_ACTION  abort | readonly | readwrite: after a fence report
 *   DIEHARD_ARCHIPELAGO   HOT: Archipelago mode with a hot space of HOT pages
 * A malformed value is reported in one line on stderr and the default is used.
 */
#ifndef DIEHARD_CONFIG_H
#define DIEHARD_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "fence.h"
#include "keyed.h"

/* M is kept in fixed point, M * M_ONE, so limits are integer arithmetic. */
#define M_ONE 256u
#define M_MIN_FIXED ((M_ONE * 11 + 9) / 10) /* 1.1 */
#define M_MAX_FIXED (M_ONE * 1024)

#define WINDOW_DEFAULT_SHIFT 12u /* 4096 slots */
#define WINDOW_MIN_SHIFT 6u      /* a bitmap word */
#define WINDOW_MAX_SHIFT 24u

struct config {
	uint64_t seed[2]; /* [0] low 64 bits, [1] high 64 bits */
	bool seed_given;
	unsigned m_fixed;
	unsigned window_shift;   /* placement window of 1 << window_shift slots; 0: the whole class */
	bool clustered;          /* DIEHARD_PLACEMENT: clustered (true) or scattered (default) */
	bool fill;               /* random fill (FILL_RANDOM): keyed modes fill at entry.c */
	enum fill_mode fill_mode;
	uint64_t fill_seed;      /* keyed modes */
	struct flip flip;
	struct keyed_at trace_at;
	bool stats;
	bool safe_strings;
	struct fence_config fence;
	size_t arch_hot;         /* DIEHARD_ARCHIPELAGO: hot pages; 0 off */
};

/* Reads the environment; never allocates. Seeds from the OS when no valid
 * DIEHARD_SEED is given. (modes.c) */
void config_load(struct config *cfg);

/* The heap's settings alone (DIEHARD_M, DIEHARD_WINDOW, DIEHARD_PLACEMENT,
 * DIEHARD_SEED), every mode off: for a heap linked without the modes'
 * modules (critical/private.c). config_load starts with it. */
void config_load_heap(struct config *cfg);

/* One line: NAME='value' is not EXPECTED; using FALLBACK. */
void config_warn_bad(const char *name, const char *value, const char *expected, const char *fallback);

/* A switch: "1"/"on"/"yes"/"true" or "0"/"off"/"no"/"false" (or empty). */
bool config_switch(const char *name, bool fallback);

/* Parsers, exposed for the unit tests. Each returns false on a malformed value
 * and leaves the output untouched. */
bool config_parse_seed(const char *s, uint64_t seed[2]);
bool config_parse_m(const char *s, unsigned *m_fixed);
bool config_parse_window(const char *s, unsigned *window_shift);

/* Looks a variable up in the initial environment; NULL when absent. Works even
 * when called before libc has set up environ. */
const char *config_getenv(const char *name);

#endif
