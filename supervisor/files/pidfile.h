/* pidfile.h — a daemon's pid file in the real tree holds diehard's pid.
 *
 * A daemon writes its pid to NAME.pid so that others can signal it (`kill
 * -HUP $(cat /run/x.pid)`, `nginx -s reload`). In its views each replica
 * writes its own pid, that of its pid namespace (2, or a child's), and
 * that file would reach the real tree only at the end. A pid file is a
 * file whose name ends in ".pid" and whose contents are a decimal number
 * and at most a newline (32 bytes at most). Its creation (an open with
 * O_CREAT and O_TRUNC, notified by the filter: the path read from the
 * replica, resolved against its cwd or directory descriptor) is looked at
 * from the next tick: once a quorum of voters have the same such contents
 * in their views (the same mode and owner too) and every participant's
 * views hide the path, the real file is made with diehard's pid in its
 * place, whose forwarded signals reach every replica (beside, synced,
 * renamed; the start version kept in pre.h's layer first). What happens
 * to it after (the daemon removes it at exit) is committed at the end as
 * any change. */
#ifndef DIEHARD_PIDFILE_H
#define DIEHARD_PIDFILE_H

#include <stdint.h>
#include <sys/types.h>

struct sup;
struct pidfiles;
struct pre;
typedef struct json_t json_t;

struct pidfiles *pidfile_new(struct sup *S, json_t *rep, struct pre *pre);
void pidfile_free(struct pidfiles *F);
/* Thread tid of slot's replica creates path (as the open names it,
 * relative to dirfd or its cwd). */
void pidfile_creating(struct pidfiles *F, unsigned slot, pid_t tid, int dirfd, const char *path);
/* The supervisor's tick: pid files a quorum agrees on made real. */
void pidfile_tick(struct pidfiles *F);

#endif
