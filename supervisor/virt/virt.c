/* virt.c — see virt.h. One listener per replica (its descendants share its
 * filter, so their calls arrive there too); each notification is received,
 * dispatched, answered from the nondeterminism log or from the real world,
 * and sent back, all on the supervisor's one loop. The answers are take.c's
 * (the log's side of a call), logcalls.c's (clocks, getrandom, random
 * devices) and images.c's (new program images, exec tracing), sharing
 * virt_int.h; a private network's calls (listen, connect, UDP sockets) are
 * netcalls.c's, and commit points files/'s, on the same path.
 *
 * Rules kept on every notification (each was a bug somewhere else):
 *   - the request is zeroed before each receive (the kernel rejects a dirty
 *     one with EINVAL);
 *   - a receive with nothing pending must not block the loop: the
 *     listener is polled first (the loop also wakes us when it hangs up,
 *     once no process of the replica is left, and before Linux 6.11 a
 *     receive then sleeps for good);
 *   - after reading or writing the caller's memory, the notification id is
 *     checked again before answering: the caller may have died (only
 *     SIGKILL ends a caller we received), and then gets no answer. Its tid
 *     cannot name another process in between: that needs the pid space to
 *     wrap within microseconds. Writes through /proc/TID/mem (the vDSO)
 *     open the file first and check the id before writing: the open file
 *     pins the process that was checked;
 *   - a bad pointer is the caller's EFAULT, never ours;
 *   - memory we may not touch (a non-dumpable program under an unprivileged
 *     diehard) means the call goes on in the kernel, unvirtualized, and is
 *     counted. */
#include "virt.h"
#include "virt_int.h"

#include <errno.h>
#include <inttypes.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "dispute.h"
#include "entropy.h"
#include "exitcode.h"
#include "fastclock.h"
#include "clockpage.h"
#include "lineage.h"
#include "files.h"
#include "log.h"
#include "ndlog.h"
#include "net.h"
#include "netcalls.h"
#include "replay.h"
#include "sup.h"
#include "vdso.h"

/* Linux 6.6: the kernel wakes the supervisor on the CPU of the replica that
 * just stopped in a notified call, and the replica on ours when we answer,
 * instead of waking another CPU each way: a round trip through epoll costs
 * 14 µs instead of 23 on this project's idle 2-CPU VM (bench/virtualize;
 * less on a loaded one). Debian 12's headers predate it. */
#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif

/* A relative sleep: a replacement still replaying the run goes as fast as
 * it can (its clock reads return the logged times anyway); everyone else
 * sleeps in the kernel. */
static enum answer on_sleep(struct vreplica *vr, struct seccomp_notif_resp *resp)
{
	if (!replace_replaying(vr->V->S, &vr->V->S->r[vr->index]))
		return CONTINUE;
	vr->V->skipped_sleeps++;
	resp->val = 0;
	return ANSWER;
}

/* A private network's listen, connect and UDP socket (netcalls.h). */
static enum answer on_net(struct vreplica *vr, const struct seccomp_notif *req, struct seccomp_notif_resp *resp)
{
	enum netcall o = netcalls_handle(vr->V->net, vr->fd, vr->index, vr->gen, req, resp);
	/* A replica that listens is a server: its wall clocks are matched
	 * per thread and its stale values moved to the front (take.c). An
	 * original replica does both in the replica (clockpage.h's serve:
	 * its event loops' threads get lanes); a replacement, whose clocks
	 * replay the past and then join the present (net.c), asks diehard
	 * until they did (virt_fast_join). */
	if (vr->V->fast != NULL && net_listening(vr->V->S->net, vr->index)) {
		if ((vr->V->S->r[vr->index].replacement && !vr->fast_joined) || !vr->V->S->o->lanes)
			fastclock_off(vr->V->fast, vr->index);
		else
			fastclock_serve(vr->V->fast, vr->index);
	}
	switch (o) {
	case NETCALL_ANSWER: return ANSWER;
	case NETCALL_DROP: return DROP;
	case NETCALL_CONTINUE: break;
	}
	return CONTINUE;
}

