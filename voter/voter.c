/* voter.c — deciding what output k replicas agree on.
 *
 * Design. Everything the voter reasons about is one notion: what a replica
 * has said so far about the stream from the committed offset on. That is a
 * run of known bytes followed either by end-of-stream or by nothing known yet
 * (struct proposal). A whole chunk is `chunk` known bytes with nothing known
 * after them (the bytes past the chunk belong to the next vote); a final
 * proposal is its bytes followed by end-of-stream; an incomplete one is its
 * bytes so far. Two such statements provably differ at the first offset where
 * both say something and say different things (a byte against another byte,
 * or a byte against end-of-stream); this one function, first_difference(),
 * gives every divergence verdict, every diff_offset and every "is a prefix
 * of" test, so the modes cannot disagree with each other about what a
 * contradiction is.
 *
 * CHUNKS mode groups the complete proposals by comparing each replica with
 * the representative (first member) of every group found so far and joining
 * the first that matches. When all replicas agree, which is nearly always,
 * that is n-1 memcmp of one chunk each; only a split costs more, and a split
 * ends with a replica killed or the run stopped, so it is rare. If no group
 * reaches the quorum, a quorum is still possible exactly when some concrete
 * proposal could collect `quorum` live replicas: either an existing group
 * plus the incomplete replicas whose bytes are a prefix of its proposal, or a
 * set of incomplete replicas that are all prefixes of the longest of them
 * (they can all still grow into one common proposal).
 *
 * PREFIX mode looks for the longest prefix shared by `quorum` live replicas.
 * Taking each replica in turn as a representative, the longest prefix of it
 * that `quorum` replicas share is the quorum-th largest of its common-prefix
 * lengths with every replica (itself counting its whole length). The best
 * representative gives the answer; the scan stops as soon as it reaches the
 * upper bound (the quorum-th largest length) with a strict majority, which in
 * the common case is the first representative.
 *
 * The voter keeps no state: every call decides from the views alone, so the
 * supervisor may call it again with the same views and get the same answer.
 */
#include "voter.h"

#include <string.h>

/* first_difference() when the two statements are compatible. */
#define NO_DIFFERENCE SIZE_MAX

struct proposal {
	const unsigned char *bytes; /* may be NULL when len == 0 */
	size_t len;                 /* known bytes */
	bool ends;                  /* end-of-stream is known to follow them */
	bool complete;              /* a whole chunk or a final proposal: will not change */
};

static uint64_t bit(unsigned i)
{
	return (uint64_t)1 << i; /* i < VOTER_MAX == 64: callers iterate below n <= 64 */
}

static unsigned count_bits(uint64_t mask)
{
	unsigned count = 0;
	for (; mask; mask &= mask - 1)
		count++;
	return count;
}

static unsigned lowest_bit(uint64_t mask)
{
	unsigned i = 0;
	while (!(mask & bit(i)))
		i++;
	return i; /* mask != 0 */
}

static size_t min_size(size_t a, size_t b)
{
	return a < b ? a : b;
}

/* The first offset below n where a and b differ, or n. Nearly every call
 * finds the bytes equal, so one memcmp over the whole range comes first; only
 * a mismatch is located, block by block and then byte by byte. memcmp is
 * never called with n == 0, where the pointers may be NULL. */
static size_t first_mismatch(const unsigned char *a, const unsigned char *b, size_t n)
{
	enum { BLOCK = 64 };
	if (n == 0 || a == b || memcmp(a, b, n) == 0)
		return n;
	size_t offset = 0;
	while (n - offset > BLOCK && memcmp(a + offset, b + offset, BLOCK) == 0)
		offset += BLOCK;
	while (a[offset] == b[offset])
		offset++;
	return offset;
}

/* The first offset at which a and b provably say different things, or
 * NO_DIFFERENCE if one may still turn out to be a prefix of (or equal to) the
 * other. Past the shorter one's known bytes only its end-of-stream can
 * contradict: a byte the other one has there, known to exist. */
