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
/* Replicas are numbered by id, in the order they were started: 0..k-1,
 * then each replacement. */
void report_replica(struct report *rp, unsigned id, unsigned slot, pid_t pid, const uint64_t seed[2], double t);
/* Replica id replaces replica `replaces` (-1: a tie-breaker; old_seed then
 * NULL), started at t with input_bytes of input to replay. */
void report_replacement(struct report *rp, unsigned id, unsigned slot, int replaces, const uint64_t old_seed[2],
			const uint64_t seed[2], const char *why, double t, size_t input_bytes);
void report_caught_up(struct report *rp, unsigned id, double t, double seconds, size_t input_bytes, size_t out,
		      size_t err);
void report_respawns(struct report *rp, unsigned limit, unsigned rate);
void report_respawn_refused(struct report *rp, const char *why);
void report_log_memory(struct report *rp, uint64_t entries, size_t bytes, bool complete, uint64_t start,
		       uint64_t skipped_sleeps);
/* left_in_ties: voters that left the vote in a tie to make room for the
 * next tie-breaker (replace.c). */
void report_end(struct report *rp, unsigned live, unsigned respawns, unsigned given_back, unsigned left_in_ties);
/* Votes with fewer voters than a majority of k (sup.h's states): the
 * --min-voters in force at the end, the degraded and refusing periods and
 * their seconds, and the votes and bytes committed degraded. */
void report_quorum(struct report *rp, unsigned min_voters, unsigned degraded_periods, double degraded_seconds,
		   unsigned refusing_periods, double refusing_seconds, uint64_t commits, uint64_t bytes);
void report_input(struct report *rp, size_t n);
void report_bytes(struct report *rp, unsigned i, const char *stream, size_t n);
void report_committed(struct report *rp, const char *stream, size_t n);
/* A block of a replica's lines on stream taken in another order (outorder.c). */
void report_reordered(struct report *rp, const char *stream);
void report_divergence(struct report *rp, const char *stream, size_t offset, const unsigned *agree, unsigned nagree,
		       unsigned replica,
		       const char *majority_hex, const char *replica_hex, const char *kind, double t);
/* Replica r's reply on a proxied connection (net.h; stream "connection"),
 * or its bytes on an outbound one (outbound.h; "outbound"), differed from
 * the agreed ones at offset (kind: "differs", "ends early", ...). */
void report_conn_divergence(struct report *rp, const char *stream, unsigned long long conn, const char *address,
			    size_t offset, unsigned r, const char *kind, double t);
void report_status_divergence(struct report *rp, unsigned replica, int status, int majority);
void report_kill(struct report *rp, unsigned replica, const char *why, double t);
/* As replica was killed, one of its processes was found stopped (by a
 * signal from outside): process "init", "program" or "descendant", and
 * its pid. */
void report_found_stopped(struct report *rp, unsigned replica, const char *process, pid_t pid);
/* A replacement not needed any more: the run ended before it caught up. */
void report_stopped(struct report *rp, unsigned replica, const char *why, double t, size_t input_bytes);
/* The input bytes written to a replica so far (its last word wins). */
void report_input_fed(struct report *rp, unsigned replica, size_t n);
void report_exit(struct report *rp, unsigned replica, int status, int signal, double t);
/* Why the signal that ended a replica was sent, where diehard can tell
 * (filter.h: SIGSYS). */
void report_signal_cause(struct report *rp, unsigned replica, const char *cause);
void report_no_quorum(struct report *rp, const char *stream, size_t offset, const char *why, const char *sides);
void report_input_log(struct report *rp, size_t bytes, size_t retained_from, bool complete);
void report_virtualize(struct report *rp, bool on);

/* With the fast clock path: how its leaders read the real clock (through
 * the vDSO, or by system call when why_syscall says why) and how many of
 * their vDSO reads made a system call. */
void report_clock_leaders(struct report *rp, const char *why_syscall, uint64_t vdso_fallbacks);
/* The replicas' namespaces ("user, pid, mount, ipc", or "none" and why). */
void report_sandbox(struct report *rp, const char *namespaces, const char *why_none);
/* One namespace the kernel refused ("user", "network") and why, while the
 * others were made: sandbox.refused.NS. */
void report_sandbox_refused(struct report *rp, const char *ns, const char *why);
void report_call_divergence(struct report *rp, unsigned replica, const char *call, uint64_t index,
			    const char *expected, const char *got, double t);
void report_calls(struct report *rp, unsigned replica, const char *call, uint64_t count);
void report_unvirtualized(struct report *rp, unsigned replica, uint64_t count);
/* Program images the replica started with AT_RANDOM agreed and the vDSO
 * patched, and how many of them diehard stopped to do that (a static
 * program, one without libdiehard), and of those how many it gave the
 * clock blob (graft.h): "images", "images_stopped", "images_grafted". */
void report_images(struct report *rp, unsigned replica, uint64_t images, uint64_t stopped, uint64_t grafted);
/* Opens the replica made that diehard looked at and left to the kernel
 * (not of a random device): each cost a round trip. */
void report_opens_checked(struct report *rp, unsigned replica, uint64_t count);
/* Of its clock reads, those the fast path served in the replica (no
 * round trip to diehard: fastclock.h). */
void report_clock_reads_in_replica(struct report *rp, unsigned replica, uint64_t count);
void report_set_exit(struct report *rp, int code, const char *reason);
/* The run's recording (--record, or --ci's on failure): written to path,
 * or not, and why (one line). */
void report_recording(struct report *rp, const char *path, bool written, const char *why);
/* Puts a JSON value (jansson's, owned by the report from now on) under key
 * at the top: the --ci findings (ci.c). */
struct json_t;
void report_attach(struct report *rp, const char *key, struct json_t *value);
/* Counts for the control socket's status (control.h): divergences of
 * output (status false) or of exit statuses (true); calls that differed
 * (those past the report's cap included). */
unsigned report_divergence_count(const struct report *rp, bool status);
uint64_t report_call_divergence_count(const struct report *rp);
/* Writes the report to the file main.c opened, if one was asked for
 * (once), and closes it; warns on failure. */
void report_write(struct report *rp);

#endif
