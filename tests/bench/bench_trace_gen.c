/* bench_trace_gen IN OUT MB — write a Kineto trace of about MB megabytes by replicating IN's
 * events with shifted timestamps (each copy after the previous one), renumbered ProfilerStep#N,
 * and correlation / External id / flow ids offset so every copy stays a consistent trace. */
#include "lib/analyze/load.h"
#include "lib/core/cli.h"
#include "lib/core/error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct gen {
    json_t *events;
    json_t *meta;
    double t0, t1;
    long max_step, max_corr, max_ext, max_id;
};

static long ival(json_t *v)
{
    return json_is_integer(v) ? (long)json_integer_value(v) : -1;
}

static int on_ev(void *ctx, json_t *e, uint64_t off, long line)
{
    (void)off;
    (void)line;
    struct gen *g = ctx;
    json_array_append(g->events, e);
    json_t *ts = json_object_get(e, "ts");
    if (json_is_number(ts)) {
        double t = json_number_value(ts), d = json_number_value(json_object_get(e, "dur"));
        if (t < g->t0)
            g->t0 = t;
        if (t + (isfinite(d) ? d : 0) > g->t1)
            g->t1 = t + (isfinite(d) ? d : 0);
    }
    const char *nm = json_string_value(json_object_get(e, "name"));
    if (nm && !strncmp(nm, "ProfilerStep#", 13)) {
        long s = strtol(nm + 13, NULL, 10);
        if (s > g->max_step)
            g->max_step = s;
    }
    json_t *a = json_object_get(e, "args");
    long c = ival(json_object_get(a, "correlation"));
    if (c > g->max_corr)
        g->max_corr = c;
    c = ival(json_object_get(a, "External id"));
    if (c > g->max_ext)
        g->max_ext = c;
    c = ival(json_object_get(a, "external id"));
    if (c > g->max_ext)
        g->max_ext = c;
    c = ival(json_object_get(e, "id"));
    if (c > g->max_id)
        g->max_id = c;
    return 0;
}

static void on_meta(void *ctx, const char *key, json_t *v)
{
    struct gen *g = ctx;
    json_object_set(g->meta, key, v);
}

static void shift_int(json_t *o, const char *k, long by)
{
    json_t *v = json_object_get(o, k);
    if (json_is_integer(v) && json_integer_value(v) > 0)
        json_object_set_new(o, k, json_integer(json_integer_value(v) + by));
}

int main(int argc, char **argv)
{
    swift_set_progname(argv[0]);
    long mb;
    if (argc != 4 || swift_parse_long(argv[3], 1, 1 << 20, &mb) < 0) {
        fprintf(stderr, "usage: bench_trace_gen IN OUT MB\n");
        return 2;
    }
    struct gen g = {.events = json_array(), .meta = json_object(), .t0 = INFINITY, .t1 = -INFINITY};
    if (swift_an_stream_file(argv[1], on_ev, on_meta, &g) < 0)
        return 1;
    FILE *fp = fopen(argv[2], "w");
    if (!fp)
        return swift_error_errno("cannot open '%s'", argv[2]), 1;
    fputs("{\n  \"schemaVersion\": 1,\n", fp);
    const char *k;
    json_t *v;
    json_object_foreach(g.meta, k, v)
    {
        char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        fprintf(fp, "  \"%s\": %s,\n", k, s);
        free(s);
    }
    fputs("  \"traceEvents\": [\n", fp);
    double span = g.t1 - g.t0 + 1000;
    unsigned long long target = (unsigned long long)mb << 20;
    int first = 1;
    for (long copy = 0; (unsigned long long)ftell(fp) < target; copy++) {
        size_t i;
        json_t *e;
        json_array_foreach(g.events, i, e)
        {
            json_t *c = json_deep_copy(e);
            json_t *ts = json_object_get(c, "ts");
            if (copy && json_is_number(ts)) {
                double t = json_number_value(ts) + (double)copy * span;
                json_object_set_new(
                    c, "ts", json_is_integer(ts) ? json_integer((json_int_t)t) : json_real(t));
            }
            const char *nm = json_string_value(json_object_get(c, "name"));
            if (copy && nm && !strncmp(nm, "ProfilerStep#", 13)) {
                char buf[64];
                snprintf(buf,
                         sizeof(buf),
                         "ProfilerStep#%ld",
                         strtol(nm + 13, NULL, 10) + copy * (g.max_step + 1));
                json_object_set_new(c, "name", json_string(buf));
            }
            if (copy) {
                json_t *a = json_object_get(c, "args");
                shift_int(a, "correlation", copy * (g.max_corr + 1));
                shift_int(a, "External id", copy * (g.max_ext + 1));
                shift_int(a, "external id", copy * (g.max_ext + 1));
                shift_int(c, "id", copy * (g.max_id + 1));
            }
            char *s = json_dumps(c, JSON_COMPACT | JSON_REAL_PRECISION(17));
            fprintf(fp, "%s  %s", first ? "" : ",\n", s);
            first = 0;
            free(s);
            json_decref(c);
        }
    }
    fputs("\n  ]\n}\n", fp);
    if (fclose(fp) != 0)
        return swift_error_errno("cannot write '%s'", argv[2]), 1;
    json_decref(g.events);
    json_decref(g.meta);
    return 0;
}
