/*
 * analyze/internal — what only the files of lib/analyze share (not a public header: nothing
 * outside lib/analyze includes it; the wing's manual is lib/analyze/analyze.h).
 *
 * Memory: out of memory aborts with a message (the analyzer has nothing to save).
 */
#ifndef SWIFT_ANALYZE_INTERNAL_H
#define SWIFT_ANALYZE_INTERNAL_H

#include "lib/analyze/analyze.h"
#include "lib/core/error.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* realloc that aborts with "out of memory (N bytes)" (n == 0 allocates one byte). */
static inline void *swift_an_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) {
        swift_error("out of memory (%zu bytes)", n);
        abort();
    }
    return q;
}

/* ---------- stream.c + scan.c: events from a file ---------- */

/* Called instead of the jansson callback for an event the fast scanner read (scan.c). */
typedef int (*swift_an_fast_fn)(void *ctx, const struct swift_an_fev *fe, uint64_t off, long line);
/* swift_an_stream_file/_buffer (load.h) with a fast path: events the scanner reads go to
 * fast_fn, the others (and every event when fast_fn is NULL) through jansson to fn. */
int swift_an_stream_file_fast(const char *path, swift_an_event_fn fn, swift_an_fast_fn fast_fn,
                              swift_an_meta_fn meta_fn, void *ctx);
int swift_an_stream_buffer_fast(const char *name, const void *data, size_t len,
                                swift_an_event_fn fn, swift_an_fast_fn fast_fn,
                                swift_an_meta_fn meta_fn, void *ctx);
/* A ".jsonl" name: one event per line (our traces). */
int swift_an_name_is_jsonl(const char *name);

/* The fast event scanner (scan.c). 0: *f holds the event (its strings NUL-terminated in place),
 * *used its length in bytes and *nl the newlines in it (both may be NULL); -1: leave it to
 * jansson (nothing written). With one_line, an event with a newline inside is left to jansson
 * too (JSONL). */
int swift_an_fast_parse(char *buf, size_t len, struct swift_an_fev *f, size_t *used, long *nl,
                        int one_line);

#endif
