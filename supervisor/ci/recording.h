/* recording.h — a run recording on disk (proto/recording.proto): the magic,
 * a length, one protobuf message. Writing goes through a temporary file and
 * a rename, so a reader never sees half a recording under the name; reading
 * tells a foreign, truncated, corrupt or too new file apart in one line. */
#ifndef DIEHARD_RECORDING_H
#define DIEHARD_RECORDING_H

#include <stdbool.h>
#include <stddef.h>

#include "recording.pb-c.h"

/* 2: getrandom's and the random devices' keys name a process by its place
 * in the process tree (virt/lineage.h), no longer by its pid: a format 1
 * recording's process keys mean other processes. */
#define RECORDING_FORMAT 2
#define RECORDING_MAX ((size_t)1 << 31) /* a protobuf message's own limit */

/* Writes rec to path; false with why (one line: "cannot write the
 * recording PATH: ERRNO") on failure, when nothing of it, nor an older
 * recording, is left at path. */
bool recording_write(const char *path, const Diehard__Recording *rec, char *why, size_t size);

/* Reads and checks a recording; NULL with why on failure. Free with
 * recording_free. The checks make every field replay uses safe to use:
 * sizes of seeds and keys, at least one argument and one replica. */
Diehard__Recording *recording_read(const char *path, char *why, size_t size);

/* The same checks on bytes in memory (the fuzz test's entry point). */
Diehard__Recording *recording_parse(const unsigned char *p, size_t n, char *why, size_t size);

void recording_free(Diehard__Recording *rec);

#endif
