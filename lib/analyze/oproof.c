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
 * The shapes are kept while the file is loaded (swift_an_oproof_note: the fast scanner hands
 * the record_shapes arrays over as JSON text, interned per source), so the file is read once.
 */
#include "lib/analyze/breakdown.h"
#include "lib/analyze/internal.h"
#include "lib/analyze/roofline.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

#define MAX_ARGS 32

/* One CPU op with shapes. */
struct cop {
    double ts, dur;
    int64_t tid, ext;
    const char *name, *key; /* key: "Input Dims" and "Input type" as compact JSON */
    int cls, elt;           /* swift_rf_class; bytes per element of the first tensor input */
    double flops, bytes;    /* < 0: no formula fits the shapes */
    long owner;             /* the op its kernels' time goes to (itself or an ancestor), -1 */
    double dev_us;
};

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

/* An array arg as JSON text interned in s->shape_strs: the fast scanner's text, or the jansson
 * value dumped; SWIFT_AN_NONE when it is no array. */
static uint32_t arg_text(struct swift_an_source *s, const struct swift_an_fval *v, json_t *args,
                         const char *key)
{
    if (args) {
        json_t *a = json_object_get(args, key);
        if (!json_is_array(a))
            return SWIFT_AN_NONE;
        char *d = json_dumps(a, JSON_COMPACT);
        if (!d)
            return SWIFT_AN_NONE;
        uint32_t id = swift_an_intern(&s->shape_strs, d, strlen(d));
        free(d);
        return id;
    }
    if (v->t != SWIFT_AN_FV_OTHER || !v->s || !v->len || v->s[0] != '[')
        return SWIFT_AN_NONE;
    return swift_an_intern(&s->shape_strs, v->s, v->len);
}

void swift_an_oproof_note(struct swift_an_source *s, const struct swift_an_ev *ev,
                          const struct swift_an_fev *f, json_t *e)
{
    if (f->ph.t != SWIFT_AN_FV_STR || strcmp(f->ph.s, "X") || f->cat.t != SWIFT_AN_FV_STR ||
        f->name.t != SWIFT_AN_FV_STR)
        return;
    uint32_t dims;
    json_t *args = NULL;
    const struct swift_an_fval *sh = &f->a[AK_SHAPE], *fl = &f->a[AK_FLOPS];
    if (!strcmp(f->cat.s, "compute")) { /* our --profile op spans */
        if (sh->t != SWIFT_AN_FV_STR || !sh->len)
            return;
        dims = swift_an_intern(&s->shape_strs, sh->s, sh->len);
    } else if (!strcmp(f->cat.s, "cpu_op") || !strcmp(f->cat.s, "Operator")) {
        args = e ? json_object_get(e, "args") : NULL;
        dims = arg_text(s, &f->a[AK_DIMS], args, "Input Dims");
        if (dims == SWIFT_AN_NONE)
            return;
    } else {
        return;
    }
    if (s->nshape == s->capshape) {
        s->capshape = s->capshape ? s->capshape * 2 : 1024;
        s->shape = swift_xrealloc(s->shape, s->capshape * sizeof(*s->shape));
    }
    struct swift_an_shape *o = &s->shape[s->nshape++];
    o->ts = ev->ts;
    o->dur = ev->dur;
    o->tid = fv_int(&f->tid);
    o->ext = fv_int(&f->a[AK_EXT]);
    if (o->ext == INT64_MIN)
        o->ext = fv_int(&f->a[AK_EXT_LC]);
    o->name = ev->name;
    o->dims = dims;
    o->flops = fl->t == SWIFT_AN_FV_INT ? (double)fl->i : fl->t == SWIFT_AN_FV_REAL ? fl->d : NAN;
    o->types = o->conc = SWIFT_AN_NONE;
    if (strcmp(f->cat.s, "compute")) {
        o->types = arg_text(s, &f->a[AK_TYPES], args, "Input type");
        o->conc = arg_text(s, &f->a[AK_CONC], args, "Concrete Inputs");
    }
}

