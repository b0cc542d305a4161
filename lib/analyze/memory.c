/*
 * analyze/memory — device memory over time: Kineto's [memory] instants and our memory counters,
 * per device. A Kineto instant carries "Bytes" (+ allocated, - freed) and, in newer traces,
 * "Total Allocated" and "Total Reserved"; older ones (the TensorBoard plugin's resnet50 samples)
 * carry only "Bytes", so the allocated curve is then the running sum of Bytes from the first
 * event on: allocations made before the trace began are not in it (the TensorBoard plugin's
 * memory view counts the same way). Our traces' counters carry "allocated" (and "total").
 *
 * The loader (load.c) calls swift_an_mem_note once per event; the report (analyze.c) calls
 * swift_an_memory_json per process.
 */
#include "lib/analyze/internal.h"
#include "lib/analyze/load.h"

#include <math.h>
#include <zlib.h>

#include "lib/core/banned.h"

/* Points kept per device while reading: when full, pairs merge into the higher one, so the
 * peak always survives and memory stays bounded however long the trace. */
#define MEM_KEEP 4096
/* Points of the report's timeline. */
#define MEM_SHOWN 200

struct swift_an_memdev {
    int used;
    int src;    /* SWIFT_AN_MEM_TOTAL or SWIFT_AN_MEM_SUM */
    double sum; /* running sum of Bytes */
    double res; /* last Total Reserved */
    double peak, peak_ts, res_at_peak;
    int64_t peak_tid; /* host thread of the event that reached the peak, INT64_MIN: none */
    long nev;
    double cat_at_peak[8];   /* memory_timeline.raw: bytes per category at the peak */
    double last, last_bytes; /* memory_timeline.raw: the last row */
    double *pts;             /* (ts, bytes, reserved or NAN) triples */
    size_t npts;
};

enum { SWIFT_AN_MEM_TOTAL = 1, SWIFT_AN_MEM_SUM = 2, SWIFT_AN_MEM_RAW = 3 };

/* torch's _memory_profiler categories in the raw timeline's index order (HTA's
 * memory_analysis._CATEGORY_TO_INDEX). */
static const char *const raw_cat[8] = {"Parameter",
                                       "Optimizer state",
                                       "Input",
                                       "Temporary",
                                       "Activation",
                                       "Gradient",
                                       "Autograd",
                                       "Unknown"};

static void keep_point(struct swift_an_memdev *d, double ts, double v, double res)
{
    if (!d->pts)
        d->pts = swift_xmalloc(3 * MEM_KEEP * sizeof(double));
    if (d->npts == MEM_KEEP) {
        for (size_t i = 0; i < MEM_KEEP / 2; i++) {
            size_t j = 2 * i + (d->pts[3 * (2 * i + 1) + 1] > d->pts[3 * (2 * i) + 1]);
            memmove(&d->pts[3 * i], &d->pts[3 * j], 3 * sizeof(double));
        }
        d->npts = MEM_KEEP / 2;
    }
    d->pts[3 * d->npts] = ts;
    d->pts[3 * d->npts + 1] = v;
    d->pts[3 * d->npts + 2] = res;
    d->npts++;
}

void swift_an_mem_note(struct swift_an_source *s, int dev, double delta, double total,
                       double reserved, double ts, int64_t tid)
{
    if (dev < 0 || dev >= SWIFT_AN_MAX_DEV)
        return;
    if (!s->memdev)
        s->memdev = swift_xcalloc(SWIFT_AN_MAX_DEV, sizeof(*s->memdev));
    struct swift_an_memdev *d = &s->memdev[dev];
    d->used = 1;
    d->nev++;
    if (!isnan(delta))
        d->sum += delta;
    if (!isnan(reserved))
        d->res = reserved;
    double v;
    if (!isnan(total)) {
        d->src = SWIFT_AN_MEM_TOTAL;
        v = total;
    } else if (d->src == SWIFT_AN_MEM_TOTAL || isnan(delta)) {
        return; /* a Bytes-only event in a trace with totals: the totals tell */
    } else {
        d->src = SWIFT_AN_MEM_SUM;
        v = d->sum;
    }
    keep_point(d, ts, v, reserved);
    if (v > d->peak || !d->peak_ts) {
        d->peak = v;
        d->peak_ts = ts;
        d->res_at_peak = isnan(reserved) ? -1 : reserved;
        d->peak_tid = tid;
    }
    if (v > s->mem_peak[dev]) {
        s->mem_peak[dev] = v;
        s->mem_peak_ts[dev] = ts;
    }
}

