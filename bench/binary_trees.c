/*
 * binary_trees — builds and frees whole binary trees of small objects.
 *
 * Why: the classic allocation stress (after the "binary-trees" benchmark). Almost
 * all of the time goes to malloc and free of one small size (24-byte nodes),
 * allocated in bursts and freed in bursts while one long-lived tree stays live,
 * which is exactly the path a size-class allocator must make fast.
 *
 * For each depth d from MIN_DEPTH to MAX_DEPTH (step 2) it builds and frees
 * 2^(MAX_DEPTH - d + MIN_DEPTH) trees of depth d, walking each before freeing it.
 * Node values come from a fixed-seed PRNG, so the printed checksum depends only
 * on the work done, never on addresses or on the allocator.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "prng.h"

enum { MIN_DEPTH = 4, MAX_DEPTH = 18 };

struct node {
    struct node *left;
    struct node *right;
    uint64_t value;
};

static uint64_t prng_state = 0x243f6a8885a308d3u;

static uint64_t prng_next(void)
{
    return prng_step(&prng_state);
}

static struct node *new_node(struct node *left, struct node *right)
{
    struct node *node = malloc(sizeof *node);
    if (node == NULL) {
        fputs("binary_trees: out of memory\n", stderr);
        exit(1);
    }
    node->left = left;
    node->right = right;
    node->value = prng_next() >> 40;
    return node;
}

static struct node *build_tree(int depth)
{
    if (depth == 0)
        return new_node(NULL, NULL);
    struct node *left = build_tree(depth - 1);
    struct node *right = build_tree(depth - 1);
    return new_node(left, right);
}

/* Sum of values, mixed with the shape, so a corrupted tree changes the result. */
static uint64_t walk_tree(const struct node *node)
{
    if (node->left == NULL)
        return node->value;
    return (walk_tree(node->left) * 3 + walk_tree(node->right)) ^ node->value;
}

static void free_tree(struct node *node)
{
    if (node->left != NULL) {
        free_tree(node->left);
        free_tree(node->right);
    }
    free(node);
}

int main(void)
{
    uint64_t checksum = 0;
    struct node *long_lived = build_tree(MAX_DEPTH);

    for (int depth = MIN_DEPTH; depth <= MAX_DEPTH; depth += 2) {
        long iterations = 1L << (MAX_DEPTH - depth + MIN_DEPTH);
        uint64_t sum = 0;
        for (long i = 0; i < iterations; i++) {
            struct node *tree = build_tree(depth);
            sum += walk_tree(tree);
            free_tree(tree);
        }
        printf("depth %2d: %7ld trees, sum %016" PRIx64 "\n", depth, iterations, sum);
        checksum = checksum * 31 + sum;
    }
    checksum = checksum * 31 + walk_tree(long_lived);
    free_tree(long_lived);
    printf("checksum %016" PRIx64 "\n", checksum);
    return 0;
}
