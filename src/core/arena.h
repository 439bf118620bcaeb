/* arena.h — one 64-byte aligned block sized at init; activations are carved from it once,
   so the per-token path never allocates. */
#ifndef CLB_ARENA_H
#define CLB_ARENA_H

#include <stddef.h>

typedef struct clb_arena {
    unsigned char *base;
    size_t size, used;
} clb_arena;

/* Two-pass use: with base == NULL, clb_arena_take only counts (size it); then
   clb_arena_alloc_block allocates and a second pass hands out real pointers. */
void *clb_arena_take(clb_arena *a, size_t bytes); /* 64-byte aligned; NULL if full or counting */
int clb_arena_alloc_block(clb_arena *a);          /* allocates a->used bytes, resets used */
void clb_arena_release(clb_arena *a);

#endif
