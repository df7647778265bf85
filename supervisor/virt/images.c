/* images.c — new program images in a replica (virt_int.h): at each one's
 * first arch_prctl (or its exec stop, for a process traced to its exec) its
 * vDSO is patched (vdso.c), its AT_RANDOM bytes become the n-th image's of
 * the run's stream, and an image without libdiehard gets the clock blob
 * (graft.c) when the fast clock path is on. An execve whose environment
 * lacks libdiehard is traced to its exec (virt_traced takes the stops). */
#include "virt_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clockpage.h"
#include "envkeep.h"
#include "exitcode.h"
#include "fastclock.h"
#include "graft.h"
#include "log.h"
#include "remote.h"
#include "vdso.h"
#include "virt.h"

/* The key of the run's AT_RANDOM bytes (cp_at_random), from the run's key:
 * a replay's images get the recorded run's bytes, whichever path (the
 * replicas' own count in the fast path's pages, or our log's). */
void images_at_random_key(const struct virt *V, uint64_t key[2])
{
	struct chacha cc;
	chacha_init_stream(&cc, V->key, DOMAIN_AT_RANDOM, UINT64_MAX);
	chacha_read(&cc, key, 2 * sizeof key[0]);
}

/* Writes the n-th image's AT_RANDOM bytes at at in the process of mem. */
static void image_random(struct vreplica *vr, int mem, uint64_t at, const struct seccomp_notif *req)
{
	uint8_t bytes[16];
	if (vr->V->fast != NULL) {
		fastclock_at_random(vr->V->fast, vr->index, bytes);
	} else { /* stopped by arch_prctl: tracing is the fast path's */
		struct nd_value v;
		uint64_t index;
		take_value(vr, req, KEY_AT_RANDOM, 0, take_no_real, &v, &index);
		uint64_t key[2];
		images_at_random_key(vr->V, key);
		cp_at_random(key, index, bytes);
	}
	if (pwrite(mem, bytes, sizeof bytes, (off_t)at) != (ssize_t)sizeof bytes)
		vr->unvirtualized++;
}

/* A descriptor number process tid does not use, just above the clock
 * descriptors' own (FASTCLOCK_FD, FASTCLOCK_DIR_FD) and past `after`, or
 * -1. It is stopped in a notification: nothing opens one meanwhile. */
static int unused_fd(pid_t tid, int after)
{
	for (int fd = after + 1; fd < FASTCLOCK_FD + 24; fd++) {
		char path[64];
		struct stat st;
		snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)tid, fd);
		if (lstat(path, &st) != 0 && errno == ENOENT)
			return fd;
	}
	return -1;
}

/* Puts our descriptor src into the process of notification id at number
 * at (close-on-exec): its number there, or -1. */
static int add_fd(const struct vreplica *vr, uint64_t id, int src, int at)
{
	struct seccomp_notif_addfd add = { .id = id, .flags = SECCOMP_ADDFD_FLAG_SETFD, .srcfd = (uint32_t)src,
					   .newfd = (uint32_t)at, .newfd_flags = O_CLOEXEC };
	int fd = -1;
	while (at >= 0 && (fd = ioctl(vr->fd, SECCOMP_IOCTL_NOTIF_ADDFD, &add)) < 0 && errno == EINTR)
		; /* a signal in the wait leaves nothing installed */
	return fd;
}

/* What a graft of slot vr's needs but the descriptor. */
static struct graft_region region_for(const struct vreplica *vr)
{
	struct virt *V = vr->V;
	struct graft_region g = { .fd = -1, .dir = -1, .nslots = V->S->nslots, .slot = vr->index,
				  .secret = fastclock_secret(V->fast), .mark_exec = fastclock_exec_mark(V->fast) };
	fastclock_marks(V->fast, &g.mark_real, &g.mark_fallback);
	return g;
}

static void graft_image(struct vreplica *vr, pid_t tid, int mem, uint64_t base, const struct graft_region *g,
			bool at_exec)
{
	const char *why = NULL;
	if (graft_clocks(tid, mem, base, g, at_exec, &why) != 0)
		vr->images_grafted++;
	else
		log_event("replica %u: no clock blob for pid %d (%s): its clock reads go to diehard",
			  vr->V->S->r[vr->index].id, (int)tid, why);
}

/* A new image without libdiehard, its vDSO patched with system calls,
 * stopped in its first arch_prctl (req): answered here, then given the
 * clock blob (graft.h) if it can be. DROP: answered. */
