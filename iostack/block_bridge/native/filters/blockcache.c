/* Block cache index (hash table + LRU list under one mutex) and the cache
 * filters' ABI over it; see blockcache.h. */
#include "blockcache.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iostack_filter.h"

struct bc_entry;

struct blockcache {
    pthread_mutex_t mu;
    size_t capacity, used;
    size_t nbuckets;
    struct bc_entry **buckets;
    struct bc_entry *lru_head, *lru_tail; /* head = most recently used */
    uint64_t hits, misses, inserts, evictions, invalidations;
};

struct bc_entry {
    uint64_t block;
    void *payload;
    size_t cost;
    struct bc_entry *hnext;
    struct bc_entry *prev, *next;
};

/* Fixed per-entry bookkeeping, charged against the cap with the payload. */
#define ENTRY_COST sizeof(struct bc_entry)

/* The filter's one cache (each volume loads its own copy of the filter). */
static struct blockcache cache;

static int bc_init(struct blockcache *bc, size_t capacity)
{
    size_t expected = capacity / 1024 + 1;

    bc->nbuckets = 1024;
    while (bc->nbuckets < expected)
        bc->nbuckets <<= 1;
    bc->buckets = calloc(bc->nbuckets, sizeof *bc->buckets);
    if (!bc->buckets)
        return -ENOMEM;
    pthread_mutex_init(&bc->mu, NULL);
    bc->capacity = capacity;
    return 0;
}

static struct bc_entry **slot(struct blockcache *bc, uint64_t block)
{
    struct bc_entry **pp = &bc->buckets[(block * 0x9E3779B97F4A7C15ULL) >> 40 & (bc->nbuckets - 1)];

    while (*pp && (*pp)->block != block)
        pp = &(*pp)->hnext;
    return pp;
}

static void lru_unlink(struct blockcache *bc, struct bc_entry *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        bc->lru_head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        bc->lru_tail = e->prev;
}

static void lru_push(struct blockcache *bc, struct bc_entry *e)
{
    e->prev = NULL;
    e->next = bc->lru_head;
    if (bc->lru_head)
        bc->lru_head->prev = e;
    bc->lru_head = e;
    if (!bc->lru_tail)
        bc->lru_tail = e;
}

static void drop(struct blockcache *bc, struct bc_entry **pp)
{
    struct bc_entry *e = *pp;

    *pp = e->hnext;
    lru_unlink(bc, e);
    bc->used -= bc_filter.release(e->payload) + ENTRY_COST;
    free(e);
}

static void evict_to_fit(struct blockcache *bc)
{
    while (bc->used > bc->capacity && bc->lru_tail) {
        drop(bc, slot(bc, bc->lru_tail->block));
        bc->evictions++;
    }
}

static void put(struct blockcache *bc, uint64_t block, const unsigned char *data)
{
    struct bc_entry **pp = slot(bc, block), *e;
    size_t cost;
    void *payload;

    if (*pp)
        drop(bc, pp);
    payload = bc_filter.make(data, &cost);
    if (!payload)
        return;
    e = malloc(sizeof *e);
    if (!e) {
        bc_filter.release(payload);
        return;
    }
    e->block = block;
    e->payload = payload;
    e->cost = cost;
    pp = slot(bc, block);
    e->hnext = *pp;
    *pp = e;
    lru_push(bc, e);
    bc->used += cost + ENTRY_COST;
    bc->inserts++;
    evict_to_fit(bc);
}

/* Pre-read: fills buf if every block of the aligned range is cached. */
static bool bc_read(struct blockcache *bc, unsigned char *buf, unsigned long cnt,
                    unsigned long offset)
{
    bool hit = (offset % BC_BLOCK) == 0 && (cnt % BC_BLOCK) == 0 && cnt > 0;

    pthread_mutex_lock(&bc->mu);
    for (unsigned long done = 0; hit && done < cnt; done += BC_BLOCK) {
        struct bc_entry *e = *slot(bc, (offset + done) / BC_BLOCK);
        hit = e && bc_filter.load(e->payload, buf + done);
        if (hit) {
            lru_unlink(bc, e);
            lru_push(bc, e);
        }
    }
    if (hit)
        bc->hits++;
    else
        bc->misses++;
    pthread_mutex_unlock(&bc->mu);
    return hit;
}

