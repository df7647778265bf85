/* clockblob.h — the clock blob's layout, shared by the blob
 * (clockblob.c) and diehard, which places it in static programs
 * (supervisor/virt/graft.c).
 *
 * The blob is position-independent code and data with no relocations
 * and no libc: the fast path's entry points (clockpath.h) over
 * clockpage.c, linked flat (clockblob.ld) from offset 0. Diehard maps it
 * into a new program image that has no libdiehard.so, as code pages
 * (read and execute) then data pages (read and write), writes the
 * process's struct clock_path at the data offset, and points the vDSO's
 * entry points at the table below. A word at each of these offsets: */
#ifndef DIEHARD_CLOCKBLOB_H
#define DIEHARD_CLOCKBLOB_H

#define BLOB_CLOCK_GETTIME 0  /* jmp to the entry point (8 bytes each) */
#define BLOB_GETTIMEOFDAY 8
#define BLOB_TIME 16
#define BLOB_CODE_AT 24       /* uint64: bytes of code (whole pages) = the data's offset */
#define BLOB_SIZE_AT 32       /* uint64: bytes in all (whole pages) */
/* The loader (jmp, 8 bytes), which diehard runs once in the stopped thread
 * with the blob mapped read and execute: blob_load(fd, dir, nslots, slot,
 * keep, mark) maps the data pages read-write over their part, the pages
 * side by side (as clocks.c maps them: the slot's own from fd read-write,
 * the others read-only from their files in dir, opened with the filter's
 * marker), closes fd and dir unless keep, and ends at the trap with rax
 * the region's address or a negative errno, rdx the step that failed (0:
 * none). */
#define BLOB_LOAD 40
#define BLOB_TRAP 48          /* int3, then a jump back to it */
#define BLOB_REAL 64          /* 64 bytes: the vDSO trampoline (vdso.h) */
#define BLOB_REAL_BYTES 64
/* No magic word: diehard embeds the blob built from the same sources
 * (graft.c), so the layouts always agree. */

#endif
