/*
 * strbuf — a growing NUL-terminated string (git's strbuf, in small): text built piece by piece
 * (a prompt, a rendered template, a JSON body, a diff) without counting its length first.
 *
 *     struct swift_strbuf b = {0};                    // empty; nothing allocated yet
 *     swift_strbuf_adds(&b, "Question: ");
 *     swift_strbuf_add(&b, text, n);                  // n bytes; they may hold NULs
 *     char *s = swift_strbuf_detach(&b);              // the caller frees s; b is empty again
 *
 * b.s is NUL-terminated after every add (b.s[b.len] == 0) and NULL while nothing was added;
 * b.len counts the bytes without that NUL. Memory comes from swift_xgrow (lib/core/alloc.h): an
 * add never fails. A buffer whose size comes from input needs the caller's own ceiling, checked
 * before the add (STYLE.md: every growing buffer has one).
 *
 * swift_str_append is the same add for a string kept in three fields of a larger struct (a
 * choice's text, len and cap in lib/infer/openai.h).
 */
#ifndef SWIFT_STRBUF_H
#define SWIFT_STRBUF_H

#include <stddef.h>

struct swift_strbuf {
    char *s;    /* NULL, or len bytes and a NUL; owned */
    size_t len; /* bytes before the NUL */
    size_t cap; /* bytes allocated at s */
};

/* Append n bytes at p (n 0: only makes sure *s is allocated and NUL-terminated) to the string
 * (*s, *len, *cap), growing *s by doubling. p may not point into *s. */
void swift_str_append(char **s, size_t *len, size_t *cap, const void *p, size_t n);

/* Append n bytes at p, or the C string s. */
void swift_strbuf_add(struct swift_strbuf *b, const void *p, size_t n);
void swift_strbuf_adds(struct swift_strbuf *b, const char *s);
/* The string, "" (allocated) when nothing was added; the caller frees it. b is empty again. */
char *swift_strbuf_detach(struct swift_strbuf *b);
/* Frees the string; b is empty again. */
void swift_strbuf_release(struct swift_strbuf *b);

#endif
