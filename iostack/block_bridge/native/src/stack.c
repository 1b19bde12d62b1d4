/*
 * The filter stack: ordering, device I/O, alignment and locking.
 *
 * Order: filters[0] is the top. Writes copy the caller's buffer (filters
 * transform in place; the caller's data must stay intact), run write_xform
 * from the top down and stop early if a filter owns the write (doWrite =
 * false). Reads ask pre_read from the top down; the first filter that
 * answers replaces the device read and everything below it, then read_xform
 * runs from just above the device (or the answering filter) up to the top.
 *
 * Failures: a filter's error-returning transform (iostack_write_xform,
 * iostack_read_xform) that fails fails the request with -EIO; the buffer
 * is zeroed, so neither the device nor the caller gets half-transformed
 * bytes.
 *
 * Alignment: the stack's alignment is the largest any filter asks for.
 * Unaligned reads are widened; unaligned writes become read-modify-write
 * of the covering aligned range, under the exclusive lock so that two
 * partial writes to one block cannot lose each other's bytes.
 *
 * Locking: if every filter says it is thread safe, aligned requests run in
 * parallel (shared lock); otherwise the stack runs one request at a time.
 */
#define _GNU_SOURCE
#include "iostack_stack.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loader.h"
#include "spec.h"

struct iostack_stack {
    int fd;
    int depth;
    unsigned int alignment;
    bool exclusive;
    pthread_rwlock_t lock;
    struct filter_inst filters[IOSTACK_MAX_FILTERS];
};

/* Per-thread bounce buffer for writes and unaligned I/O. */
static __thread void *tls_buf;
static __thread size_t tls_len;

static void *scratch(size_t len)
{
    if (len > tls_len) {
        void *p = NULL;
        if (posix_memalign(&p, 4096, len))
            return NULL;
        free(tls_buf);
        tls_buf = p;
        tls_len = len;
    }
    return tls_buf;
}

static int load_all(struct filter_inst *filters, const char *spec, const char *dir, char *err,
                    size_t errlen)
{
    struct spec_item items[IOSTACK_MAX_FILTERS];
    int n = spec_parse(spec, items, IOSTACK_MAX_FILTERS, err, errlen);

    for (int i = 0; i < n; i++) {
        int rc = filter_load(&filters[i], dir, &items[i], err, errlen);
        if (!rc && filters[i].reads_device && i != n - 1) {
            snprintf(err, errlen, "filter '%s' reads the device itself: it must be last (bottom)",
                     items[i].name);
            filter_unload(&filters[i]);
            rc = -EINVAL;
        }
        if (rc) {
            while (i--)
                filter_unload(&filters[i]);
            return rc;
        }
    }
    return n;
}

iostack_stack *iostack_open(const char *spec, const char *filter_dir, int backing_fd, char *err,
                            size_t errlen)
{
    iostack_stack *s = calloc(1, sizeof *s);
    int n;

    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    n = load_all(s->filters, spec, filter_dir, err, errlen);
    if (n < 0) {
        free(s);
        return NULL;
    }
    s->fd = backing_fd;
    s->depth = n;
    s->alignment = 1;
    for (int i = 0; i < n; i++) {
        if (s->filters[i].alignment > s->alignment)
            s->alignment = s->filters[i].alignment;
        if (!s->filters[i].thread_safe)
            s->exclusive = true;
    }
    pthread_rwlock_init(&s->lock, NULL);
    return s;
}

int iostack_validate(const char *spec, const char *filter_dir, char *err, size_t errlen)
{
    struct filter_inst filters[IOSTACK_MAX_FILTERS];
    int n = load_all(filters, spec, filter_dir, err, errlen);

    for (int i = 0; i < n; i++)
        filter_unload(&filters[i]);
    return n < 0 ? n : 0;
}

void iostack_close(iostack_stack *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->depth; i++)
        filter_unload(&s->filters[i]);
    pthread_rwlock_destroy(&s->lock);
    free(s);
}

/* Reads the device; bytes past its end read as zeros. */
static int device_read(int fd, char *buf, size_t cnt, uint64_t off)
{
    while (cnt) {
        ssize_t n = pread(fd, buf, cnt, (off_t)off);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n == 0) {
            memset(buf, 0, cnt);
            return 0;
        }
        buf += n;
        cnt -= (size_t)n;
        off += (uint64_t)n;
    }
    return 0;
}

static int device_write(int fd, const char *buf, size_t cnt, uint64_t off)
{
    while (cnt) {
        ssize_t n = pwrite(fd, buf, cnt, (off_t)off);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        buf += n;
        cnt -= (size_t)n;
        off += (uint64_t)n;
    }
    return 0;
}

/* A transform failed: nothing half-transformed goes anywhere. */
static int xform_failed(void *buf, size_t cnt)
{
    memset(buf, 0, cnt);
    return -EIO;
}

