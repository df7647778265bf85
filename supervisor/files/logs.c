/* logs.c — see logs.h.
 *
 * Each stream keeps, per slot, a member: the replica's version of the file
 * open for reading, how far past the base its bytes were checked (pos),
 * and what it read past the committed bytes (buf, at most BUF_MAX). Each
 * tick reads what the members appended since, compares a late member's
 * bytes with the real file's, and asks the voter for the longest prefix a
 * quorum of the live replicas shares (a live replica that is no member yet
 * counts as one with nothing written: it holds the decision back without
 * contradicting it). The voter sees each buffer cut at its last newline
 * (whole lines), past it only the bytes a held sync of that replica waits
 * for. Streams are few (a daemon's logs), so they are a list.
 *
 * What one hostile replica can do is bounded: it cannot append a byte a
 * quorum did not write, nor choose the owner or mode of a file diehard
 * makes (those of every agreeing version must be the same); it can stop a
 * stream (the end's vote then commits the file), and its scans of
 * descriptors take a share of the table, of at most FDS_MAX descriptors
 * each. */
#include "logs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "changes.h"
#include "exitcode.h"
#include "log.h"
#include "net.h"
#include "pastdigits.h"
#include "pre.h"
#include "sup.h"
#include "virt.h"
#include "voter.h"

/* Bytes a member holds past the committed ones; past that it is not read
 * until the others catch up. */
#define BUF_MAX (1u << 20)
/* Bytes read from a file in one step. */
#define STEP (64u * 1024)
/* Threads whose descriptors wait for a look; each is looked at twice (its
 * open may not have returned by the first tick). */
#define SCAN_MAX 64
#define STREAMS_MAX 256
/* Descriptors looked at in one look. */
#define FDS_MAX 4096
/* A replica's stream found this long after its replayed past ended
 * (seconds) still holds the past's lines up to the appended bytes. */
#define PAST_LATE 2.0
/* Bytes a late member is compared with in one tick. */
#define CATCH_MAX (4u << 20)

struct member {
	bool in;             /* a member (else the slot's replica is none) */
	bool out;            /* outvoted, or unreadable: no longer read */
	unsigned rid;        /* its replica's id */
	int fd;              /* its version of the file, or -1 until found */
	dev_t dev;           /* that version's identity, to see it replaced */
	ino_t ino;
	uint64_t pos;        /* bytes past base compared or voted */
	unsigned char *buf;  /* its bytes from the committed offset on */
	size_t len;
	double grew;         /* when its version last grew (sup_now(); 0: never seen) */
	off_t size;          /* its version's size then */
	off_t past;          /* a replacement that replayed the connection log: its bytes
				before this file offset re-lived the past (member_past) */
	bool past_said;      /* digits taken from the real file: said once */
};

/* A sync of a streamed file, held until the stream appended what the
 * replica's file held then. */
struct held {
	unsigned slot, rid;
	uint64_t gen, id;
	off_t size;
	double since;
	struct held *next;
};

struct lstream {
	char *path;
	char *target;        /* its view's real directory, and where the path */
	size_t rel;          /* beneath it starts */
	double stalled;      /* since when bytes wait with no quorum (0: not) */
	struct held *held;
	off_t base;          /* the real file's size when the stream began */
	uint64_t committed;  /* bytes appended to the real file */
	bool kept;           /* its start version is in the start-state layer */
	bool off;            /* unsettled: no longer streamed */
	bool mid_line;       /* the last byte appended is not a newline */
	bool said_order;     /* lines taken in another order (outorder.c): said once */
	struct member *m;    /* per slot */
	struct lstream *next;
};

struct scan {
	unsigned slot, rid;
	pid_t tid;
	unsigned looks;
};

struct logs {
	struct sup *S;
	json_t *rep;
	struct pre *pre;
	struct lstream *streams;
	unsigned nstreams;
	struct scan scan[SCAN_MAX];
	unsigned nscan;
	uint64_t bytes, outvoted, unsettled;
	bool said_many;
	bool said_durable;     /* a --durable replacement left a stream (said once) */
};

