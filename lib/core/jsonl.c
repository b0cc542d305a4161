#include "lib/core/jsonl.h"
#include "lib/core/alloc.h"
#include "lib/core/error.h"

#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

void swift_jsonl_init_fp(struct swift_jsonl *r, FILE *fp, const char *name, int flags)
{
    memset(r, 0, sizeof(*r));
    r->fp = fp;
    r->path = name;
    r->flags = flags;
    r->max_line = SWIFT_JSONL_MAX_LINE_DEFAULT;
}

int swift_jsonl_open(struct swift_jsonl *r, const char *path, int flags)
{
    FILE *fp = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!fp)
        return swift_error_errno("cannot open '%s'", path);
    swift_jsonl_init_fp(r, fp, path, flags);
    r->owns_fp = fp != stdin;
    return 0;
}

const char *swift_jsonl_name(const struct swift_jsonl *r)
{
    return !r->path || !strcmp(r->path, "-") ? "<stdin>" : r->path;
}

void swift_jsonl_close(struct swift_jsonl *r)
{
    if (r->fp && r->owns_fp)
        fclose(r->fp);
    free(r->buf);
    r->buf = NULL;
    r->fp = NULL;
}

long swift_jsonl_next_line(struct swift_jsonl *r, char **line)
{
    size_t n = 0;
    for (;;) {
        if (n + 2 > r->cap) {
            size_t nc = r->cap ? r->cap * 2 : 4096;
            r->buf = swift_xrealloc(r->buf, nc);
            r->cap = nc;
        }
        if (!fgets(r->buf + n, (int)(r->cap - n > 1 << 30 ? 1 << 30 : r->cap - n), r->fp)) {
            if (ferror(r->fp))
                return swift_error_errno("cannot read '%s'", swift_jsonl_name(r));
            if (n == 0)
                return -2;
            break;
        }
        n += strlen(r->buf + n);
        if (n > r->max_line)
            return swift_error_at(
                swift_jsonl_name(r), r->line + 1, "line longer than %zu bytes", r->max_line);
        if (n && r->buf[n - 1] == '\n')
            break;
    }
    r->line++;
    if (n && r->buf[n - 1] == '\n')
        r->buf[--n] = 0;
    if (n && r->buf[n - 1] == '\r')
        r->buf[--n] = 0;
    *line = r->buf;
    return (long)n;
}

static int blank(const char *s)
{
    for (; *s; s++)
        if (*s != ' ' && *s != '\t')
            return 0;
    return 1;
}

int swift_jsonl_next(struct swift_jsonl *r, json_t **out)
{
    for (;;) {
        char *line;
        long n = swift_jsonl_next_line(r, &line);
        if (n == -2)
            return 0;
        if (n < 0)
            return -1;
        if (blank(line))
            continue;
        json_error_t je;
        json_t *v = json_loadb(line, (size_t)n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
        if (v) {
            *out = v;
            return 1;
        }
        if (r->flags & SWIFT_JSONL_SKIP_INVALID) {
            if (r->nbad < 5)
                r->first_bad[r->nbad++] = r->line;
            r->skipped++;
            continue;
        }
        return swift_error_at(swift_jsonl_name(r), r->line, "column %d: %s", je.column, je.text);
    }
}
