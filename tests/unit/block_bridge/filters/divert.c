/*
 * Test-only filter: diverts every write into a side file given as
 * path=<file> (at the same offset) and sets doWrite=false, so neither the
 * filters below it nor the device see the write. Written to the bare
 * Konnector ABI.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

static int side = -1;

int pass_args(char *args)
{
    if (strncmp(args, "path=", 5) != 0)
        return -1;
    side = open(args + 5, O_RDWR | O_CREAT, 0600);
    return side < 0 ? -1 : 1;
}

void write_xform(void *buf, unsigned long cnt, unsigned long offset, bool *doWrite)
{
    *doWrite = pwrite(side, buf, cnt, (off_t)offset) != (ssize_t)cnt;
}

void read_xform(void *buf, unsigned long cnt, unsigned long offset)
{
    (void)buf, (void)cnt, (void)offset;
}
