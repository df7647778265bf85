/* spawn.h — starting one replica: the real argv, no shell, PATH lookup like
 * execvp, the parent's environment plus the allocator's settings, only fds
 * 0-2 (pipes of diehard's, never its terminal; and socket-activated ones)
 * inherited, in a session of its own without a controlling terminal,
 * killed when the supervisor dies. Sandboxed with a network of its own (CLONE_NEWNET in ns_flags),
 * its init gets one end of a socket channel (factory.h) and diehard the
 * other, and a TCP listening socket passed on is replaced by one listening
 * on the same address in the replica's network. */
#ifndef DIEHARD_SPAWN_H
#define DIEHARD_SPAWN_H

#include <stdbool.h>
#include <stdint.h>
#include <linux/filter.h>
#include <sys/resource.h>
#include <sys/types.h>

struct caps_spawn;
struct view_plan;

/* Finds cmd as execvp would. 0 and a malloc'ed *path, or the exit code to
 * give up with (127 not found, 126 not executable) with a message printed. */
int spawn_resolve(const char *cmd, char **path);

struct spawn_request {
	const char *path;
	char *const *argv;
	char **envp;   /* the full environment for the replica */
	int fds[3];    /* become the replica's 0, 1, 2 */
	bool pipe_ignored; /* SIGPIPE was ignored when diehard started: keep it so */
	const struct sock_fprog *filter; /* seccomp filter to run under, or NULL */
	bool listener;                   /* the filter notifies: send its listener */
	uint64_t exec_mark;              /* the filter's exec marker (filter.h), or 0 */
	const struct rlimit *nofile;     /* the fd limit diehard was started with */
	unsigned long ns_flags;          /* sandbox.h: namespaces to make (0: none) */
	const char *init_path;           /* diehard-init, or NULL (sandbox.h) */
	bool stop_before_exec;           /* for a debugger: any process may trace it,
					    it stops itself (SIGSTOP) just before exec */
	int clock_fd, clock_dir;         /* the fast clock path's page of the slot and
					    the pages' directory, placed at FASTCLOCK_FD
					    and FASTCLOCK_DIR_FD (fastclock.h); -1: none */
	unsigned npass;                  /* fds 3 .. 3 + npass - 1 are passed on as they
					    are (socket activation: svcenv.h); with
					    CLONE_NEWNET, a TCP listening one as a socket
					    listening on its address in the replica's network */
	struct caps_spawn *caps;         /* the replica's caps (caps.h): its cgroup,
					    entered before anything runs, its rlimits; NULL */
	const struct view_plan *views;   /* sandboxed: the file views its init makes
					    (files/view.h); NULL: the real file system */
};

struct spawn_result {
	int exec_errno;  /* the exec failed with this (the child is reaped) */
	int ns_errno;    /* the namespaces could not be made (the child is reaped) */
	int caps_errno;  /* its caps could not be entered (the child is reaped) */
	unsigned long ns_refused; /* with ns_errno: the one refused, CLONE_NEWUSER
				     (root's, sandbox.h) or CLONE_NEWNET; 0: the
				     replica's namespaces as a whole */
	int listener;    /* the filter's user-notify fd, or -1 */
	int status_fd;   /* sandboxed: the init writes the program's wait status
			    here before it exits; else -1 */
	pid_t program_pid; /* sandboxed: the program's pid in our namespace */
	int program_pidfd; /* sandboxed: a pidfd of the program, from the kernel
			      (SO_PASSPIDFD, Linux 6.5; else -1), the caller's */
	int net_fd;      /* CLONE_NEWNET: our end of its init's socket channel
			    (factory.h, SOCK_SEQPACKET, close-on-exec); else -1 */
	int views_fd;    /* with views: the staging tmpfs (view.h), the caller's; else -1 */
	int views_errno; /* the views could not be made (the child is reaped) */
};

/* Builds a replica's environment: ours, with LD_PRELOAD (allocator first),
 * DIEHARD_SEED and DIEHARD_FILL=fill set, and the NULL-terminated extra
 * variables (NAME=value; NULL: none) added; any DIEHARD_* of the
 * allocator's in ours is dropped. Exits 125 on allocation failure. */
char **spawn_environment(const char *allocator, const uint64_t seed[2], const char *fill, char *const *extra);
void spawn_environment_free(char **envp);

/* In the program, just before exec: LISTEN_PID= and WATCHDOG_PID= in envp
 * (set to a placeholder of ten digits by the caller) become its own pid,
 * as the program sees it (in its pid namespace when sandboxed). */

/* Starts the replica. Returns its pid (sandboxed: its init's), or -1 with
 * errno and, when the exec itself failed or the namespaces could not be
 * made, res->exec_errno or res->ns_errno (the child is already reaped).
 * With a notifying filter, res->listener is its user-notify fd, received
 * before the program runs: the program's first notified call waits for
 * the supervisor to serve it. A filter the kernel refuses is a -1 with
 * both errnos 0 and errno set. */
pid_t spawn_replica(const struct spawn_request *r, struct spawn_result *res);

/* spawn_replica in two halves, so that several replicas set themselves up
 * at once: spawn_start forks (its -1 is spawn_replica's, the namespaces'
 * refusal included), spawn_finish waits for the child's word. */
struct spawn_pending {
	pid_t pid;
	int sock;      /* the child's report socket */
	int status_fd;
	int net_fd;    /* our end of the init's socket channel, or -1 */
	bool want_listener;
};
pid_t spawn_start(const struct spawn_request *r, struct spawn_pending *sp, struct spawn_result *res);
pid_t spawn_finish(struct spawn_pending *sp, struct spawn_result *res);

#endif
