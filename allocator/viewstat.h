/* viewstat.h — what a replica's stat calls show of its file views alike in
 * every replica (supervisor/files/view.h).
 *
 * Each replica writes into views of its own, so the kernel gives each a
 * different device number for the same view (overlayfs's own, its lower
 * layers' pseudo devices, the staging tmpfs), and stamps each file with
 * the instant that replica wrote it. A program that records what stat
 * says (git's index keeps every file's ctime, mtime, device and inode)
 * would write different bytes in every replica, and its files would never
 * agree. So, when diehard names the views' devices (DIEHARD_VIEWDEVS,
 * "Tstart,real:canonical,..." in hex, filled in by the replica's init):
 * - stat's answers for a file on a view show the canonical device, and
 *   its mtime as its ctime and atime (neither can be set by a program);
 * - a file made in the replica (its view's upper layer's device; never a
 *   file of the lower layer, which a stamp would copy up) whose mtime the
 *   kernel set during the run (no earlier than the run's start less 2 s,
 *   and not one of ours: our stamps end in
 *   STAMP_MARK nanoseconds within their millisecond, which a kernel time
 *   does once in a million) is stamped as stat finds it, with the
 *   virtualized clock's time (CLOCK_REALTIME_COARSE's: the same read in
 *   every replica, clocks.h, and not the program's own clock's sequence),
 *   and shown so; so is a utimensat "now". The stamp is the agreed time
 *   of the first stat after a change, alike in every replica that makes
 *   the same calls in the same order.
 * Inode numbers are left as they are: a copied-up file keeps its lower
 * one, a new one gets the staging tmpfs's next, alike while the program
 * creates its files in the same order. A static program (no libdiehard)
 * sees the raw values.
 *
 * Off (no DIEHARD_VIEWDEVS): one predictable branch per wrapped call. */
#ifndef DIEHARD_VIEWSTAT_H
#define DIEHARD_VIEWSTAT_H

#include <stdbool.h>
#include <sys/stat.h>
#include <time.h>

struct statx;

/* Reads DIEHARD_VIEWDEVS (at start-up). */
void viewstat_start(void);
/* Takes it out of environ (from the constructor, once libc's environ is
 * set): it differs between replicas, which would otherwise see different
 * environments. exec.c puts it back into every exec's environment. */
void viewstat_hide(void);
/* "DIEHARD_VIEWDEVS=..." as received, or NULL. */
const char *viewstat_var(void);

extern bool viewstat_on;

/* st, of the file at (dir, path, flags), or of descriptor dir when path
 * is NULL or empty with AT_EMPTY_PATH: shown as every replica sees it. */
void viewstat_fix(struct stat *st, int dir, const char *path, int flags);
void viewstat_fix_statx(struct statx *stx, int dir, const char *path, int flags);
/* times as utimensat takes them, with "now" (NULL, UTIME_NOW) made the
 * virtualized clock's; out is filled and returned, or times when off. */
const struct timespec *viewstat_times(const struct timespec *times, struct timespec out[2]);

#endif
