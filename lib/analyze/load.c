#include "lib/analyze/load.h"
#include "lib/analyze/breakdown.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/core/trace.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "lib/core/banned.h"

#define CHUNK (1u << 20)
#define MAX_VALUE ((size_t)256 << 20) /* one event or one top-level value */
#define MAX_META ((size_t)16 << 20)   /* top-level values kept as metadata */

/* ---------- interning ---------- */

static uint32_t hash_str(const char *s, size_t len)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) {
        swift_error("out of memory (%zu bytes)", n);
        abort();
    }
    return q;
}

uint32_t swift_an_intern(struct swift_an_strtab *t, const char *s, size_t len)
{
    if (t->n * 2 + 2 >= t->nslot) {
        uint32_t ns = t->nslot ? t->nslot * 2 : 1024;
        uint32_t *slot = calloc(ns, sizeof(*slot));
        if (!slot)
            abort();
        for (uint32_t i = 0; i < t->n; i++) {
            uint32_t h = hash_str(t->str[i], strlen(t->str[i])) & (ns - 1);
            while (slot[h])
                h = (h + 1) & (ns - 1);
            slot[h] = i + 1;
        }
        free(t->slot);
        t->slot = slot;
        t->nslot = ns;
    }
    uint32_t h = hash_str(s, len) & (t->nslot - 1);
    while (t->slot[h]) {
        const char *o = t->str[t->slot[h] - 1];
        if (!strncmp(o, s, len) && o[len] == 0)
            return t->slot[h] - 1;
        h = (h + 1) & (t->nslot - 1);
    }
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 1024;
        t->str = xrealloc(t->str, t->cap * sizeof(*t->str));
    }
    char *c = malloc(len + 1);
    if (!c)
        abort();
    memcpy(c, s, len);
    c[len] = 0;
    t->str[t->n] = c;
    t->slot[h] = t->n + 1;
    return t->n++;
}

uint32_t swift_an_lookup(const struct swift_an_strtab *t, const char *s)
{
    if (!t->nslot)
        return SWIFT_AN_NONE;
    uint32_t h = hash_str(s, strlen(s)) & (t->nslot - 1);
    while (t->slot[h]) {
        if (!strcmp(t->str[t->slot[h] - 1], s))
            return t->slot[h] - 1;
        h = (h + 1) & (t->nslot - 1);
    }
    return SWIFT_AN_NONE;
}

/* ---------- byte reader over gzip, plain files or memory ---------- */

struct rd {
    const char *name;
    gzFile gz;
    const unsigned char *mem;
    size_t memlen, mempos;
    char *buf;
    size_t cap, len, pos, keep; /* bytes before `keep` may be dropped */
    uint64_t base;              /* stream offset of buf[0] */
    long line;                  /* line of buf[pos] */
    int eof, err;
    int jsonl; /* a newline ends every value */
};

static int rd_fill(struct rd *r)
{
    if (r->eof || r->err)
        return 0;
    if (r->keep > 0) {
        memmove(r->buf, r->buf + r->keep, r->len - r->keep);
        r->base += r->keep;
        r->len -= r->keep;
        r->pos -= r->keep;
        r->keep = 0;
    }
    if (r->cap - r->len < CHUNK) {
        if (r->cap >= MAX_VALUE + CHUNK) {
            r->err = 2;
            return 0;
        }
        r->cap = r->cap ? r->cap * 2 : 2 * CHUNK;
        r->buf = xrealloc(r->buf, r->cap + 1);
    }
    size_t want = r->cap - r->len;
    long got;
    if (r->gz) {
        got = gzread(r->gz, r->buf + r->len, (unsigned)(want > (1u << 30) ? (1u << 30) : want));
        if (got < 0) {
            r->err = 1;
            return 0;
        }
    } else {
        size_t left = r->memlen - r->mempos;
        got = (long)(left < want ? left : want);
        memcpy(r->buf + r->len, r->mem + r->mempos, (size_t)got);
        r->mempos += (size_t)got;
    }
    if (got == 0) {
        int zerr = Z_OK;
        if (r->gz)
            gzerror(r->gz, &zerr);
        if (zerr == Z_BUF_ERROR) {
            r->err = 3; /* the gzip stream stops before its end */
            return 0;
        }
        r->eof = 1;
        return 0;
    }
    r->len += (size_t)got;
    r->buf[r->len] = 0;
    return 1;
}

/* Byte at pos, reading more when needed; -1 at end. */
static inline int rd_peek(struct rd *r)
{
    if (r->pos >= r->len && !rd_fill(r))
        return -1;
    return (unsigned char)r->buf[r->pos];
}

static int skip_ws(struct rd *r)
{
    for (;;) {
        int c = rd_peek(r);
        if (c == '\n')
            r->line++;
        else if (c != ' ' && c != '\t' && c != '\r')
            return c;
        r->pos++;
        r->keep = r->pos;
    }
}

static uint64_t rd_off(const struct rd *r)
{
    return r->base + r->pos;
}

static int rd_report(struct rd *r, const char *what)
{
    if (r->err == 3)
        return swift_error_at(r->name,
                              r->line,
                              "byte %llu: gzip stream ends early (truncated file?)",
                              (unsigned long long)rd_off(r));
    if (r->err == 1) {
        int zerr = 0;
        const char *m = r->gz ? gzerror(r->gz, &zerr) : "read error";
        if (!strncmp(m, "<fd:", 4) && strstr(m, ": "))
            m = strstr(m, ": ") + 2; /* gzdopen names the stream "<fd:N>" */
        return swift_error_at(r->name,
                              r->line,
                              "byte %llu: %s (%s)",
                              (unsigned long long)rd_off(r),
                              zerr == Z_ERRNO ? strerror(errno) : m,
                              what);
    }
    if (r->err == 2)
        return swift_error_at(r->name,
                              r->line,
                              "byte %llu: one value is larger than %zu MiB",
                              (unsigned long long)rd_off(r),
                              MAX_VALUE >> 20);
    return swift_error_at(r->name, r->line, "byte %llu: %s", (unsigned long long)rd_off(r), what);
}

/* Scan one JSON value starting at pos (after white space); on success [*b, *e) holds it and
 * pos is past it. Returns 0, -1 (truncated), -2 (syntax), -3 (read error). Only structure is
 * checked here; jansson checks the rest. Bytes from the value's start stay in the buffer. */
