/*
 * placement — a fixed sequence of allocations whose placements bench/protection
 * compares across allocator seeds.
 *
 * Why: DieHard's protection is the unpredictability of where an object lands.
 * Run under libdiehard with DIEHARD_SEED = 1..N, the spread of one
 * allocation's placement over the N seeds estimates that allocation's
 * placement entropy; run the same sequence under another allocator
 * configuration (a placement window for locality, say) and the two can be
 * compared.
 *
 * What is printed is never an absolute address: libdiehard puts its heap at
 * an address derived from the seed, so every absolute address differs between
 * seeds whatever the placement policy does, and ASLR does the same for glibc.
 * That entropy is worth nothing once one heap pointer leaks, and it is not
 * the placement policy's. Nor is it an offset within the allocator's own
 * regions (the layout is the allocator's business and may change). Each
 * placement is given relative to another object of the same thread and size,
 * in bytes (under libdiehard a whole number of slots; entropy does not depend
 * on the unit):
 *   gap     the address minus that of the previous allocation of the same
 *           size by the same thread: what an overflow of the previous object,
 *           or someone who knows its address, faces; what locality shrinks;
 *   anchor  the address minus that of the thread's anchor of that size (an
 *           object allocated before allocation 1 and live to the end): where
 *           the object is relative to a pointer known from the start.
 * For n = 1 the previous allocation is the anchor, so the two agree.
 * (H(a - b) >= H(a | b), with equality when a and b are independent given
 * the layout, as under uniform placement; a relative measure never counts the
 * base's entropy.)
 *
 * The sequence: sizes 16, 64, 256 and 4096 bytes, round-robin. Each thread
 * allocates an anchor per size, then ROUNDS rounds of one object per size.
 * Objects die young or old, as in real programs: each new object waits in a
 * queue of the YOUNG newest; on leaving it, every other one is freed, the
 * rest join a pool of long-lived objects, and once the pool holds more than
 * LIVE, a member chosen by this program's own generator (fixed seed: every
 * run makes the same calls) is freed. So the heap first grows (to about
 * LIVE objects per size: 16384 slots and more, several times a placement
 * window of 4096 slots) with young objects freed all along, then stays in a
 * steady state. Objects are not written to (no memory is touched for them
 * under libdiehard). The main thread does MAIN_ROUNDS rounds; after half of
 * them a second thread does THREAD_ROUNDS rounds of its own (main waits for
 * it, so the order of calls is the same in every run) and frees its objects.
 *
 * Output, one line per tracked allocation (n = 1, 10, 100, ... of each size
 * and thread):
 *   place THREAD SIZE N GAP ANCHOR
 * then per thread and size, over allocations made after its first free:
 *   reuse THREAD SIZE HITS ALLOCATIONS
 * (HITS: allocations given an address this thread freed among its last
 * RECENT frees of that size: what a recently dangling pointer points to),
 * then
 *   recent RECENT
 *   digest HEX      a hash of every allocation's anchor-relative placement
 *   base HEX        the absolute address of main's first anchor
 *   allocator NAME  diehard when libdiehard.so is loaded, else other
 * bench/protection runs it; it takes no arguments.
 */
#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prng.h"

enum { NSIZES = 4, YOUNG = 8, LIVE = 16384, RECENT = 256, MAIN_ROUNDS = 50000, THREAD_ROUNDS = 20000 };
static const size_t sizes[NSIZES] = { 16, 64, 256, 4096 };

/* The tracked allocation numbers. */
static const unsigned tracked[] = { 1, 10, 100, 1000, 10000, 50000 };
enum { NTRACKED = sizeof tracked / sizeof tracked[0] };

struct size_state {
    char *anchor;
    char *prev;
    char *young[YOUNG]; /* a ring: the YOUNG newest objects */
    unsigned nyoung;
    char *pool[LIVE + 1];
    unsigned npool;
    uintptr_t recent[RECENT]; /* a ring: the last RECENT addresses freed */
    unsigned nrecent;
    uint64_t hits, counted;
    long long gap[NTRACKED], off[NTRACKED];
};

struct thread_state {
    const char *name;
    unsigned rounds;
    uint64_t prng;
    uint64_t digest;
    struct size_state s[NSIZES];
};

static struct thread_state main_state = { .name = "main", .rounds = MAIN_ROUNDS, .prng = 0x9e3779b97f4a7c15u };
static struct thread_state second_state = { .name = "thread2", .rounds = THREAD_ROUNDS, .prng = 0x452821e638d01377u };

static uint64_t prng_next(struct thread_state *t)
{
    return prng_step(&t->prng);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (p == NULL) {
        perror("placement: malloc");
        exit(1);
    }
    return p;
}

