#include "lib/core/sha256.h"
#include "lib/core/alloc.h"
#include "lib/core/error.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>

#include "lib/core/banned.h"

int swift_sha256_init(struct swift_sha256 *s)
{
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    if (!c || EVP_DigestInit_ex(c, EVP_sha256(), NULL) != 1)
        abort();
    s->ctx = c;
    return 0;
}

void swift_sha256_update(struct swift_sha256 *s, const void *data, size_t len)
{
    EVP_DigestUpdate(s->ctx, data, len);
}

void swift_sha256_final(struct swift_sha256 *s, char hex[65])
{
    unsigned char md[32];
    unsigned int n = 0;
    EVP_DigestFinal_ex(s->ctx, md, &n);
    EVP_MD_CTX_free(s->ctx);
    s->ctx = NULL;
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        hex[2 * i] = digits[md[i] >> 4];
        hex[2 * i + 1] = digits[md[i] & 15];
    }
    hex[64] = 0;
}

void swift_sha256_hex(const void *data, size_t len, char hex[65])
{
    struct swift_sha256 s;
    swift_sha256_init(&s);
    swift_sha256_update(&s, data, len);
    swift_sha256_final(&s, hex);
}

int swift_sha256_file(const char *path, char hex[65])
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return swift_error_errno("cannot open '%s'", path);
    struct swift_sha256 s;
    swift_sha256_init(&s);
    char *buf = swift_xmalloc(1 << 20);
    size_t n;
    while ((n = fread(buf, 1, 1 << 20, fp)) > 0)
        swift_sha256_update(&s, buf, n);
    int err = ferror(fp);
    fclose(fp);
    free(buf);
    swift_sha256_final(&s, hex);
    if (err)
        return swift_error("cannot read '%s'", path);
    return 0;
}
