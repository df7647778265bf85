/* ctl.c — see ctl.h. Blocking and simple: one connection, one request,
 * frames read until the server closes. Whatever comes from the socket is
 * checked (wire.h) before it is shown; text from the run is escaped
 * (utf8.h), as the report does. */
#include "ctl.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "control.h"
#include "exitcode.h"
#include "utf8.h"
#include "wire.h"

/* How long a status or the history may take: a hung diehard fails the
 * command instead of hanging it. A follower waits as long as the run. */
#define REPLY_SECONDS 10

static const char *cmd = "diehard";

static const char usage_status[] =
	"usage: diehard status [--control PATH] [--json]\n"
	"Shows a running diehard's replicas (id, pid, seed, uptime, bytes written, state)\n"
	"and the run (replicas in the vote, replacements, divergences, committed bytes).\n"
	"\n"
	"  --control PATH  its control socket (default: $RUNTIME_DIRECTORY/control)\n"
	"  --json          one JSON object instead of the table\n"
	"  -h, --help      this text\n"
	"Exit status: 0; 125 when the socket cannot be reached or answers an error.\n";

static const char usage_events[] =
	"usage: diehard events [--control PATH] [--follow] [--json]\n"
	"Prints a running diehard's recent events (what -v prints: spawns, divergences,\n"
	"kills, exits, replacements, and its warnings), one a line with its time.\n"
	"\n"
	"  --control PATH  its control socket (default: $RUNTIME_DIRECTORY/control)\n"
	"  -f, --follow    then print events as they happen, until diehard exits\n"
	"  --json          one JSON object a line\n"
	"  -h, --help      this text\n"
	"Exit status: 0; 125 when the socket cannot be reached or answers an error.\n";

static _Noreturn void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static _Noreturn void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "diehard %s: ", cmd);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(EXIT_INTERNAL);
}

static char *text(const uint8_t *p, size_t n)
{
	size_t len;
	char *s = utf8_escape((const char *)p, n, &len);
	if (s == NULL)
		die("out of memory");
	/* Shown on a terminal: no control characters from the run. */
	for (char *c = s; c < s + len; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
	return s;
}

static int connect_to(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof a.sun_path)
		die("the control socket path %s is too long", path);
	memcpy(a.sun_path, path, strlen(path) + 1);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		die("socket: %s", strerror(errno));
	if (connect(s, (struct sockaddr *)&a, sizeof a) != 0)
		die("cannot connect to %s: %s", path, strerror(errno));
	return s;
}

static void set_timeout(int s, int opt, int seconds)
{
	struct timeval tv = { seconds, 0 };
	if (setsockopt(s, SOL_SOCKET, opt, &tv, sizeof tv) != 0)
		die("setsockopt: %s", strerror(errno));
}

