/* segv.h — the allocator's SIGSEGV handler, shared by the modes that
 * protect pages (fence.h, archipelago.h), and the program's own handler
 * kept behind it.
 *
 * Design: one SA_SIGINFO handler, installed once when a mode needs it. A
 * fault inside a mode's region goes to that mode, which handles it (maps
 * a page, reports) or declines; every other fault, and every one declined,
 * goes to the program's disposition: its handler is called as the kernel
 * would have called it, or the default action is restored so that the
 * fault repeats and kills as it would have. sigaction, signal, bsd_signal
 * and sysv_signal are interposed (while the handler is installed, a
 * program setting SIGSEGV sets the disposition kept behind ours and reads
 * it back; otherwise they go straight to glibc's sigaction). */
#ifndef DIEHARD_SEGV_H
#define DIEHARD_SEGV_H

#include <stdbool.h>

/* Installs the handler (once); false if sigaction failed. */
bool segv_install(void);

/* For a mode that decided the process dies of its fault: restores the
 * default action, so that the access faults again on return and kills. */
void segv_default(void);

#endif
