/*
 * analyze/oproof — the op roofline table of a Kineto trace recorded with record_shapes: per op
 * name and unique input shape, calls, device time, share of the steps, FLOPs and bytes
 * (roofline.h), achieved TFLOP/s and TB/s, arithmetic intensity and the fraction of the
 * device's roofline. See internal.h (swift_an_oproof_json).
 *
 * Linking: a kernel (or GPU memcpy / memset) carries the External id of the innermost CPU op
 * that launched it (REFERENCE.md §4.4; the loader keeps it in ev->ext). Its time goes to the
 * outermost op around it whose formula fits (set_owners), so that aten::linear → aten::addmm
 * or a convolution backward → its _input and _weight parts count once, with the FLOPs of
 * the op that owns the time.
 *
 * The loader keeps no "Input Dims", so the file is read once more (the fast scanner hands the
 * record_shapes arrays over as JSON text), only while its CPU ops carry shapes: a trace
 * without record_shapes stops after its first SHAPELESS_STOP ops.
 */
#include "lib/analyze/breakdown.h"
#include "lib/analyze/internal.h"
#include "lib/analyze/roofline.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

#define SHAPELESS_STOP 2000
#define MAX_ARGS 32

/* One CPU op with shapes. */
struct cop {
    double ts, dur;
    int64_t tid, ext;
    char *name, *key;    /* owned; key: "Input Dims" and "Input type" as compact JSON */
    int cls, elt;        /* swift_rf_class; bytes per element of the first tensor input */
    double flops, bytes; /* < 0: no formula fits the shapes */
    long owner;          /* the op its kernels' time goes to (itself or an ancestor), -1 */
    double dev_us;
};

struct ctx {
    struct cop *op;
    size_t n, cap;
    long seen, shaped; /* CPU ops read, those with "Input Dims" */
};

static int64_t int_of(json_t *v)
{
    if (json_is_integer(v))
        return (int64_t)json_integer_value(v);
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        char *end;
        long long x = strtoll(s, &end, 10);
        if (end != s)
            return (int64_t)x;
    }
    return INT64_MIN;
}

/* The index of is_causal in the op's arguments (Concrete Inputs), or -1. */
static int causal_arg(const char *name)
{
    static const struct {
        const char *op;
        int idx;
    } t[] = {{"aten::scaled_dot_product_attention", 5},
             {"aten::_scaled_dot_product_flash_attention", 4},
             {"aten::_scaled_dot_product_flash_attention_for_cpu", 4},
             {"aten::_scaled_dot_product_efficient_attention", 6},
             {"aten::_scaled_dot_product_cudnn_attention", 7},
             {"aten::_scaled_dot_product_flash_attention_backward", 11},
             {"aten::_scaled_dot_product_efficient_attention_backward", 8}};
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
        if (!strcmp(t[i].op, name))
            return t[i].idx;
    return -1;
}

/* "[2, 2]" into v (at most 3); the count, or 0. */
static int int_list(const char *s, int64_t *v)
{
    int n = 0;
    if (!s || *s != '[')
        return 0;
    s++;
    while (*s && *s != ']' && n < 3) {
        char *end;
        long long x = strtoll(s, &end, 10);
        if (end == s)
            return 0;
        v[n++] = (int64_t)x;
        s = end;
        while (*s == ',' || *s == ' ')
            s++;
    }
    return *s == ']' ? n : 0;
}

/* Stride, padding and dilation of a forward convolution from "Concrete Inputs" (recorded by
 * newer profilers): convolution, _convolution and convN d take them at 3, 4, 5. */
static void conv_extra(const char *name, json_t *conc, struct swift_rf_extra *x)
{
    if (strcmp(name, "aten::convolution") && strcmp(name, "aten::_convolution") &&
        strcmp(name, "aten::conv1d") && strcmp(name, "aten::conv2d") &&
        strcmp(name, "aten::conv3d"))
        return;
    int a = int_list(json_string_value(json_array_get(conc, 3)), x->stride);
    int b = int_list(json_string_value(json_array_get(conc, 4)), x->padding);
    int c = int_list(json_string_value(json_array_get(conc, 5)), x->dilation);
    if (a && a == b && b == c)
        x->nsp = a;
}