/* Caches every block that [offset, offset+cnt) covers fully; with
 * replace_partial (a write), drops the blocks it covers only in part. */
static void for_blocks(struct blockcache *bc, const unsigned char *buf, unsigned long cnt,
                       unsigned long offset, bool replace_partial)
{
    uint64_t first = offset / BC_BLOCK, last = (offset + cnt + BC_BLOCK - 1) / BC_BLOCK;

    pthread_mutex_lock(&bc->mu);
    for (uint64_t b = first; b < last; b++) {
        uint64_t start = b * BC_BLOCK;
        if (start >= offset && start + BC_BLOCK <= offset + cnt) {
            put(bc, b, buf + (start - offset));
        } else if (replace_partial) {
            struct bc_entry **pp = slot(bc, b);
            if (*pp) {
                drop(bc, pp);
                bc->invalidations++;
            }
        }
    }
    pthread_mutex_unlock(&bc->mu);
}

static void bc_destroy(struct blockcache *bc)
{
    if (!bc->buckets)
        return;
    while (bc->lru_tail)
        drop(bc, slot(bc, bc->lru_tail->block));
    free(bc->buckets);
    bc->buckets = NULL;
    pthread_mutex_destroy(&bc->mu);
}

/* --- the filter ABI ---------------------------------------------------- */

void write_xform(void *buf, unsigned long cnt, unsigned long offset, bool *doWrite)
{
    for_blocks(&cache, buf, cnt, offset, true);
    *doWrite = true;
}

void read_xform(void *buf, unsigned long cnt, unsigned long offset)
{
    for_blocks(&cache, buf, cnt, offset, false);
}

int pre_read(void *buf, unsigned long cnt, unsigned long int offset, unsigned int fdesc,
             bool *doRead)
{
    (void)fdesc;
    *doRead = !bc_read(&cache, buf, cnt, offset);
    return 0;
}

int pass_args(char *args)
{
    struct fa_kv kv[FA_MAX];
    int n = fa_parse(args, kv, FA_MAX);
    uint64_t size = 64ULL << 20;

    for (int i = 0; i < n; i++) {
        int taken = 0;

        if (strcmp(kv[i].key, "size") == 0)
            taken = fa_number(&kv[i], BC_BLOCK, 1ULL << 40, &size) ? -1 : 1;
        else if (bc_filter.arg)
            taken = bc_filter.arg(&kv[i]);
        if (taken < 0)
            return -1;
        if (taken == 0)
            return fa_fail("unknown argument '%s' (%s takes: %s)", kv[i].key, bc_filter.name,
                           bc_filter.takes);
    }
    if (n >= 0 && bc_init(&cache, size))
        return fa_fail("out of memory");
    return n;
}

char *get_name(void)
{
    return (char *)bc_filter.name;
}

int iostack_stats(char *out, size_t outlen)
{
    int n;

    pthread_mutex_lock(&cache.mu);
    n = snprintf(out, outlen,
                 "hits=%llu misses=%llu inserts=%llu evictions=%llu invalidations=%llu "
                 "used=%zu capacity=%zu ",
                 (unsigned long long)cache.hits, (unsigned long long)cache.misses,
                 (unsigned long long)cache.inserts, (unsigned long long)cache.evictions,
                 (unsigned long long)cache.invalidations, cache.used, cache.capacity);
    if (n >= 0 && (size_t)n < outlen)
        n = bc_filter.stats(out + n, outlen - (size_t)n);
    pthread_mutex_unlock(&cache.mu);
    return n < 0 ? -1 : 0;
}

void iostack_release(void)
{
    bc_destroy(&cache);
}
