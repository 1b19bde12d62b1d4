/* bitrev: mirrors the bit order of every byte (Konnector's BitReverse filter). */
#include <string.h>

#include "common.h"
#include "iostack_filter.h"

/* Swaps nibbles, then bit pairs, then neighbouring bits within every byte
 * of a 64-bit word: eight bytes per handful of operations. */
static uint64_t mirror8(uint64_t x)
{
    x = (x & 0xF0F0F0F0F0F0F0F0ULL) >> 4 | (x & 0x0F0F0F0F0F0F0F0FULL) << 4;
    x = (x & 0xCCCCCCCCCCCCCCCCULL) >> 2 | (x & 0x3333333333333333ULL) << 2;
    return (x & 0xAAAAAAAAAAAAAAAAULL) >> 1 | (x & 0x5555555555555555ULL) << 1;
}

static void apply(unsigned char *p, unsigned long cnt)
{
    unsigned long i = 0;
    uint64_t word;

    for (; i + 8 <= cnt; i += 8) {
        memcpy(&word, p + i, 8);
        word = mirror8(word);
        memcpy(p + i, &word, 8);
    }
    for (; i < cnt; i++)
        p[i] = (unsigned char)mirror8(p[i]);
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

    if (n > 0)
        return fa_fail("bitrev takes no arguments, got '%s'", kv[0].key);
    return n;
}

char *get_name(void)
{
    return "bitrev";
}

int iostack_thread_safe(void)
{
    return 1;
}
