/*
 * producer_consumer — objects malloc'ed in one thread and freed in another.
 *
 * Why: servers and pipelines hand heap objects between threads (a request
 * parsed here, answered there). Every free is then a remote free of memory
 * another thread allocated, which exercises the allocator's locking or its
 * per-thread caches and their hand-back path, with two cores busy at once.
 *
 * PRODUCERS threads each make MESSAGES_PER_PRODUCER messages of 16-1024 bytes
 * (sizes from the producer's own fixed-seed PRNG) and fill them. They pass them
 * on in batches of BATCH_SIZE (the batch itself is malloc'ed too) through one
 * bounded queue, a ring guarded by a pthread mutex and two condition variables.
 * CONSUMERS threads pop the batches, check and hash every message, and free the
 * messages and the batch. Batching keeps the time in the allocator rather than
 * in lock hand-offs between threads, which on two cores vary a lot from run to
 * run. Hashes are added up, and addition does not care which consumer saw which
 * message or in what order, so the checksum is the same on every run.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prng.h"

enum {
    PRODUCERS = 2,
    CONSUMERS = 2,
    MESSAGES_PER_PRODUCER = 1000000,
    BATCH_SIZE = 64,
    QUEUE_CAPACITY = 32,   /* batches */
    MIN_MESSAGE = 16,
    MAX_MESSAGE = 1024,
};

struct message {
    uint64_t producer_and_sequence;
    uint32_t size;        /* whole allocation, header included */
    uint32_t fill_byte;
    unsigned char payload[];
};

struct batch {
    size_t count;
    struct message *messages[BATCH_SIZE];
};

struct queue {
    pthread_mutex_t lock;
    pthread_cond_t not_empty;
    pthread_cond_t not_full;
    struct batch *ring[QUEUE_CAPACITY];
    size_t head;          /* next slot to pop */
    size_t count;
    int producers_left;
};

struct producer_args {
    struct queue *queue;
    unsigned producer;
};

struct consumer_args {
    struct queue *queue;
    uint64_t hash_sum;
    uint64_t messages;
};

static void checked(int error, const char *what)
{
    if (error != 0) {
        fprintf(stderr, "producer_consumer: %s: %s\n", what, strerror(error));
        exit(1);
    }
}

static void *checked_malloc(size_t size)
{
    void *pointer = malloc(size);
    if (pointer == NULL) {
        fputs("producer_consumer: out of memory\n", stderr);
        exit(1);
    }
    return pointer;
}

static void queue_push(struct queue *queue, struct batch *batch)
{
    checked(pthread_mutex_lock(&queue->lock), "mutex lock");
    while (queue->count == QUEUE_CAPACITY)
        checked(pthread_cond_wait(&queue->not_full, &queue->lock), "cond wait");
    queue->ring[(queue->head + queue->count) % QUEUE_CAPACITY] = batch;
    queue->count++;
    checked(pthread_cond_signal(&queue->not_empty), "cond signal");
    checked(pthread_mutex_unlock(&queue->lock), "mutex unlock");
}

/* Returns NULL once the queue is empty and every producer has finished. */
static struct batch *queue_pop(struct queue *queue)
{
    checked(pthread_mutex_lock(&queue->lock), "mutex lock");
    while (queue->count == 0 && queue->producers_left > 0)
        checked(pthread_cond_wait(&queue->not_empty, &queue->lock), "cond wait");
    struct batch *batch = NULL;
    if (queue->count > 0) {
        batch = queue->ring[queue->head];
        queue->head = (queue->head + 1) % QUEUE_CAPACITY;
        queue->count--;
        checked(pthread_cond_signal(&queue->not_full), "cond signal");
    }
    checked(pthread_mutex_unlock(&queue->lock), "mutex unlock");
    return batch;
}

static void producer_finished(struct queue *queue)
{
    checked(pthread_mutex_lock(&queue->lock), "mutex lock");
    queue->producers_left--;
    checked(pthread_cond_broadcast(&queue->not_empty), "cond broadcast");
    checked(pthread_mutex_unlock(&queue->lock), "mutex unlock");
}

