/* pre.h — the run's start-state layer: what a commit point replaced,
 * as it was when the run started, for the replicas that have not reached
 * that point.
 *
 * A commit point (points.h) writes the real file system while the run
 * goes on, and the real file system is every view's lower layer: without
 * more, a replica that has not reached the point yet would see the
 * quorum's version before writing its own (SQLite would find another
 * replica's journal and roll it back), and a replacement replaying from
 * the start would see the state at the point, not at the start. So each
 * view has one more lower layer, above the real directory and shared by
 * all replicas (view.h): before a path is first committed at a point, its
 * start-state version is put there, a copy of the file or, where it did
 * not exist, a whiteout (a 0/0 character device) at its topmost missing
 * directory. Directories on the way are made there with the real ones'
 * modes, owners (as root) and times, as overlayfs shows the topmost
 * lower's.
 *
 * The layer lives in a directory of diehard's own on a tmpfs
 * (/dev/shm/diehard-pre-PID-XXXXXX), mode 0700, which no replica's program
 * can reach (its views and its private /dev/shm cover it); diehard removes
 * it at the end, and the next diehard of the user removes those whose
 * diehard is gone (a SIGKILL leaves it).
 *
 * Invariant: a path in the layer never changes once put there; a path
 * is put there before the real one is first changed by a point. */
#ifndef DIEHARD_PRE_H
#define DIEHARD_PRE_H

#include <stdbool.h>

struct pre;
struct changes;
struct digest_key;

/* A new, empty layer; NULL when none can be made (said: commits then
 * wait for the run's end). */
struct pre *pre_new(void);
/* Removes the layer and frees it, with its epochs. */
void pre_free(struct pre *p);
/* A new, empty layer for an epoch that begins now (a durable server's
 * replacement, --durable: it starts from the files as committed now, not
 * as the run began): pre_keep on the run's layer keeps each path in every
 * epoch's too, as it was when the epoch began (nothing changed it since:
 * every commit keeps first). Freed with the run's. NULL (said) when none
 * can be made. */
struct pre *pre_epoch(struct pre *run);
/* Removes epoch e of run's (its replacement is gone) and frees it. */
void pre_epoch_free(struct pre *run, struct pre *e);
/* Whether epoch e failed to keep a path (a full /dev/shm): its
 * replacement's views may show a later commit; files.c takes it out. */
bool pre_epoch_broken(const struct pre *e);
/* The root the views take their layers under (view.h's plan->pre). */
const char *pre_root(const struct pre *p);
/* Keeps the start state of path (absolute, a regular file or absent),
 * beneath the view whose target is target, unless kept already; and its
 * state at each epoch's beginning in that epoch's layer (an epoch that
 * cannot take it is marked broken). 0, or the errno of the run's own
 * layer. */
int pre_keep(struct pre *p, const char *target, const char *path);

/* A replica's changes (read: changes_scan) completed by what its views
 * showed it of the kept paths it has no version of its own of: the
 * start's, through this layer (a replica whose views were made after a
 * commit point). Relative to the real file system, now the committed
 * version, that is a change too: the removal of a file the start did not
 * have, or the start's bytes. Without it a replacement that removed a
 * journal would disagree with the replicas that removed the committed
 * one. 0, or an errno. */
int pre_complete(const struct pre *p, struct changes *ch, const struct digest_key *key);

#endif