void swift_an_mem_free(struct swift_an_source *s)
{
    if (!s->memdev)
        return;
    for (int i = 0; i < SWIFT_AN_MAX_DEV; i++)
        free(s->memdev[i].pts);
    free(s->memdev);
    s->memdev = NULL;
}

double swift_an_mem_reserved_at_peak(const struct swift_an_source *s, int dev)
{
    if (!s->memdev || dev < 0 || dev >= SWIFT_AN_MAX_DEV || !s->memdev[dev].used)
        return -1;
    return s->memdev[dev].res_at_peak;
}

/* The kept points thinned to at most MEM_SHOWN by the highest per bucket, the peak kept; with
 * res, the reserved bytes at those points (null where unknown) into *res (NULL: none known). */
static json_t *timeline(const struct swift_an_memdev *d, double t0, json_t **res)
{
    json_t *a = json_array(), *r = json_array();
    size_t n = d->npts, per = (n + MEM_SHOWN - 1) / MEM_SHOWN;
    int known = 0;
    if (!per)
        per = 1;
    for (size_t i = 0; i < n; i += per) {
        size_t best = i;
        for (size_t j = i + 1; j < i + per && j < n; j++)
            if (d->pts[3 * j + 1] > d->pts[3 * best + 1])
                best = j;
        json_array_append_new(
            a,
            json_pack("[f,f]", round((d->pts[3 * best] - t0) * 1e3) / 1e3, d->pts[3 * best + 1]));
        double rv = d->pts[3 * best + 2];
        known |= !isnan(rv);
        json_array_append_new(r, isnan(rv) ? json_null() : json_real(rv));
    }
    if (!known) {
        json_decref(r);
        r = json_null();
    }
    *res = r;
    return a;
}

/* The CPU ops (Kineto cpu_op, user_annotation; "Operator" in older traces) on the peak's thread
 * whose span holds its time, outermost first: the op that allocated is the deepest that is not the
 * allocator's own (aten::empty ...). */
static json_t *peak_ops(const struct swift_an_set *set, const struct swift_an_source *s,
                        const struct swift_an_memdev *d)
{
    if (d->peak_tid == INT64_MIN || d->src == SWIFT_AN_MEM_RAW)
        return json_null();
    const struct swift_an_ev *in[16];
    size_t n = 0;
    for (size_t i = 0; i < s->n && n < 16; i++) {
        const struct swift_an_ev *e = &s->ev[i];
        if (e->tid != d->peak_tid || e->ts > d->peak_ts || e->ts + e->dur < d->peak_ts)
            continue;
        const char *cat = swift_an_str(&set->strs, e->cat);
        if (strcmp(cat, "cpu_op") && strcmp(cat, "user_annotation") && strcmp(cat, "Operator"))
            continue;
        in[n++] = e;
    }
    /* outermost first: longer spans, then earlier starts */
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && (in[j]->dur > in[j - 1]->dur); j--) {
            const struct swift_an_ev *t = in[j];
            in[j] = in[j - 1];
            in[j - 1] = t;
        }
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_string(swift_an_str(&set->strs, in[i]->name)));
    return a;
}

