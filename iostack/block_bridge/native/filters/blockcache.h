/*
 * The read caches' shared part (ccache, dcache): an in-memory cache of
 * 4 KiB blocks with a memory cap and LRU eviction, and the filter ABI over
 * it. Aligned reads whose blocks are all cached are answered in pre_read;
 * other reads fill the cache on the way up. Writes replace the blocks they
 * cover fully and drop the ones they touch in part, so the cache never
 * serves stale data.
 *
 * blockcache.c implements write_xform, read_xform, pre_read, pass_args
 * (size=64M, the cap on payloads plus bookkeeping, and the filter's own
 * arguments), get_name, iostack_stats and iostack_release over the one
 * bc_filter table a cache filter defines: what a cached block holds
 * (compressed bytes, a reference to a shared chunk) is up to the filter.
 * One lock guards the index and every callback of the table.
 *
 * Not iostack_thread_safe: a read that reached the device before a
 * concurrent write landed would fill the cache with the old bytes after the
 * write had updated it (a filter cannot see the device write complete), so
 * the stack runs one request at a time when a cache is present.
 */
#ifndef IOSTACK_BLOCKCACHE_H
#define IOSTACK_BLOCKCACHE_H

#include <stdbool.h>
#include <stddef.h>

#include "common.h"

#pragma GCC visibility push(hidden)

#define BC_BLOCK 4096

struct bc_filter {
    const char *name;
    const char *takes; /* its arguments, for the error text: "size, level" */
    /* Builds the payload for one block; sets *cost (bytes charged). NULL: do not cache. */
    void *(*make)(const unsigned char *block, size_t *cost);
    /* Decodes a payload into one block; false if it cannot. */
    bool (*load)(const void *payload, unsigned char *block);
    /* Frees a payload; returns the bytes that freed (its share of the cost). */
    size_t (*release)(void *payload);
    /* An argument other than size=: 1 taken, 0 not one of its own,
     * -1 rejected (reason set). NULL: it has none. */
    int (*arg)(const struct fa_kv *kv);
    /* Its own counters, "k=v k=v", appended to the cache's; snprintf's return. */
    int (*stats)(char *out, size_t outlen);
};

extern const struct bc_filter bc_filter;

#pragma GCC visibility pop

#endif