static enum answer dispatch(struct vreplica *vr, const struct seccomp_notif *req, struct seccomp_notif_resp *resp)
{
	switch (req->data.nr) {
	case SYS_nanosleep:
	case SYS_clock_nanosleep: return on_sleep(vr, resp);
	case SYS_clock_gettime: return logcalls_clock_gettime(vr, req, resp);
	case SYS_gettimeofday: return logcalls_gettimeofday(vr, req, resp);
	case SYS_time: return logcalls_time(vr, req, resp);
	case SYS_getrandom: return logcalls_getrandom(vr, req, resp);
	case SYS_open:
	case SYS_openat: return logcalls_open(vr, req, resp);
	case SYS_arch_prctl: return images_arch_prctl(vr, req);
	case SYS_clone:
	case SYS_clone3:
	case SYS_fork:
	case SYS_vfork: return tasks_clone(vr, req);
	case SYS_execve:
	case SYS_execveat: return images_execve(vr, req);
	case SYS_listen:
	case SYS_connect:
	case SYS_bind:
	case SYS_sendto: return on_net(vr, req, resp);
	case SYS_wait4:
	case SYS_waitid: return anchor_wait(vr, req);
	case SYS_fsync:
	case SYS_fdatasync:
	case SYS_msync:
	case SYS_rename:
	case SYS_renameat:
	case SYS_renameat2:
		anchor_sync(vr, (pid_t)req->pid);
		return files_point(vr->V->S, vr->index, vr->gen, req) ? DROP : CONTINUE;
	case SYS_unlink:
	case SYS_unlinkat: return files_point(vr->V->S, vr->index, vr->gen, req) ? DROP : CONTINUE;
	default: return CONTINUE;
	}
}

static void listener_close(struct vreplica *vr)
{
	if (vr->fd < 0)
		return;
	event_free(vr->ev);
	vr->ev = NULL;
	close(vr->fd);
	vr->fd = -1;
}

static void on_notification(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct vreplica *vr = arg;
	struct pollfd p = { .fd = fd, .events = POLLIN };
	if (poll(&p, 1, 0) < 0)
		return;
	if (!(p.revents & POLLIN)) {
		/* Hung up: no process of this replica is left to notify. */
		if (p.revents & (POLLHUP | POLLERR | POLLNVAL))
			listener_close(vr);
		return;
	}
	struct seccomp_notif req;
	memset(&req, 0, sizeof req);
	if (ioctl(fd, SECCOMP_IOCTL_NOTIF_RECV, &req) != 0) {
		/* ENOENT: the caller died before we got to it. */
		if (errno != EINTR && errno != ENOENT)
			log_warn("replica %u: cannot receive a notification: %s", vr->V->S->r[vr->index].id,
				 strerror(errno));
		return;
	}
	struct seccomp_notif_resp resp = { .id = req.id };
	switch (dispatch(vr, &req, &resp)) {
	case CONTINUE:
		resp = (struct seccomp_notif_resp){ .id = req.id, .flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE };
		break;
	case DROP:
		return;
	case ANSWER:
		break;
	}
	struct virt *V = vr->V; /* vr may be retired below: the loop goes on */
	if (ioctl(fd, SECCOMP_IOCTL_NOTIF_SEND, &resp) != 0 && errno != ENOENT)
		log_warn("replica %u: cannot answer a notification: %s", V->S->r[vr->index].id, strerror(errno));
	take_kill_forged(V);
}

/* Why leaders read the real clock by system call when the vDSO's entry
 * cannot be relocated (vdso.h): said in the log and in the report. */
#define NO_VDSO_REAL "the vDSO's clock_gettime cannot be entered past its first instructions"

