/*
 * alloc — one out-of-memory policy for the whole library (git's xmalloc): an allocation that
 * fails prints "swift-X: out of memory (N bytes)" and exits 1 at once. A failed allocation is not
 * a condition any caller can do better with, and checking every small malloc by hand made two
 * policies (211 "out of memory" returns beside 103 abort()s) and many untested error paths.
 *
 *     struct swift_tensor *t = swift_xcalloc(n, sizeof(*t));
 *     char *copy = swift_xstrdup(name);
 *     buf = swift_xrealloc(buf, cap * 2);
 *
 * Use them for the library's own bookkeeping and buffers. Where a size comes from untrusted input
 * (a header's tensor count, a shape), check it against the input's own size or a stated ceiling
 * first and report that as bad data (swift_error_at), so a corrupt file is an error with a
 * position, never an exit for "out of memory". Backend memory (kernels/ops.h alloc) keeps its
 * own NULL return: a device that is full is reported with what was asked for.
 */
#ifndef SWIFT_ALLOC_H
#define SWIFT_ALLOC_H

#include <stddef.h>

/* Never return NULL; a zero-byte request returns a unique pointer (malloc(1)). */
void *swift_xmalloc(size_t n);
void *swift_xcalloc(size_t count, size_t size); /* overflow of count*size also dies */
void *swift_xrealloc(void *p, size_t n);
char *swift_xstrdup(const char *s);
char *swift_xstrndup(const char *s, size_t n);
/* Grow *p (an array of *cap elements of size elem) to hold at least need elements, doubling. */
void swift_xgrow(void **p, size_t *cap, size_t need, size_t elem);

#endif
