/* inputlog.h — every byte read from stdin, kept for replaying to a replica
 * started later (a fresh replica must see the same input from the start).
 *
 * The log is a memfd: it costs memory, not disk. Past `cap` bytes the oldest
 * are released (hole-punched); a log that has lost its start can no longer
 * seed a replacement replica, and says so (inputlog_complete). */
#ifndef DIEHARD_INPUTLOG_H
#define DIEHARD_INPUTLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct inputlog;

/* NULL when cap is 0 (no log) or the memfd cannot be made (a warning). */
struct inputlog *inputlog_new(size_t cap);
void inputlog_append(struct inputlog *l, const void *p, size_t n);
size_t inputlog_bytes(const struct inputlog *l);      /* appended so far */
size_t inputlog_retained_from(const struct inputlog *l); /* first byte still held */
bool inputlog_complete(struct inputlog *l);
/* Writes logged bytes from offset off on (at most max) into fd, a
 * non-blocking pipe, without copying them through us where the kernel can
 * (splice). Returns the bytes written, or -1 with errno (EAGAIN: the pipe is
 * full; ENODATA: those bytes were released). */
ssize_t inputlog_send(struct inputlog *l, size_t off, int fd, size_t max);
/* Copies n logged bytes from offset off into buf (a recording); false
 * when they are not all held. */
bool inputlog_read(struct inputlog *l, size_t off, void *buf, size_t n);
void inputlog_free(struct inputlog *l);

#endif
