/*
 * An in-memory cache of fixed-size blocks with a memory cap and LRU
 * eviction, shared by the compressed (ccache) and deduplicated (dcache)
 * read caches. What a cached block holds (compressed bytes, a reference
 * to a shared chunk) is up to the filter, through bc_ops. Its own lock keeps
 * the index consistent whatever the caller does (stacks with a cache also
 * run one request at a time, see ccache.c).
 */
#ifndef IOSTACK_BLOCKCACHE_H
#define IOSTACK_BLOCKCACHE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BC_BLOCK 4096

struct bc_ops {
    /* Builds the payload for one block; sets *cost (bytes charged). NULL: do not cache. */
    void *(*make)(const unsigned char *block, size_t *cost);
    /* Decodes a payload into one block; false if it cannot. */
    bool (*load)(const void *payload, unsigned char *block);
    /* Frees a payload; returns the bytes that freed (its share of the cost). */
    size_t (*release)(void *payload);
};

struct bc_entry;

struct blockcache {
    pthread_mutex_t mu;
    const struct bc_ops *ops;
    size_t capacity, used;
    size_t nbuckets;
    struct bc_entry **buckets;
    struct bc_entry *lru_head, *lru_tail; /* head = most recently used */
    uint64_t hits, misses, inserts, evictions, invalidations;
};

int bc_init(struct blockcache *bc, const struct bc_ops *ops, size_t capacity);
void bc_destroy(struct blockcache *bc);

/* Pre-read: fills buf if every block of the aligned range is cached. */
bool bc_read(struct blockcache *bc, unsigned char *buf, unsigned long cnt, unsigned long offset);
/* Read completed below: caches the blocks the range covers fully. */
void bc_fill(struct blockcache *bc, const unsigned char *buf, unsigned long cnt,
             unsigned long offset);
/* Write passing through: full blocks are replaced, partly written ones dropped. */
void bc_write(struct blockcache *bc, const unsigned char *buf, unsigned long cnt,
              unsigned long offset);
int bc_stats(struct blockcache *bc, char *out, size_t outlen, const char *extra);

#endif
