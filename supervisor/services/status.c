/* status.c — see status.h. Read-only: it looks at the slots and the
 * report, and changes nothing in the run. */
#include "status.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exitcode.h"
#include "log.h"
#include "sup.h"

/* The command is cut past this many bytes (an argv can be megabytes; the
 * status must fit one 64 KiB frame with 64 replicas' reasons). */
#define COMMAND_MAX ((size_t)16 << 10)
#define ARG_MAX_SHOWN ((size_t)4 << 10)

static void *must(void *p)
{
	if (p == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	return p;
}


static Diehard__ReplicaStatus *replica_status_of(const struct sup *S, const struct replica *r, double now)
{
	Diehard__ReplicaStatus *m = must(malloc(sizeof *m));
	diehard__replica_status__init(m);
	m->id = r->id;
	m->slot = r->index;
	/* The program's pid: sandboxed, the init's child (the pid a person
	 * would signal), else the replica itself. */
	m->pid = r->program_pid > 0 ? r->program_pid : r->pid;
	if (r->program_pid > 0) {
		m->has_init_pid = true;
		m->init_pid = r->pid;
	}
	m->seed = must(malloc(33));
	snprintf(m->seed, 33, "%016" PRIx64 "%016" PRIx64, r->seed[1], r->seed[0]);
	m->uptime = (r->exited ? r->end_time : now) - r->spawn_time;
	if (m->uptime < 0)
		m->uptime = 0;
	m->stdout_bytes = r->ring[0]->tail;
	m->stderr_bytes = r->ring[1]->tail;
	if (r->exited) {
		m->has_exit_status = true;
		m->exit_status = replica_status(r->wstatus);
	}
	if (r->killed) {
		m->state = DIEHARD__REPLICA_STATUS__STATE__KILLED;
		m->has_why = true;
		m->why.len = strlen(r->why);
		m->why.data = (uint8_t *)must(strdup(r->why));
	} else if (r->exited) {
		m->state = DIEHARD__REPLICA_STATUS__STATE__EXITED;
	} else if (replica_joining(S, r)) {
		m->state = DIEHARD__REPLICA_STATUS__STATE__JOINING;
	} else {
		m->state = DIEHARD__REPLICA_STATUS__STATE__RUNNING;
	}
	return m;
}

Diehard__RunStatus *status_build(struct sup *S)
{
	Diehard__RunStatus *st = must(malloc(sizeof *st));
	diehard__run_status__init(st);
	double now = sup_now() - S->t_start;
	st->pid = (int32_t)getpid();
	st->k = S->k;
	st->live = sup_live_count(S);
	st->replacements = S->respawns;
	st->has_replacements_given_back = true;
	st->replacements_given_back = S->respawns_back;
	st->output_divergences = report_divergence_count(S->report, false);
	st->status_divergences = report_divergence_count(S->report, true);
	if (S->virt != NULL) {
		st->has_call_divergences = true;
		st->call_divergences = report_call_divergence_count(S->report);
	}
	st->committed_stdout = S->s[0].committed;
	st->committed_stderr = S->s[1].committed;
	st->uptime = now;
	st->has_vote = st->has_min_voters = st->has_joining = true;
	enum sup_state vs = sup_state(S);
	st->vote = vs == SUP_DEGRADED	 ? DIEHARD__RUN_STATUS__VOTE__DEGRADED
		   : vs == SUP_REFUSING ? DIEHARD__RUN_STATUS__VOTE__REFUSING
					: DIEHARD__RUN_STATUS__VOTE__VOTING;
	st->min_voters = sup_min_voters(S);
	for (unsigned i = 0; i < S->nslots; i++)
		st->joining += replica_joining(S, &S->r[i]);
	char why[160];
	const char *refused = S->refused[0] != '\0' ? S->refused : !replace_replayable(S, why, sizeof why) ? why : NULL;
	if (refused != NULL) {
		st->has_replace_refused = true;
		st->replace_refused.len = strlen(refused);
		st->replace_refused.data = (uint8_t *)must(strdup(refused));
	}
	st->has_degraded_seconds = st->has_degraded_bytes = true;
	st->degraded_seconds = sup_state_seconds(S, SUP_DEGRADED);
	st->degraded_bytes = S->degraded_bytes;

	size_t argc = 0, total = 0;
	while (S->o->argv[argc] != NULL)
		argc++;
	st->command = must(calloc(argc + 1, sizeof *st->command));
	for (size_t i = 0; i < argc && total < COMMAND_MAX; i++) {
		size_t n = strlen(S->o->argv[i]);
		bool cut = n > ARG_MAX_SHOWN;
		if (cut)
			n = ARG_MAX_SHOWN;
		uint8_t *p = must(malloc(n + 3));
		memcpy(p, S->o->argv[i], n);
		if (cut)
			memcpy(p + n, "...", 3);
		st->command[st->n_command++] = (ProtobufCBinaryData){ n + (cut ? 3 : 0), p };
		total += n;
	}
	if (st->n_command < argc)
		st->command[st->n_command++] = (ProtobufCBinaryData){ 3, (uint8_t *)must(strdup("...")) };

	st->replicas = must(calloc(S->nslots ? S->nslots : 1, sizeof *st->replicas));
	for (unsigned i = 0; i < S->nslots; i++)
		if (S->r[i].used)
			st->replicas[st->n_replicas++] = replica_status_of(S, &S->r[i], now);
	return st;
}

void status_free(Diehard__RunStatus *st)
{
	if (st == NULL)
		return;
	for (size_t i = 0; i < st->n_command; i++)
		free(st->command[i].data);
	free(st->command);
	free(st->replace_refused.data);
	for (size_t i = 0; i < st->n_replicas; i++) {
		free(st->replicas[i]->seed);
		free(st->replicas[i]->why.data);
		free(st->replicas[i]);
	}
	free(st->replicas);
	free(st);
}
