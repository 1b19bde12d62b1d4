/*
 * handler_iostack.so: a tcmu-runner handler that puts an IOStack filter
 * stack between a LIO/TCMU LUN and its backing device.
 *
 * Subtype "iostack"; cfgstring "iostack/<volume-id>". The kernel caps the
 * cfgstring at 256 bytes, so the stack lives in a volume file,
 * $IOSTACK_TCMU_CONFIG_DIR/<volume-id>.conf (default /etc/iostack/tcmu),
 * written by the block bridge service:
 *
 *   backing=/dev/sdx
 *   spec=xor(key=0x5a)>bitrev
 *   filter_dir=/usr/lib/iostack/block-filters
 *
 * The spec may hold keys (aes_xts), so a volume file that group or others
 * may read is refused.
 *
 * Callouts run synchronously on tcmu-runner's I/O threads (nr_threads);
 * the stack does its own locking.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "iostack_stack.h"
#include "libtcmu.h"
#include "tcmu-runner.h"
#include "tcmur_device.h"

#define DEFAULT_CONFIG_DIR "/etc/iostack/tcmu"

struct volume_conf {
    char backing[4096];
    char spec[2048];
    char filter_dir[4096];
};

struct volume {
    int fd;
    iostack_stack *stack;
};

/* "iostack/<id>" -> id, which must be a plain file name. */
static const char *volume_id(const char *cfgstring, char **reason)
{
    const char *id = strchr(cfgstring, '/');

    if (!id || !*++id) {
        asprintf(reason, "cfgstring '%s' is not iostack/<volume-id>", cfgstring);
        return NULL;
    }
    for (const char *p = id; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' && *p != '.') {
            asprintf(reason, "volume id '%s' may only use letters, digits, '-', '_', '.'", id);
            return NULL;
        }
    if (id[0] == '.') {
        asprintf(reason, "volume id '%s' may not start with '.'", id);
        return NULL;
    }
    return id;
}

static int read_conf(const char *id, struct volume_conf *conf, char **reason)
{
    const char *dir = getenv("IOSTACK_TCMU_CONFIG_DIR");
    char path[4096], line[8192];
    struct stat st;
    FILE *f;

    memset(conf, 0, sizeof *conf);
    snprintf(path, sizeof path, "%s/%s.conf", dir ? dir : DEFAULT_CONFIG_DIR, id);
    f = fopen(path, "re");
    if (!f) {
        asprintf(reason, "volume file %s: %s", path, strerror(errno));
        return -1;
    }
    /* The spec may hold a key (aes_xts): a file others can read is refused. */
    if (fstat(fileno(f), &st) || (st.st_mode & 077)) {
        asprintf(reason, "volume file %s is readable by others (mode %03o); it holds filter "
                 "keys and must be 0600", path, (unsigned)(st.st_mode & 0777));
        fclose(f);
        return -1;
    }
    while (fgets(line, sizeof line, f)) {
        char *eq = strchr(line, '=');
        line[strcspn(line, "\n")] = '\0';
        if (!eq || line[0] == '#')
            continue;
        *eq++ = '\0';
        if (strcmp(line, "backing") == 0)
            snprintf(conf->backing, sizeof conf->backing, "%s", eq);
        else if (strcmp(line, "spec") == 0)
            snprintf(conf->spec, sizeof conf->spec, "%s", eq);
        else if (strcmp(line, "filter_dir") == 0)
            snprintf(conf->filter_dir, sizeof conf->filter_dir, "%s", eq);
    }
    fclose(f);
    if (!conf->backing[0] || !conf->filter_dir[0]) {
        asprintf(reason, "volume file %s needs backing= and filter_dir=", path);
        return -1;
    }
    return 0;
}

static bool iostack_check_config(const char *cfgstring, char **reason)
{
    struct volume_conf conf;
    char err[IOSTACK_ERRLEN];
    const char *id = volume_id(cfgstring, reason);

    if (!id || read_conf(id, &conf, reason))
        return false;
    if (access(conf.backing, R_OK | W_OK)) {
        asprintf(reason, "backing %s: %s", conf.backing, strerror(errno));
        return false;
    }
    if (iostack_validate(conf.spec, conf.filter_dir, err, sizeof err)) {
        asprintf(reason, "%s", err);
        return false;
    }
    return true;
}

