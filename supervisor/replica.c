/* replica.c — one replica's life: started with its pipes and events,
 * signalled as a process group, killed when it leaves the vote, reaped.
 *
 * A kill must end the replica even when something outside stopped it
 * (SIGSTOP to its init, its program or anything it started): SIGKILL ends
 * a stopped process, but a sandboxed replica's init takes its "kill your
 * group" signal only once it runs, so it is continued too; should it still
 * not end (stopped again), its init is SIGKILLed KILL_GRACE later. Killed
 * processes never hold the run's end (supervisor.c); at the end every one
 * still there is SIGKILLed and reaped, for a bounded time. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "caps.h"
#include "exitcode.h"
#include "fencelog.h"
#include "files.h"
#include "filter.h"
#include "log.h"
#include "net.h"
#include "notify.h"
#include "sandbox.h"
#include "spawn.h"
#include "remote.h"
#include "replay.h"
#include "sup.h"
#include "svcenv.h"

#define PIPE_BYTES (256 << 10)
/* How long a killed replica may take to end before its init is SIGKILLed
 * (its program's status then unknown): it ends in milliseconds unless
 * something keeps it stopped. */
#define KILL_GRACE 1.0
/* At the end: how long a replica killed in the run may still take to end
 * by itself (its init then reports its program's status) before its init
 * is SIGKILLed, and how long SIGKILLed processes are waited for (a process
 * in an uninterruptible sleep may take longer; it is left to the kernel). */
#define END_GRACE 0.1
#define REAP_END 2.0
/* At most this many of a replica's processes are looked at for a stopped
 * one (the kill's reason says which). */
#define PROBE_MAX 256


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
		/* A stopped init (SIGSTOP from outside: diehard never stops
		 * one) would take its kill signal only once continued: the
		 * replica's end, and the run's, would wait for whoever stopped
		 * it. SIGCONT continues it even though it blocks every signal;
		 * it forwards the SIGCONT to a group that is dying anyway. */
		if (sig == SANDBOX_KILL_SIGNAL && kill(r->pid, SIGCONT) != 0 && errno != ESRCH)
			log_warn("cannot continue replica %u's init (pid %d): %s", r->index, (int)r->pid,
				 strerror(errno));
		return;
	}
	if (kill(-r->pid, sig) != 0 && kill(r->pid, sig) != 0 && errno != ESRCH)
		log_warn("cannot signal replica %u (pid %d): %s", r->index, (int)r->pid, strerror(errno));
}


/* The state letter of pid's /proc/PID/stat ('T': stopped by a signal),
 * or 0 when it cannot be read. */
static char proc_state(pid_t pid)
{
	char state;
	pid_t ppid;
	return remote_stat(pid, &state, &ppid) ? state : 0;
}

/* Appends the children of pid (of each of its threads) to list[n..max). */
static size_t children_of(pid_t pid, pid_t *list, size_t n, size_t max)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	if (d == NULL)
		return n;
	struct dirent *e;
	while (n < max && (e = readdir(d)) != NULL) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9' || strlen(e->d_name) > 10)
			continue;
		char cpath[96];
		snprintf(cpath, sizeof cpath, "/proc/%d/task/%s/children", (int)pid, e->d_name);
		FILE *f = fopen(cpath, "re");
		if (f == NULL)
			continue;
		long c;
		while (n < max && fscanf(f, "%ld", &c) == 1)
			if (c > 1 && c <= INT32_MAX)
				list[n++] = (pid_t)c;
		fclose(f);
	}
	closedir(d);
	return n;
}

/* Whether one of r's processes is stopped (SIGSTOP, SIGTSTP, SIGTTIN,
 * SIGTTOU: state T) as it is killed: its init, its program, or anything
 * it started (the first PROBE_MAX of them, breadth first). diehard stops
 * replicas only while it is stopped itself, so such a stop came from
 * outside (or from the program). Said in the kill's reason and the report. */
