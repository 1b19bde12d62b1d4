/*
 * xor: obfuscates every byte with a one-byte key (Konnector's XOR filter).
 * Argument: key=<0..255> (default 0x5a). Its own inverse, so reads undo writes.
 */
#include <stdio.h>
#include <string.h>

#include "bytemap.h"
#include "common.h"
#include "iostack_filter.h"

static unsigned char key = 0x5a;

/* wide: the key in each of the eight bytes. */
static uint64_t xor_word(uint64_t x, uint64_t wide)
{
    return x ^ wide;
}

static void map(unsigned char *p, unsigned long cnt)
{
    bytemap_words(p, cnt, xor_word, 0x0101010101010101ULL * key);
}

const struct bytemap_filter bytemap_filter = {.name = "xor", .map = map};

int pass_args(char *args)
{
    struct fa_kv kv[FA_MAX];
    int n = fa_parse(args, kv, FA_MAX);
    uint64_t v;

    for (int i = 0; i < n; i++) {
        if (strcmp(kv[i].key, "key") != 0)
            return fa_fail("unknown argument '%s' (xor takes: key)", kv[i].key);
        if (fa_number(&kv[i], 0, 255, &v))
            return -1;
        key = (unsigned char)v;
    }
    return n;
}

int iostack_stats(char *out, size_t outlen)
{
    return snprintf(out, outlen, "key=%u", key) < 0 ? -1 : 0;
}
