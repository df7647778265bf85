/* ndlog.h — the run's nondeterminism log: what each virtualized call
 * returned, so that every replica's n-th call of a kind returns what every
 * other replica's n-th call of that kind returned.
 *
 * Calls are matched per key (a kind of call: "clock_gettime of
 * CLOCK_MONOTONIC", "getrandom", ...), not in one sequence per replica:
 * threads interleave differently in each replica, so a replica's n-th call
 * overall may be another thread's call than in its siblings, but a
 * deterministic program makes its calls of one kind in the same order as
 * far as values go (each thread's reads stay monotonic, since entry n+1 of a
 * clock was read after entry n). Different kinds never cross, so threads
 * cannot cause false alarms between them.
 *
 * The first replica to reach entry n of a key leads: its caller reads the
 * real value and puts it. The others follow and get it. Each entry also
 * holds an argument that must match (getrandom's size and flags): a follower
 * whose argument differs is behaving differently, a divergence signal.
 *
 * A key's top byte is its kind: a kind may have many keys (a server's wall
 * clock has one per thread, take.c).
 *
 * Without `keep`, entries every live replica has taken are dropped. With
 * `keep` (replacement replicas may be started), entries are kept from the
 * start of the run so that a new replica, restarted at position 0, replays
 * every value the others saw, until a kind keeps `cap` entries over all its
 * keys: then keep mode ends (the log is incomplete, entries go as without
 * it). Either way a key holds at most `cap` entries, past which the oldest
 * go and a replica that still needed one is lost for that key: from then on
 * it is told so at every call (it reads fresh real values; were it to catch
 * up, the log's values, read earlier, would take its clock backwards). A
 * log that has dropped a kept entry can no longer bring a new replica up
 * (ndlog_complete).
 *
 * Without keep, keys ndlog_reclaim names are forgotten once idle (nothing
 * kept, no live replica behind): a thread's key when the thread is done.
 *
 * Pure code: no I/O; single-threaded like the loop that owns it. */
#ifndef DIEHARD_NDLOG_H
#define DIEHARD_NDLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A call's result, as the supervisor will hand it back: the meaning of the
 * fields is the key's (a clock: sec and nsec; gettimeofday: sec, usec and the
 * timezone in c, d). err is a positive errno, or 0. */
struct nd_value {
	int64_t a, b;
	int32_t c, d;
	int32_t err;
};

enum nd_outcome {
	ND_LEAD,     /* first at this entry: read the real value, then ndlog_put */
	ND_FOLLOW,   /* *value is what the leader got */
	ND_MISMATCH, /* *value is the leader's, but its argument differed */
	ND_LOST,     /* r fell behind the cap on this key: read a real value, put nothing */
};

struct ndlog;

/* k replica positions, all live; at most cap entries kept per key (cap >=
 * 1); keep: entries are kept from the start (above). NULL if out of memory. */
struct ndlog *ndlog_new(unsigned k, size_t cap, bool keep);
void ndlog_free(struct ndlog *log);

/* Replica r makes its next call of key with argument arg. *index is its
 * position among r's calls of that key (from 0). On ND_MISMATCH, *expected is
 * the leader's argument. Returns -1 (errno ENOMEM) if a new key cannot be
 * tracked. */
int ndlog_take(struct ndlog *log, unsigned r, uint32_t key, uint64_t arg, uint64_t *index, struct nd_value *value,
	       uint64_t *expected);

/* After ND_LEAD: records the value replica r's entry (key, its last index)
 * returned. Call it before any other take of that key: a take in between
 * would lead the same entry again. */
void ndlog_put(struct ndlog *log, unsigned r, uint32_t key, const struct nd_value *value);

/* r leaves the vote: its position no longer keeps entries. */
void ndlog_retire(struct ndlog *log, unsigned r);

/* Position r starts again from the first call of every key, for a new
 * replica (live again). Returns whether every entry it will ask for is
 * still kept (ndlog_complete). */
bool ndlog_restart(struct ndlog *log, unsigned r);

/* Keys which(key) accepts may be forgotten when idle (above): checked in
 * sweeps as the number of keys doubles, so memory follows the live keys. */
void ndlog_reclaim(struct ndlog *log, bool (*which)(uint32_t key));

/* Moves replica r to the front of every key which(key) accepts: its next
 * call of such a key leads (reads a real value, "now") instead of
 * replaying what the others read earlier. */
void ndlog_to_front(struct ndlog *log, unsigned r, bool (*which)(uint32_t key));

/* The same for one key. */
void ndlog_to_front_key(struct ndlog *log, unsigned r, uint32_t key);

/* Whether every entry ever put is still kept: always false without keep
 * once something was dropped. */
bool ndlog_complete(const struct ndlog *log);

/* When keep mode ends, each kind keeps its keys' first entries, up to
 * per_kind of them (each key its first `level`, the highest level that
 * fits: a key with few entries keeps them all), for good: a new replica
 * restarted at 0 replays the run's start from them and is lost (reads real
 * values) on a key only past them. For fresh servers (--stateless), which
 * replay their start-up and then join at the front. 0 (the default): none. */
void ndlog_keep_start(struct ndlog *log, size_t per_kind);

/* Entries kept as the start (above), over all kinds. */
size_t ndlog_started(const struct ndlog *log);

/* Bytes of memory the kept entries use (their rings and starts). */
size_t ndlog_memory(const struct ndlog *log);

/* The value put last for key, or NULL if none was. */
const struct nd_value *ndlog_last(const struct ndlog *log, uint32_t key);

/* How many entries of key were ever put (the next one's number). */
uint64_t ndlog_front(const struct ndlog *log, uint32_t key);

/* How many calls of key replica r has made. */
uint64_t ndlog_count(const struct ndlog *log, unsigned r, uint32_t key);

/* The keys tracked (seen and not forgotten), in first-seen order: writes
 * up to max of them and returns how many there are. */
size_t ndlog_keys(const struct ndlog *log, uint32_t *keys, size_t max);

/* Entries kept for key, and entry n of them (from the first kept):
 * a recording's export. false when n is not kept. */
size_t ndlog_kept(const struct ndlog *log, uint32_t key);
bool ndlog_entry(const struct ndlog *log, uint32_t key, size_t n, uint64_t *arg, struct nd_value *value);

/* Appends an entry to key as if a replica outside the log had led it: a
 * replay's recorded answers, which its replica then follows. -1 (ENOMEM)
 * when the key cannot be tracked. */
int ndlog_preload(struct ndlog *log, uint32_t key, uint64_t arg, const struct nd_value *value);

/* Entry n of key (numbered from the key's first entry ever), if still
 * kept: the fast clock path's entries are put with ndlog_preload and
 * looked up by their own numbers (fastclock.h). */
bool ndlog_value(const struct ndlog *log, uint32_t key, uint64_t n, struct nd_value *value);

/* Replica r's position in key becomes n (at most the entries put): what a
 * replica read outside the log (the fast path) counts as taken, so that
 * entries every live replica passed are dropped as usual. */
void ndlog_seek(struct ndlog *log, unsigned r, uint32_t key, uint64_t n);

/* Entries led so far, over all keys. */
uint64_t ndlog_entries(const struct ndlog *log);

#endif
