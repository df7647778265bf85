/* filter.h — the seccomp filter each replica runs under: the calls whose
 * results differ from one process to the next (clocks, randomness, opens of
 * the random devices) and the start of every new program image (arch_prctl,
 * where the supervisor patches the vDSO) go to the supervisor through a
 * user-notify listener; everything else stays allowed in the kernel, at no
 * cost per call. */
#ifndef DIEHARD_FILTER_H
#define DIEHARD_FILTER_H

#include <fcntl.h>
#include <linux/filter.h>
#include <stdbool.h>

/* Open flags (a mask) of which any one set means the open cannot be a
 * read of a random device: such opens stay in the kernel. */
#define FILTER_NOT_A_DEVICE_READ (O_ACCMODE | O_DIRECTORY | O_PATH | O_CREAT)

/* Builds the BPF program with libseccomp, once, in the supervisor; with
 * sleeps, relative nanosleep and clock_nanosleep calls are notified too
 * (replacements skip them while they catch up). 0, or -1 with a message
 * printed. */
int filter_build(struct sock_fprog *prog, bool sleeps);

/* In the replica, between fork and exec: installs prog and returns the
 * listener fd (close-on-exec), or -1 with errno. Async-signal-safe. */
int filter_install(const struct sock_fprog *prog);

#endif
