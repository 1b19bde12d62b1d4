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
 */
#include <ctype.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>

#include "common.h"
#include "iostack_filter.h"

static unsigned char key[64];
static size_t key_len;
static unsigned int sector = 512;

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

/* enc: 1 encrypt, 0 decrypt. The libcrypto calls cannot fail once pass_args
 * has accepted the key (length and halves checked there). */
static void crypt_sectors(unsigned char *p, unsigned long cnt, unsigned long offset, int enc)
{
    const EVP_CIPHER *cipher = key_len == 32 ? EVP_aes_128_xts() : EVP_aes_256_xts();
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    unsigned long long lba = offset / sector;
    int outl;

    EVP_CipherInit_ex(ctx, cipher, NULL, key, NULL, enc);
    for (unsigned long done = 0; done < cnt; done += sector, lba++) {
        unsigned char tweak[16] = {0};
        for (int i = 0; i < 8; i++)
            tweak[i] = (unsigned char)(lba >> (8 * i));
        EVP_CipherInit_ex(ctx, NULL, NULL, NULL, tweak, enc);
        EVP_CipherUpdate(ctx, p + done, &outl, p + done, (int)sector);
    }
    EVP_CIPHER_CTX_free(ctx);
}

void write_xform(void *buf, unsigned long cnt, unsigned long offset, bool *doWrite)
{
    crypt_sectors(buf, cnt, offset, 1);
    *doWrite = true;
}

void read_xform(void *buf, unsigned long cnt, unsigned long offset)
{
    crypt_sectors(buf, cnt, offset, 0);
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
    OPENSSL_cleanse(key, sizeof key);
}
