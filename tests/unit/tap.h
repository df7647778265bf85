/* tap.h — a minimal TAP producer for the C unit tests.
 *
 * CHECK(cond, name) prints "ok N - name" or "not ok N - name" with the failing
 * expression and line; tap_done() prints the plan and returns the exit status
 * (non-zero if anything failed), so `prove` and plain runs both see failures.
 */
#ifndef DIEHARD_TAP_H
#define DIEHARD_TAP_H

#include <stdio.h>

static int tap_count;
static int tap_failed;

#define CHECK(cond, ...)                                                          \
	do {                                                                      \
		int tap_ok_ = (cond) ? 1 : 0;                                     \
		tap_count++;                                                      \
		if (tap_ok_) {                                                    \
			printf("ok %d - ", tap_count);                            \
		} else {                                                          \
			tap_failed++;                                             \
			printf("not ok %d - ", tap_count);                        \
		}                                                                 \
		printf(__VA_ARGS__);                                              \
		printf("\n");                                                     \
		if (!tap_ok_)                                                     \
			printf("#   failed: %s at %s:%d\n", #cond, __FILE__, __LINE__); \
		fflush(stdout);                                                   \
	} while (0)

static inline int tap_done(void)
{
	printf("1..%d\n", tap_count);
	if (tap_failed)
		printf("# %d of %d checks failed\n", tap_failed, tap_count);
	return tap_failed ? 1 : 0;
}

#endif
