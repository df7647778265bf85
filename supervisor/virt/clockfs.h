/* clockfs.h — the files of the fast clock path's pages (clockpage.h): a
 * page per replica slot and one for diehard, each a file of its own, so
 * that the kernel, not the protocol, keeps a replica from writing any page
 * but its own (issue 37).
 *
 * What each holder can do with what it gets:
 * - diehard: a read-write descriptor of every page (it maps them all);
 * - slot i's replica: page i's read-write descriptor, and a directory of
 *   every page's file (cp_page_name) on a mount that is read-only: opened
 *   from there, a page can be mapped for reading only, and neither
 *   reopening it (/proc/self/fd), nor chmod, nor a remount, nor a clone of
 *   the mount makes it writable (the mount belongs to no namespace the
 *   replica can change: it is detached);
 * - nobody can change a page's size (a shrunk page would fault its
 *   readers: SIGBUS in diehard and the siblings) where Landlock can say so
 *   (ABI 3, Linux 6.2): the read-write descriptors are opened by a process
 *   Landlock denies truncation, which the descriptors keep wherever they
 *   go, and the replicas truncate nothing outside their root's tree
 *   (clockfs_confine): a page's file is in none.
 *
 * The tmpfs is made by a child of diehard (a user and mount namespace of
 * its own when diehard is not root: the kernel lets only a namespace's
 * root make a file system), which hands the descriptors over and exits. */
#ifndef DIEHARD_CLOCKFS_H
#define DIEHARD_CLOCKFS_H

#include <stdbool.h>
#include <stddef.h>

#include "clockpage.h"

struct clockfs {
	unsigned nslots;
	int page[CP_MAX_SLOTS + 1]; /* read-write, close-on-exec; [nslots]: diehard's */
	int dir;                    /* the pages' directory, read-only mount */
	bool sized;                 /* no holder can change a page's size (Landlock) */
};

/* Makes the pages' files, each of size bytes, for nslots replica slots.
 * 0, or -1 with *why (a static string) and errno. */
int clockfs_make(struct clockfs *fs, unsigned nslots, size_t size, const char **why);

/* Closes every descriptor. */
void clockfs_close(struct clockfs *fs);

/* In a replica before its exec: truncation allowed only beneath its root
 * (the pages' files are not), where Landlock can say so. 0, or an errno.
 * Needs no_new_privs or CAP_SYS_ADMIN in the process's user namespace. */
int clockfs_confine(void);

#endif
