/* origin.c — see origin.h.
 *
 * Every probe is a whole replay (`diehard replay --quiet`, a child of ours
 * with its stdout and stderr in memfds), compared byte for byte with the
 * baseline replay: the same replica with nothing flipped. The search:
 *   1. flip everything: no change means the fill never reached the output
 *      (the divergence had another cause: placement, a dangling pointer);
 *   2. each (process, thread) stream alone, in the order the trace lists
 *      them, until one changes the output;
 *   3. the allocations of that stream: the shortest prefix [0, m) whose
 *      flip changes the output ends with the origin, m - 1 (bisection; a
 *      stream whose final count is unknown is bounded by doubling first);
 *   4. that allocation alone, then its bytes: the first and the last byte
 *      whose flip (with those before, resp. after it) changes the output;
 *   5. one traced replay for its stack.
 * About 2 log2(allocations) + 2 log2(size) + a few replays. */
#include "origin.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "digest.h"
#include "exitcode.h"
#include "log.h"

struct output {
	int status;  /* the replay's exit status (the replica's), or -1 */
	unsigned char *b[2];
	size_t n[2];
	bool timed_out;
};

struct search {
	const char *self, *path;
	char id[16];
	struct output base;
	double limit;    /* seconds a probe may take */
	double deadline; /* of the whole search */
	unsigned runs;
	int diff_stream;
	size_t diff_offset;
};

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void output_free(struct output *o)
{
	for (int s = 0; s < 2; s++)
		free(o->b[s]);
	*o = (struct output){ .status = -1 };
}

