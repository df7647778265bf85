/* cgpath.h — the kernel's cgroup files read as text, pure (no I/O; unit-
 * tested with garbage): a process's cgroup in a hierarchy (/proc/PID/
 * cgroup), where a hierarchy is mounted (/proc/self/mountinfo), the
 * directory the two make, and the counters of an events file (pids.events,
 * memory.events, memory.oom_control). caps.c reads the files and asks here.
 *
 * The text comes from the kernel, but it names paths diehard then writes
 * to, so it is held to what the kernel writes: a line past the buffer's
 * end, a missing field, a malformed escape or a path with a "." or ".."
 * component (a cgroup outside the reader's cgroup namespace is shown as
 * "/../..") is no match, never a guess. Inputs need not be NUL-terminated:
 * each is a pointer and a length. */
#ifndef DIEHARD_CGPATH_H
#define DIEHARD_CGPATH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* From /proc/PID/cgroup's text: the path of the process's cgroup in the
 * v1 hierarchy that has controller among its controllers ("8:pids:/a/b"),
 * or, with controller NULL, in the v2 hierarchy ("0::/a/b"). true and the
 * path (absolute, at most size - 1 bytes) in out. */
bool cgpath_own(const char *text, size_t n, const char *controller, char *out, size_t size);

/* From /proc/self/mountinfo's text: the mount point and the root (the
 * hierarchy's directory mounted there, usually "/") of the first mount of
 * the v1 hierarchy with controller among its super options (file system
 * type "cgroup"), or, with controller NULL, of cgroup2. Octal escapes
 * ("\040" for a space) decoded. */
bool cgpath_mount(const char *text, size_t n, const char *controller, char *mnt, size_t msize, char *root,
		  size_t rsize);

/* The directory of the cgroup at path (as cgpath_own gives it) in a mount
 * of its hierarchy at mnt whose root is root: mnt and the part of path
 * below root. false when path is not at or below root, or out is short. */
bool cgpath_dir(const char *mnt, const char *root, const char *path, char *out, size_t size);

/* The value of key in the "KEY VALUE" lines of an events file: true and
 * *v (a decimal that fits in 64 bits). */
bool cgpath_counter(const char *text, size_t n, const char *key, uint64_t *v);

/* Whether word is one of the words (space or newline apart) of text:
 * cgroup.controllers, cgroup.subtree_control. */
bool cgpath_has_word(const char *text, size_t n, const char *word);

/* Whether text (cgroup.procs) lists exactly one process, pid. */
bool cgpath_only_pid(const char *text, size_t n, long pid);

#endif