static size_t first_difference(const struct proposal *a, const struct proposal *b)
{
	size_t common = min_size(a->len, b->len);
	size_t offset = first_mismatch(a->bytes, b->bytes, common);
	if (offset < common)
		return offset;
	if (a->len < b->len && a->ends)
		return a->len;
	if (b->len < a->len && b->ends)
		return b->len;
	return NO_DIFFERENCE;
}

/* Same kind, same length, same bytes. Final proposals are shorter than a
 * chunk, so the length alone already tells a final one from a whole chunk;
 * `ends` is compared anyway so the rule does not depend on that. */
static bool proposals_equal(const struct proposal *a, const struct proposal *b)
{
	return a->len == b->len && a->ends == b->ends && first_mismatch(a->bytes, b->bytes, a->len) == a->len;
}

/* A replica's proposal for the next piece (voter.h, "Proposals"). */
static struct proposal proposal_of(const struct voter_view *view, size_t chunk)
{
	struct proposal p = { view->data, view->len, false, true };
	if (view->len >= chunk)
		p.len = chunk; /* a whole chunk, even at eof: the end is the next piece */
	else if (view->eof)
		p.ends = true;
	else
		p.complete = false;
	return p;
}

/* All a replica has written from the committed offset on (PREFIX mode). */
static struct proposal content_of(const struct voter_view *view)
{
	struct proposal p = { view->data, view->len, view->eof, view->eof };
	return p;
}

/* Marks as diverged the replicas in `candidates` that contradict `decided`
 * (what is being committed, with its end-of-stream if the stream ends), and
 * keeps the smallest offset at which any of them does. The others are
 * pending: a prefix of the decision, to be compared again when they grow. */
static void mark_diverged(const struct proposal *decided, const struct proposal *said, unsigned n,
			  uint64_t candidates, struct voter_result *out)
{
	for (unsigned i = 0; i < n; i++) {
		if (!(candidates & bit(i)))
			continue;
		size_t offset = first_difference(decided, &said[i]);
		if (offset == NO_DIFFERENCE)
			continue;
		if (!out->diverged || offset < out->diff_offset)
			out->diff_offset = offset;
		out->diverged |= bit(i);
	}
}

struct groups {
	unsigned count;
	unsigned representative[VOTER_MAX]; /* lowest-numbered member */
	uint64_t members[VOTER_MAX];
	unsigned size[VOTER_MAX];
	uint64_t incomplete; /* live replicas with no complete proposal */
};

/* Groups the live complete proposals by equality, in replica order, so each
 * group's representative is its lowest-numbered member. */
static void group_proposals(const struct proposal *proposals, unsigned n, uint64_t live, struct groups *g)
{
	g->count = 0;
	g->incomplete = 0;
	for (unsigned i = 0; i < n; i++) {
		if (!(live & bit(i)))
			continue;
		if (!proposals[i].complete) {
			g->incomplete |= bit(i);
			continue;
		}
		unsigned k = 0;
		while (k < g->count && !proposals_equal(&proposals[g->representative[k]], &proposals[i]))
			k++;
		if (k == g->count) {
			g->representative[k] = i;
			g->members[k] = 0;
			g->size[k] = 0;
			g->count++;
		}
		g->members[k] |= bit(i);
		g->size[k]++;
	}
}

/* Could `quorum` live replicas still end up making one same proposal?
 * Complete proposals are final, so only the incomplete replicas can join a
 * group, and only one whose bytes are a prefix of it. Incomplete replicas that
 * are all prefixes of the longest among them can also grow into a new common
 * proposal. Nothing else can: any common future proposal of a set of
 * incomplete replicas makes them a chain of prefixes. */
