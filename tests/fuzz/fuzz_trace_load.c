/* Fuzz target: the streaming trace loader (Kineto JSON, JSONL) and every analysis after it. The
 * first byte picks the format the name implies (even: .json, odd: .jsonl). Each line is also
 * read as one event by the loader's fast scanner and by jansson: whatever the scanner accepts,
 * jansson must accept with the same fields (else abort). */
#include "lib/analyze/analyze.h"
#include "lib/analyze/report.h"
#include "lib/core/error.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int same_fval(const struct swift_an_fval *a, const struct swift_an_fval *b, int strings)
{
    if (a->t != b->t)
        return 0;
    switch (a->t) {
    case SWIFT_AN_FV_INT:
        return a->i == b->i;
    case SWIFT_AN_FV_REAL:
        return a->d == b->d;
    case SWIFT_AN_FV_STR:
        return !strings || (a->len == b->len && !memcmp(a->s, b->s, a->len));
    default:
        return 1;
    }
}

/* The fast scanner against jansson on one event's bytes. */
static void check_event(const uint8_t *p, size_t n)
{
    char *buf = malloc(n + 1);
    if (!buf)
        abort();
    memcpy(buf, p, n);
    buf[n] = 0;
    struct swift_an_fev f;
    int fast = swift_an_fev_parse(buf, n, &f);
    if (fast == 0) {
        json_error_t err;
        json_t *e = json_loadb((const char *)p, n, JSON_DISABLE_EOF_CHECK | JSON_ALLOW_NUL, &err);
        if (!e || !json_is_object(e))
            abort(); /* the scanner took what jansson refuses */
        struct swift_an_fev g;
        swift_an_fev_of_json(e, &g);
        const struct swift_an_fval *x[] = {&f.ph, &f.name, &f.cat, &f.ts, &f.dur, &f.pid, &f.tid};
        const struct swift_an_fval *y[] = {&g.ph, &g.name, &g.cat, &g.ts, &g.dur, &g.pid, &g.tid};
        for (size_t i = 0; i < sizeof(x) / sizeof(x[0]); i++)
            if (!same_fval(x[i], y[i], 1))
                abort();
        if (f.args != g.args)
            abort();
        for (int k = 0; k < AK_N; k++)
            if (!same_fval(&f.a[k], &g.a[k], 0)) /* args' strings are not kept */
                abort();
        json_decref(e);
    }
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *devnull;
    if (!devnull) {
        devnull = fopen("/dev/null", "w");
        swift_error_set_stream(devnull);
    }
    if (size < 1)
        return 0;
    for (size_t i = 1; i < size;) {
        const uint8_t *nl = memchr(data + i, '\n', size - i);
        size_t e = nl ? (size_t)(nl - data) : size;
        check_event(data + i, e - i);
        i = e + 1;
    }
    const char *name = data[0] & 1 ? "fuzz.trace.jsonl" : "fuzz.json";
    struct swift_an_set set;
    swift_an_set_init(&set);
    set.max_events = 1u << 20;
    if (swift_an_load_buffer(&set, name, data + 1, size - 1) == 0) {
        struct swift_analyze_opts o;
        swift_analyze_opts_default(&o);
        struct swift_an_proc *procs;
        size_t n;
        swift_an_procs_build(&set, &o, &procs, &n);
        json_t *r = swift_an_report_build(&set, procs, n, &o);
        swift_an_report_print(devnull, r, SWIFT_FMT_TEXT, 5);
        swift_an_report_print(devnull, r, SWIFT_FMT_HTML, 5);
        json_decref(r);
        swift_an_procs_free(procs, n);
    }
    swift_an_set_release(&set);
    return 0;
}
