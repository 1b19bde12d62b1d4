/*
 * prefetch: a sequential read-ahead (D3.2, 6: the n:n filters).
 *
 *   prefetch(window=512K, trigger=2)
 *
 * After `trigger` reads in a row that each start where the previous one
 * ended, a read that misses the window fetches `window` bytes (at least the
 * request) from the device in one call and answers from memory until the
 * stream leaves the window. Writes overlapping the window discard it.
 * It reads the device directly, so it must be the bottom filter (it says so
 * with iostack_reads_device and the stack enforces it). It does not claim
 * iostack_thread_safe: a window fetched while a concurrent write sits between
 * write_xform and the device would keep the old bytes, so the stack runs
 * one request at a time when it is present.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "iostack_filter.h"

static unsigned char *window;
static uint64_t window_size = 512 * 1024, trigger = 2;
static uint64_t win_off, win_len; /* bytes of the device held in window */
static uint64_t last_end = UINT64_MAX, run; /* sequential detector */
static uint64_t hits, misses, fetches, fetched_bytes, discards;

static bool covered(unsigned long cnt, unsigned long offset)
{
    return win_len && offset >= win_off && offset + cnt <= win_off + win_len;
}

/* Fills the window from the device at offset; false on a device error. */
static bool fetch(int fd, unsigned long cnt, unsigned long offset)
{
    uint64_t want = cnt > window_size ? cnt : window_size, got = 0;

    if (want > window_size) {
        unsigned char *bigger = realloc(window, want);
        if (!bigger)
            return false;
        window = bigger;
        window_size = want;
    }
    while (got < want) {
        ssize_t n = pread(fd, window + got, want - got, (off_t)(offset + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (uint64_t)n;
    }
    if (got < cnt) {
        win_len = 0;
        return false;
    }
    win_off = offset;
    win_len = got;
    fetches++;
    fetched_bytes += got;
    return true;
}

int pre_read(void *buf, unsigned long cnt, unsigned long int offset, unsigned int fdesc,
             bool *doRead)
{
    run = offset == last_end ? run + 1 : 0;
    last_end = offset + cnt;
    *doRead = true;
    if (covered(cnt, offset) || (run >= trigger && fetch((int)fdesc, cnt, offset))) {
        memcpy(buf, window + (offset - win_off), cnt);
        *doRead = false;
        hits++;
    } else {
        misses++;
    }
    return 0;
}

void write_xform(void *buf, unsigned long cnt, unsigned long offset, bool *doWrite)
{
    (void)buf;
    if (win_len && offset < win_off + win_len && offset + cnt > win_off) {
        win_len = 0;
        discards++;
    }
    *doWrite = true;
}

void read_xform(void *buf, unsigned long cnt, unsigned long offset)
{
    (void)buf, (void)cnt, (void)offset;
}

int pass_args(char *args)
{
    struct fa_kv kv[FA_MAX];
    int n = fa_parse(args, kv, FA_MAX);

    for (int i = 0; i < n; i++) {
        if (strcmp(kv[i].key, "window") == 0) {
            if (fa_number(&kv[i], 4096, 64ULL << 20, &window_size))
                return -1;
        } else if (strcmp(kv[i].key, "trigger") == 0) {
            if (fa_number(&kv[i], 1, 1024, &trigger))
                return -1;
        } else {
            return fa_fail("unknown argument '%s' (prefetch takes: window, trigger)",
                           kv[i].key);
        }
    }
    if (n >= 0 && !(window = malloc(window_size)))
        return fa_fail("out of memory");
    return n;
}

char *get_name(void)
{
    return "prefetch";
}

int iostack_reads_device(void)
{
    return 1;
}

int iostack_stats(char *out, size_t outlen)
{
    int n;

    n = snprintf(out, outlen, "hits=%llu misses=%llu fetches=%llu fetched_bytes=%llu discards=%llu",
                 (unsigned long long)hits, (unsigned long long)misses,
                 (unsigned long long)fetches, (unsigned long long)fetched_bytes,
                 (unsigned long long)discards);
    return n < 0 ? -1 : 0;
}

void iostack_release(void)
{
    free(window);
    window = NULL;
}