void swift_an_oproof_free(struct swift_an_source *s)
{
    struct swift_an_strtab *t = &s->shape_strs;
    for (uint32_t i = 0; i < t->n; i++)
        free(t->str[i]);
    free(t->str);
    free(t->slot);
    free(s->shape);
    memset(t, 0, sizeof(*t));
    s->shape = NULL;
    s->nshape = s->capshape = 0;
}

struct cop_set {
    struct cop *op;
    size_t n;
};

/* The shape table's JSON texts parsed, once per distinct text (NULL: not parsed yet). */
struct texts {
    const struct swift_an_strtab *t;
    json_t **v;
    char *done;
};

static json_t *text_json(struct texts *x, uint32_t id)
{
    if (id == SWIFT_AN_NONE || id >= x->t->n)
        return NULL;
    if (!x->done[id]) {
        x->done[id] = 1;
        x->v[id] = json_loads(x->t->str[id], 0, NULL);
    }
    return x->v[id];
}

/* The CPU ops with shapes of s, in file order, with their costs; *n the count. The keys are
 * interned in keys (freed by the caller). */
static struct cop *shaped_ops(const struct swift_an_set *set, const struct swift_an_source *s,
                              size_t *n, struct swift_an_strtab *keys)
{
    struct texts x = {&s->shape_strs,
                      swift_xcalloc(s->shape_strs.n + 1, sizeof(json_t *)),
                      swift_xcalloc(s->shape_strs.n + 1, 1)};
    struct cop *op = swift_xmalloc((s->nshape + 1) * sizeof(*op));
    struct swift_an_imap kid = {0}; /* dims << 32 | types -> key id */
    *n = 0;
    for (size_t i = 0; i < s->nshape; i++) {
        const struct swift_an_shape *e = &s->shape[i];
        json_t *dims = text_json(&x, e->dims);
        if (!json_is_array(dims))
            continue;
        json_t *types = text_json(&x, e->types), *conc = text_json(&x, e->conc);
        struct cop *o = &op[(*n)++];
        memset(o, 0, sizeof(*o));
        o->ts = e->ts;
        o->dur = e->dur;
        o->tid = e->tid;
        o->ext = e->ext;
        o->name = swift_an_str(&set->strs, e->name);
        int64_t kk = (int64_t)(((uint64_t)e->dims << 32) | e->types);
        double k;
        if (!swift_an_imap_get(&kid, kk, &k)) {
            json_t *j = json_pack("[OO]", dims, json_is_array(types) ? types : json_null());
            char *d = j ? json_dumps(j, JSON_COMPACT) : NULL;
            json_decref(j);
            k = (double)swift_an_intern(keys, d ? d : "", d ? strlen(d) : 0);
            free(d);
            swift_an_imap_put(&kid, kk, k);
        }
        o->key = swift_an_str(keys, (uint32_t)k);
        cost_of(o, dims, json_is_array(types) ? types : NULL, conc);
        o->owner = -1;
    }
    swift_an_imap_free(&kid);
    for (uint32_t i = 0; i < s->shape_strs.n; i++)
        json_decref(x.v[i]);
    free(x.v);
    free(x.done);
    return op;
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
    if (s->kind == SWIFT_AN_SWIFT)
        return swift_an_oproof_spans_json(set, p, top);
    if (s->kind != SWIFT_AN_KINETO || !p->has_kineto || !p->k.has_gpu || !s->path)
        return json_null();
    struct swift_an_strtab keys = {0};
    struct cop_set c = {0};
    c.op = shaped_ops(set, s, &c.n, &keys);
    json_t *out = json_null();
    if (c.n) {
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
                        json_integer((json_int_t)c.n),
                        "n_rows",
                        (json_int_t)nr,
                        "rows",
                        a);
        free(rows);
        free(by);
    }
    for (uint32_t i = 0; i < keys.n; i++)
        free(keys.str[i]);
    free(keys.str);
    free(keys.slot);
    free(c.op);
    return out;
}
