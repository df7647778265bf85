/* sandbox.h — each replica in namespaces of its own, so that it can reach
 * neither diehard nor its siblings, nor the terminal diehard was started
 * from.
 *
 * A sandboxed replica is a small init of ours (pid 1 of a new pid
 * namespace, cloned from diehard) and the program under it (pid 2, the
 * same in every replica, so getpid and $$ agree). With it: a mount
 * namespace whose /proc is the new pid namespace's (siblings and diehard
 * are not there to open, trace or signal) and whose /dev/shm, /dev/mqueue
 * and /dev/pts are its own, an IPC namespace (SysV objects and POSIX
 * message queues are per replica), with --net private a network namespace
 * (its own loopback, up, and nothing else: every replica binds its
 * configured port without colliding, diehard proxies clients to it,
 * net.h), and a user namespace. The init and the program each lead a
 * session of their own, without a controlling terminal.
 *
 * Who makes which namespace:
 * - diehard's clone of the init: pid, mount, IPC; unprivileged, a user
 *   namespace too, mapping the user to itself (the kernel asks for one
 *   before an unprivileged process may create the others);
 * - the program, before its exec: as root, a user namespace of its own
 *   (root inside is root outside, over every id the init has) and a mount
 *   namespace in it, so that every mount it inherits, the init's /proc
 *   first, is locked (MNT_LOCKED): it cannot be unmounted to show what is
 *   under it. The init stays root of the host's user namespace, out of the
 *   program's reach (it can neither trace it nor open its memory). Then,
 *   with --net private, the network namespace (owned by the program's user
 *   namespace, so root in it binds port 80 and configures its own
 *   interfaces), whose descriptor it hands the init, which joins it to make
 *   diehard's sockets there (factory.h).
 *
 * The file system is viewed (files/view.h: each replica writes into
 * copy-on-write views of its own, unless --files shared). The init forwards the signals diehard
 * sends it (and only those: a signal from inside the replica is dropped),
 * reaps orphans, makes TCP sockets in the replica's network for diehard on
 * request (factory.h), and when the program ends it hands diehard the
 * program's wait status and exits, which kills whatever the program left
 * running. */
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

/* The namespaces of a sandboxed replica, as clone flags: user, pid,
 * mount, IPC, and network when private_net (--net private). */
unsigned long sandbox_clone_flags(bool private_net);

/* Names the namespaces in flags ("user, pid, mount, ipc, network"). */
const char *sandbox_describe(unsigned long flags);

/* The flags of diehard's clone of the init, out of a replica's: pid,
 * mount, IPC, and the user namespace when we are not root. */
unsigned long sandbox_init_flags(unsigned long flags);

/* Whether the program makes a user namespace of its own (as root: see
 * above). */
bool sandbox_program_user(unsigned long flags);

/* In the cloned init (cloned with sandbox_init_flags), before anything
 * else: maps the user (when a user namespace was made) and gives the
 * mount namespace its own /proc. 0, or an errno. Async-signal-safe. */
int sandbox_enter(unsigned long init_flags, uid_t uid, gid_t gid);

/* Next (after the file views, files/view.h, which rebuild the tree as
 * root): its own /dev/shm, /dev/mqueue and /dev/pts. 0, or an errno. */
int sandbox_enter_dev(unsigned long init_flags);

/* In the init, after sandbox_enter, when the program makes its user
 * namespace (root): the kernel's settings that uid 0 may write by file
 * permissions alone, so root of that namespace too (/proc/sys and its
 * like, /sys) made read-only. 0, or an errno. */
int sandbox_guard_kernel(void);

/* In the program, forked by the init, before anything else: its own user
 * and mount namespaces (CLONE_NEWUSER in *step, when
 * sandbox_program_user), then with CLONE_NEWNET in flags its network
 * namespace with its loopback up (CLONE_NEWNET in *step). *net_fd gets a
 * descriptor of that namespace (close-on-exec) for the init, or -1. 0, or
 * the errno of the step left in *step. */
int sandbox_program_enter(unsigned long flags, unsigned long *step, int *net_fd);
/* The host's own addresses (at most SANDBOX_HOST_ADDRS, IPv4 first) that
 * every network namespace sandbox_program_enter makes puts on its
 * loopback; set before the replicas are forked. */
#define SANDBOX_HOST_ADDRS 8
struct sockaddr_storage;
void sandbox_host_addrs(const struct sockaddr_storage *a, unsigned n);

/* In the init, once the program has made its user namespace: maps it,
 * every id the init's own user namespace has to itself. 0, or an errno. */
int sandbox_map_program(pid_t prog);

/* The most sockets one request on the socket channel may ask for
 * (factory.h's protocol). */
#define SANDBOX_SOCKETS_MAX 64
/* The first byte of a request on the same channel for the namespace's
 * last pid (factory.h: factory_last_pid). */
#define SANDBOX_LAST_PID 'P'

/* The init's life once the program (prog, its pid 2) is forked: makes
 * itself undumpable, then closes gate_fd (-1: none), its end of a socket
 * pair the program reads to its end before it execs (spawn.c), so that the
 * program cannot open the init's memory while it is still dumpable (just
 * after the exec of diehard-init); forwards signals from outside to the
 * program's process group (its session's: it leads both), reaps, answers
 * diehard's requests for sockets on net_fd (factory.h; -1: no channel),
 * and for its namespace's last pid through last_pid_fd (ns_last_pid, open
 * for reading and writing; -1: none),
 * and writes the program's wait status to status_fd when it ends. The
 * channel's end or failure only stops the answers. Never returns. */
_Noreturn void sandbox_init_run(pid_t prog, int status_fd, int net_fd, int gate_fd, int last_pid_fd);

/* diehard's "kill your program's group" to an init, sent once diehard has
 * SIGKILLed the program itself (its pid came with spawn.c's 'C' message):
 * the init SIGKILLs the rest of the group, reaps the program and reports
 * its status as ever, so a program that had already died (of SIGSEGV,
 * say) is reported as it died. SIGKILL to the init itself ends the
 * replica at once, status unknown (the run's end). */
#define SANDBOX_KILL_SIGNAL SIGRTMAX

/* The init, once the program is forked, execs init_path (diehard-init, a
 * small static program: supervisor/sandbox/init.c) as
 *   diehard-init PROG STATUS_FD NET_FD GATE_FD LAST_PID_FD
 * (NET_FD, GATE_FD, LAST_PID_FD -1 when there is none) so that nothing of the supervisor's
 * memory (seeds, keys, the shared rings) stays in a process the program
 * can name. Without it (NULL, or the exec fails) the copy of diehard goes
 * on as the init. */
_Noreturn void sandbox_init_exec(const char *init_path, pid_t prog, int status_fd, int net_fd, int gate_fd,
				 int last_pid_fd);

/* The pid the supervisor's namespace gives to pid nspid of the namespace
 * that thread tid (a pid of ours) lives in; nspid itself when tid is in our
 * namespace; 0 when there is no such process. */
pid_t sandbox_global_pid(pid_t tid, pid_t nspid);
/* The pid namespace pid lives in (a stat of /proc/PID/ns/pid: its device
 * and inode name it); false when pid is gone. */
bool sandbox_pidns(pid_t pid, struct stat *ns);
/* Whether pid lives in the pid namespace ns. */
bool sandbox_in_pidns(pid_t pid, const struct stat *ns);

/* Writes s to path (a /proc or cgroup file), all of it in one write: 0, or
 * an errno (EIO for a short write). Only system calls: safe in a cloned
 * child. */
int sandbox_write_file(const char *path, const char *s);

#endif
