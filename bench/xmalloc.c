/*
 * xmalloc — many threads passing small objects round a ring, so that every
 * free is of an object another thread allocated.
 *
 * Why: the shape of Lever and Boreham's malloc-test ("malloc() Performance in
 * a Multithreaded Linux Environment", USENIX 2000), mimalloc-bench's
 * xmalloc-testN: more threads than cores, small objects allocated in batches
 * in one thread and freed in another. Memory keeps migrating between threads,
 * which per-thread caches handle badly if they cannot give it back, and with
 * more threads than cores a lock held by a thread that is switched out stalls
 * the rest. Where xmalloc-test splits its threads into allocators and freers
 * (the asymmetric case, which bench/producer_consumer already measures), here
 * every thread does both, in a ring: each allocates for the next thread and
 * frees for the previous one. It also runs a fixed number of objects rather
 * than for a fixed time, so that bench/run can compare its output with
 * glibc's; its time is the inverse of xmalloc-test's throughput.
 *
 * THREADS threads each make BATCHES_PER_THREAD batches of BATCH_SIZE objects.
 * Sizes are drawn from the thread's own fixed-seed PRNG out of SIZES, a spread
 * of small size classes (16-256 bytes, mostly small) like xmalloc-test's. Every
 * object holds its id in its first 8 bytes and a fill byte after that. A batch
 * (malloc'ed too) goes to the next thread's inbox, a list guarded by a mutex
 * and a condition variable; that thread checks the id and the first and last
 * fill bytes of every object and frees the objects and the batch. Each thread
 * keeps at most WINDOW batches of its own in flight: it pushes WINDOW batches,
 * then takes one from its inbox before each further push. So no thread gets
 * more than WINDOW batches ahead of the one before it, an inbox never holds
 * more than THREADS * WINDOW batches, and the ring cannot deadlock: the batch
 * a thread waits for is one its predecessor pushes before waiting for an
 * earlier one. Each thread adds up the hashes of what it frees; addition does
 * not care in which order, so the checksum is the same on every run.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prng.h"

enum {
    THREADS = 8,
    BATCHES_PER_THREAD = 2048,
    BATCH_SIZE = 1024,          /* objects */
    WINDOW = 4,                 /* batches a thread has in flight */
};

static const uint32_t SIZES[] = { 16, 16, 24, 24, 32, 32, 48, 64, 96, 128, 192, 256 };
enum { SIZE_COUNT = sizeof SIZES / sizeof SIZES[0] };

struct object_ref {
    unsigned char *bytes;
    uint32_t size;
    uint32_t fill_byte;
};

struct batch {
    struct batch *next;         /* in an inbox */
    uint64_t first_id;          /* object i has id first_id + i */
    struct object_ref objects[BATCH_SIZE];
};

struct inbox {
    pthread_mutex_t lock;
    pthread_cond_t not_empty;
    struct batch *head, *tail;
};

struct worker {
    unsigned index;
    uint64_t hash_sum;
    uint64_t objects_freed;
};

static struct inbox inboxes[THREADS];

static void checked(int error, const char *what)
{
    if (error != 0) {
        fprintf(stderr, "xmalloc: %s: %s\n", what, strerror(error));
        exit(1);
    }
}

static void *checked_malloc(size_t size)
{
    void *pointer = malloc(size);
    if (pointer == NULL) {
        fputs("xmalloc: out of memory\n", stderr);
        exit(1);
    }
    return pointer;
}

static void inbox_push(struct inbox *inbox, struct batch *batch)
{
    checked(pthread_mutex_lock(&inbox->lock), "mutex lock");
    batch->next = NULL;
    if (inbox->tail != NULL)
        inbox->tail->next = batch;
    else
        inbox->head = batch;
    inbox->tail = batch;
    checked(pthread_cond_signal(&inbox->not_empty), "cond signal");
    checked(pthread_mutex_unlock(&inbox->lock), "mutex unlock");
}

