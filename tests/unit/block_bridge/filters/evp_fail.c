/*
 * Test-only LD_PRELOAD shim: libcrypto's EVP_CipherUpdate fails (returns 0)
 * while the file named by $EVP_FAIL_FLAG exists, so a test can make the
 * aes_xts filter's cipher fail on demand. Otherwise it calls libcrypto's
 * own function, looked up in libcrypto itself.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <unistd.h>

int EVP_CipherUpdate(EVP_CIPHER_CTX *ctx, unsigned char *out, int *outl,
                     const unsigned char *in, int inl)
{
    static int (*real)(EVP_CIPHER_CTX *, unsigned char *, int *, const unsigned char *, int);
    const char *flag = getenv("EVP_FAIL_FLAG");

    if (flag && access(flag, F_OK) == 0)
        return 0;
    if (!real)
        real = (int (*)(EVP_CIPHER_CTX *, unsigned char *, int *, const unsigned char *,
                        int))dlsym(dlopen("libcrypto.so.3", RTLD_LAZY), "EVP_CipherUpdate");
    return real ? real(ctx, out, outl, in, inl) : 0;
}