static bool quorum_still_possible(const struct proposal *proposals, unsigned n, const struct groups *g,
				  unsigned quorum)
{
	unsigned incomplete = count_bits(g->incomplete);
	for (unsigned k = 0; k < g->count; k++) {
		unsigned votes = g->size[k];
		if (votes >= quorum)
			return true;
		if (votes + incomplete < quorum)
			continue;
		const struct proposal *p = &proposals[g->representative[k]];
		for (unsigned i = 0; i < n; i++)
			if ((g->incomplete & bit(i)) && first_difference(p, &proposals[i]) == NO_DIFFERENCE &&
			    ++votes >= quorum)
				return true;
	}
	if (incomplete < quorum)
		return false;
	for (unsigned j = 0; j < n; j++) {
		if (!(g->incomplete & bit(j)))
			continue;
		unsigned votes = 0;
		for (unsigned i = 0; i < n; i++)
			if ((g->incomplete & bit(i)) && proposals[i].len <= proposals[j].len &&
			    first_difference(&proposals[j], &proposals[i]) == NO_DIFFERENCE && ++votes >= quorum)
				return true;
	}
	return false;
}

/* No group has a quorum: wait (the result stays all zero) if one may still
 * form, else no_quorum with the first offset at which any two live replicas
 * provably differ (0 if none do, e.g. too few replicas are live). Quadratic,
 * but it runs once: no_quorum stops the run. */
static void settle_undecided(const struct proposal *proposals, unsigned n, uint64_t live, unsigned quorum,
			     struct voter_result *out)
{
	struct groups g;
	group_proposals(proposals, n, live, &g);
	if (quorum_still_possible(proposals, n, &g, quorum))
		return;
	out->no_quorum = true;
	size_t first = NO_DIFFERENCE;
	for (unsigned i = 0; i < n; i++)
		for (unsigned j = i + 1; j < n; j++)
			if ((live & bit(i)) && (live & bit(j)))
				first = min_size(first, first_difference(&proposals[i], &proposals[j]));
	out->diff_offset = first == NO_DIFFERENCE ? 0 : first;
}

static void decide_chunks(const struct proposal *proposals, unsigned n, uint64_t live, unsigned quorum,
			  struct voter_result *out)
{
	struct groups g;
	group_proposals(proposals, n, live, &g);

	/* With a strict-majority quorum at most one group qualifies. A caller's
	 * smaller quorum could let two: the larger wins, then the one holding
	 * the lowest-numbered replica (groups are in that order already). */
	unsigned winner = g.count;
	for (unsigned k = 0; k < g.count; k++)
		if (g.size[k] >= quorum && (winner == g.count || g.size[k] > g.size[winner]))
			winner = k;
	if (winner == g.count) {
		settle_undecided(proposals, n, live, quorum, out);
		return;
	}

	const struct proposal *decided = &proposals[g.representative[winner]];
	out->commit = decided->len;
	out->ended = decided->ends;
	out->agree = g.members[winner];
	mark_diverged(decided, proposals, n, live & ~g.members[winner], out);
}

/* The quorum-th largest of values[0..count), count >= quorum >= 1. Sorts a
 * copy (at most 64 values, insertion sort). */
static size_t quorum_th_largest(const size_t *values, unsigned count, unsigned quorum)
{
	size_t sorted[VOTER_MAX];
	for (unsigned i = 0; i < count; i++) {
		unsigned j = i;
		for (; j > 0 && sorted[j - 1] < values[i]; j--)
			sorted[j] = sorted[j - 1];
		sorted[j] = values[i];
	}
	return sorted[quorum - 1];
}

