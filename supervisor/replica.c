/* replica.c — one replica's life: started with its pipes and events,
 * signalled as a process group, killed when it leaves the vote, reaped. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "exitcode.h"
#include "fencelog.h"
#include "log.h"
#include "net.h"
#include "notify.h"
#include "sandbox.h"
#include "spawn.h"
#include "replay.h"
#include "sup.h"
#include "svcenv.h"

#define PIPE_BYTES (256 << 10)


void replica_close_input(struct replica *r)
{
	if (r->in_fd < 0)
		return;
	event_free(r->in_ev);
	r->in_ev = NULL;
	close(r->in_fd);
	r->in_fd = -1;
}


void replica_close_output(struct replica *r, int s)
{
	if (r->out_fd[s] < 0)
		return;
	event_free(r->out_ev[s]);
	r->out_ev[s] = NULL;
	close(r->out_fd[s]);
	r->out_fd[s] = -1;
	r->eof[s] = true;
}


/* Signals a replica's process group (it leads one: spawn.c), as a terminal
 * signals a whole job, so its own children get it too. A sandboxed one's
 * init does that for us (and SIGKILL to the init ends them all). */
void replica_signal(struct replica *r, int sig)
{
	/* Never 0 or -1: kill() would take those as our own process group or
	 * every process we may signal. */
	if (r->pid <= 0)
		return;
	if (r->status_fd >= 0) {
		/* SIGSTOP would stop the init, not the program: the init
		 * turns SIGTSTP into SIGSTOP for the program's group. SIGKILL
		 * to the init would lose the status the program may already
		 * have (a crash): the program is killed here, at once, as
		 * before, and the init kills the rest of its group. */
		if (sig == SIGSTOP)
			sig = SIGTSTP;
		if (sig == SIGKILL) {
			if (r->program_pid > 0 && kill(r->program_pid, SIGKILL) != 0 && errno != ESRCH)
				log_warn("cannot kill replica %u's program (pid %d): %s", r->index,
					 (int)r->program_pid, strerror(errno));
			sig = SANDBOX_KILL_SIGNAL;
		}
		if (kill(r->pid, sig) != 0 && errno != ESRCH)
			log_warn("cannot signal replica %u (pid %d): %s", r->index, (int)r->pid, strerror(errno));
		return;
	}
	if (kill(-r->pid, sig) != 0 && kill(r->pid, sig) != 0 && errno != ESRCH)
		log_warn("cannot signal replica %u (pid %d): %s", r->index, (int)r->pid, strerror(errno));
}


/* Takes r out of the vote for good and kills it. */
/* Takes r out of the vote (or out of catching up) for good, kills it, and
 * asks for a replacement. */
void replica_kill(struct sup *S, struct replica *r, const char *why)
{
	if (!r->live && !r->joining)
		return;
	r->live = false;
	r->joining = false;
	r->killed = true;
	snprintf(r->why, sizeof r->why, "%s", why);
	if (!r->exited)
		replica_signal(r, SIGKILL);
	log_event("kill replica %u (pid %d): %s", r->id, (int)r->pid, why);
	if (S->notify != NULL)
		notify_replica_gone(S->notify, r->index);
	net_replica_gone(S->net, r->index);
	if (S->virt != NULL)
		virt_retire(S->virt, r->index, true);
	report_kill(S->report, r->id, why, sup_now() - S->t_start);
	report_input_fed(S->report, r->id, r->in_off);
	replica_close_input(r);
	for (int s = 0; s < NSTREAMS; s++)
		replica_close_output(r, s);
	input_update(S); /* it may have been the slowest reader */
	replace_request(S);
}


