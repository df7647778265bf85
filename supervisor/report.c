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

#include "exitcode.h"
#include "log.h"
#include "supervisor.h"

struct report {
	const char *path;
	json_t *root;
	json_t *replicas;
	json_t *divergences;
	json_t *committed;
	json_t *call_divergences;
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
	clock_gettime(CLOCK_REALTIME, &rp->start);
	rp->root = must(json_object());
	json_t *cmd = must(json_array());
	for (char **a = o->argv; *a != NULL; a++)
		json_array_append_new(cmd, must(json_string(*a)));
	set(rp->root, "version", json_integer(1));
	set(rp->root, "command", cmd);
	set(rp->root, "k", json_integer(o->k));
	set(rp->root, "allocator", json_string(o->allocator));
	set(rp->root, "start", json_real((double)rp->start.tv_sec + rp->start.tv_nsec / 1e9));
	rp->replicas = attach(rp->root, "replicas", json_array());
	rp->divergences = attach(rp->root, "divergences", json_array());
	rp->call_divergences = attach(rp->root, "call_divergences", json_array());
	rp->committed = attach(rp->root, "committed", json_pack("{s:i,s:i}", "stdout", 0, "stderr", 0));
	set(rp->root, "input_bytes", json_integer(0));
	return rp;
}

static json_t *replica(struct report *rp, unsigned i)
{
	return json_array_get(rp->replicas, i);
}

void report_replica(struct report *rp, unsigned i, pid_t pid, const uint64_t seed[2])
{
	char hex[33];
	snprintf(hex, sizeof hex, "%016" PRIx64 "%016" PRIx64, seed[1], seed[0]);
	json_array_append_new(rp->replicas,
			      must(json_pack("{s:i,s:i,s:s,s:{s:i,s:i}}", "index", i, "pid", (int)pid, "seed", hex,
					     "bytes", "stdout", 0, "stderr", 0)));
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

static json_t *mask_array(uint64_t mask)
{
	json_t *a = must(json_array());
	for (unsigned i = 0; i < 64; i++)
		if (mask & ((uint64_t)1 << i))
			json_array_append_new(a, must(json_integer(i)));
	return a;
}

void report_divergence(struct report *rp, const char *stream, size_t offset, uint64_t agree, unsigned r,
		       const char *majority_hex, const char *replica_hex, const char *kind, double t)
{
	json_array_append_new(rp->divergences,
			      must(json_pack("{s:s,s:I,s:o,s:i,s:s,s:s,s:s,s:f}", "stream", stream, "offset",
					     (json_int_t)offset, "agreed", mask_array(agree), "replica", r, "majority_hex",
					     majority_hex, "replica_hex", replica_hex, "kind", kind, "time", t)));
}

void report_status_divergence(struct report *rp, unsigned r, int status, int majority)
{
	json_array_append_new(rp->divergences,
			      must(json_pack("{s:s,s:i,s:i,s:i}", "stream", "status", "replica", r, "status", status,
					     "majority_status", majority)));
}

void report_kill(struct report *rp, unsigned r, const char *why, double t)
{
	json_t *rep = replica(rp, r);
	if (rep == NULL)
		return;
	set(rep, "killed", json_string(why));
	set(rep, "killed_at", json_real(t));
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

void report_no_quorum(struct report *rp, const char *stream, size_t offset, const char *why, const char *sides)
{
	set(rp->root, "no_quorum",
	    json_pack("{s:s,s:I,s:s,s:s}", "stream", stream, "offset", (json_int_t)offset, "why", why, "sides", sides));
}

void report_input_log(struct report *rp, size_t bytes, size_t retained_from, bool complete)
{
	set(rp->root, "input_log",
	    json_pack("{s:I,s:I,s:b}", "bytes", (json_int_t)bytes, "retained_from", (json_int_t)retained_from,
		      "complete", complete));
}

void report_virtualize(struct report *rp, bool on)
{
	set(rp->root, "virtualize", json_boolean(on));
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
			      must(json_pack("{s:i,s:s,s:I,s:s,s:s,s:f}", "replica", r, "call", call, "index",
					     (json_int_t)index, "expected", expected, "got", got, "time", t)));
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
	json_t *rep = replica(rp, r);
	if (rep != NULL)
		set(rep, "unvirtualized", json_integer((json_int_t)count));
}

void report_set_exit(struct report *rp, int code, const char *reason)
{
	set(rp->root, "exit_code", json_integer(code));
	if (reason != NULL)
		set(rp->root, "exit_reason", json_string(reason));
}

void report_write(struct report *rp)
{
	if (rp->path == NULL || rp->written)
		return;
	rp->written = true;
	struct timespec end;
	clock_gettime(CLOCK_REALTIME, &end);
	set(rp->root, "wall_seconds",
	    json_real((double)(end.tv_sec - rp->start.tv_sec) + (end.tv_nsec - rp->start.tv_nsec) / 1e9));
	if (json_dump_file(rp->root, rp->path, JSON_INDENT(2) | JSON_SORT_KEYS) != 0)
		log_warn("cannot write the report to %s: %s", rp->path, strerror(errno));
}
