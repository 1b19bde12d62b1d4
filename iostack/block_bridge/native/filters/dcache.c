/*
 * dcache: a deduplicated in-memory read cache (D3.2, 6.3).
 *
 *   dcache(size=64M)
 *
 * Like ccache, but identical 4 KiB blocks are stored once: each cached
 * block refers, by SHA-256 of its content, to a shared chunk with a
 * reference count. The cap counts each unique chunk once; a chunk is freed
 * when the last block referring to it is evicted or overwritten.
 *
 * Not iostack_thread_safe: a read that reached the device before a
 * concurrent write landed would fill the cache with the old bytes after the
 * write had updated it (a filter cannot see the device write complete), so
 * the stack runs one request at a time when a cache is present.
 */
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blockcache.h"
#include "common.h"
#include "iostack_filter.h"

#define CHUNK_BUCKETS 4096

struct chunk {
    unsigned char digest[SHA256_DIGEST_LENGTH];
    uint32_t refs;
    struct chunk *next;
    unsigned char data[BC_BLOCK];
};

static struct blockcache cache;
static struct chunk *chunks[CHUNK_BUCKETS]; /* guarded by cache.mu (ops run under it) */
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

static const struct bc_ops ops = {make, load, release};

void write_xform(void *buf, unsigned long cnt, unsigned long offset, bool *doWrite)
{
    bc_write(&cache, buf, cnt, offset);
    *doWrite = true;
}

void read_xform(void *buf, unsigned long cnt, unsigned long offset)
{
    bc_fill(&cache, buf, cnt, offset);
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
        if (strcmp(kv[i].key, "size") != 0)
            return fa_fail("unknown argument '%s' (dcache takes: size)", kv[i].key);
        if (fa_number(&kv[i], BC_BLOCK, 1ULL << 40, &size))
            return -1;
    }
    if (n >= 0 && bc_init(&cache, &ops, size))
        return fa_fail("out of memory");
    return n;
}

char *get_name(void)
{
    return "dcache";
}

int iostack_stats(char *out, size_t outlen)
{
    char extra[80];

    snprintf(extra, sizeof extra, "unique_chunks=%llu shared_refs=%llu",
             (unsigned long long)unique_chunks, (unsigned long long)shared_refs);
    return bc_stats(&cache, out, outlen, extra);
}

void iostack_release(void)
{
    bc_destroy(&cache);
}
