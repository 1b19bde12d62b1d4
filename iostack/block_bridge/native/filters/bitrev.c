/* bitrev: mirrors the bit order of every byte (Konnector's BitReverse filter). */
#include "common.h"
#include "iostack_filter.h"

static unsigned char table[256];

/* Built once per private instance, when the copy is loaded. */
__attribute__((constructor)) static void build_table(void)
{
    for (int v = 0; v < 256; v++) {
        unsigned char r = 0;
        for (int bit = 0; bit < 8; bit++)
            if (v & (1 << bit))
                r |= (unsigned char)(0x80 >> bit);
        table[v] = r;
    }
}

static void apply(unsigned char *p, unsigned long cnt)
{
    for (unsigned long i = 0; i < cnt; i++)
        p[i] = table[p[i]];
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
