/* report.c — see report.h. Builds the JSON document as events happen, so a
 * run that stops early (no quorum, closed output) still reports everything
 * up to that point. */
#include "report.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "exitcode.h"
#include "log.h"
#include "supervisor.h"
#include "utf8.h"

struct report {
	const char *path;
	int fd; /* opened before the run (main.c); -1: no report */
	json_t *root;
	json_t *replicas;
	json_t *divergences;
	json_t *committed;
	json_t *call_divergences;
	json_t *replacements;
	struct timespec start;
	bool written;
};

static json_t *must(json_t *j)
{
	if (j == NULL)
		fatal(EXIT_INTERNAL, "out of memory building the report");
	return j;
}

static void set(json_t *obj, const char *key, json_t *value)
{
	if (json_object_set_new(obj, key, must(value)) != 0)
		fatal(EXIT_INTERNAL, "out of memory building the report");
}

/* A string for the report. Strings from outside (argv, paths, reasons that
 * quote them) are bytes: what is not UTF-8 is written as \xNN (utf8.h),
 * so no byte in a file name can refuse a run. Ours go through it too. */
static json_t *text(const char *s)
{
	size_t n;
	char *esc = utf8_escape(s, strlen(s), &n);
	if (esc == NULL)
		fatal(EXIT_INTERNAL, "out of memory building the report");
	json_t *j = json_stringn(esc, n);
	free(esc);
	return must(j);
}

/* Puts value under key and returns it, borrowed: the root owns it. */
static json_t *attach(json_t *obj, const char *key, json_t *value)
{
	set(obj, key, value);
	return value;
}

static void add_to(json_t *obj, const char *key, size_t n)
{
	json_t *v = json_object_get(obj, key);
	set(obj, key, json_integer((json_int_t)((v ? (size_t)json_integer_value(v) : 0) + n)));
}

