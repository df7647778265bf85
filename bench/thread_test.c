/*
 * thread_test — every thread in a tight malloc/free loop of small objects,
 * sharing nothing.
 *
 * Why: the shape of glibc's bench-malloc-thread (mimalloc-bench's
 * "glibc-thread"): it measures the fast path an allocator offers each thread
 * on its own (per-thread caches, or a lock that every call takes even when no
 * other thread wants it), with as many threads as can run and more. Nothing
 * is shared, so any slowdown with threads is the allocator's own.
 *
 * THREADS threads each keep WORKING_SET objects. Each of ITERATIONS steps
 * frees a random one and mallocs a replacement of MIN_OBJECT-MAX_OBJECT bytes
 * (random), all from the thread's own fixed-seed PRNG. As in glibc's bench,
 * an object is only touched, not filled: filling would put a memset beside
 * every malloc and measure that instead. Its first and last bytes are written
 * with a mark drawn for it, and both must still be there when it is freed.
 * Each thread hashes what it frees in order; the checksum combines the
 * threads' hashes in thread order, so it does not depend on scheduling.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prng.h"

enum {
    THREADS = 4,
    WORKING_SET = 512,         /* objects per thread */
    ITERATIONS = 20000000,     /* per thread */
    MIN_OBJECT = 16,
    MAX_OBJECT = 512,
};

struct object {
    unsigned char *bytes;
    uint32_t size;
    uint32_t mark;
};

struct worker {
    unsigned index;
    uint64_t hash;
};

static void checked(int error, const char *what)
{
    if (error != 0) {
        fprintf(stderr, "thread_test: %s: %s\n", what, strerror(error));
        exit(1);
    }
}

static void *checked_malloc(size_t size)
{
    void *pointer = malloc(size);
    if (pointer == NULL) {
        fputs("thread_test: out of memory\n", stderr);
        exit(1);
    }
    return pointer;
}

static void make_object(struct object *object, uint64_t random)
{
    object->size = MIN_OBJECT + (uint32_t)((random >> 8) % (MAX_OBJECT - MIN_OBJECT + 1));
    object->mark = (uint32_t)(random >> 56);
    object->bytes = checked_malloc(object->size);
    object->bytes[0] = (unsigned char)object->mark;
    object->bytes[object->size - 1] = (unsigned char)~object->mark;
}

/* Checks the object's marks, frees it, and returns a hash of what it was. */
static uint64_t free_object(const struct object *object)
{
    if (object->bytes[0] != (unsigned char)object->mark ||
        object->bytes[object->size - 1] != (unsigned char)~object->mark) {
        fprintf(stderr, "thread_test: a %" PRIu32 "-byte object was overwritten\n", object->size);
        exit(1);
    }
    free(object->bytes);
    return (uint64_t)object->size << 8 | object->mark;
}

static void *work(void *opaque)
{
    struct worker *worker = opaque;
    uint64_t prng_state = 0x243f6a8885a308d3u + worker->index * 0x9e3779b97f4a7c15u;
    uint64_t hash = 0;
    struct object *objects = checked_malloc(WORKING_SET * sizeof *objects);

    for (unsigned i = 0; i < WORKING_SET; i++)
        make_object(&objects[i], prng_step(&prng_state));
    for (long iteration = 0; iteration < ITERATIONS; iteration++) {
        uint64_t random = prng_step(&prng_state);
        struct object *object = &objects[(random >> 32) % WORKING_SET];
        hash = (hash + free_object(object)) * 0x100000001b3u;
        make_object(object, prng_step(&prng_state));
    }
    for (unsigned i = 0; i < WORKING_SET; i++)
        hash = (hash + free_object(&objects[i])) * 0x100000001b3u;
    free(objects);
    worker->hash = hash;
    return NULL;
}

int main(void)
{
    pthread_t threads[THREADS];
    struct worker workers[THREADS];

    for (unsigned t = 0; t < THREADS; t++) {
        workers[t] = (struct worker){ .index = t };
        checked(pthread_create(&threads[t], NULL, work, &workers[t]), "pthread_create");
    }
    uint64_t checksum = 0;
    for (unsigned t = 0; t < THREADS; t++) {
        checked(pthread_join(threads[t], NULL), "pthread_join");
        checksum = (checksum ^ workers[t].hash) * 0x9e3779b97f4a7c15u;
    }
    printf("iterations %" PRIu64 " checksum %016" PRIx64 "\n",
           (uint64_t)THREADS * ITERATIONS, checksum);
    return 0;
}