static int scan_value(struct rd *r, size_t *b, size_t *e)
{
    int c = skip_ws(r);
    if (c < 0)
        return r->err ? -3 : -1;
    if (c == '}' || c == ']' || c == ',' || c == ':')
        return -2;
    r->keep = r->pos; /* the value starts here; rd_fill moves it to 0 */
    int depth = 0;
    for (;;) {
        char *p = r->buf + r->pos, *end = r->buf + r->len;
        while (p < end) {
            char ch = *p;
            if (ch == '"') {
                char *q = p + 1;
                for (;;) {
                    while (q < end && *q != '"' && *q != '\\')
                        q++;
                    if (q < end && *q == '\\') {
                        q += 2;
                        continue;
                    }
                    break;
                }
                if (q >= end)
                    break; /* rescan this string after reading more */
                p = q + 1;
                if (depth == 0)
                    goto done;
                continue;
            }
            if (ch == '{' || ch == '[') {
                depth++;
            } else if (ch == '}' || ch == ']') {
                if (depth == 0)
                    goto done;
                if (--depth == 0) {
                    p++;
                    goto done;
                }
            } else if (ch == '\n') {
                if (depth == 0)
                    goto done;
                if (r->jsonl) {
                    r->pos = (size_t)(p - r->buf);
                    return -4;
                }
                r->line++;
            } else if (depth == 0 &&
                       (ch == ',' || ch == ' ' || ch == '\t' || ch == '\r' || ch == ':')) {
                goto done;
            }
            p++;
        }
        r->pos = (size_t)(p - r->buf);
        size_t have = r->len;
        if (!rd_fill(r)) {
            if (r->err)
                return -3;
            if (depth == 0 && r->pos == have && r->pos > r->keep) {
                *b = r->keep;
                *e = r->pos; /* a scalar ending at end of input */
                return 0;
            }
            return -1;
        }
        continue;
    done:
        r->pos = (size_t)(p - r->buf);
        *b = r->keep;
        *e = r->pos;
        return 0;
    }
}

/* ---------- the fast event scanner ---------- */

/* The loader reads a few fields of each event. Parsing a whole event with jansson (objects,
 * hash tables, a copy of every string) was ~70% of the time on Kineto traces, so events are
 * first read by this scanner, which checks the JSON grammar as it goes and keeps only the
 * fields the loader reads. It accepts a strict subset of JSON: anything else (escapes and
 * non-ASCII bytes in strings, integers of 19 or more digits, real overflow, nesting deeper than
 * 32, any syntax error) and the events whose handling needs the whole object (metadata "M"
 * events, NCCL collectives' "Collective name" args) go to jansson as before, so results and
 * error messages are those of the jansson path. tests/fuzz/fuzz_trace_load.c checks that both
 * give the same fields on every input it makes. */

static const char *const arg_keys[AK_N] = {"stream",
                                           "correlation",
                                           "device",
                                           "External id",
                                           "external id",
                                           "step",
                                           "tokens",
                                           "bytes",
                                           "blocks per SM",
                                           "est. achieved occupancy %",
                                           "allocated",
                                           "total",
                                           "Device Type",
                                           "Device Id",
                                           "Total Allocated",
                                           "Collective name"};

static const unsigned char arg_len[AK_N] = {6, 11, 6, 11, 11, 4, 6, 5, 13, 25, 9, 5, 11, 9, 15, 15};

struct fp {
    char *p, *end;
    int depth;
    long nl; /* newlines passed */
};

static inline void fp_ws(struct fp *q)
{
    while (q->p < q->end && (*q->p == ' ' || *q->p == '\t' || *q->p == '\n' || *q->p == '\r')) {
        q->nl += *q->p == '\n';
        q->p++;
    }
}

static inline int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Nonzero when one of the 8 bytes of x is '"', '\\', a control byte or >= 0x80 (exact: no
 * false positive or negative, so it only decides whether the byte loop below looks). */
static inline uint64_t special8(uint64_t x)
{
    const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
    uint64_t q = x ^ (ones * '"'), b = x ^ (ones * '\\');
    uint64_t zq = (q - ones) & ~q, zb = (b - ones) & ~b, lt = x - ones * 0x20;
    return ((zq | zb | lt) & ~x & high) | (x & high);
}

/* A string without escapes, control or non-ASCII bytes: [*s, *s + *len). */
static int fp_str(struct fp *q, char **s, size_t *len)
{
    if (q->p >= q->end || *q->p != '"')
        return -1;
    char *b = ++q->p, *p = b;
    while (q->end - p >= 8) {
        uint64_t x;
        memcpy(&x, p, 8);
        if (special8(x))
            break;
        p += 8;
    }
    for (; p < q->end; p++) {
        unsigned char ch = (unsigned char)*p;
        if (ch == '"') {
            *s = b;
            *len = (size_t)(p - b);
            q->p = p + 1;
            return 0;
        }
        if (ch == '\\' || ch < 0x20 || ch >= 0x80)
            return -1;
    }
    return -1;
}

/* A JSON number as jansson reads it: an integer (no '.', 'e', 'E'; up to 18 digits here) or a
 * real (strtod; overflow left to jansson). */
static int fp_num(struct fp *q, struct swift_an_fval *v)
{
    char *p = q->p, *e = q->end, *b = p;
    int neg = 0, real = 0;
    if (p < e && *p == '-')
        neg = 1, p++;
    if (p >= e || !is_digit(*p))
        return -1;
    char *d0 = p;
    if (*p == '0')
        p++;
    else
        while (p < e && is_digit(*p))
            p++;
    size_t nd = (size_t)(p - d0);
    if (p < e && *p == '.') {
        p++;
        if (p >= e || !is_digit(*p))
            return -1;
        while (p < e && is_digit(*p))
            p++;
        real = 1;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < e && (*p == '+' || *p == '-'))
            p++;
        if (p >= e || !is_digit(*p))
            return -1;
        while (p < e && is_digit(*p))
            p++;
        real = 1;
    }
    if (p >= e)
        return -1; /* a number always has a delimiter after it inside an object */
    if (!real) {
        if (nd > 18)
            return -1;
        int64_t x = 0;
        for (char *c = d0; c < d0 + nd; c++)
            x = x * 10 + (*c - '0');
        v->t = SWIFT_AN_FV_INT;
        v->i = neg ? -x : x;
    } else {
        char *endp;
        double d = strtod(b, &endp);
        if (endp != p || isinf(d))
            return -1;
        v->t = SWIFT_AN_FV_REAL;
        v->d = d;
    }
    q->p = p;
    return 0;
}

static int fp_lit(struct fp *q, const char *lit, size_t n)
{
    if ((size_t)(q->end - q->p) < n || memcmp(q->p, lit, n))
        return -1;
    q->p += n;
    return 0;
}

