/* outorder.c — a server's log lines in another order (docs/NETWORK.md,
 * "Log lines from threads").
 *
 * A server that serves requests at once in threads or processes writing
 * one log writes their lines in the order its threads happen to run: in
 * each replica another. Each line is the same (its time matched per
 * thread: take.c), their order is not, and byte for byte that is a
 * divergence as soon as two such lines differ. Such a run's stdout and
 * stderr are therefore voted line-wise where they differ: at a
 * difference, a side whose next lines are the reference's (output.c: the
 * majority's; for a replica behind, the committed output and the front
 * voter's bytes; with no majority, the view the most others match) in
 * another order is given the reference's order in place (the same lines,
 * so the same length: no offset moves), and the vote goes on. What is
 * committed is what a replica wrote, every line of it written by each
 * voter. files/logs.c does the same for append-only files.
 *
 * Only once the run served clients (sup_serves), never on a stream that
 * is a client's own connection (a TCP socket, or any socket that is our
 * standard input: inetd style), nor with --strict-order. A block is at
 * most RELINES_MAX_LINES lines and OUTORDER_WINDOW bytes from the start of
 * the line where the sides part; the part of that line before the
 * committed offset is taken from the history ring (OUTORDER_PRE bytes at
 * most). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "pastdigits.h"
#include "sup.h"

bool outorder_serving(const struct sup *S)
{
	/* Once it served, it served: at its stop (its listeners closed) the
	 * lines its threads wrote last are still a server's. One run a
	 * process. */
	static bool served;
	served = served || sup_serves(S);
	return !S->o->strict_order && served;
}

/* Whether a client reads st: its bytes keep their order. A TCP socket is
 * one; so is any socket that is our standard input too (inetd style,
 * systemd's Accept=yes on a unix socket), unlike the journal's stream. */
static bool client_reads(const struct stream *st)
{
	int domain = 0;
	socklen_t len = sizeof domain;
	struct stat sb, in;
	if (fstat(st->fd, &sb) != 0 || !S_ISSOCK(sb.st_mode))
		return false;
	if (getsockopt(st->fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0 && (domain == AF_INET || domain == AF_INET6))
		return true;
	return fstat(STDIN_FILENO, &in) == 0 && in.st_dev == sb.st_dev && in.st_ino == sb.st_ino;
}

bool outorder_free(const struct sup *S, struct stream *st)
{
	if (!outorder_serving(S))
		return false;
	if (st->client_reads < 0)
		st->client_reads = client_reads(st); /* the descriptor stays what it is */
	return st->client_reads == 0;
}

/* Where the line holding stream offset `at` starts, from the history ring
 * of committed bytes: false when that is further back than OUTORDER_PRE or
 * than the ring holds. */
static bool line_start(const struct stream *st, size_t at, size_t *ls)
{
	const struct ring *h = st->hist;
	size_t s = at;
	while (s > 0) {
		if (s <= h->head || at - s >= OUTORDER_PRE)
			return false;
		if (*ring_at(h, s - 1) == '\n')
			break;
		s--;
	}
	*ls = s;
	return true;
}

enum relines_verdict outorder_lines(const unsigned char *pre, size_t npre, const unsigned char *ref, size_t nref,
				    bool ref_more, const unsigned char *mine, size_t nmine, bool mine_more, size_t d,
				    size_t digits, size_t *end)
{
	static unsigned char *a, *b; /* the sides with the line's committed start in front */
	/* The block starts at the line where the sides part: whole lines
	 * before it are the same in both, and need no committed start. */
	size_t s0 = relines_line_start(ref, d);
	if (s0 > 0)
		npre = 0;
	if (npre > OUTORDER_PRE)
		return RELINES_NO;
	if (a == NULL) {
		a = malloc(OUTORDER_PRE + OUTORDER_WINDOW);
		b = malloc(OUTORDER_PRE + OUTORDER_WINDOW);
		if (a == NULL || b == NULL) {
			free(a);
			free(b);
			a = b = NULL;
			return RELINES_NO;
		}
	}
	ref += s0;
	mine += s0;
	nref -= s0;
	nmine -= s0;
	ref_more = ref_more && nref < OUTORDER_WINDOW;
	mine_more = mine_more && nmine < OUTORDER_WINDOW;
	nref = nref < OUTORDER_WINDOW ? nref : OUTORDER_WINDOW;
	nmine = nmine < OUTORDER_WINDOW ? nmine : OUTORDER_WINDOW;
	if (npre > 0) {
		memcpy(a, pre, npre);
		memcpy(b, pre, npre);
	}
	memcpy(a + npre, ref, nref);
	memcpy(b + npre, mine, nmine);
	if (digits > s0) {
		/* The committed start in front is the same in both: masked
		 * alike. */
		size_t m = npre + (digits - s0);
		pastdigits_mask(a, a, m < npre + nref ? m : npre + nref);
		pastdigits_mask(b, b, m < npre + nmine ? m : npre + nmine);
	}
	size_t e;
	enum relines_verdict v = relines_match(a, npre + nref, ref_more, b, npre + nmine, mine_more, npre + d - s0, &e);
	if (v == RELINES_SAME)
		*end = s0 + e - npre;
	return v;
}

void outorder_said(struct sup *S, const char *what, bool *said, size_t from, size_t to)
{
	report_reordered(S->report, what);
	if (!*said)
		log_event("%s: lines written in another order by the replicas (a server's threads writing one log): "
			  "taken in one order, bytes %zu-%zu (said once; the report counts them)",
			  what, from, to - 1);
	*said = true;
}

enum relines_verdict outorder_check(const struct stream *st, size_t at, const unsigned char *ref, size_t nref,
				    bool ref_more, const unsigned char *mine, size_t nmine, bool mine_more, size_t d,
				    size_t digits, size_t *end)
{
	size_t ls = at;
	if (relines_line_start(ref, d) == 0 && !line_start(st, at, &ls))
		return RELINES_NO; /* the line began too far back */
	return outorder_lines(ring_at(st->hist, ls), at - ls, ref, nref, ref_more, mine, nmine, mine_more, d, digits,
			      end);
}

enum relines_verdict outorder_match(struct sup *S, struct stream *st, size_t at, const unsigned char *ref,
				    size_t nref, bool ref_more, unsigned char *mine, size_t nmine, bool mine_more,
				    size_t d, size_t digits)
{
	size_t end;
	enum relines_verdict v = outorder_check(st, at, ref, nref, ref_more, mine, nmine, mine_more, d, digits, &end);
	if (v != RELINES_SAME)
		return v;
	memcpy(mine, ref, end);
	outorder_said(S, st->name, &st->said_order, at + d, at + end);
	return v;
}