static json_t *device_json(const struct swift_an_set *set, const struct swift_an_source *s, int dev,
                           double t0)
{
    const struct swift_an_memdev *d = &s->memdev[dev];
    double total = s->mem_total[dev];
    json_t *j = json_object();
    json_object_set_new(j, "device", json_integer(dev));
    json_object_set_new(j,
                        "source",
                        json_string(d->src == SWIFT_AN_MEM_TOTAL ? "total_allocated"
                                    : d->src == SWIFT_AN_MEM_RAW ? "memory_timeline"
                                                                 : "running_sum"));
    if (d->src == SWIFT_AN_MEM_RAW) {
        json_t *c = json_object();
        for (int i = 0; i < 8; i++)
            json_object_set_new(c, raw_cat[i], json_real(d->cat_at_peak[i]));
        json_object_set_new(j, "categories_at_peak", c);
        json_object_set_new(j, "last_bytes", json_real(d->last_bytes));
    }
    json_object_set_new(j, "events", json_integer(d->nev));
    json_object_set_new(j, "peak_bytes", json_real(d->peak));
    json_object_set_new(j, "peak_ts_us", json_real(round((d->peak_ts - t0) * 1e3) / 1e3));
    json_object_set_new(
        j, "reserved_at_peak_bytes", d->res_at_peak >= 0 ? json_real(d->res_at_peak) : json_null());
    json_object_set_new(j,
                        "fragmentation_bytes",
                        d->res_at_peak >= 0 ? json_real(d->res_at_peak - d->peak) : json_null());
    json_object_set_new(j, "device_bytes", total > 0 ? json_real(total) : json_null());
    json_object_set_new(
        j, "peak_pct", total > 0 ? json_real(round(1e5 * d->peak / total) / 1e3) : json_null());
    json_object_set_new(j, "peak_ops", peak_ops(set, s, d));
    json_t *res;
    json_object_set_new(j, "timeline", timeline(d, t0, &res));
    json_object_set_new(j, "reserved_timeline", res);
    return j;
}

json_t *swift_an_memory_devices_json(const struct swift_an_set *set,
                                     const struct swift_an_source *s, double t0)
{
    if (!s->memdev)
        return NULL;
    json_t *a = json_array();
    for (int dev = 0; dev < SWIFT_AN_MAX_DEV; dev++)
        if (s->memdev[dev].used && s->memdev[dev].src)
            json_array_append_new(a, device_json(set, s, dev, t0));
    if (!json_array_size(a)) {
        json_decref(a);
        return NULL;
    }
    return a;
}

/* ---------- torch.profiler's export_memory_timeline raw file ---------- */

