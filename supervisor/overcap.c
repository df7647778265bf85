/* overcap.c — the replicas' caps on tasks and memory in a run (the
 * mechanism is caps.h's: cgroups or rlimits).
 *
 * Each replica starts under its caps (overcap_prepare, spawn.c enters
 * them). A replica over a cap, as its cgroup's counters say (a fork
 * refused by pids.max, the memory controller's OOM kill), is killed like a
 * crashed replica: out of the vote and replaced (replica_kill, replace.c),
 * the report and -v saying why. The counters are read on the supervisor's
 * tick and when the replica is reaped, so a replica that went over the cap
 * and then ended on its own is judged the same as one still running.
 *
 * A replica that goes over is most likely the one a heap bug sent astray;
 * its replacement, on a fresh heap, most likely is not. When as many
 * replicas as make a quorum of k went over the same cap, the command itself
 * needs more than the cap: the run ends at once with one line, as the
 * kernel's OOM killer would end it, exit 128 + SIGKILL (137), rather than
 * spending every --respawns on replicas that all do the same.
 *
 * Defaults: 4096 tasks (processes and threads, the init included), and
 * a (k + 1)-th of the memory the host gives diehard (caps_memory_budget):
 * k replicas then leave a share for diehard and the rest of the machine.
 * Tie-breakers may run up to 2k replicas at once for a while. */
#include <errno.h>
#include <jansson.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "caps.h"
#include "exitcode.h"
#include "log.h"
#include "sup.h"

#define DEFAULT_TASKS 4096

static const char *const kind_name[CAPS_KINDS] = { "task", "memory" };
static const char *const option[CAPS_KINDS] = { "--max-tasks", "--max-memory" };

/* A cap as people read it: "4096 tasks", "64M of memory". */
static void cap_text(const struct sup *S, int k, char *buf, size_t size)
{
	uint64_t v = caps_limit(S->caps, (enum caps_kind)k);
	if (k == CAPS_TASKS) {
		snprintf(buf, size, "%llu tasks", (unsigned long long)v);
		return;
	}
	char sz[32];
	caps_size_text(sz, sizeof sz, v);
	snprintf(buf, size, "%s of memory", sz);
}

static const char *mechanism(enum caps_by by)
{
	switch (by) {
	case CAPS_BY_CGROUP2:
		return "cgroup v2";
	case CAPS_BY_CGROUP1:
		return "cgroup v1";
	case CAPS_BY_RLIMIT:
		return "rlimit";
	default:
		return "none";
	}
}

/* The report's "caps" (docs/REPORT.md), whole again each time. */
static void report_caps(struct sup *S)
{
	json_t *caps = json_object();
	for (int k = 0; caps != NULL && k < CAPS_KINDS; k++) {
		uint64_t v = caps_limit(S->caps, (enum caps_kind)k);
		json_t *one = json_pack("{s:o, s:s, s:s, s:I}", "limit", v != 0 ? json_integer((json_int_t)v) : json_null(),
					"mechanism", v != 0 ? mechanism(caps_by(S->caps, (enum caps_kind)k)) : "off",
					"how", caps_how(S->caps, (enum caps_kind)k), "killed", (json_int_t)S->over_cap[k]);
		if (one == NULL || json_object_set_new(caps, k == CAPS_TASKS ? "tasks" : "memory", one) != 0) {
			json_decref(caps);
			caps = NULL;
		}
	}
	if (caps == NULL)
		fatal(EXIT_INTERNAL, "out of memory building the report");
	report_attach(S->report, "caps", caps);
}

/* The one line saying how each cap is held: -v, and always when a cap
 * asked for on the command line cannot be held at all. */
static void say(struct sup *S, bool changed)
{
	char part[CAPS_KINDS][256];
	bool lost = false;
	for (int k = 0; k < CAPS_KINDS; k++) {
		enum caps_by by = caps_by(S->caps, (enum caps_kind)k);
		char cap[64];
		cap_text(S, k, cap, sizeof cap);
		if (caps_limit(S->caps, (enum caps_kind)k) == 0)
			snprintf(part[k], sizeof part[k], "no %s cap (%s off)", kind_name[k], option[k]);
		else if (by == CAPS_BY_NONE)
			snprintf(part[k], sizeof part[k], "no %s cap (%s)", kind_name[k], caps_how(S->caps, (enum caps_kind)k));
		else
			snprintf(part[k], sizeof part[k], "%s (%s)", cap, caps_how(S->caps, (enum caps_kind)k));
		uint64_t asked = k == CAPS_TASKS ? S->o->max_tasks : S->o->max_memory;
		lost |= by == CAPS_BY_NONE && asked != 0 && asked != CAPS_DEFAULT;
	}
	const char *what = changed ? "caps per replica, now" : "caps per replica";
	if (lost)
		log_warn("%s: %s; %s", what, part[0], part[1]);
	else
		log_event("%s: %s; %s", what, part[0], part[1]);
}