struct virt *virt_new(struct sup *S)
{
	struct virt *V = calloc(1, sizeof *V);
	if (V == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	V->S = S;
	const struct replay *rp = S->o->replay;
	if (rp != NULL)
		memcpy(V->key, rp->rec->key.data, sizeof V->key);
	else if (getrandom(V->key, sizeof V->key, 0) != (ssize_t)sizeof V->key)
		fatal(EXIT_INTERNAL, "cannot read the run's random key: %s", strerror(errno));
	/* With replacements, entries are kept from the start of the run (up
	 * to --call-log per kind) so that a new replica replays them; so they
	 * are for a recording, and a replay's are the recording's. */
	bool keep = S->o->respawns > 0 || S->o->record || rp != NULL;
	V->log = ndlog_new(S->nslots, rp != NULL ? SIZE_MAX : S->o->call_log, keep);
	if (V->log != NULL)
		ndlog_reclaim(V->log, take_reclaimable); /* threads end: their keys go */
	/* A fresh server replays the run's start-up and then joins at the
	 * front: past the cap the log still keeps each kind's first half. */
	if (V->log != NULL && sup_fresh_servers(S) && rp == NULL)
		ndlog_keep_start(V->log, S->o->call_log / 2);
	for (size_t i = 0; rp != NULL && V->log != NULL && i < rp->rec->n_calls; i++) {
		const Diehard__CallLog *cl = rp->rec->calls[i];
		for (size_t j = 0; j < cl->n_calls; j++) {
			const Diehard__Call *c = cl->calls[j];
			struct nd_value v = { .a = c->a, .b = c->b, .c = c->c, .d = c->d, .err = c->err };
			if (ndlog_preload(V->log, cl->key, c->arg, &v) != 0)
				fatal(EXIT_INTERNAL, "out of memory");
		}
	}
	V->disputes = disputes_new(S->nslots, take_on_odd, V);
	V->entropy = entropy_new(S->base, V->key);
	V->net = netcalls_new(S);
	V->lineage = tasks_lineage(S->nslots);
	V->anchors = anchors_new();
	V->r = calloc(S->nslots, sizeof *V->r);
	V->random_open = calloc(S->nslots, sizeof *V->random_open);
	/* Our fd limit (raised to the hard one), less what the run needs for
	 * itself, shared by the slots; between 16 and 65536 each. */
	rlim_t limit = S->nofile.rlim_max == RLIM_INFINITY ? 1 << 20 : S->nofile.rlim_max;
	rlim_t reserve = 256 + 16 * (rlim_t)S->nslots;
	rlim_t share = limit > reserve ? (limit - reserve) / S->nslots : 0;
	V->random_cap = share < 16 ? 16 : share > 65536 ? 65536 : (unsigned)share;
	if (V->random_open == NULL || V->log == NULL || V->disputes == NULL || V->entropy == NULL || V->r == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	for (unsigned i = 0; i < S->nslots; i++)
		V->r[i] = (struct vreplica){ .V = V, .index = i, .fd = -1 };
	if (vdso_init() != 0)
		log_event("no vDSO clock entry points found: clock calls enter the kernel as they are");
	else if (S->o->fast_clocks && rp == NULL && S->o->call_log < FASTCLOCK_MIN_LOG)
		log_event("fast clock reads: not with --call-log under %u (a read may ask for an entry rings "
			  "back): every clock read is notified", FASTCLOCK_MIN_LOG);
	else if (S->o->fast_clocks && rp == NULL) {
		uint64_t key[2];
		images_at_random_key(V, key);
		V->fast = fastclock_new(S->nslots, key, S->o->call_log);
	}
	if (V->fast != NULL) {
		vdso_jump_to(S->o->allocator);
		if (!vdso_real_clock())
			log_event("%s here: the fast path's leaders read the real clock by system call", NO_VDSO_REAL);
		struct timeval first = { .tv_sec = 0, .tv_usec = CP_HARVEST_MIN_US };
		V->harvest_ev = event_new(S->base, -1, 0, take_on_harvest, V);
		if (V->harvest_ev == NULL || event_add(V->harvest_ev, &first) != 0)
			fatal(EXIT_INTERNAL, "cannot create timers");
	}
	return V;
}

const uint8_t *virt_key(const struct virt *V)
{
	return V->key;
}

struct ndlog *virt_log(const struct virt *V)
{
	return V->log;
}

void virt_clock_marks(const struct virt *V, uint64_t *pass, uint64_t *ask, uint64_t *exec)
{
	*pass = *ask = *exec = 0;
	if (V->fast != NULL) {
		fastclock_marks(V->fast, pass, ask);
		*exec = fastclock_exec_mark(V->fast);
	}
}

int virt_clock_fds(struct virt *V, unsigned i, int *dir)
{
	*dir = -1;
	if (V->fast == NULL)
		return -1;
	fastclock_use(V->fast, i);
	*dir = fastclock_dir(V->fast);
	return fastclock_fd(V->fast, i);
}

char *const *virt_replica_env(struct virt *V, unsigned i)
{
	static char *env[2];
	if (V->fast == NULL)
		return NULL;
	(void)i;
	env[0] = (char *)fastclock_env(V->fast);
	return env;
}

/* Slot i's keys that which() names jump to the log's front, and the fast
 * path's (every one of them a clock). */
static void to_front(struct virt *V, unsigned i, bool (*which)(uint32_t key))
{
	ndlog_to_front(V->log, i, which);
	for (unsigned fk = 0; V->fast != NULL && fk < CP_KEYS; fk++)
		if (cp_served(fk))
			fastclock_to_front(V->fast, i, fk);
}

void virt_clocks_now(struct virt *V, unsigned i)
{
	if (V != NULL)
		to_front(V, i, take_wall_or_monotonic);
}

void virt_fast_join(struct virt *V, unsigned i)
{
	/* After a stop's freeze every slot stays off (virt_stop_clocks). */
	if (V == NULL || V->fast == NULL || !V->S->o->lanes || V->frozen_until != 0)
		return;
	struct vreplica *vr = &V->r[i];
	if (!V->S->r[i].replacement || vr->fast_joined || vr->fast_lost != 0 || (V->fast_damaged >> i & 1) ||
	    !net_listening(V->S->net, i))
		return;
	vr->fast_joined = true;
	anchor_drop_pending(vr);
	fastclock_serve(V->fast, i);
	fastclock_on(V->fast, i);
	log_event("replica %u reads its clocks in its own process again, as its siblings do", V->S->r[i].id);
}

static bool any_key(uint32_t key)
{
	(void)key;
	return true;
}

void virt_calls_now(struct virt *V, unsigned i)
{
	if (V == NULL)
		return;
	to_front(V, i, any_key);
	V->r[i].uncounted = true;
	/* Its processes name what they start from now on as the voters'
	 * name theirs. */
	for (unsigned j = 0; j < V->S->nslots; j++)
		if (j != i && V->S->r[j].live)
			lineage_align(V->lineage, i, j);
}

void virt_stop_clocks(struct virt *V)
{
	if (V == NULL || V->frozen_until != 0)
		return;
	if (clock_gettime(CLOCK_REALTIME, &V->frozen_at) != 0)
		return;
	V->frozen = true;
	V->frozen_until = sup_now() + STOP_FREEZE;
	/* Every read asks diehard from now on: the fast path's log goes on
	 * with real time. */
	for (unsigned i = 0; V->fast != NULL && i < V->S->nslots; i++)
		fastclock_off(V->fast, i);
}

uint64_t virt_clock_reads(const struct virt *V, unsigned i)
{
	if (V == NULL)
		return 0;
	uint64_t n = V->r[i].clock_reads;
	for (unsigned fk = 0; V->fast != NULL && fk < CP_KEYS; fk++)
		if (cp_served(fk))
			n += fastclock_count(V->fast, i, fk);
	return n;
}

/* How many calls of key slot i made: the fast path's keys count in its page. */
static uint64_t calls_of(const struct virt *V, unsigned i, uint32_t key)
{
	int fk = take_fast_key(V, key);
	return fk >= 0 ? fastclock_count(V->fast, i, (unsigned)fk) : ndlog_count(V->log, i, key);
}

bool virt_replayable(const struct virt *V)
{
	return ndlog_complete(V->log);
}

/* The keys calls were counted under: the log's, and the fast path's
 * (counted in the pages: a key nobody settled yet is not in the log).
 * Returns how many; *keys is malloc'ed. */
static size_t call_keys(const struct virt *V, uint32_t **keys)
{
	size_t nlog = ndlog_keys(V->log, NULL, 0), n = 0;
	*keys = calloc(nlog + CP_KEYS + 1, sizeof **keys);
	if (*keys == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	ndlog_keys(V->log, *keys, nlog);
	for (size_t j = 0; j < nlog; j++)
		if (take_fast_key(V, (*keys)[j]) < 0)
			(*keys)[n++] = (*keys)[j];
	for (unsigned fk = 0; V->fast != NULL && fk < CP_KEYS; fk++) {
		if (!cp_served(fk) || (cp_lane_of(fk) >= 0 && V->lane_thread[cp_lane_of(fk)] == 0))
			continue;
		bool any = false;
		for (unsigned i = 0; i < V->S->nslots && !any; i++)
			any = fastclock_count(V->fast, i, fk) != 0;
		if (any)
			(*keys)[n++] = take_log_key(V, fk);
	}
	return n;
}

/* The counts of calls slot i's process made, into its report entry. */
static void report_counts(struct virt *V, unsigned i)
{
	struct vreplica *vr = &V->r[i];
	if (!vr->used || vr->reported)
		return;
	vr->reported = true;
	struct sup *S = V->S;
	uint32_t *keys;
	size_t nkeys = call_keys(V, &keys);
	/* A name's count: the sum over its keys (a server's threads). */
	char (*names)[64] = calloc(nkeys ? nkeys : 1, sizeof *names);
	uint64_t *counts = calloc(nkeys ? nkeys : 1, sizeof *counts);
	if (names == NULL || counts == NULL)
		fatal(EXIT_INTERNAL, "out of memory");
	size_t n = 0;
	for (size_t j = 0; j < nkeys; j++) {
		char name[64];
		take_key_name(keys[j], name, sizeof name);
		size_t at = 0;
		while (at < n && strcmp(names[at], name) != 0)
			at++;
		if (at == n)
			memcpy(names[n++], name, sizeof name);
		counts[at] += calls_of(V, i, keys[j]);
	}
	for (size_t j = 0; j < n; j++)
		report_calls(S->report, S->r[i].id, names[j], counts[j]);
	report_unvirtualized(S->report, S->r[i].id, vr->unvirtualized);
	report_images(S->report, S->r[i].id,
		      V->fast != NULL ? fastclock_images(V->fast, i) : calls_of(V, i, KEY_AT_RANDOM), vr->images_stopped,
		      vr->images_grafted);
	report_opens_checked(S->report, S->r[i].id, vr->opens_checked);
	if (V->fast != NULL) {
		uint64_t all = 0;
		for (unsigned fk = 0; fk < CP_KEYS; fk++)
			if (cp_served(fk))
				all += fastclock_count(V->fast, i, fk);
		report_clock_reads_in_replica(S->report, S->r[i].id, all > vr->fast_notified ? all - vr->fast_notified : 0);
	}
	free(names);
	free(counts);
	free(keys);
}

bool virt_resume(struct virt *V, unsigned i, uint64_t gen, uint64_t id, int err)
{
	struct vreplica *vr = &V->r[i];
	if (vr->fd < 0 || vr->gen != gen || !virt_waiting(vr, id))
		return false;
	struct seccomp_notif_resp resp = { .id = id };
	if (err != 0)
		resp.error = -err;
	else
		resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
	if (ioctl(vr->fd, SECCOMP_IOCTL_NOTIF_SEND, &resp) != 0) {
		if (errno != ENOENT)
			log_warn("replica %u: cannot answer a notification: %s", V->S->r[i].id, strerror(errno));
		return false;
	}
	return true;
}

bool virt_reply(struct virt *V, unsigned i, uint64_t gen, uint64_t id)
{
	struct vreplica *vr = &V->r[i];
	if (vr->fd < 0 || vr->gen != gen || !virt_waiting(vr, id))
		return false;
	struct seccomp_notif_resp resp = { .id = id };
	return ioctl(vr->fd, SECCOMP_IOCTL_NOTIF_SEND, &resp) == 0;
}

bool virt_held(struct virt *V, unsigned i, uint64_t gen, uint64_t id)
{
	struct vreplica *vr = &V->r[i];
	return vr->fd >= 0 && vr->gen == gen && virt_waiting(vr, id);
}

void virt_attach(struct virt *V, unsigned i, int listener)
{
	struct vreplica *vr = &V->r[i];
	listener_close(vr);
	bool again = vr->used;
	*vr = (struct vreplica){ .V = V, .index = i, .used = true, .fd = listener, .gen = ++V->attaches };
	/* A new process in a used slot starts from the first call of every
	 * kind: it replays what the log holds. */
	if (again)
		(void)ndlog_restart(V->log, i);
	const struct replica *r = &V->S->r[i];
	lineage_start(V->lineage, i, r->program_pid > 0 ? r->program_pid : r->pid);
	/* A kernel before 6.6 refuses; it is only slower. */
	if (ioctl(listener, SECCOMP_IOCTL_NOTIF_SET_FLAGS, (unsigned long)SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP) != 0)
		log_event("replica %u: synchronous wake-ups refused (%s): notified calls cost more", V->S->r[i].id,
			  strerror(errno));
	vr->ev = event_new(V->S->base, listener, EV_READ | EV_PERSIST, on_notification, vr);
	if (vr->ev == NULL || event_add(vr->ev, NULL) != 0)
		fatal(EXIT_INTERNAL, "cannot watch replica %u's system calls", V->S->r[i].id);
}

void virt_detach(struct virt *V, unsigned i)
{
	report_counts(V, i);
	listener_close(&V->r[i]);
	if (V->fast != NULL) {
		/* What the old process published joins the log before its page
		 * counts from 0 again, for the new one (which replays). */
		take_harvest(V);
		fastclock_reset(V->fast, i);
		V->fast_damaged &= ~(1ull << i);
	}
}

void virt_retire(struct virt *V, unsigned i, bool killed)
{
	ndlog_retire(V->log, i);
	if (killed)
		listener_close(&V->r[i]);
	report_counts(V, i);
	if (disputes_pending(V->disputes))
		disputes_settle(V->disputes, take_still_calling(V->S), false);
}

/* At the end: replicas that read a fast-path key equally often must have
 * consumed the same values (their pages' sums); one whose sum is not the
 * majority's at that count read something else (its fast path damaged). */
static void fast_compare_sums(struct virt *V)
{
	struct sup *S = V->S;
	for (unsigned fk = 0; fk < CP_KEYS; fk++) {
		if (!cp_served(fk))
			continue;
		uint64_t sums[VOTER_MAX];
		unsigned idx[VOTER_MAX], n = 0;
		for (unsigned i = 0; i < S->nslots && n < VOTER_MAX; i++)
			if (S->r[i].live && S->r[i].exited && !(V->fast_damaged >> i & 1) && !V->r[i].uncounted &&
			    fastclock_sum(V->fast, i, fk, &sums[n]))
				idx[n++] = i;
		for (unsigned b = 0; b < n; b++) {
			/* The majority among those with b's count. */
			uint64_t same[VOTER_MAX], m;
			unsigned ns = 0;
			for (unsigned c = 0; c < n; c++)
				if (fastclock_count(V->fast, idx[c], fk) == fastclock_count(V->fast, idx[b], fk))
					same[ns++] = sums[c];
			if (dispute_majority(same, ns, &m) && sums[b] != m)
				take_divergence(&V->r[idx[b]], take_log_key(V, fk), fastclock_count(V->fast, idx[b], fk),
						"the values the others read", "other values");
		}
	}
}

/* A replica that exited before diehard forwarded a stop signal (or with
 * none forwarded): it ran to its own end. */
static bool ran_to_end(const struct sup *S, const struct replica *r)
{
	return S->stop_ev == NULL || r->end_time < S->stop_at;
}

void virt_finish(struct virt *V)
{
	struct sup *S = V->S;
	if (V->open_failures > 1)
		log_warn("%" PRIu64 " opens of /dev/urandom or /dev/random in all could not be virtualized",
			 V->open_failures);
	disputes_settle(V->disputes, 0, true);
	if (V->fast != NULL) {
		fastclock_settle_all(V->fast, take_fast_put, V);
		take_harvest(V);
		take_kill_forged(V);
		fast_compare_sums(V);
	}
	for (unsigned i = 0; i < S->nslots; i++)
		report_counts(V, i);
	uint32_t *keys;
	size_t nkeys = call_keys(V, &keys);
	/* Replicas that ran to the end in the vote should have made as many
	 * calls of each kind; one that made more or fewer behaved differently
	 * (the check that threads cannot fool: counts do not depend on the
	 * interleaving). Not one that ended after diehard forwarded SIGTERM
	 * or SIGINT: it stopped where the signal found it (a server's threads
	 * in the middle of requests the others had finished), as its output
	 * may end short (output.c). */
	bool stopped = false;
	for (unsigned i = 0; i < S->nslots; i++)
		stopped |= S->r[i].live && S->r[i].exited && !ran_to_end(S, &S->r[i]);
	if (stopped && nkeys > 0)
		log_event("call counts of the replicas that ended on the stop signal not compared: each stopped where it "
			  "found it");
	for (size_t j = 0; j < nkeys; j++) {
		uint64_t counts[VOTER_MAX];
		unsigned idx[VOTER_MAX], n = 0;
		for (unsigned i = 0; i < S->nslots && n < VOTER_MAX; i++)
			if (S->r[i].live && S->r[i].exited && ran_to_end(S, &S->r[i]) && !V->r[i].uncounted) {
				idx[n] = i;
				counts[n++] = calls_of(V, i, keys[j]);
			}
		uint64_t m;
		if (!dispute_majority(counts, n, &m))
			continue;
		for (unsigned b = 0; b < n; b++)
			if (counts[b] != m) {
				char e[32], g[32];
				snprintf(e, sizeof e, "%" PRIu64 " call%s", m, m == 1 ? "" : "s");
				snprintf(g, sizeof g, "%" PRIu64 " call%s", counts[b], counts[b] == 1 ? "" : "s");
				take_divergence(&V->r[idx[b]], keys[j], counts[b] < m ? counts[b] : m, e, g);
			}
	}
	free(keys);
	report_log_memory(S->report, ndlog_entries(V->log), ndlog_memory(V->log), ndlog_complete(V->log),
			  ndlog_started(V->log), V->skipped_sleeps);
	if (V->fast != NULL)
		report_clock_leaders(S->report,
				     !vdso_real_clock() ? NO_VDSO_REAL
				     : fastclock_is_real_by_syscall(V->fast) ? "the vDSO made system calls itself (its clock source)"
									     : NULL,
				     V->vdso_fallbacks);
	if (V->harvest_ev != NULL)
		event_free(V->harvest_ev);
	V->harvest_ev = NULL;
}
