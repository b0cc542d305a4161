/*
 * analyze/compare_mem — --compare's roofline deltas for the top ops and the memory peak delta
 * (compare.h), from each side's report: op_roofline rows matched by op name and input dims,
 * memory.peak_bytes over the compared processes.
 */
#include "lib/analyze/compare.h"
#include "lib/analyze/internal.h"

#include <math.h>

#include "lib/core/banned.h"

static json_t *num_or_null(json_t *v)
{
    return json_is_number(v) ? json_real(json_number_value(v)) : json_null();
}

/* The row of rows with the same name and input_dims as r, or NULL. */
static json_t *match(json_t *rows, json_t *r)
{
    size_t i;
    json_t *x;
    json_array_foreach(rows, i, x)
    {
        if (json_equal(json_object_get(x, "name"), json_object_get(r, "name")) &&
            json_equal(json_object_get(x, "input_dims"), json_object_get(r, "input_dims")))
            return x;
    }
    return NULL;
}

static double dev_us(json_t *r)
{
    return r ? json_number_value(json_object_get(r, "device_us")) : 0;
}

static json_t *roof_row(json_t *c, json_t *t)
{
    json_t *k = c ? c : t, *o = json_object();
    json_object_set(o, "name", json_object_get(k, "name"));
    json_object_set(o, "input_dims", json_object_get(k, "input_dims"));
    json_object_set(o, "class", json_object_get(k, "class"));
    json_object_set_new(
        o, "control_device_us", c ? num_or_null(json_object_get(c, "device_us")) : json_null());
    json_object_set_new(
        o, "test_device_us", t ? num_or_null(json_object_get(t, "device_us")) : json_null());
    json_object_set_new(
        o, "control_tflops", c ? num_or_null(json_object_get(c, "tflops")) : json_null());
    json_object_set_new(
        o, "test_tflops", t ? num_or_null(json_object_get(t, "tflops")) : json_null());
    json_object_set_new(o,
                        "control_fraction",
                        c ? num_or_null(json_object_get(c, "roofline_fraction")) : json_null());
    json_object_set_new(
        o, "test_fraction", t ? num_or_null(json_object_get(t, "roofline_fraction")) : json_null());
    json_object_set_new(o,
                        "delta_us",
                        c && t ? json_real(round((dev_us(t) - dev_us(c)) * 1e3) / 1e3)
                               : json_null());
    return o;
}

static int cmp_rows(const void *a, const void *b, void *ctx)
{
    (void)ctx;
    json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    double u = fmax(json_number_value(json_object_get(x, "control_device_us")),
                    json_number_value(json_object_get(x, "test_device_us")));
    double v = fmax(json_number_value(json_object_get(y, "control_device_us")),
                    json_number_value(json_object_get(y, "test_device_us")));
    return u < v ? 1 : u > v ? -1 : 0;
}

json_t *swift_an_compare_roofline(json_t *cproc, json_t *tproc, int top)
{
    json_t *cr = json_object_get(json_object_get(cproc, "op_roofline"), "rows");
    json_t *tr = json_object_get(json_object_get(tproc, "op_roofline"), "rows");
    if (!json_is_array(cr) && !json_is_array(tr))
        return json_null();
    size_t n = json_array_size(cr) + json_array_size(tr), m = 0, i;
    json_t **rows = swift_xcalloc(n + 1, sizeof(*rows)), *x;
    json_array_foreach(cr, i, x) rows[m++] = roof_row(x, match(tr, x));
    json_array_foreach(tr, i, x)
    {
        if (!match(cr, x))
            rows[m++] = roof_row(NULL, x);
    }
    swift_an_sort_r(rows, m, sizeof(*rows), cmp_rows, NULL);
    json_t *a = json_array();
    for (i = 0; i < m; i++) {
        if ((int)i < top)
            json_array_append_new(a, rows[i]);
        else
            json_decref(rows[i]);
    }
    free(rows);
    return a;
}

