/* elfcheck.h — is a file the allocator diehard was built to preload?
 * Read with elfutils' libelf, before anything runs. */
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

#endif