void replicas_kill_all(struct sup *S)
{
	/* At the end, or when nothing can start: no status is wanted any
	 * more, and a sandboxed replica's init goes too (with it everything
	 * in its namespace). */
	for (unsigned i = 0; i < S->nslots; i++) {
		struct replica *r = &S->r[i];
		if (!r->used || r->exited)
			continue;
		if (r->status_fd < 0)
			replica_signal(r, SIGKILL);
		else if (r->pid > 0 && kill(r->pid, SIGKILL) != 0 && errno != ESRCH)
			log_warn("cannot kill replica %u (pid %d): %s", r->id, (int)r->pid, strerror(errno));
	}
}


/* A sandboxed replica's status is its program's, which the init wrote
 * before it exited; an init that wrote nothing was killed (by us, or from
 * outside) and its status is the replica's. */
int replica_program_status(int *status_fd, int init_status)
{
	if (*status_fd < 0)
		return init_status;
	int st, status = init_status;
	ssize_t n;
	do
		n = read(*status_fd, &st, sizeof st);
	while (n < 0 && errno == EINTR);
	if (n == (ssize_t)sizeof st)
		status = st;
	close(*status_fd);
	*status_fd = -1;
	return status;
}

void replicas_reap(struct sup *S)
{
	for (;;) {
		int wstatus;
		pid_t pid = waitpid(-1, &wstatus, WNOHANG);
		if (pid <= 0)
			break;
		if (S->virt != NULL && virt_traced(S->virt, pid, wstatus))
			continue;
		if (replace_reap_zombie(S, pid, wstatus))
			continue;
		for (unsigned i = 0; i < S->nslots; i++) {
			struct replica *r = &S->r[i];
			if (!r->used || r->pid != pid || r->exited)
				continue;
			r->exited = true;
			r->wstatus = wstatus = replica_program_status(&r->status_fd, wstatus);
			if (S->virt != NULL)
				virt_retire(S->virt, i, false);
			r->end_time = sup_now() - S->t_start;
			report_exit(S->report, r->id, replica_status(wstatus),
				    WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0, r->end_time);
			if (!r->killed)
				report_input_fed(S->report, r->id, r->in_off);
			fencelog_collect(S->fencelog, i);
			if (WIFSIGNALED(wstatus))
				log_event("replica %u (pid %d) killed by signal %d", r->id, (int)pid, WTERMSIG(wstatus));
			else
				log_event("replica %u (pid %d) exited with %d", r->id, (int)pid, WEXITSTATUS(wstatus));
			/* A SIGKILL we did not send most likely came from outside
			 * (the OOM killer, a person): output.c does not let its
			 * end of output count while other voters still run. */
			r->sigkilled = WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL && !r->killed;
			if (S->notify != NULL && !r->killed)
				notify_replica_gone(S->notify, i);
			net_replica_gone(S->net, i);
		}
	}
}


static void seed_from_urandom(uint64_t seed[2])
{
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, seed, 2 * sizeof seed[0]) != (ssize_t)(2 * sizeof seed[0]))
		fatal(EXIT_INTERNAL, "cannot read /dev/urandom: %s", strerror(errno));
	close(fd);
}


static void set_nonblocking(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0)
		fatal(EXIT_INTERNAL, "fcntl: %s", strerror(errno));
}


/* Resets slot i for a new process; the one it held, if killed and not yet
 * reaped, is remembered so that its exit still reaches the report. */
static void slot_reset(struct sup *S, struct replica *r)
{
	if (r->used && !r->exited) {
		replace_zombie(S, r->pid, r->id, r->status_fd);
		r->status_fd = -1;
	}
	if (r->status_fd >= 0)
		close(r->status_fd);
	unsigned i = r->index;
	if (r->net_fd >= 0)
		close(r->net_fd);
	*r = (struct replica){ .index = i, .in_fd = -1, .status_fd = -1, .net_fd = -1, .out_fd = { -1, -1 },
			       .replaces = -1 };
	for (int s = 0; s < NSTREAMS; s++) {
		r->ring[s] = arena_ring(S->arena, i * NSTREAMS + (unsigned)s);
		r->ring[s]->head = r->ring[s]->tail = 0;
		digest_init(&r->dg[s], &S->dkey);
	}
}


