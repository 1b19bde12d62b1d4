/* The filter ABI of a byte-map filter; see bytemap.h. */
#include "bytemap.h"

#include "iostack_filter.h"

void write_xform(void *buf, unsigned long cnt, unsigned long offset, bool *doWrite)
{
    (void)offset;
    bytemap_filter.map(buf, cnt);
    *doWrite = true;
}

void read_xform(void *buf, unsigned long cnt, unsigned long offset)
{
    (void)offset;
    bytemap_filter.map(buf, cnt);
}

char *get_name(void)
{
    return (char *)bytemap_filter.name;
}

int iostack_thread_safe(void)
{
    return 1;
}
