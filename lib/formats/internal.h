/*
 * internal.h — what the files of the formats wing share and nobody else may include.
 *
 * GGUF is read by gguf_read.c and written by gguf_write.c; both size a tensor the same way. The
 * shards (shard.c) and the image cache (pixels.c) read and write little-endian integers alike.
 */
#ifndef SWIFT_FORMATS_INTERNAL_H
#define SWIFT_FORMATS_INTERNAL_H

#include "lib/formats/gguf.h"

#include <stdint.h>

/* Bytes of tensor t (its type's block size must divide ne[0]; the product must not overflow):
 * 0 with *nbytes set, or -1 with *why saying what is wrong (nothing is reported). */
int swift_gguf_tensor_nbytes(const struct swift_gguf_tensor *t, uint64_t *nbytes, const char **why);

/* Little-endian integers in byte buffers (shards, the image cache). */
static inline void swift_le_put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}
static inline void swift_le_put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}
static inline uint32_t swift_le_get32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t swift_le_get64(const unsigned char *p)
{
    return (uint64_t)swift_le_get32(p) | (uint64_t)swift_le_get32(p + 4) << 32;
}

#endif
