/* replay.h — `diehard replay FILE --replica N`: one replica of a recorded
 * run again, exactly: its seed and fill, the recorded argv, environment,
 * working directory, input and clock and random answers (docs/CI.md). The
 * origin search (origin.h) runs it many times with one change: the fill of
 * some allocations flipped. */
#ifndef DIEHARD_REPLAY_H
#define DIEHARD_REPLAY_H

#include <stdbool.h>
#include <sys/types.h>

#include "recording.h"

struct replay {
	const Diehard__Recording *rec;
	const Diehard__Replica *rep; /* the replica replayed */
	const char *flip;            /* DIEHARD_FLIP for it, or NULL */
	const char *trace;           /* DIEHARD_TRACE, or NULL */
	const char *trace_at;        /* DIEHARD_TRACE_AT, or NULL */
	bool quiet;                  /* no verdict line at the end */
	bool gdb;                    /* under gdb (replay_debugger) */
	int gdb_stdin;               /* diehard's stdin, for gdb; -1 */
};

/* --gdb: the replica's program (pid, stopped just before its exec) gets a
 * gdb attached, which stops it again at its first instruction. */
void replay_debugger(const struct replay *rp, pid_t pid);

/* The subcommand: argv[0] is "replay". Returns the exit code. */
int replay_main(int argc, char **argv, const char *init_path);

#endif
