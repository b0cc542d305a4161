/* strbuf — a growing NUL-terminated string (see strbuf.h). */
#include "lib/core/strbuf.h"

#include "lib/core/alloc.h"

#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

void swift_str_append(char **s, size_t *len, size_t *cap, const void *p, size_t n)
{
    swift_xgrow((void **)s, cap, *len + n + 1, 1);
    if (n)
        memcpy(*s + *len, p, n);
    *len += n;
    (*s)[*len] = 0;
}

void swift_strbuf_add(struct swift_strbuf *b, const void *p, size_t n)
{
    swift_str_append(&b->s, &b->len, &b->cap, p, n);
}

void swift_strbuf_adds(struct swift_strbuf *b, const char *s)
{
    swift_strbuf_add(b, s, strlen(s));
}

char *swift_strbuf_detach(struct swift_strbuf *b)
{
    if (!b->s)
        swift_strbuf_add(b, "", 0);
    char *s = b->s;
    *b = (struct swift_strbuf){0};
    return s;
}

void swift_strbuf_release(struct swift_strbuf *b)
{
    free(b->s);
    *b = (struct swift_strbuf){0};
}
