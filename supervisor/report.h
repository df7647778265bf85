/* report.h — what happened in a run, written as JSON with --report FILE.
 * The schema is documented in docs/REPORT.md. */
#ifndef DIEHARD_REPORT_H
#define DIEHARD_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct options;
struct report;

struct report *report_new(const struct options *o);
void report_replica(struct report *rp, unsigned i, pid_t pid, const uint64_t seed[2]);
void report_input(struct report *rp, size_t n);
void report_bytes(struct report *rp, unsigned i, const char *stream, size_t n);
void report_committed(struct report *rp, const char *stream, size_t n);
void report_divergence(struct report *rp, const char *stream, size_t offset, uint64_t agree, unsigned replica,
		       const char *majority_hex, const char *replica_hex, const char *kind, double t);
void report_status_divergence(struct report *rp, unsigned replica, int status, int majority);
void report_kill(struct report *rp, unsigned replica, const char *why, double t);
void report_exit(struct report *rp, unsigned replica, int status, int signal, double t);
void report_no_quorum(struct report *rp, const char *stream, size_t offset, const char *why, const char *sides);
void report_input_log(struct report *rp, size_t bytes, size_t retained_from, bool complete);
void report_virtualize(struct report *rp, bool on);
void report_call_divergence(struct report *rp, unsigned replica, const char *call, uint64_t index,
			    const char *expected, const char *got, double t);
void report_calls(struct report *rp, unsigned replica, const char *call, uint64_t count);
void report_unvirtualized(struct report *rp, unsigned replica, uint64_t count);
void report_set_exit(struct report *rp, int code, const char *reason);
/* Writes the file if one was asked for (once); warns on failure. */
void report_write(struct report *rp);

#endif