/* The whole (gzip or plain) file into a buffer; NULL after saying why. */
static char *read_all(const char *path, size_t *len)
{
    gzFile g = gzopen(path, "rb");
    if (!g) {
        swift_error("cannot open '%s'", path);
        return NULL;
    }
    size_t cap = 1 << 20, n = 0;
    char *b = swift_xmalloc(cap + 1);
    for (;;) {
        if (n == cap) {
            if (cap >= (size_t)1 << 31) {
                swift_error("%s: memory timeline over 2 GiB", path);
                free(b);
                gzclose(g);
                return NULL;
            }
            cap *= 2;
            b = swift_xrealloc(b, cap + 1);
        }
        int r = gzread(g, b + n, (unsigned)(cap - n));
        if (r < 0) {
            swift_error("%s: read error", path);
            free(b);
            gzclose(g);
            return NULL;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    gzclose(g);
    b[n] = 0;
    *len = n;
    return b;
}

int swift_an_memtl_sniff(const char *path)
{
    gzFile g = gzopen(path, "rb");
    if (!g)
        return 0;
    char b[64];
    int r = gzread(g, b, sizeof(b) - 1);
    gzclose(g);
    if (r <= 0)
        return 0;
    b[r] = 0;
    const char *p = b;
    while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')
        p++;
    if (*p++ != '[')
        return 0;
    while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')
        p++;
    return *p == '[';
}

/* One distinct timestamp's totals into d (HTA: a new row copies the last one). */
static void raw_row(struct swift_an_memdev *d, double t, const double *cat)
{
    double tot = 0;
    for (int i = 0; i < 8; i++)
        tot += cat[i];
    d->nev++;
    keep_point(d, t, tot, NAN);
    if (tot > d->peak || d->nev == 1) {
        d->peak = tot;
        d->peak_ts = t;
        memcpy(d->cat_at_peak, cat, sizeof(d->cat_at_peak));
    }
}

int swift_an_memtl_load(struct swift_an_source *s, const char *path)
{
    size_t len;
    char *b = read_all(path, &len);
    if (!b)
        return -1;
    s->bytes = len;
    json_error_t err;
    json_t *a = json_loadb(b, len, 0, &err);
    free(b);
    if (!json_is_array(a)) {
        swift_error("%s:%d: memory timeline: %s", path, err.line, a ? "not an array" : err.text);
        json_decref(a);
        return -1;
    }
    /* HTA memory_analysis._process_raw_events: t_min is the first positive timestamp
     * (pre-existing allocations have negative ones); bytes per category summed over the
     * events in time order, one row per distinct timestamp */
    /* timestamps are ns since the epoch (beyond a double's 2^53): kept as integers, and each
     * row's offset from t_min taken before converting (the file is in time order, so t_min
     * is known by the first row that needs it) */
    int64_t t_min = -1, last = 0;
    double cat[8] = {0};
    int have = 0;
    size_t n = json_array_size(a);
    if (!s->memdev)
        s->memdev = swift_xcalloc(SWIFT_AN_MAX_DEV, sizeof(*s->memdev));
    struct swift_an_memdev *d = &s->memdev[0];
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(a, i);
        json_t *t = json_array_get(e, 0), *nb = json_array_get(e, 2), *c = json_array_get(e, 3);
        if (!json_is_array(e) || json_array_size(e) != 4 || !json_is_integer(t) ||
            !json_is_number(nb) || !json_is_integer(c) || json_integer_value(c) < 0 ||
            json_integer_value(c) > 7) {
            swift_error(
                "%s: memory timeline entry %zu is not [ts, action, bytes, category 0-7]", path, i);
            json_decref(a);
            return -1;
        }
        int64_t tv = json_integer_value(t);
        if (t_min == -1 || (tv < t_min && tv > 0))
            t_min = tv;
        if (have && tv != last) /* the row of `last` is complete */
            raw_row(d, last < 0 ? 0 : (double)(last - t_min) / 1e3, cat);
        have = 1;
        last = tv;
        cat[json_integer_value(c)] += json_number_value(nb);
    }
    json_decref(a);
    if (!have) {
        swift_error("%s: empty memory timeline", path);
        return -1;
    }
    raw_row(d, last < 0 ? 0 : (double)(last - t_min) / 1e3, cat);
    d->used = 1;
    d->src = SWIFT_AN_MEM_RAW;
    d->res_at_peak = -1;
    d->last = last < 0 ? 0 : (double)(last - t_min) / 1e3;
    d->last_bytes = 0;
    for (int i = 0; i < 8; i++)
        d->last_bytes += cat[i];
    s->mem_peak[0] = d->peak;
    s->mem_peak_ts[0] = d->peak_ts;
    s->nevents = (long)n;
    return 0;
}

/* swift-train's accounting (the counter memory_by_category, docs/trace-schema.md): the sample
 * with the largest total, bytes per category; NULL when the trace has none. */
json_t *swift_an_memory_categories_json(const struct swift_an_source *s)
{
    static const char *const k[6] = {
        "params", "grads", "optimizer", "activations", "other", "total"};
    if (!s->memcat_n)
        return NULL;
    json_t *o = json_object();
    for (int i = 0; i < 6; i++)
        json_object_set_new(o, k[i], json_real(s->memcat[i]));
    return o;
}
