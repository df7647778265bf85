/* named.h — a path a replica named in a call, as an absolute path.
 *
 * A call names a path relative to the calling thread's cwd or to one of
 * its directory descriptors; the replica's views lie over the same real
 * paths, so the absolute path in its namespace is the real path of the
 * file its views show there. The path is cleaned lexically (".", "..",
 * repeated slashes): a path through a symbolic link may name another file
 * than the kernel finds, so a caller trusts it only as far as it checks
 * the replica's own layers (points.c's rename outcome, pidfile.c's vote of
 * the upper versions). */
#ifndef DIEHARD_NAMED_H
#define DIEHARD_NAMED_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* path as thread tid names it, relative to dirfd (AT_FDCWD: its cwd),
 * into out: absolute and cleaned. false when it does not fit, or the
 * directory cannot be read (a thread gone, a descriptor closed). */
bool named_path(pid_t tid, int dirfd, const char *path, char *out, size_t size);

#endif