static void decide_prefix(const struct voter_view *views, const struct proposal *proposals, unsigned n,
			  uint64_t live, unsigned quorum, struct voter_result *out)
{
	struct proposal content[VOTER_MAX];
	size_t lengths[VOTER_MAX];
	unsigned live_count = 0;
	for (unsigned i = 0; i < n; i++)
		if (live & bit(i)) {
			content[i] = content_of(&views[i]);
			lengths[live_count++] = views[i].len;
		}
	if (live_count < quorum) {
		settle_undecided(proposals, n, live, quorum, out);
		return;
	}

	/* No prefix shared by `quorum` replicas can be longer than the
	 * quorum-th longest replica. */
	size_t bound = quorum_th_largest(lengths, live_count, quorum);
	bool found = false;
	size_t best_len = 0;
	uint64_t best_class = 0;
	unsigned best_size = 0;
	for (unsigned r = 0; r < n; r++) {
		if (!(live & bit(r)))
			continue;
		/* r cannot give a longer prefix than its own length, and a
		 * member of the best class as long as its prefix gives that
		 * same class again. */
		if (found && (content[r].len < best_len || (content[r].len == best_len && (best_class & bit(r)))))
			continue;
		size_t shared[VOTER_MAX];
		size_t with[VOTER_MAX];
		unsigned m = 0;
		for (unsigned i = 0; i < n; i++)
			if (live & bit(i)) {
				with[i] = i == r ? content[r].len
						 : first_mismatch(content[r].bytes, content[i].bytes,
								  min_size(content[r].len, content[i].len));
				shared[m++] = with[i];
			}
		size_t len = quorum_th_largest(shared, m, quorum);
		uint64_t sharing = 0;
		for (unsigned i = 0; i < n; i++)
			if ((live & bit(i)) && with[i] >= len)
				sharing |= bit(i);
		unsigned size = count_bits(sharing);
		/* Longest prefix first; between classes sharing as long a prefix
		 * (only possible with a quorum below a strict majority), the
		 * larger, then the one holding the lowest-numbered replica. */
		if (!found || len > best_len ||
		    (len == best_len &&
		     (size > best_size || (size == best_size && lowest_bit(sharing) < lowest_bit(best_class))))) {
			found = true;
			best_len = len;
			best_class = sharing;
			best_size = size;
		}
		if (best_len == bound && 2 * best_size > live_count)
			break; /* nothing longer exists, nor another class as long and as large */
	}

	uint64_t at_end = 0;
	for (unsigned i = 0; i < n; i++)
		if ((best_class & bit(i)) && content[i].ends && content[i].len == best_len)
			at_end |= bit(i);
	bool ended = count_bits(at_end) >= quorum;
	if (best_len == 0 && !ended) {
		/* Nothing to commit: as in CHUNKS mode, wait or give up. */
		settle_undecided(proposals, n, live, quorum, out);
		return;
	}

	struct proposal decided = { content[lowest_bit(best_class)].bytes, best_len, ended, true };
	out->commit = best_len;
	out->ended = ended;
	out->agree = ended ? at_end : best_class;
	mark_diverged(&decided, content, n, live & ~out->agree, out);
}

unsigned voter_quorum(unsigned live, unsigned k)
{
	unsigned majority = live / 2 + 1;
	if (k >= 2 && majority < 2)
		return 2; /* one replica alone is never trusted once there were several */
	return majority;
}

void voter_decide(const struct voter_view *views, unsigned n, unsigned quorum, size_t chunk,
		  enum voter_mode mode, struct voter_result *out)
{
	struct proposal proposals[VOTER_MAX];
	uint64_t live = 0;

	*out = (struct voter_result){ 0 };
	/* Out-of-contract arguments get the safe reading (voter.h). */
	if (n > VOTER_MAX)
		n = VOTER_MAX;
	if (quorum == 0)
		quorum = 1;
	if (chunk == 0)
		chunk = 1;

	for (unsigned i = 0; i < n; i++)
		if (views[i].live) {
			live |= bit(i);
			proposals[i] = proposal_of(&views[i], chunk);
		}
	if (mode == VOTER_PREFIX)
		decide_prefix(views, proposals, n, live, quorum, out);
	else
		decide_chunks(proposals, n, live, quorum, out);
}

bool voter_views_differ(const struct voter_view *v, unsigned n)
{
	int first = -1;
	for (unsigned i = 0; i < n && i < VOTER_MAX; i++) {
		if (!v[i].live || v[i].data == NULL || v[i].len == 0)
			continue;
		if (first < 0) {
			first = (int)i;
			continue;
		}
		size_t m = v[i].len < v[first].len ? v[i].len : v[first].len;
		if (memcmp(v[i].data, v[first].data, m) != 0)
			return true;
	}
	return false;
}