static bool slurp(int fd, unsigned char **p, size_t *n)
{
	struct stat st;
	*p = NULL;
	*n = 0;
	if (fstat(fd, &st) != 0)
		return false;
	*n = (size_t)st.st_size;
	*p = malloc(*n ? *n : 1);
	if (*p == NULL)
		return false;
	size_t got = 0;
	while (got < *n) {
		ssize_t r = pread(fd, *p + got, *n - got, (off_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	*n = got;
	return true;
}

/* Waits for pid up to limit seconds; kills it past that. */
static int wait_for(pid_t pid, double limit, bool *timed_out)
{
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	double end = now() + limit;
	int st = 0;
	for (;;) {
		pid_t w = waitpid(pid, &st, WNOHANG);
		if (w == pid)
			break;
		if (w < 0 && errno != EINTR)
			break;
		double left = end - now();
		if (left <= 0) {
			*timed_out = true;
			(void)kill(pid, SIGKILL);
			while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
				;
			break;
		}
		if (pfd >= 0) {
			struct pollfd p = { .fd = pfd, .events = POLLIN };
			(void)poll(&p, 1, left > 1 ? 1000 : (int)(left * 1000) + 1);
		} else {
			struct timespec ts = { 0, 2000000 };
			nanosleep(&ts, NULL);
		}
	}
	if (pfd >= 0)
		close(pfd);
	return st;
}

/* One replay of the replica; flip, trace_at, trace may be NULL. */
static bool replay(struct search *s, const char *flip, const char *trace_at, const char *trace, struct output *o)
{
	*o = (struct output){ .status = -1 };
	int m[2] = { memfd_create("diehard-probe-out", MFD_CLOEXEC), memfd_create("diehard-probe-err", MFD_CLOEXEC) };
	if (m[0] < 0 || m[1] < 0) {
		log_warn("origin search: memfd_create: %s", strerror(errno));
		if (m[0] >= 0)
			close(m[0]);
		if (m[1] >= 0)
			close(m[1]);
		return false;
	}
	const char *argv[16];
	int a = 0;
	argv[a++] = "diehard";
	argv[a++] = "replay";
	argv[a++] = s->path;
	argv[a++] = "--replica";
	argv[a++] = s->id;
	argv[a++] = "--quiet";
	if (flip) {
		argv[a++] = "--flip";
		argv[a++] = flip;
	}
	if (trace_at) {
		argv[a++] = "--trace-at";
		argv[a++] = trace_at;
	}
	if (trace) {
		argv[a++] = "--trace";
		argv[a++] = trace;
	}
	argv[a] = NULL;
	s->runs++;
	pid_t pid = fork();
	if (pid < 0) {
		log_warn("origin search: fork: %s", strerror(errno));
		close(m[0]);
		close(m[1]);
		return false;
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY);
		if (null < 0 || dup2(null, 0) < 0 || dup2(m[0], 1) < 0 || dup2(m[1], 2) < 0)
			_exit(EXIT_INTERNAL);
		signal(SIGPIPE, SIG_DFL);
		execv(s->self, (char *const *)argv);
		_exit(EXIT_INTERNAL);
	}
	int st = wait_for(pid, s->limit, &o->timed_out);
	o->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	bool ok = slurp(m[0], &o->b[0], &o->n[0]) && slurp(m[1], &o->b[1], &o->n[1]);
	close(m[0]);
	close(m[1]);
	return ok;
}

/* Whether flipping spec changes the output from the baseline; where it
 * first differs goes to s->diff_*. A probe that fails to run counts as no
 * change (the search then finds nothing rather than a wrong answer). */
static bool changed(struct search *s, const char *spec)
{
	struct output o;
	if (!replay(s, spec, NULL, NULL, &o)) {
		output_free(&o);
		return false;
	}
	bool diff = false;
	for (int st = 0; st < 2 && !diff; st++) {
		size_t n = o.n[st] < s->base.n[st] ? o.n[st] : s->base.n[st];
		size_t i = 0;
		while (i < n && o.b[st][i] == s->base.b[st][i])
			i++;
		if (i < n || o.n[st] != s->base.n[st]) {
			diff = true;
			s->diff_stream = st;
			s->diff_offset = i;
		}
	}
	if (!diff && (o.status != s->base.status || o.timed_out)) {
		diff = true;
		s->diff_stream = -1;
		s->diff_offset = 0;
	}
	output_free(&o);
	return diff;
}

static bool over(const struct search *s)
{
	return now() > s->deadline;
}

static void spec(char *buf, size_t size, const struct trace_stream *t, uint64_t lo, uint64_t hi, uint64_t blo,
		 uint64_t bhi)
{
	int n = snprintf(buf, size, "%" PRIu64 "/%" PRIu64 "/%" PRIu64 "-", t->pkey, t->thread, lo);
	if (hi == UINT64_MAX)
		n += snprintf(buf + n, size - (size_t)n, "inf");
	else
		n += snprintf(buf + n, size - (size_t)n, "%" PRIu64, hi);
	if (bhi != 0)
		snprintf(buf + n, size - (size_t)n, "/%" PRIu64 "-%" PRIu64, blo, bhi);
}

void origin_search(const char *self, const char *path, const Diehard__Recording *rec, unsigned id, double budget,
		   struct origin *out)
{
	*out = (struct origin){ .replica = id, .stream = -1 };
	double t0 = now();
	struct search s = { .self = self, .path = path, .deadline = t0 + budget, .limit = 60 };
	snprintf(s.id, sizeof s.id, "%u", id);

	const char *tmp = getenv("TMPDIR");
	char dir[2048], tpath[4096];
	snprintf(dir, sizeof dir, "%s/diehard-origin-XXXXXX", tmp != NULL && tmp[0] == '/' ? tmp : "/tmp");
	if (mkdtemp(dir) == NULL) {
		snprintf(out->note, sizeof out->note, "no temporary directory for the search: %s", strerror(errno));
		return;
	}
	snprintf(tpath, sizeof tpath, "%s/base.trace", dir);
	double b0 = now();
	if (!replay(&s, NULL, NULL, tpath, &s.base)) {
		snprintf(out->note, sizeof out->note, "the replica could not be replayed");
		goto done;
	}
	/* A probe may take ten times the baseline, plus slack for a loaded
	 * machine; a flip that makes the program loop is a change. */
	s.limit = 10 * (now() - b0) + 10;
	out->searched = true;
	struct trace *base = calloc(1, sizeof *base);
	if (base == NULL)
		goto done;
	(void)trace_read(base, tpath);
	/* The recorded digests say whether the baseline is the replica's run. */
	out->reproduced = true;
	const Diehard__Replica *rep = NULL;
	for (size_t i = 0; rec != NULL && i < rec->n_replicas; i++)
		if (rec->replicas[i]->id == id)
			rep = rec->replicas[i];
	if (rep != NULL) {
		struct digest_key dk;
		digest_key_init(&dk, rec->digest_seed.data);
		const uint64_t want[2] = { rep->stdout_bytes, rep->stderr_bytes };
		const ProtobufCBinaryData *dg[2] = { &rep->stdout_digest, &rep->stderr_digest };
		for (int st = 0; st < 2; st++) {
			if (dg[st]->len != DIGEST_BYTES || s.base.n[st] < want[st]) {
				out->reproduced = false;
				continue;
			}
			struct digest d;
			uint8_t got[DIGEST_BYTES];
			digest_init(&d, &dk);
			digest_update(&d, s.base.b[st], (size_t)want[st]);
			digest_final(&d, got);
			if (memcmp(got, dg[st]->data, DIGEST_BYTES) != 0)
				out->reproduced = false;
		}
	}

	char sp[128];
	if (!changed(&s, "*/*/0-inf")) {
		snprintf(out->note, sizeof out->note,
			 "flipping every fill byte of replica %u does not change its output: the divergence does not "
			 "come from uninitialized heap memory (a pointer into freed or overrun memory, or stack "
			 "memory, which diehard does not fill)", id);
		free(base);
		goto done;
	}
	out->fill_matters = true;
	const struct trace_stream *st = NULL;
	for (size_t i = 0; i < base->nstreams && !over(&s); i++) {
		spec(sp, sizeof sp, &base->streams[i], 0, UINT64_MAX, 0, 0);
		if (changed(&s, sp)) {
			st = &base->streams[i];
			break;
		}
	}
	if (st == NULL) {
		snprintf(out->note, sizeof out->note, over(&s) ? "the search ran out of time (%.0f s)" :
			 "only the fill of several processes or threads together changes the output: no single origin",
			 budget);
		free(base);
		goto done;
	}
	/* Allocations [0, hi) of the stream change the output, [0, lo) do not. */
	uint64_t lo = 0, hi = st->counted ? st->count : 0;
	if (!st->counted || hi == 0) {
		hi = 1024;
		for (;;) {
			spec(sp, sizeof sp, st, 0, hi, 0, 0);
			if (changed(&s, sp) || hi > ((uint64_t)1 << 40) || over(&s))
				break;
			lo = hi;
			hi *= 4;
		}
	}
	while (hi - lo > 1 && !over(&s)) {
		uint64_t mid = lo + (hi - lo) / 2;
		spec(sp, sizeof sp, st, 0, mid, 0, 0);
		if (changed(&s, sp))
			hi = mid;
		else
			lo = mid;
	}
	if (over(&s)) {
		snprintf(out->note, sizeof out->note, "the search ran out of time (%.0f s)", budget);
		free(base);
		goto done;
	}
	uint64_t n = hi - 1;
	/* Its stack, size and name. */
	char at[96];
	snprintf(at, sizeof at, "%" PRIu64 "/%" PRIu64 "/%" PRIu64, st->pkey, st->thread, n);
	snprintf(tpath, sizeof tpath, "%s/at.trace", dir);
	struct output o;
	struct trace *t = calloc(1, sizeof *t);
	if (t != NULL && replay(&s, NULL, at, tpath, &o) && trace_read(t, tpath) && t->alloc.found) {
		out->alloc = t->alloc;
		t->alloc.stack = (struct trace_stack){ 0 };
		symbolize(out->alloc.stack.frames, out->alloc.stack.nframes);
		out->found = true;
	} else {
		out->alloc = (struct trace_alloc){ .pkey = st->pkey, .thread = st->thread, .n = n };
		snprintf(out->note, sizeof out->note, "allocation %" PRIu64 " was found but its stack was not recorded", n);
	}
	output_free(&o);
	if (t != NULL) {
		trace_free(t);
		free(t);
	}
	/* Alone, and where it shows. */
	spec(sp, sizeof sp, st, n, n + 1, 0, 0);
	if (changed(&s, sp)) {
		out->stream = s.diff_stream;
		out->offset = s.diff_offset;
		uint64_t usable = out->alloc.usable;
		if (usable > 0) {
			/* First byte: shortest [0, b) that changes it. */
			uint64_t blo = 0, bhi = usable;
			while (bhi - blo > 1 && !over(&s)) {
				uint64_t mid = blo + (bhi - blo) / 2;
				spec(sp, sizeof sp, st, n, n + 1, 0, mid);
				if (changed(&s, sp))
					bhi = mid;
				else
					blo = mid;
			}
			out->first_byte = bhi - 1;
			/* Last byte: the latest a with [a, usable) changing it. */
			uint64_t alo = out->first_byte, ahi = usable;
			while (ahi - alo > 1 && !over(&s)) {
				uint64_t mid = alo + (ahi - alo) / 2;
				spec(sp, sizeof sp, st, n, n + 1, mid, usable);
				if (changed(&s, sp))
					alo = mid;
				else
					ahi = mid;
			}
			out->last_byte = alo;
			out->bytes_found = !over(&s);
		}
	} else {
		snprintf(out->note, sizeof out->note,
			 "allocation %" PRIu64 " changes the output only together with earlier ones", n);
		spec(sp, sizeof sp, st, 0, n + 1, 0, 0);
		if (changed(&s, sp)) {
			out->stream = s.diff_stream;
			out->offset = s.diff_offset;
		}
	}
	if (out->stream >= 0) {
		const unsigned char *b = s.base.b[out->stream];
		size_t end = out->offset < s.base.n[out->stream] ? out->offset : s.base.n[out->stream];
		out->line = 1;
		size_t bol = 0;
		for (size_t i = 0; i < end; i++)
			if (b[i] == '\n') {
				out->line++;
				bol = i + 1;
			}
		out->column = out->offset - bol + 1;
	}
	if (base->nstreams > 1 && out->note[0] == '\0')
		snprintf(out->note, sizeof out->note,
			 "the program allocated in %zu threads or processes: allocation numbers follow each "
			 "thread's order, which threads that race may change between runs", base->nstreams);
	if (!out->reproduced && out->note[0] == '\0')
		snprintf(out->note, sizeof out->note,
			 "the replay did not reproduce the recorded output exactly: the origin found is the replay's");
	free(base);
done:
	output_free(&s.base);
	out->runs = s.runs;
	out->seconds = now() - t0;
	/* The directory holds only our trace files. */
	snprintf(tpath, sizeof tpath, "%s/base.trace", dir);
	(void)unlink(tpath);
	snprintf(tpath, sizeof tpath, "%s/at.trace", dir);
	(void)unlink(tpath);
	(void)rmdir(dir);
}

void origin_free(struct origin *o)
{
	if (o->alloc.stack.frames != NULL)
		frames_free(o->alloc.stack.frames, o->alloc.stack.nframes);
	o->alloc.stack = (struct trace_stack){ 0 };
}
