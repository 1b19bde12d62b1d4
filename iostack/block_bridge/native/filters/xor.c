/*
 * xor: obfuscates every byte with a one-byte key (Konnector's XOR filter).
 * Argument: key=<0..255> (default 0x5a). Its own inverse, so reads undo writes.
 */
#include <stdio.h>
#include <string.h>

#include "common.h"
#include "iostack_filter.h"

static unsigned char key = 0x5a;

/* Eight bytes at a time: block I/O is large, and this runs on every byte. */
static void apply(unsigned char *p, unsigned long cnt)
{
    uint64_t wide = 0x0101010101010101ULL * key, word;
    unsigned long i = 0;

    for (; i + 8 <= cnt; i += 8) {
        memcpy(&word, p + i, 8);
        word ^= wide;
        memcpy(p + i, &word, 8);
    }
    for (; i < cnt; i++)
        p[i] ^= key;
}

void write_xform(void *buf, unsigned long cnt, unsigned long offset, bool *doWrite)
{
    (void)offset;
    apply(buf, cnt);
    *doWrite = true;
}

void read_xform(void *buf, unsigned long cnt, unsigned long offset)
{
    (void)offset;
    apply(buf, cnt);
}

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

char *get_name(void)
{
    return "xor";
}

int iostack_thread_safe(void)
{
    return 1;
}

int iostack_stats(char *out, size_t outlen)
{
    return snprintf(out, outlen, "key=%u", key) < 0 ? -1 : 0;
}