void overcap_init(struct sup *S)
{
	uint64_t tasks = S->o->max_tasks, memory = S->o->max_memory;
	unsigned share = 0;
	if (tasks == CAPS_DEFAULT)
		tasks = DEFAULT_TASKS;
	if (memory == CAPS_DEFAULT) {
		memory = 0;
		share = S->k + 1;
	}
	S->caps = caps_new(tasks, memory, share, (S->ns_flags & CLONE_NEWUSER) != 0);
	if (S->caps == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	say(S, false);
	report_caps(S);
}

void overcap_sandbox(struct sup *S)
{
	enum caps_by was = caps_by(S->caps, CAPS_TASKS);
	caps_set_userns(S->caps, (S->ns_flags & CLONE_NEWUSER) != 0);
	if (caps_by(S->caps, CAPS_TASKS) == was)
		return;
	say(S, true);
	report_caps(S);
}

/* Ends the cgroup r's process had (killing what is left when it was killed
 * and had no init of its own: the init's end takes its namespace along). */
static void end(struct replica *r)
{
	if (r->caps == NULL)
		return;
	caps_replica_end(r->caps, r->killed && r->program_pid <= 0);
	r->caps = NULL;
}

void overcap_prepare(struct sup *S, struct replica *r, struct caps_spawn *sp)
{
	end(r);
	r->caps = caps_replica_new(S->caps, sp);
	if (r->caps == NULL && errno != 0)
		fatal(EXIT_INTERNAL, "cannot make a cgroup for replica %u (%s; %s): %s", S->next_id,
		      caps_how(S->caps, CAPS_TASKS), caps_how(S->caps, CAPS_MEMORY), strerror(errno));
}

bool overcap_over(struct sup *S, struct replica *r, char *why, size_t size)
{
	int k = caps_replica_over(r->caps, why, size);
	if (k < 0)
		return false;
	S->over_cap[k]++;
	report_caps(S);
	if (S->over_cap[k] >= voter_quorum(S->k, S->k) && !S->stopping) {
		char cap[64], reason[256];
		cap_text(S, k, cap, sizeof cap);
		snprintf(reason, sizeof reason, "%u of %u replicas went over the %s cap (%s, %s)", S->over_cap[k], S->k,
			 kind_name[k], cap, caps_how(S->caps, (enum caps_kind)k));
		log_warn("%s: the command needs more than %s allows (raise it, or %s off); stopping (%d)", reason,
			 option[k], option[k], 128 + SIGKILL);
		report_set_exit(S->report, 128 + SIGKILL, reason);
		/* Before the kill: no replacement is asked for. */
		sup_finish(S, 128 + SIGKILL);
	}
	return true;
}

/* replica_kill finds out why (overcap_over). */
#define OVER_CAP "over a cap"

void overcap_tick(struct sup *S)
{
	if (S->caps == NULL)
		return;
	for (unsigned i = 0; i < S->nslots; i++) {
		struct replica *r = &S->r[i];
		char why[192];
		if (r->used && !r->exited && (r->live || r->joining) && caps_replica_over(r->caps, why, sizeof why) >= 0)
			replica_kill(S, r, OVER_CAP);
	}
	caps_tick(S->caps);
}

void overcap_reaped(struct sup *S, struct replica *r)
{
	char why[192];
	if (!r->killed && (r->live || r->joining) && caps_replica_over(r->caps, why, sizeof why) >= 0)
		replica_kill(S, r, OVER_CAP);
	end(r);
}

void overcap_killed(struct sup *S, struct replica *r)
{
	(void)S;
	if (r->program_pid <= 0)
		caps_replica_kill(r->caps);
}

void overcap_finish(struct sup *S)
{
	for (unsigned i = 0; S->r != NULL && i < S->nslots; i++)
		S->r[i].caps = NULL; /* caps_free takes them all */
	caps_free(S->caps);
	S->caps = NULL;
}