/* A replica between its fork and the child's word (spawn.h). */
struct launch {
	int in[2], out[NSTREAMS][2];
	char **envp;
	char *extra[64];   /* the variables of ci.h and notify.h, not owned */
	struct spawn_request req;
	struct spawn_pending sp;
	struct spawn_result res;
	pid_t pid;
	bool replacement;
	unsigned slot;
};

/* The replica's own variables: --ci's (ci.h), the service's (notify.h:
 * its notify socket, made here, its watchdog, its sockets), fence
 * mode's log (fencelog.h) and the fast clock path's (virt.h). */
static char *const *extra_env(struct sup *S, struct launch *L, struct replica *r, bool sandboxed)
{
	char *const *lists[4] = { ci_setup(S, r, L->replacement, sandboxed),
				  S->notify != NULL ? notify_replica_env(S->notify, r->index) : NULL,
				  fencelog_env(S->fencelog, r->index),
				  S->virt != NULL ? virt_replica_env(S->virt, r->index) : NULL };
	size_t n = 0;
	for (int l = 0; l < 4; l++)
		for (size_t i = 0; lists[l] != NULL && lists[l][i] != NULL; i++) {
			if (n + 1 >= sizeof L->extra / sizeof L->extra[0])
				fatal(EXIT_INTERNAL, "too many variables for a replica");
			L->extra[n++] = lists[l][i];
		}
	L->extra[n] = NULL;
	return L->extra;
}

/* The first half of a start: pipes, a fresh seed, the fork. */
static void launch(struct sup *S, unsigned i, struct launch *L, bool replacement)
{
	struct replica *r = &S->r[i];
	if (pipe2(L->in, O_CLOEXEC) != 0 || pipe2(L->out[0], O_CLOEXEC) != 0 || pipe2(L->out[1], O_CLOEXEC) != 0)
		fatal(EXIT_INTERNAL, "pipe: %s", strerror(errno));
	/* Bigger pipes: fewer wake-ups and system calls per byte (a 64 KiB pipe
	 * costs diehard a third more CPU on a 1 GB stream). 256 KiB keeps k=16's
	 * 48 pipes well inside the per-user pipe memory, past which new pipes
	 * would shrink to one page. A refusal is harmless. */
	(void)fcntl(L->in[1], F_SETPIPE_SZ, PIPE_BYTES);
	(void)fcntl(L->out[0][0], F_SETPIPE_SZ, PIPE_BYTES);
	(void)fcntl(L->out[1][0], F_SETPIPE_SZ, PIPE_BYTES);
	if (S->virt != NULL && r->used)
		virt_detach(S->virt, i);
	ci_retire(S, r);
	slot_reset(S, r);
	seed_from_urandom(r->seed);
	L->replacement = replacement;
	L->slot = i;
	L->envp = spawn_environment(S->o->allocator, r->seed, r->fill, extra_env(S, L, r, S->ns_flags != 0));
	int clock_dir = -1, clock_fd = S->virt != NULL ? virt_clock_fds(S->virt, i, &clock_dir) : -1;
	L->req = (struct spawn_request){ .path = S->o->path, .argv = S->o->argv, .envp = L->envp,
					 .fds = { L->in[0], L->out[0][1], L->out[1][1] }, .pipe_ignored = S->pipe_ignored,
					 .filter = &S->filter, .listener = S->virt != NULL, .exec_mark = S->exec_mark,
					 .nofile = &S->nofile,
					 .ns_flags = S->ns_flags, .init_path = S->o->init_path,
					 .clock_fd = clock_fd, .clock_dir = clock_dir,
					 .stop_before_exec = S->o->replay != NULL && S->o->replay->gdb,
					 .npass = S->o->replay != NULL ? 0 : svcenv_get()->listen_fds };
	L->pid = spawn_start(&L->req, &L->sp, &L->res);
}

