/*
 * tcmu-harness: runs a tcmu-runner handler without the kernel.
 *
 *   tcmu-harness HANDLER.so CFGSTRING DATA_FILE OFFSET [BLOCK_SIZE]
 *
 * Where the kernel has no TCMU (no configfs, no UIO ring) tcmu-runner cannot
 * start, so this program stands in for it: it dlopens the handler and calls
 * handler_init() as tcmu-runner does, supplying the runner-side functions a
 * handler links against (tcmur_register_handler, tcmur_dev_{set,get}_private),
 * builds a struct tcmu_device as libtcmu does when the kernel adds one, and
 * drives the callouts through the real libtcmu.so.2 accessors:
 * check_config, open, write (DATA_FILE at OFFSET, split over three iovecs),
 * read back over two iovecs, flush, close; then open again and read it back
 * (the volume persists), and close. Exit 0 when every step matched.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "libtcmu.h"
#include "libtcmu_priv.h"
#include "tcmu-runner.h"

static struct tcmur_handler *registered;

/* What tcmu-runner keeps per device; handlers reach it through libtcmu's
 * tcmu_dev_get_private(), exactly as in tcmu-runner. */
struct runner_device {
    void *hm_private;
};

int tcmur_register_handler(struct tcmur_handler *handler)
{
    registered = handler;
    return 0;
}

void tcmur_dev_set_private(struct tcmu_device *dev, void *private)
{
    ((struct runner_device *)tcmu_dev_get_private(dev))->hm_private = private;
}

void *tcmur_dev_get_private(struct tcmu_device *dev)
{
    return ((struct runner_device *)tcmu_dev_get_private(dev))->hm_private;
}

static int step(const char *what, int ok)
{
    printf("%-28s %s\n", what, ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    unsigned char *data;

    if (!f || fstat(fileno(f), &st) < 0 || !(data = malloc((size_t)st.st_size + 1))) {
        perror(path);
        exit(2);
    }
    *len = fread(data, 1, (size_t)st.st_size, f);
    fclose(f);
    return data;
}

/* Reads len bytes at off into two iovecs and compares with want. */
static int read_back(struct tcmu_device *dev, const unsigned char *want, size_t len, off_t off)
{
    unsigned char *got = calloc(1, len);
    struct iovec iov[2] = {{got, len / 3}, {got + len / 3, len - len / 3}};
    int rc = registered->read(dev, NULL, iov, 2, len, off);
    int same = rc == TCMU_STS_OK && memcmp(got, want, len) == 0;

    free(got);
    return same;
}

int main(int argc, char **argv)
{
    struct runner_device runner = {NULL};
    struct tcmu_device *dev;
    unsigned char *data;
    size_t len;
    off_t off;
    char *reason = NULL;
    int (*handler_init)(void);
    void *handle;
    int failed = 0;

    if (argc < 5) {
        fprintf(stderr, "usage: %s HANDLER.so CFGSTRING DATA_FILE OFFSET [BLOCK_SIZE]\n", argv[0]);
        return 2;
    }
    data = slurp(argv[3], &len);
    off = strtoll(argv[4], NULL, 0);

    handle = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!handle || !(handler_init = (int (*)(void))dlsym(handle, "handler_init"))) {
        fprintf(stderr, "cannot load handler: %s\n", dlerror());
        return 2;
    }
    failed |= step("handler_init", handler_init() == 0 && registered);
    if (failed)
        return 1;
    printf("handler %s (subtype %s)\n", registered->name, registered->subtype);

    dev = calloc(1, sizeof *dev);
    snprintf(dev->cfgstring, sizeof dev->cfgstring, "%s", argv[2]);
    snprintf(dev->dev_name, sizeof dev->dev_name, "harness0");
    tcmu_dev_set_private(dev, &runner);
    tcmu_dev_set_block_size(dev, argc > 5 ? (uint32_t)atoi(argv[5]) : 512);

    if (registered->check_config && !registered->check_config(argv[2], &reason)) {
        printf("check_config: %s\n", reason);
        return step("check_config", 0);
    }
    failed |= step("check_config", 1);
    if (registered->open(dev, false) != 0)
        return step("open", 0);
    printf("num_lbas %llu block_size %u write_cache %d\n",
           (unsigned long long)tcmu_dev_get_num_lbas(dev), tcmu_dev_get_block_size(dev),
           tcmu_dev_get_write_cache_enabled(dev));
    failed |= step("open", tcmu_dev_get_num_lbas(dev) * tcmu_dev_get_block_size(dev) >=
                               (uint64_t)off + len);
    {
        struct iovec iov[3] = {{data, len / 4}, {data + len / 4, len / 4},
                               {data + len / 2, len - len / 2}};
        failed |= step("write (3 iovecs)",
                       registered->write(dev, NULL, iov, 3, len, off) == TCMU_STS_OK);
    }
    failed |= step("read back (2 iovecs)", read_back(dev, data, len, off));
    failed |= step("flush", registered->flush(dev, NULL) == TCMU_STS_OK);
    registered->close(dev);
    failed |= step("close", 1);
    failed |= step("reopen", registered->open(dev, true) == 0);
    if (!failed) {
        failed |= step("read after reopen", read_back(dev, data, len, off));
        registered->close(dev);
    }
    free(dev);
    free(data);
    return failed;
}
