/* bitrev: mirrors the bit order of every byte (Konnector's BitReverse filter). */
#include "bytemap.h"
#include "common.h"
#include "iostack_filter.h"

/* Swaps nibbles, then bit pairs, then neighbouring bits within every byte
 * of a 64-bit word: eight bytes per handful of operations. */
static uint64_t mirror8(uint64_t x, uint64_t unused)
{
    (void)unused;
    x = (x & 0xF0F0F0F0F0F0F0F0ULL) >> 4 | (x & 0x0F0F0F0F0F0F0F0FULL) << 4;
    x = (x & 0xCCCCCCCCCCCCCCCCULL) >> 2 | (x & 0x3333333333333333ULL) << 2;
    return (x & 0xAAAAAAAAAAAAAAAAULL) >> 1 | (x & 0x5555555555555555ULL) << 1;
}

static void map(unsigned char *p, unsigned long cnt)
{
    bytemap_words(p, cnt, mirror8, 0);
}

const struct bytemap_filter bytemap_filter = {.name = "bitrev", .map = map};

int pass_args(char *args)
{
    return fa_no_args(args, bytemap_filter.name);
}
