/*
 * iostack-fuse: one file whose reads and writes go through a filter stack.
 *
 *   iostack-fuse MOUNTPOINT --backing=FILE --filter-dir=DIR
 *                [--spec-file=PATH | --spec=SPEC] [--name=lun0] [-f] [fuse options]
 *
 * --spec-file reads the stack spec from a file (``/dev/stdin`` included):
 * filter arguments such as an aes_xts key must not be in argv, which any
 * local user reads in /proc/<pid>/cmdline. --spec is for specs without
 * secrets, typed by hand.
 *
 * MOUNTPOINT/<name> has the backing file's size (rounded down to the
 * stack's alignment). It is the userspace stand-in for TCMU: tgt exports
 * the file as an iSCSI LUN. direct_io keeps the kernel page cache out, so
 * every initiator request reaches the stack (and the backing file holds
 * the transformed bytes as soon as the write returns).
 */
#define FUSE_USE_VERSION 31
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "iostack_stack.h"

struct options {
    const char *backing;
    const char *filter_dir;
    const char *spec;
    const char *spec_file;
    const char *name;
};

static struct options opts; /* fuse_opt_parse fills it with malloc'd strings */
static iostack_stack *stack;
static off_t size;
static char path_of_file[512];

#define OPT(t, p) {t, offsetof(struct options, p), 1}
static const struct fuse_opt option_spec[] = {
    OPT("--backing=%s", backing),
    OPT("--filter-dir=%s", filter_dir),
    OPT("--spec=%s", spec),
    OPT("--spec-file=%s", spec_file),
    OPT("--name=%s", name),
    FUSE_OPT_END,
};

static int fs_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
    (void)fi;
    memset(st, 0, sizeof *st);
    if (strcmp(path, "/") == 0) {
        st->st_mode = S_IFDIR | 0755;
        st->st_nlink = 2;
    } else if (strcmp(path, path_of_file) == 0) {
        st->st_mode = S_IFREG | 0600;
        st->st_nlink = 1;
        st->st_size = size;
    } else {
        return -ENOENT;
    }
    return 0;
}

static int fs_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
                      struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
    (void)off, (void)fi, (void)flags;
    if (strcmp(path, "/") != 0)
        return -ENOENT;
    fill(buf, ".", NULL, 0, 0);
    fill(buf, "..", NULL, 0, 0);
    fill(buf, path_of_file + 1, NULL, 0, 0);
    return 0;
}

static int fs_open(const char *path, struct fuse_file_info *fi)
{
    if (strcmp(path, path_of_file) != 0)
        return -ENOENT;
    fi->direct_io = 1;
    return 0;
}

static int fs_read(const char *path, char *buf, size_t cnt, off_t off, struct fuse_file_info *fi)
{
    int rc;
    (void)path, (void)fi;
    if (off >= size)
        return 0;
    if ((off_t)cnt > size - off)
        cnt = (size_t)(size - off);
    rc = iostack_read(stack, buf, cnt, (uint64_t)off);
    return rc ? rc : (int)cnt;
}

static int fs_write(const char *path, const char *buf, size_t cnt, off_t off,
                    struct fuse_file_info *fi)
{
    int rc;
    (void)path, (void)fi;
    if (off >= size)
        return -ENOSPC;
    if ((off_t)cnt > size - off)
        cnt = (size_t)(size - off);
    rc = iostack_write(stack, buf, cnt, (uint64_t)off);
    return rc ? rc : (int)cnt;
}

static int fs_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
    (void)path, (void)datasync, (void)fi;
    return iostack_flush(stack);
}

/* A volume has a fixed size: opening with O_TRUNC or resizing is refused
 * unless it asks for the size the volume already has. */
static int fs_truncate(const char *path, off_t len, struct fuse_file_info *fi)
{
    (void)path, (void)fi;
    return len == size ? 0 : -EPERM;
}

static const struct fuse_operations ops = {
    .getattr = fs_getattr,
    .readdir = fs_readdir,
    .open = fs_open,
    .read = fs_read,
    .write = fs_write,
    .fsync = fs_fsync,
    .truncate = fs_truncate,
};

/* The whole file (at most SPEC_MAX - 1 bytes), without its trailing newline. */
#define SPEC_MAX 65536
static char *read_spec_file(const char *path)
{
    static char spec_buf[SPEC_MAX];
    size_t len = 0;
    ssize_t n;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0) {
        perror(path);
        return NULL;
    }
    while ((n = read(fd, spec_buf + len, SPEC_MAX - 1 - len)) > 0)
        len += (size_t)n;
    close(fd);
    if (n < 0 || len == SPEC_MAX - 1) {
        fprintf(stderr, "iostack-fuse: %s: %s\n", path,
                n < 0 ? strerror(errno) : "spec too long");
        return NULL;
    }
    while (len && (spec_buf[len - 1] == '\n' || spec_buf[len - 1] == '\r'))
        len--;
    spec_buf[len] = '\0';
    return spec_buf;
}

int main(int argc, char **argv)
{
    struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
    char err[IOSTACK_ERRLEN];
    struct stat st;
    int fd, rc;

    if (fuse_opt_parse(&args, &opts, option_spec, NULL) == -1)
        return 2;
    if (opts.spec && opts.spec_file) {
        fprintf(stderr, "iostack-fuse: give --spec or --spec-file, not both\n");
        return 2;
    }
    if (opts.spec_file && !(opts.spec = read_spec_file(opts.spec_file)))
        return 1;
    if (!opts.spec)
        opts.spec = "";
    if (!opts.name)
        opts.name = "lun0";
    if (!opts.backing || !opts.filter_dir || strchr(opts.name, '/')) {
        fprintf(stderr, "usage: %s MOUNTPOINT --backing=FILE --filter-dir=DIR "
                        "[--spec-file=PATH | --spec=SPEC] [--name=NAME] [fuse options]\n",
                argv[0]);
        return 2;
    }
    snprintf(path_of_file, sizeof path_of_file, "/%s", opts.name);
    fd = open(opts.backing, O_RDWR | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) < 0) {
        perror(opts.backing);
        return 1;
    }
    stack = iostack_open(opts.spec, opts.filter_dir, fd, err, sizeof err);
    if (!stack) {
        fprintf(stderr, "iostack-fuse: %s\n", err);
        return 1;
    }
    size = st.st_size & ~(off_t)(iostack_stack_alignment(stack) - 1);
    rc = fuse_main(args.argc, args.argv, &ops, NULL);
    iostack_close(stack);
    close(fd);
    fuse_opt_free_args(&args);
    return rc;
}
