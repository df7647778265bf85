/* segv.c — see segv.h. */
#include "segv.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "archipelago.h"
#include "fence.h"

#define EXPORT __attribute__((visibility("default")))

/* glibc's own, exported under this name too: the one our sigaction hides. */
extern int __sigaction(int sig, const struct sigaction *act, struct sigaction *old);

static _Atomic bool installed;
/* The program's SIGSEGV disposition, kept behind ours. */
static struct sigaction app_segv;

/* Passes a fault to the program's handler, or to the default action (the
 * fault repeats on return and kills, as it would have). */
static void chain(int sig, siginfo_t *si, void *uctx)
{
	struct sigaction a = app_segv;
	if (a.sa_flags & SA_SIGINFO) {
		if (a.sa_flags & SA_RESETHAND)
			app_segv.sa_handler = SIG_DFL;
		a.sa_sigaction(sig, si, uctx);
		return;
	}
	if (a.sa_handler == SIG_DFL || a.sa_handler == SIG_IGN) {
		segv_default();
		return;
	}
	if (a.sa_flags & SA_RESETHAND)
		app_segv.sa_handler = SIG_DFL;
	a.sa_handler(sig);
}

static void on_segv(int sig, siginfo_t *si, void *uctx)
{
	int saved = errno;
	const void *a = si->si_addr;
	bool handled = false;
	/* si_code <= 0: sent by kill or sigqueue, not a fault. */
	if (si->si_code > 0) {
		if (fence_on && fence_contains(a))
			handled = fence_fault(si, uctx);
		else if (arch_on && arch_contains(a))
			handled = arch_fault(si, uctx);
	}
	if (!handled)
		chain(sig, si, uctx);
	errno = saved;
}

bool segv_install(void)
{
	bool expected = false;
	if (!atomic_compare_exchange_strong(&installed, &expected, true))
		return true;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_segv;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	if (__sigaction(SIGSEGV, &sa, &app_segv) != 0) {
		atomic_store(&installed, false);
		return false;
	}
	return true;
}

void segv_default(void)
{
	struct sigaction dfl;
	memset(&dfl, 0, sizeof dfl);
	dfl.sa_handler = SIG_DFL;
	sigemptyset(&dfl.sa_mask);
	(void)__sigaction(SIGSEGV, &dfl, NULL);
}

/* ---- the program's own handlers ---- */

EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	if (!atomic_load(&installed) || sig != SIGSEGV)
		return __sigaction(sig, act, old);
	struct sigaction prev = app_segv;
	if (act != NULL)
		app_segv = *act;
	if (old != NULL)
		*old = prev;
	return 0;
}

/* signal and its variants, through sigaction above (they are glibc's
 * wrappers of it, reached inside glibc without the PLT, so they are
 * interposed too), with glibc's semantics: BSD (the signal blocked in its
 * handler, SA_RESTART) and System V (reset and not blocked). One difference:
 * glibc leaves SA_RESTART off for a signal siginterrupt(sig, 1) named; that
 * call is not seen here. No dlsym: start-up may not depend on it. */
static sighandler_t set_handler(int sig, sighandler_t h, int flags)
{
	struct sigaction act, old;
	memset(&act, 0, sizeof act);
	act.sa_handler = h;
	act.sa_flags = flags;
	sigemptyset(&act.sa_mask);
	if (!(flags & SA_NODEFER) && sigaddset(&act.sa_mask, sig) != 0)
		return SIG_ERR;
	if (sigaction(sig, &act, &old) != 0)
		return SIG_ERR;
	return old.sa_handler;
}

EXPORT sighandler_t signal(int sig, sighandler_t h)
{
	return set_handler(sig, h, SA_RESTART);
}

EXPORT sighandler_t bsd_signal(int sig, sighandler_t h)
{
	return set_handler(sig, h, SA_RESTART);
}

EXPORT sighandler_t sysv_signal(int sig, sighandler_t h)
{
	return set_handler(sig, h, SA_RESETHAND | SA_NODEFER);
}