/* One value; its scalar kept in v (NULL: checked and skipped). */
static int fp_value(struct fp *q, struct swift_an_fval *v)
{
    struct swift_an_fval tmp;
    if (!v)
        v = &tmp;
    fp_ws(q);
    if (q->p >= q->end)
        return -1;
    char c = *q->p;
    if (c == '"') {
        if (fp_str(q, &v->s, &v->len) < 0)
            return -1;
        v->t = SWIFT_AN_FV_STR;
        return 0;
    }
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        if (++q->depth > 32)
            return -1;
        q->p++;
        fp_ws(q);
        if (q->p < q->end && *q->p == close) {
            q->p++;
        } else {
            for (;;) {
                if (c == '{') {
                    char *ks;
                    size_t kl;
                    fp_ws(q);
                    if (fp_str(q, &ks, &kl) < 0)
                        return -1;
                    fp_ws(q);
                    if (q->p >= q->end || *q->p != ':')
                        return -1;
                    q->p++;
                }
                if (fp_value(q, NULL) < 0)
                    return -1;
                fp_ws(q);
                if (q->p >= q->end)
                    return -1;
                if (*q->p == ',') {
                    q->p++;
                    continue;
                }
                if (*q->p != close)
                    return -1;
                q->p++;
                break;
            }
        }
        q->depth--;
        v->t = SWIFT_AN_FV_OTHER;
        return 0;
    }
    if (c == 't' || c == 'f' || c == 'n') {
        if (fp_lit(q, c == 't' ? "true" : c == 'f' ? "false" : "null", c == 'f' ? 5 : 4) < 0)
            return -1;
        v->t = SWIFT_AN_FV_OTHER;
        return 0;
    }
    return fp_num(q, v);
}

static int key_is(const char *s, size_t len, const char *k, size_t klen)
{
    return len == klen && !memcmp(s, k, klen);
}

/* The members of "args" (the '{' is next). */
static int fp_args(struct fp *q, struct swift_an_fev *f)
{
    for (int k = 0; k < AK_N; k++)
        f->a[k].t = SWIFT_AN_FV_NONE;
    q->p++;
    fp_ws(q);
    if (q->p < q->end && *q->p == '}') {
        q->p++;
        return 0;
    }
    for (;;) {
        char *ks;
        size_t kl;
        fp_ws(q);
        if (fp_str(q, &ks, &kl) < 0)
            return -1;
        fp_ws(q);
        if (q->p >= q->end || *q->p != ':')
            return -1;
        q->p++;
        struct swift_an_fval *dst = NULL;
        for (int k = 0; k < AK_N && !dst; k++)
            if (kl == arg_len[k] && ks[0] == arg_keys[k][0] && !memcmp(ks, arg_keys[k], kl))
                dst = &f->a[k];
        if (fp_value(q, dst) < 0)
            return -1;
        fp_ws(q);
        if (q->p >= q->end)
            return -1;
        if (*q->p == ',') {
            q->p++;
            continue;
        }
        if (*q->p != '}')
            return -1;
        q->p++;
        return 0;
    }
}

/* 0: *f holds the event (its strings NUL-terminated in place), *used its length in bytes and
 * *nl the newlines in it (both may be NULL); -1: leave it to jansson (nothing written). With
 * one_line, an event with a newline inside is left to jansson too (JSONL). */
static int fast_parse(char *buf, size_t len, struct swift_an_fev *f, size_t *used, long *nl,
                      int one_line)
{
    struct fp q = {buf, buf + len, 0, 0};
    struct swift_an_fval *top[] = {&f->ph, &f->name, &f->cat, &f->ts, &f->dur, &f->pid, &f->tid};
    for (size_t i = 0; i < sizeof(top) / sizeof(top[0]); i++)
        top[i]->t = SWIFT_AN_FV_NONE;
    for (int k = 0; k < AK_N; k++)
        f->a[k].t = SWIFT_AN_FV_NONE;
    f->args = 0;
    fp_ws(&q);
    if (q.p >= q.end || *q.p != '{')
        return -1;
    q.p++;
    fp_ws(&q);
    if (q.p < q.end && *q.p == '}') {
        q.p++;
    } else {
        for (;;) {
            char *ks;
            size_t kl;
            fp_ws(&q);
            if (fp_str(&q, &ks, &kl) < 0)
                return -1;
            fp_ws(&q);
            if (q.p >= q.end || *q.p != ':')
                return -1;
            q.p++;
            struct swift_an_fval *dst = NULL;
            if (key_is(ks, kl, "args", 4)) {
                fp_ws(&q);
                if (q.p < q.end && *q.p == '{') {
                    if (fp_args(&q, f) < 0)
                        return -1;
                    f->args = 1;
                } else {
                    for (int k = 0; k < AK_N; k++)
                        f->a[k].t = SWIFT_AN_FV_NONE;
                    if (fp_value(&q, NULL) < 0)
                        return -1;
                    f->args = 2;
                }
            } else {
                if (key_is(ks, kl, "ph", 2))
                    dst = &f->ph;
                else if (key_is(ks, kl, "name", 4))
                    dst = &f->name;
                else if (key_is(ks, kl, "cat", 3))
                    dst = &f->cat;
                else if (key_is(ks, kl, "ts", 2))
                    dst = &f->ts;
                else if (key_is(ks, kl, "dur", 3))
                    dst = &f->dur;
                else if (key_is(ks, kl, "pid", 3))
                    dst = &f->pid;
                else if (key_is(ks, kl, "tid", 3))
                    dst = &f->tid;
                if (fp_value(&q, dst) < 0)
                    return -1;
            }
            fp_ws(&q);
            if (q.p >= q.end)
                return -1;
            if (*q.p == ',') {
                q.p++;
                continue;
            }
            if (*q.p != '}')
                return -1;
            q.p++;
            break;
        }
    }
    /* jansson (JSON_DISABLE_EOF_CHECK) ignores what follows the value; scan_value hands the
     * value alone anyway */
    if (f->ph.t == SWIFT_AN_FV_STR && f->ph.len > 0 && f->ph.s[0] == 'M')
        return -1;
    if (f->a[AK_COLL].t != SWIFT_AN_FV_NONE)
        return -1;
    if (one_line && q.nl)
        return -1;
    if (used)
        *used = (size_t)(q.p - buf);
    if (nl)
        *nl = q.nl;
    for (size_t i = 0; i < sizeof(top) / sizeof(top[0]); i++)
        if (top[i]->t == SWIFT_AN_FV_STR)
            top[i]->s[top[i]->len] = 0; /* the closing quote */
    return 0;
}

/* The same fields from a jansson object (the fallback path, and the fuzz target's check). */
static void fval_of(json_t *v, struct swift_an_fval *f)
{
    if (!v)
        f->t = SWIFT_AN_FV_NONE;
    else if (json_is_integer(v))
        f->t = SWIFT_AN_FV_INT, f->i = json_integer_value(v);
    else if (json_is_real(v))
        f->t = SWIFT_AN_FV_REAL, f->d = json_real_value(v);
    else if (json_is_string(v))
        f->t = SWIFT_AN_FV_STR, f->s = (char *)json_string_value(v), f->len = json_string_length(v);
    else
        f->t = SWIFT_AN_FV_OTHER;
}