static void cost_of(struct cop *o, json_t *dims, json_t *types, json_t *conc)
{
    struct swift_rf_tensor in[MAX_ARGS];
    size_t n = json_array_size(dims) < MAX_ARGS ? json_array_size(dims) : MAX_ARGS;
    o->elt = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *d = json_array_get(dims, i);
        struct swift_rf_tensor *t = &in[i];
        memset(t, 0, sizeof(*t));
        if (json_array_size(d) > SWIFT_RF_MAXDIM)
            continue;
        t->ndim = (int)json_array_size(d);
        for (int j = 0; j < t->ndim; j++)
            t->d[j] = json_integer_value(json_array_get(d, (size_t)j));
        t->elt = swift_rf_dtype_size(json_string_value(json_array_get(types, i)));
        if (t->ndim && !o->elt)
            o->elt = t->elt;
    }
    struct swift_rf_extra x = {0};
    int ci = causal_arg(o->name);
    const char *cs = ci >= 0 ? json_string_value(json_array_get(conc, (size_t)ci)) : NULL;
    x.causal = cs && (!strcmp(cs, "True") || !strcmp(cs, "true") || !strcmp(cs, "1"));
    conv_extra(o->name, conc, &x);
    struct swift_rf_cost c;
    o->cls = swift_rf_class_of(o->name);
    if (swift_rf_cost(o->name, in, n, &x, &c) != SWIFT_RF_NONE) {
        o->flops = c.flops;
        o->bytes = c.bytes;
    } else {
        o->flops = o->bytes = -1;
    }
}

/* One CPU op with its name, times, thread, External id and the three record_shapes arrays
 * (borrowed); returns 0, or -2 to stop reading a trace without shapes. */
static int add_op(struct ctx *c, const char *name, double ts, double dur, int64_t tid, int64_t ext,
                  json_t *dims, json_t *types, json_t *conc)
{
    c->seen++;
    if (!json_is_array(dims) || !name) /* no record_shapes: stop (-2 is no error of the file) */
        return c->seen >= SHAPELESS_STOP && !c->shaped ? -2 : 0;
    c->shaped++;
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 1024;
        c->op = swift_xrealloc(c->op, c->cap * sizeof(*c->op));
    }
    struct cop *o = &c->op[c->n++];
    memset(o, 0, sizeof(*o));
    o->ts = ts;
    o->dur = dur;
    o->tid = tid;
    o->ext = ext;
    o->name = swift_xstrdup(name);
    json_t *k = json_pack("[OO]", dims, json_is_array(types) ? types : json_null());
    o->key = k ? json_dumps(k, JSON_COMPACT) : NULL;
    json_decref(k);
    if (!o->key)
        o->key = swift_xstrdup("");
    cost_of(o, dims, types, conc);
    o->owner = -1;
    return 0;
}

static int is_op(const char *ph, const char *cat)
{
    return ph && cat && !strcmp(ph, "X") && (!strcmp(cat, "cpu_op") || !strcmp(cat, "Operator"));
}

/* Events the fast scanner leaves to jansson. */
static int on_event(void *vctx, json_t *ev, uint64_t off, long line)
{
    (void)off;
    (void)line;
    if (!is_op(json_string_value(json_object_get(ev, "ph")),
               json_string_value(json_object_get(ev, "cat"))))
        return 0;
    json_t *args = json_object_get(ev, "args");
    int64_t ext = int_of(json_object_get(args, "External id"));
    if (ext == INT64_MIN)
        ext = int_of(json_object_get(args, "external id"));
    return add_op(vctx,
                  json_string_value(json_object_get(ev, "name")),
                  json_number_value(json_object_get(ev, "ts")),
                  json_number_value(json_object_get(ev, "dur")),
                  int_of(json_object_get(ev, "tid")),
                  ext,
                  json_object_get(args, "Input Dims"),
                  json_object_get(args, "Input type"),
                  json_object_get(args, "Concrete Inputs"));
}

