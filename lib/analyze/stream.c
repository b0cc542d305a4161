/*
 * analyze/stream — trace files as a stream of events: a byte reader over gzip, plain files or
 * memory, a structural scanner that cuts one JSON value at a time, and the walker that hands
 * every element of traceEvents (or every JSONL line) to the fast scanner (scan.c) or, in
 * parallel batches, to jansson, in file order. See lib/analyze/load.h (swift_an_stream_file).
 */
#include "lib/analyze/internal.h"
#include "lib/core/alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "lib/core/banned.h"

#define CHUNK (1u << 20)
#define MAX_VALUE ((size_t)256 << 20) /* one event or one top-level value */
#define MAX_META ((size_t)16 << 20)   /* top-level values kept as metadata */

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
        r->buf = swift_xrealloc(r->buf, r->cap + 1);
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
                    while (q < end && *q != '"' && *q != '\\' && !(*q == '\n' && r->jsonl))
                        q++;
                    if (q < end && *q == '\\') {
                        if (q + 1 >= end) {
                            q = end;
                            break;
                        }
                        if (q[1] == '\n' && r->jsonl)
                            break;
                        q += 2;
                        continue;
                    }
                    break;
                }
                if (r->jsonl && q < end && *q != '"') {
                    if (*q == '\\')
                        q++;
                    if (q < end) {
                        r->pos = (size_t)(q - r->buf);
                        return -4; /* the line ends inside a string */
                    }
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

struct walker {
    struct rd *r;
    swift_an_event_fn fn;
    swift_an_fast_fn fast_fn; /* NULL: every event through jansson */
    swift_an_meta_fn meta_fn;
    void *ctx;
    long count;
    struct pending *pend;
    size_t npend;
    char *bbuf;
    size_t blen, bcap;
    struct swift_an_damage *dmg; /* JSONL: bad lines counted here (NULL: skipped silently) */
};

int swift_an_damage_note(struct swift_an_damage *d, const char *path, long line, const char *fmt,
                         ...)
{
    if (!d)
        return 0;
    if (d->bad < SWIFT_AN_BAD_SHOWN) {
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        d->first_bad[d->bad] = line;
        swift_error_at(path, line, "%s (line skipped)", msg);
    }
    d->bad++;
    return 0;
}

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

/* An event that cannot be read: a bad line skipped in JSONL (returns 0), else the file's
 * error (-1). */
static int bad_event(struct walker *w, long line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int bad_event(struct walker *w, long line, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (w->r->jsonl)
        return swift_an_damage_note(w->dmg, w->r->name, line, "%s", msg);
    return swift_error_at(w->r->name, line, "%s", msg);
}

/* perrank.c's pool workers read one file each: no threads of their own inside */
static _Thread_local int stream_serial;

void swift_an_stream_serial(int on)
{
    stream_serial = on;
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
    static atomic_int cores4 = -1;
    int par = atomic_load(&cores4);
    if (par < 0) {
        par = sysconf(_SC_NPROCESSORS_ONLN) >= 4;
        atomic_store(&cores4, par);
    }
    par = par && !stream_serial;
#pragma omp parallel for schedule(dynamic, 64) if (par && n >= 256)
    for (i = 0; i < (long)n; i++) {
        pd[i].fast =
            w->fast_fn &&
            swift_an_fast_parse(w->bbuf + pd[i].at, pd[i].len, &pd[i].fe, NULL, NULL, 0) == 0;
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
                rc = bad_event(
                    w,
                    pd[k].line + pd[k].err.line - 1,
                    "byte %llu: %s",
                    (unsigned long long)(pd[k].off + (uint64_t)(pd[k].err.position > 0
                                                                    ? pd[k].err.position - 1
                                                                    : 0)),
                    pd[k].err.text);
            else if (!json_is_object(v))
                rc = bad_event(w,
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
    if (!w->pend)
        w->pend = swift_xcalloc(BATCH_EVENTS, sizeof(*w->pend));
    if (w->blen + len > w->bcap) {
        w->bcap = w->blen + len > BATCH_BYTES ? w->blen + len : BATCH_BYTES;
        w->bbuf = swift_xrealloc(w->bbuf, w->bcap);
    }
    memcpy(w->bbuf + w->blen, r->buf + b, len);
    w->pend[w->npend++] =
        (struct pending){.at = w->blen, .len = len, .off = r->base + b, .line = line};
    w->blen += len;
    return 0;
}

/* JSONL: past the rest of the line (to its newline, left for skip_ws to count). */
static void skip_line(struct rd *r)
{
    for (int c; (c = rd_peek(r)) >= 0 && c != '\n';) {
        r->pos++;
        r->keep = r->pos;
    }
}

/* JSONL: a line that is not an event, named in file order (after the events before it). */
static int bad_line(struct walker *w, long line, uint64_t off, const char *what)
{
    if (w->npend && flush_events(w) < 0)
        return -1;
    swift_an_damage_note(w->dmg, w->r->name, line, "byte %llu: %s", (unsigned long long)off, what);
    skip_line(w->r);
    w->r->keep = w->r->pos;
    return 0;
}

/* After an event at p: 1 when only blanks follow up to a newline, 0 when other bytes follow,
 * -1 when the buffer ends first (the end of input, where fast_event calls it). */
static int rest_of_line(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r'))
        p++;
    if (p < end)
        return *p == '\n';
    return -1;
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
    /* JSONL: the whole line must be in the buffer, as the scanner writes into what it reads */
    if (r->jsonl && !r->eof && !memchr(r->buf + r->pos, '\n', r->len - r->pos))
        return 0;
    struct swift_an_fev fe;
    size_t used;
    long nl;
    if (swift_an_fast_parse(r->buf + r->pos, r->len - r->pos, &fe, &used, &nl, r->jsonl) < 0)
        return 0;
    if (r->jsonl && rest_of_line(r->buf + r->pos + used, r->buf + r->len) == 0)
        return bad_line(w, line, r->base + r->pos + used, "unexpected data after the event") < 0
                   ? -1
                   : 1;
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

/* JSONL: after a value, only blanks up to the newline? (reads more as needed; the value's
 * bytes stay at r->keep) */
static int line_ends(struct rd *r)
{
    for (;;) {
        int c = rd_peek(r);
        if (c < 0 || c == '\n')
            return 1;
        if (c != ' ' && c != '\t' && c != '\r')
            return 0;
        r->pos++;
    }
}

static int walk_jsonl(struct walker *w)
{
    struct rd *r = w->r;
    r->jsonl = 1;
    if (w->dmg)
        w->dmg->lines = 1;
    for (;;) {
        int c = skip_ws(r);
        if (c < 0)
            return 0;
        long line = r->line;
        if (c != '{') {
            if (bad_line(w, line, rd_off(r), "not a trace event (one JSON object per line)") < 0)
                return -1;
            continue;
        }
        size_t b, e;
        int f = fast_event(w, line);
        if (f < 0)
            return -1;
        if (f) {
            r->keep = r->pos;
            continue;
        }
        uint64_t off = rd_off(r);
        int rc = scan_value(r, &b, &e);
        if (rc == -1) {
            /* a writer killed mid-line leaves a partial last line: keep what came before */
            swift_warn(
                "%s:%ld: truncated last line ignored (was the writer killed?)", r->name, line);
            if (w->dmg)
                w->dmg->tail_line = line;
            return 0;
        }
        if (rc == -3)
            return scan_fail(r, rc, "a JSON line");
        if (rc < 0) {
            if (bad_line(
                    w, line, off, rc == -4 ? "the line ends inside a JSON value" : "not JSON") < 0)
                return -1;
            continue;
        }
        size_t len = e - b;
        if (!line_ends(r)) {
            if (bad_line(w, line, rd_off(r), "unexpected data after the event") < 0)
                return -1;
            continue;
        }
        b = r->keep; /* reading on may have moved the value to the buffer's start */
        if (give_event(w, b, b + len, line) < 0)
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

int swift_an_name_is_jsonl(const char *name)
{
    return strstr(name, ".jsonl") != NULL;
}

static int name_is_gz(const char *name)
{
    size_t l = strlen(name);
    return l > 3 && !strcmp(name + l - 3, ".gz");
}

int swift_an_stream_file_fast(const char *path, swift_an_event_fn fn, swift_an_fast_fn fast_fn,
                              swift_an_meta_fn meta_fn, void *ctx, struct swift_an_damage *dmg)
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
    struct walker w = {
        .r = &r, .fn = fn, .fast_fn = fast_fn, .meta_fn = meta_fn, .ctx = ctx, .dmg = dmg};
    json_object_seed(0); /* before threads create objects */
    int rc = walk(&w, swift_an_name_is_jsonl(path));
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
    return swift_an_stream_file_fast(path, fn, NULL, meta_fn, ctx, NULL);
}

int swift_an_stream_buffer_fast(const char *name, const void *data, size_t len,
                                swift_an_event_fn fn, swift_an_fast_fn fast_fn,
                                swift_an_meta_fn meta_fn, void *ctx, struct swift_an_damage *dmg)
{
    struct rd r = {.name = name, .mem = data, .memlen = len, .line = 1};
    struct walker w = {
        .r = &r, .fn = fn, .fast_fn = fast_fn, .meta_fn = meta_fn, .ctx = ctx, .dmg = dmg};
    json_object_seed(0);
    int rc = walk(&w, swift_an_name_is_jsonl(name));
    rc = rc == 0 ? flush_events(&w) : rc;
    free(r.buf);
    free(w.pend);
    free(w.bbuf);
    return rc;
}

int swift_an_stream_buffer(const char *name, const void *data, size_t len, swift_an_event_fn fn,
                           swift_an_meta_fn meta_fn, void *ctx)
{
    return swift_an_stream_buffer_fast(name, data, len, fn, NULL, meta_fn, ctx, NULL);
}