/* The second half: the child's word, and, should the kernel refuse the
 * namespaces, the start again without them (or the end of the run). */
static pid_t finish(struct sup *S, struct launch *L)
{
	pid_t pid = L->pid >= 0 ? spawn_finish(&L->sp, &L->res) : -1;
	while (pid < 0 && L->res.ns_errno != 0 && L->req.ns_flags != 0) {
		/* Refused with the flags in force: fewer namespaces (said
		 * once), or the end. Replicas launched with more meanwhile
		 * just start again with what is now in force. */
		if (L->req.ns_flags == S->ns_flags && !sup_sandbox_refused(S, L->res.ns_errno))
			break;
		L->req.ns_flags = S->ns_flags;
		L->req.filter = &S->filter; /* rebuilt for a replica without namespaces */
		/* Without namespaces its pids are no longer its own: its fill
		 * may not be keyed by them. */
		struct replica *r = &S->r[L->slot];
		spawn_environment_free(L->envp);
		L->envp = spawn_environment(S->o->allocator, r->seed, r->fill, extra_env(S, L, r, S->ns_flags != 0));
		L->req.envp = L->envp;
		pid = spawn_replica(&L->req, &L->res);
	}
	if (pid >= 0 && L->req.ns_flags != 0)
		sup_sandbox_started(S);
	spawn_environment_free(L->envp);
	L->envp = NULL;
	return pid;
}