static struct message *new_message(unsigned producer, uint64_t sequence, uint64_t *prng_state)
{
    uint64_t random = prng_step(prng_state);
    uint32_t size = MIN_MESSAGE + (uint32_t)(random % (MAX_MESSAGE - MIN_MESSAGE + 1));
    struct message *message = checked_malloc(size);
    message->producer_and_sequence = (uint64_t)producer << 32 | sequence;
    message->size = size;
    message->fill_byte = (uint32_t)(random >> 56);
    memset(message->payload, (int)message->fill_byte, size - sizeof *message);
    return message;
}

static void *produce(void *opaque)
{
    struct producer_args *args = opaque;
    uint64_t prng_state = 0x082efa98ec4e6c89u + args->producer * 0x9e3779b97f4a7c15u;
    struct batch *batch = NULL;

    for (uint64_t sequence = 0; sequence < MESSAGES_PER_PRODUCER; sequence++) {
        if (batch == NULL) {
            batch = checked_malloc(sizeof *batch);
            batch->count = 0;
        }
        batch->messages[batch->count++] = new_message(args->producer, sequence, &prng_state);
        if (batch->count == BATCH_SIZE) {
            queue_push(args->queue, batch);
            batch = NULL;
        }
    }
    if (batch != NULL)
        queue_push(args->queue, batch);
    producer_finished(args->queue);
    return NULL;
}

static uint64_t message_hash(const struct message *message)
{
    size_t payload_size = message->size - sizeof *message;
    /* The first and last payload bytes must still hold the fill byte. */
    if (payload_size > 0 &&
        (message->payload[0] != message->fill_byte ||
         message->payload[payload_size - 1] != message->fill_byte)) {
        fprintf(stderr, "producer_consumer: message %016" PRIx64 " was corrupted\n",
                message->producer_and_sequence);
        exit(1);
    }
    uint64_t hash = message->producer_and_sequence * 0x9e3779b97f4a7c15u;
    return hash ^ ((uint64_t)message->size << 8 | message->fill_byte);
}

static void *consume(void *opaque)
{
    struct consumer_args *args = opaque;
    struct batch *batch;
    while ((batch = queue_pop(args->queue)) != NULL) {
        for (size_t i = 0; i < batch->count; i++) {
            args->hash_sum += message_hash(batch->messages[i]);
            free(batch->messages[i]);
        }
        args->messages += batch->count;
        free(batch);
    }
    return NULL;
}

int main(void)
{
    static struct queue queue = {
        .lock = PTHREAD_MUTEX_INITIALIZER,
        .not_empty = PTHREAD_COND_INITIALIZER,
        .not_full = PTHREAD_COND_INITIALIZER,
        .producers_left = PRODUCERS,
    };
    pthread_t producers[PRODUCERS], consumers[CONSUMERS];
    struct producer_args producer_args[PRODUCERS];
    struct consumer_args consumer_args[CONSUMERS];

    for (unsigned c = 0; c < CONSUMERS; c++) {
        consumer_args[c] = (struct consumer_args){ .queue = &queue };
        checked(pthread_create(&consumers[c], NULL, consume, &consumer_args[c]),
                "pthread_create");
    }
    for (unsigned p = 0; p < PRODUCERS; p++) {
        producer_args[p] = (struct producer_args){ .queue = &queue, .producer = p };
        checked(pthread_create(&producers[p], NULL, produce, &producer_args[p]),
                "pthread_create");
    }
    for (unsigned p = 0; p < PRODUCERS; p++)
        checked(pthread_join(producers[p], NULL), "pthread_join");

    uint64_t checksum = 0, messages = 0;
    for (unsigned c = 0; c < CONSUMERS; c++) {
        checked(pthread_join(consumers[c], NULL), "pthread_join");
        checksum += consumer_args[c].hash_sum;
        messages += consumer_args[c].messages;
    }
    printf("messages %" PRIu64 "\n", messages);
    printf("checksum %016" PRIx64 "\n", checksum);
    return messages == (uint64_t)PRODUCERS * MESSAGES_PER_PRODUCER ? 0 : 1;
}
