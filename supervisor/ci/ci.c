/* ci.c — see ci.h. */
#include "files.h"
#include "ci.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exitcode.h"
#include "fencelog.h"
#include "log.h"
#include "ndlog.h"
#include "origin.h"
#include "recording.h"
#include "replay.h"
#include "stack.h"
#include "sup.h"
#include "trace.h"
#include "utf8.h"

#ifndef DIEHARD_VERSION
#define DIEHARD_VERSION "0.1.0"
#endif

/* The origin search's bound, in seconds, for each divergence searched. */
#define SEARCH_BUDGET 300.0
#define MAX_FINDINGS 16

/* One process of the run, by id. */
struct proc {
	bool used;
	unsigned slot;
	uint64_t seed[2];
	char fill[80];
	bool pidkey;
	char trace[PATH_MAX];
	struct digest d[NSTREAMS];
	uint64_t bytes[NSTREAMS];
	uint8_t dig[NSTREAMS][DIGEST_BYTES];
	bool final;
	bool exited;
	int status;
	char verdict[192];
};

struct divergence {
	int id;
	char stream[8];
	size_t offset;
	char mine[40], theirs[512]; /* theirs: a path for stream "files" */
};

struct slot_env {
	char *var[5];
};

struct ci {
	struct sup *S;
	uint64_t fill_seed;
	uint8_t dseed[DIGEST_SEED_BYTES];
	struct digest_key dkey;
	char dir[PATH_MAX]; /* --ci: the replicas' trace files */
	struct proc *procs;
	size_t nprocs;
	struct divergence divs[MAX_FINDINGS];
	size_t ndivs;
	size_t more_divs;
	struct slot_env *env; /* per slot */
	char record_why[512]; /* why the recording could not be written */
};

static char *must_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *must_printf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s;
	int n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		fatal(EXIT_INTERNAL, "out of memory");
	return s;
}

