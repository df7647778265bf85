/* inject.h — fault injection for the tolerance benchmark (DIEHARD_INJECT).
 *
 * The DieHard paper's experiment (section 7.3.1): a tracing run logs, for
 * each freed object, when it was allocated and when it was freed, counted in
 * allocations; an injecting run then, with a given probability, frees an
 * object DIST allocations before the program does and ignores the program's
 * own free (a dangling pointer), or under-allocates a request of 32 bytes or
 * more by a few bytes (a buffer overflow). Which objects are hit depends only
 * on the injection seed and the allocation's number, so every replica of a
 * run under diehard gets the same bugs on its own heap, and a run reproduces.
 *
 *   DIEHARD_INJECT=trace=FILE
 *   DIEHARD_INJECT=dangling=RATE:DIST,trace=FILE,seed=N
 *   DIEHARD_INJECT=overflow=RATE:BYTES,seed=N
 *
 * RATE is a probability (0 to 1), DIST an allocation count, BYTES how much
 * less to allocate, N an unsigned integer (default 0). A bad value prints one
 * line and exits with 125: an injector that silently injected nothing would
 * make a benchmark lie.
 *
 * Built twice from inject.c: into libdiehard.so (entry.c calls it when
 * DIEHARD_INJECT is set) and into bench/libinject.so over glibc's
 * __libc_malloc family, the baseline. One preload for both is not possible:
 * under diehard a replica's LD_PRELOAD is libdiehard.so first, so a wrapper
 * after it would never see malloc.
 *
 * Counted as allocations: malloc, calloc and realloc of NULL, in call order
 * (one lock; only when injecting). memalign and friends are neither counted
 * nor injected. */
#ifndef DIEHARD_INJECT_H
#define DIEHARD_INJECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Set once by inject_start; read on every entry point. */
extern bool inject_on;

/* Parses spec and loads the trace it names; free_fn frees an object without
 * going through inject_free (the early frees). Exits 125 on a bad spec. */
void inject_start(const char *spec, void (*free_fn)(void *));

/* An allocation of size bytes begins: returns the size to really allocate
 * and its number in *idx. */
size_t inject_request(size_t size, uint64_t *idx);
/* ...and ended with p (NULL: failed). */
void inject_allocated(void *p, size_t size, uint64_t idx);
/* The program frees p: true when the free must be ignored (it was freed
 * early already). */
bool inject_free(void *p);
/* realloc moved p to q (q != p, both non-NULL). */
void inject_moved(void *p, void *q);
/* Writes what the trace still buffers (at exit). */
void inject_flush(void);

#endif
