/* forkmask.c — signals blocked just around the kernel's fork, as
 * posix_spawn and pthread_create block them around their clone.
 *
 * Under diehard each new task is a notified call (the supervisor names it
 * by its place in the process tree: docs/NONDETERMINISM.md, "Process
 * numbering"). A signal that comes while a fork waits on that notification
 * changed what the fork does, in two ways no program sees natively: before
 * diehard has received the notification, a handler without SA_RESTART
 * made the kernel fail the fork with EINTR (dash then gives up: "Cannot
 * fork"); after, a signal pending as the kernel starts the fork made it
 * restart the call once the handler ran, and diehard, which had counted
 * the first try, counted the fork twice. Blocked, a signal does neither:
 * it is delivered once fork returned, in the parent.
 *
 * The window is the kernel's call alone: lifecycle.c's fork handlers,
 * registered when the library starts (before a program registers its
 * own), block last in prepare and restore first in parent and child, so
 * the program's own fork handlers run with its own mask. Left unblocked:
 * the synchronous faults (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP,
 * SIGSYS), which a blocked mask would turn into a kill; and glibc's two
 * internal signals, which sigprocmask never blocks (a setuid in another
 * thread at that moment can still restart the fork). Forks that run no
 * fork handlers (_Fork, vfork, a raw clone, a static program) are as they
 * were. */
#include "forkmask.h"

#include <signal.h>
#include <stdbool.h>

static __thread sigset_t saved __attribute__((tls_model("initial-exec")));
static __thread bool blocked __attribute__((tls_model("initial-exec")));

void forkmask_block(void)
{
	sigset_t all;
	sigfillset(&all);
	static const int faults[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS };
	for (unsigned i = 0; i < sizeof faults / sizeof faults[0]; i++)
		sigdelset(&all, faults[i]);
	blocked = sigprocmask(SIG_BLOCK, &all, &saved) == 0;
}

void forkmask_restore(void)
{
	if (blocked)
		(void)sigprocmask(SIG_SETMASK, &saved, NULL);
	blocked = false;
}