static void send_request(int s, const Diehard__ControlRequest *req)
{
	size_t n;
	uint8_t *buf = wire_pack(&req->base, &n);
	if (buf == NULL)
		die("out of memory");
	for (size_t off = 0; off < n;) {
		ssize_t w = send(s, buf + off, n - off, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		/* A refused connection may be closed before our request is
		 * sent; its error is still there to read. */
		if (w < 0 && (errno == EPIPE || errno == ECONNRESET))
			break;
		if (w <= 0)
			die("cannot send the request: %s", w < 0 ? strerror(errno) : "nothing written");
		off += (size_t)w;
	}
	free(buf);
}

/* Reads exactly n bytes; returns how many came before the end. */
static size_t read_full(int s, uint8_t *p, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = read(s, p + got, n - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			die("no answer from diehard within %d s", REPLY_SECONDS);
		if (r < 0 && errno == ECONNRESET && got == 0)
			return 0;
		if (r < 0)
			die("cannot read from the control socket: %s", strerror(errno));
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return got;
}

/* The next response; NULL at a clean end (the server closed between
 * frames). Errors from the server and garbage end the command. */
static Diehard__ControlResponse *next_response(int s)
{
	static uint8_t buf[WIRE_HEADER + WIRE_MAX];
	size_t got = read_full(s, buf, WIRE_HEADER), len = 0;
	if (got == 0)
		return NULL;
	if (got < WIRE_HEADER)
		die("the connection ended inside a message");
	/* The header alone: a frame (empty message), more to read, or too big. */
	if (wire_frame(buf, WIRE_HEADER, &len) == WIRE_TOO_BIG)
		die("the server sent a message longer than %zu bytes", WIRE_MAX);
	len = (size_t)buf[0] << 24 | (size_t)buf[1] << 16 | (size_t)buf[2] << 8 | buf[3];
	if (read_full(s, buf + WIRE_HEADER, len) < len)
		die("the connection ended inside a message");
	char why[160];
	Diehard__ControlResponse *m = wire_decode_response(buf + WIRE_HEADER, len, why, sizeof why);
	if (m == NULL)
		die("%s", why);
	if (m->what_case == DIEHARD__CONTROL_RESPONSE__WHAT_ERROR)
		die("diehard refused: %s", m->error->message);
	return m;
}

static const char *state_name(Diehard__ReplicaStatus__State s)
{
	switch (s) {
	case DIEHARD__REPLICA_STATUS__STATE__RUNNING:
		return "running";
	case DIEHARD__REPLICA_STATUS__STATE__JOINING:
		return "joining";
	case DIEHARD__REPLICA_STATUS__STATE__EXITED:
		return "exited";
	case DIEHARD__REPLICA_STATUS__STATE__KILLED:
		return "killed";
	default:
		return "unknown";
	}
}

static json_t *must(json_t *j)
{
	if (j == NULL)
		die("out of memory");
	return j;
}

static json_t *jtext(const uint8_t *p, size_t n)
{
	size_t len;
	char *s = utf8_escape((const char *)p, n, &len);
	if (s == NULL)
		die("out of memory");
	json_t *j = must(json_stringn(s, len));
	free(s);
	return j;
}

static void print_json(json_t *j)
{
	char *s = json_dumps(must(j), JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (s == NULL)
		die("out of memory");
	puts(s);
	free(s);
	json_decref(j);
}

static const char *vote_name(Diehard__RunStatus__Vote v)
{
	return v == DIEHARD__RUN_STATUS__VOTE__DEGRADED ? "degraded"
	       : v == DIEHARD__RUN_STATUS__VOTE__REFUSING ? "refusing"
							    : "voting";
}

static void status_json(const Diehard__RunStatus *st)
{
	json_t *o = must(json_object()), *reps = must(json_array()), *cmdv = must(json_array());
	for (size_t i = 0; i < st->n_command; i++)
		json_array_append_new(cmdv, jtext(st->command[i].data, st->command[i].len));
	for (size_t i = 0; i < st->n_replicas; i++) {
		const Diehard__ReplicaStatus *r = st->replicas[i];
		json_t *j = must(json_pack("{s:i,s:i,s:i,s:s,s:f,s:{s:I,s:I},s:s}", "id", (int)r->id, "slot", (int)r->slot,
					   "pid", (int)r->pid, "seed", r->seed, "uptime", r->uptime, "bytes", "stdout",
					   (json_int_t)r->stdout_bytes, "stderr", (json_int_t)r->stderr_bytes, "state",
					   state_name(r->state)));
		if (r->has_init_pid)
			json_object_set_new(j, "init_pid", must(json_integer(r->init_pid)));
		if (r->has_exit_status)
			json_object_set_new(j, "exit_status", must(json_integer(r->exit_status)));
		if (r->has_why)
			json_object_set_new(j, "why", jtext(r->why.data, r->why.len));
		json_array_append_new(reps, j);
	}
	json_t *div = must(json_pack("{s:i,s:i}", "output", (int)st->output_divergences, "status",
				     (int)st->status_divergences));
	if (st->has_call_divergences)
		json_object_set_new(div, "calls", must(json_integer((json_int_t)st->call_divergences)));
	json_object_set_new(o, "pid", must(json_integer(st->pid)));
	json_object_set_new(o, "k", must(json_integer(st->k)));
	json_object_set_new(o, "live", must(json_integer(st->live)));
	json_object_set_new(o, "replacements", must(json_integer(st->replacements)));
	if (st->has_replacements_given_back)
		json_object_set_new(o, "replacements_given_back", must(json_integer(st->replacements_given_back)));
	if (st->has_vote)
		json_object_set_new(o, "vote", must(json_string(vote_name(st->vote))));
	if (st->has_min_voters)
		json_object_set_new(o, "min_voters", must(json_integer(st->min_voters)));
	if (st->has_joining)
		json_object_set_new(o, "joining", must(json_integer(st->joining)));
	if (st->has_replace_refused)
		json_object_set_new(o, "replace_refused", jtext(st->replace_refused.data, st->replace_refused.len));
	if (st->has_degraded_seconds)
		json_object_set_new(o, "degraded", must(json_pack("{s:f,s:I}", "seconds", st->degraded_seconds, "bytes",
								  (json_int_t)st->degraded_bytes)));
	json_object_set_new(o, "divergences", div);
	json_object_set_new(o, "committed", must(json_pack("{s:I,s:I}", "stdout", (json_int_t)st->committed_stdout,
							   "stderr", (json_int_t)st->committed_stderr)));
	json_object_set_new(o, "uptime", must(json_real(st->uptime)));
	json_object_set_new(o, "command", cmdv);
	json_object_set_new(o, "replicas", reps);
	print_json(o);
}

static void status_text(const Diehard__RunStatus *st)
{
	printf("%-7s %-8s %-32s %9s %12s %12s  %s\n", "replica", "pid", "seed", "uptime", "stdout", "stderr", "state");
	for (size_t i = 0; i < st->n_replicas; i++) {
		const Diehard__ReplicaStatus *r = st->replicas[i];
		char state[320];
		if (r->state == DIEHARD__REPLICA_STATUS__STATE__KILLED) {
			char *why = r->has_why ? text(r->why.data, r->why.len) : NULL;
			snprintf(state, sizeof state, "killed: %s", why ? why : "?");
			free(why);
		} else if (r->state == DIEHARD__REPLICA_STATUS__STATE__EXITED && r->has_exit_status) {
			snprintf(state, sizeof state, "exited with status %d", (int)r->exit_status);
		} else {
			snprintf(state, sizeof state, "%s", state_name(r->state));
		}
		char uptime[32];
		snprintf(uptime, sizeof uptime, "%.1fs", r->uptime);
		printf("%-7u %-8d %-32s %9s %12" PRIu64 " %12" PRIu64 "  %s\n", (unsigned)r->id, (int)r->pid,
		       r->seed, uptime, r->stdout_bytes, r->stderr_bytes, state);
	}
	printf("replicas: k %u, %u in the vote, ", (unsigned)st->k, (unsigned)st->live);
	if (st->has_joining && st->joining > 0)
		printf("%u replaying, ", (unsigned)st->joining);
	printf("%u replacements started", (unsigned)st->replacements);
	if (st->has_replacements_given_back && st->replacements_given_back > 0)
		printf(" (%u gave their respawn back: they lasted, or a SIGKILL from outside ended them)",
		       (unsigned)st->replacements_given_back);
	printf("\n");
	if (st->has_vote) {
		printf("vote: %s", vote_name(st->vote));
		if (st->vote == DIEHARD__RUN_STATUS__VOTE__DEGRADED)
			printf(" (fewer than a majority of k vote: what they agree on is committed)");
		else if (st->vote == DIEHARD__RUN_STATUS__VOTE__REFUSING)
			printf(" (fewer than --min-voters vote: nothing is committed)");
		printf(", --min-voters %u", (unsigned)st->min_voters);
		if (st->has_degraded_seconds && (st->degraded_seconds > 0 || st->degraded_bytes > 0))
			printf("; degraded %.1f s so far, %" PRIu64 " bytes committed degraded", st->degraded_seconds,
			       st->degraded_bytes);
		putchar('\n');
	}
	if (st->has_replace_refused) {
		char *why = text(st->replace_refused.data, st->replace_refused.len);
		printf("replacement: refused: %s\n", why);
		free(why);
	}
	printf("divergences: output %u, exit status %u", (unsigned)st->output_divergences,
	       (unsigned)st->status_divergences);
	if (st->has_call_divergences)
		printf(", calls %" PRIu64, st->call_divergences);
	printf("\ncommitted: stdout %" PRIu64 " bytes, stderr %" PRIu64 " bytes\n", st->committed_stdout,
	       st->committed_stderr);
	printf("uptime: %.1f s (diehard pid %d)\ncommand:", st->uptime, (int)st->pid);
	for (size_t i = 0; i < st->n_command; i++) {
		char *a = text(st->command[i].data, st->command[i].len);
		printf(" %s", a);
		free(a);
	}
	putchar('\n');
}

static void event_print(const Diehard__Event *e, bool json)
{
	const char *kind = e->kind == DIEHARD__EVENT__KIND__WARNING ? "warning" : "event";
	if (json) {
		print_json(must(json_pack("{s:I,s:f,s:s,s:o}", "seq", (json_int_t)e->seq, "time", e->time, "kind", kind,
					  "text", jtext(e->text.data, e->text.len))));
	} else {
		time_t sec = (time_t)e->time;
		struct tm tm;
		char when[32] = "?";
		if (gmtime_r(&sec, &tm) != NULL)
			strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
		int ms = (int)((e->time - (double)sec) * 1000);
		char *t = text(e->text.data, e->text.len);
		printf("%s.%03dZ %s%s\n", when, ms < 0 ? 0 : ms > 999 ? 999 : ms,
		       e->kind == DIEHARD__EVENT__KIND__WARNING ? "warning: " : "", t);
		free(t);
	}
	/* A follower's reader sees each event as it happens. */
	if (fflush(stdout) != 0)
		die("cannot write: %s", strerror(errno));
}

int ctl_main(int argc, char **argv)
{
	bool events = strcmp(argv[0], "events") == 0;
	cmd = events ? "events" : "status";
	static const struct option longopts[] = {
		{ "control", required_argument, NULL, 'c' }, { "json", no_argument, NULL, 'j' },
		{ "follow", no_argument, NULL, 'f' },         { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *path = NULL;
	bool json = false, follow = false;
	int c;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, events ? ":fh" : ":h", longopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			path = optarg;
			break;
		case 'j':
			json = true;
			break;
		case 'f':
			if (!events)
				die("unknown option '--follow' (try diehard status --help)");
			follow = true;
			break;
		case 'h':
			fputs(events ? usage_events : usage_status, stdout);
			return 0;
		case ':':
			die("option %s needs a value (try diehard %s --help)", argv[optind - 1], cmd);
		default:
			die("unknown option '%s' (try diehard %s --help)", argv[optind - 1], cmd);
		}
	}
	if (optind < argc)
		die("unexpected argument '%s' (try diehard %s --help)", argv[optind], cmd);
	char *dflt = NULL;
	if (path == NULL)
		path = dflt = control_default_path();
	if (path == NULL)
		die("no control socket: give --control PATH (or set RUNTIME_DIRECTORY)");
	int s = connect_to(path);
	free(dflt);
	set_timeout(s, SO_SNDTIMEO, REPLY_SECONDS);
	if (!follow)
		set_timeout(s, SO_RCVTIMEO, REPLY_SECONDS);

	Diehard__ControlRequest req = DIEHARD__CONTROL_REQUEST__INIT;
	Diehard__StatusRequest sr = DIEHARD__STATUS_REQUEST__INIT;
	Diehard__EventsRequest er = DIEHARD__EVENTS_REQUEST__INIT;
	req.version = WIRE_VERSION;
	if (events) {
		er.has_follow = true;
		er.follow = follow;
		req.what_case = DIEHARD__CONTROL_REQUEST__WHAT_EVENTS;
		req.events = &er;
	} else {
		req.what_case = DIEHARD__CONTROL_REQUEST__WHAT_STATUS;
		req.status = &sr;
	}
	send_request(s, &req);

	Diehard__ControlResponse *m;
	bool got_status = false;
	while ((m = next_response(s)) != NULL) {
		if (!events && m->what_case == DIEHARD__CONTROL_RESPONSE__WHAT_STATUS && !got_status) {
			got_status = true;
			if (json)
				status_json(m->status);
			else
				status_text(m->status);
		} else if (events && m->what_case == DIEHARD__CONTROL_RESPONSE__WHAT_EVENT) {
			event_print(m->event, json);
		} else {
			die("the server sent an unexpected response");
		}
		diehard__control_response__free_unpacked(m, NULL);
	}
	close(s);
	if (!events && !got_status)
		die("the connection ended without a status");
	if (fflush(stdout) != 0)
		die("cannot write: %s", strerror(errno));
	return 0;
}
