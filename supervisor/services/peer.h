/* peer.h — who is at the other end of a socket: a process of one of the
 * replicas (or something one of them started), or a process outside them.
 *
 * The control socket (control.h) serves only processes outside the
 * replicas, and a replica's notify socket (notify.h) takes messages only
 * from that replica's processes. The kernel names the process: a pidfd
 * (SO_PEERPIDFD, SCM_PIDFD), which pins it, so that no pid number is read
 * twice as two processes; a pid alone only on kernels without them
 * (before Linux 6.5), where a pid freed and taken again in between is the
 * residual race (docs/CONTROL.md, docs/SERVICES.md).
 *
 * Two tests, each sound on its own:
 *   - the pid namespace: a sandboxed replica's processes live in its
 *     namespace or in one nested below it (NS_GET_PARENT walks up);
 *   - ancestry: the process's parents, hand over hand, each link a pidfd
 *     checked to be the parent still after it was opened, up to a
 *     replica's first process (its init when sandboxed), or to diehard
 *     itself. Being diehard's descendant never changes in a process's
 *     life once diehard is a child subreaper (control.c makes it one):
 *     an orphan is adopted by an ancestor, never by a stranger, so an
 *     orphan of a replica without namespaces is still found (as diehard's,
 *     though no longer as a particular replica's).
 * Nothing here blocks or waits; a walk is bounded (PEER_DEPTH_MAX parents,
 * a few attempts when the tree changes under it), and anything it cannot
 * settle is PEER_UNKNOWN, which callers refuse. */
#ifndef DIEHARD_PEER_H
#define DIEHARD_PEER_H

#include <stdbool.h>
#include <sys/types.h>

struct sup;

/* Parents walked at most: a tree deeper than this cannot be judged. */
#define PEER_DEPTH_MAX 256

enum peer_kind {
	PEER_OUTSIDE, /* no replica's, nor diehard's own descendant */
	PEER_REPLICA, /* a replica's process (slot >= 0), or diehard's descendant
			 that no replica can be told for (slot -1: an orphan of a
			 replica without namespaces, adopted by diehard) */
	PEER_UNKNOWN, /* cannot tell (why says): exited, too deep, ... */
};

struct peer {
	enum peer_kind kind;
	int slot;      /* PEER_REPLICA: the replica's slot, or -1 */
	char why[96];  /* PEER_UNKNOWN: why; else how it was told */
};

/* Judges the process pidfd names (-1: none, the kernel has no pidfds to
 * give: pid, a number in our pid namespace, is opened here, with the
 * residual race above; -2: the kernel could not give one, the process is
 * gone). pid is also
 * the number the caller has for it (0: none), for kernels without
 * PIDFD_GET_INFO. With live, a process that has exited is PEER_UNKNOWN;
 * without, an exited one that is not reaped yet is judged as it was (its
 * namespace and parent are still known), and a reaped one is unknown. */
struct peer peer_judge(const struct sup *S, int pidfd, pid_t pid, bool live);

/* A pidfd of pid, checked to be parent's child now (parent 0: any), or -1.
 * For a replica's first process, whose identity notify.c keeps. */
int peer_pidfd_child(pid_t pid, pid_t parent);

/* Whether pidfds a and b name one process, alive or not (pidfs gives each
 * process an inode of its own, never reused, since Linux 6.9); false when
 * it cannot be told. */
bool peer_same_process(int a, int b);

/* The peer of a connected unix socket: its pidfd (SO_PEERPIDFD), -1 on
 * kernels without it, -2 when the kernel cannot give it (the peer is
 * gone); *pid its pid (SO_PEERCRED) or 0. */
int peer_of_socket(int s, pid_t *pid);

/* SO_PASSPIDFD: every message read from s carries its sender's pidfd
 * (SCM_PIDFD). false when the kernel has no such option. */
bool peer_pass_pidfd(int s);

/* The type of the SCM_PIDFD control message. */
#define PEER_SCM_PIDFD 0x04

#endif