static void *must(void *p)
{
	if (p == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	return p;
}

struct logs *logs_new(struct sup *S, json_t *rep, struct pre *pre)
{
	struct logs *L = must(calloc(1, sizeof *L));
	L->S = S;
	L->rep = rep;
	L->pre = pre;
	return L;
}

static void member_drop(struct member *m)
{
	if (m->fd >= 0)
		close(m->fd);
	free(m->buf);
	*m = (struct member){ .fd = -1 };
}

void logs_free(struct logs *L)
{
	if (L == NULL)
		return;
	for (struct lstream *s = L->streams, *next; s != NULL; s = next) {
		next = s->next;
		for (unsigned i = 0; i < L->S->nslots; i++)
			member_drop(&s->m[i]);
		for (struct held *h = s->held, *hn; h != NULL; h = hn) {
			hn = h->next;
			free(h);
		}
		free(s->m);
		free(s->path);
		free(s->target);
		free(s);
	}
	free(L);
}

static void report_counts(struct logs *L)
{
	json_object_set_new(L->rep, "logs",
			    json_pack("{s:i,s:I,s:I,s:I}", "streams", (int)L->nstreams, "bytes", (json_int_t)L->bytes,
				      "outvoted", (json_int_t)L->outvoted, "unsettled", (json_int_t)L->unsettled));
}

void logs_opening(struct logs *L, unsigned slot, pid_t tid)
{
	if (L == NULL || slot >= L->S->nslots)
		return;
	for (unsigned i = 0; i < L->nscan; i++)
		if (L->scan[i].tid == tid && L->scan[i].slot == slot) {
			L->scan[i].looks = 0;
			return;
		}
	/* Each slot a share of the table: one replica's flood of opens never
	 * crowds out another's (the end commits what was not streamed). */
	unsigned mine = 0;
	for (unsigned i = 0; i < L->nscan; i++)
		mine += L->scan[i].slot == slot;
	if (L->nscan == SCAN_MAX || mine >= SCAN_MAX / L->S->nslots)
		return;
	L->scan[L->nscan++] = (struct scan){ .slot = slot, .rid = L->S->r[slot].id, .tid = tid };
}

/* ---- finding streams ---- */

/* The real file of s, beneath its view (changes_open_real). */
static int real_open(const struct lstream *s, int flags, mode_t mode)
{
	return changes_open_real(s->target, s->path + s->rel, flags, mode);
}

/* Whether fd is a plain regular file of one link. */
static bool plain_file(int fd, struct stat *st)
{
	return fstat(fd, st) == 0 && S_ISREG(st->st_mode) && st->st_nlink == 1;
}

static struct lstream *stream_of(struct logs *L, const char *path, const struct changes *ch)
{
	for (struct lstream *s = L->streams; s != NULL; s = s->next)
		if (strcmp(s->path, path) == 0)
			return s;
	size_t rel;
	int v;
	/* A path with a newline would forge log lines. */
	if (ch == NULL || strchr(path, '\n') != NULL || (v = changes_view_of(ch, path, &rel)) < 0)
		return NULL;
	/* A --share'd directory is the real one in every replica. */
	for (unsigned i = 0; i < L->S->o->nshare; i++) {
		char *dir = realpath(L->S->o->share[i], NULL);
		size_t n = dir != NULL ? strlen(dir) : 0;
		bool in = dir != NULL && strncmp(path, dir, n) == 0 && (path[n] == '/' || path[n] == '\0');
		free(dir);
		if (in)
			return NULL;
	}
	if (L->nstreams == STREAMS_MAX) {
		if (!L->said_many)
			log_warn("more than %u append-only files: the others are committed at the end", STREAMS_MAX);
		L->said_many = true;
		return NULL;
	}
	struct lstream probe = { .path = (char *)path, .target = ch->targets[v], .rel = rel };
	off_t base = 0;
	int fd = real_open(&probe, O_RDONLY, 0);
	struct stat st;
	if (fd >= 0) {
		bool ok = plain_file(fd, &st);
		close(fd);
		if (!ok)
			return NULL;
		base = st.st_size;
	} else if (errno != ENOENT) {
		return NULL;
	}
	struct lstream *s = must(calloc(1, sizeof *s));
	s->path = must(strdup(path));
	s->target = must(strdup(ch->targets[v]));
	s->rel = rel;
	s->base = base;
	s->m = must(calloc(L->S->nslots, sizeof *s->m));
	for (unsigned i = 0; i < L->S->nslots; i++)
		s->m[i].fd = -1;
	s->next = L->streams;
	L->streams = s;
	L->nstreams++;
	log_event("%s is appended to: voted as a stream from byte %lld", path, (long long)base);
	report_counts(L);
	return s;
}

/* Whether fd n of tid is open with O_APPEND for writing. */
static bool appending(pid_t tid, const char *n)
{
	char proc[320], buf[256];
	snprintf(proc, sizeof proc, "/proc/%d/fdinfo/%s", (int)tid, n);
	int fd = open(proc, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t got = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (got <= 0)
		return false;
	buf[got] = '\0';
	const char *f = strstr(buf, "flags:");
	if (f == NULL)
		return false;
	unsigned long flags = strtoul(f + 6, NULL, 8);
	return (flags & O_APPEND) && (flags & O_ACCMODE) != O_RDONLY;
}

/* Slot's member of s, begun for the replica it holds now. */
static void member_join(struct logs *L, struct lstream *s, unsigned slot)
{
	struct member *m = &s->m[slot];
	const struct replica *r = &L->S->r[slot];
	if (m->in && m->rid == r->id)
		return;
	member_drop(m);
	*m = (struct member){ .in = true, .rid = r->id, .fd = -1 };
	/* Found just after its replayed past ended (a file it opens for each
	 * line): what was appended before re-lived the past. */
	if (r->replacement && !r->fresh && r->past_at > 0 && sup_now() - r->past_at < PAST_LATE)
		m->past = s->base + (off_t)s->committed;
	log_event("replica %u appends to %s", r->id, s->path);
}

/* The append-mode descriptors of thread tid of slot's replica: each
 * regular file of a view, a stream's member. */
static void look(struct logs *L, const struct scan *sc)
{
	const struct replica *r = &L->S->r[sc->slot];
	if (!replica_in_run(r) || r->id != sc->rid || r->changes == NULL)
		return;
	char dir[64];
	snprintf(dir, sizeof dir, "/proc/%d/fd", (int)sc->tid);
	/* The thread is still one of the replica's (a tid reused since by
	 * another process would be in another pid namespace). */
	char mine[64], its[64], ns[64];
	snprintf(ns, sizeof ns, "/proc/%d/ns/pid", (int)r->pid);
	ssize_t a = readlink(ns, mine, sizeof mine);
	snprintf(ns, sizeof ns, "/proc/%d/ns/pid", (int)sc->tid);
	ssize_t b = readlink(ns, its, sizeof its);
	if (a <= 0 || a != b || memcmp(mine, its, (size_t)a) != 0)
		return;
	DIR *d = opendir(dir);
	if (d == NULL)
		return;
	static const char deleted[] = " (deleted)";
	const size_t dl = sizeof deleted - 1;
	unsigned seen = 0;
	for (struct dirent *e; seen < FDS_MAX && (e = readdir(d)) != NULL; seen++) {
		if (e->d_name[0] == '.')
			continue;
		char link[352], path[4096];
		snprintf(link, sizeof link, "%s/%s", dir, e->d_name);
		ssize_t len = readlink(link, path, sizeof path - 1);
		if (len <= 0 || (size_t)len >= sizeof path - 1 || path[0] != '/')
			continue;
		path[len] = '\0';
		size_t rel;
		if (((size_t)len > dl && strcmp(path + len - dl, deleted) == 0) ||
		    changes_view_of(r->changes, path, &rel) < 0 || !appending(sc->tid, e->d_name))
			continue;
		struct lstream *s = stream_of(L, path, r->changes);
		if (s != NULL && !s->off)
			member_join(L, s, sc->slot);
	}
	closedir(d);
}

/* ---- reading and voting ---- */

/* Answers s's held syncs: all of them (all), or those of slot (slot <
 * nslots), or those whose bytes are appended, the real file synced first
 * for these. A sync answered otherwise made nothing durable: the end
 * commits its bytes (docs/FILES.md). */
static void release(struct logs *L, struct lstream *s, bool all, unsigned slot)
{
	struct sup *S = L->S;
	bool synced = false;
	int sync_err = 0;
	for (struct held **h = &s->held; *h != NULL;) {
		struct held *a = *h;
		bool done = a->size <= s->base + (off_t)s->committed;
		if (!all && a->slot != slot && !done) {
			h = &a->next;
			continue;
		}
		bool durable = !all && a->slot != slot;
		if (durable && !synced) {
			/* The appended bytes made durable, as the call promises;
			 * when they cannot be, the call says so (EIO). */
			int fd = real_open(s, O_RDONLY, 0);
			sync_err = fd < 0 || fsync(fd) != 0 ? EIO : 0;
			if (sync_err != 0)
				log_warn("cannot sync %s: %s", s->path, strerror(errno));
			if (fd >= 0)
				close(fd);
			synced = true;
		}
		const struct replica *r = &S->r[a->slot];
		if (replica_in_run(r) && r->id == a->rid)
			virt_resume(S->virt, a->slot, a->gen, a->id, durable ? sync_err : 0);
		*h = a->next;
		free(a);
	}
}

/* Answers the held sync h of s, unsynced. */
static void release_one(struct logs *L, struct lstream *s, struct held *h)
{
	for (struct held **p = &s->held; *p != NULL; p = &(*p)->next)
		if (*p == h) {
			*p = h->next;
			const struct replica *r = &L->S->r[h->slot];
			if (replica_in_run(r) && r->id == h->rid)
				virt_resume(L->S->virt, h->slot, h->gen, h->id, 0);
			free(h);
			return;
		}
}

/* s is no longer streamed (why): the end's vote commits the file. */
static void unsettle(struct logs *L, struct lstream *s, const char *why)
{
	s->off = true;
	L->unsettled++;
	release(L, s, true, 0);
	for (unsigned i = 0; i < L->S->nslots; i++)
		member_drop(&s->m[i]);
	log_event("%s: no longer streamed after %llu bytes: %s (the end commits it)", s->path,
		  (unsigned long long)s->committed, why);
	report_counts(L);
}

static void outvote(struct logs *L, struct lstream *s, unsigned slot, const char *how)
{
	struct member *m = &s->m[slot];
	L->outvoted++;
	log_event("replica %u's appends to %s %s at byte %llu: it leaves the stream (the end's vote judges it)",
		  m->rid, s->path, how, (unsigned long long)(s->base + m->pos));
	if (L->S->r[slot].from_files && !L->said_durable) {
		/* Its appends came from a state rebuilt from the files: the
		 * server writes what it keeps outside them too. */
		L->said_durable = true;
		log_warn("--durable: replica %u, started from the committed files, appends other bytes to %s than its "
			 "siblings: this server's files are not a function of its state alone (redis's append-only "
			 "file, for one, says SELECT again after a restart); once such replicas are most of the vote "
			 "the stream has no quorum (docs/NETWORK.md, \"Durable servers\")",
			 m->rid, s->path);
	}
	release(L, s, false, slot);
	unsigned rid = m->rid;
	member_drop(m);
	*m = (struct member){ .in = true, .out = true, .rid = rid, .fd = -1 };
	report_counts(L);
}

/* Whether member m's replica still appends (its version grew within
 * ORDER_QUIET): lines in another order may still be completed. */
#define ORDER_QUIET 0.5

static bool member_more(struct member *m)
{
	struct stat st;
	double now = sup_now();
	if (m->fd >= 0 && fstat(m->fd, &st) == 0 && st.st_size != m->size) {
		m->size = st.st_size;
		m->grew = now;
	}
	return now - m->grew < ORDER_QUIET;
}

/* Writes n bytes over member m's version at file offset off, in place:
 * the file the member reads, wherever it is now (not what the path names:
 * a log rotated or written anew is another file), and only where the
 * replica already wrote (it only appends, so it sees its file keep its
 * length). false: not done. */
static bool overwrite(const struct member *m, off_t off, const unsigned char *bytes, size_t n)
{
	char proc[64];
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", m->fd);
	int fd = open(proc, O_WRONLY | O_CLOEXEC); /* the magic link followed: m->fd's file */
	struct stat st;
	bool ok = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_dev == m->dev && st.st_ino == m->ino &&
		  st.st_size >= off + (off_t)n;
	for (size_t done = 0; ok && done < n;) {
		ssize_t w = pwrite(fd, bytes + done, n - done, off + (off_t)done);
		if (w > 0)
			done += (size_t)w;
		else
			ok = w < 0 && errno == EINTR;
	}
	if (fd >= 0)
		close(fd);
	return ok;
}

/* The file offset below which slot's member re-lived the past (net_past:
 * its replica replays the connection log and its clocks have not reached
 * now; the end of that, logs_past_ended): 0 for any other. */
static off_t member_past(const struct logs *L, const struct member *m, unsigned slot)
{
	const struct replica *r = &L->S->r[slot];
	if (!r->replacement || r->fresh || m->rid != r->id)
		return 0;
	return net_past(L->S->net, slot) ? (off_t)INT64_MAX : m->past;
}

/* A member's bytes mine, at stream offset at, differ from the real file's
 * (ref) at d, both n long: where they re-live the past, the whole lines
 * alike but for digits (pastdigits.h) are made the real file's, in its
 * version and in mine. The length done (0: none): past it, the rest is
 * compared; a line alike to the end of what was read but not whole yet
 * has the length up to its start done (compared again from there), or,
 * starting at `at`, SIZE_MAX: wait for the rest of it. */
static size_t past_digits(struct logs *L, struct lstream *s, unsigned slot, uint64_t at, unsigned char *mine,
			  const unsigned char *ref, size_t d, size_t n)
{
	struct member *m = &s->m[slot];
	off_t past = member_past(L, m, slot), off = s->base + (off_t)at;
	if (off + (off_t)d >= past)
		return 0;
	size_t lim = past - off < (off_t)n ? (size_t)(past - off) : n;
	size_t a = d + pastdigits_alike(mine + d, ref + d, lim - d), e = a;
	while (e > d && ref[e - 1] != '\n')
		e--;
	if (e == d) {
		/* The line is cut where the bytes read end: compared again
		 * from its start (the bytes before it are alike). */
		size_t ls = d;
		while (ls > 0 && ref[ls - 1] != '\n')
			ls--;
		if (a < n || n >= (size_t)(past - off))
			return 0;
		return ls > 0 ? ls : SIZE_MAX; /* from its start already: more to read */
	}
	if (!overwrite(m, off + (off_t)d, ref + d, e - d))
		return 0;
	memcpy(mine + d, ref + d, e - d);
	if (!m->past_said) {
		m->past_said = true;
		log_event("replica %u's replayed appends to %s differ from the bytes appended in digits at byte %lld "
			  "(times its replay read otherwise): taken as appended",
			  m->rid, s->path, (long long)(off + (off_t)d));
	}
	return e;
}

/* A serving run's log (outorder.c): m's version from the stream's offset
 * `at` (mine, n bytes) differs from ref (nref bytes from at) at d, perhaps
 * only in the order of whole lines. SAME: m's version there, and mine,
 * take ref's order, in place (the same bytes: the replica, which only
 * appends, sees its file keep its length). */
static enum relines_verdict reorder(struct logs *L, struct lstream *s, unsigned slot, uint64_t at,
				    const unsigned char *ref, size_t nref, bool ref_more, unsigned char *mine, size_t n,
				    bool mine_more, size_t d)
{
	size_t end;
	if (!outorder_serving(L->S))
		return RELINES_NO;
	/* In its past its lines' digits are its own (past_digits): alike
	 * but for them up to the end of that past or of what was committed,
	 * byte for byte beyond. */
	off_t past = member_past(L, &s->m[slot], slot) - s->base;
	uint64_t lim = past < 0 ? 0 : (uint64_t)past < s->committed ? (uint64_t)past : s->committed;
	size_t digits = lim > at ? (size_t)(lim - at) : 0;
	enum relines_verdict v = outorder_lines(NULL, 0, ref, nref, ref_more, mine, n, mine_more, d, digits, &end);
	if (v != RELINES_SAME)
		return v;
	if (!overwrite(&s->m[slot], s->base + (off_t)at, ref, end))
		return RELINES_NO; /* its version keeps its order: outvoted */
	memcpy(mine, ref, end);
	outorder_said(L->S, s->path, &s->said_order, (size_t)(s->base + (off_t)(at + d)),
		      (size_t)(s->base + (off_t)(at + end)));
	return v;
}

/* Where the line holding stream offset at starts in the real file (4 KiB
 * back at most, not before the stream's start): false when further. */
static bool line_start_real(const struct lstream *s, int real, uint64_t at, uint64_t *ls)
{
	unsigned char buf[OUTORDER_PRE];
	size_t back = at < sizeof buf ? (size_t)at : sizeof buf;
	if (back == 0) {
		*ls = at;
		return true;
	}
	if (pread(real, buf, back, s->base + (off_t)(at - back)) != (ssize_t)back)
		return false;
	for (size_t i = back; i > 0; i--)
		if (buf[i - 1] == '\n') {
			*ls = at - back + i;
			return true;
		}
	if (back == at) {
		*ls = 0; /* the stream's start */
		return true;
	}
	return false;
}

/* Compares a late member's bytes up to the committed ones with the real
 * file's, CATCH_MAX at most a tick (in a serving run, lines in another
 * order are taken in the real file's: reorder). false: they differ (or
 * cannot be read). */
static bool catch_up(struct logs *L, struct lstream *s, unsigned slot, int real)
{
	struct member *m = &s->m[slot];
	static unsigned char a[STEP], b[STEP];
	for (size_t budget = CATCH_MAX; m->pos < s->committed && budget >= STEP; budget -= STEP) {
		size_t want = s->committed - m->pos < STEP ? (size_t)(s->committed - m->pos) : STEP;
		off_t at = s->base + (off_t)m->pos;
		ssize_t got = pread(m->fd, a, want, at);
		if (got < 0)
			return false;
		if (got == 0)
			return true; /* not written that far yet */
		if (pread(real, b, (size_t)got, at) != got)
			return false;
		if (memcmp(a, b, (size_t)got) != 0) {
			/* Lines in another order, perhaps: the block from the
			 * start of the line where they part (the bytes before
			 * it compared alike) is read whole, both sides up to
			 * STEP from there. */
			size_t d = 0;
			while (a[d] == b[d])
				d++;
			size_t e = past_digits(L, s, slot, m->pos, a, b, d, (size_t)got);
			if (e == SIZE_MAX)
				return true; /* compared again as more comes */
			if (e > 0) {
				m->pos += e; /* the rest compared from the next line */
				continue;
			}
			uint64_t ls;
			if (!line_start_real(s, real, m->pos + d, &ls))
				return false;
			m->pos = ls;
			at = s->base + (off_t)ls;
			want = s->committed - ls < STEP ? (size_t)(s->committed - ls) : STEP;
			ssize_t nref = pread(real, b, want, at), mine = pread(m->fd, a, STEP, at);
			if (nref <= 0 || mine < 0)
				return false;
			bool more = s->committed - ls > (uint64_t)nref; /* past what was read */
			for (unsigned j = 0; j < L->S->nslots && !more; j++)
				more = j != slot && s->m[j].in && !s->m[j].out && s->m[j].fd >= 0 && member_more(&s->m[j]);
			size_t d2 = 0;
			while (d2 < (size_t)nref && d2 < (size_t)mine && a[d2] == b[d2])
				d2++;
			enum relines_verdict v =
				reorder(L, s, slot, ls, b, (size_t)nref, more, a, (size_t)mine, member_more(m), d2);
			if (v == RELINES_WAIT)
				return true; /* compared again as more comes */
			if (v != RELINES_SAME)
				return false;
			continue; /* compared again, from the line's start */
		}
		m->pos += (uint64_t)got;
	}
	return true;
}

/* Reads what the member appended past its buffer. false: unreadable. */
static bool read_on(struct member *m, const struct lstream *s)
{
	if (m->buf == NULL)
		m->buf = must(malloc(BUF_MAX));
	while (m->len < BUF_MAX) {
		ssize_t got = pread(m->fd, m->buf + m->len, BUF_MAX - m->len, s->base + (off_t)(s->committed + m->len));
		if (got < 0)
			return errno == EINTR;
		if (got == 0)
			break;
		m->len += (size_t)got;
	}
	return true;
}

/* Whether slot's member still reads the replica's version of the path,
 * grown from what was read: false when the file was truncated or replaced
 * (a rotation), which a stream cannot follow. */
static bool same_file(const struct lstream *s, const struct member *m, const struct changes *ch)
{
	struct stat st, now;
	if (fstat(m->fd, &st) != 0 || st.st_size < s->base + (off_t)(m->pos + m->len))
		return false;
	int fd = changes_open_version(ch, s->path);
	bool same = fd >= 0 && fstat(fd, &now) == 0 && now.st_dev == m->dev && now.st_ino == m->ino;
	if (fd >= 0)
		close(fd);
	return same;
}

/* Whether a commit of s's path would show in no participant's views. */
static bool all_masked(struct logs *L, const struct lstream *s)
{
	for (unsigned i = 0; i < L->S->nslots; i++) {
		const struct replica *r = &L->S->r[i];
		if (replica_in_run(r) && (r->changes == NULL || !changes_masks(r->changes, s->path)))
			return false;
	}
	return true;
}

/* The real file for appending, made when it does not exist with the mode
 * and owner every version in agree has (none other chosen: one replica
 * never picks them), its directory synced. -1 with the reason in *why. */
static int open_for_append(struct logs *L, struct lstream *s, uint64_t agree, const char **why)
{
	int fd = real_open(s, O_WRONLY | O_APPEND, 0);
	struct stat st;
	if (fd < 0 && errno == ENOENT) {
		struct stat one = { 0 };
		bool first = true;
		for (unsigned i = 0; i < L->S->nslots && i < VOTER_MAX; i++) {
			if (!(agree & (1ull << i)) || s->m[i].fd < 0)
				continue;
			if (fstat(s->m[i].fd, &st) != 0) {
				*why = strerror(errno);
				return -1;
			}
			if (!first && ((st.st_mode & 07777) != (one.st_mode & 07777) || st.st_uid != one.st_uid ||
				       st.st_gid != one.st_gid)) {
				*why = "the replicas' versions differ in mode or owner";
				return -1;
			}
			one = st;
			first = false;
		}
		if (first) {
			*why = "no version to take the mode from";
			return -1;
		}
		fd = real_open(s, O_WRONLY | O_APPEND | O_CREAT | O_EXCL, one.st_mode & 07777);
		if (fd >= 0) {
			if (geteuid() == 0 && fchown(fd, one.st_uid, one.st_gid) != 0)
				log_warn("cannot give %s its owner: %s", s->path, strerror(errno));
			if (fchmod(fd, one.st_mode & 07777) != 0)
				log_warn("cannot give %s its mode: %s", s->path, strerror(errno));
			const char *name;
			int dfd = changes_open_real_parent(s->target, s->path, &name);
			if (dfd >= 0) {
				(void)fsync(dfd);
				close(dfd);
			}
		}
	}
	if (fd < 0) {
		*why = errno == ENOENT ? "its directory is new" : strerror(errno);
		return -1;
	}
	if (!plain_file(fd, &st)) {
		*why = "the real file is no plain file of one link";
		close(fd);
		return -1;
	}
	return fd;
}

/* Appends the n bytes at bytes (agreed by the members in agree) to the
 * real file. */
static bool append(struct logs *L, struct lstream *s, uint64_t agree, const unsigned char *bytes, size_t n)
{
	const char *why;
	if (!s->kept) {
		int err = pre_keep(L->pre, s->target, s->path);
		if (err != 0) {
			char line[160];
			snprintf(line, sizeof line, "its start version cannot be kept: %s", strerror(err));
			unsettle(L, s, line);
			return false;
		}
		s->kept = true;
	}
	int fd = open_for_append(L, s, agree, &why);
	if (fd < 0) {
		unsettle(L, s, why);
		return false;
	}
	struct stat st;
	if (fstat(fd, &st) != 0 || st.st_size != s->base + (off_t)s->committed) {
		close(fd);
		unsettle(L, s, "the real file changed outside the stream");
		return false;
	}
	for (size_t done = 0; done < n;) {
		ssize_t w = write(fd, bytes + done, n - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			char line[160];
			snprintf(line, sizeof line, "cannot append: %s", w < 0 ? strerror(errno) : "nothing written");
			close(fd);
			/* What was written is the agreed bytes' prefix. */
			s->committed += done;
			L->bytes += done;
			unsettle(L, s, line);
			return false;
		}
		done += (size_t)w;
	}
	close(fd);
	s->committed += n;
	L->bytes += n;
	report_counts(L);
	return true;
}

/* How many of the member's bytes the voter sees: its whole lines, and
 * past them what a sync it holds waits for. */
static size_t shown(const struct lstream *s, unsigned slot, const struct member *m)
{
	size_t n = relines_line_start(m->buf, m->len);
	for (const struct held *h = s->held; h != NULL; h = h->next)
		if (h->slot == slot && h->rid == m->rid && h->size > s->base + (off_t)s->committed) {
			uint64_t want = (uint64_t)(h->size - s->base) - s->committed;
			if (want > n)
				n = want < m->len ? (size_t)want : m->len;
		}
	return n;
}

/* Whether a quorum can no longer agree on the next line: the live
 * replicas' first lines (those with one) and the ones still to write
 * cannot make a quorum. */
static bool line_hopeless(const struct voter_view *v, unsigned n, unsigned quorum)
{
	unsigned pending = 0, best = 0;
	for (unsigned i = 0; i < n; i++) {
		if (!v[i].live)
			continue;
		const unsigned char *nl = v[i].len ? memchr(v[i].data, '\n', v[i].len) : NULL;
		if (nl == NULL) {
			pending++;
			continue;
		}
		size_t li = (size_t)(nl - v[i].data) + 1;
		unsigned same = 0;
		for (unsigned j = 0; j < n; j++)
			same += v[j].live && v[j].len >= li && memcmp(v[j].data, v[i].data, li) == 0;
		if (same > best)
			best = same;
	}
	return best + pending < quorum;
}

/* A serving run's log where the live views differ (outorder.c): each view
 * that differs from the reference (the lowest of agree, or with no quorum
 * the view the most others match) only in the order of whole lines takes
 * the reference's order (reorder), block after block. True when one did
 * (vote again); *waiting: the views whose lines may still prove the same. */
static bool reorder_views(struct logs *L, struct lstream *s, const struct voter_view *v, unsigned n, uint64_t agree,
			  uint64_t *waiting)
{
	*waiting = 0;
	if (s->mid_line || !outorder_serving(L->S))
		return false;
	int w = agree != 0 ? __builtin_ctzll(agree) : -1;
	/* With no quorum, the view the most others match, as they are or
	 * in another order (the lowest on a tie). */
	for (unsigned c = 0, most = 0; c < n && agree == 0; c++) {
		if (!v[c].live || v[c].len == 0)
			continue;
		unsigned k = 1;
		for (unsigned i = 0; i < n; i++) {
			if (i == c || !v[i].live || v[i].len == 0)
				continue;
			size_t m = v[i].len < v[c].len ? v[i].len : v[c].len, d = 0, end;
			while (d < m && v[i].data[d] == v[c].data[d])
				d++;
			k += d == m || outorder_lines(NULL, 0, v[c].data, v[c].len, member_more(&s->m[c]), v[i].data,
						      v[i].len, member_more(&s->m[i]), d, 0, &end) == RELINES_SAME;
		}
		if (k > most) {
			most = k;
			w = (int)c;
		}
	}
	if (w < 0)
		return false;
	bool changed = false, ref_more = member_more(&s->m[w]);
	for (unsigned i = 0; i < n; i++) {
		if (i == (unsigned)w || !v[i].live || v[i].len == 0)
			continue;
		/* Block after block, as long as each is the same lines. */
		size_t m = v[i].len < v[w].len ? v[i].len : v[w].len, d = 0;
		for (;;) {
			while (d < m && v[i].data[d] == v[w].data[d])
				d++;
			if (d == m)
				break;
			enum relines_verdict o = reorder(L, s, i, s->committed, v[w].data, v[w].len, ref_more,
							 s->m[i].buf, v[i].len, member_more(&s->m[i]), d);
			if (o == RELINES_WAIT)
				*waiting |= 1ull << i;
			if (o != RELINES_SAME)
				break;
			changed = true;
		}
	}
	return changed;
}

/* One round of s: members found and read, late ones compared, the agreed
 * prefix appended. */
static void stream_round(struct logs *L, struct lstream *s)
{
	struct sup *S = L->S;
	unsigned n = S->nslots < VOTER_MAX ? S->nslots : VOTER_MAX;
	struct voter_view views[VOTER_MAX];
	int real = -1;
	uint64_t past = 0; /* members whose bytes past the appended ones re-live the past */
	for (unsigned i = 0; i < n && !s->off; i++) {
		struct member *m = &s->m[i];
		const struct replica *r = &S->r[i];
		views[i] = (struct voter_view){ .live = r->live && !r->killed && !r->exited };
		if (!m->in || m->rid != r->id || !replica_in_run(r)) {
			if (m->in && m->rid != r->id)
				member_drop(m);
			continue;
		}
		if (m->out || r->fresh) {
			/* A fresh server not yet joined: its version goes on
			 * from the stream's point at its join (logs_rebase). */
			views[i].live = false;
			continue;
		}
		if (m->fd < 0) {
			struct stat st;
			if ((m->fd = changes_open_version(r->changes, s->path)) < 0)
				continue;
			if (fstat(m->fd, &st) != 0) {
				close(m->fd);
				m->fd = -1;
				continue;
			}
			m->dev = st.st_dev;
			m->ino = st.st_ino;
		}
		if (!same_file(s, m, r->changes)) {
			unsettle(L, s, "a replica's version was truncated or replaced (a rotation)");
			break;
		}
		if (m->pos < s->committed) {
			if (real < 0 && (real = real_open(s, O_RDONLY, 0)) < 0)
				continue;
			if (!catch_up(L, s, i, real)) {
				outvote(L, s, i, "differ from the bytes appended");
				views[i].live = false;
				continue;
			}
			if (m->pos < s->committed)
				continue;
		}
		if (!read_on(m, s)) {
			outvote(L, s, i, "cannot be read");
			views[i].live = false;
			continue;
		}
		views[i].data = m->buf;
		views[i].len = shown(s, i, m);
		if (member_past(L, m, i) > s->base + (off_t)s->committed) {
			/* Compared once appended (catch_up), where the past's
			 * digits may differ: meanwhile it contradicts nothing. */
			views[i].len = 0;
			past |= 1ull << i;
		}
	}
	if (real >= 0)
		close(real);
	if (s->off)
		return;
	struct voter_result res;
	uint64_t ordering = 0; /* views whose lines may still prove the same */
	for (unsigned round = 0;; round++) {
		voter_decide(views, n, sup_quorum(S), STEP, VOTER_PREFIX, &res);
		/* Looked at whenever two live views differ: a commit of a
		 * part of a line is no commit (whole lines go), and two
		 * replicas may share one before parting. */
		bool disputed = res.diverged != 0 || res.no_quorum || voter_views_differ(views, n);
		if (!disputed || round == RELINES_MAX_LINES || !reorder_views(L, s, views, n, res.agree, &ordering))
			break;
	}
	res.diverged &= ~ordering; /* not outvoted yet */
	for (unsigned i = 0; i < n; i++)
		if (res.diverged & (1ull << i)) {
			outvote(L, s, i, "differ from a quorum's");
			views[i].live = false;
		}
	/* Nothing to decide while no replica has bytes (a quorum is judged
	 * on what was written, not on replicas that ended). */
	bool bytes_wait = false;
	for (unsigned i = 0; i < n && !bytes_wait; i++)
		bytes_wait = views[i].live && views[i].len > 0;
	if (bytes_wait && (res.no_quorum || (res.commit == 0 && line_hopeless(views, n, sup_quorum(S))))) {
		if (ordering != 0)
			return; /* its lines may still come */
		unsettle(L, s, "the replicas' appends differ, no quorum");
		return;
	}
	const struct member *from = NULL;
	for (unsigned i = 0; i < n && from == NULL; i++)
		if ((res.agree & (1ull << i)) && s->m[i].in && !s->m[i].out && s->m[i].len >= res.commit)
			from = &s->m[i];
	size_t c = from != NULL ? res.commit : 0;
	/* Whole lines reach the real file, so that no reader sees a torn
	 * one; past the last newline only what a quorum of the agreeing
	 * replicas' held syncs ask for (a binary record). */
	size_t lines = c > 0 ? relines_line_start(from->buf, c) : 0;
	if (lines < c) {
		size_t need[VOTER_MAX], k = 0;
		for (unsigned i = 0; i < n; i++) {
			if (!(res.agree & (1ull << i)))
				continue;
			size_t most = 0;
			for (const struct held *h = s->held; h != NULL; h = h->next)
				if (h->slot == i && h->rid == s->m[i].rid && h->size > s->base + (off_t)s->committed) {
					uint64_t want = (uint64_t)(h->size - s->base) - s->committed;
					if (want > most)
						most = want < c ? (size_t)want : c;
				}
			need[k++] = most;
		}
		/* The quorum-th largest need. */
		for (size_t a = 0; a < k; a++)
			for (size_t b = a + 1; b < k; b++)
				if (need[b] > need[a]) {
					size_t t = need[a];
					need[a] = need[b];
					need[b] = t;
				}
		unsigned q = sup_quorum(S);
		size_t held_c = q >= 1 && k >= q ? need[q - 1] : 0;
		c = held_c > lines ? held_c : lines;
	}
	bool waiting = false;
	for (unsigned i = 0; i < n && !waiting; i++)
		waiting = views[i].live && views[i].len > c;
	bool masked = c > 0 && all_masked(L, s);
	if (!masked) {
		/* Bytes wait, none agreed or a replica's views would show the
		 * append (it has not opened the file): --timeout of that and
		 * the stream stops (the end commits the file). */
		double now = sup_now();
		if (c == 0 && !waiting)
			s->stalled = 0;
		else if (s->stalled == 0)
			s->stalled = now;
		else if (now - s->stalled > S->o->straggler_ms / 1000.0)
			unsettle(L, s, c == 0 ? "no quorum for its bytes within --timeout"
					      : "a replica has no version of its own of the file --timeout after a quorum "
						"appended");
		return;
	}
	s->stalled = 0;
	unsigned char *bytes = must(malloc(c));
	memcpy(bytes, from->buf, c);
	uint64_t before = s->committed;
	if (append(L, s, res.agree, bytes, c)) {
		/* Each member at the old offset moves past what it shares of it;
		 * one that wrote less compares the rest later (catch_up). */
		s->mid_line = bytes[c - 1] != '\n';
		for (unsigned i = 0; i < n; i++) {
			struct member *m = &s->m[i];
			if (!m->in || m->out || m->fd < 0 || m->pos != before)
				continue;
			size_t k = m->len < c ? m->len : c;
			if ((ordering | past) & (1ull << i)) {
				/* Behind now: its lines are compared with the
				 * real file's as they come (catch_up). */
				m->len = 0;
				continue;
			}
			if (memcmp(m->buf, bytes, k) != 0) {
				outvote(L, s, i, "differ from a quorum's");
				continue;
			}
			memmove(m->buf, m->buf + k, m->len - k);
			m->len -= k;
			m->pos += k;
		}
		release(L, s, false, S->nslots);
	}
	free(bytes);
}

bool logs_sync(struct logs *L, unsigned slot, uint64_t gen, uint64_t id, const char *path, int version)
{
	if (L == NULL)
		return false;
	struct lstream *s = stream_of(L, path, NULL);
	const struct replica *r = &L->S->r[slot];
	struct member *m = s != NULL ? &s->m[slot] : NULL;
	if (s == NULL || s->off || !m->in || m->out || m->rid != r->id || m->fd < 0)
		return false;
	struct stat st;
	if (fstat(version, &st) != 0)
		return false;
	if (st.st_dev != m->dev || st.st_ino != m->ino) {
		/* Another file at the path now (a rotation). */
		unsettle(L, s, "a replica's version was replaced (a rotation)");
		return false;
	}
	struct held *h = must(calloc(1, sizeof *h));
	*h = (struct held){ .slot = slot, .rid = r->id, .gen = gen, .id = id, .size = st.st_size, .since = sup_now(),
			    .next = s->held };
	s->held = h;
	/* Appended already: answered now, the real file synced. */
	if (st.st_size <= s->base + (off_t)s->committed)
		release(L, s, false, L->S->nslots);
	return true;
}

/* Whether the voters of s stand at one point: those that have written
 * up to the committed bytes (one behind says nothing of a joiner, and one
 * whose version cannot be read is left out too) have read all their
 * versions hold, and what they wrote past the committed bytes (a line not
 * ended yet) is the same in each, or in none. *pending: that of one of
 * them, when a quorum shares it (NULL: nothing to add). */
static bool stream_quiet(struct logs *L, struct lstream *s, const struct member **pending)
{
	const struct member *first = NULL;
	unsigned sharing = 0;
	*pending = NULL;
	for (unsigned i = 0; i < L->S->nslots && i < VOTER_MAX; i++) {
		struct member *m = &s->m[i];
		const struct replica *r = &L->S->r[i];
		if (!m->in || m->out || m->rid != r->id || !r->live || r->fresh || !replica_in_run(r) || m->fd < 0 ||
		    m->pos < s->committed || member_past(L, m, i) > s->base + (off_t)s->committed)
			continue;
		struct stat st;
		if (!read_on(m, s) || m->len == BUF_MAX || fstat(m->fd, &st) != 0 ||
		    st.st_size != s->base + (off_t)(s->committed + m->len))
			return false;
		if (first == NULL)
			first = m;
		else if (first->len != m->len || (m->len > 0 && memcmp(first->buf, m->buf, m->len) != 0))
			return false;
		sharing++;
	}
	if (first != NULL && first->len > 0) {
		if (sharing < sup_quorum(L->S))
			return false;
		*pending = first;
	}
	return true;
}

bool logs_quiet(struct logs *L)
{
	if (L == NULL)
		return true;
	const struct member *pending;
	for (struct lstream *s = L->streams; s != NULL; s = s->next)
		if (!s->off && !stream_quiet(L, s, &pending))
			return false;
	return true;
}

/* Whether fd's bytes at [at, at + n) and real's are the same. */
static bool same_bytes(int fd, int real, off_t at, size_t n)
{
	unsigned char a[STEP], b[STEP];
	while (n > 0) {
		size_t want = n < sizeof a ? n : sizeof a;
		if (pread(fd, a, want, at) != (ssize_t)want || pread(real, b, want, at) != (ssize_t)want ||
		    memcmp(a, b, want) != 0)
			return false;
		at += (off_t)want;
		n -= want;
	}
	return true;
}

/* Slot's version of s made the real file's bytes up to the stream's
 * committed ones, then the n bytes at more (what a quorum of the voters
 * wrote past them), in place (the replica keeps it open for appending).
 * It begins with the file as the stream began (its copy of the start
 * version the start-state layer keeps, pre.h), checked at its end, so
 * only what the stream appended is copied. */
static bool version_as_real(struct lstream *s, const struct changes *ch, const unsigned char *more, size_t n)
{
	int v = changes_open_version_rw(ch, s->path);
	if (v < 0)
		return false;
	off_t want = s->base + (off_t)s->committed;
	int real = real_open(s, O_RDONLY, 0);
	struct stat st, vs;
	bool ok;
	if (real < 0)
		ok = errno == ENOENT && want == 0; /* nothing appended yet */
	else
		ok = fstat(real, &st) == 0 && st.st_size == want;
	off_t keep = s->base;
	if (ok && (real < 0 || keep > want || fstat(v, &vs) != 0 || vs.st_size < keep ||
		   !same_bytes(v, real, keep > STEP ? keep - STEP : 0, keep > STEP ? STEP : (size_t)keep)))
		keep = 0;
	ok = ok && ftruncate(v, keep) == 0;
	unsigned char buf[STEP];
	for (off_t at = keep; ok && at < want;) {
		size_t c = want - at < (off_t)sizeof buf ? (size_t)(want - at) : sizeof buf;
		ssize_t got = pread(real, buf, c, at);
		if (got <= 0) {
			ok = got < 0 && errno == EINTR;
			continue;
		}
		for (ssize_t done = 0; ok && done < got;) {
			ssize_t w = pwrite(v, buf + done, (size_t)(got - done), at + done);
			if (w > 0)
				done += w;
			else
				ok = w < 0 && errno == EINTR;
		}
		at += got;
	}
	for (size_t done = 0; ok && done < n;) {
		ssize_t w = pwrite(v, more + done, n - done, want + (off_t)done);
		if (w > 0)
			done += (size_t)w;
		else
			ok = w < 0 && errno == EINTR;
	}
	/* The replica appended meanwhile: its line is torn. */
	ok = ok && fstat(v, &vs) == 0 && vs.st_size == want + (off_t)n;
	if (real >= 0)
		close(real);
	close(v);
	return ok;
}

/* Slot's replica, its descriptors looked at now (a stream it appends to
 * but was not seen to yet is one of its streams from here); NULL when it
 * has no views. */
static const struct replica *looked_at(struct logs *L, unsigned slot)
{
	if (L == NULL || slot >= L->S->nslots)
		return NULL;
	const struct replica *r = &L->S->r[slot];
	if (r->changes == NULL)
		return NULL;
	pid_t pid = r->program_pid > 0 ? r->program_pid : r->pid;
	look(L, &(struct scan){ .slot = slot, .rid = r->id, .tid = pid });
	for (unsigned i = 0; i < L->nscan; i++)
		if (L->scan[i].slot == slot)
			look(L, &L->scan[i]);
	return r;
}

void logs_rebase(struct logs *L, unsigned slot, bool force)
{
	const struct replica *r = looked_at(L, slot);
	if (r == NULL)
		return;
	for (struct lstream *s = L->streams; s != NULL; s = s->next) {
		struct member *m = &s->m[slot];
		const struct member *pending;
		if (s->off || !m->in || m->out || m->rid != r->id)
			continue;
		if (!stream_quiet(L, s, &pending)) {
			outvote(L, s, slot,
				force ? "were not set to the stream's as it joined fresh (the voters stood at no one point "
					"in it within --timeout)"
				      : "cannot be set to the stream's bytes as it joins fresh");
			continue;
		}
		if (!version_as_real(s, r->changes, pending != NULL ? pending->buf : NULL,
				     pending != NULL ? pending->len : 0)) {
			outvote(L, s, slot, "cannot be set to the stream's bytes as it joins fresh");
			continue;
		}
		free(m->buf);
		m->buf = NULL;
		m->len = 0;
		m->pos = s->committed;
		log_event("replica %u's %s set to the %llu bytes appended so far: it joins the stream fresh", r->id,
			  s->path, (unsigned long long)s->committed);
	}
}

bool logs_streamed(const struct logs *L, const char *path)
{
	for (const struct lstream *s = L != NULL ? L->streams : NULL; s != NULL; s = s->next)
		if (!s->off && strcmp(s->path, path) == 0)
			return true;
	return false;
}

/* Whether slot's version past the stream's bytes takes o's order, window
 * by window (each from the start of the line where they part): true once
 * the two are alike to their ends. */
static bool tail_as(struct logs *L, struct lstream *s, unsigned slot, const struct member *o)
{
	static unsigned char a[STEP], b[STEP];
	const struct member *m = &s->m[slot];
	struct stat sa, sb;
	if (fstat(o->fd, &sa) != 0 || fstat(m->fd, &sb) != 0 || sa.st_size != sb.st_size)
		return false;
	uint64_t pos = s->committed;
	for (;;) {
		ssize_t na = pread(o->fd, a, STEP, s->base + (off_t)pos), nb = pread(m->fd, b, STEP, s->base + (off_t)pos);
		if (na != nb || na < 0)
			return false;
		if (na == 0)
			return true;
		size_t d = 0;
		while (d < (size_t)na && a[d] == b[d])
			d++;
		size_t ls = relines_line_start(a, d);
		if (d == (size_t)na && na < (ssize_t)STEP)
			return true;
		if (ls > 0) {
			pos += ls; /* alike up to there: the next window from it */
			continue;
		}
		if (d == (size_t)na ||
		    reorder(L, s, slot, pos, a, (size_t)na, false, b, (size_t)nb, false, d) != RELINES_SAME)
			return false; /* a line longer than a window, or other lines */
	}
}

void logs_ended(struct logs *L, unsigned slot)
{
	if (L == NULL || !outorder_serving(L->S))
		return;
	const struct sup *S = L->S;
	for (struct lstream *s = L->streams; s != NULL; s = s->next) {
		struct member *m = &s->m[slot];
		if (s->off || s->mid_line || !m->in || m->out || m->fd < 0 || m->rid != S->r[slot].id)
			continue;
		for (unsigned j = 0; j < S->nslots; j++) {
			const struct member *o = &s->m[j];
			const struct replica *r = &S->r[j];
			if (j != slot && o->in && !o->out && o->fd >= 0 && o->rid == r->id && r->changes_read &&
			    !r->changes_bad && tail_as(L, s, slot, o))
				break;
		}
	}
}

void logs_past_ended(struct logs *L, unsigned slot)
{
	const struct replica *r = looked_at(L, slot);
	if (r == NULL)
		return;
	for (struct lstream *s = L->streams; s != NULL; s = s->next) {
		struct member *m = &s->m[slot];
		if (s->off || !m->in || m->out || m->rid != r->id)
			continue;
		/* Its bytes so far, and at least the appended ones (lines it
		 * still buffers, a request it has not finished). */
		struct stat st;
		int fd = m->fd >= 0 ? m->fd : changes_open_version(r->changes, s->path);
		off_t size = fd >= 0 && fstat(fd, &st) == 0 ? st.st_size : 0, appended = s->base + (off_t)s->committed;
		m->past = size > appended ? size : appended;
		if (fd >= 0 && fd != m->fd)
			close(fd);
	}
}

void logs_release(struct logs *L)
{
	if (L == NULL)
		return;
	for (struct lstream *s = L->streams; s != NULL; s = s->next)
		release(L, s, true, 0);
}

void logs_tick(struct logs *L)
{
	if (L == NULL || L->S->stopping)
		return;
	if (L->S->stop_ev != NULL)
		logs_release(L);
	for (unsigned i = 0; i < L->nscan;) {
		look(L, &L->scan[i]);
		if (++L->scan[i].looks >= 2)
			L->scan[i] = L->scan[--L->nscan];
		else
			i++;
	}
	double limit = L->S->o->straggler_ms / 1000.0, now = sup_now();
	for (struct lstream *s = L->streams; s != NULL && !L->S->stopping; s = s->next) {
		if (s->off)
			continue;
		stream_round(L, s);
		/* A sync whose bytes found no quorum within --timeout goes on
		 * (the end commits them). */
		for (struct held *h = s->held, *next; h != NULL && !s->off; h = next) {
			next = h->next;
			if (now - h->since > limit) {
				log_event("%s: a sync of replica %u goes on after %.1f s without a quorum for its bytes",
					  s->path, h->rid, limit);
				release_one(L, s, h);
			}
		}
	}
}
