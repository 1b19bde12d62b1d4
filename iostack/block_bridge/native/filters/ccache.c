/*
 * ccache: a compressed in-memory read cache (D3.2, 6.2).
 *
 *   ccache(size=64M, level=1)
 *
 * Caches 4 KiB blocks compressed with zlib at `level`, within `size` bytes
 * of memory (payloads plus bookkeeping), evicting the least recently used.
 * Aligned reads whose blocks are all cached are answered in pre_read; other
 * reads fill the cache on the way up. Writes replace the blocks they cover
 * fully and drop the ones they touch in part, so the cache never serves
 * stale data. Blocks that do not compress are kept as they are.
 *
 * Not iostack_thread_safe: a read that reached the device before a
 * concurrent write landed would fill the cache with the old bytes after the
 * write had updated it (a filter cannot see the device write complete), so
 * the stack runs one request at a time when a cache is present.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "blockcache.h"
#include "common.h"
#include "iostack_filter.h"

struct zblock {
    uint32_t len; /* == BC_BLOCK: stored uncompressed */
    unsigned char data[];
};

static struct blockcache cache;
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
    uint64_t size = 64ULL << 20, v;

    for (int i = 0; i < n; i++) {
        if (strcmp(kv[i].key, "size") == 0) {
            if (fa_number(&kv[i], BC_BLOCK, 1ULL << 40, &size))
                return -1;
        } else if (strcmp(kv[i].key, "level") == 0) {
            if (fa_number(&kv[i], 1, 9, &v))
                return -1;
            level = (int)v;
        } else {
            return fa_fail("unknown argument '%s' (ccache takes: size, level)", kv[i].key);
        }
    }
    if (n >= 0 && bc_init(&cache, &ops, size))
        return fa_fail("out of memory");
    return n;
}

char *get_name(void)
{
    return "ccache";
}

int iostack_stats(char *out, size_t outlen)
{
    char extra[64];

    snprintf(extra, sizeof extra, "stored_bytes=%llu", (unsigned long long)stored_bytes);
    return bc_stats(&cache, out, outlen, extra);
}

void iostack_release(void)
{
    bc_destroy(&cache);
}
