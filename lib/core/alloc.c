/* alloc — die on out of memory (lib/core/alloc.h). */
#include "lib/core/alloc.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/error.h"
#include "lib/core/banned.h"

static void die_oom(size_t n)
{
    fprintf(stderr, "%s: out of memory (%zu bytes)\n", swift_progname(), n);
    fflush(stderr);
    exit(SWIFT_EXIT_FAIL);
}

void *swift_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        die_oom(n);
    return p;
}

void *swift_xcalloc(size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size)
        die_oom(SIZE_MAX);
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p)
        die_oom(count * size);
    return p;
}

void *swift_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        die_oom(n);
    return q;
}

char *swift_xstrdup(const char *s)
{
    return swift_xstrndup(s, strlen(s));
}

char *swift_xstrndup(const char *s, size_t n)
{
    size_t len = strnlen(s, n);
    char *d = swift_xmalloc(len + 1);
    memcpy(d, s, len);
    d[len] = '\0';
    return d;
}

void swift_xgrow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return;
    size_t c = *cap ? *cap : 16;
    while (c < need) {
        if (c > SIZE_MAX / 2)
            die_oom(SIZE_MAX);
        c *= 2;
    }
    if (elem && c > SIZE_MAX / elem)
        die_oom(SIZE_MAX);
    *p = swift_xrealloc(*p, c * elem);
    *cap = c;
}
