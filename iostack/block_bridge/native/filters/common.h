/*
 * Helpers linked into every IOStack filter: "k=v, k=v" argument parsing
 * with sizes/rates ("64M", "0x5a"), the error text behind
 * iostack_last_error(), and a monotonic clock. They are hidden: a filter
 * .so exports only the entry points of iostack_filter.h.
 */
#ifndef IOSTACK_FILTER_COMMON_H
#define IOSTACK_FILTER_COMMON_H

#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(hidden)

#define FA_MAX 8

struct fa_kv {
    char key[32];
    char val[160];
};

/* Splits "k=v, k=v" (or Konnector's "k v, k v") into pairs; returns
 * their number or -1 (reason set). */
int fa_parse(const char *args, struct fa_kv *kv, int max);

/* Parses an unsigned number with optional 0x prefix or K/M/G (x1024)
 * suffix into *out, within [min, max]; -1 (reason set) otherwise. */
int fa_number(const struct fa_kv *kv, uint64_t min, uint64_t max, uint64_t *out);

/* Records why the arguments were rejected; returns -1. */
int fa_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* pass_args of a filter that takes none: the number of pairs in args (0),
 * or -1 (reason set) if it holds any. */
int fa_no_args(const char *args, const char *filter);

uint64_t now_ns(void);
void sleep_until_ns(uint64_t deadline);

#pragma GCC visibility pop

#endif
