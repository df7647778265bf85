/* relines.h — whether two replicas' output differs only in the order of
 * whole lines. A pure module: no I/O, no allocation, no global state.
 *
 * Why: a server whose threads (or processes) write one shared log, a line
 * a request, writes the lines of requests served at once in the order its
 * threads happen to run, in every replica another. Byte for byte that is a
 * divergence as soon as two such lines differ (their times a second
 * apart), though each replica wrote the same lines, each line whole. The
 * caller (output.c, for a serving run's stdout and stderr) asks here, at
 * a divergence, whether the two sides hold the same lines in another
 * order; if so it makes one side's bytes the other's (same lines, so the
 * same length: no offset moves) and votes again.
 *
 * Model: a and b are two sides' bytes from one offset that starts a line
 * (the caller puts the committed part of an unfinished line in front of
 * both); they are equal before `from` (the first difference the caller
 * found) and differ there. A line is its bytes up to and including '\n';
 * bytes after a side's last '\n' are not a line yet.
 *
 * relines_match looks for the smallest e > from at which the lines of a
 * and of b from the start of the line holding `from` (s0: the same in both)
 * end, n of each, both at e, and hold the same lines (as a multiset,
 * compared byte for byte), n at most RELINES_MAX_LINES:
 *   - RELINES_SAME, *end = e: found.
 *   - RELINES_WAIT: not found in what the sides show, but the side whose
 *     lines ran out may still write more (a_more, b_more: the caller says
 *     so) and the limit is not reached.
 *   - RELINES_NO: not found, and the side that ran out writes no more, or
 *     past the limit (a line that never comes to the other side: a real
 *     difference).
 * Invariants: SAME implies alen >= e, blen >= e, a[e-1] == b[e-1] == '\n',
 * and a[0,e), b[0,e) are permutations of each other's lines (so
 * b[0,from) == a[0,from) stays as it is when b[0,e) is replaced by a's).
 */
#ifndef DIEHARD_RELINES_H
#define DIEHARD_RELINES_H

#include <stdbool.h>
#include <stddef.h>

#define RELINES_MAX_LINES 256 /* lines a side is looked at, from the line where the sides part */

enum relines_verdict { RELINES_NO, RELINES_WAIT, RELINES_SAME };

/* Where the line holding offset at of p starts: just past the last '\n'
 * before at, or 0 (p[0, at) whole lines: at itself). */
size_t relines_line_start(const unsigned char *p, size_t at);

enum relines_verdict relines_match(const unsigned char *a, size_t alen, bool a_more, const unsigned char *b,
				   size_t blen, bool b_more, size_t from, size_t *end);

#endif
