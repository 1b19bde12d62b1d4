/* Shared filter helpers; see common.h. */
#define _GNU_SOURCE
#include "common.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static char last_error[256];

const char *iostack_last_error(void)
{
    return last_error;
}

int fa_fail(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return -1;
}

static const char *skip_sep(const char *p)
{
    while (*p == ',' || *p == ' ' || *p == '\t')
        p++;
    return p;
}

/* "k=v, k=v" or Konnector's "k v, k v" (as in "rit 10, wit 10"). */
int fa_parse(const char *args, struct fa_kv *kv, int max)
{
    const char *p = skip_sep(args);
    int n = 0;

    while (*p) {
        size_t klen = strcspn(p, "=, \t"), vlen;
        const char *v = p + klen;

        while (*v == ' ' || *v == '\t')
            v++;
        if (klen == 0 || (*v == '=' ? 0 : (v == p + klen || *v == ',' || !*v)))
            return fa_fail("expected key=value at '%s'", p);
        if (*v == '=')
            for (v++; *v == ' ' || *v == '\t'; v++)
                ;
        if (n == max)
            return fa_fail("more than %d arguments", max);
        if (klen >= sizeof kv[n].key)
            return fa_fail("argument name too long at '%s'", p);
        memcpy(kv[n].key, p, klen);
        kv[n].key[klen] = '\0';
        vlen = strcspn(v, ", \t");
        if (vlen == 0 || vlen >= sizeof kv[n].val)
            return fa_fail("argument '%s' needs a value of 1-%zu characters", kv[n].key,
                           sizeof kv[n].val - 1);
        memcpy(kv[n].val, v, vlen);
        kv[n].val[vlen] = '\0';
        p = skip_sep(v + vlen);
        n++;
    }
    return n;
}

int fa_no_args(const char *args, const char *filter)
{
    struct fa_kv kv[FA_MAX];
    int n = fa_parse(args, kv, FA_MAX);

    if (n > 0)
        return fa_fail("%s takes no arguments, got '%s'", filter, kv[0].key);
    return n;
}

int fa_number(const struct fa_kv *kv, uint64_t min, uint64_t max, uint64_t *out)
{
    char *end;
    unsigned long long v;
    uint64_t scale = 1;

    errno = 0;
    if (!isdigit((unsigned char)kv->val[0]))
        return fa_fail("argument %s='%s' is not a number", kv->key, kv->val);
    v = strtoull(kv->val, &end, 0);
    switch (toupper((unsigned char)*end)) {
    case 'K': scale = 1ULL << 10; end++; break;
    case 'M': scale = 1ULL << 20; end++; break;
    case 'G': scale = 1ULL << 30; end++; break;
    default: break;
    }
    if (errno || *end || v > max / scale || v * scale < min || v * scale > max)
        return fa_fail("argument %s='%s' must be a number in [%llu, %llu]", kv->key, kv->val,
                       (unsigned long long)min, (unsigned long long)max);
    *out = v * scale;
    return 0;
}

uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void sleep_until_ns(uint64_t deadline)
{
    struct timespec ts = {(time_t)(deadline / 1000000000ULL), (long)(deadline % 1000000000ULL)};

    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}