void swift_an_fev_of_json(json_t *e, struct swift_an_fev *f)
{
    fval_of(json_object_get(e, "ph"), &f->ph);
    fval_of(json_object_get(e, "name"), &f->name);
    fval_of(json_object_get(e, "cat"), &f->cat);
    fval_of(json_object_get(e, "ts"), &f->ts);
    fval_of(json_object_get(e, "dur"), &f->dur);
    fval_of(json_object_get(e, "pid"), &f->pid);
    fval_of(json_object_get(e, "tid"), &f->tid);
    json_t *args = json_object_get(e, "args");
    f->args = !args ? 0 : json_is_object(args) ? 1 : 2;
    for (int k = 0; k < AK_N; k++)
        fval_of(f->args == 1 ? json_object_get(args, arg_keys[k]) : NULL, &f->a[k]);
}

int swift_an_fev_parse(char *buf, size_t len, struct swift_an_fev *f)
{
    return fast_parse(buf, len, f, NULL, NULL, 0);
}

/* ---------- the streaming walker ---------- */

/* Events are parsed by jansson in batches, several threads at a time (OpenMP), then handed
 * to the callback one by one in file order; the batch has a ceiling in bytes and events. */
#define BATCH_EVENTS 4096
#define BATCH_BYTES ((size_t)8 << 20)

struct pending {
    size_t at, len; /* in the batch buffer */
    uint64_t off;   /* stream offset */
    long line;
    json_t *v;
    json_error_t err;
    int fast; /* fe holds the event (the fast scanner read it) */
    struct swift_an_fev fe;
};

typedef int (*fast_event_fn)(void *ctx, const struct swift_an_fev *fe, uint64_t off, long line);

struct walker {
    struct rd *r;
    swift_an_event_fn fn;
    fast_event_fn fast_fn; /* NULL: every event through jansson */
    swift_an_meta_fn meta_fn;
    void *ctx;
    long count;
    struct pending *pend;
    size_t npend;
    char *bbuf;
    size_t blen, bcap;
};

static int scan_fail(struct rd *r, int rc, const char *where)
{
    char msg[256];
    if (r->err)
        return rd_report(r, where);
    if (rc == -1)
        snprintf(msg, sizeof(msg), "truncated JSON (end of input inside %s)", where);
    else if (rc == -4)
        snprintf(msg, sizeof(msg), "line ends inside a JSON value (%s)", where);
    else if (rc == -3)
        return rd_report(r, where);
    else
        snprintf(msg, sizeof(msg), "invalid JSON in %s", where);
    return rd_report(r, msg);
}

/* Parse every pending event, then deliver them in order. */
static int flush_events(struct walker *w)
{
    size_t n = w->npend;
    if (!n)
        return 0;
    struct pending *pd = w->pend;
    const char *base = w->bbuf;
    long i;
    /* threads pay off only with cores to spare (2-core CI runs single-threaded) */
    static int par = -1;
    if (par < 0)
        par = sysconf(_SC_NPROCESSORS_ONLN) >= 4;
#pragma omp parallel for schedule(dynamic, 64) if (par && n >= 256)
    for (i = 0; i < (long)n; i++) {
        pd[i].fast =
            w->fast_fn && fast_parse(w->bbuf + pd[i].at, pd[i].len, &pd[i].fe, NULL, NULL, 0) == 0;
        pd[i].v = pd[i].fast ? NULL
                             : json_loadb(base + pd[i].at,
                                          pd[i].len,
                                          JSON_DISABLE_EOF_CHECK | JSON_ALLOW_NUL,
                                          &pd[i].err);
    }
    int rc = 0;
    for (size_t k = 0; k < n; k++) {
        json_t *v = pd[k].v;
        if (rc == 0) {
            if (pd[k].fast) {
                if (w->fast_fn(w->ctx, &pd[k].fe, pd[k].off, pd[k].line) < 0)
                    rc = -1;
            } else if (!v)
                rc = swift_error_at(
                    w->r->name,
                    pd[k].line + pd[k].err.line - 1,
                    "byte %llu: %s",
                    (unsigned long long)(pd[k].off + (uint64_t)(pd[k].err.position > 0
                                                                    ? pd[k].err.position - 1
                                                                    : 0)),
                    pd[k].err.text);
            else if (!json_is_object(v))
                rc = swift_error_at(w->r->name,
                                    pd[k].line,
                                    "byte %llu: trace event is not an object",
                                    (unsigned long long)pd[k].off);
            else if (w->fn(w->ctx, v, pd[k].off, pd[k].line) < 0)
                rc = -1;
            w->count++;
        }
        json_decref(v);
    }
    w->npend = 0;
    w->blen = 0;
    return rc;
}

static int give_event(struct walker *w, size_t b, size_t e, long line)
{
    struct rd *r = w->r;
    size_t len = e - b;
    if (w->npend == BATCH_EVENTS || (w->blen + len > BATCH_BYTES && w->npend)) {
        if (flush_events(w) < 0)
            return -1;
    }
    if (!w->pend) {
        w->pend = calloc(BATCH_EVENTS, sizeof(*w->pend));
        if (!w->pend)
            abort();
    }
    if (w->blen + len > w->bcap) {
        w->bcap = w->blen + len > BATCH_BYTES ? w->blen + len : BATCH_BYTES;
        w->bbuf = xrealloc(w->bbuf, w->bcap);
    }
    memcpy(w->bbuf + w->blen, r->buf + b, len);
    w->pend[w->npend++] =
        (struct pending){.at = w->blen, .len = len, .off = r->base + b, .line = line};
    w->blen += len;
    return 0;
}

/* The fast scanner straight on the read buffer: an event that lies whole in the buffer is
 * read and handed over without a copy, after the events waiting for jansson before it (file
 * order). Returns 1 (pos is past it), 0 (not taken: scan_value and the batch take it), or -1
 * (an earlier event or this one failed). */
static int fast_event(struct walker *w, long line)
{
    struct rd *r = w->r;
    if (!w->fast_fn)
        return 0;
    /* keep a whole event ahead (one read per MiB as before) */
    while (r->len - r->pos < 65536 && !r->eof && !r->err) {
        r->keep = r->pos;
        if (!rd_fill(r))
            break;
    }
    if (r->pos >= r->len || r->buf[r->pos] != '{')
        return 0;
    struct swift_an_fev fe;
    size_t used;
    long nl;
    if (fast_parse(r->buf + r->pos, r->len - r->pos, &fe, &used, &nl, r->jsonl) < 0)
        return 0;
    if (w->npend && flush_events(w) < 0)
        return -1;
    uint64_t off = r->base + r->pos;
    r->pos += used;
    r->line += nl;
    w->count++;
    return w->fast_fn(w->ctx, &fe, off, line) < 0 ? -1 : 1;
}

/* Elements of an array whose '[' was just consumed. */
static int walk_array(struct walker *w)
{
    struct rd *r = w->r;
    int c = skip_ws(r);
    if (c == ']') {
        r->pos++;
        return 0;
    }
    for (;;) {
        size_t b, e;
        long line = r->line;
        int c0 = skip_ws(r);
        line = r->line;
        if (c0 < 0)
            return scan_fail(r, -1, "traceEvents");
        int f = fast_event(w, line);
        if (f < 0)
            return -1;
        if (!f) {
            int rc = scan_value(r, &b, &e);
            if (rc < 0)
                return scan_fail(r, rc, "traceEvents");
            if (give_event(w, b, e, line) < 0)
                return -1;
        }
        r->keep = r->pos;
        c = skip_ws(r);
        if (c == ',') {
            r->pos++;
            continue;
        }
        if (c == ']') {
            r->pos++;
            return 0;
        }
        return scan_fail(r, c < 0 ? -1 : -2, "traceEvents");
    }
}

