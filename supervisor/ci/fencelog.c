/* fencelog.c — see fencelog.h; the reports' parser is fenceparse.c. */
#include "files.h"
#include "fencelog.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exitcode.h"
#include "log.h"
#include "report.h"
#include "stack.h"
#include "symbolize.h"

/* Reports kept (and logged) per run; later ones are counted. */
#define FENCELOG_KEEP 64
/* The most read from one replica's log at a time. */
#define FENCELOG_READ_MAX ((size_t)4 << 20)

/* ---- the run's logs ---- */

/* A slot's current log: the file of the process started there last. */
struct slot_log {
	bool on;
	unsigned file;     /* its name: FILE.log */
	unsigned id;       /* the process's id, once started */
	bool started;
	off_t read;        /* bytes of it taken */
};

struct fencelog {
	struct report *rp;
	char dir[PATH_MAX - 64];
	pid_t owner;
	char *var[2];
	struct slot_log *slots;
	size_t nslots;
	unsigned files;    /* logs named so far: 0.log .. files-1.log */
	struct fence_report kept[FENCELOG_KEEP];
	unsigned kept_id[FENCELOG_KEEP];
	json_t *kept_json[FENCELOG_KEEP];
	size_t nkept, more;
	json_t *all;       /* the report's "fence" array */
};

static struct fencelog *cleanup_of;

static void remove_dir(struct fencelog *F)
{
	if (F->dir[0] == '\0' || F->owner != getpid())
		return;
	for (unsigned f = 0; f < F->files; f++) {
		char path[PATH_MAX];
		snprintf(path, sizeof path, "%s/%u.log", F->dir, f);
		(void)unlink(path);
	}
	if (rmdir(F->dir) != 0 && errno != ENOENT)
		log_warn("cannot remove %s: %s", F->dir, strerror(errno));
	F->dir[0] = '\0';
}

static void at_exit(void)
{
	if (cleanup_of != NULL)
		remove_dir(cleanup_of);
}

struct fencelog *fencelog_new(struct report *rp)
{
	const char *fence = getenv("DIEHARD_FENCE");
	if (fence == NULL || fence[0] == '\0')
		return NULL;
	struct fencelog *F = calloc(1, sizeof *F);
	json_t *all = json_array();
	if (F == NULL || all == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	F->rp = rp;
	F->all = all;
	const char *tmp = getenv("TMPDIR");
	snprintf(F->dir, sizeof F->dir, "%s/diehard-fence-XXXXXX", tmp != NULL && tmp[0] == '/' ? tmp : "/tmp");
	if (mkdtemp(F->dir) == NULL)
		fatal(EXIT_INTERNAL, "cannot make a directory for the replicas' fence reports (%s): %s", F->dir,
		      strerror(errno));
	files_keep(F->dir);
	F->owner = getpid();
	cleanup_of = F;
	if (atexit(at_exit) != 0)
		fatal(EXIT_INTERNAL, "atexit failed");
	json_incref(all);
	report_attach(rp, "fence", all);
	return F;
}

char *const *fencelog_env(struct fencelog *F, unsigned slot)
{
	if (F == NULL)
		return NULL;
	if (slot >= F->nslots) {
		size_t n = (size_t)slot + 8;
		struct slot_log *s = realloc(F->slots, n * sizeof *s);
		if (s == NULL)
			fatal(EXIT_INTERNAL, "out of memory");
		memset(s + F->nslots, 0, (n - F->nslots) * sizeof *s);
		F->slots = s;
		F->nslots = n;
	}
	/* The slot's last process is gone: what it wrote is read now. */
	fencelog_collect(F, slot);
	F->slots[slot] = (struct slot_log){ .on = true, .file = F->files++ };
	free(F->var[0]);
	if (asprintf(&F->var[0], "DIEHARD_FENCE_LOG=%s/%u.log", F->dir, F->slots[slot].file) < 0)
		fatal(EXIT_INTERNAL, "out of memory");
	F->var[1] = NULL;
	return F->var;
}

void fencelog_started(struct fencelog *F, unsigned slot, unsigned id)
{
	if (F == NULL || slot >= F->nslots || !F->slots[slot].on)
		return;
	F->slots[slot].id = id;
	F->slots[slot].started = true;
}

static json_t *report_json(const struct fence_report *r, unsigned id)
{
	char addr[32];
	snprintf(addr, sizeof addr, "0x%" PRIx64, r->address);
	json_t *o = json_pack("{s:i,s:s,s:s,s:I,s:I,s:s,s:I,s:o,s:o,s:o}", "replica", (int)id, "kind", r->kind, "access",
			      r->access, "offset", (json_int_t)r->offset, "size", (json_int_t)r->size, "address", addr,
			      "thread", (json_int_t)r->thread, "outcome", stack_jstr(r->outcome), "access_stack",
			      stack_json(&r->access_stack), "allocation_stack", stack_json(&r->alloc_stack));
	if (o != NULL && r->freed)
		json_object_set_new(o, "free_stack", stack_json(&r->free_stack));
	return o;
}

static void say(const struct fence_report *r, unsigned id)
{
	char at[PATH_MAX + 64], from[PATH_MAX + 64], past[64] = "";
	stack_where(stack_top(&r->access_stack), at, sizeof at);
	stack_where(stack_top(&r->alloc_stack), from, sizeof from);
	if (r->offset >= 0 && (uint64_t)r->offset >= r->size)
		snprintf(past, sizeof past, " (%" PRIu64 " past its end)", (uint64_t)r->offset - r->size);
	log_warn("replica %u: fence: %s: %s at offset %" PRId64 "%s of a %" PRIu64 "-byte object in %s, allocated in %s;"
		 " %s", id, r->kind, r->access, r->offset, past, r->size, at, from, r->outcome);
}

void fencelog_collect(struct fencelog *F, unsigned slot)
{
	if (F == NULL || slot >= F->nslots || !F->slots[slot].on || !F->slots[slot].started || F->dir[0] == '\0')
		return;
	struct slot_log *sl = &F->slots[slot];
	unsigned id = sl->id;
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/%u.log", F->dir, sl->file);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		if (errno != ENOENT)
			log_warn("cannot read %s: %s", path, strerror(errno));
		return;
	}
	struct stat st;
	char *buf = NULL;
	ssize_t got = -1;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > sl->read) {
		size_t want = (size_t)(st.st_size - sl->read);
		if (want > FENCELOG_READ_MAX)
			want = FENCELOG_READ_MAX;
		if ((buf = malloc(want)) == NULL)
			fatal(EXIT_INTERNAL, "out of memory");
		while ((got = pread(fd, buf, want, sl->read)) < 0 && errno == EINTR)
			;
	}
	close(fd);
	if (got <= 0) {
		free(buf);
		return;
	}
	struct fence_report rs[FENCELOG_KEEP];
	size_t used, more;
	size_t n = fencelog_parse(buf, (size_t)got, rs, FENCELOG_KEEP, &used, &more);
	free(buf);
	/* A read that found no complete report in a full buffer would stall:
	 * skip what was read. */
	sl->read += used > 0 || (size_t)got < FENCELOG_READ_MAX ? (off_t)used : got;
	F->more += more;
	for (size_t i = 0; i < n; i++) {
		symbolize(rs[i].access_stack.frames, rs[i].access_stack.nframes);
		symbolize(rs[i].alloc_stack.frames, rs[i].alloc_stack.nframes);
		symbolize(rs[i].free_stack.frames, rs[i].free_stack.nframes);
		if (F->nkept == FENCELOG_KEEP) {
			F->more++;
			fence_report_free(&rs[i]);
			continue;
		}
		json_t *j = report_json(&rs[i], id);
		say(&rs[i], id);
		F->kept[F->nkept] = rs[i];
		F->kept_id[F->nkept] = id;
		F->kept_json[F->nkept++] = j;
		if (j != NULL)
			json_array_append(F->all, j);
	}
}