static struct batch *inbox_pop(struct inbox *inbox)
{
    checked(pthread_mutex_lock(&inbox->lock), "mutex lock");
    while (inbox->head == NULL)
        checked(pthread_cond_wait(&inbox->not_empty, &inbox->lock), "cond wait");
    struct batch *batch = inbox->head;
    inbox->head = batch->next;
    if (inbox->head == NULL)
        inbox->tail = NULL;
    checked(pthread_mutex_unlock(&inbox->lock), "mutex unlock");
    return batch;
}

static struct batch *make_batch(unsigned thread, uint64_t sequence, uint64_t *prng_state)
{
    struct batch *batch = checked_malloc(sizeof *batch);
    batch->first_id = (uint64_t)thread << 48 | sequence * BATCH_SIZE;
    for (uint64_t i = 0; i < BATCH_SIZE; i++) {
        struct object_ref *object = &batch->objects[i];
        uint64_t random = prng_step(prng_state);
        uint64_t id = batch->first_id + i;
        object->size = SIZES[(random >> 32) % SIZE_COUNT];
        object->fill_byte = (uint32_t)(random >> 56);
        object->bytes = checked_malloc(object->size);
        memcpy(object->bytes, &id, sizeof id);
        memset(object->bytes + sizeof id, (int)object->fill_byte, object->size - sizeof id);
    }
    return batch;
}

/* Checks every object of the batch, frees them and the batch. */
static void free_batch(struct worker *worker, struct batch *batch)
{
    for (uint64_t i = 0; i < BATCH_SIZE; i++) {
        const struct object_ref *object = &batch->objects[i];
        uint64_t id;
        memcpy(&id, object->bytes, sizeof id);
        if (id != batch->first_id + i || object->bytes[sizeof id] != object->fill_byte ||
            object->bytes[object->size - 1] != object->fill_byte) {
            fprintf(stderr, "xmalloc: object %016" PRIx64 " (%" PRIu32 " bytes) was overwritten\n",
                    batch->first_id + i, object->size);
            exit(1);
        }
        worker->hash_sum += id * 0x9e3779b97f4a7c15u ^ ((uint64_t)object->size << 8 | object->fill_byte);
        free(object->bytes);
    }
    worker->objects_freed += BATCH_SIZE;
    free(batch);
}

static void *work(void *opaque)
{
    struct worker *worker = opaque;
    struct inbox *inbox = &inboxes[worker->index];
    struct inbox *next = &inboxes[(worker->index + 1) % THREADS];
    uint64_t prng_state = 0x13198a2e03707344u + worker->index * 0x9e3779b97f4a7c15u;

    for (uint64_t sequence = 0; sequence < BATCHES_PER_THREAD; sequence++) {
        if (sequence >= WINDOW)
            free_batch(worker, inbox_pop(inbox));
        inbox_push(next, make_batch(worker->index, sequence, &prng_state));
    }
    for (unsigned left = BATCHES_PER_THREAD < WINDOW ? BATCHES_PER_THREAD : WINDOW; left > 0; left--)
        free_batch(worker, inbox_pop(inbox));
    return NULL;
}

int main(void)
{
    pthread_t threads[THREADS];
    struct worker workers[THREADS];

    for (unsigned t = 0; t < THREADS; t++) {
        checked(pthread_mutex_init(&inboxes[t].lock, NULL), "mutex init");
        checked(pthread_cond_init(&inboxes[t].not_empty, NULL), "cond init");
    }
    for (unsigned t = 0; t < THREADS; t++) {
        workers[t] = (struct worker){ .index = t };
        checked(pthread_create(&threads[t], NULL, work, &workers[t]), "pthread_create");
    }
    uint64_t checksum = 0, objects = 0;
    for (unsigned t = 0; t < THREADS; t++) {
        checked(pthread_join(threads[t], NULL), "pthread_join");
        checksum += workers[t].hash_sum;
        objects += workers[t].objects_freed;
    }
    printf("objects %" PRIu64 " checksum %016" PRIx64 "\n", objects, checksum);
    return objects == (uint64_t)THREADS * BATCHES_PER_THREAD * BATCH_SIZE ? 0 : 1;
}