static int walk_jsonl(struct walker *w)
{
    struct rd *r = w->r;
    r->jsonl = 1;
    for (;;) {
        int c = skip_ws(r);
        if (c < 0)
            return 0;
        long line = r->line;
        size_t b, e;
        int f = fast_event(w, line);
        if (f < 0)
            return -1;
        if (f) {
            r->keep = r->pos;
            continue;
        }
        int rc = scan_value(r, &b, &e);
        if (rc == -1) {
            /* a writer killed mid-line leaves a partial last line: keep what came before */
            swift_warn(
                "%s:%ld: truncated last line ignored (was the writer killed?)", r->name, line);
            return 0;
        }
        if (rc < 0)
            return scan_fail(r, rc, "a JSON line");
        if (give_event(w, b, e, line) < 0)
            return -1;
        r->keep = r->pos;
    }
}

static int is_event_key(const char *k)
{
    return !strcmp(k, "ph") || !strcmp(k, "name") || !strcmp(k, "cat") || !strcmp(k, "pid") ||
           !strcmp(k, "tid") || !strcmp(k, "ts") || !strcmp(k, "args") || !strcmp(k, "dur");
}

/* At a '{': does the object start with an event key ("ph", "ts", ...)? Looks ahead without
 * consuming anything. */
static int first_key_is_event(struct rd *r)
{
    while (r->len - r->pos < 256 && rd_fill(r))
        ;
    size_t i = r->pos + 1;
    while (i < r->len &&
           (r->buf[i] == ' ' || r->buf[i] == '\n' || r->buf[i] == '\t' || r->buf[i] == '\r'))
        i++;
    if (i >= r->len || r->buf[i] != '"')
        return 0;
    char key[16];
    size_t k = 0;
    for (i++; i < r->len && r->buf[i] != '"' && k < sizeof(key) - 1; i++)
        key[k++] = r->buf[i];
    key[k] = 0;
    return is_event_key(key);
}

static int walk(struct walker *w, int jsonl)
{
    struct rd *r = w->r;
    if (jsonl)
        return walk_jsonl(w);
    int c = skip_ws(r);
    if (c < 0) {
        if (r->err)
            return rd_report(r, "reading");
        return rd_report(r, "empty file");
    }
    if (c == '[') {
        r->pos++;
        return walk_array(w);
    }
    if (c != '{')
        return rd_report(r, "not a JSON trace (expected '{' or '[')");
    if (first_key_is_event(r))
        return walk_jsonl(w); /* one event per line under a .json name */
    r->pos++;
    int seen_events = 0;
    for (;;) {
        c = skip_ws(r);
        if (c == '}') {
            r->pos++;
            break;
        }
        if (c != '"')
            return scan_fail(r, c < 0 ? -1 : -2, "the top-level object");
        size_t kb, ke;
        int rc = scan_value(r, &kb, &ke);
        if (rc < 0)
            return scan_fail(r, rc, "the top-level object");
        char key[128];
        size_t kl = ke - kb - 2 < sizeof(key) - 1 ? ke - kb - 2 : sizeof(key) - 1;
        memcpy(key, r->buf + kb + 1, kl);
        key[kl] = 0;
        c = skip_ws(r);
        if (c != ':')
            return scan_fail(r, c < 0 ? -1 : -2, "the top-level object");
        r->pos++;
        if (!strcmp(key, "traceEvents")) {
            seen_events = 1;
            c = skip_ws(r);
            if (c != '[')
                return rd_report(r, "traceEvents is not an array");
            r->pos++;
            if (walk_array(w) < 0)
                return -1;
        } else {
            size_t b, e;
            long line = r->line;
            rc = scan_value(r, &b, &e);
            if (rc < 0)
                return scan_fail(r, rc, key);
            if (w->meta_fn && e - b <= MAX_META) {
                json_error_t jerr;
                json_t *v = json_loadb(r->buf + b, e - b, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
                if (!v)
                    return swift_error_at(r->name,
                                          line,
                                          "byte %llu: in \"%s\": %s",
                                          (unsigned long long)(r->base + b),
                                          key,
                                          jerr.text);
                w->meta_fn(w->ctx, key, v);
                json_decref(v);
            }
        }
        r->keep = r->pos;
        c = skip_ws(r);
        if (c == ',') {
            r->pos++;
            continue;
        }
        if (c == '}') {
            r->pos++;
            break;
        }
        return scan_fail(r, c < 0 ? -1 : -2, "the top-level object");
    }
    c = skip_ws(r);
    if (c >= 0)
        return rd_report(r, "unexpected data after the end of the JSON trace");
    if (!seen_events)
        return rd_report(r, "no \"traceEvents\" array: not a Chrome/Kineto trace");
    if (r->err)
        return rd_report(r, "reading");
    return 0;
}

static int name_is_jsonl(const char *name)
{
    return strstr(name, ".jsonl") != NULL;
}

static int name_is_gz(const char *name)
{
    size_t l = strlen(name);
    return l > 3 && !strcmp(name + l - 3, ".gz");
}

static int stream_file(const char *path, swift_an_event_fn fn, fast_event_fn fast_fn,
                       swift_an_meta_fn meta_fn, void *ctx)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return swift_error_errno("cannot open '%s'", path);
    unsigned char magic[2] = {0, 0};
    ssize_t m = pread(fd, magic, 2, 0);
    int gzmagic = m == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    if (name_is_gz(path) && !gzmagic) {
        close(fd);
        return swift_error_at(path, 0, "byte 0: not a gzip file (no 1f 8b magic)");
    }
    gzFile gz = gzdopen(fd, "rb");
    if (!gz) {
        close(fd);
        return swift_error("cannot open '%s'", path);
    }
    gzbuffer(gz, 256 * 1024);
    struct rd r = {.name = path, .gz = gz, .line = 1};
    struct walker w = {.r = &r, .fn = fn, .fast_fn = fast_fn, .meta_fn = meta_fn, .ctx = ctx};
    json_object_seed(0); /* before threads create objects */
    int rc = walk(&w, name_is_jsonl(path));
    rc = rc == 0 ? flush_events(&w) : rc;
    gzclose(gz);
    free(r.buf);
    free(w.pend);
    free(w.bbuf);
    return rc;
}

int swift_an_stream_file(const char *path, swift_an_event_fn fn, swift_an_meta_fn meta_fn,
                         void *ctx)
{
    return stream_file(path, fn, NULL, meta_fn, ctx);
}

