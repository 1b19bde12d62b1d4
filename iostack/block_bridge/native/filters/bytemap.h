/*
 * Filters that map every byte on its own, the same way on writes and on
 * reads: the map is its own inverse, so reads undo writes (xor, bitrev).
 *
 * bytemap.c implements their write_xform, read_xform, get_name and
 * iostack_thread_safe over the one bytemap_filter table a filter defines;
 * the filter keeps its own pass_args (and iostack_stats, if it has any).
 */
#ifndef IOSTACK_BYTEMAP_H
#define IOSTACK_BYTEMAP_H

#include <stdint.h>
#include <string.h>

#pragma GCC visibility push(hidden)

struct bytemap_filter {
    const char *name;
    /* Maps cnt bytes in place (bytemap_words does the walking). */
    void (*map)(unsigned char *p, unsigned long cnt);
};

extern const struct bytemap_filter bytemap_filter;

#pragma GCC visibility pop

/* Applies word() to p eight bytes at a time (block I/O is large, and this
 * runs on every byte), then to the bytes left one by one; word() must treat
 * each byte of its 64-bit argument on its own. arg is handed to every call
 * (xor's key, repeated over the eight bytes). Inline, so that word() is. */
static inline void bytemap_words(unsigned char *p, unsigned long cnt,
                                 uint64_t (*word)(uint64_t x, uint64_t arg), uint64_t arg)
{
    unsigned long i = 0;
    uint64_t x;

    for (; i + 8 <= cnt; i += 8) {
        memcpy(&x, p + i, 8);
        x = word(x, arg);
        memcpy(p + i, &x, 8);
    }
    for (; i < cnt; i++)
        p[i] = (unsigned char)word(p[i], arg);
}

#endif
