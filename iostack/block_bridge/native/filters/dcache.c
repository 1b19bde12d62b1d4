/*
 * dcache: a deduplicated in-memory read cache (D3.2, 6.3).
 *
 *   dcache(size=64M)
 *
 * Like ccache, but identical 4 KiB blocks are stored once: each cached
 * block refers, by SHA-256 of its content, to a shared chunk with a
 * reference count. The cap counts each unique chunk once; a chunk is freed
 * when the last block referring to it is evicted or overwritten. The entry
 * points and the cache itself are blockcache.c's (see blockcache.h); this
 * file says what a cached block holds.
 */
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blockcache.h"

#define CHUNK_BUCKETS 4096

struct chunk {
    unsigned char digest[SHA256_DIGEST_LENGTH];
    uint32_t refs;
    struct chunk *next;
    unsigned char data[BC_BLOCK];
};

/* Guarded by the block cache's lock, like every bc_filter callback. */
static struct chunk *chunks[CHUNK_BUCKETS];
static uint64_t unique_chunks, shared_refs;

static struct chunk **find(const unsigned char *digest)
{
    struct chunk **pp = &chunks[(digest[0] | digest[1] << 8) % CHUNK_BUCKETS];

    while (*pp && memcmp((*pp)->digest, digest, sizeof (*pp)->digest) != 0)
        pp = &(*pp)->next;
    return pp;
}

static void *make(const unsigned char *block, size_t *cost)
{
    unsigned char digest[SHA256_DIGEST_LENGTH];
    struct chunk **pp, *c;

    SHA256(block, BC_BLOCK, digest);
    pp = find(digest);
    if (*pp) {
        (*pp)->refs++;
        shared_refs++;
        *cost = 0;
        return *pp;
    }
    c = malloc(sizeof *c);
    if (!c)
        return NULL;
    memcpy(c->digest, digest, sizeof digest);
    memcpy(c->data, block, BC_BLOCK);
    c->refs = 1;
    c->next = NULL;
    *pp = c;
    unique_chunks++;
    *cost = sizeof *c;
    return c;
}

static bool load(const void *payload, unsigned char *block)
{
    memcpy(block, ((const struct chunk *)payload)->data, BC_BLOCK);
    return true;
}

static size_t release(void *payload)
{
    struct chunk *c = payload, **pp;

    if (--c->refs > 0) {
        shared_refs--;
        return 0;
    }
    pp = find(c->digest);
    *pp = c->next;
    free(c);
    unique_chunks--;
    return sizeof *c;
}

static int stats(char *out, size_t outlen)
{
    return snprintf(out, outlen, "unique_chunks=%llu shared_refs=%llu",
                    (unsigned long long)unique_chunks, (unsigned long long)shared_refs);
}

const struct bc_filter bc_filter = {
    .name = "dcache", .takes = "size",
    .make = make, .load = load, .release = release, .stats = stats,
};
