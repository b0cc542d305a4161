/*
 * sha256 — SHA-256 through OpenSSL's libcrypto (EVP), streaming or of a whole file.
 *
 *     char hex[65];
 *     if (swift_sha256_file("model.safetensors", hex) < 0) ...
 */
#ifndef SWIFT_SHA256_H
#define SWIFT_SHA256_H

#include <stddef.h>
#include <stdint.h>

struct swift_sha256 {
    void *ctx; /* EVP_MD_CTX */
};

int swift_sha256_init(struct swift_sha256 *s);
void swift_sha256_update(struct swift_sha256 *s, const void *data, size_t len);
/* Write 64 lowercase hex digits and a NUL to hex; frees the context. */
void swift_sha256_final(struct swift_sha256 *s, char hex[65]);
/* One buffer. */
void swift_sha256_hex(const void *data, size_t len, char hex[65]);
/* A whole file, read in 1 MiB blocks. Returns 0 or -1 after reporting an error. */
int swift_sha256_file(const char *path, char hex[65]);

#endif
