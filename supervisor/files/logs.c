/* logs.c — see logs.h.
 *
 * Each stream keeps, per slot, a member: the replica's version of the file
 * open for reading, how far past the base its bytes were checked (pos),
 * and what it read past the committed bytes (buf, at most BUF_MAX). Each
 * tick reads what the members appended since, compares a late member's
 * bytes with the real file's, and asks the voter for the longest prefix a
 * quorum of the live replicas shares (a live replica that is no member yet
 * counts as one with nothing written: it holds the decision back without
 * contradicting it). Streams are few (a daemon's logs), so they are a
 * list. */
#include "logs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "changes.h"
#include "exitcode.h"
#include "log.h"
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

struct member {
	bool in;             /* a member (else the slot's replica is none) */
	bool out;            /* outvoted, or unreadable: no longer read */
	unsigned rid;        /* its replica's id */
	int fd;              /* its version of the file, or -1 until found */
	uint64_t pos;        /* bytes past base compared or voted */
	unsigned char *buf;  /* its bytes from the committed offset on */
	size_t len;
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
	struct held *held;
	off_t base;          /* the real file's size when the stream began */
	uint64_t committed;  /* bytes appended to the real file */
	bool kept;           /* its start version is in the start-state layer */
	bool off;            /* unsettled: no longer streamed */
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

/* A voter, or a replacement catching up. */
static bool participant(const struct replica *r)
{
	return r->used && (r->live || r->joining) && !r->killed && !r->exited;
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
	if (L->nscan == SCAN_MAX)
		return; /* the end commits what was not streamed */
	L->scan[L->nscan++] = (struct scan){ .slot = slot, .rid = L->S->r[slot].id, .tid = tid };
}

/* ---- finding streams ---- */

/* The real file's size now (0 when it does not exist), or -1 when it is
 * no plain file of one link. */
static off_t real_size(const char *path)
{
	struct stat st;
	if (lstat(path, &st) != 0)
		return errno == ENOENT ? 0 : -1;
	return S_ISREG(st.st_mode) && st.st_nlink == 1 ? st.st_size : -1;
}

static struct lstream *stream_of(struct logs *L, const char *path, bool make)
{
	for (struct lstream *s = L->streams; s != NULL; s = s->next)
		if (strcmp(s->path, path) == 0)
			return s;
	if (!make)
		return NULL;
	off_t base = real_size(path);
	if (base < 0)
		return NULL;
	if (L->nstreams == STREAMS_MAX) {
		if (!L->said_many)
			log_warn("more than %u append-only files: the others are committed at the end", STREAMS_MAX);
		L->said_many = true;
		return NULL;
	}
	struct lstream *s = must(calloc(1, sizeof *s));
	s->path = must(strdup(path));
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
	log_event("replica %u appends to %s", r->id, s->path);
}

/* The append-mode descriptors of thread tid of slot's replica: each
 * regular file of a view, a stream's member. */
static void look(struct logs *L, const struct scan *sc)
{
	const struct replica *r = &L->S->r[sc->slot];
	if (!participant(r) || r->id != sc->rid || r->changes == NULL)
		return;
	char dir[64];
	snprintf(dir, sizeof dir, "/proc/%d/fd", (int)sc->tid);
	DIR *d = opendir(dir);
	if (d == NULL)
		return;
	static const char deleted[] = " (deleted)";
	const size_t dl = sizeof deleted - 1;
	for (struct dirent *e; (e = readdir(d)) != NULL;) {
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
		struct lstream *s = stream_of(L, path, true);
		if (s != NULL && !s->off)
			member_join(L, s, sc->slot);
	}
	closedir(d);
}

/* ---- reading and voting ---- */

/* Answers s's held syncs: all of them (all), or those of slot (slot <
 * nslots), or those whose bytes are appended; the real file synced first
 * when any of those is answered (synced: whether to). */
static void release(struct logs *L, struct lstream *s, bool all, unsigned slot)
{
	struct sup *S = L->S;
	bool synced = false;
	for (struct held **h = &s->held; *h != NULL;) {
		struct held *a = *h;
		bool go = all || a->slot == slot || a->size <= s->base + (off_t)s->committed;
		if (!go) {
			h = &a->next;
			continue;
		}
		if (!synced && !all && a->slot != slot) {
			/* The appended bytes made durable, as the call promises. */
			int fd = open(s->path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
			if (fd >= 0) {
				if (fsync(fd) != 0)
					log_warn("cannot sync %s: %s", s->path, strerror(errno));
				close(fd);
			}
			synced = true;
		}
		const struct replica *r = &S->r[a->slot];
		if (participant(r) && r->id == a->rid)
			virt_resume(S->virt, a->slot, a->gen, a->id, 0);
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
			if (participant(r) && r->id == h->rid)
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
	release(L, s, false, slot);
	member_drop(m);
	m->out = true;
	m->in = true;
	m->rid = L->S->r[slot].id;
	report_counts(L);
}

/* Compares a late member's bytes up to the committed ones with the real
 * file's. false: they differ (or cannot be read). */
static bool catch_up(struct lstream *s, struct member *m, int real)
{
	unsigned char a[STEP], b[STEP];
	while (m->pos < s->committed) {
		size_t want = s->committed - m->pos < STEP ? (size_t)(s->committed - m->pos) : STEP;
		off_t at = s->base + (off_t)m->pos;
		ssize_t got = pread(m->fd, a, want, at);
		if (got < 0)
			return false;
		if (got == 0)
			return true; /* not written that far yet */
		if (pread(real, b, (size_t)got, at) != got || memcmp(a, b, (size_t)got) != 0)
			return false;
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

/* The real file for appending (made, as the replica's version is, when
 * it does not exist), beneath its view's target, no link followed; -1
 * with a reason in *why. */
static int open_real(const struct changes *ch, const char *path, int version, const char **why)
{
	size_t rel;
	int v = changes_view_of(ch, path, &rel);
	*why = "outside the views";
	if (v < 0)
		return -1;
	int top = open(ch->targets[v], O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (top < 0) {
		*why = strerror(errno);
		return -1;
	}
	struct stat st;
	if (fstat(version, &st) != 0) {
		*why = strerror(errno);
		close(top);
		return -1;
	}
	struct open_how how = { .flags = O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
				.mode = st.st_mode & 0777,
				.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV };
	int fd = (int)syscall(SYS_openat2, top, path + rel, &how, sizeof how);
	int err = errno;
	close(top);
	struct stat real;
	if (fd < 0) {
		*why = err == ENOENT ? "its directory is new" : strerror(err);
		return -1;
	}
	if (fstat(fd, &real) != 0 || !S_ISREG(real.st_mode) || real.st_nlink != 1) {
		*why = "the real file is no plain file of one link";
		close(fd);
		return -1;
	}
	/* Made now: the replica's owner (as root; a user's is the user). */
	if (real.st_size == 0 && (real.st_uid != st.st_uid || real.st_gid != st.st_gid) && geteuid() == 0)
		(void)fchown(fd, st.st_uid, st.st_gid);
	return fd;
}

/* Whether a commit of s's path would show in no participant's views. */
static bool all_masked(struct logs *L, const struct lstream *s)
{
	for (unsigned i = 0; i < L->S->nslots; i++) {
		const struct replica *r = &L->S->r[i];
		if (participant(r) && (r->changes == NULL || !changes_masks(r->changes, s->path)))
			return false;
	}
	return true;
}

/* Appends the n bytes at bytes to the real file. */
static bool append(struct logs *L, struct lstream *s, const struct changes *ch, int version,
		   const unsigned char *bytes, size_t n)
{
	const char *why;
	if (!s->kept) {
		size_t rel;
		int v = changes_view_of(ch, s->path, &rel);
		int err = v < 0 ? EXDEV : pre_keep(L->pre, ch->targets[v], s->path);
		if (err != 0) {
			char line[160];
			snprintf(line, sizeof line, "its start version cannot be kept: %s", strerror(err));
			unsettle(L, s, line);
			return false;
		}
		s->kept = true;
	}
	int fd = open_real(ch, s->path, version, &why);
	if (fd < 0) {
		unsettle(L, s, why);
		return false;
	}
	struct stat st;
	if (fstat(fd, &st) != 0 || st.st_size != s->base + (off_t)s->committed) {
		close(fd);
		unsettle(L, s, "the real file changed outside the run");
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

/* One round of s: members found and read, late ones compared, the agreed
 * prefix (to its last newline) appended. */
static void stream_round(struct logs *L, struct lstream *s)
{
	struct sup *S = L->S;
	unsigned n = S->nslots < VOTER_MAX ? S->nslots : VOTER_MAX;
	struct voter_view views[VOTER_MAX];
	int real = -1;
	for (unsigned i = 0; i < n; i++) {
		struct member *m = &s->m[i];
		const struct replica *r = &S->r[i];
		views[i] = (struct voter_view){ .live = r->live && !r->killed && !r->exited };
		if (!m->in || m->rid != r->id || !participant(r)) {
			if (m->in && m->rid != r->id)
				member_drop(m);
			continue;
		}
		if (m->out) {
			views[i].live = false;
			continue;
		}
		if (m->fd < 0 && (m->fd = changes_open_version(r->changes, s->path)) < 0)
			continue;
		if (m->pos < s->committed) {
			if (real < 0 && (real = open(s->path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)) < 0) {
				continue;
			}
			if (!catch_up(s, m, real)) {
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
		views[i].len = m->len;
	}
	if (real >= 0)
		close(real);
	struct voter_result res;
	voter_decide(views, n, sup_quorum(S), STEP, VOTER_PREFIX, &res);
	for (unsigned i = 0; i < n; i++)
		if (res.diverged & (1ull << i))
			outvote(L, s, i, "differ from a quorum's");
	if (res.no_quorum) {
		unsettle(L, s, "the replicas' appends differ, no quorum");
		return;
	}
	const struct member *from = NULL;
	unsigned fi = 0;
	for (unsigned i = 0; i < n && from == NULL; i++)
		if ((res.agree & (1ull << i)) && s->m[i].in && !s->m[i].out && s->m[i].len >= res.commit) {
			from = &s->m[i];
			fi = i;
		}
	/* Cut at the last newline, so that a reader sees whole lines; not
	 * while a sync waits for bytes (a binary file's records). */
	size_t c = res.commit;
	while (c > 0 && from != NULL && s->held == NULL && from->buf[c - 1] != '\n')
		c--;
	if (c == 0 || from == NULL || !all_masked(L, s))
		return;
	unsigned char *bytes = must(malloc(c));
	memcpy(bytes, from->buf, c);
	uint64_t before = s->committed;
	bool ok = append(L, s, S->r[fi].changes, from->fd, bytes, c);
	if (ok) {
		/* Each member at the old offset moves past what it shares of it;
		 * one that wrote less compares the rest later (catch_up). */
		for (unsigned i = 0; i < n; i++) {
			struct member *m = &s->m[i];
			if (!m->in || m->out || m->fd < 0 || m->pos != before)
				continue;
			size_t k = m->len < c ? m->len : c;
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
	struct lstream *s = stream_of(L, path, false);
	const struct replica *r = &L->S->r[slot];
	if (s == NULL || s->off || !s->m[slot].in || s->m[slot].out || s->m[slot].rid != r->id)
		return false;
	struct stat st;
	if (fstat(version, &st) != 0)
		return false;
	struct held *h = must(calloc(1, sizeof *h));
	*h = (struct held){ .slot = slot, .rid = r->id, .gen = gen, .id = id, .size = st.st_size, .since = sup_now(),
			    .next = s->held };
	s->held = h;
	/* Appended already: answered now, the real file synced. */
	if (st.st_size <= s->base + (off_t)s->committed)
		release(L, s, false, L->S->nslots);
	return true;
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
		for (struct held *h = s->held; h != NULL && !s->off; h = h->next)
			if (now - h->since > limit) {
				log_event("%s: a sync of replica %u goes on after %.1f s without a quorum for its bytes",
					  s->path, h->rid, limit);
				release_one(L, s, h);
				break;
			}
	}
}
