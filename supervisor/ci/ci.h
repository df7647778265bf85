/* ci.h — recording a run, and --ci: a test run that fails on any memory
 * error the replicas show (docs/CI.md).
 *
 * With a recording wanted (--record, --ci, a replay) every replica's whole
 * output is digested and each process's seed, fill and fate kept; at the
 * end the run is written to proto/recording.proto's format. Under --ci the
 * replicas' fills cannot agree by chance (slot 0 a keyed pattern, slot 1
 * its bitwise complement, slot 2 zeros, more slots patterns of their own),
 * each replica's allocator traces bad frees, and any divergence or bad free
 * fails the run (EXIT_CI_FAILED): the origin of uninitialized bytes is
 * searched (origin.h), and the findings go to stderr in a block, to the
 * JSON report and, on GitHub Actions, to ::error annotations. A replay
 * (replay.h) checks at its end that it wrote what the recording says. */
#ifndef DIEHARD_CI_H
#define DIEHARD_CI_H

#include <stdbool.h>
#include <stddef.h>

struct sup;
struct replica;

/* NULL (nothing to do) unless a recording is wanted. */
struct ci *ci_new(struct sup *S);

/* Before replica r (in its slot) is started: its seed (a replay's is the
 * recording's), r->fill, and extra environment variables (NULL-terminated,
 * owned by ci until the slot's next start). */
char *const *ci_setup(struct sup *S, struct replica *r, bool replacement, bool sandboxed);

/* r was started and has its id. */
void ci_started(struct sup *S, struct replica *r);

/* r wrote p[0..n) on stream s. */
void ci_output(struct sup *S, struct replica *r, int s, const void *p, size_t n);

/* A divergence: replica id (-1: none alone, the replicas split) on stream
 * ("stdout", "stderr", "status") at offset; excerpts in hex. */
void ci_divergence(struct sup *S, int id, const char *stream, size_t offset, const char *mine, const char *theirs);

/* r's process is over or its slot is taken: keep what it did. */
void ci_retire(struct sup *S, struct replica *r);

/* The end of the run (every slot retired, replicas all gone): the
 * recording, the findings, the verdict. Returns the exit code. */
int ci_finish(struct sup *S, int code);

#endif