static int read_aligned(iostack_stack *s, void *buf, size_t cnt, uint64_t off)
{
    int top = s->depth; /* filters [0, top) run read_xform */

    for (int i = 0; i < s->depth; i++) {
        bool do_read = true;
        if (!s->filters[i].pre_read)
            continue;
        if (s->filters[i].pre_read(buf, cnt, off, (unsigned int)s->fd, &do_read) < 0)
            return -EIO;
        if (!do_read) {
            top = i;
            break;
        }
    }
    if (top == s->depth) {
        int rc = device_read(s->fd, buf, cnt, off);
        if (rc)
            return rc;
    }
    for (int i = top - 1; i >= 0; i--) {
        struct filter_inst *f = &s->filters[i];
        if (!f->read_xform_rc)
            f->read_xform(buf, cnt, off);
        else if (f->read_xform_rc(buf, cnt, off) < 0)
            return xform_failed(buf, cnt);
    }
    return 0;
}

/* data is the caller's; it is copied before any filter touches it. */
static int write_aligned(iostack_stack *s, const void *data, size_t cnt, uint64_t off)
{
    void *buf = scratch(cnt);

    if (!buf)
        return -ENOMEM;
    memcpy(buf, data, cnt);
    for (int i = 0; i < s->depth; i++) {
        struct filter_inst *f = &s->filters[i];
        bool do_write = true;
        if (!f->write_xform_rc)
            f->write_xform(buf, cnt, off, &do_write);
        else if (f->write_xform_rc(buf, cnt, off, &do_write) < 0)
            return xform_failed(buf, cnt);
        if (!do_write)
            return 0;
    }
    return device_write(s->fd, buf, cnt, off);
}

static bool aligned(const iostack_stack *s, size_t cnt, uint64_t off)
{
    return ((off | cnt) & (s->alignment - 1)) == 0;
}

static void lock(iostack_stack *s, bool exclusive)
{
    if (exclusive || s->exclusive)
        pthread_rwlock_wrlock(&s->lock);
    else
        pthread_rwlock_rdlock(&s->lock);
}

int iostack_read(iostack_stack *s, void *buf, size_t cnt, uint64_t off)
{
    uint64_t start, end;
    char *wide;
    int rc;

    if (cnt == 0)
        return 0;
    lock(s, false);
    if (aligned(s, cnt, off)) {
        rc = read_aligned(s, buf, cnt, off);
    } else {
        start = off & ~(uint64_t)(s->alignment - 1);
        end = (off + cnt + s->alignment - 1) & ~(uint64_t)(s->alignment - 1);
        wide = scratch(end - start);
        rc = wide ? read_aligned(s, wide, end - start, start) : -ENOMEM;
        if (!rc)
            memcpy(buf, wide + (off - start), cnt);
    }
    pthread_rwlock_unlock(&s->lock);
    return rc;
}

int iostack_write(iostack_stack *s, const void *buf, size_t cnt, uint64_t off)
{
    uint64_t start, end;
    char *wide;
    int rc;

    if (cnt == 0)
        return 0;
    if (aligned(s, cnt, off)) {
        lock(s, false);
        rc = write_aligned(s, buf, cnt, off);
        pthread_rwlock_unlock(&s->lock);
        return rc;
    }
    start = off & ~(uint64_t)(s->alignment - 1);
    end = (off + cnt + s->alignment - 1) & ~(uint64_t)(s->alignment - 1);
    /* Own buffer: write_aligned uses the thread's scratch for its copy. */
    wide = malloc(end - start);
    if (!wide)
        return -ENOMEM;
    lock(s, true);
    rc = read_aligned(s, wide, end - start, start);
    if (!rc) {
        memcpy(wide + (off - start), buf, cnt);
        rc = write_aligned(s, wide, end - start, start);
    }
    pthread_rwlock_unlock(&s->lock);
    free(wide);
    return rc;
}

int iostack_flush(iostack_stack *s)
{
    return fdatasync(s->fd) ? -errno : 0;
}

int iostack_depth(const iostack_stack *s)
{
    return s->depth;
}

const char *iostack_filter_name(const iostack_stack *s, int index)
{
    return index >= 0 && index < s->depth ? s->filters[index].name : NULL;
}

unsigned int iostack_stack_alignment(const iostack_stack *s)
{
    return s->alignment;
}

int iostack_serialized(const iostack_stack *s)
{
    return s->exclusive;
}

int iostack_filter_stats(iostack_stack *s, int index, char *out, size_t outlen)
{
    int rc;

    if (index < 0 || index >= s->depth)
        return -ENOENT;
    if (!s->filters[index].stats) {
        snprintf(out, outlen, "%s", "");
        return 0;
    }
    lock(s, false);
    rc = s->filters[index].stats(out, outlen);
    pthread_rwlock_unlock(&s->lock);
    return rc;
}
