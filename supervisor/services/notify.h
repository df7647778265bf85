/* notify.h — diehard as a service: its replicas' sd_notify messages, voted
 * into the ones its manager gets, and their watchdogs.
 *
 * With NOTIFY_SOCKET (svcenv.h), each replica process gets a notify socket
 * of its own (a datagram socket only diehard reads, a file in a private
 * directory: an abstract one would not reach across a replica's network
 * namespace; made anew for every process in a slot, so a killed replica's
 * late words count for nothing) and diehard alone talks to the manager:
 *   READY=1      once a quorum of the live replicas said READY=1 (MAINPID=
 *                diehard), again after a reload once a quorum is ready again;
 *   RELOADING=1  once a quorum of them said RELOADING=1;
 *   STATUS=      diehard's summary (replicas live, replaced, divergences),
 *                then the text a quorum of replicas agree on, if any;
 *   STOPPING=1   when diehard is asked to stop;
 *   WATCHDOG=1   every half interval while a quorum of replicas is healthy.
 * A replica's MAINPID= is dropped (the main pid is diehard), fds it sends
 * (a BARRIER=1's, FDSTORE=1's) are closed once its message is handled.
 * Messages are taken only from the replica's own processes: the kernel
 * names the sender with a pidfd (SCM_PIDFD), judged as the message is read
 * (peer.h: the replica's pid namespace, or its process tree), or the
 * replica's first process, whose pidfd diehard holds (so its last words
 * count even once it is reaped). A sender that is none of these (a
 * sibling, one reaped before it was read) is dropped and counted (the
 * report's notify_dropped), as systemd drops what it cannot attribute.
 *
 * With WATCHDOG_USEC for diehard, each replica gets the same interval
 * (WATCHDOG_PID its own pid): one that does not ping within it is killed
 * as a straggler and replaced.
 *
 * Socket activation: each replica gets the sockets diehard was handed, at
 * the same fds, LISTEN_FDNAMES kept and LISTEN_PID its own pid (spawn.c
 * writes the pid variables between fork and exec). */
#ifndef DIEHARD_NOTIFY_H
#define DIEHARD_NOTIFY_H

#include <stdbool.h>

struct sup;
struct notify;

struct notify *notify_new(struct sup *S);
/* The variables (NAME=value, NULL-terminated; owned by n) for the process
 * about to start in slot i; its notify socket is made here. */
char *const *notify_replica_env(struct notify *n, unsigned slot);
/* The process in slot i runs (its pids are known): its messages count.
 * program_pidfd: sandboxed, a pidfd of its program (spawn.h), owned by n
 * from now on; -1: none. */
void notify_replica_started(struct notify *n, unsigned slot, int program_pidfd);
/* It left the vote (killed) or exited: its socket is closed. */
void notify_replica_gone(struct notify *n, unsigned slot);
/* Every tick: replicas' watchdogs, and what the manager should know now. */
void notify_tick(struct notify *n);
/* diehard is asked to stop (STOPPING=1, once). */
void notify_stopping(struct notify *n);
/* The run is over: says so when readiness was never reached. */
void notify_finish(struct notify *n);

#endif