size_t fencelog_count(const struct fencelog *F)
{
	return F == NULL ? 0 : F->nkept + F->more;
}

void *fencelog_finding(struct fencelog *F, size_t i)
{
	if (F == NULL || i >= F->nkept || F->kept_json[i] == NULL)
		return NULL;
	const char *k = F->kept[i].kind;
	const char *kind = strcmp(k, "overflow") == 0	    ? "heap_overflow"
			   : strcmp(k, "underflow") == 0    ? "heap_underflow"
			   : strcmp(k, "use-after-free") == 0 ? "use_after_free"
							      : "fence_fault";
	json_incref(F->kept_json[i]);
	return json_pack("{s:s,s:i,s:o}", "kind", kind, "replica", (int)F->kept_id[i], "fence", F->kept_json[i]);
}

void fencelog_print(struct fencelog *F, size_t i)
{
	if (F == NULL || i >= F->nkept)
		return;
	const struct fence_report *r = &F->kept[i];
	log_warn("%s: %s at offset %" PRId64 " of a %" PRIu64 "-byte object (replica %u):", r->kind, r->access,
		 r->offset, r->size, F->kept_id[i]);
	stack_print(&r->access_stack);
	log_warn(" allocated by thread %" PRIu64 ":", r->thread);
	stack_print(&r->alloc_stack);
	if (r->freed) {
		log_warn(" freed:");
		stack_print(&r->free_stack);
	}
	char msg[256];
	snprintf(msg, sizeof msg, "heap %s: %s at offset %" PRId64 " of a %" PRIu64 "-byte object", r->kind, r->access,
		 r->offset, r->size);
	stack_annotate(&r->access_stack, msg);
}

void fencelog_free(struct fencelog *F)
{
	if (F == NULL)
		return;
	remove_dir(F);
	if (cleanup_of == F)
		cleanup_of = NULL;
	for (size_t i = 0; i < F->nkept; i++) {
		fence_report_free(&F->kept[i]);
		json_decref(F->kept_json[i]);
	}
	json_decref(F->all);
	free(F->var[0]);
	free(F->slots);
	free(F);
}
