/*
 * analyze/oproof_spans — the op roofline table of our --profile traces, the counterpart of
 * oproof.c's for Kineto: per op span name and its "shape" arg (lib/model's spans:
 * "[N,K]x[M,K]^T" a linear x·Wᵀ, "[N,K]x[K,M]" a product, "B=1 T=32 NH=4 NKV=2 D=8" attention,
 * "[N,V]" the cross-entropy's logits), the calls, their time, FLOPs (the spans' args.flops),
 * bytes (roofline.h's formula of the op's class on the shape's tensors, fp32), achieved
 * GFLOP/s and its fraction of the peak the run recorded (the counter peak_gflops: --peak-gflops,
 * the device's table peak or the sgemm peak measured at start). See internal.h
 * (swift_an_oproof_spans_json).
 */
#include "lib/analyze/breakdown.h"
#include "lib/analyze/internal.h"
#include "lib/analyze/roofline.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

#define MAX_T 4

/* A shape string read: its tensors and the roofline.h op whose formula fits them. */
struct shape {
    int n;
    struct swift_rf_tensor t[MAX_T];
    const char *op; /* roofline.h's name, NULL when no formula fits */
};

/* "[32,64]" at *p into t; 0, or -1. */
static int dims_of(const char **p, struct swift_rf_tensor *t)
{
    const char *s = *p;
    memset(t, 0, sizeof(*t));
    if (*s++ != '[')
        return -1;
    while (*s != ']') {
        char *end;
        long long v = strtoll(s, &end, 10);
        if (end == s || v < 0 || t->ndim == SWIFT_RF_MAXDIM)
            return -1;
        t->d[t->ndim++] = (int64_t)v;
        s = end;
        if (*s == ',')
            s++;
        else if (*s != ']')
            return -1;
    }
    t->elt = 4;
    *p = s + 1;
    return 0;
}

/* "B=1 T=32 NH=4 NKV=2 D=8": q [B,NH,T,D], k and v [B,NKV,T,D] (the backward's dO first). */
static int attention_of(const char *s, int bwd, struct shape *sh)
{
    long long b, t, nh, nkv, d;
    char tail;
    if (sscanf(s, "B=%lld T=%lld NH=%lld NKV=%lld D=%lld%c", &b, &t, &nh, &nkv, &d, &tail) != 5)
        return -1;
    int64_t q[4] = {b, nh, t, d}, kv[4] = {b, nkv, t, d};
    sh->n = bwd ? 4 : 3;
    for (int i = 0; i < sh->n; i++) {
        struct swift_rf_tensor *x = &sh->t[i];
        memset(x, 0, sizeof(*x));
        x->ndim = 4;
        x->elt = 4;
        memcpy(x->d, i - bwd <= 0 ? q : kv, sizeof(q));
    }
    sh->op = bwd ? "_scaled_dot_product_flash_attention_backward" : "scaled_dot_product_attention";
    return 0;
}

/* The shape string of op span `name`; -1 when it is none of the forms above. */
static int shape_of(const char *name, const char *s, struct shape *sh)
{
    memset(sh, 0, sizeof(*sh));
    size_t nl = strlen(name);
    int bwd = nl > 9 && !strcmp(name + nl - 9, ".backward");
    if (s[0] == 'B')
        return attention_of(s, bwd, sh);
    int tr = 0;
    while (*s == '[' && sh->n < MAX_T) {
        if (dims_of(&s, &sh->t[sh->n++]) < 0)
            return -1;
        if (!strcmp(s, "^T")) {
            tr = 1;
            s += 2;
        }
        if (*s == 'x')
            s++;
    }
    if (*s)
        return -1;
    if (sh->n == 2)
        sh->op = tr ? "linear" : "mm";
    if (sh->n == 1 && strstr(name, "cross_entropy")) { /* logits [N,V], targets [N] int32 */
        struct swift_rf_tensor *tg = &sh->t[sh->n++];
        memset(tg, 0, sizeof(*tg));
        tg->ndim = 1;
        tg->d[0] = sh->t[0].d[0];
        tg->elt = 4;
        sh->op = "cross_entropy_loss";
    }
    return 0;
}

/* One row: an op name and shape string (ids), its spans summed. */
struct srow {
    uint32_t name, shape;
    long calls, costed;
    double us, flops, flops_us;
};

static int cmp_ids(const void *a, const void *b)
{
    const struct srow *x = a, *y = b;
    if (x->name != y->name)
        return x->name < y->name ? -1 : 1;
    return (x->shape > y->shape) - (x->shape < y->shape);
}

struct sort_ctx {
    const struct swift_an_strtab *names, *shapes;
};

static int cmp_time(const void *a, const void *b, void *arg)
{
    const struct srow *x = a, *y = b;
    const struct sort_ctx *c = arg;
    if (x->us != y->us)
        return (x->us < y->us) - (x->us > y->us);
    int k = strcmp(swift_an_str(c->names, x->name), swift_an_str(c->names, y->name));
    return k ? k : strcmp(swift_an_str(c->shapes, x->shape), swift_an_str(c->shapes, y->shape));
}

static json_t *num(double v, double scale)
{
    return isfinite(v) ? json_real(round(v * scale) / scale) : json_null();
}