/* FNV-1a over the bytes of v. */
static void digest_add(uint64_t *h, long long v)
{
    unsigned char b[sizeof v];
    memcpy(b, &v, sizeof v);
    for (size_t i = 0; i < sizeof v; i++)
        *h = (*h ^ b[i]) * 0x100000001b3u;
}

static void release(struct size_state *s, char *p)
{
    s->recent[s->nrecent++ % RECENT] = (uintptr_t)p;
    free(p);
}

static void one_allocation(struct thread_state *t, unsigned ci, unsigned n)
{
    struct size_state *s = &t->s[ci];
    char *p = xmalloc(sizes[ci]);
    long long gap = (long long)((intptr_t)p - (intptr_t)s->prev);
    long long off = (long long)((intptr_t)p - (intptr_t)s->anchor);

    digest_add(&t->digest, off);
    for (unsigned k = 0; k < NTRACKED; k++)
        if (tracked[k] == n) {
            s->gap[k] = gap;
            s->off[k] = off;
        }
    if (s->nrecent > 0) {
        unsigned m = s->nrecent < RECENT ? s->nrecent : RECENT;
        for (unsigned j = 0; j < m; j++)
            if (s->recent[j] == (uintptr_t)p) {
                s->hits++;
                break;
            }
        s->counted++;
    }
    s->prev = p;
    /* p joins the young; the oldest of them dies, or lives on in the pool. */
    char *old = s->young[s->nyoung % YOUNG];
    s->young[s->nyoung++ % YOUNG] = p;
    if (s->nyoung <= YOUNG)
        return;
    if (s->nyoung % 2 == 0) {
        release(s, old);
        return;
    }
    s->pool[s->npool++] = old;
    if (s->npool > LIVE) {
        unsigned j = (unsigned)(prng_next(t) % s->npool);
        char *victim = s->pool[j];
        s->pool[j] = s->pool[--s->npool];
        release(s, victim);
    }
}

static void *second_thread(void *arg);

static void run(struct thread_state *t, int spawn_halfway)
{
    t->digest = 0xcbf29ce484222325u;
    for (unsigned ci = 0; ci < NSIZES; ci++)
        t->s[ci].anchor = t->s[ci].prev = xmalloc(sizes[ci]);
    for (unsigned n = 1; n <= t->rounds; n++) {
        for (unsigned ci = 0; ci < NSIZES; ci++)
            one_allocation(t, ci, n);
        if (spawn_halfway && n == t->rounds / 2) {
            pthread_t th;
            int err = pthread_create(&th, NULL, second_thread, &second_state);
            if (err == 0)
                err = pthread_join(th, NULL);
            if (err != 0) {
                fprintf(stderr, "placement: pthread: %s\n", strerror(err));
                exit(1);
            }
        }
    }
}

static void *second_thread(void *arg)
{
    struct thread_state *t = arg;
    run(t, 0);
    for (unsigned ci = 0; ci < NSIZES; ci++) {
        struct size_state *s = &t->s[ci];
        while (s->npool > 0)
            free(s->pool[--s->npool]);
        for (unsigned j = 0; j < YOUNG && j < s->nyoung; j++)
            free(s->young[j]);
        free(s->anchor);
    }
    return NULL;
}

static void print(const struct thread_state *t)
{
    for (unsigned ci = 0; ci < NSIZES; ci++)
        for (unsigned k = 0; k < NTRACKED && tracked[k] <= t->rounds; k++)
            printf("place %s %zu %u %lld %lld\n", t->name, sizes[ci], tracked[k], t->s[ci].gap[k], t->s[ci].off[k]);
    for (unsigned ci = 0; ci < NSIZES; ci++)
        printf("reuse %s %zu %" PRIu64 " %" PRIu64 "\n", t->name, sizes[ci], t->s[ci].hits, t->s[ci].counted);
}

int main(int argc, char **argv)
{
    (void)argv;
    if (argc != 1) {
        fprintf(stderr, "usage: placement (no arguments; see bench/protection)\n");
        return 2;
    }
    run(&main_state, 1);
    /* Output only after the last tracked allocation: stdio's own buffer is
     * allocated by the first printf. */
    uint64_t digest = main_state.digest ^ (second_state.digest * 31);
    uintptr_t base = (uintptr_t)main_state.s[0].anchor;
    const char *allocator = dlsym(RTLD_DEFAULT, "diehard_abi_2") != NULL ? "diehard" : "other";
    print(&main_state);
    print(&second_state);
    printf("recent %d\n", RECENT);
    printf("digest %016" PRIx64 "\nbase %" PRIxPTR "\nallocator %s\n", digest, base, allocator);
    return 0;
}