static enum answer image_graft(struct vreplica *vr, pid_t tid, int mem, uint64_t base,
			       const struct seccomp_notif *req)
{
	struct virt *V = vr->V;
	struct graft_region g = region_for(vr);
	if (!graft_seize(tid))
		return CONTINUE; /* no tracing here: the notify path */
	/* The page's and the directory's descriptors, into the process
	 * (close-on-exec; the graft closes them before the process runs on),
	 * at numbers it does not use above the clock descriptors' own: a graft
	 * cut short by a signal leaves them open, and there they shift none of
	 * the numbers the program's own files get. No such numbers (an fd
	 * limit below them): no graft. */
	g.fd = add_fd(vr, req->id, fastclock_fd(V->fast, vr->index), unused_fd(tid, FASTCLOCK_DIR_FD));
	if (g.fd >= 0)
		g.dir = add_fd(vr, req->id, fastclock_dir(V->fast), unused_fd(tid, g.fd));
	/* Stopped as the call returns (graft.h), answered, grafted (with no
	 * descriptor: only let go). */
	bool interrupted = graft_interrupt(tid);
	struct seccomp_notif_resp resp = { .id = req->id, .flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE };
	if (ioctl(vr->fd, SECCOMP_IOCTL_NOTIF_SEND, &resp) != 0 || !interrupted)
		return DROP; /* gone (ENOENT) */
	graft_image(vr, tid, mem, base, &g, false);
	return DROP;
}

/* Whether the process's descriptor fd is the same file as ours. */
static bool same_file(pid_t tid, int fd, int ours)
{
	char path[64];
	struct stat a, b;
	snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)tid, fd);
	return fstat(ours, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* An image stopped at its exec (started without libdiehard): given the
 * clock blob with the descriptors it inherited (FASTCLOCK_FD and
 * FASTCLOCK_DIR_FD), if it still has them (then it is let go here; else by
 * the caller). */
static void image_graft_at_exec(struct vreplica *vr, pid_t tid, int mem, uint64_t base)
{
	struct virt *V = vr->V;
	if (!same_file(tid, FASTCLOCK_FD, fastclock_fd(V->fast, vr->index)) ||
	    !same_file(tid, FASTCLOCK_DIR_FD, fastclock_dir(V->fast)))
		return; /* closed, or other files there: the notify path */
	struct graft_region g = region_for(vr);
	g.fd = FASTCLOCK_FD;
	g.dir = FASTCLOCK_DIR_FD;
	g.own_fd = true;
	graft_image(vr, tid, mem, base, &g, true);
}

/* Patches the new image of process tid (its vDSO: jumps where it maps
 * libdiehard, found from near, an address in its loader; else into the
 * clock blob grafted in, or system calls) and writes its AT_RANDOM bytes;
 * req: the arch_prctl notification it is stopped in (checked still
 * pending once the process is pinned), or NULL when it is stopped by
 * ptrace. */
static enum answer image_patch(struct vreplica *vr, pid_t tid, uint64_t near, const struct seccomp_notif *req)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/mem", (int)tid);
	int mem = open(path, O_RDWR | O_CLOEXEC);
	uint64_t base = 0, at_random = 0;
	int err = mem < 0 ? -errno : vdso_auxv(tid, &base, &at_random);
	/* The open file pins the process the id check vouches for. */
	if (req != NULL && !virt_waiting(vr, req->id)) {
		if (mem >= 0)
			close(mem);
		return DROP;
	}
	enum answer answer = CONTINUE;
	if (err == 0 && !vdso_patched(mem, base)) {
		uint64_t lib = vr->V->fast != NULL ? vdso_library(tid, near) : 0;
		err = vdso_patch(mem, base, lib, 0);
		if (err == 1) {
			vr->images_stopped++;
			if (at_random != 0)
				image_random(vr, mem, at_random, req);
			if (lib == 0 && vr->V->fast != NULL && req != NULL)
				answer = image_graft(vr, tid, mem, base, req);
			else if (lib == 0 && vr->V->fast != NULL)
				image_graft_at_exec(vr, tid, mem, base);
		}
	}
	if (err < 0) {
		vr->unvirtualized++;
		if (!vr->V->vdso_warned) {
			vr->V->vdso_warned = true;
			log_warn("cannot patch the vDSO of pid %d: %s; its clock reads stay real and may differ "
				 "between replicas", (int)tid, strerror(-err));
		}
	}
	if (mem >= 0)
		close(mem);
	return answer;
}