static int stream_buffer(const char *name, const void *data, size_t len, swift_an_event_fn fn,
                         fast_event_fn fast_fn, swift_an_meta_fn meta_fn, void *ctx)
{
    struct rd r = {.name = name, .mem = data, .memlen = len, .line = 1};
    struct walker w = {.r = &r, .fn = fn, .fast_fn = fast_fn, .meta_fn = meta_fn, .ctx = ctx};
    json_object_seed(0);
    int rc = walk(&w, name_is_jsonl(name));
    rc = rc == 0 ? flush_events(&w) : rc;
    free(r.buf);
    free(w.pend);
    free(w.bbuf);
    return rc;
}

int swift_an_stream_buffer(const char *name, const void *data, size_t len, swift_an_event_fn fn,
                           swift_an_meta_fn meta_fn, void *ctx)
{
    return stream_buffer(name, data, len, fn, NULL, meta_fn, ctx);
}

/* ---------- events into records ---------- */

struct loadctx {
    struct swift_an_set *set;
    struct swift_an_source *s;
    uint32_t cat_user_ann, cat_cpu_op;
};

static int64_t int_arg(json_t *args, const char *k, int64_t dflt)
{
    json_t *v = json_object_get(args, k);
    if (json_is_integer(v))
        return json_integer_value(v);
    if (json_is_real(v))
        return (int64_t)json_real_value(v);
    return dflt;
}

static uint32_t str_arg(struct swift_an_set *set, json_t *args, const char *k)
{
    json_t *v = json_object_get(args, k);
    if (json_is_string(v))
        return swift_an_intern(&set->strs, json_string_value(v), json_string_length(v));
    if (v) {
        char *d = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        uint32_t id = d ? swift_an_intern(&set->strs, d, strlen(d)) : SWIFT_AN_NONE;
        free(d);
        return id;
    }
    return SWIFT_AN_NONE;
}

static void set_str(char **dst, const char *s)
{
    free(*dst);
    *dst = s ? strdup(s) : NULL;
}

static void on_meta(void *vctx, const char *key, json_t *v)
{
    struct loadctx *c = vctx;
    struct swift_an_source *s = c->s;
    if (!s->meta)
        s->meta = json_object();
    json_object_set(s->meta, key, v);
    if (!strcmp(key, "distributedInfo")) {
        json_t *rk = json_object_get(v, "rank"), *ws = json_object_get(v, "world_size");
        if (json_is_integer(rk))
            s->rank = (int)json_integer_value(rk);
        if (json_is_integer(ws))
            s->world_size = (int)json_integer_value(ws);
    } else if (!strcmp(key, "deviceProperties") && json_is_array(v)) {
        size_t i;
        json_t *d;
        json_array_foreach(v, i, d)
        {
            json_t *id = json_object_get(d, "id"), *mem = json_object_get(d, "totalGlobalMem");
            if (json_is_integer(id) && json_integer_value(id) >= 0 &&
                json_integer_value(id) < SWIFT_AN_MAX_DEV && json_is_number(mem))
                s->mem_total[json_integer_value(id)] = json_number_value(mem);
        }
    } else if (!strcmp(key, "displayTimeUnit") && json_is_string(v)) {
        set_str(&s->time_unit, json_string_value(v));
    } else if (!strcmp(key, "traceName") && json_is_string(v)) {
        set_str(&s->trace_name, json_string_value(v));
    } else if (!strcmp(key, "baseTimeNanoseconds") && json_is_number(v)) {
        s->base_time_ns = json_number_value(v);
    } else if ((!strcmp(key, "hostname") || !strcmp(key, "host_name")) && json_is_string(v)) {
        set_str(&s->host, json_string_value(v));
    }
}

static void swift_meta(struct swift_an_source *s, json_t *a)
{
    json_t *v;
    s->kind = SWIFT_AN_SWIFT;
    if (json_is_string(v = json_object_get(a, "stage")))
        set_str(&s->stage, json_string_value(v));
    if (json_is_string(v = json_object_get(a, "host")))
        set_str(&s->host, json_string_value(v));
    if (json_is_integer(v = json_object_get(a, "rank")))
        s->rank = (int)json_integer_value(v);
    if (json_is_integer(v = json_object_get(a, "world_size")))
        s->world_size = (int)json_integer_value(v);
    if (json_is_integer(v = json_object_get(a, "pid")))
        s->pid = json_integer_value(v);
    if (json_is_number(v = json_object_get(a, "clock_offset_us")))
        s->clock_offset_us = json_number_value(v);
    if (json_is_array(v = json_object_get(a, "argv"))) {
        json_decref(s->argv);
        s->argv = json_incref(v);
    }
}

static void note_memory(struct swift_an_source *s, int dev, double bytes, double ts)
{
    if (dev < 0 || dev >= SWIFT_AN_MAX_DEV)
        return;
    if (bytes > s->mem_peak[dev]) {
        s->mem_peak[dev] = bytes;
        s->mem_peak_ts[dev] = ts;
    }
}

static int fv_num_of(const struct swift_an_fval *v, double *out)
{
    if (v->t == SWIFT_AN_FV_INT) {
        *out = (double)v->i;
        return 0;
    }
    if (v->t == SWIFT_AN_FV_REAL) {
        *out = v->d;
        return 1;
    }
    return -1;
}

static int fv_is_num(const struct swift_an_fval *v)
{
    return v->t == SWIFT_AN_FV_INT || v->t == SWIFT_AN_FV_REAL;
}

static double fv_num(const struct swift_an_fval *v)
{
    return v->t == SWIFT_AN_FV_INT ? (double)v->i : v->d;
}

static int64_t fv_int(const struct swift_an_fval *v, int64_t dflt)
{
    if (v->t == SWIFT_AN_FV_INT)
        return v->i;
    if (v->t == SWIFT_AN_FV_REAL)
        return (int64_t)v->d;
    return dflt;
}

/* pid/tid may be numbers or strings ("stream 7", "Spans"). */
static int64_t fv_id(struct swift_an_set *set, const struct swift_an_fval *v)
{
    if (v->t == SWIFT_AN_FV_INT)
        return v->i;
    if (v->t == SWIFT_AN_FV_REAL)
        return (int64_t)v->d;
    if (v->t == SWIFT_AN_FV_STR) {
        const char *s = v->s;
        char *end;
        long long n = strtoll(s, &end, 10);
        if (end != s && !*end)
            return n;
        if (!strncmp(s, "stream ", 7)) {
            n = strtoll(s + 7, &end, 10);
            if (end != s + 7)
                return n;
        }
        return -1000000 - (int64_t)swift_an_intern(&set->strs, s, strlen(s));
    }
    return -1;
}

/* One event from its fields; e is the jansson object when jansson read it (always so for "M"
 * events and collectives: the fast scanner leaves those to jansson), else NULL. */
