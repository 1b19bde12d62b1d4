/*
 * aes_xts: sector-addressed, length-preserving encryption (AES-XTS, libcrypto).
 *
 *   aes_xts(key=<64 or 128 hex digits>, sector=512)
 *
 * 64 hex digits select AES-128-XTS, 128 select AES-256-XTS; the two key
 * halves must differ (XTS requires it). Each sector is encrypted with its
 * sector number (little-endian) as the tweak, so a sector can be read or
 * written alone and the stored size equals the volume size. The stack keeps
 * requests sector-aligned (iostack_alignment), doing read-modify-write for
 * unaligned writes.
 *
 * Errors: the filter exports the error-returning transforms only
 * (iostack_write_xform / iostack_read_xform). Every libcrypto call is
 * checked; a failure, or a request that is not whole sectors at a sector
 * boundary, fails the I/O (the stack answers EIO) and nothing is written.
 * It therefore needs IOStack's loader, not Konnector's.
 *
 * Contexts: each concurrent request takes a pair of cipher contexts (one
 * encrypting, one decrypting, the key schedule set once) from a pool and
 * returns it, so requests run in parallel without a context per I/O and
 * no two threads share one; iostack_release frees the pool.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "iostack_filter.h"

static unsigned char key[64];
static size_t key_len;
static unsigned int sector = 512;

struct ctx_pair {
    EVP_CIPHER_CTX *ctx[2]; /* [0] decrypts, [1] encrypts */
    struct ctx_pair *next;
};

static struct ctx_pair *pool;
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;

static int hex_key(const char *hex)
{
    size_t len = strlen(hex);

    if (len != 64 && len != 128)
        return fa_fail("key must be 64 (AES-128-XTS) or 128 (AES-256-XTS) hex digits, got %zu",
                       len);
    for (size_t i = 0; i < len / 2; i++) {
        unsigned int byte;
        if (!isxdigit((unsigned char)hex[2 * i]) || !isxdigit((unsigned char)hex[2 * i + 1]) ||
            sscanf(hex + 2 * i, "%2x", &byte) != 1)
            return fa_fail("key is not hexadecimal at digit %zu", 2 * i + 1);
        key[i] = (unsigned char)byte;
    }
    key_len = len / 2;
    if (memcmp(key, key + key_len / 2, key_len / 2) == 0)
        return fa_fail("the two halves of an XTS key must differ");
    return 0;
}

static void pair_free(struct ctx_pair *pair)
{
    EVP_CIPHER_CTX_free(pair->ctx[0]);
    EVP_CIPHER_CTX_free(pair->ctx[1]);
    free(pair);
}

/* A pair from the pool, or a new one with the key schedule set; NULL when
 * libcrypto or memory fails. */
static struct ctx_pair *pair_take(void)
{
    const EVP_CIPHER *cipher = key_len == 32 ? EVP_aes_128_xts() : EVP_aes_256_xts();
    struct ctx_pair *pair;

    pthread_mutex_lock(&pool_lock);
    pair = pool;
    if (pair)
        pool = pair->next;
    pthread_mutex_unlock(&pool_lock);
    if (pair)
        return pair;
    if (!cipher || !(pair = calloc(1, sizeof *pair)))
        return NULL;
    for (int enc = 0; enc < 2; enc++) {
        pair->ctx[enc] = EVP_CIPHER_CTX_new();
        if (!pair->ctx[enc] ||
            EVP_CipherInit_ex(pair->ctx[enc], cipher, NULL, key, NULL, enc) != 1) {
            pair_free(pair);
            return NULL;
        }
    }
    return pair;
}

static void pair_give(struct ctx_pair *pair)
{
    pthread_mutex_lock(&pool_lock);
    pair->next = pool;
    pool = pair;
    pthread_mutex_unlock(&pool_lock);
}

/* enc: 1 encrypt, 0 decrypt. 0, or -EINVAL for a request that is not whole
 * sectors at a sector boundary, -EIO when libcrypto fails. */
static int crypt_sectors(unsigned char *p, unsigned long cnt, unsigned long offset, int enc)
{
    unsigned long long lba = offset / sector;
    struct ctx_pair *pair;
    int rc = 0;

    if (!key_len || cnt % sector || offset % sector)
        return -EINVAL;
    pair = pair_take();
    if (!pair)
        return -EIO;
    for (unsigned long done = 0; done < cnt && !rc; done += sector, lba++) {
        unsigned char tweak[16] = {0};
        int outl = 0;
        for (int i = 0; i < 8; i++)
            tweak[i] = (unsigned char)(lba >> (8 * i));
        if (EVP_CipherInit_ex(pair->ctx[enc], NULL, NULL, NULL, tweak, enc) != 1 ||
            EVP_CipherUpdate(pair->ctx[enc], p + done, &outl, p + done, (int)sector) != 1 ||
            outl != (int)sector)
            rc = -EIO;
    }
    pair_give(pair);
    return rc;
}

int iostack_write_xform(void *buf, unsigned long cnt, unsigned long offset, bool *doWrite)
{
    *doWrite = true;
    return crypt_sectors(buf, cnt, offset, 1);
}

int iostack_read_xform(void *buf, unsigned long cnt, unsigned long offset)
{
    return crypt_sectors(buf, cnt, offset, 0);
}

int pass_args(char *args)
{
    struct fa_kv kv[FA_MAX];
    int n = fa_parse(args, kv, FA_MAX);
    bool have_key = false;
    uint64_t v;

    for (int i = 0; i < n; i++) {
        if (strcmp(kv[i].key, "key") == 0) {
            if (hex_key(kv[i].val))
                return -1;
            have_key = true;
        } else if (strcmp(kv[i].key, "sector") == 0) {
            if (fa_number(&kv[i], 512, 65536, &v))
                return -1;
            if (v & (v - 1))
                return fa_fail("sector=%llu is not a power of two", (unsigned long long)v);
            sector = (unsigned int)v;
        } else {
            return fa_fail("unknown argument '%s' (aes_xts takes: key, sector)", kv[i].key);
        }
    }
    if (n >= 0 && !have_key)
        return fa_fail("aes_xts needs key=<hex>");
    return n;
}

char *get_name(void)
{
    return "aes_xts";
}

unsigned int iostack_alignment(void)
{
    return sector;
}

int iostack_thread_safe(void)
{
    return 1;
}

void iostack_release(void)
{
    pthread_mutex_lock(&pool_lock);
    while (pool) {
        struct ctx_pair *next = pool->next;
        pair_free(pool);
        pool = next;
    }
    pthread_mutex_unlock(&pool_lock);
    OPENSSL_cleanse(key, sizeof key);
    key_len = 0;
}