static void probe_stopped(struct replica *r)
{
	pid_t list[PROBE_MAX];
	size_t n = 0;
	if (r->pid <= 0 || r->exited)
		return;
	list[n++] = r->pid;
	for (size_t i = 0; i < n; i++) {
		if (proc_state(list[i]) == 'T') {
			r->found_stopped = i > 0 && list[i] != r->program_pid ? "descendant"
					   : r->status_fd >= 0 && i == 0     ? "init"
									     : "program";
			r->found_stopped_pid = list[i];
			return;
		}
		n = children_of(list[i], list, n, PROBE_MAX);
	}
}

bool replica_joining(const struct sup *S, const struct replica *r)
{
	return r->joining || (r->live && !r->exited && !net_takes_clients(S->net, r->index));
}

bool replica_in_run(const struct replica *r)
{
	return r->used && (r->live || r->joining) && !r->killed && !r->exited;
}

bool replica_dying(struct sup *S, struct replica *r)
{
	if (!r->used || r->exited || r->pid <= 0)
		return false;
	/* Asked for every peer of every connection whose reply ended, at
	 * each vote: two system calls each. The answer holds for the loop
	 * turn (libevent's cached time, no system call), as if asked at its
	 * start; a death stays one. */
	struct timeval turn;
	if (event_base_gettimeofday_cached(S->base, &turn) != 0)
		turn = (struct timeval){ 0, 0 };
	if (r->dying_pid == r->pid &&
	    (r->dying || (turn.tv_sec != 0 && turn.tv_sec == r->dying_turn.tv_sec && turn.tv_usec == r->dying_turn.tv_usec)))
		return r->dying;
	bool dying = false;
	/* Sandboxed, its program: its pidfd reads as soon as the whole
	 * process has ended (not while a thread of it runs on after its
	 * main thread ended); then diehard's own child (the init, or the
	 * program itself), looked at without reaping it. */
	if (r->program_pidfd >= 0) {
		struct pollfd pfd = { .fd = r->program_pidfd, .events = POLLIN };
		if (poll(&pfd, 1, 0) > 0 && (pfd.revents & POLLIN))
			dying = true;
	}
	if (!dying) {
		siginfo_t si = { 0 };
		dying = waitid(P_PID, (id_t)r->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == r->pid;
	}
	r->dying_pid = r->pid;
	r->dying = dying;
	r->dying_turn = turn;
	return dying;
}

void replica_dying_forget(struct replica *r)
{
	r->dying_turn = (struct timeval){ 0, 0 };
}

/* Takes r out of the vote (or out of catching up) for good, kills it, and
 * asks for a replacement. */
void replica_kill(struct sup *S, struct replica *r, const char *why)
{
	if (!r->live && !r->joining)
		return;
	char over[128]; /* room in r->why for what replica_kill adds */
	if (overcap_over(S, r, over, sizeof over))
		why = over;
	r->live = false;
	r->joining = false;
	r->killed = true;
	r->killed_at = sup_now();
	probe_stopped(r);
	if (r->found_stopped == NULL)
		snprintf(r->why, sizeof r->why, "%s", why);
	else
		snprintf(r->why, sizeof r->why, "%s; %s (pid %d) was stopped", why,
			 strcmp(r->found_stopped, "init") == 0	    ? "its init"
			 : strcmp(r->found_stopped, "program") == 0 ? "its program"
								    : "a process it started",
			 (int)r->found_stopped_pid);
	if (!r->exited)
		replica_signal(r, SIGKILL);
	overcap_killed(S, r);
	log_event("kill replica %u (pid %d): %s", r->id, (int)r->pid, r->why);
	if (S->notify != NULL)
		notify_replica_gone(S->notify, r->index);
	net_replica_gone(S->net, r->index);
	if (S->virt != NULL)
		virt_retire(S->virt, r->index, true);
	report_kill(S->report, r->id, r->why, sup_now() - S->t_start);
	if (r->found_stopped != NULL)
		report_found_stopped(S->report, r->id, r->found_stopped, r->found_stopped_pid);
	report_input_fed(S->report, r->id, r->in_off);
	replica_close_input(r);
	for (int s = 0; s < NSTREAMS; s++)
		replica_close_output(r, s);
	input_update(S); /* it may have been the slowest reader */
	replace_request(S);
	sup_degraded_tick(S);
}


/* SIGKILL to a replica's process: a sandboxed one's init (the kernel then
 * kills everything in its namespace; the program's status is lost unless
 * the init wrote it already), else its process group. Stopped or not. */
static void kill_outright(pid_t pid, bool sandboxed, unsigned id)
{
	if (pid <= 0)
		return;
	if (!sandboxed && kill(-pid, SIGKILL) == 0)
		return;
	if (kill(pid, SIGKILL) != 0 && errno != ESRCH)
		log_warn("cannot kill replica %u (pid %d): %s", id, (int)pid, strerror(errno));
}

void replicas_kill_all(struct sup *S)
{
	/* At the end, or when nothing can start: no status is wanted any
	 * more, and a sandboxed replica's init goes too (with it everything
	 * in its namespace). Killed processes not reaped yet go the same way. */
	for (unsigned i = 0; i < S->nslots; i++) {
		struct replica *r = &S->r[i];
		if (r->used && !r->exited)
			kill_outright(r->pid, r->status_fd >= 0, r->id);
	}
	for (size_t z = 0; z < S->nzombies; z++)
		kill_outright(S->zombies[z].pid, S->zombies[z].status_fd >= 0, S->zombies[z].id);
}

void replicas_force(struct sup *S)
{
	double t = sup_now();
	for (unsigned i = 0; i < S->nslots; i++) {
		struct replica *r = &S->r[i];
		if (!r->used || !r->killed || r->exited || r->forced || t - r->killed_at <= KILL_GRACE)
			continue;
		r->forced = true;
		log_event("replica %u (pid %d) still there %.1f s after its kill: SIGKILL to %s", r->id, (int)r->pid,
			  KILL_GRACE, r->status_fd >= 0 ? "its init" : "its process group");
		kill_outright(r->pid, r->status_fd >= 0, r->id);
	}
	for (size_t z = 0; z < S->nzombies; z++) {
		struct zombie *o = &S->zombies[z];
		if (o->forced || t - o->killed_at <= KILL_GRACE)
			continue;
		o->forced = true;
		log_event("replica %u (pid %d) still there %.1f s after its kill: SIGKILL to %s", o->id, (int)o->pid,
			  KILL_GRACE, o->status_fd >= 0 ? "its init" : "its process group");
		kill_outright(o->pid, o->status_fd >= 0, o->id);
	}
}

/* Reaps pid if it has ended: true (and *wstatus) then, or when it is no
 * child of ours any more. A stop (it is traced by us too) is not an end. */
static bool reaped(pid_t pid, int *wstatus)
{
	int st = 0;
	pid_t p;
	do
		p = waitpid(pid, &st, WNOHANG);
	while (p < 0 && errno == EINTR);
	if (p < 0) {
		*wstatus = W_EXITCODE(0, SIGKILL);
		return true; /* ECHILD: reaped already */
	}
	if (p == 0 || WIFSTOPPED(st) || WIFCONTINUED(st))
		return false;
	*wstatus = st;
	return true;
}

void replicas_end(struct sup *S)
{
	/* What still runs is killed at once; what was killed in the run,
	 * and continued then, has END_GRACE to end by itself. */
	for (unsigned i = 0; i < S->nslots; i++) {
		struct replica *r = &S->r[i];
		if (r->used && !r->exited && !r->killed)
			kill_outright(r->pid, r->status_fd >= 0, r->id);
	}
	struct timespec pause = { 0, 1000000 };
	double start = sup_now();
	bool forced = false;
	for (;;) {
		bool left = false;
		for (unsigned i = 0; i < S->nslots; i++) {
			struct replica *r = &S->r[i];
			int st;
			if (!r->used || r->exited || r->pid <= 0)
				continue;
			if (!reaped(r->pid, &st)) {
				left = true;
				continue;
			}
			r->exited = true;
			r->wstatus = st = replica_program_status(&r->status_fd, st);
			/* Killed in the run, its end is in the report as the end
			 * of any killed replica; one the run's end killed has
			 * none, as ever. */
			if (r->killed) {
				report_exit(S->report, r->id, replica_status(st), WIFSIGNALED(st) ? WTERMSIG(st) : 0,
					    sup_now() - S->t_start);
				/* What killed it first (a SIGSYS of the filter's,
				 * before our kill reached it) is said as when it is
				 * reaped in the run. */
				const char *cause = replica_signal_cause(S, r->id, st);
				if (cause != NULL)
					log_event("replica %u (pid %d) killed by signal %d (%s)", r->id, (int)r->pid,
						  WTERMSIG(st), cause);
			}
		}
		for (size_t z = 0; z < S->nzombies;) {
			int st;
			if (!reaped(S->zombies[z].pid, &st)) {
				left = true;
				z++;
				continue;
			}
			(void)replace_reap_zombie(S, S->zombies[z].pid, st); /* takes it off the list */
		}
		if (!left)
			return;
		double t = sup_now() - start;
		if (!forced && t > END_GRACE) {
			replicas_kill_all(S);
			forced = true;
		}
		if (t > END_GRACE + REAP_END) {
			log_event("replicas still there %.1f s after SIGKILL at the end: left to the kernel", REAP_END);
			return;
		}
		nanosleep(&pause, NULL);
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

const char *replica_signal_cause(struct sup *S, unsigned id, int wstatus)
{
	const char *cause = WIFSIGNALED(wstatus) ? filter_kill_cause(WTERMSIG(wstatus)) : NULL;
	if (cause != NULL)
		report_signal_cause(S->report, id, cause);
	return cause;
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
			if (!r->killed)
				files_ended(S, r);
			const char *cause = replica_signal_cause(S, r->id, wstatus);
			if (WIFSIGNALED(wstatus))
				log_event("replica %u (pid %d) killed by signal %d%s%s%s", r->id, (int)pid, WTERMSIG(wstatus),
					  cause ? " (" : "", cause ? cause : "", cause ? ")" : "");
			else
				log_event("replica %u (pid %d) exited with %d", r->id, (int)pid, WEXITSTATUS(wstatus));
			overcap_reaped(S, r);
			/* A SIGKILL we did not send most likely came from outside
			 * (the OOM killer, a person): output.c does not let its
			 * end of output count while other voters still run. */
			r->sigkilled = WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL && !r->killed;
			replace_give_back(S, r);
			if (S->notify != NULL && !r->killed)
				notify_replica_gone(S->notify, i);
			net_replica_gone(S->net, i);
			/* A server's clients come on without it: out of the vote
			 * now (status, the degraded state, a fresh join's quiet
			 * point), not once another voter wrote past its end. A
			 * replacement on its way (catching up, a fresh server
			 * waiting to join) likewise: its slot is for another. */
			if (r->sigkilled && (r->live || r->joining) && sup_serves(S))
				replica_kill(S, r, "killed by a SIGKILL from outside diehard while the run serves");
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
		replace_zombie(S, r->pid, r->id, r->status_fd, r->killed_at);
		r->status_fd = -1;
	}
	if (r->status_fd >= 0)
		close(r->status_fd);
	if (r->program_pidfd >= 0)
		close(r->program_pidfd);
	unsigned i = r->index;
	if (r->net_fd >= 0)
		close(r->net_fd);
	files_release(r);
	*r = (struct replica){ .index = i, .in_fd = -1, .status_fd = -1, .net_fd = -1, .program_pidfd = -1, .out_fd = { -1, -1 },
			       .replaces = -1, .caps = r->caps /* overcap_prepare's */ };
	for (int s = 0; s < NSTREAMS; s++) {
		r->ring[s] = arena_ring(S->arena, i * NSTREAMS + (unsigned)s);
		r->ring[s]->head = r->ring[s]->tail = 0;
		digest_init(&r->dg[s], &S->dkey);
		digest_init(&r->pdg[s], &S->dkey);
	}
}


/* A replica between its fork and the child's word (spawn.h). */
struct launch {
	int in[2], out[NSTREAMS][2];
	char **envp;
	char *extra[64];   /* the variables of ci.h and notify.h, not owned */
	struct spawn_request req;
	struct caps_spawn caps;   /* its cgroup and rlimits (caps.h) */
	struct spawn_pending sp;
	struct spawn_result res;
	pid_t pid;
	bool replacement;
	unsigned slot;
};

/* The replica's own variables: --ci's (ci.h), the service's (notify.h:
 * its notify socket, made here, its watchdog, its sockets), fence
 * mode's log (fencelog.h), the fast clock path's (virt.h) and the file
 * views' (files.h). */
static char *const *extra_env(struct sup *S, struct launch *L, struct replica *r, bool sandboxed)
{
	char *const *lists[5] = { ci_setup(S, r, L->replacement, sandboxed),
				  S->notify != NULL ? notify_replica_env(S->notify, r->index) : NULL,
				  fencelog_env(S->fencelog, r->index),
				  S->virt != NULL ? virt_replica_env(S->virt, r->index) : NULL,
				  files_env(S) };
	size_t n = 0;
	for (int l = 0; l < 5; l++)
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
	overcap_prepare(S, r, &L->caps);
	slot_reset(S, r);
	seed_from_urandom(r->seed);
	/* A durable server's replacement starts from the committed files
	 * (net/fresh.c held new clients for it at a quiet moment). */
	r->from_files = replacement && S->o->durable && net_fresh_start(S->net);
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
					 .npass = S->o->replay != NULL ? 0 : svcenv_get()->listen_fds,
					 .caps = &L->caps, .views = files_plan_for(S, i, r->from_files) };
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
		if (L->req.ns_flags == S->ns_flags && !sup_sandbox_refused(S, L->res.ns_errno, L->res.ns_refused))
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
	/* Views refused: the end, never a silent fall back to the host's
	 * files (docs/FILES.md). */
	if (pid < 0 && L->res.views_errno != 0 && L->req.views != NULL) {
		replicas_kill_all(S);
		fatal(EXIT_INTERNAL, "cannot give replica %u views of its own files: %s (--files shared lets the replicas "
				     "share the file system, each writing it)", S->next_id, strerror(L->res.views_errno));
	}
	spawn_environment_free(L->envp);
	L->envp = NULL;
	return pid;
}

static void attach(struct sup *S, unsigned i, struct launch *L, int replaces, const uint64_t old_seed[2],
		   const char *why)
{
	struct replica *r = &S->r[i];
	pid_t pid = finish(S, L);
	caps_spawn_done(&L->caps);
	struct spawn_result res = L->res;
	int exec_errno = res.exec_errno, listener = res.listener;
	int in[2] = { L->in[0], L->in[1] }, out[NSTREAMS][2] = { { L->out[0][0], L->out[0][1] },
								 { L->out[1][0], L->out[1][1] } };
	if (pid < 0) {
		int err = errno;
		int code = exec_errno == ENOENT ? EXIT_NOT_FOUND : exec_errno ? EXIT_CANNOT_EXEC : EXIT_INTERNAL;
		replicas_kill_all(S);
		if (res.caps_errno != 0)
			fatal(EXIT_INTERNAL, "cannot put replica %u under its caps (%s; %s): %s", S->next_id,
			      caps_how(S->caps, CAPS_TASKS), caps_how(S->caps, CAPS_MEMORY), strerror(res.caps_errno));
		if (res.ns_errno != 0)
			fatal(EXIT_INTERNAL, "cannot make replica %u's namespaces (%s): %s (%s)", S->next_id,
			      sandbox_describe(S->ns_flags), strerror(res.ns_errno),
			      res.ns_refused == CLONE_NEWNET    ? "--net host runs without a network namespace, "
								  "--sandbox off without any"
			      : res.ns_refused == CLONE_NEWUSER ? "--sandbox auto runs without the user namespace, "
								  "--sandbox off without any"
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
	files_started(S, r, res.views_fd);
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
	r->fresh = false; /* net.c says so, at its start */
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
	if (res.program_pidfd >= 0 && (r->program_pidfd = fcntl(res.program_pidfd, F_DUPFD_CLOEXEC, 3)) < 0)
		log_warn("cannot keep replica %u's pidfd: %s", r->id, strerror(errno));
	if (S->notify != NULL)
		notify_replica_started(S->notify, i, res.program_pidfd);
	else if (res.program_pidfd >= 0)
		close(res.program_pidfd);
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
