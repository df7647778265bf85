/* pastdigits.h — whether a replacement's replayed output says what was
 * committed, but for the digits. A pure module: no I/O, no allocation, no
 * global state.
 *
 * Why: a server's replacement replays the run's connections (connlog.c)
 * and re-writes the lines its predecessors wrote for them (an access log,
 * a "DB saved" line). Its clock reads come from the log by index, but an
 * event loop's n-th read is not the n-th read of its siblings' (their
 * iterations differ): its replayed lines carry other times, a millisecond
 * or, at a second's turn, another second. Those lines were committed long
 * ago; what the replacement must agree on is what it writes once it
 * serves. So, while it re-lives the past (and only there: supervisor's
 * output.c, files/logs.c), a byte of its output that differs from the
 * committed byte where both are ASCII digits is taken as the committed
 * one; any other difference is a divergence as before. Lengths never
 * differ: a time whose width changes is a difference.
 *
 * pastdigits_alike: the length of the longest prefix of a and b (n bytes
 * each) in which every byte is the same in both or a digit in both.
 * pastdigits_mask: src's n bytes into dst with every digit '0' (for the
 * digests of blocks too old for byte-wise comparison: two blocks alike but
 * for digits have equal masks). Invariant: pastdigits_alike(a, b, n) == n
 * iff mask(a) == mask(b). */
#ifndef DIEHARD_PASTDIGITS_H
#define DIEHARD_PASTDIGITS_H

#include <stddef.h>

size_t pastdigits_alike(const unsigned char *a, const unsigned char *b, size_t n);
void pastdigits_mask(unsigned char *dst, const unsigned char *src, size_t n);

#endif
