/* fencelog.h — fence mode's reports (allocator/fence.h) brought from the
 * replicas into diehard's log and JSON report.
 *
 * With DIEHARD_FENCE in diehard's environment, each replica gets a
 * DIEHARD_FENCE_LOG of its own (a file named by its id in a directory of
 * diehard's, made at the start and removed at the end, also by a fatal
 * exit; one file per process started). Its allocator appends each report there, in one write, instead of
 * writing it on the replica's stderr, which the vote sees. When a replica
 * ends, and for those still running when the run ends, diehard reads what
 * was appended since the last read: each complete report is one log_warn
 * line (kind, access, where, where the object was allocated, the outcome),
 * and an object in the report's "fence" array (docs/REPORT.md), its stacks
 * symbolized here. --ci counts them as findings.
 *
 * The file is the replica's, and a replica may be the one that corrupts
 * memory: parsing is bounded and pure (fencelog_parse, unit-tested with
 * garbage); lines that do not parse are skipped; a report is taken only
 * once its final line (the outcome) is there. */
#ifndef DIEHARD_FENCELOG_H
#define DIEHARD_FENCELOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trace.h"

struct report;
struct fencelog;

struct fence_report {
	char kind[32];     /* overflow, underflow, use-after-free, fault in a live object */
	char access[8];    /* read, write, access */
	int64_t offset;    /* of the access from the object's start */
	uint64_t size, address, thread;
	char outcome[160];
	bool freed;        /* a "freed:" section was there */
	struct trace_stack access_stack, alloc_stack, free_stack;
};

/* Reads reports from text[0..n): at most max complete ones into out (the
 * rest of the complete ones are counted in *more), returns how many were
 * filled. *used: the bytes up to the end of the last complete report (a
 * report still being written is left for the next read). Never fails. */
size_t fencelog_parse(const char *text, size_t n, struct fence_report *out, size_t max, size_t *used,
		      size_t *more);
void fence_report_free(struct fence_report *r);

/* NULL unless DIEHARD_FENCE is set (non-empty) in diehard's environment. */
struct fencelog *fencelog_new(struct report *rp);

/* Before a process is started in slot: its variables (NULL-terminated,
 * owned by F until the next call), DIEHARD_FENCE_LOG naming a new file.
 * The slot's previous process's reports are read first. */
char *const *fencelog_env(struct fencelog *F, unsigned slot);

/* The process in slot started, numbered id (reports name it). */
void fencelog_started(struct fencelog *F, unsigned slot, unsigned id);

/* Reads the new reports of slot's process: logged, and added to the
 * report. */
void fencelog_collect(struct fencelog *F, unsigned slot);

/* Reports read so far; report i as a --ci finding (a new reference:
 * kind, replica, and the report as "fence"), or NULL past those kept. */
size_t fencelog_count(const struct fencelog *F);
void *fencelog_finding(struct fencelog *F, size_t i);

/* Prints report i's three stacks (--ci's block). */
void fencelog_print(struct fencelog *F, size_t i);

/* Removes the directory and frees F. */
void fencelog_free(struct fencelog *F);

#endif
