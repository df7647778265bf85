/* voter.h — deciding what output k replicas agree on. A pure module: no I/O,
 * no allocation, no global state; the supervisor feeds it views of buffers.
 *
 * Model: a stream (stdout or stderr) is a byte sequence per replica. The
 * supervisor has committed the first C bytes of the stream to the world. For
 * every replica that has reached C, it shows the voter what that replica wrote
 * from C on (data, len) and whether the replica's stream has ended (eof: len
 * is then final). The voter says how many more bytes to commit, which replicas
 * wrote exactly those bytes, and which replicas provably wrote something else.
 *
 * Proposals. A live replica's proposal for the next piece is:
 *   - complete, a whole chunk: its first `chunk` bytes, when len >= chunk;
 *   - complete, final: all of its len < chunk bytes plus end-of-stream, when eof;
 *   - incomplete otherwise (a prefix of something not yet known).
 * Two complete proposals agree when they have the same length, the same
 * bytes and the same kind (a final proposal never equals a whole chunk, so a
 * replica that stops early disagrees with one that goes on). A final proposal
 * of length 0 means "the stream ends here".
 *
 * VOTER_CHUNKS (the normal mode): if a group of at least `quorum` live
 * replicas makes the same complete proposal, commit its length (0 for an
 * agreed end of stream: then `ended` is set). Live replicas with a different
 * complete proposal are diverged; live incomplete ones are diverged if their
 * bytes so far are not a prefix of the winning proposal, else pending. If no
 * group reaches quorum: wait (commit 0) while some live replica is incomplete
 * and could still complete a quorum; otherwise no_quorum.
 *
 * VOTER_PREFIX (the replicas went quiet, or a quorum is at eof): commit the
 * longest prefix that at least `quorum` live replicas share (any length,
 * not only whole chunks, never past a replica's len), so interactive programs
 * see their output without waiting for 4 KiB. If that prefix ends a stream for
 * a quorum (all of them eof with len == prefix), `ended` is set. Replicas whose
 * bytes contradict the committed prefix are diverged. If the quorum-shared
 * prefix is empty and CHUNKS rules would give no_quorum, no_quorum is set.
 *
 * Divergence offsets are relative to C: `diff_offset` is the first offset at
 * which a diverged replica (or, for no_quorum, any two live replicas) differ.
 *
 * Precisely (where the rules above leave a choice):
 *   - "Differ" and "contradict" mean provably: at some offset both say
 *     something and it is not the same thing (two different bytes, or a byte
 *     against end-of-stream). An incomplete replica whose bytes are a prefix
 *     contradicts nothing yet; a final proposal of 5 bytes contradicts a
 *     replica with 6 (at offset 5). A whole chunk says nothing past `chunk`.
 *   - `ended` is set whenever the winning proposal is a final one, of any
 *     length: commit its bytes, then close the stream. A replica at eof with
 *     len == chunk proposes a whole chunk; its end is voted on the next call
 *     (final proposal of length 0).
 *   - `agree`: CHUNKS, the replicas that made the winning proposal; PREFIX,
 *     the replicas whose bytes start with the committed ones (and, when
 *     `ended`, that end right there). Live replicas in neither `agree` nor
 *     `diverged` are pending (a lagging prefix of the decision): the caller
 *     must still compare the rest of their output when it arrives.
 *   - Nothing decided (commit 0, not ended): `agree` and `diverged` are 0,
 *     nobody is provably wrong until something is agreed. That covers both
 *     waiting and no_quorum.
 *   - `diff_offset` is the smallest over the diverged replicas (no_quorum: over
 *     all pairs of live replicas, 0 if no two provably differ, e.g. fewer
 *     live replicas than the quorum); 0 when nothing diverged.
 *   - "Could still complete a quorum" is exact: some proposal could still be
 *     made by `quorum` live replicas, counting a complete one only if it is
 *     that proposal and an incomplete one if its bytes are a prefix of it.
 *   - PREFIX commits the longest quorum-shared prefix of all the bytes shown,
 *     not capped at `chunk`; if that prefix is empty and no end is agreed,
 *     it answers as CHUNKS mode would when no group has a quorum (wait or
 *     no_quorum).
 *   - A quorum below a strict majority of the live replicas (the caller's
 *     choice; voter_quorum never gives one) can let two groups qualify: the
 *     longer prefix (PREFIX), then the larger group, then the group holding
 *     the lowest-numbered replica wins.
 *   - Out-of-contract arguments get the safe reading: quorum 0 counts as 1,
 *     chunk 0 as 1, views past VOTER_MAX are not looked at. voter_quorum with
 *     live > k still gives a strict majority of `live`.
 */
#ifndef DIEHARD_VOTER_H
#define DIEHARD_VOTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VOTER_MAX 64 /* replicas; the masks below are 64-bit */

struct voter_view {
	const unsigned char *data; /* the replica's bytes from the committed offset on */
	size_t len;
	bool eof;  /* the stream has ended: len is final */
	bool live; /* takes part in the vote (dead or catching-up replicas: false) */
};

enum voter_mode { VOTER_CHUNKS, VOTER_PREFIX };

struct voter_result {
	size_t commit;       /* bytes to commit now */
	bool ended;          /* the quorum agreed the stream ends after them */
	uint64_t agree;      /* live replicas whose bytes are exactly the committed ones (bit i = replica i) */
	uint64_t diverged;   /* live replicas that wrote something else */
	bool no_quorum;      /* nothing can ever be agreed: stop */
	size_t diff_offset;  /* first differing offset, relative to C, when diverged or no_quorum */
};

/* The quorum for `live` live replicas out of k: a strict majority of the
 * live ones, never fewer than two when k >= 2; one when k == 1. */
unsigned voter_quorum(unsigned live, unsigned k);

/* Whether two live views with bytes differ as far as both go (a view with
 * no data or none of it aside). */
bool voter_views_differ(const struct voter_view *views, unsigned n);

/* Decides for n (<= VOTER_MAX) views; chunk > 0. */
void voter_decide(const struct voter_view *views, unsigned n, unsigned quorum, size_t chunk,
		  enum voter_mode mode, struct voter_result *out);

#endif