struct ci *ci_new(struct sup *S)
{
	const struct options *o = S->o;
	if (!o->record)
		return NULL;
	struct ci *C = calloc(1, sizeof *C);
	if (C == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	C->S = S;
	C->env = calloc(S->nslots, sizeof *C->env);
	if (C->env == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	if (o->replay != NULL)
		memcpy(C->dseed, o->replay->rec->digest_seed.data, sizeof C->dseed);
	else if (getrandom(C->dseed, sizeof C->dseed, 0) != (ssize_t)sizeof C->dseed ||
		 getrandom(&C->fill_seed, sizeof C->fill_seed, 0) != (ssize_t)sizeof C->fill_seed)
		fatal(EXIT_INTERNAL, "getrandom: %s", strerror(errno));
	digest_key_init(&C->dkey, C->dseed);
	if (o->ci) {
		const char *tmp = getenv("TMPDIR");
		snprintf(C->dir, sizeof C->dir, "%s/diehard-ci-XXXXXX", tmp && tmp[0] == '/' ? tmp : "/tmp");
		if (mkdtemp(C->dir) == NULL)
			fatal(EXIT_INTERNAL, "cannot make a directory for the replicas' traces in %s: %s",
			      tmp && tmp[0] == '/' ? tmp : "/tmp", strerror(errno));
		files_keep(C->dir);
	}
	/* A replay's trace file (--trace) is written by its replica. */
	if (o->replay != NULL && o->replay->trace != NULL) {
		char *dir = strdup(o->replay->trace);
		if (dir == NULL)
			fatal(EXIT_INTERNAL, "out of memory");
		char *slash = strrchr(dir, '/');
		if (slash == NULL)
			files_keep(".");
		else {
			slash[slash == dir] = '\0';
			files_keep(dir);
		}
		free(dir);
	}
	return C;
}

static bool keyed(const char *fill)
{
	return strncmp(fill, "pattern:", 8) == 0 || strncmp(fill, "inverse:", 8) == 0 || strcmp(fill, "zero") == 0;
}

char *const *ci_setup(struct sup *S, struct replica *r, bool replacement, bool sandboxed)
{
	struct ci *C = S->ci;
	snprintf(r->fill, sizeof r->fill, "random");
	if (C == NULL)
		return NULL;
	const struct replay *rp = S->o->replay;
	struct slot_env *e = &C->env[r->index];
	for (int i = 0; i < 5; i++) {
		free(e->var[i]);
		e->var[i] = NULL;
	}
	int n = 0;
	if (rp != NULL) {
		for (int i = 0; i < 2; i++) {
			r->seed[i] = 0;
			for (int b = 0; b < 8; b++)
				r->seed[i] |= (uint64_t)rp->rep->seed.data[8 * i + b] << (8 * b);
		}
		snprintf(r->fill, sizeof r->fill, "%s", rp->rep->fill);
		if (rp->flip)
			e->var[n++] = must_printf("DIEHARD_FLIP=%s", rp->flip);
		/* Traced in the run (--ci traces every replica), traced in the
		 * replay: tracing loads the unwinder, which allocates, and a
		 * replica with the random fill places its objects by the
		 * allocations before (its bytes would differ). */
		if (rp->trace)
			e->var[n++] = must_printf("DIEHARD_TRACE=%s", rp->trace);
		else if (rp->rep->traced)
			e->var[n++] = must_printf("DIEHARD_TRACE=/dev/null");
		if (rp->trace_at)
			e->var[n++] = must_printf("DIEHARD_TRACE_AT=%s", rp->trace_at);
		if (rp->rep->pid_key && sandboxed)
			e->var[n++] = must_printf("DIEHARD_PIDKEY=1");
		return e->var;
	}
	if (S->o->ci && !replacement) {
		/* A replica's fill is its slot's: two complements, zeros, and
		 * patterns of their own past three. */
		if (r->index == 0)
			snprintf(r->fill, sizeof r->fill, "pattern:%016" PRIx64, C->fill_seed);
		else if (r->index == 1)
			snprintf(r->fill, sizeof r->fill, "inverse:%016" PRIx64, C->fill_seed);
		else if (r->index == 2)
			snprintf(r->fill, sizeof r->fill, "zero");
		else
			snprintf(r->fill, sizeof r->fill, "pattern:%016" PRIx64, r->seed[0] ^ r->seed[1]);
	}
	if (S->o->ci) {
		e->var[n++] = must_printf("DIEHARD_TRACE=%s/%016" PRIx64 "%016" PRIx64 ".trace", C->dir, r->seed[1],
					  r->seed[0]);
	}
	if (keyed(r->fill) && sandboxed)
		e->var[n++] = must_printf("DIEHARD_PIDKEY=1");
	return e->var;
}

static struct proc *proc_of(struct ci *C, unsigned id)
{
	if (id >= C->nprocs) {
		size_t n = id + 16;
		struct proc *p = realloc(C->procs, n * sizeof *p);
		if (p == NULL)
			fatal(EXIT_INTERNAL, "out of memory");
		memset(p + C->nprocs, 0, (n - C->nprocs) * sizeof *p);
		C->procs = p;
		C->nprocs = n;
	}
	return &C->procs[id];
}

void ci_started(struct sup *S, struct replica *r)
{
	struct ci *C = S->ci;
	if (C == NULL)
		return;
	struct proc *p = proc_of(C, r->id);
	*p = (struct proc){ .used = true, .slot = r->index, .seed = { r->seed[0], r->seed[1] } };
	snprintf(p->fill, sizeof p->fill, "%s", r->fill);
	char *const *e = C->env[r->index].var;
	for (int i = 0; i < 5 && e[i] != NULL; i++) {
		if (strcmp(e[i], "DIEHARD_PIDKEY=1") == 0)
			p->pidkey = true;
		if (strncmp(e[i], "DIEHARD_TRACE=", 14) == 0)
			snprintf(p->trace, sizeof p->trace, "%s", e[i] + 14);
	}
	for (int s = 0; s < NSTREAMS; s++)
		digest_init(&p->d[s], &C->dkey);
}

void ci_output(struct sup *S, struct replica *r, int s, const void *b, size_t n)
{
	struct ci *C = S->ci;
	if (C == NULL || r->id >= C->nprocs || !C->procs[r->id].used || C->procs[r->id].final)
		return;
	struct proc *p = &C->procs[r->id];
	size_t take = n;
	if (S->o->replay != NULL) {
		/* A replay digests what the recording does: the first bytes. */
		uint64_t want = s == 0 ? S->o->replay->rep->stdout_bytes : S->o->replay->rep->stderr_bytes;
		take = p->bytes[s] >= want ? 0 : want - p->bytes[s] < n ? (size_t)(want - p->bytes[s]) : n;
	}
	digest_update(&p->d[s], b, take);
	p->bytes[s] += n;
}

void ci_divergence(struct sup *S, int id, const char *stream, size_t offset, const char *mine, const char *theirs)
{
	struct ci *C = S->ci;
	if (C == NULL)
		return;
	if (C->ndivs == MAX_FINDINGS) {
		C->more_divs++;
		return;
	}
	struct divergence *d = &C->divs[C->ndivs++];
	*d = (struct divergence){ .id = id, .offset = offset };
	snprintf(d->stream, sizeof d->stream, "%s", stream);
	snprintf(d->mine, sizeof d->mine, "%s", mine ? mine : "");
	snprintf(d->theirs, sizeof d->theirs, "%s", theirs ? theirs : "");
}

void ci_retire(struct sup *S, struct replica *r)
{
	struct ci *C = S->ci;
	if (C == NULL || !r->used || r->id >= C->nprocs || C->procs[r->id].final)
		return;
	struct proc *p = &C->procs[r->id];
	for (int s = 0; s < NSTREAMS; s++)
		digest_final(&p->d[s], p->dig[s]);
	p->final = true;
	p->exited = r->exited && !r->killed;
	p->status = r->exited ? replica_status(r->wstatus) : -1;
	if (r->killed)
		snprintf(p->verdict, sizeof p->verdict, "%s", r->why);
	else if (r->live)
		snprintf(p->verdict, sizeof p->verdict, "agreed");
	else if (r->joining)
		snprintf(p->verdict, sizeof p->verdict, "still catching up at the end");
	else
		snprintf(p->verdict, sizeof p->verdict, "left the vote");
	/* A straggler under --ci is a finding: a hang one heap causes; not
	 * one something outside stopped (SIGSTOP). So is a replica over its
	 * caps (overcap.c): a runaway one heap causes. */
	if (S->o->ci && r->killed && strncmp(r->why, "straggler", 9) == 0 && r->found_stopped == NULL)
		ci_divergence(S, (int)r->id, "time", 0, "", "");
	if (S->o->ci && r->killed && strncmp(r->why, "over its ", 9) == 0)
		ci_divergence(S, (int)r->id, "caps", 0, "", "");
}

/* ---- the recording ---- */

static ProtobufCBinaryData bin(const void *p, size_t n)
{
	return (ProtobufCBinaryData){ .len = n, .data = (uint8_t *)p };
}

static ProtobufCBinaryData bstr(const char *s)
{
	return bin(s, strlen(s));
}

enum recorded {
	RECORDED,          /* written, and it replays */
	RECORDED_PARTLY,   /* written, but the logs lost their start (said) */
	RECORDING_FAILED,  /* not written: said, and nothing is left at path */
};

/* Builds and writes the recording to path; a failure to write it (a full
 * disk) is said in one line and in the report, once: the run writes one
 * recording. */
static enum recorded record(struct ci *C, const char *path, int code)
{
	struct sup *S = C->S;
	const struct options *o = S->o;
	Diehard__Recording rec = DIEHARD__RECORDING__INIT;
	rec.format = RECORDING_FORMAT;
	rec.diehard_version = (char *)DIEHARD_VERSION;
	size_t nargv = 0;
	while (o->argv[nargv] != NULL)
		nargv++;
	ProtobufCBinaryData *argv = calloc(nargv, sizeof *argv);
	size_t nenv = 0;
	while (environ[nenv] != NULL)
		nenv++;
	ProtobufCBinaryData *env = calloc(nenv + 1, sizeof *env);
	Diehard__Replica *reps = calloc(C->nprocs + 1, sizeof *reps);
	Diehard__Replica **repp = calloc(C->nprocs + 1, sizeof *repp);
	uint8_t(*seeds)[16] = calloc(C->nprocs + 1, sizeof *seeds);
	if (argv == NULL || env == NULL || reps == NULL || repp == NULL || seeds == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	for (size_t i = 0; i < nargv; i++)
		argv[i] = bstr(o->argv[i]);
	rec.n_argv = nargv;
	rec.argv = argv;
	rec.path = bstr(o->path);
	for (size_t i = 0; i < nenv; i++)
		env[i] = bstr(environ[i]);
	rec.n_env = nenv;
	rec.env = env;
	char cwd[PATH_MAX];
	if (getcwd(cwd, sizeof cwd) == NULL)
		cwd[0] = '\0';
	rec.cwd = bstr(cwd);
	rec.allocator = bstr(o->allocator);
	rec.virtualize = S->virt != NULL;
	rec.sandboxed = S->ns_flags != 0;
	rec.k = S->k;
	rec.exit_code = code;
	rec.rlimit_nofile = (uint64_t)S->nofile.rlim_cur;
	uint8_t nokey[32] = { 0 };
	rec.key = bin(S->virt != NULL ? virt_key(S->virt) : nokey, 32);
	rec.digest_seed = bin(C->dseed, sizeof C->dseed);
	/* The input. */
	size_t in_bytes = inputlog_bytes(S->inlog);
	unsigned char *input = malloc(in_bytes ? in_bytes : 1);
	if (input == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	rec.input_complete = in_bytes == 0 || inputlog_read(S->inlog, 0, input, in_bytes);
	rec.input = bin(input, rec.input_complete ? in_bytes : 0);
	/* The clock and random answers. */
	Diehard__CallLog *logs = NULL, **logp = NULL;
	Diehard__Call *calls = NULL, **callp = NULL;
	rec.calls_complete = true;
	if (S->virt != NULL) {
		struct ndlog *nl = virt_log(S->virt);
		rec.calls_complete = ndlog_complete(nl);
		size_t nkeys = ndlog_keys(nl, NULL, 0), total = 0;
		uint32_t *keys = calloc(nkeys + 1, sizeof *keys);
		if (keys == NULL)
			fatal(EXIT_INTERNAL, "out of memory");
		ndlog_keys(nl, keys, nkeys);
		for (size_t i = 0; i < nkeys; i++)
			total += ndlog_kept(nl, keys[i]);
		logs = calloc(nkeys + 1, sizeof *logs);
		logp = calloc(nkeys + 1, sizeof *logp);
		calls = calloc(total + 1, sizeof *calls);
		callp = calloc(total + 1, sizeof *callp);
		if (logs == NULL || logp == NULL || calls == NULL || callp == NULL)
			fatal(EXIT_INTERNAL, "out of memory");
		size_t c = 0;
		for (size_t i = 0; i < nkeys; i++) {
			diehard__call_log__init(&logs[i]);
			logp[i] = &logs[i];
			logs[i].key = keys[i];
			logs[i].calls = &callp[c];
			size_t kept = ndlog_kept(nl, keys[i]);
			for (size_t j = 0; j < kept; j++) {
				uint64_t arg;
				struct nd_value v;
				if (!ndlog_entry(nl, keys[i], j, &arg, &v))
					break;
				diehard__call__init(&calls[c]);
				calls[c] = (Diehard__Call){ .base = calls[c].base, .arg = arg, .a = v.a, .b = v.b, .c = v.c,
							    .d = v.d, .err = v.err };
				callp[c] = &calls[c];
				c++;
				logs[i].n_calls++;
			}
		}
		rec.n_calls = nkeys;
		rec.calls = logp;
		free(keys);
	}
	/* Every process, by id. */
	size_t nr = 0;
	for (size_t i = 0; i < C->nprocs; i++) {
		struct proc *p = &C->procs[i];
		if (!p->used)
			continue;
		Diehard__Replica *r = &reps[nr];
		diehard__replica__init(r);
		for (int w = 0; w < 2; w++)
			for (int b = 0; b < 8; b++)
				seeds[nr][8 * w + b] = (uint8_t)(p->seed[w] >> (8 * b));
		r->id = (uint32_t)i;
		r->slot = p->slot;
		r->seed = bin(seeds[nr], 16);
		r->fill = p->fill;
		r->pid_key = p->pidkey;
		r->traced = p->trace[0] != '\0';
		r->stdout_digest = bin(p->dig[0], DIGEST_BYTES);
		r->stderr_digest = bin(p->dig[1], DIGEST_BYTES);
		r->stdout_bytes = p->bytes[0];
		r->stderr_bytes = p->bytes[1];
		r->exited = p->exited;
		r->status = p->status;
		r->verdict = p->verdict;
		repp[nr] = r;
		nr++;
	}
	rec.n_replicas = nr;
	rec.replicas = repp;
	char why[512];
	bool ok = recording_write(path, &rec, why, sizeof why);
	char abs[PATH_MAX];
	const char *shown = path[0] != '/' && realpath(path, abs) != NULL ? abs : path;
	report_recording(S->report, ok ? shown : path, ok, ok ? NULL : why);
	if (!ok) {
		log_warn("%s", why);
		snprintf(C->record_why, sizeof C->record_why, "%s", why);
	} else if (!rec.input_complete || !rec.calls_complete)
		log_warn("the recording %s lacks the start of the %s (--input-log, --call-log): it cannot be replayed",
			 path, !rec.input_complete ? "input" : "clock and random answers");
	free(argv);
	free(env);
	free(reps);
	free(repp);
	free(seeds);
	free(input);
	free(logs);
	free(logp);
	free(calls);
	free(callp);
	return !ok ? RECORDING_FAILED : rec.input_complete && rec.calls_complete ? RECORDED : RECORDED_PARTLY;
}

/* ---- the replay's verdict ---- */

static int replay_verdict(struct ci *C, int code)
{
	const struct replay *rp = C->S->o->replay;
	const Diehard__Replica *rep = rp->rep;
	struct proc *p = C->nprocs > 0 && C->procs[0].used ? &C->procs[0] : NULL;
	if (rp->quiet || p == NULL)
		return code;
	const uint64_t want[2] = { rep->stdout_bytes, rep->stderr_bytes };
	const ProtobufCBinaryData *dg[2] = { &rep->stdout_digest, &rep->stderr_digest };
	const char *names[2] = { "stdout", "stderr" };
	char bad[160] = "";
	for (int s = 0; s < 2 && bad[0] == '\0'; s++) {
		if (p->bytes[s] < want[s])
			snprintf(bad, sizeof bad, "it wrote %" PRIu64 " bytes of %s, the recording %" PRIu64, p->bytes[s],
				 names[s], want[s]);
		else if (dg[s]->len == DIGEST_BYTES && memcmp(dg[s]->data, p->dig[s], DIGEST_BYTES) != 0)
			snprintf(bad, sizeof bad, "its %s differs within the recorded %" PRIu64 " bytes", names[s], want[s]);
		else if (rep->exited && p->bytes[s] != want[s])
			snprintf(bad, sizeof bad, "it wrote %" PRIu64 " bytes of %s, the recording %" PRIu64, p->bytes[s],
				 names[s], want[s]);
	}
	if (bad[0] == '\0' && rep->exited && rep->status != code)
		snprintf(bad, sizeof bad, "it exited %d, the recording %d", code, rep->status);
	if (bad[0] != '\0')
		log_warn("replay of replica %u did not reproduce the recording: %s", rep->id, bad);
	else if (rep->exited)
		log_warn("replay of replica %u reproduced the recording: the same %" PRIu64 " bytes of stdout, %" PRIu64
			 " of stderr and exit status %d", rep->id, want[0], want[1], code);
	else
		log_warn("replay of replica %u reproduced the recording: the same first %" PRIu64 " bytes of stdout and %"
			 PRIu64 " of stderr, where diehard stopped it (%s)", rep->id, want[0], want[1], rep->verdict);
	return code;
}

/* ---- --ci findings ---- */


static const char *fill_kind(const char *fill)
{
	return strncmp(fill, "pattern:", 8) == 0 ? "pattern" : strncmp(fill, "inverse:", 8) == 0 ? "inverse" : fill;
}

/* The replica to search first for a divergence: the one that differed, if
 * its fill is keyed; then every other keyed replica in id order. */
static size_t candidates(struct ci *C, const struct divergence *d, unsigned *ids, size_t max)
{
	size_t n = 0;
	if (d->id >= 0 && (size_t)d->id < C->nprocs && C->procs[d->id].used && keyed(C->procs[d->id].fill))
		ids[n++] = (unsigned)d->id;
	for (size_t i = 0; i < C->nprocs && n < max; i++)
		if (C->procs[i].used && keyed(C->procs[i].fill) && (int)i != d->id)
			ids[n++] = (unsigned)i;
	return n;
}

static void reproduce_cmd(char *buf, size_t size, const char *rec, unsigned id)
{
	snprintf(buf, size, "diehard replay %s --replica %u", rec, id);
}

int ci_finish(struct sup *S, int code)
{
	struct ci *C = S->ci;
	if (C == NULL)
		return code;
	/* Every slot was retired before the last replicas were killed
	 * (supervisor.c), so their verdicts are the run's. */
	if (S->o->replay != NULL)
		return replay_verdict(C, code);
	const struct options *o = S->o;
	/* Said in one line either way; the program's status stays the
	 * run's, as its output was delivered. */
	if (!o->ci) {
		(void)record(C, o->record_path, code);
		return code;
	}
	/* Bad frees: each replica's allocator traced them; the first replica
	 * that saw any names them (the others saw the same program). */
	struct trace *bad = calloc(1, sizeof *bad);
	if (bad == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	unsigned bad_id = 0;
	for (size_t i = 0; i < C->nprocs; i++) {
		if (!C->procs[i].used || C->procs[i].trace[0] == '\0')
			continue;
		struct trace t;
		if (trace_read(&t, C->procs[i].trace) && t.nbad > 0 && bad->nbad == 0) {
			*bad = t;
			bad_id = (unsigned)i;
		} else {
			trace_free(&t);
		}
		(void)unlink(C->procs[i].trace);
	}
	(void)rmdir(C->dir);
	/* A majority over the same cap: the command needs more (overcap.c,
	 * exit 137), which no heap explains: not findings. */
	if (S->over_cap[0] >= voter_quorum(S->k, S->k) || S->over_cap[1] >= voter_quorum(S->k, S->k)) {
		size_t kept = 0;
		for (size_t i = 0; i < C->ndivs; i++)
			if (strcmp(C->divs[i].stream, "caps") != 0)
				C->divs[kept++] = C->divs[i];
		C->ndivs = kept;
	}
	size_t nfence = fencelog_count(S->fencelog);
	bool failed = C->ndivs > 0 || bad->nbad > 0 || nfence > 0 || code == EXIT_NO_QUORUM;
	json_t *ci = json_pack("{s:b}", "failed", failed);
	json_t *fills = json_array();
	for (size_t i = 0; i < C->nprocs; i++)
		if (C->procs[i].used)
			json_array_append_new(fills, json_pack("{s:i,s:o}", "replica", (int)i, "fill", stack_jstr(C->procs[i].fill)));
	json_object_set_new(ci, "fills", fills);
	json_t *findings = json_array();
	json_object_set_new(ci, "findings", findings);
	if (!failed) {
		report_attach(S->report, "ci", ci);
		free(bad);
		/* A test run whose recording was asked for and could not be
		 * written fails (a CI job must not pass with its artifact
		 * missing), with a code of its own; diehard's own failure
		 * (output that could not be written: 125) keeps its code. */
		if (o->record_path && record(C, o->record_path, code) == RECORDING_FAILED && code != EXIT_INTERNAL) {
			report_set_exit(S->report, EXIT_CI_RECORDING, C->record_why);
			return EXIT_CI_RECORDING;
		}
		return code;
	}
	/* The recording: where --record says, else beside the test. */
	char path[PATH_MAX];
	if (o->record_path)
		snprintf(path, sizeof path, "%s", o->record_path);
	else
		snprintf(path, sizeof path, "diehard-ci-%d.dhr", (int)getpid());
	bool recorded = record(C, path, code) == RECORDED;
	char abs[PATH_MAX];
	if (recorded && path[0] != '/' && realpath(path, abs) != NULL)
		snprintf(path, sizeof path, "%s", abs);
	json_object_set_new(ci, "recording", recorded ? stack_jstr(path) : json_null());
	char why[256];
	Diehard__Recording *written = recorded ? recording_read(path, why, sizeof why) : NULL;
	if (recorded && written == NULL) {
		log_warn("the recording %s does not read back: %s", path, why);
		recorded = false;
	}
	char self[PATH_MAX];
	ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
	self[sl > 0 ? sl : 0] = '\0';
	/* ^C during the search ends it, as it would a test. */
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);

	char fences[64] = "";
	if (S->fencelog != NULL)
		snprintf(fences, sizeof fences, ", %zu fence report%s", nfence, nfence == 1 ? "" : "s");
	log_warn("---- --ci: %zu divergence%s, %zu bad free%s%s (docs/CI.md) ----", C->ndivs + C->more_divs,
		 C->ndivs + C->more_divs == 1 ? "" : "s", bad->nbad, bad->nbad == 1 ? "" : "s", fences);
	/* Divergences of output: searched, the first few. */
	size_t searched = 0;
	for (size_t i = 0; i < C->ndivs; i++) {
		const struct divergence *d = &C->divs[i];
		json_t *f = json_pack("{s:s,s:o,s:I}", "kind", "divergence", "stream", stack_jstr(d->stream), "offset",
				      (json_int_t)d->offset);
		if (d->id >= 0)
			json_object_set_new(f, "replica", json_integer(d->id));
		bool files = strcmp(d->stream, "files") == 0; /* mine: how, theirs: the path (files.h) */
		if (files) {
			json_object_set_new(f, "path", stack_jstr(d->theirs));
			json_object_set_new(f, "what", stack_jstr(d->mine));
		} else if (d->mine[0] || d->theirs[0]) {
			json_object_set_new(f, "replica_hex", stack_jstr(d->mine));
			json_object_set_new(f, "majority_hex", stack_jstr(d->theirs));
		}
		json_array_append_new(findings, f);
		bool output = strcmp(d->stream, "stdout") == 0 || strcmp(d->stream, "stderr") == 0 ||
			      strcmp(d->stream, "status") == 0;
		if (strcmp(d->stream, "time") == 0)
			log_warn("replica %d was killed as a straggler: a heap-dependent hang (%s)", d->id,
				 d->id >= 0 && (size_t)d->id < C->nprocs ? C->procs[d->id].verdict : "");
		else if (strcmp(d->stream, "caps") == 0)
			log_warn("replica %d was killed %s: a heap-dependent runaway", d->id,
				 d->id >= 0 && (size_t)d->id < C->nprocs ? C->procs[d->id].verdict : "over its cap");
		else if (files)
			log_warn("replica %d (fill %s) left %s different from the others' (%s, byte %zu): a file written "
				 "from uninitialized or corrupted memory", d->id,
				 d->id >= 0 && (size_t)d->id < C->nprocs ? fill_kind(C->procs[d->id].fill) : "?", d->theirs,
				 d->mine, d->offset);
		else if (d->id >= 0)
			log_warn("replica %d (fill %s) wrote %s at %s byte %zu where the others wrote %s", d->id,
				 (size_t)d->id < C->nprocs ? fill_kind(C->procs[d->id].fill) : "?",
				 d->mine[0] ? d->mine : "(end)", d->stream, d->offset, d->theirs[0] ? d->theirs : "(end)");
		else
			log_warn("the replicas split on %s at byte %zu: no majority", d->stream, d->offset);
		if (!recorded || !output || searched >= 3)
			continue;
		searched++;
		unsigned ids[64];
		size_t nc = candidates(C, d, ids, 64);
		struct origin org = { 0 };
		bool any = false;
		for (size_t c = 0; c < nc; c++) {
			origin_free(&org);
			/* Its replays see the start, as the run's replicas did,
			 * through the start-state layer (pre.h). */
			const char *layer = files_start_layer(S);
			if (layer != NULL && setenv(FILES_START_LAYER_VAR, layer, 1) != 0)
				log_warn("origin search: setenv: %s", strerror(errno));
			origin_search(self, path, written, ids[c], SEARCH_BUDGET, &org);
			(void)unsetenv(FILES_START_LAYER_VAR);
			any = true;
			if (org.fill_matters)
				break;
		}
		char cmd[PATH_MAX + 64];
		reproduce_cmd(cmd, sizeof cmd, path, any ? org.replica : (d->id >= 0 ? (unsigned)d->id : 0));
		json_object_set_new(f, "reproduce", stack_jstr(cmd));
		if (!any) {
			log_warn("no replica with a keyed fill to search");
			log_warn("reproduce: %s", cmd);
			continue;
		}
		json_t *jo = json_pack("{s:b,s:b,s:i,s:i,s:f,s:b}", "found", org.found, "fill_matters", org.fill_matters,
				       "replica", (int)org.replica, "runs", (int)org.runs, "seconds", org.seconds,
				       "reproduced", org.reproduced);
		json_object_set_new(f, "origin", jo);
		if (org.note[0])
			json_object_set_new(jo, "note", stack_jstr(org.note));
		if (org.fill_matters) {
			json_object_set_new(f, "kind", json_string("uninitialized_read"));
			if (d->id < 0)
				json_object_set_new(f, "replica", json_integer(org.replica));
			const char *names[2] = { "stdout", "stderr" };
			if (org.stream >= 0)
				json_object_set_new(jo, "shows_at", json_pack("{s:s,s:I,s:I,s:I}", "stream", names[org.stream],
									       "offset", (json_int_t)org.offset, "line",
									       (json_int_t)org.line, "column",
									       (json_int_t)org.column));
			json_t *al = json_pack("{s:I,s:I,s:I,s:I,s:I,s:s}", "process", (json_int_t)org.alloc.pkey, "thread",
					       (json_int_t)org.alloc.thread, "number", (json_int_t)org.alloc.n, "size",
					       (json_int_t)org.alloc.size, "usable", (json_int_t)org.alloc.usable,
					       "function", org.alloc.fn[0] ? org.alloc.fn : "?");
			if (org.bytes_found) {
				json_object_set_new(al, "first_byte", json_integer((json_int_t)org.first_byte));
				json_object_set_new(al, "last_byte", json_integer((json_int_t)org.last_byte));
			}
			json_object_set_new(jo, "allocation", al);
			json_object_set_new(jo, "stack", stack_json(&org.alloc.stack));
			char what[256], where[128] = "the exit status";
			if (org.stream >= 0)
				snprintf(where, sizeof where, "%s at byte %" PRIu64 " (line %" PRIu64 ", column %" PRIu64 ")",
					 names[org.stream], org.offset, org.line, org.column);
			if (org.bytes_found)
				snprintf(what, sizeof what, "bytes %" PRIu64 "-%" PRIu64 " of a %" PRIu64 "-byte block",
					 org.first_byte, org.last_byte, org.alloc.size);
			else
				snprintf(what, sizeof what, "a %" PRIu64 "-byte block", org.alloc.size);
			log_warn("uninitialised value: %s, never written, reached %s", what, where);
			log_warn(" the block was allocated by %s (allocation %" PRIu64 " of thread %" PRIu64 " in process %" PRIu64
				 "; replica %u, fill %s):", org.alloc.fn[0] ? org.alloc.fn : "?", org.alloc.n,
				 org.alloc.thread, org.alloc.pkey, org.replica,
				 org.replica < C->nprocs ? fill_kind(C->procs[org.replica].fill) : "?");
			stack_print(&org.alloc.stack);
			char msg[600];
			snprintf(msg, sizeof msg, "uninitialised heap memory (%s from %s) reached %s", what,
				 org.alloc.fn[0] ? org.alloc.fn : "an allocation", where);
			stack_annotate(&org.alloc.stack, msg);
		} else {
			log_warn("origin: %s", org.note[0] ? org.note : "not found");
			struct trace_stack none = { 0 };
			char msg[300];
			snprintf(msg, sizeof msg, "the replicas' outputs differ at %s byte %zu (no heap origin found)",
				 d->stream, d->offset);
			stack_annotate(&none, msg);
		}
		if (org.note[0] && org.fill_matters)
			log_warn(" note: %s", org.note);
		log_warn("origin search: %u replays, %.1f s", org.runs, org.seconds);
		log_warn("reproduce: %s   (add --gdb to debug it)", cmd);
		origin_free(&org);
	}
	/* Bad frees. */
	for (size_t i = 0; i < bad->nbad; i++) {
		struct trace_bad *b = &bad->bad[i];
		symbolize(b->stack.frames, b->stack.nframes);
		char ptr[32];
		snprintf(ptr, sizeof ptr, "0x%" PRIx64, b->ptr);
		json_t *f = json_pack("{s:s,s:i,s:s,s:o}", "kind", strcmp(b->kind, "double") == 0 ? "double_free" : "invalid_free",
				      "replica", (int)bad_id, "pointer", ptr, "stack", stack_json(&b->stack));
		json_array_append_new(findings, f);
		log_warn("%s free of %s (ignored by the allocator):", strcmp(b->kind, "double") == 0 ? "double" : "invalid",
			 ptr);
		stack_print(&b->stack);
		char msg[128];
		snprintf(msg, sizeof msg, "%s free of %s", strcmp(b->kind, "double") == 0 ? "double" : "invalid", ptr);
		stack_annotate(&b->stack, msg);
	}
	/* Fence reports (fencelog.h): each was one line as it came; here
	 * with its stacks. */
	for (size_t i = 0; i < nfence; i++) {
		json_t *f = fencelog_finding(S->fencelog, i);
		if (f == NULL)
			break;
		json_array_append_new(findings, f);
		fencelog_print(S->fencelog, i);
	}
	if (recorded && C->ndivs == 0)
		log_warn("recording: %s", path);
	log_warn("---- --ci failed: exit %d ----", EXIT_CI_FAILED);
	trace_free(bad);
	free(bad);
	recording_free(written);
	report_attach(S->report, "ci", ci);
	return EXIT_CI_FAILED;
}