static int on_fields(struct loadctx *c, const struct swift_an_fev *f, json_t *e, uint64_t off,
                     long line)
{
    struct swift_an_set *set = c->set;
    struct swift_an_source *s = c->s;
    const struct swift_an_fval *A = f->a;
    s->nevents++;
    if (f->ph.t != SWIFT_AN_FV_STR)
        return swift_error_at(
            s->path, line, "byte %llu: event without a string \"ph\"", (unsigned long long)off);
    const char *p = f->ph.s;
    if (f->args == 2)
        return swift_error_at(
            s->path, line, "byte %llu: \"args\" is not an object", (unsigned long long)off);
    if (f->name.t != SWIFT_AN_FV_NONE && f->name.t != SWIFT_AN_FV_STR)
        return swift_error_at(
            s->path, line, "byte %llu: \"name\" is not a string", (unsigned long long)off);
    const char *nm = f->name.t == SWIFT_AN_FV_STR ? f->name.s : "";
    if (p[0] == 'M') {
        json_t *args = e ? json_object_get(e, "args") : NULL;
        if (!strcmp(nm, "swift_meta") && args)
            swift_meta(s, args);
        else if (!strcmp(nm, "process_name") && args &&
                 json_is_string(json_object_get(args, "name")) && !s->process_name)
            set_str(&s->process_name, json_string_value(json_object_get(args, "name")));
        return 0;
    }
    double ts = 0;
    if (f->ts.t == SWIFT_AN_FV_NONE) {
        if (p[0] == 'X' || p[0] == 'B' || p[0] == 'E' || p[0] == 'C' || p[0] == 'i' || p[0] == 'I')
            return swift_error_at(s->path,
                                  line,
                                  "byte %llu: event \"%.80s\" without ts",
                                  (unsigned long long)off,
                                  nm);
        return 0;
    }
    int real = fv_num_of(&f->ts, &ts);
    if (real < 0)
        return swift_error_at(
            s->path, line, "byte %llu: \"ts\" is not a number", (unsigned long long)off);
    if (!isfinite(ts))
        return swift_error_at(
            s->path, line, "byte %llu: \"ts\" is not finite", (unsigned long long)off);
    if (p[0] == 'i' || p[0] == 'I') {
        if (!strcmp(nm, "[memory]") && f->args == 1) {
            int64_t dt = fv_int(&A[AK_DEVTYPE], 0);
            if (fv_is_num(&A[AK_TOTALLOC]) && dt == 1)
                note_memory(s, (int)fv_int(&A[AK_DEVID], 0), fv_num(&A[AK_TOTALLOC]), ts);
        }
        return 0;
    }
    if (p[0] == 'C') {
        /* our memory counters: {"name":"memory","args":{"allocated":bytes,"device":n}} */
        if (f->args == 1 && (!strcmp(nm, "memory") ||
                             (f->cat.t == SWIFT_AN_FV_STR && !strcmp(f->cat.s, "memory")))) {
            int dev = (int)fv_int(&A[AK_DEVICE], 0);
            if (fv_is_num(&A[AK_ALLOCATED]))
                note_memory(s, dev, fv_num(&A[AK_ALLOCATED]), ts);
            if (fv_is_num(&A[AK_TOTAL]) && dev >= 0 && dev < SWIFT_AN_MAX_DEV)
                s->mem_total[dev] = fv_num(&A[AK_TOTAL]);
        }
        return 0;
    }
    if (p[0] != 'X')
        return 0; /* flows, async and B/E pairs are not analysed (merge passes them on) */
    double dur = 0;
    if (f->dur.t == SWIFT_AN_FV_NONE)
        return swift_error_at(s->path,
                              line,
                              "byte %llu: complete event \"%.80s\" without dur",
                              (unsigned long long)off,
                              nm);
    if (fv_num_of(&f->dur, &dur) < 0 || !isfinite(dur))
        return swift_error_at(
            s->path, line, "byte %llu: \"dur\" is not a number", (unsigned long long)off);
    if (f->cat.t != SWIFT_AN_FV_NONE && f->cat.t != SWIFT_AN_FV_STR)
        return swift_error_at(
            s->path, line, "byte %llu: \"cat\" is not a string", (unsigned long long)off);
    int has_cat = f->cat.t == SWIFT_AN_FV_STR;
    if (real)
        s->ts_real = 1;
    if (set->max_events && set->kept >= set->max_events)
        return swift_error_at(s->path,
                              line,
                              "byte %llu: more than %zu events kept in all",
                              (unsigned long long)off,
                              set->max_events);
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 4096;
        s->ev = xrealloc(s->ev, s->cap * sizeof(*s->ev));
    }
    set->kept++;
    struct swift_an_ev *ev = &s->ev[s->n++];
    memset(ev, 0, sizeof(*ev));
    ev->ts = ts;
    ev->dur = dur;
    ev->name = swift_an_intern(&set->strs, nm, f->name.t == SWIFT_AN_FV_STR ? f->name.len : 0);
    ev->cat = has_cat ? swift_an_intern(&set->strs, f->cat.s, f->cat.len) : SWIFT_AN_NONE;
    if (s->kind == SWIFT_AN_SWIFT && has_cat && !swift_trace_category_known(f->cat.s)) {
        if (s->unknown_cat++ == 0)
            swift_warn("%s:%ld: byte %llu: unknown category \"%.40s\" (see docs/trace-schema.md)",
                       s->path,
                       line,
                       (unsigned long long)off,
                       f->cat.s);
    }
    ev->pid = fv_id(set, &f->pid);
    ev->tid = fv_id(set, &f->tid);
    ev->corr = -1;
    ev->ext = -1;
    ev->stream = -1;
    ev->step = -1;
    ev->comm = SWIFT_AN_NONE;
    ev->blocks_per_sm = -1;
    ev->occupancy = -1;
    ev->dev = -1;
    if (f->args != 1)
        return 0;
    if (fv_is_num(&A[AK_STREAM]))
        ev->stream = (int32_t)fv_num(&A[AK_STREAM]);
    if (fv_is_num(&A[AK_CORR]))
        ev->corr = (int64_t)fv_num(&A[AK_CORR]);
    if (A[AK_DEVICE].t == SWIFT_AN_FV_INT && A[AK_DEVICE].i >= 0 &&
        A[AK_DEVICE].i < SWIFT_AN_MAX_DEV)
        ev->dev = (int16_t)A[AK_DEVICE].i;
    ev->ext = fv_int(&A[AK_EXT], fv_int(&A[AK_EXT_LC], -1));
    if (s->kind == SWIFT_AN_SWIFT) {
        ev->step = (int32_t)fv_int(&A[AK_STEP], -1);
        ev->aux = fv_int(&A[AK_TOKENS], 0);
    } else {
        ev->aux = fv_int(&A[AK_BYTES], 0);
    }
    if (fv_is_num(&A[AK_BPS]))
        ev->blocks_per_sm = (float)fv_num(&A[AK_BPS]);
    if (fv_is_num(&A[AK_OCC]))
        ev->occupancy = (float)fv_num(&A[AK_OCC]);
    if (A[AK_COLL].t != SWIFT_AN_FV_NONE && e) {
        json_t *args = json_object_get(e, "args");
        if (s->ncomm == s->capcomm) {
            s->capcomm = s->capcomm ? s->capcomm * 2 : 64;
            s->comm = xrealloc(s->comm, s->capcomm * sizeof(*s->comm));
        }
        struct swift_an_comm *cm = &s->comm[s->ncomm];
        cm->collective = str_arg(set, args, "Collective name");
        cm->dtype = str_arg(set, args, "dtype");
        cm->in_split = str_arg(set, args, "In split size");
        cm->out_split = str_arg(set, args, "Out split size");
        cm->pg_name = str_arg(set, args, "Process Group Name");
        cm->pg_desc = str_arg(set, args, "Process Group Description");
        cm->pg_ranks = str_arg(set, args, "Process Group Ranks");
        cm->in_nelems = int_arg(args, "In msg nelems", -1);
        cm->out_nelems = int_arg(args, "Out msg nelems", -1);
        cm->group_size = int_arg(args, "Group size", -1);
        ev->comm = (uint32_t)s->ncomm++;
    }
    return 0;
}