static double fv_num(const struct swift_an_fval *v)
{
    return v->t == SWIFT_AN_FV_INT ? (double)v->i : v->t == SWIFT_AN_FV_REAL ? v->d : NAN;
}

static int64_t fv_int(const struct swift_an_fval *v)
{
    if (v->t == SWIFT_AN_FV_INT)
        return v->i;
    if (v->t == SWIFT_AN_FV_STR) {
        char b[32], *end;
        size_t n = v->len < sizeof(b) - 1 ? v->len : sizeof(b) - 1;
        memcpy(b, v->s, n);
        b[n] = 0;
        long long x = strtoll(b, &end, 10);
        if (end != b)
            return (int64_t)x;
    }
    return INT64_MIN;
}

/* An array arg's JSON text (the fast scanner's s/len) parsed, or NULL. */
static json_t *fv_json(const struct swift_an_fval *v)
{
    if (v->t != SWIFT_AN_FV_OTHER || !v->s || !v->len || v->s[0] != '[')
        return NULL;
    return json_loadb(v->s, v->len, 0, NULL);
}

/* Events the fast scanner read: ph, name and cat are NUL-terminated in place. */
static int on_fast(void *vctx, const struct swift_an_fev *f, uint64_t off, long line)
{
    (void)off;
    (void)line;
    if (f->ph.t != SWIFT_AN_FV_STR || f->cat.t != SWIFT_AN_FV_STR || !is_op(f->ph.s, f->cat.s))
        return 0;
    int64_t ext = fv_int(&f->a[AK_EXT]);
    if (ext == INT64_MIN)
        ext = fv_int(&f->a[AK_EXT_LC]);
    json_t *dims = fv_json(&f->a[AK_DIMS]), *types = NULL, *conc = NULL;
    if (dims) {
        types = fv_json(&f->a[AK_TYPES]);
        conc = fv_json(&f->a[AK_CONC]);
    }
    int rc = add_op(vctx,
                    f->name.t == SWIFT_AN_FV_STR ? f->name.s : NULL,
                    fv_num(&f->ts),
                    fv_num(&f->dur),
                    fv_int(&f->tid),
                    ext,
                    dims,
                    types,
                    conc);
    json_decref(dims);
    json_decref(types);
    json_decref(conc);
    return rc;
}

static int cmp_nest(const void *a, const void *b)
{
    const struct cop *x = a, *y = b;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    if (x->ts != y->ts)
        return x->ts < y->ts ? -1 : 1;
    return (x->dur < y->dur) - (x->dur > y->dur);
}

/* Each op's owner: the outermost enclosing op whose formula fits its shapes (aten::linear
 * over aten::addmm, cudnn_convolution_backward over its _input and _weight parts), else the
 * op itself when it has a formula class, else the nearest ancestor that has an owner. */
static void set_owners(struct cop *op, size_t n)
{
    size_t *stack = swift_xmalloc((n + 1) * sizeof(*stack)), ns = 0;
    for (size_t i = 0; i < n; i++) {
        while (ns && (op[stack[ns - 1]].tid != op[i].tid ||
                      op[i].ts >= op[stack[ns - 1]].ts + op[stack[ns - 1]].dur))
            ns--;
        long up = ns ? op[stack[ns - 1]].owner : -1;
        if (up >= 0 && op[up].flops >= 0)
            op[i].owner = up;
        else if (op[i].cls != SWIFT_RF_NONE)
            op[i].owner = (long)i;
        else
            op[i].owner = up;
        stack[ns++] = i;
    }
    free(stack);
}

/* One row: an op name and input shape. */
struct row {
    const struct cop *first;
    long calls, costed;
    double dev_us, flops, bytes, costed_us;
};

static int cmp_key(const void *a, const void *b)
{
    const struct cop *x = *(const struct cop *const *)a, *y = *(const struct cop *const *)b;
    int c = strcmp(x->name, y->name);
    return c ? c : strcmp(x->key, y->key);
}

