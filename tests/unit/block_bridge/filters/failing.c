/*
 * Test-only filter, written to the error-returning transforms
 * (iostack_write_xform / iostack_read_xform): passes data through, and
 * fails every write and read with -EIO while the file given as
 * flag=<path> exists, so a test makes it fail on demand.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

static char flag[4096];

int pass_args(char *args)
{
    if (strncmp(args, "flag=", 5) != 0 || strlen(args + 5) >= sizeof flag)
        return -1;
    strcpy(flag, args + 5);
    return 1;
}

static int failing(void)
{
    return access(flag, F_OK) == 0 ? -EIO : 0;
}

int iostack_write_xform(void *buf, unsigned long cnt, unsigned long offset, bool *doWrite)
{
    (void)buf, (void)cnt, (void)offset;
    *doWrite = true;
    return failing();
}

int iostack_read_xform(void *buf, unsigned long cnt, unsigned long offset)
{
    (void)buf, (void)cnt, (void)offset;
    return failing();
}
