/*
 * internal.h — what the files of the formats wing share and nobody else may include.
 *
 * GGUF is read by gguf_read.c and written by gguf_write.c; both size a tensor the same way.
 */
#ifndef SWIFT_FORMATS_INTERNAL_H
#define SWIFT_FORMATS_INTERNAL_H

#include "lib/formats/gguf.h"

/* Bytes of tensor t (its type's block size must divide ne[0]; the product must not overflow):
 * 0 with *nbytes set, or -1 with *why saying what is wrong (nothing is reported). */
int swift_gguf_tensor_nbytes(const struct swift_gguf_tensor *t, uint64_t *nbytes, const char **why);

#endif