static int iostack_open_dev(struct tcmu_device *dev, bool reopen)
{
    struct volume_conf conf;
    struct volume *vol;
    char err[IOSTACK_ERRLEN], *reason = NULL;
    const char *id = volume_id(tcmu_dev_get_cfgstring(dev), &reason);
    struct stat st;
    uint32_t block_size = tcmu_dev_get_block_size(dev);
    (void)reopen;

    if (!id || read_conf(id, &conf, &reason)) {
        tcmu_dev_err(dev, "%s\n", reason);
        free(reason);
        return -EINVAL;
    }
    vol = calloc(1, sizeof *vol);
    if (!vol)
        return -ENOMEM;
    vol->fd = open(conf.backing, O_RDWR | O_CLOEXEC);
    if (vol->fd < 0 || fstat(vol->fd, &st) < 0) {
        int e = errno;
        tcmu_dev_err(dev, "backing %s: %s\n", conf.backing, strerror(e));
        if (vol->fd >= 0)
            close(vol->fd);
        free(vol);
        return -e;
    }
    vol->stack = iostack_open(conf.spec, conf.filter_dir, vol->fd, err, sizeof err);
    if (!vol->stack) {
        tcmu_dev_err(dev, "%s\n", err);
        close(vol->fd);
        free(vol);
        return -EINVAL;
    }
    if (block_size == 0 || block_size % iostack_stack_alignment(vol->stack)) {
        tcmu_dev_err(dev, "block size %u is not a multiple of the stack's alignment %u\n",
                     block_size, iostack_stack_alignment(vol->stack));
        iostack_close(vol->stack);
        close(vol->fd);
        free(vol);
        return -EINVAL;
    }
    /* A block device reports size 0 through fstat; ask it by seeking. */
    if (!S_ISREG(st.st_mode))
        st.st_size = lseek(vol->fd, 0, SEEK_END);
    tcmu_dev_set_num_lbas(dev, (uint64_t)st.st_size / block_size);
    tcmu_dev_set_write_cache_enabled(dev, 1);
    tcmur_dev_set_private(dev, vol);
    tcmu_dev_dbg(dev, "iostack volume %s: %d filters over %s\n", id, iostack_depth(vol->stack),
                 conf.backing); /* not the spec: it may hold a key */
    return 0;
}

static void iostack_close_dev(struct tcmu_device *dev)
{
    struct volume *vol = tcmur_dev_get_private(dev);

    iostack_close(vol->stack);
    close(vol->fd);
    free(vol);
}

/* The stack wants one buffer; iovecs with several entries go through a
 * bounce buffer (filled from them for a write, copied into them after a read). */
static int transfer(struct tcmu_device *dev, struct iovec *iov, size_t iov_cnt, size_t length,
                    off_t offset, bool write)
{
    struct volume *vol = tcmur_dev_get_private(dev);
    bool bounce = iov_cnt != 1;
    void *buf = bounce ? malloc(length) : iov[0].iov_base;
    int rc;

    if (!buf)
        return TCMU_STS_NO_RESOURCE;
    if (write) {
        if (bounce)
            tcmu_memcpy_from_iovec(buf, length, iov, iov_cnt);
        rc = iostack_write(vol->stack, buf, length, (uint64_t)offset);
    } else {
        rc = iostack_read(vol->stack, buf, length, (uint64_t)offset);
        if (!rc && bounce)
            tcmu_memcpy_into_iovec(iov, iov_cnt, buf, length);
    }
    if (bounce)
        free(buf);
    if (!rc)
        return TCMU_STS_OK;
    tcmu_dev_err(dev, "%s %zu at %lld: %s\n", write ? "write" : "read", length,
                 (long long)offset, strerror(-rc));
    return write ? TCMU_STS_WR_ERR : TCMU_STS_RD_ERR;
}

static int iostack_read_cmd(struct tcmu_device *dev, struct tcmur_cmd *cmd, struct iovec *iov,
                            size_t iov_cnt, size_t length, off_t offset)
{
    (void)cmd;
    return transfer(dev, iov, iov_cnt, length, offset, false);
}

static int iostack_write_cmd(struct tcmu_device *dev, struct tcmur_cmd *cmd, struct iovec *iov,
                             size_t iov_cnt, size_t length, off_t offset)
{
    (void)cmd;
    return transfer(dev, iov, iov_cnt, length, offset, true);
}

static int iostack_flush_cmd(struct tcmu_device *dev, struct tcmur_cmd *cmd)
{
    struct volume *vol = tcmur_dev_get_private(dev);
    (void)cmd;

    return iostack_flush(vol->stack) ? TCMU_STS_WR_ERR : TCMU_STS_OK;
}

static struct tcmur_handler iostack_handler = {
    .name = "IOStack filter stack",
    .subtype = "iostack",
    .cfg_desc = "iostack/<volume-id>: stack and backing device in "
                "$IOSTACK_TCMU_CONFIG_DIR/<volume-id>.conf",
    .check_config = iostack_check_config,
    .open = iostack_open_dev,
    .close = iostack_close_dev,
    .nr_threads = 4,
    .read = iostack_read_cmd,
    .write = iostack_write_cmd,
    .flush = iostack_flush_cmd,
};

int handler_init(void)
{
    return tcmur_register_handler(&iostack_handler);
}