static void attach(struct sup *S, unsigned i, struct launch *L, int replaces, const uint64_t old_seed[2],
		   const char *why)
{
	struct replica *r = &S->r[i];
	pid_t pid = finish(S, L);
	struct spawn_result res = L->res;
	int exec_errno = res.exec_errno, listener = res.listener;
	int in[2] = { L->in[0], L->in[1] }, out[NSTREAMS][2] = { { L->out[0][0], L->out[0][1] },
								 { L->out[1][0], L->out[1][1] } };
	if (pid < 0) {
		int err = errno;
		int code = exec_errno == ENOENT ? EXIT_NOT_FOUND : exec_errno ? EXIT_CANNOT_EXEC : EXIT_INTERNAL;
		replicas_kill_all(S);
		if (res.ns_errno != 0)
			fatal(EXIT_INTERNAL, "cannot make replica %u's namespaces (%s): %s (%s)", S->next_id,
			      sandbox_describe(S->ns_flags), strerror(res.ns_errno),
			      S->ns_flags & CLONE_NEWNET ? "--net host runs without a network namespace, --sandbox off "
							   "without any"
							 : "--sandbox off runs without");
		if (exec_errno == 0 && err == EBUSY)
			fatal(code, "cannot install the seccomp filter in a replica: %s (another seccomp listener, such "
				    "as an outer diehard's, watches this process; --no-virtualize runs without one)",
			      strerror(err));
		if (exec_errno == 0 && S->virt != NULL && (err == EINVAL || err == EACCES || err == EFAULT))
			fatal(code, "cannot install the seccomp filter in a replica: %s (Linux 5.19 or later is needed; "
				    "--no-virtualize runs without it)", strerror(err));
		if (exec_errno == 0)
			fatal(code, "cannot start replica %u: %s", S->next_id, strerror(err));
		fatal(code, "%s: %s", S->o->argv[0], strerror(err));
	}
	r->pid = pid;
	r->status_fd = res.status_fd;
	r->net_fd = res.net_fd;
	r->program_pid = res.program_pid;
	r->used = true;
	r->exited = false;
	r->id = S->next_id++;
	r->replaces = replaces;
	r->spawn_time = sup_now() - S->t_start;
	if (S->virt != NULL)
		virt_attach(S->virt, i, listener);
	close(in[0]);
	close(out[0][1]);
	close(out[1][1]);
	/* A replacement is fed from the input log (never holding back the
	 * input ring) and votes once it has caught up. Without a log, only a
	 * run that has dropped no input yet can be replayed: from the ring. */
	bool replacement = why != NULL;
	r->joining = replacement;
	r->replacement = replacement;
	r->live = !replacement;
	r->log_fed = replacement && inputlog_complete(S->inlog);
	r->in_fd = in[1];
	set_nonblocking(r->in_fd);
	r->in_arg = (struct input_arg){ S, r };
	r->in_ev = event_new(S->base, r->in_fd, EV_WRITE | EV_PERSIST, input_on_writable, &r->in_arg);
	for (int s = 0; s < NSTREAMS; s++) {
		r->out_fd[s] = out[s][0];
		set_nonblocking(r->out_fd[s]);
		r->out_arg[s] = (struct output_arg){ S, r, s };
		r->out_ev[s] = event_new(S->base, r->out_fd[s], EV_READ | EV_PERSIST, output_on_readable, &r->out_arg[s]);
		if (r->out_ev[s] == NULL || event_add(r->out_ev[s], NULL) != 0)
			fatal(EXIT_INTERNAL, "cannot watch replica %u's output", r->id);
	}
	if (r->in_ev == NULL)
		fatal(EXIT_INTERNAL, "cannot watch replica %u's input", r->id);
	report_replica(S->report, r->id, i, r->pid, r->seed, r->spawn_time);
	ci_started(S, r);
	fencelog_started(S->fencelog, i, r->id);
	if (S->notify != NULL)
		notify_replica_started(S->notify, i);
	/* Its init's socket channel is the proxy's (or, without one, of no
	 * use). */
	if (S->net != NULL)
		net_replica_started(S->net, i, r->net_fd);
	else if (r->net_fd >= 0)
		close(r->net_fd);
	r->net_fd = -1;
	if (S->o->replay != NULL && S->o->replay->gdb)
		replay_debugger(S->o->replay, r->program_pid > 0 ? r->program_pid : r->pid);
	if (!replacement) {
		log_event("spawn replica %u (pid %d) seed %016" PRIx64 "%016" PRIx64, r->id, (int)r->pid, r->seed[1],
			  r->seed[0]);
		return;
	}
	size_t input = inputlog_bytes(S->inlog);
	char was[64] = "";
	if (replaces >= 0)
		snprintf(was, sizeof was, ", whose seed was %016" PRIx64 "%016" PRIx64, old_seed[1], old_seed[0]);
	log_event("spawn replica %u (pid %d) seed %016" PRIx64 "%016" PRIx64 ": %s%s; it runs the command again "
		  "from the start, replaying %zu input bytes and the logged clock and random values (files it "
		  "writes are written again)",
		  r->id, (int)r->pid, r->seed[1], r->seed[0], why, was, input);
	report_replacement(S->report, r->id, i, replaces, replaces >= 0 ? old_seed : NULL, r->seed, why,
			   r->spawn_time, input);
	/* Input already read goes to it at once; a run with nothing committed
	 * yet has it vote at once. */
	input_on_writable(-1, 0, &r->in_arg);
	replace_check_joined(S, r);
}


void replica_start(struct sup *S, unsigned i, int replaces, const uint64_t *old_seed_in, const char *why)
{
	uint64_t old_seed[2] = { 0, 0 };
	if (old_seed_in != NULL)
		memcpy(old_seed, old_seed_in, sizeof old_seed);
	struct launch L;
	launch(S, i, &L, why != NULL);
	attach(S, i, &L, replaces, old_seed, why);
}


void replicas_start(struct sup *S, unsigned n)
{
	/* All forked first: their namespaces and execs overlap. */
	struct launch *L = calloc(n, sizeof *L);
	if (L == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	for (unsigned i = 0; i < n; i++)
		launch(S, i, &L[i], false);
	for (unsigned i = 0; i < n; i++)
		attach(S, i, &L[i], -1, NULL, NULL);
	free(L);
}
