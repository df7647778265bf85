/* sandbox.h — each replica in namespaces of its own, so that it can reach
 * neither diehard nor its siblings.
 *
 * A sandboxed replica is a small init of ours (pid 1 of a new pid
 * namespace, cloned from diehard) and the program under it (pid 2, the
 * same in every replica, so getpid and $$ agree). With it: a mount
 * namespace whose /proc is the new pid namespace's (siblings and diehard
 * are not there to open, trace or signal), with --net private a network
 * namespace (its own loopback, up, and nothing else: every replica binds
 * its configured port without colliding, diehard proxies clients to it,
 * net.h), and, when diehard is not root, a user namespace mapping the user
 * to itself (the kernel asks for one before an unprivileged process may
 * create the others). The file system stays shared. The init forwards the
 * signals diehard sends it (and only those: a signal from inside the
 * replica is dropped), reaps orphans, makes TCP sockets in the replica's
 * network for diehard on request (factory.h), and when the program ends it
 * hands diehard the program's wait status and exits, which kills whatever
 * the program left running. */
#ifndef DIEHARD_SANDBOX_H
#define DIEHARD_SANDBOX_H

#include <signal.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/types.h>

enum sandbox_mode {
	SANDBOX_AUTO, /* namespaces when the kernel allows, else say so once and go on */
	SANDBOX_ON,   /* namespaces or nothing runs (exit 125) */
	SANDBOX_OFF,  /* replicas in diehard's own namespaces */
};

/* The clone flags of a sandboxed replica: a network namespace when
 * private_net (--net private), a user namespace only when we are not root
 * (as root, a user namespace would cost the program its privileges over
 * the host's files and ports). */
unsigned long sandbox_clone_flags(bool private_net);

/* Names the namespaces in flags ("user, pid, mount, network"). */
const char *sandbox_describe(unsigned long flags);

/* In the cloned child (cloned with flags but CLONE_NEWNET), before
 * anything else: maps the user (when a user namespace was made), gives the
 * mount namespace its own /proc, makes the network namespace and brings
 * its loopback up. 0, or an errno. Async-signal-safe. */
int sandbox_enter(unsigned long flags, uid_t uid, gid_t gid);

/* The most sockets one request on the socket channel may ask for
 * (factory.h's protocol). */
#define SANDBOX_SOCKETS_MAX 64

/* The init's life once the program (prog, its pid 2) is forked: makes
 * itself undumpable, then closes gate_fd (-1: none), the end of a pipe the
 * program reads to its end before it execs (spawn.c), so that the program
 * cannot open the init's memory while it is still dumpable (just after
 * the exec of diehard-init); forwards
 * signals from outside to the program's process group, reaps, answers
 * diehard's requests for sockets on net_fd (factory.h; -1: no channel),
 * and writes the program's wait status to status_fd when it ends. The
 * channel's end or failure only stops the answers. Never returns. */
_Noreturn void sandbox_init_run(pid_t prog, int status_fd, int net_fd, int gate_fd);

/* diehard's "kill your program's group" to an init, sent once diehard has
 * SIGKILLed the program itself (its pid came with spawn.c's 'C' message):
 * the init SIGKILLs the rest of the group, reaps the program and reports
 * its status as ever, so a program that had already died (of SIGSEGV,
 * say) is reported as it died. SIGKILL to the init itself ends the
 * replica at once, status unknown (the run's end). */
#define SANDBOX_KILL_SIGNAL SIGRTMAX

/* The init, once the program is forked, execs init_path (diehard-init, a
 * small static program: supervisor/sandbox/init.c) as
 *   diehard-init PROG STATUS_FD NET_FD GATE_FD
 * (NET_FD, GATE_FD -1 when there is none) so that nothing of the supervisor's
 * memory (seeds, keys, the shared rings) stays in a process the program
 * can name. Without it (NULL, or the exec fails) the copy of diehard goes
 * on as the init. */
_Noreturn void sandbox_init_exec(const char *init_path, pid_t prog, int status_fd, int net_fd, int gate_fd);

/* The pid the supervisor's namespace gives to pid nspid of the namespace
 * that thread tid (a pid of ours) lives in; nspid itself when tid is in our
 * namespace; 0 when there is no such process. */
pid_t sandbox_global_pid(pid_t tid, pid_t nspid);
/* The pid namespace pid lives in (a stat of /proc/PID/ns/pid: its device
 * and inode name it); false when pid is gone. */
bool sandbox_pidns(pid_t pid, struct stat *ns);
/* Whether pid lives in the pid namespace ns. */
bool sandbox_in_pidns(pid_t pid, const struct stat *ns);

#endif