/* A new program image's first arch_prctl: its vDSO is patched, and its
 * AT_RANDOM bytes (the kernel's 16 random bytes for each exec, which seed
 * glibc's stack canary and pointer guard and Go's start-up state) become
 * the n-th image's bytes of the run's stream, as in every replica. */
enum answer images_arch_prctl(struct vreplica *vr, const struct seccomp_notif *req)
{
	return image_patch(vr, (pid_t)req->pid, req->data.instruction_pointer, req);
}

bool virt_traced(struct virt *V, pid_t pid, int wstatus)
{
	struct traced **pp = &V->traced;
	while (*pp != NULL && (*pp)->pid != pid && !(WIFSTOPPED(wstatus) && (*pp)->tgid == pid))
		pp = &(*pp)->next;
	struct traced *t = *pp;
	if (t == NULL)
		return false;
	if (!WIFSTOPPED(wstatus)) {
		/* Gone before its exec: the loop goes on with it (its own
		 * parent reaps it, unless that is us). */
		*pp = t->next;
		free(t);
		return false;
	}
	int event = wstatus >> 16;
	if (event == PTRACE_EVENT_EXEC) {
		(void)image_patch(&V->r[t->slot], pid, 0, NULL);
		(void)ptrace(PTRACE_DETACH, pid, 0, 0);
		*pp = t->next;
		free(t);
	} else if (event == PTRACE_EVENT_STOP) {
		(void)ptrace(PTRACE_LISTEN, pid, 0, 0);
	} else {
		/* A signal on its way to it: delivered as if untraced. */
		(void)ptrace(PTRACE_CONT, pid, 0, (void *)(uintptr_t)WSTOPSIG(wstatus));
	}
	return true;
}

/* Whether the environment at envp (in pid) preloads the allocator and hands
 * on the run's DIEHARD_CLOCKS (clocks) as it is: the new image patches
 * itself (exec.c's check, made here for an exec it did not see). */
static bool env_keeps_us(pid_t pid, uint64_t envp, const char *allocator, const char *clocks)
{
	struct envkeep k = { false, false };
	size_t alen = strlen(allocator);
	for (unsigned i = 0; i < 4096; i++) {
		uint64_t p;
		if (remote_read_all(pid, envp + 8 * (uint64_t)i, &p, sizeof p) != 0 || p == 0)
			break;
		char buf[4096];
		int err = remote_read_string(pid, p, buf, sizeof buf);
		if (err != 0 && err != -ENAMETOOLONG)
			continue;
		buf[sizeof buf - 1] = '\0';
		envkeep_entry(&k, buf, allocator, alen, clocks);
	}
	return envkeep_ok(&k);
}

/* An execve that exec.c's wrapper did not mark: one whose environment
 * keeps libdiehard goes on (its image patches itself); any other process
 * is traced to its exec, where its new image is patched (virt_traced). */
enum answer images_execve(struct vreplica *vr, const struct seccomp_notif *req)
{
	struct virt *V = vr->V;
	if (V->fast == NULL)
		return CONTINUE;
	bool at = req->data.nr == SYS_execveat;
	pid_t pid = (pid_t)req->pid;
	if (env_keeps_us(pid, req->data.args[at ? 3 : 2], V->S->o->allocator, fastclock_env(V->fast)))
		return CONTINUE;
	for (struct traced *t = V->traced; t != NULL; t = t->next)
		if (t->pid == pid)
			return CONTINUE; /* an earlier try of the same exec (execvp's PATH) */
	pid_t tgid = remote_thread_group(pid);
	if (tgid < 0)
		tgid = pid; /* matched by its own id at the exec stop */
	if (ptrace(PTRACE_SEIZE, pid, 0, PTRACE_O_TRACEEXEC) != 0) {
		vr->unvirtualized++;
		log_warn("replica %u: cannot trace pid %d to its exec (%s): the program it starts without "
			 "libdiehard reads the real clocks", V->S->r[vr->index].id, (int)pid, strerror(errno));
		return CONTINUE;
	}
	struct traced *t = malloc(sizeof *t);
	if (t == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	*t = (struct traced){ .pid = pid, .tgid = tgid, .slot = vr->index, .next = V->traced };
	V->traced = t;
	return CONTINUE;
}