static json_t *row_json(const struct srow *r, const char *name, const char *shape, double span_us,
                        double peak)
{
    struct shape sh;
    struct swift_rf_cost c = {0};
    int ok = shape_of(name, shape, &sh) == 0;
    int costed = ok && sh.op && swift_rf_cost(sh.op, sh.t, (size_t)sh.n, NULL, &c) != SWIFT_RF_NONE;
    json_t *dims = json_array(), *types = json_array();
    for (int i = 0; ok && i < sh.n; i++) {
        json_t *d = json_array();
        for (int j = 0; j < sh.t[i].ndim; j++)
            json_array_append_new(d, json_integer((json_int_t)sh.t[i].d[j]));
        json_array_append_new(dims, d);
        json_array_append_new(
            types,
            json_string(i == 1 && sh.n == 2 && c.cls == SWIFT_RF_CROSS_ENTROPY ? "int" : "float"));
    }
    double us = r->flops_us, fl = r->costed ? r->flops : NAN;
    double by = costed ? c.bytes * (double)r->costed : NAN;
    double gfs = us > 0 ? fl / us / 1e3 : NAN, frac = peak > 0 ? gfs / peak : NAN;
    json_t *o = json_pack("{s:s,s:s,s:s,s:o,s:o,s:I,s:o,s:o}",
                          "name",
                          name,
                          "class",
                          costed ? swift_rf_class_name(c.cls) : "",
                          "shape",
                          shape,
                          "input_dims",
                          ok ? dims : json_null(),
                          "input_types",
                          ok ? types : json_null(),
                          "calls",
                          (json_int_t)r->calls,
                          "device_us",
                          num(r->us, 1e3),
                          "share",
                          span_us > 0 ? num(r->us / span_us, 1e6) : json_null());
    if (!ok) {
        json_decref(dims);
        json_decref(types);
    }
    /* CPU-sized ops: to the FLOP and byte (a Kineto row's 6 decimals would round them off) */
    json_object_set_new(o, "gflop", num(fl / 1e9, 1e9));
    json_object_set_new(o, "gb", num(by / 1e9, 1e9));
    json_object_set_new(o, "gflops", num(gfs, 1e3));
    json_object_set_new(o, "tflops", us > 0 ? num(fl / us / 1e6, 1e4) : json_null());
    json_object_set_new(o, "tbps", us > 0 ? num(by / us / 1e6, 1e4) : json_null());
    json_object_set_new(o, "intensity", by > 0 ? num(fl / by, 1e3) : json_null());
    json_object_set_new(o, "bound", json_null()); /* no memory roof known for the CPU */
    json_object_set_new(o, "roofline_fraction", num(frac, 1e4));
    double lost = isfinite(frac) ? us * (1 - (frac < 1 ? frac : 1)) : NAN;
    json_object_set_new(o, "lost_us", num(lost, 1e3));
    return o;
}

/* The step ts (trace clock) lies in, -1 when none (step 0 when p has no steps: all of it). */
static long step_of(const struct swift_an_proc *p, double ts)
{
    return p->nsteps ? swift_an_step_of(p, ts) : 0;
}

json_t *swift_an_oproof_spans_json(const struct swift_an_set *set, const struct swift_an_proc *p,
                                   int top)
{
    const struct swift_an_source *s = p->src;
    if (!s->nshape)
        return json_null();
    struct srow *rows = swift_xcalloc(s->nshape, sizeof(*rows));
    char *in_step = swift_xcalloc(p->nsteps + 1, 1);
    size_t nr = 0, shaped = 0;
    for (size_t i = 0; i < s->nshape; i++) {
        const struct swift_an_shape *e = &s->shape[i];
        long k = step_of(p, e->ts - s->clock_offset_us);
        if (k < 0)
            continue;
        in_step[k] = 1;
        shaped++;
        struct srow *r = &rows[nr++];
        r->name = e->name;
        r->shape = e->dims;
        r->calls = 1;
        r->us = e->dur;
        if (isfinite(e->flops)) {
            r->costed = 1;
            r->flops = e->flops;
            r->flops_us = e->dur;
        }
    }
    swift_an_sort(rows, nr, sizeof(*rows), cmp_ids);
    size_t m = 0;
    for (size_t i = 0; i < nr; i++) {
        if (m && !cmp_ids(&rows[m - 1], &rows[i])) {
            struct srow *r = &rows[m - 1];
            r->calls++;
            r->costed += rows[i].costed;
            r->us += rows[i].us;
            r->flops += rows[i].flops;
            r->flops_us += rows[i].flops_us;
        } else {
            rows[m++] = rows[i];
        }
    }
    struct sort_ctx sc = {&set->strs, &s->shape_strs};
    swift_an_sort_r(rows, m, sizeof(*rows), cmp_time, &sc);
    double span_us = 0;
    for (size_t j = 0; j < p->nsteps; j++)
        span_us += in_step[j] ? p->steps[j].dur : 0;
    if (!p->nsteps)
        span_us = p->t1 - p->t0;
    double peak = s->peak_gflops;
    json_t *a = json_array();
    for (size_t i = 0; i < m && i < (size_t)top; i++)
        json_array_append_new(a,
                              row_json(&rows[i],
                                       swift_an_str(&set->strs, rows[i].name),
                                       swift_an_str(&s->shape_strs, rows[i].shape),
                                       span_us,
                                       peak));
    free(rows);
    free(in_step);
    if (!shaped) {
        json_decref(a);
        return json_null();
    }
    return json_pack("{s:s,s:o,s:o,s:o,s:I,s:I,s:o}",
                     "device",
                     s->device ? s->device : "cpu",
                     "peak",
                     peak > 0 ? json_pack("{s:o}", "gflops", num(peak, 1e3)) : json_null(),
                     "span_us",
                     num(span_us, 1e3),
                     "peak_gflops",
                     peak > 0 ? num(peak, 1e3) : json_null(),
                     "ops_with_shapes",
                     (json_int_t)shaped,
                     "n_rows",
                     (json_int_t)m,
                     "rows",
                     a);
}