static int on_event(void *vctx, json_t *e, uint64_t off, long line)
{
    struct swift_an_fev f;
    swift_an_fev_of_json(e, &f);
    return on_fields(vctx, &f, e, off, line);
}

static int on_fast_event(void *vctx, const struct swift_an_fev *f, uint64_t off, long line)
{
    return on_fields(vctx, f, NULL, off, line);
}

/* ---------- sources ---------- */

void swift_an_set_init(struct swift_an_set *set)
{
    memset(set, 0, sizeof(*set));
}

static void source_release(struct swift_an_source *s)
{
    free(s->path);
    free(s->host);
    free(s->stage);
    free(s->process_name);
    free(s->trace_name);
    free(s->time_unit);
    json_decref(s->argv);
    json_decref(s->meta);
    free(s->ev);
    free(s->comm);
    memset(s, 0, sizeof(*s));
}

void swift_an_set_release(struct swift_an_set *set)
{
    for (size_t i = 0; i < set->n; i++)
        source_release(&set->src[i]);
    free(set->src);
    for (uint32_t i = 0; i < set->strs.n; i++)
        free(set->strs.str[i]);
    free(set->strs.str);
    free(set->strs.slot);
    memset(set, 0, sizeof(*set));
}

int swift_an_is_trace_name(const char *name)
{
    static const char *const ends[] = {".json", ".json.gz", ".jsonl", ".jsonl.gz", NULL};
    size_t l = strlen(name);
    for (int i = 0; ends[i]; i++) {
        size_t k = strlen(ends[i]);
        if (l > k && !strcmp(name + l - k, ends[i]))
            return 1;
    }
    return 0;
}

/* Rank from the file name when the trace does not say: "rank-3", "rank3", "-r3.", "worker3". */
static int rank_from_name(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    static const char *const pats[] = {"rank-", "rank_", "rank", "-r", "worker", NULL};
    for (int i = 0; pats[i]; i++) {
        const char *p = strstr(base, pats[i]);
        if (!p)
            continue;
        p += strlen(pats[i]);
        if (*p < '0' || *p > '9')
            continue;
        long v = strtol(p, NULL, 10);
        if (v >= 0 && v < 1000000)
            return (int)v;
    }
    return -1;
}

static struct swift_an_source *new_source(struct swift_an_set *set, const char *path)
{
    if (set->n == set->cap) {
        set->cap = set->cap ? set->cap * 2 : 8;
        set->src = xrealloc(set->src, set->cap * sizeof(*set->src));
    }
    struct swift_an_source *s = &set->src[set->n];
    memset(s, 0, sizeof(*s));
    s->path = strdup(path);
    s->kind = SWIFT_AN_KINETO;
    s->rank = -1;
    s->pid = -1;
    return s;
}

static int finish_source(struct swift_an_set *set, struct swift_an_source *s, int rc)
{
    if (rc < 0) {
        set->kept -= s->n;
        source_release(s);
        set->nfailed++;
        return -1;
    }
    if (s->rank < 0)
        s->rank = rank_from_name(s->path);
    set->n++;
    return 0;
}

static int load_file(struct swift_an_set *set, const char *path)
{
    struct swift_an_source *s = new_source(set, path);
    if (name_is_jsonl(path))
        s->kind = SWIFT_AN_SWIFT;
    struct loadctx c = {.set = set, .s = s};
    int rc = stream_file(path, on_event, on_fast_event, on_meta, &c);
    return finish_source(set, s, rc);
}

int swift_an_load_buffer(struct swift_an_set *set, const char *name, const void *data, size_t len)
{
    struct swift_an_source *s = new_source(set, name);
    if (name_is_jsonl(name))
        s->kind = SWIFT_AN_SWIFT;
    struct loadctx c = {.set = set, .s = s};
    int rc = stream_buffer(name, data, len, on_event, on_fast_event, on_meta, &c);
    s->bytes = len;
    return finish_source(set, s, rc);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int swift_an_load_path(struct swift_an_set *set, const char *path, int flags)
{
    struct stat st;
    if (stat(path, &st) < 0)
        return swift_error_errno("cannot open '%s'", path);
    if (!S_ISDIR(st.st_mode)) {
        if (load_file(set, path) < 0)
            return 0;
        set->src[set->n - 1].bytes = (uint64_t)st.st_size;
        return 1;
    }
    DIR *d = opendir(path);
    if (!d)
        return swift_error_errno("cannot open directory '%s'", path);
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char *full = swift_path_join(path, de->d_name);
        int isdir = swift_is_dir(full);
        if ((isdir && (flags & SWIFT_AN_LOAD_RECURSE)) ||
            (!isdir && swift_an_is_trace_name(de->d_name))) {
            if (n == cap) {
                cap = cap ? cap * 2 : 16;
                names = xrealloc(names, cap * sizeof(*names));
            }
            names[n++] = full;
        } else {
            free(full);
        }
    }
    closedir(d);
    swift_an_sort(names, n, sizeof(*names), cmp_str);
    int total = 0;
    for (size_t i = 0; i < n; i++) {
        int r = swift_an_load_path(set, names[i], flags);
        if (r > 0)
            total += r;
        free(names[i]);
    }
    free(names);
    return total;
}

int swift_an_looks_like_trace(const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return 0;
    char buf[65536];
    size_t n = fread(buf, 1, sizeof(buf) - 1, fp);
    fclose(fp);
    buf[n] = 0;
    size_t i = 0;
    while (i < n && (buf[i] == ' ' || buf[i] == '\n' || buf[i] == '\t' || buf[i] == '\r'))
        i++;
    if (i < n && buf[i] == '[')
        return 1;
    return strstr(buf + i, "\"traceEvents\"") || strstr(buf + i, "\"ph\"");
}
