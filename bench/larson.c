/*
 * larson — a server's heap: objects freed by a thread other than the one that
 * allocated them, while sets of live objects move from thread to thread.
 *
 * Why: this is the shape of Larson and Krishnan's benchmark ("Memory allocation
 * for long-running server applications", ISMM 1998), one of the standard
 * multi-threaded allocator tests (mimalloc-bench's larsonN). A server's worker
 * threads free the objects of requests that other workers began, so an
 * allocator with per-thread caches must hand memory back between threads, and
 * one with a lock must cope with both cores asking at once. Larson runs for a
 * fixed time and reports throughput; this runs a fixed amount of work, so that
 * bench/run can compare its output with glibc's, and its time is the inverse of
 * that throughput.
 *
 * ARRAYS arrays of SLOTS object slots each are filled by the main thread (as in
 * larson's warm-up), then THREADS threads work on them in rounds. A round is
 * STEPS_PER_ROUND steps on one array: each step picks a random slot, checks
 * and frees its object, and mallocs a new one of MIN_OBJECT-MAX_OBJECT bytes
 * (random), filled. After a round the thread passes the array on to the next
 * thread in a ring (thread i + 1's mailbox, a mutex and a condition variable)
 * and takes the next array from its own mailbox, which thread i - 1 filled. A
 * round of SLOTS steps reaches about 63% of the slots, so most of its frees
 * are of objects allocated in an earlier round, almost always by another
 * thread (the same one only for an object that outlived THREADS rounds); the
 * rest are of its own. There are two arrays per thread, handed over through
 * mailboxes rather than at a barrier, so a thread seldom waits for another:
 * with one array each, every hand-over would be a rendezvous of all threads,
 * and on two cores the time would measure the scheduler, not the allocator.
 *
 * The randomness belongs to the array: each has its own fixed-seed PRNG, which
 * travels with it, and the mailbox's lock orders one owner's round before the
 * next's. Each array's steps are therefore the same on every run, whichever
 * thread makes them. Every object holds its id in its first 8 bytes and a fill
 * byte after that; on free the id and the first, middle and last fill bytes
 * must still be there. Each array hashes what it frees in order; the checksum
 * combines the arrays' hashes in array order.
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
    ARRAYS = 2 * THREADS,
    SLOTS = 1000,
    STEPS_PER_ROUND = SLOTS,
    ROUNDS = 3000,         /* per array */
    MIN_OBJECT = 16,
    MAX_OBJECT = 1000,
    ROUNDS_PER_THREAD = ARRAYS * ROUNDS / THREADS,
};

/* Array a starts at thread a % THREADS and moves one thread on per round, so
 * every array visits every thread ROUNDS / THREADS times and each thread
 * works exactly ROUNDS_PER_THREAD rounds. */
_Static_assert(ROUNDS % THREADS == 0, "every array must visit every thread equally often");
_Static_assert(ARRAYS % THREADS == 0, "every thread must start with as many arrays");

struct slot {
    unsigned char *bytes;
    uint64_t id;
    uint32_t size;
    uint32_t fill_byte;
};

struct array {
    struct array *next;   /* in a mailbox */
    uint64_t prng_state;
    uint64_t hash;
    uint64_t objects_made;
    unsigned index;
    unsigned rounds_done;
    struct slot slots[SLOTS];
};

struct mailbox {
    pthread_mutex_t lock;
    pthread_cond_t not_empty;
    struct array *head, *tail;
};

static struct mailbox mailboxes[THREADS];

static void checked(int error, const char *what)
{
    if (error != 0) {
        fprintf(stderr, "larson: %s: %s\n", what, strerror(error));
        exit(1);
    }
}

static void *checked_malloc(size_t size)
{
    void *pointer = malloc(size);
    if (pointer == NULL) {
        fputs("larson: out of memory\n", stderr);
        exit(1);
    }
    return pointer;
}

static void mailbox_put(struct mailbox *mailbox, struct array *array)
{
    checked(pthread_mutex_lock(&mailbox->lock), "mutex lock");
    array->next = NULL;
    if (mailbox->tail != NULL)
        mailbox->tail->next = array;
    else
        mailbox->head = array;
    mailbox->tail = array;
    checked(pthread_cond_signal(&mailbox->not_empty), "cond signal");
    checked(pthread_mutex_unlock(&mailbox->lock), "mutex unlock");
}