struct report *report_new(const struct options *o)
{
	struct report *rp = calloc(1, sizeof *rp);
	if (rp == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	rp->path = o->report_path;
	rp->fd = o->report_fd;
	clock_gettime(CLOCK_REALTIME, &rp->start);
	rp->root = must(json_object());
	json_t *cmd = must(json_array());
	for (char **a = o->argv; *a != NULL; a++)
		json_array_append_new(cmd, text(*a));
	set(rp->root, "version", json_integer(1));
	set(rp->root, "command", cmd);
	set(rp->root, "k", json_integer(o->k));
	set(rp->root, "allocator", text(o->allocator));
	set(rp->root, "start", json_real((double)rp->start.tv_sec + rp->start.tv_nsec / 1e9));
	rp->replicas = attach(rp->root, "replicas", json_array());
	rp->divergences = attach(rp->root, "divergences", json_array());
	rp->call_divergences = attach(rp->root, "call_divergences", json_array());
	rp->replacements = attach(rp->root, "replacements", json_array());
	rp->committed = attach(rp->root, "committed", json_pack("{s:i,s:i}", "stdout", 0, "stderr", 0));
	set(rp->root, "input_bytes", json_integer(0));
	return rp;
}

static json_t *replica(struct report *rp, unsigned i)
{
	return json_array_get(rp->replicas, i);
}

static void seed_hex(char hex[33], const uint64_t seed[2])
{
	snprintf(hex, 33, "%016" PRIx64 "%016" PRIx64, seed[1], seed[0]);
}

void report_replica(struct report *rp, unsigned id, unsigned slot, pid_t pid, const uint64_t seed[2], double t)
{
	char hex[33];
	seed_hex(hex, seed);
	/* Ids are handed out in order, so id is the array position. */
	if (json_array_size(rp->replicas) != id)
		fatal(EXIT_INTERNAL, "report: replica %u out of order", id);
	json_array_append_new(rp->replicas,
			      must(json_pack("{s:i,s:i,s:i,s:o,s:f,s:{s:i,s:i}}", "index", id, "slot", slot, "pid",
					     (int)pid, "seed", text(hex), "spawned_at", t, "bytes", "stdout", 0, "stderr", 0)));
}

void report_replacement(struct report *rp, unsigned id, unsigned slot, int replaces, const uint64_t old_seed[2],
			const uint64_t seed[2], const char *why, double t, size_t input_bytes)
{
	char hex[33], old[33] = "";
	seed_hex(hex, seed);
	if (old_seed != NULL)
		seed_hex(old, old_seed);
	json_t *e = must(json_pack("{s:i,s:i,s:o,s:o,s:f,s:I,s:b}", "replica", id, "slot", slot, "seed", text(hex),
				   "why", text(why), "time", t, "input_bytes", (json_int_t)input_bytes, "caught_up", 0));
	if (replaces >= 0) {
		set(e, "replaces", json_integer(replaces));
		set(e, "old_seed", text(old));
		set(replica(rp, id), "replaces", json_integer(replaces));
	}
	json_array_append_new(rp->replacements, e);
}

void report_caught_up(struct report *rp, unsigned id, double t, double seconds, size_t input_bytes, size_t out,
		      size_t err)
{
	json_t *rep = replica(rp, id);
	if (rep != NULL)
		set(rep, "caught_up_at", json_real(t));
	size_t i;
	json_t *e;
	json_array_foreach(rp->replacements, i, e) {
		if (json_integer_value(json_object_get(e, "replica")) != (json_int_t)id)
			continue;
		set(e, "caught_up", json_true());
		set(e, "caught_up_at", json_real(t));
		set(e, "catch_up_seconds", json_real(seconds));
		set(e, "input_bytes_replayed", json_integer((json_int_t)input_bytes));
		set(e, "output_bytes_checked", json_pack("{s:I,s:I}", "stdout", (json_int_t)out, "stderr", (json_int_t)err));
	}
}

void report_respawns(struct report *rp, unsigned limit, unsigned rate)
{
	set(rp->root, "respawns", json_pack("{s:i,s:i,s:i,s:i}", "limit", limit, "rate_per_minute", rate, "used", 0,
					    "left_in_ties", 0));
}

void report_respawn_refused(struct report *rp, const char *why)
{
	json_t *r = json_object_get(rp->root, "respawns");
	if (r != NULL && json_object_get(r, "refused") == NULL)
		set(r, "refused", text(why));
}

void report_log_memory(struct report *rp, uint64_t entries, size_t bytes, bool complete, uint64_t start,
		       uint64_t skipped_sleeps)
{
	set(rp->root, "call_log", json_pack("{s:I,s:I,s:b,s:I,s:I}", "entries", (json_int_t)entries, "bytes",
					    (json_int_t)bytes, "complete", complete, "start", (json_int_t)start,
					    "skipped_sleeps", (json_int_t)skipped_sleeps));
}

void report_end(struct report *rp, unsigned live, unsigned respawns, unsigned given_back, unsigned left_in_ties)
{
	set(rp->root, "live_at_end", json_integer(live));
	json_t *r = json_object_get(rp->root, "respawns");
	if (r != NULL) {
		set(r, "used", json_integer(respawns));
		set(r, "given_back", json_integer(given_back));
		set(r, "left_in_ties", json_integer(left_in_ties));
	}
}

void report_quorum(struct report *rp, unsigned min_voters, unsigned degraded_periods, double degraded_seconds,
		   unsigned refusing_periods, double refusing_seconds, uint64_t commits, uint64_t bytes)
{
	set(rp->root, "quorum", json_pack("{s:i,s:{s:i,s:f,s:I,s:I},s:{s:i,s:f}}", "min_voters", min_voters, "degraded",
					  "periods", degraded_periods, "seconds", degraded_seconds, "commits",
					  (json_int_t)commits, "bytes", (json_int_t)bytes, "refusing", "periods",
					  refusing_periods, "seconds", refusing_seconds));
}

void report_input(struct report *rp, size_t n)
{
	add_to(rp->root, "input_bytes", n);
}

void report_bytes(struct report *rp, unsigned i, const char *stream, size_t n)
{
	add_to(json_object_get(replica(rp, i), "bytes"), stream, n);
}

void report_committed(struct report *rp, const char *stream, size_t n)
{
	add_to(rp->committed, stream, n);
}

void report_reordered(struct report *rp, const char *stream)
{
	json_t *o = json_object_get(rp->root, "reordered");
	if (o == NULL) {
		o = must(json_object());
		set(rp->root, "reordered", o);
	}
	add_to(o, stream, 1);
}

void report_divergence(struct report *rp, const char *stream, size_t offset, const unsigned *agree, unsigned nagree,
		       unsigned r, const char *majority_hex, const char *replica_hex, const char *kind, double t)
{
	json_t *ids = must(json_array());
	for (unsigned i = 0; i < nagree; i++)
		json_array_append_new(ids, must(json_integer(agree[i])));
	json_array_append_new(rp->divergences,
			      must(json_pack("{s:o,s:I,s:o,s:i,s:o,s:o,s:o,s:f}", "stream", text(stream), "offset",
					     (json_int_t)offset, "agreed", ids, "replica", r, "majority_hex",
					     text(majority_hex), "replica_hex", text(replica_hex), "kind", text(kind),
					     "time", t)));
}

void report_conn_divergence(struct report *rp, const char *stream, unsigned long long conn, const char *address,
			    size_t offset, unsigned r, const char *kind, double t)
{
	json_array_append_new(rp->divergences,
			      must(json_pack("{s:s,s:I,s:o,s:I,s:i,s:o,s:f}", "stream", stream, "connection",
					     (json_int_t)conn, "address", text(address), "offset", (json_int_t)offset,
					     "replica", r, "kind", text(kind), "time", t)));
}

void report_status_divergence(struct report *rp, unsigned r, int status, int majority)
{
	json_array_append_new(rp->divergences,
			      must(json_pack("{s:s,s:i,s:i,s:i}", "stream", "status", "replica", r, "status", status,
					     "majority_status", majority)));
}

void report_attach(struct report *rp, const char *key, json_t *value)
{
	set(rp->root, key, value);
}

void report_kill(struct report *rp, unsigned r, const char *why, double t)
{
	json_t *rep = replica(rp, r);
	if (rep == NULL)
		return;
	set(rep, "killed", text(why));
	set(rep, "killed_at", json_real(t));
}

void report_found_stopped(struct report *rp, unsigned r, const char *process, pid_t pid)
{
	json_t *rep = replica(rp, r);
	if (rep == NULL)
		return;
	set(rep, "found_stopped", json_pack("{s:s,s:i}", "process", process, "pid", (int)pid));
}

void report_stopped(struct report *rp, unsigned r, const char *why, double t, size_t input_bytes)
{
	json_t *rep = replica(rp, r);
	if (rep == NULL)
		return;
	set(rep, "stopped", text(why));
	set(rep, "stopped_at", json_real(t));
	size_t i;
	json_t *e;
	json_array_foreach(rp->replacements, i, e)
		if (json_integer_value(json_object_get(e, "replica")) == (json_int_t)r)
			set(e, "input_bytes_replayed", json_integer((json_int_t)input_bytes));
}

/* A count of replica r's, under key. */
static void set_count(struct report *rp, unsigned r, const char *key, uint64_t n)
{
	json_t *rep = replica(rp, r);
	if (rep != NULL)
		set(rep, key, json_integer((json_int_t)n));
}

void report_input_fed(struct report *rp, unsigned r, size_t n)
{
	set_count(rp, r, "input_bytes", n);
}

void report_exit(struct report *rp, unsigned r, int status, int signal, double t)
{
	json_t *rep = replica(rp, r);
	if (rep == NULL)
		return;
	set(rep, "status", json_integer(status));
	if (signal)
		set(rep, "signal", json_integer(signal));
	set(rep, "end", json_real(t));
}

void report_signal_cause(struct report *rp, unsigned r, const char *cause)
{
	json_t *rep = replica(rp, r);
	if (rep != NULL)
		set(rep, "signal_cause", text(cause));
}

void report_no_quorum(struct report *rp, const char *stream, size_t offset, const char *why, const char *sides)
{
	set(rp->root, "no_quorum",
	    json_pack("{s:o,s:I,s:o,s:o}", "stream", text(stream), "offset", (json_int_t)offset, "why", text(why), "sides",
		      text(sides)));
}

void report_input_log(struct report *rp, size_t bytes, size_t retained_from, bool complete)
{
	set(rp->root, "input_log",
	    json_pack("{s:I,s:I,s:b}", "bytes", (json_int_t)bytes, "retained_from", (json_int_t)retained_from,
		      "complete", complete));
}

void report_clock_leaders(struct report *rp, const char *why_syscall, uint64_t vdso_fallbacks)
{
	json_t *o = must(json_pack("{s:s,s:I}", "read", why_syscall == NULL ? "vdso" : "system call",
				   "vdso_fallbacks", (json_int_t)vdso_fallbacks));
	if (why_syscall != NULL)
		set(o, "why", text(why_syscall));
	set(rp->root, "clock_leaders", o);
}

void report_virtualize(struct report *rp, bool on)
{
	set(rp->root, "virtualize", json_boolean(on));
}

void report_sandbox(struct report *rp, const char *namespaces, const char *why_none)
{
	/* Updated in place: the namespaces refused one by one stay said. */
	json_t *sb = json_object_get(rp->root, "sandbox");
	if (sb == NULL) {
		sb = must(json_object());
		set(rp->root, "sandbox", sb);
	}
	set(sb, "namespaces", json_string(namespaces));
	if (why_none != NULL)
		set(sb, "why_none", json_string(why_none));
	else
		(void)json_object_del(sb, "why_none");
}

void report_sandbox_refused(struct report *rp, const char *ns, const char *why)
{
	json_t *sb = json_object_get(rp->root, "sandbox");
	if (sb == NULL)
		return;
	json_t *refused = json_object_get(sb, "refused");
	if (refused == NULL) {
		refused = must(json_object());
		set(sb, "refused", refused);
	}
	set(refused, ns, json_string(why));
}

/* A replica gone wrong could make millions of odd calls: the first ones
 * say what happened, the rest are counted. */
#define MAX_CALL_DIVERGENCES 1000

void report_call_divergence(struct report *rp, unsigned r, const char *call, uint64_t index, const char *expected,
			    const char *got, double t)
{
	if (json_array_size(rp->call_divergences) >= MAX_CALL_DIVERGENCES) {
		add_to(rp->root, "call_divergences_omitted", 1);
		return;
	}
	json_array_append_new(rp->call_divergences,
			      must(json_pack("{s:i,s:o,s:I,s:o,s:o,s:f}", "replica", r, "call", text(call), "index",
					     (json_int_t)index, "expected", text(expected), "got",
					     text(got), "time", t)));
}

void report_calls(struct report *rp, unsigned r, const char *call, uint64_t count)
{
	json_t *rep = replica(rp, r);
	if (rep == NULL)
		return;
	json_t *calls = json_object_get(rep, "calls");
	if (calls == NULL)
		calls = attach(rep, "calls", json_object());
	set(calls, call, json_integer((json_int_t)count));
}

void report_unvirtualized(struct report *rp, unsigned r, uint64_t count)
{
	set_count(rp, r, "unvirtualized", count);
}

void report_images(struct report *rp, unsigned r, uint64_t images, uint64_t stopped, uint64_t grafted)
{
	set_count(rp, r, "images", images);
	set_count(rp, r, "images_stopped", stopped);
	set_count(rp, r, "images_grafted", grafted);
}

void report_opens_checked(struct report *rp, unsigned r, uint64_t count)
{
	set_count(rp, r, "opens_checked", count);
}

void report_clock_reads_in_replica(struct report *rp, unsigned r, uint64_t count)
{
	set_count(rp, r, "clock_reads_in_replica", count);
}

void report_recording(struct report *rp, const char *path, bool written, const char *why)
{
	json_t *o = json_pack("{s:o,s:b}", "path", text(path), "written", written);
	if (why != NULL)
		set(o, "error", text(why));
	set(rp->root, "recording", o);
}

void report_set_exit(struct report *rp, int code, const char *reason)
{
	set(rp->root, "exit_code", json_integer(code));
	if (reason != NULL)
		set(rp->root, "exit_reason", text(reason));
}

unsigned report_divergence_count(const struct report *rp, bool status)
{
	unsigned n = 0;
	size_t i;
	json_t *e;
	json_array_foreach(rp->divergences, i, e) {
		const char *st = json_string_value(json_object_get(e, "stream"));
		n += (st != NULL && strcmp(st, "status") == 0) == status;
	}
	return n;
}

uint64_t report_call_divergence_count(const struct report *rp)
{
	json_t *omitted = json_object_get(rp->root, "call_divergences_omitted");
	return json_array_size(rp->call_divergences) + (omitted ? (uint64_t)json_integer_value(omitted) : 0);
}

/* Writes n bytes to fd, a piece at a time if it takes several (a pipe,
 * a signal in between); false with errno set on failure. */
static bool write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return false;
		if (w == 0) {
			errno = EIO;
			return false;
		}
		p += w;
		n -= (size_t)w;
	}
	return true;
}

/* The file was opened before the run (main.c: errors come before anything
 * runs, and a FIFO without a reader cannot hang us now); the text is the
 * one json_dump_file would write: two-space indent, sorted keys, no
 * newline at the end. */
void report_write(struct report *rp)
{
	if (rp->fd < 0 || rp->written)
		return;
	rp->written = true;
	struct timespec end;
	clock_gettime(CLOCK_REALTIME, &end);
	set(rp->root, "wall_seconds",
	    json_real((double)(end.tv_sec - rp->start.tv_sec) + (end.tv_nsec - rp->start.tv_nsec) / 1e9));
	char *doc = json_dumps(rp->root, JSON_INDENT(2) | JSON_SORT_KEYS);
	bool ok = doc != NULL && write_all(rp->fd, doc, strlen(doc));
	if (doc == NULL)
		log_warn("cannot write the report to %s: out of memory", rp->path);
	else if (!ok)
		log_warn("cannot write the report to %s: %s", rp->path, strerror(errno));
	free(doc);
	/* A file system may say only now that the data did not fit. */
	if (close(rp->fd) != 0 && ok)
		log_warn("cannot write the report to %s: %s", rp->path, strerror(errno));
	rp->fd = -1;
}
