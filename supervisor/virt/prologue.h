/* prologue.h — machine code read from our own process: how many of a
 * function's first bytes may run elsewhere, and where its system calls are.
 *
 * The fast clock path's leaders read the real clock with the vDSO's own
 * clock_gettime (vdso.h), whose entry point diehard has overwritten with a
 * jump into libdiehard.so. The instructions the jump covers are copied into
 * a trampoline in libdiehard, which runs them and jumps back past them into
 * the vDSO. That is sound only for instructions that do the same wherever
 * they run: no operand relative to the instruction pointer, no branch, no
 * memory operand at all here. This decodes the few a compiler's prologue is
 * made of (endbr64, nop, push of a register, register-to-register moves and
 * arithmetic, an immediate to a register) and refuses anything else.
 *
 * Assumed, not checked: no branch elsewhere in the function lands inside
 * the covered bytes (compilers do not jump back into a prologue). */
#ifndef DIEHARD_PROLOGUE_H
#define DIEHARD_PROLOGUE_H

#include <stddef.h>
#include <stdint.h>

/* The smallest n >= need such that code's first n bytes (of avail) are
 * whole instructions of that kind; 0 if there is none. */
size_t prologue_span(const uint8_t *code, size_t avail, size_t need);

/* The offsets just past each system call instruction (the bytes 0f 05,
 * wherever they lie: a pair inside a longer instruction counts too, which
 * callers take as a site too many, never one too few) in code's len
 * bytes, into at: how many, or -1 when there are more than max. */
int prologue_syscalls(const uint8_t *code, size_t len, size_t *at, int max);

#endif
