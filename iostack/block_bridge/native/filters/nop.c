/* nop: passes data through untouched; its cost is the framework's own. */
#include "common.h"
#include "iostack_filter.h"

void write_xform(void *buf, unsigned long cnt, unsigned long offset, bool *doWrite)
{
    (void)buf, (void)cnt, (void)offset;
    *doWrite = true;
}

void read_xform(void *buf, unsigned long cnt, unsigned long offset)
{
    (void)buf, (void)cnt, (void)offset;
}

int pass_args(char *args)
{
    return fa_no_args(args, "nop");
}

char *get_name(void)
{
    return "nop";
}

int iostack_thread_safe(void)
{
    return 1;
}
