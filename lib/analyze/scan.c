/*
 * analyze/scan — the fast event scanner: the fields the loader reads from one trace event's
 * bytes, and the same fields from a jansson object (the fallback, and the fuzz target's check).
 * See lib/analyze/load.h (struct swift_an_fev) and internal.h (swift_an_fast_parse).
 */
#include "lib/analyze/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "lib/core/banned.h"

/* The loader reads a few fields of each event. Parsing a whole event with jansson (objects,
 * hash tables, a copy of every string) was ~70% of the time on Kineto traces, so events are
 * first read by this scanner, which checks the JSON grammar as it goes and keeps only the
 * fields the loader reads. It accepts a strict subset of JSON: anything else (escapes and
 * non-ASCII bytes in strings, integers of 19 or more digits, real overflow, nesting deeper than
 * 32, any syntax error) and the events whose handling needs the whole object (metadata "M"
 * events, NCCL collectives' "Collective name" args) go to jansson as before, so results and
 * error messages are those of the jansson path. tests/fuzz/fuzz_trace_load.c checks that both
 * give the same fields on every input it makes. */

static const char *const arg_keys[AK_N] = {
    "stream",
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
    "Collective name",
    "flops",
    "Input Dims",
    "Input type",
    "Concrete Inputs",
    "peak_gflops",
    "Total Reserved",
    "Bytes",
    "shape",
    "rows",
    "program",
    "params",
    "grads",
    "optimizer",
    "activations",
    "other",
    "seqs",
    "prefill_tokens",
    "decode_tokens",
    "blocks_used",
    "waiting",
    "preemptions",
    "max_num_seqs",
    "max_num_batched_tokens",
    "num_blocks",
    "max_model_len",
    "chunked_prefill",
    "req",
    "prompt_tokens",
    "completion_tokens",
    "vision_flops",
    "images",
    "patches",
};

static const unsigned char arg_len[AK_N] = {
    6, 11, 6, 11, 11, 4,  6, 5, 13, 25, 9,  5, 11, 9,  15, 15, 5,  10, 10, 15, 11, 14, 5, 5,
    4, 7,  6, 5,  9,  11, 5, 4, 14, 13, 11, 7, 11, 12, 22, 10, 13, 15, 3,  13, 17, 12, 6, 7};

struct fp {
    char *p, *end;
    int depth;
    long nl; /* newlines passed */
};

static inline void fp_ws(struct fp *q)
{
    /* one compare for the usual case, a byte that is not blank */
    while (q->p < q->end && (unsigned char)*q->p <= ' ' &&
           (*q->p == ' ' || *q->p == '\t' || *q->p == '\n' || *q->p == '\r')) {
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
#if defined(__SSE2__)
    /* 16 bytes at a time up to the first '"', '\\', control or non-ASCII byte (a signed
     * compare below 0x20 catches both) */
    const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\'),
                  space = _mm_set1_epi8(0x20);
    while (q->end - p >= 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
        __m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, bslash)),
                                 _mm_cmplt_epi8(x, space));
        int bits = _mm_movemask_epi8(m);
        if (bits) {
            p += __builtin_ctz((unsigned)bits);
            goto tail;
        }
        p += 16;
    }
#endif
    while (q->end - p >= 8) {
        uint64_t x;
        memcpy(&x, p, 8);
        if (special8(x))
            break;
        p += 8;
    }
#if defined(__SSE2__)
tail:
#endif
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
 * real (strtod; overflow left to jansson). v NULL: checked, not converted (a real without an
 * exponent and with under 300 integer digits cannot overflow, so strtod is skipped). */
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
    int expo = 0;
    if (p < e && (*p == 'e' || *p == 'E')) {
        expo = 1;
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
    if (!v) {
        if (!real && nd > 18)
            return -1;
        if (real && (expo || nd >= 300)) {
            char *endp;
            double d = strtod(b, &endp);
            if (endp != p || isinf(d))
                return -1;
        }
    } else if (!real) {
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

/* An object member's key and its ':' (white space around both): the key into *ks, *kl. */
static int fp_key(struct fp *q, char **ks, size_t *kl)
{
    fp_ws(q);
    if (fp_str(q, ks, kl) < 0)
        return -1;
    fp_ws(q);
    if (q->p >= q->end || *q->p != ':')
        return -1;
    q->p++;
    return 0;
}

/* After a member or element: 1 past a ',' (another follows), 0 past close (the container
 * ends), -1 anything else. */
static int fp_next(struct fp *q, char close)
{
    fp_ws(q);
    if (q->p >= q->end)
        return -1;
    if (*q->p == ',') {
        q->p++;
        return 1;
    }
    if (*q->p != close)
        return -1;
    q->p++;
    return 0;
}

/* One value; its scalar kept in v (NULL: checked and skipped). */
static int fp_value(struct fp *q, struct swift_an_fval *v)
{
    struct swift_an_fval tmp, *keep = v;
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
        char close = c == '{' ? '}' : ']', *start = q->p;
        if (++q->depth > 32)
            return -1;
        q->p++;
        fp_ws(q);
        if (q->p < q->end && *q->p == close) {
            q->p++;
        } else {
            for (int more = 1; more;) {
                char *ks;
                size_t kl;
                if ((c == '{' && fp_key(q, &ks, &kl) < 0) || fp_value(q, NULL) < 0 ||
                    (more = fp_next(q, close)) < 0)
                    return -1;
            }
        }
        q->depth--;
        v->t = SWIFT_AN_FV_OTHER;
        v->s = start; /* the container's JSON text (its strings are not NUL-terminated) */
        v->len = (size_t)(q->p - start);
        return 0;
    }
    if (c == 't' || c == 'f' || c == 'n') {
        if (fp_lit(q, c == 't' ? "true" : c == 'f' ? "false" : "null", c == 'f' ? 5 : 4) < 0)
            return -1;
        v->t = SWIFT_AN_FV_OTHER;
        return 0;
    }
    return fp_num(q, keep);
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
        if (fp_key(q, &ks, &kl) < 0)
            return -1;
        struct swift_an_fval *dst = NULL;
        for (int k = 0; k < AK_N && !dst; k++)
            if (kl == arg_len[k] && ks[0] == arg_keys[k][0] && !memcmp(ks, arg_keys[k], kl))
                dst = &f->a[k];
        if (fp_value(q, dst) < 0)
            return -1;
        int more = fp_next(q, '}');
        if (more <= 0)
            return more;
    }
}

/* 0: *f holds the event (its strings NUL-terminated in place), *used its length in bytes and
 * *nl the newlines in it (both may be NULL); -1: leave it to jansson (nothing written). With
 * one_line, an event with a newline inside is left to jansson too (JSONL). */
int swift_an_fast_parse(char *buf, size_t len, struct swift_an_fev *f, size_t *used, long *nl,
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
        for (int more = 1; more;) {
            char *ks;
            size_t kl;
            if (fp_key(&q, &ks, &kl) < 0)
                return -1;
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
            if ((more = fp_next(&q, '}')) < 0)
                return -1;
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
    return swift_an_fast_parse(buf, len, f, NULL, NULL, 0);
}
