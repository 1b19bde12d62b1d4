/*
 * ccache: a compressed in-memory read cache (D3.2, 6.2).
 *
 *   ccache(size=64M, level=1)
 *
 * Caches 4 KiB blocks compressed with zlib at `level`, within `size` bytes
 * of memory (payloads plus bookkeeping), evicting the least recently used.
 * Blocks that do not compress are kept as they are. The entry points and
 * the cache itself are blockcache.c's (see blockcache.h); this file says
 * what a cached block holds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "blockcache.h"

struct zblock {
    uint32_t len; /* == BC_BLOCK: stored uncompressed */
    unsigned char data[];
};

static int level = 1;
static uint64_t stored_bytes; /* sum of payload lengths, for the ratio */

static void *make(const unsigned char *block, size_t *cost)
{
    unsigned char tmp[BC_BLOCK + BC_BLOCK / 8 + 64];
    uLongf len = sizeof tmp;
    struct zblock *z;

    if (compress2(tmp, &len, block, BC_BLOCK, level) != Z_OK || len >= BC_BLOCK)
        len = BC_BLOCK;
    z = malloc(sizeof *z + len);
    if (!z)
        return NULL;
    z->len = (uint32_t)len;
    memcpy(z->data, len == BC_BLOCK ? block : tmp, len);
    *cost = sizeof *z + len;
    stored_bytes += len;
    return z;
}

static bool load(const void *payload, unsigned char *block)
{
    const struct zblock *z = payload;
    uLongf len = BC_BLOCK;

    if (z->len == BC_BLOCK) {
        memcpy(block, z->data, BC_BLOCK);
        return true;
    }
    return uncompress(block, &len, z->data, z->len) == Z_OK && len == BC_BLOCK;
}

static size_t release(void *payload)
{
    struct zblock *z = payload;
    size_t freed = sizeof *z + z->len;

    stored_bytes -= z->len;
    free(z);
    return freed;
}

static int arg(const struct fa_kv *kv)
{
    uint64_t v;

    if (strcmp(kv->key, "level") != 0)
        return 0;
    if (fa_number(kv, 1, 9, &v))
        return -1;
    level = (int)v;
    return 1;
}

static int stats(char *out, size_t outlen)
{
    return snprintf(out, outlen, "stored_bytes=%llu", (unsigned long long)stored_bytes);
}

const struct bc_filter bc_filter = {
    .name = "ccache", .takes = "size, level",
    .make = make, .load = load, .release = release, .arg = arg, .stats = stats,
};