static int cmp_row(const void *a, const void *b)
{
    const struct row *x = a, *y = b;
    return (x->dev_us < y->dev_us) - (x->dev_us > y->dev_us);
}

/* The deviceProperties name of device dev (or the first one), NULL when none. */
static const char *device_name(const struct swift_an_source *s, int dev)
{
    json_t *props = json_object_get(s->meta, "deviceProperties"), *d;
    size_t i;
    json_array_foreach(props, i, d)
    {
        if (dev < 0 || json_integer_value(json_object_get(d, "id")) == dev)
            return json_string_value(json_object_get(d, "name"));
    }
    return dev >= 0 ? device_name(s, -1) : NULL;
}

static json_t *num(double v, double scale)
{
    return isfinite(v) ? json_real(round(v * scale) / scale) : json_null();
}

static json_t *row_json(const struct row *r, double span_us, const char *device)
{
    json_t *key = json_loads(r->first->key, 0, NULL);
    double fl = r->costed ? r->flops : NAN, by = r->costed ? r->bytes : NAN;
    double us = r->costed_us;
    struct swift_rf_peak pk;
    int has_peak = device && swift_rf_peak(device, r->first->elt, &pk) == 0;
    double frac = has_peak && r->costed ? swift_rf_fraction(fl, by, us, &pk) : NAN;
    double ai = by > 0 ? fl / by : NAN;
    const char *bound = NULL;
    if (has_peak && isfinite(ai))
        bound = ai * pk.tbps < pk.tflops ? "memory" : "compute";
    json_t *o = json_pack("{s:s,s:s,s:O,s:O,s:I,s:o,s:o}",
                          "name",
                          r->first->name,
                          "class",
                          swift_rf_class_name(r->first->cls),
                          "input_dims",
                          json_array_get(key, 0) ? json_array_get(key, 0) : json_null(),
                          "input_types",
                          json_array_get(key, 1) ? json_array_get(key, 1) : json_null(),
                          "calls",
                          (json_int_t)r->calls,
                          "device_us",
                          num(r->dev_us, 1e3),
                          "share",
                          span_us > 0 ? num(r->dev_us / span_us, 1e6) : json_null());
    json_object_set_new(o, "gflop", num(fl / 1e9, 1e6));
    json_object_set_new(o, "gb", num(by / 1e9, 1e6));
    json_object_set_new(o, "tflops", us > 0 ? num(fl / us / 1e6, 1e4) : json_null());
    json_object_set_new(o, "tbps", us > 0 ? num(by / us / 1e6, 1e4) : json_null());
    json_object_set_new(o, "intensity", num(ai, 1e3));
    json_object_set_new(o, "bound", bound ? json_string(bound) : json_null());
    json_object_set_new(o, "roofline_fraction", num(frac, 1e4));
    double lost = isfinite(frac) ? us * (1 - (frac < 1 ? frac : 1)) : NAN;
    json_object_set_new(o, "lost_us", num(lost, 1e3));
    json_decref(key);
    return o;
}

/* Device time of kernels and memsets by their op (within the steps when there are); memcpys
 * are left out: a host-device copy runs at the link's speed, not against device memory. */
static int kernel_times(const struct swift_an_set *set, const struct swift_an_proc *p,
                        struct cop *op, size_t n, double *span_us)
{
    const struct swift_an_source *s = p->src;
    struct swift_an_imap ext = {0};
    for (size_t i = 0; i < n; i++)
        if (op[i].ext != INT64_MIN && op[i].owner >= 0)
            swift_an_imap_put(&ext, op[i].ext, (double)op[i].owner);
    uint32_t kc[4] = {swift_an_lookup(&set->strs, "kernel"),
                      swift_an_lookup(&set->strs, "Kernel"),
                      swift_an_lookup(&set->strs, "gpu_memset"),
                      swift_an_lookup(&set->strs, "Memset")};
    int dev = -1;
    *span_us = 0;
    for (size_t i = 0; i < p->nsteps; i++)
        *span_us += p->steps[i].dur;
    if (!p->nsteps)
        *span_us = p->t1 - p->t0;
    for (size_t i = 0; i < s->n; i++) {
        const struct swift_an_ev *e = &s->ev[i];
        int k = 0;
        for (int j = 0; j < 4; j++)
            k |= e->cat == kc[j] && kc[j] != SWIFT_AN_NONE;
        double owner;
        if (!k || e->ext < 0 || !swift_an_imap_get(&ext, e->ext, &owner))
            continue;
        if (p->nsteps) {
            double t = e->ts - s->clock_offset_us;
            int in = 0;
            for (size_t j = 0; j < p->nsteps && !in; j++)
                in = t >= p->steps[j].ts && t < p->steps[j].ts + p->steps[j].dur;
            if (!in)
                continue;
        }
        if (dev < 0 && e->dev >= 0)
            dev = e->dev;
        op[(size_t)owner].dev_us += e->dur;
    }
    swift_an_imap_free(&ext);
    return dev;
}

