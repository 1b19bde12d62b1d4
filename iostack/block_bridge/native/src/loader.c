/*
 * Private filter instances.
 *
 * dlopen() of a path that is already loaded returns the same handle, so
 * Konnector's volumes shared a filter's globals (one xor key for everyone).
 * Here each instance is a copy of the .so in its own memfd, opened as
 * /proc/self/fd/N: a distinct file (inode) to the dynamic loader, hence a
 * distinct copy of its data. The memfd stays open while the copy is loaded
 * so that its /proc path cannot be reused and resolve to the old handle.
 */
#define _GNU_SOURCE
#include "loader.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

static int copy_to_memfd(const char *path, const char *name, char *err, size_t errlen)
{
    struct stat st;
    off_t off = 0;
    int src, dst;

    src = open(path, O_RDONLY | O_CLOEXEC);
    if (src < 0) {
        int e = errno;
        if (e == ENOENT)
            snprintf(err, errlen, "unknown filter '%s' (no %s)", name, path);
        else
            snprintf(err, errlen, "filter '%s': cannot open %s: %s", name, path, strerror(e));
        return -e;
    }
    dst = memfd_create(name, MFD_CLOEXEC);
    if (dst < 0 || fstat(src, &st) < 0) {
        int e = errno;
        snprintf(err, errlen, "filter '%s': memfd: %s", name, strerror(e));
        close(src);
        if (dst >= 0)
            close(dst);
        return -e;
    }
    while (off < st.st_size) {
        ssize_t n = sendfile(dst, src, &off, st.st_size - off);
        if (n <= 0) {
            int e = n < 0 ? errno : EIO;
            snprintf(err, errlen, "filter '%s': copying %s: %s", name, path, strerror(e));
            close(src);
            close(dst);
            return -e;
        }
    }
    close(src);
    return dst;
}

/* Resolves the entry points; a write and a read transform are mandatory,
 * the error-returning iostack_* kind preferred over Konnector's void one. */
static int bind_symbols(struct filter_inst *f, char *err, size_t errlen)
{
    f->write_xform_rc = (int (*)(void *, unsigned long, unsigned long, bool *))dlsym(
        f->handle, "iostack_write_xform");
    f->read_xform_rc = (int (*)(void *, unsigned long, unsigned long))dlsym(
        f->handle, "iostack_read_xform");
    f->write_xform = f->write_xform_rc ? NULL
                                       : (void (*)(void *, unsigned long, unsigned long,
                                                   bool *))dlsym(f->handle, "write_xform");
    f->read_xform = f->read_xform_rc ? NULL
                                     : (void (*)(void *, unsigned long, unsigned long))dlsym(
                                           f->handle, "read_xform");
    if ((!f->write_xform && !f->write_xform_rc) || (!f->read_xform && !f->read_xform_rc)) {
        snprintf(err, errlen, "filter '%s' lacks write_xform/read_xform: not a filter", f->name);
        return -EINVAL;
    }
    f->pre_read = (int (*)(void *, unsigned long, unsigned long, unsigned int, bool *))dlsym(
        f->handle, "pre_read");
    f->stats = (int (*)(char *, size_t))dlsym(f->handle, "iostack_stats");
    f->release = (void (*)(void))dlsym(f->handle, "iostack_release");
    return 0;
}

/* Asks the optional properties; after pass_args, since arguments may set
 * them (aes_xts' sector size is its alignment). */
static int query_properties(struct filter_inst *f, char *err, size_t errlen)
{
    unsigned int (*alignment)(void) =
        (unsigned int (*)(void))dlsym(f->handle, "iostack_alignment");
    int (*thread_safe)(void) = (int (*)(void))dlsym(f->handle, "iostack_thread_safe");
    int (*reads_device)(void) = (int (*)(void))dlsym(f->handle, "iostack_reads_device");

    f->alignment = alignment ? alignment() : 1;
    f->thread_safe = thread_safe && thread_safe();
    f->reads_device = reads_device && reads_device();
    if (f->alignment == 0 || (f->alignment & (f->alignment - 1))) {
        snprintf(err, errlen, "filter '%s': alignment %u is not a power of two", f->name,
                 f->alignment);
        return -EINVAL;
    }
    return 0;
}

static int pass_arguments(struct filter_inst *f, const char *args, char *err, size_t errlen)
{
    int (*pass_args)(char *) = (int (*)(char *))dlsym(f->handle, "pass_args");
    const char *(*last_error)(void) =
        (const char *(*)(void))dlsym(f->handle, "iostack_last_error");
    char copy[IOSTACK_ARGS_MAX];

    if (!pass_args) {
        if (args[0] == '\0')
            return 0;
        snprintf(err, errlen, "filter '%s' takes no arguments, got '%s'", f->name, args);
        return -EINVAL;
    }
    /* pass_args takes a char *: give it a copy it may tokenise. */
    snprintf(copy, sizeof copy, "%s", args);
    if (pass_args(copy) >= 0)
        return 0;
    snprintf(err, errlen, "filter '%s' rejected arguments '%s': %s", f->name, args,
             last_error ? last_error() : "invalid arguments");
    return -EINVAL;
}

int filter_load(struct filter_inst *f, const char *dir, const struct spec_item *item, char *err,
                size_t errlen)
{
    char path[4096], proc[64];
    int rc;

    memset(f, 0, sizeof *f);
    f->memfd = -1;
    snprintf(f->name, sizeof f->name, "%s", item->name);
    if (snprintf(path, sizeof path, "%s/%s.so", dir, item->name) >= (int)sizeof path) {
        snprintf(err, errlen, "filter directory path too long");
        return -ENAMETOOLONG;
    }
    f->memfd = copy_to_memfd(path, item->name, err, errlen);
    if (f->memfd < 0)
        return f->memfd;
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", f->memfd);
    f->handle = dlopen(proc, RTLD_NOW | RTLD_LOCAL);
    if (!f->handle) {
        snprintf(err, errlen, "filter '%s': cannot load %s: %s", item->name, path, dlerror());
        close(f->memfd);
        f->memfd = -1;
        return -EINVAL;
    }
    rc = bind_symbols(f, err, errlen);
    if (!rc)
        rc = pass_arguments(f, item->args, err, errlen);
    if (!rc)
        rc = query_properties(f, err, errlen);
    if (rc)
        filter_unload(f);
    return rc;
}

void filter_unload(struct filter_inst *f)
{
    if (f->handle) {
        if (f->release)
            f->release();
        dlclose(f->handle);
        f->handle = NULL;
    }
    if (f->memfd >= 0) {
        close(f->memfd);
        f->memfd = -1;
    }
}