static struct array *mailbox_take(struct mailbox *mailbox)
{
    checked(pthread_mutex_lock(&mailbox->lock), "mutex lock");
    while (mailbox->head == NULL)
        checked(pthread_cond_wait(&mailbox->not_empty, &mailbox->lock), "cond wait");
    struct array *array = mailbox->head;
    mailbox->head = array->next;
    if (mailbox->head == NULL)
        mailbox->tail = NULL;
    checked(pthread_mutex_unlock(&mailbox->lock), "mutex unlock");
    return array;
}

static void fill_slot(struct array *array, struct slot *slot)
{
    uint64_t random = prng_step(&array->prng_state);
    slot->size = MIN_OBJECT + (uint32_t)((random >> 8) % (MAX_OBJECT - MIN_OBJECT + 1));
    slot->fill_byte = (uint32_t)(random >> 56);
    slot->id = (uint64_t)array->index << 48 | array->objects_made++;
    slot->bytes = checked_malloc(slot->size);
    memcpy(slot->bytes, &slot->id, sizeof slot->id);
    memset(slot->bytes + sizeof slot->id, (int)slot->fill_byte, slot->size - sizeof slot->id);
}

/* Checks the object is intact, frees it, and adds what it was to the hash. */
static void empty_slot(struct array *array, struct slot *slot)
{
    const unsigned char *bytes = slot->bytes;
    uint64_t id;
    memcpy(&id, bytes, sizeof id);
    if (id != slot->id || bytes[sizeof id] != slot->fill_byte ||
        bytes[slot->size / 2] != slot->fill_byte || bytes[slot->size - 1] != slot->fill_byte) {
        fprintf(stderr, "larson: object %016" PRIx64 " (%" PRIu32 " bytes) was overwritten\n",
                slot->id, slot->size);
        exit(1);
    }
    free(slot->bytes);
    slot->bytes = NULL;
    uint64_t value = slot->id * 0x9e3779b97f4a7c15u ^ ((uint64_t)slot->size << 8 | slot->fill_byte);
    array->hash = (array->hash ^ value) * 0x100000001b3u;
}

static void work_round(struct array *array)
{
    for (unsigned step = 0; step < STEPS_PER_ROUND; step++) {
        struct slot *slot = &array->slots[prng_step(&array->prng_state) % SLOTS];
        empty_slot(array, slot);
        fill_slot(array, slot);
    }
    array->rounds_done++;
}

static void *work(void *opaque)
{
    unsigned thread = *(const unsigned *)opaque;
    struct mailbox *inbox = &mailboxes[thread];
    struct mailbox *outbox = &mailboxes[(thread + 1) % THREADS];

    for (unsigned round = 0; round < ROUNDS_PER_THREAD; round++) {
        struct array *array = mailbox_take(inbox);
        work_round(array);
        if (array->rounds_done < ROUNDS)
            mailbox_put(outbox, array);
    }
    return NULL;
}

int main(void)
{
    static struct array arrays[ARRAYS];
    pthread_t threads[THREADS];
    unsigned thread_index[THREADS];

    for (unsigned t = 0; t < THREADS; t++) {
        checked(pthread_mutex_init(&mailboxes[t].lock, NULL), "mutex init");
        checked(pthread_cond_init(&mailboxes[t].not_empty, NULL), "cond init");
    }
    for (unsigned a = 0; a < ARRAYS; a++) {
        struct array *array = &arrays[a];
        array->index = a;
        array->prng_state = 0xa4093822299f31d0u + a * 0x9e3779b97f4a7c15u;
        for (unsigned s = 0; s < SLOTS; s++)
            fill_slot(array, &array->slots[s]);
        mailbox_put(&mailboxes[a % THREADS], array);
    }

    for (unsigned t = 0; t < THREADS; t++) {
        thread_index[t] = t;
        checked(pthread_create(&threads[t], NULL, work, &thread_index[t]), "pthread_create");
    }
    for (unsigned t = 0; t < THREADS; t++)
        checked(pthread_join(threads[t], NULL), "pthread_join");

    uint64_t checksum = 0, frees = 0;
    for (unsigned a = 0; a < ARRAYS; a++) {
        struct array *array = &arrays[a];
        if (array->rounds_done != ROUNDS) {
            fprintf(stderr, "larson: array %u ran %u rounds, not %d\n", a, array->rounds_done, ROUNDS);
            return 1;
        }
        for (unsigned s = 0; s < SLOTS; s++)
            empty_slot(array, &array->slots[s]);
        frees += array->objects_made;
        checksum = (checksum ^ array->hash) * 0x9e3779b97f4a7c15u;
    }
    printf("frees %" PRIu64 " checksum %016" PRIx64 "\n", frees, checksum);
    return 0;
}
