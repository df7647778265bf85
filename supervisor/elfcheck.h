/* elfcheck.h — is a file the allocator diehard was built to preload (read
 * with elfutils' libelf), and is the command one diehard can run? Both
 * before anything runs. */
#ifndef DIEHARD_ELFCHECK_H
#define DIEHARD_ELFCHECK_H

#include <stdbool.h>
#include <stddef.h>

/* The symbol libdiehard.so exports for this check (allocator/diehard.h). */
#define ELFCHECK_MARK "diehard_abi_2"

/* True when path is a regular file holding a shared library for the
 * machine, word size and byte order diehard was built for whose dynamic
 * symbol table defines ELFCHECK_MARK. Else false, with what is wrong in
 * why (a phrase to follow the path: "is not a regular file (a FIFO)").
 * Never blocks on a FIFO or a device: those are refused before any open. */
bool elfcheck_allocator(const char *path, char *why, size_t size);

/* The values of the defined dynamic symbols names[0..n) in the shared
 * library at path (0 for one it lacks): offsets from its load address.
 * 0, or -1 when the file cannot be read as ELF. */
int elfcheck_symbols(const char *path, const char *const *names, unsigned long *values, size_t n);

/* True when the command at path is a program whose system calls go
 * through another architecture's entry than diehard's own (on x86-64: a
 * 32-bit i386 or an x32 program), which the replicas' seccomp filter kills
 * at its first call (filter.h), or a script whose #! interpreter is one
 * (followed as the kernel does, 4 deep); then what it is in why, a phrase
 * to follow the path ("is a 32-bit i386 program", "runs /bin/x, an x32
 * program"). False for anything else, and for a file that cannot be read
 * (its exec says why). Never blocks: a FIFO is not read. */
bool elfcheck_foreign_entry(const char *path, char *why, size_t size);

#endif