json_t *swift_an_oproof_json(const struct swift_an_set *set, const struct swift_an_proc *p, int top)
{
    const struct swift_an_source *s = p->src;
    if (s->kind != SWIFT_AN_KINETO || !p->has_kineto || !p->k.has_gpu || !s->path)
        return json_null();
    struct ctx c = {0};
    int rc = swift_an_stream_file_fast(s->path, on_event, on_fast, NULL, &c, NULL);
    json_t *out = json_null();
    if ((rc == 0 || c.shaped) && c.n) {
        swift_an_sort(c.op, c.n, sizeof(*c.op), cmp_nest);
        set_owners(c.op, c.n);
        double span_us;
        int dev = kernel_times(set, p, c.op, c.n, &span_us);
        const char *device = device_name(s, dev);
        const struct cop **by = swift_xmalloc(c.n * sizeof(*by));
        size_t nb = 0;
        for (size_t i = 0; i < c.n; i++)
            if (c.op[i].cls != SWIFT_RF_NONE)
                by[nb++] = &c.op[i];
        swift_an_sort(by, nb, sizeof(*by), cmp_key);
        struct row *rows = swift_xcalloc(nb + 1, sizeof(*rows));
        size_t nr = 0;
        for (size_t i = 0; i < nb; i++) {
            if (!nr || cmp_key(&rows[nr - 1].first, &by[i]))
                rows[nr++].first = by[i];
            struct row *r = &rows[nr - 1];
            r->calls++;
            r->dev_us += by[i]->dev_us;
            if (by[i]->flops >= 0) {
                r->costed++;
                r->flops += by[i]->flops;
                r->bytes += by[i]->bytes;
                r->costed_us += by[i]->dev_us;
            }
        }
        swift_an_sort(rows, nr, sizeof(*rows), cmp_row);
        json_t *a = json_array();
        size_t shown = 0;
        for (size_t i = 0; i < nr && shown < (size_t)top; i++)
            if (rows[i].dev_us > 0) {
                json_array_append_new(a, row_json(&rows[i], span_us, device));
                shown++;
            }
        struct swift_rf_peak p16, p32;
        int k16 = device && swift_rf_peak(device, 2, &p16) == 0;
        int k32 = device && swift_rf_peak(device, 4, &p32) == 0;
        out = json_pack("{s:o,s:o,s:o,s:o,s:I,s:o}",
                        "device",
                        device ? json_string(device) : json_null(),
                        "peak",
                        k16 ? json_pack("{s:o,s:o,s:o}",
                                        "tflops_16bit",
                                        num(p16.tflops, 1e3),
                                        "tflops_fp32",
                                        num(k32 ? p32.tflops : NAN, 1e3),
                                        "tbps",
                                        num(p16.tbps, 1e3))
                            : json_null(),
                        "span_us",
                        num(span_us, 1e3),
                        "ops_with_shapes",
                        json_integer((json_int_t)c.shaped),
                        "n_rows",
                        (json_int_t)nr,
                        "rows",
                        a);
        free(rows);
        free(by);
    }
    for (size_t i = 0; i < c.n; i++) {
        free(c.op[i].name);
        free(c.op[i].key);
    }
    free(c.op);
    return out;
}
