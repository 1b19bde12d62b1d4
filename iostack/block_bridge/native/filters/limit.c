/*
 * iops / bw: rate limits inside the stack (Konnector's IOPS and BW filters).
 *
 * Built twice from this file: as "iops" (each request costs 1) and as "bw"
 * (each request costs its length in bytes; LIMIT_BYTES=1).
 *   iops(read=500, write=200)       operations per second; aliases rit/wit
 *   bw(read=10M, write=5M)          bytes per second (K/M/G = 2^10/20/30);
 *                                   aliases rbt/wbt, given in MiB/s
 * 0 or absent means unlimited. A limit is a virtual clock (GCRA without
 * burst): request k of a direction starts no earlier than k costs / rate
 * after the first, so the measured rate converges on the setting even
 * with many requests in flight. Reads are charged in pre_read (before the
 * device is touched), writes in write_xform.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common.h"
#include "iostack_filter.h"

#ifndef LIMIT_BYTES
#define LIMIT_BYTES 0
#endif

struct throttle {
    pthread_mutex_t mu;
    uint64_t rate;     /* cost units per second; 0 = unlimited */
    uint64_t next_ns;  /* earliest start of the next request */
    uint64_t requests;
    uint64_t delayed_ns;
};

static struct throttle reads = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0};
static struct throttle writes = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0};

static void throttle_take(struct throttle *t, unsigned long cnt)
{
    uint64_t cost = LIMIT_BYTES ? cnt : 1, now, start;

    if (!t->rate)
        return;
    now = now_ns();
    pthread_mutex_lock(&t->mu);
    start = t->next_ns > now ? t->next_ns : now;
    t->next_ns = start + (uint64_t)((double)cost * 1e9 / (double)t->rate);
    t->requests++;
    t->delayed_ns += start - now;
    pthread_mutex_unlock(&t->mu);
    if (start > now)
        sleep_until_ns(start);
}

void write_xform(void *buf, unsigned long cnt, unsigned long offset, bool *doWrite)
{
    (void)buf, (void)offset;
    throttle_take(&writes, cnt);
    *doWrite = true;
}

void read_xform(void *buf, unsigned long cnt, unsigned long offset)
{
    (void)buf, (void)cnt, (void)offset;
}

int pre_read(void *buf, unsigned long cnt, unsigned long int offset, unsigned int fdesc,
             bool *doRead)
{
    (void)buf, (void)offset, (void)fdesc;
    throttle_take(&reads, cnt);
    *doRead = true;
    return 0;
}

int pass_args(char *args)
{
    static const char *names[2][2] = {{"read", LIMIT_BYTES ? "rbt" : "rit"},
                                      {"write", LIMIT_BYTES ? "wbt" : "wit"}};
    struct fa_kv kv[FA_MAX];
    int n = fa_parse(args, kv, FA_MAX);

    for (int i = 0; i < n; i++) {
        int dir = -1, alias = 0;
        uint64_t v;

        for (int d = 0; d < 2; d++)
            for (int a = 0; a < 2; a++)
                if (strcmp(kv[i].key, names[d][a]) == 0)
                    dir = d, alias = a;
        if (dir < 0)
            return fa_fail("unknown argument '%s' (takes: %s, %s, %s, %s)", kv[i].key,
                           names[0][0], names[1][0], names[0][1], names[1][1]);
        if (fa_number(&kv[i], 0, 1ULL << 40, &v))
            return -1;
        /* Konnector's rbt/wbt are MB/s. */
        if (LIMIT_BYTES && alias)
            v <<= 20;
        (dir ? &writes : &reads)->rate = v;
    }
    return n;
}

char *get_name(void)
{
    return LIMIT_BYTES ? "bw" : "iops";
}

int iostack_thread_safe(void)
{
    return 1;
}

int iostack_stats(char *out, size_t outlen)
{
    int n = snprintf(out, outlen,
                     "read_limit=%llu write_limit=%llu reads=%llu writes=%llu "
                     "read_delay_ms=%llu write_delay_ms=%llu",
                     (unsigned long long)reads.rate, (unsigned long long)writes.rate,
                     (unsigned long long)reads.requests, (unsigned long long)writes.requests,
                     (unsigned long long)(reads.delayed_ns / 1000000),
                     (unsigned long long)(writes.delayed_ns / 1000000));
    return n < 0 ? -1 : 0;
}