json_t *swift_an_compare_memory(double cpeak, double tpeak)
{
    if (cpeak <= 0 && tpeak <= 0)
        return json_null();
    return json_pack("{s:o,s:o,s:o,s:o}",
                     "control_peak_bytes",
                     cpeak > 0 ? json_real(cpeak) : json_null(),
                     "test_peak_bytes",
                     tpeak > 0 ? json_real(tpeak) : json_null(),
                     "delta_bytes",
                     cpeak > 0 && tpeak > 0 ? json_real(tpeak - cpeak) : json_null(),
                     "delta_pct",
                     cpeak > 0 && tpeak > 0 ? json_real(round(1e5 * (tpeak - cpeak) / cpeak) / 1e3)
                                            : json_null());
}

/* v with prec decimals and unit, or "-" when v is not a number (a side without the row). */
static const char *fmt(char *b, size_t n, int prec, const char *unit, double v)
{
    if (!isfinite(v))
        snprintf(b, n, "-");
    else
        snprintf(b, n, "%.*f%s", prec, v, unit);
    return b;
}

void swift_an_compare_print_mem(FILE *fp, json_t *d, int md, int top)
{
    json_t *m = json_object_get(d, "memory");
    if (json_is_object(m)) {
        json_t *c = json_object_get(m, "control_peak_bytes"),
               *t = json_object_get(m, "test_peak_bytes");
        fprintf(fp, md ? "\n## Memory\n\nPeak " : "\nMemory peak: ");
        if (json_is_number(c))
            fprintf(fp, "%.2f GiB", json_number_value(c) / 1073741824.0);
        else
            fputs("-", fp);
        fputs(md ? " → " : " -> ", fp);
        if (json_is_number(t))
            fprintf(fp, "%.2f GiB", json_number_value(t) / 1073741824.0);
        else
            fputs("-", fp);
        if (json_is_number(json_object_get(m, "delta_pct")))
            fprintf(fp, " (%+.2f%%)", swift_an_jnum(m, "delta_pct"));
        fputc('\n', fp);
    }
    json_t *r = json_object_get(d, "roofline");
    if (!json_is_array(r) || !json_array_size(r))
        return;
    fprintf(
        fp,
        md ? "\n## Roofline of the top ops\n\n| op | input dims | device | TFLOP/s | roofline |\n"
             "|---|---|--:|--:|--:|\n"
           : "\nRoofline of the top ops (control -> test):\n");
    size_t i;
    json_t *x;
    json_array_foreach(r, i, x)
    {
        if ((int)i >= top)
            break;
        char *dims = json_dumps(json_object_get(x, "input_dims"), JSON_COMPACT | JSON_ENCODE_ANY);
        char a[32], b[32], tf[64], fr[64];
        swift_an_dur(a, sizeof(a), swift_an_jnum(x, "control_device_us"));
        swift_an_dur(b, sizeof(b), swift_an_jnum(x, "test_device_us"));
        char c1[16], c2[16], f1[16], f2[16];
        snprintf(tf,
                 sizeof(tf),
                 "%s -> %s",
                 fmt(c1, sizeof(c1), 2, "", swift_an_jnum(x, "control_tflops")),
                 fmt(c2, sizeof(c2), 2, "", swift_an_jnum(x, "test_tflops")));
        snprintf(fr,
                 sizeof(fr),
                 "%s -> %s",
                 fmt(f1, sizeof(f1), 0, "%", 100 * swift_an_jnum(x, "control_fraction")),
                 fmt(f2, sizeof(f2), 0, "%", 100 * swift_an_jnum(x, "test_fraction")));
        if (md)
            fprintf(fp,
                    "| %s | %s | %s → %s | %s | %s |\n",
                    swift_an_jstr(x, "name"),
                    dims ? dims : "",
                    a,
                    b,
                    tf,
                    fr);
        else
            fprintf(fp,
                    "    %-32.32s %-24.24s %10s -> %-10s %16s TFLOP/s %12s\n",
                    swift_an_jstr(x, "name"),
                    dims ? dims : "",
                    a,
                    b,
                    tf,
                    fr);
        free(dims);
    }
}
