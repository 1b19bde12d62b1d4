/*
 * nbdkit-iostack-plugin: serves a file through an IOStack filter stack.
 *
 *   nbdkit ./nbdkit-iostack-plugin.so file=VOLUME.img spec='xor(key=0x5a)>bitrev' \
 *          filter-dir=DIR
 *
 * spec= is read like an nbdkit password: spec=+FILE reads it from a file
 * (spec=+/dev/stdin from standard input), so filter arguments such as an
 * aes_xts key stay out of argv (/proc/<pid>/cmdline is world-readable).
 *
 * One stack per nbdkit process, shared by all connections (caches and
 * limits are per volume, not per connection). The export size is the
 * file's size, rounded down to the stack's alignment.
 */
#define NBDKIT_API_VERSION 2
#include <errno.h>
#include <fcntl.h>
#include <nbdkit-plugin.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "iostack_stack.h"

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static char *file;
static char *spec;
static const char *filter_dir;
static int fd = -1;
static iostack_stack *stack;
static int64_t size;

static int iostack_config(const char *key, const char *value)
{
    if (strcmp(key, "file") == 0) {
        free(file);
        file = nbdkit_realpath(value);
        return file ? 0 : -1;
    }
    if (strcmp(key, "spec") == 0) {
        free(spec);
        return nbdkit_read_password(value, &spec);
    }
    if (strcmp(key, "filter-dir") == 0) {
        filter_dir = value;
        return 0;
    }
    nbdkit_error("unknown parameter '%s' (expected file, spec, filter-dir)", key);
    return -1;
}

static int iostack_config_complete(void)
{
    if (!file || !filter_dir) {
        nbdkit_error("file= and filter-dir= are required");
        return -1;
    }
    return 0;
}

/* Opens the volume once all configuration is known, before serving. */
static int iostack_get_ready(void)
{
    char err[IOSTACK_ERRLEN];
    struct stat st;

    fd = open(file, O_RDWR | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) < 0) {
        nbdkit_error("%s: %m", file);
        return -1;
    }
    stack = iostack_open(spec ? spec : "", filter_dir, fd, err, sizeof err);
    if (!stack) {
        nbdkit_error("%s", err);
        return -1;
    }
    size = st.st_size & ~(int64_t)(iostack_stack_alignment(stack) - 1);
    nbdkit_debug("iostack: %s, %d filters, alignment %u", file, iostack_depth(stack),
                 iostack_stack_alignment(stack));
    return 0;
}

static void iostack_unload(void)
{
    iostack_close(stack);
    if (fd >= 0)
        close(fd);
    free(file);
    free(spec);
}

static void *iostack_plugin_open(int readonly)
{
    (void)readonly;
    return stack;
}

static int64_t iostack_get_size(void *handle)
{
    (void)handle;
    return size;
}

static int fail(int rc)
{
    nbdkit_set_error(-rc);
    nbdkit_error("iostack: %s", strerror(-rc));
    return -1;
}

static int iostack_pread(void *handle, void *buf, uint32_t count, uint64_t offset, uint32_t flags)
{
    int rc = iostack_read(handle, buf, count, offset);
    (void)flags;
    return rc ? fail(rc) : 0;
}

static int iostack_pwrite(void *handle, const void *buf, uint32_t count, uint64_t offset,
                          uint32_t flags)
{
    int rc = iostack_write(handle, buf, count, offset);

    if (!rc && (flags & NBDKIT_FLAG_FUA))
        rc = iostack_flush(handle);
    return rc ? fail(rc) : 0;
}

static int iostack_plugin_flush(void *handle, uint32_t flags)
{
    int rc = iostack_flush(handle);
    (void)flags;
    return rc ? fail(rc) : 0;
}

static int iostack_can_fua(void *handle)
{
    (void)handle;
    return NBDKIT_FUA_NATIVE;
}

static int iostack_can_multi_conn(void *handle)
{
    (void)handle;
    return 1; /* one shared stack: a flush on any connection covers all */
}

static struct nbdkit_plugin plugin = {
    .name = "iostack",
    .longname = "IOStack block filter stack",
    .version = "0.1.0",
    .config = iostack_config,
    .config_complete = iostack_config_complete,
    .config_help = "file=<PATH>        (required) backing file\n"
                   "filter-dir=<DIR>   (required) directory of filter .so files\n"
                   "spec=<SPEC>        filter stack, e.g. xor(key=0x5a)>bitrev",
    .get_ready = iostack_get_ready,
    .unload = iostack_unload,
    .open = iostack_plugin_open,
    .get_size = iostack_get_size,
    .pread = iostack_pread,
    .pwrite = iostack_pwrite,
    .flush = iostack_plugin_flush,
    .can_fua = iostack_can_fua,
    .can_multi_conn = iostack_can_multi_conn,
};

NBDKIT_REGISTER_PLUGIN(plugin)
