/* filter.h — the seccomp filter each replica runs under: the calls whose
 * results differ from one process to the next (clocks, randomness, opens of
 * the random devices), the start of every new program image (arch_prctl,
 * where the supervisor patches the vDSO) and, with a private network, the
 * calls that say where the replica listens or that it reaches out
 * (netcalls.h) go to the supervisor through a user-notify listener;
 * everything else stays allowed in the kernel, at no cost per call.
 *
 * Invariant: the program's first instructions kill the process on any
 * call made through another architecture's entry (i386 `int $0x80`, x32),
 * so that every rule after them sees x86-64 calls only and none can be
 * got around by switching entries. */
#ifndef DIEHARD_FILTER_H
#define DIEHARD_FILTER_H

#include <fcntl.h>
#include <linux/filter.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Open flags (a mask) of which any one set means the open cannot be a
 * read of a random device: such opens stay in the kernel. */
#define FILTER_NOT_A_DEVICE_READ (O_ACCMODE | O_DIRECTORY | O_PATH | O_CREAT)

struct filter_spec {
	bool notify;        /* clocks, randomness, device opens and new images go
			       to the supervisor (not with --no-virtualize) */
	bool sleeps;        /* relative nanosleep and clock_nanosleep too
			       (replacements skip them while they catch up) */
	bool net_private;   /* a network namespace per replica (net.h): listen,
			       connect, and socket of UDP go to the supervisor
			       too (netcalls.h); needs notify */
	bool sandboxed;     /* in namespaces (sandbox.h): the init is pid 1 */
	bool points;        /* fsync and fdatasync go to the supervisor: the
			       file views' commit points (points.h); needs
			       notify */
	uint64_t pass_mark; /* the fast path's markers (fastclock.h), 0 when it
			       is off: clock_gettime and gettimeofday with this
			       third argument stay in the kernel, and so does
			       openat with it fifth, or from a shared library
			       with O_CLOEXEC or from libc's internal open
			       (filter.c) */
	uint64_t ask_mark;  /* an openat with this fifth argument is seen even
			       then (libdiehard's open of a random device) */
	uint64_t exec_mark; /* nonzero: images with libdiehard are not stopped
			       (the loader's arch_prctl stays in the kernel),
			       and an execve or execveat is seen unless it
			       carries this (exec.c) */
	pid_t supervisor;   /* not sandboxed: our pid and process group */
	pid_t supervisor_group;
};

/* Builds the BPF program with libseccomp, in the supervisor (net_private
 * without notify is refused: nothing would answer). Besides the notified
 * calls it refuses (EPERM) every way out of the replica the
 * namespaces leave open: tracing, reading or writing the memory of,
 * comparing or taking fds from, and (unsandboxed) signalling, anything
 * outside it (the init, or diehard and the other replicas), and pushing
 * bytes into a terminal's input (TIOCSTI); io_uring, whose operations
 * would not pass the filter, gets ENOSYS; a call through a foreign entry
 * kills the process. 0, or -1 with a message printed. */
int filter_build(struct sock_fprog *prog, const struct filter_spec *spec);

/* What to say of a replica ended by signal sig, when the filter is the
 * likely sender: for SIGSYS (the filter's kill; a program's own seccomp
 * filter, or a kill -SYS, would look the same), a phrase; NULL for any
 * other signal. */
const char *filter_kill_cause(int sig);

/* In the replica, between fork and exec: installs prog and returns the
 * listener fd (close-on-exec; 0 without listener), or -1 with errno.
 * Async-signal-safe. */
int filter_install(const struct sock_fprog *prog, bool listener);

#endif
