/* fork.c — fork with every signal blocked, as posix_spawn and
 * pthread_create make their clone.
 *
 * Under diehard each new task is a notified call (the supervisor names it
 * by its place in the process tree: docs/NONDETERMINISM.md, "Process
 * numbering"). A signal that comes while a fork waits on that notification
 * would change what the fork does, in two ways the program never sees
 * natively: before diehard has received the notification, a handler
 * without SA_RESTART makes the kernel fail the fork with EINTR (dash then
 * gives up: "Cannot fork"); after, a signal pending when the kernel starts
 * the fork makes it restart the call once the handler ran, and diehard,
 * which has counted the first try, counts the fork twice. Blocked, a signal
 * does neither: it is delivered once the fork returned, in the parent, as
 * if it had come a moment later (POSIX lets fork delay it; the child starts
 * with nothing pending anyway). The mask is restored in both.
 *
 * Only fork called through libc's public entry point (the program's own
 * calls: shells, make, python's os.fork) comes here; libc's internal
 * callers and static programs fork as they are. */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

extern pid_t __fork(void);

EXPORT pid_t fork(void)
{
	sigset_t all, old;
	sigfillset(&all);
	bool blocked = sigprocmask(SIG_SETMASK, &all, &old) == 0;
	pid_t pid = __fork();
	int err = errno;
	if (blocked)
		(void)sigprocmask(SIG_SETMASK, &old, NULL);
	errno = err;
	return pid;
}
