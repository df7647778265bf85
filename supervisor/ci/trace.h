/* trace.h — what a replica's allocator wrote to its DIEHARD_TRACE file
 * (allocator/config.h): the processes that allocated, each thread's final
 * allocation count, the stack of one chosen allocation (DIEHARD_TRACE_AT),
 * and the stacks of bad frees. The file is the replica's, so anything may be
 * in it: malformed lines are skipped, sizes are bounded. Pure code but for
 * reading the file. */
#ifndef DIEHARD_TRACE_H
#define DIEHARD_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "symbolize.h"

#define TRACE_MAX_FRAMES 32
#define TRACE_MAX_BAD 16
#define TRACE_MAX_STREAMS 256

/* One thread of one process, and how many allocations it made. */
struct trace_stream {
	uint64_t pkey;  /* the process key: its pid when replicas have their own, else 0 */
	uint64_t thread;
	uint64_t count;
	bool counted;   /* an N line was seen (else count is a lower bound: 0) */
};

struct trace_stack {
	struct frame *frames;
	size_t nframes;
};

struct trace_alloc {
	bool found;
	uint64_t pkey, thread, n, size, usable;
	char fn[16];
	struct trace_stack stack;
};

struct trace_bad {
	char kind[8]; /* "double" or "invalid" */
	uint64_t ptr;
	struct trace_stack stack;
};

struct trace {
	struct trace_stream streams[TRACE_MAX_STREAMS];
	size_t nstreams;
	char exe[256];            /* the first process's program */
	unsigned processes;
	struct trace_alloc alloc;
	struct trace_bad bad[TRACE_MAX_BAD];
	size_t nbad;
	size_t skipped;           /* malformed lines */
};

/* Parses a trace file's text; never fails (a missing file is an empty
 * trace). */
void trace_parse(struct trace *t, const char *text, size_t n);
bool trace_read(struct trace *t, const char *path);
void trace_free(struct trace *t);

/* A frame appended to s (past TRACE_MAX_FRAMES, or out of memory: dropped);
 * a stack's frames freed. */
void trace_stack_add(struct trace_stack *s, uint64_t addr, uint64_t base, const char *module);
void trace_stack_free(struct trace_stack *s);

#endif
