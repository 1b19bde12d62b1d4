/*
 * A filter written to the bare Konnector ABI (IOStack D3.2, 5.3 and 10.4),
 * with nothing from IOStack: no extensions, the original build commands.
 * It mirrors each byte's bits, keeps a global call counter and ignores its
 * arguments, like the deliverable's BitRev sample. The test suite loads it
 * unmodified to show such filters still work.
 */
#include <stdio.h>
#include "mirror_filter.h"

int g_calls = 0;
char *filter_name = "MIRROR";

static unsigned char mirror(unsigned char b)
{
    b = (unsigned char)((b & 0xF0) >> 4 | (b & 0x0F) << 4);
    b = (unsigned char)((b & 0xCC) >> 2 | (b & 0x33) << 2);
    return (unsigned char)((b & 0xAA) >> 1 | (b & 0x55) << 1);
}

int pass_args(char *my_arg_list)
{
    (void)my_arg_list;
    return 0;
}

char *get_name()
{
    return filter_name;
}

void write_xform(void *buf, unsigned long cnt, unsigned long offset, bool *doWrite)
{
    unsigned char *p = (unsigned char *)buf;
    (void)offset;
    for (unsigned long i = 0; i < cnt; i++)
        p[i] = mirror(p[i]);
    g_calls++;
    *doWrite = true;
}

void read_xform(void *buf, unsigned long cnt, unsigned long offset)
{
    unsigned char *p = (unsigned char *)buf;
    (void)offset;
    for (unsigned long i = 0; i < cnt; i++)
        p[i] = mirror(p[i]);
    g_calls++;
}

int pre_read(void *buf, unsigned long cnt, unsigned long int offset, unsigned int fdesc,
             bool *doRead)
{
    (void)buf, (void)cnt, (void)offset, (void)fdesc;
    *doRead = true;
    return 0;
}
