/*
 * analyze/tensorboard — the TensorBoard profiler plugin's numbers (its overview page): each
 * event's role (kernel > memcpy > memset > communication > runtime > DataLoader > CPU exec >
 * other), the steps (ProfilerStep#N, or our "step" spans) extended to the device work they
 * launched, each step's time claimed by the roles in that order, and GPU utilization over all
 * steps. See lib/analyze/kineto.h; the HTA numbers are in kineto.c.
 */
#include "lib/analyze/internal.h"
#include "lib/core/alloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

const char *const swift_an_tbrole_names[SWIFT_TB_NROLE] = {
    "kernel", "memcpy", "memset", "communication", "runtime", "data_loading", "cpu_exec", "other"};

enum tbtype {
    TB_NONE,
    TB_OP,
    TB_STEP,
    TB_RUNTIME,
    TB_KERNEL,
    TB_MEMCPY,
    TB_MEMSET,
    TB_PYTHON,
    TB_ANN,
    TB_TRACE
};

static int lower_eq(const char *a, const char *b)
{
    return strcasecmp(a, b) == 0;
}

static int tb_type(const char *cat, const char *name, int swift)
{
    if (swift) {
        /* our traces: the step thread's "step" spans are the steps; device events and
         * runtime calls carry Kineto's categories; other host spans are CPU work */
        if (!strcmp(cat, "step"))
            return !strcmp(name, "step") ? TB_STEP : TB_OP;
        if (!strcmp(cat, "kernel"))
            return TB_KERNEL;
        if (!strcmp(cat, "gpu_memcpy"))
            return TB_MEMCPY;
        if (!strcmp(cat, "gpu_memset"))
            return TB_MEMSET;
        if (!strcmp(cat, "cuda_runtime") || !strcmp(cat, "cuda_driver"))
            return TB_RUNTIME;
        if (!strcmp(cat, "flow") || !strcmp(cat, "profile"))
            return TB_NONE;
        return TB_OP;
    }
    if (lower_eq(cat, "cpu_op") || lower_eq(cat, "operator"))
        return !strncmp(name, "ProfilerStep#", 13) ? TB_STEP : TB_OP;
    if (lower_eq(cat, "user_annotation") || lower_eq(cat, "gpu_user_annotation"))
        return !strncmp(name, "ProfilerStep#", 13) ? TB_STEP : TB_ANN;
    if (lower_eq(cat, "runtime") || lower_eq(cat, "cuda_runtime"))
        return TB_RUNTIME;
    if (lower_eq(cat, "kernel"))
        return TB_KERNEL;
    if (lower_eq(cat, "memcpy") || lower_eq(cat, "gpu_memcpy"))
        return TB_MEMCPY;
    if (lower_eq(cat, "memset") || lower_eq(cat, "gpu_memset"))
        return TB_MEMSET;
    if (lower_eq(cat, "python"))
        return TB_PYTHON;
    if (lower_eq(cat, "trace"))
        return TB_TRACE;
    return TB_NONE;
}

static int is_comm_op(const char *n)
{
    static const char *const ops[] = {"nccl:broadcast",
                                      "nccl:reduce",
                                      "nccl:all_reduce",
                                      "nccl:all_gather",
                                      "nccl:reduce_scatter",
                                      "gloo:broadcast",
                                      "gloo:reduce",
                                      "gloo:all_reduce",
                                      "gloo:all_gather",
                                      "gloo:reduce_scatter",
                                      NULL};
    for (int i = 0; ops[i]; i++)
        if (!strcmp(n, ops[i]))
            return 1;
    return 0;
}

struct rt {
    double b, e;
    int64_t corr;
};
static int cmp_rt(const void *a, const void *b)
{
    const struct rt *x = a, *y = b;
    return (x->b > y->b) - (x->b < y->b);
}
struct stepdef {
    double b, e;
    int64_t n;
};
/* Is step i among the n longest? */
static int is_worst(const struct stepdef *st, size_t nsteps, size_t i, size_t n)
{
    size_t longer = 0;
    double d = st[i].e - st[i].b;
    for (size_t j = 0; j < nsteps && longer < n; j++)
        if (st[j].e - st[j].b > d || (st[j].e - st[j].b == d && j < i))
            longer++;
    return longer < n;
}

static int cmp_stepdef(const void *a, const void *b)
{
    const struct stepdef *x = a, *y = b;
    return (x->b > y->b) - (x->b < y->b);
}

/* Everything one pass over a source's events collects for the TensorBoard numbers. */
struct tb {
    const struct swift_an_source *s;
    const struct swift_an_strtab *st;
    int swift; /* our trace (SWIFT_AN_SWIFT) */
    struct swift_an_ivec role[SWIFT_TB_NROLE];
    struct swift_an_ivec kern_dev[SWIFT_AN_MAX_DEV];
    struct stepdef *steps;
    size_t nsteps;
    struct rt *rts;
    size_t nrt, crt;
    struct swift_an_imap comm_ext; /* external ids of communication ops */
    struct swift_an_imap dev;      /* correlation -> index into devc (one probe per device op) */
    struct devc {
        double min, max, cnt; /* device ops of one correlation: first start, last end, count */
    } * devc;
    size_t ndevc, cdevc;
    double cpu_min, cpu_max;
    double *dmin, *dmax; /* per step: the device ops it launched, first start and last end */
    long *matched;       /* per step: device ops launched inside it */
    /* per interned string (index n: a missing one, ""), computed once: */
    unsigned char *cty; /* as a category: tb_type + 1 for a non-step name | (step name) << 4 */
    unsigned char *nfl; /* as a name: NF_* bits */
};

enum { NF_DONE = 0x80, NF_STEP = 1, NF_COMM = 2, NF_DATALOADER = 4 };

static uint32_t tb_slot(const struct tb *t, uint32_t id)
{
    return id < t->st->n ? id : t->st->n;
}

static unsigned tb_name_flags(struct tb *t, uint32_t id)
{
    uint32_t k = tb_slot(t, id);
    if (!t->nfl[k]) {
        const char *nm = swift_an_str(t->st, id);
        size_t len = strlen(nm);
        int step = t->swift ? !strcmp(nm, "step") : !strncmp(nm, "ProfilerStep#", 13);
        int dl = (!strncmp(nm, "enumerate(DataLoader)#", 22) && len >= 9 &&
                  !strcmp(nm + len - 9, ".__next__")) ||
                 !strncmp(nm, "enumerate(DataPipe)#", 20);
        t->nfl[k] = (unsigned char)(NF_DONE | (step ? NF_STEP : 0) |
                                    (is_comm_op(nm) ? NF_COMM : 0) | (dl ? NF_DATALOADER : 0));
    }
    return t->nfl[k];
}

/* tb_type of an event: its name matters only as "a step name or not" */
static int tb_ev_type(struct tb *t, const struct swift_an_ev *e)
{
    uint32_t k = tb_slot(t, e->cat);
    if (!t->cty[k]) {
        const char *cat = swift_an_str(t->st, e->cat);
        int other = tb_type(cat, "", t->swift);
        int step = tb_type(cat, t->swift ? "step" : "ProfilerStep#", t->swift);
        t->cty[k] = (unsigned char)((other + 1) | (step + 1) << 4);
    }
    unsigned v = t->cty[k];
    return (int)((tb_name_flags(t, e->name) & NF_STEP ? v >> 4 : v & 15) - 1);
}

/* Pass 1: the external ids of communication ops. */
static void tb_comm_ops(struct tb *t)
{
    const struct swift_an_source *s = t->s;
    for (size_t i = 0; i < s->n; i++) {
        const struct swift_an_ev *e = &s->ev[i];
        if (e->cat == SWIFT_AN_NONE)
            continue;
        int ty = tb_ev_type(t, e);
        if ((ty == TB_OP || ty == TB_ANN || ty == TB_PYTHON) &&
            (tb_name_flags(t, e->name) & NF_COMM))
            swift_an_imap_put(&t->comm_ext, e->ext, 0);
    }
}

/* A kernel, memcpy or memset: its role, its device, and its correlation's first start and
 * last end (for the step extension). */
static void tb_device_op(struct tb *t, const struct swift_an_ev *e, int ty, double b, double en)
{
    if (ty == TB_KERNEL) {
        if (swift_an_imap_get(&t->comm_ext, e->ext, NULL))
            swift_an_ivec_push(&t->role[SWIFT_TB_COMM], b, en);
        else
            swift_an_ivec_push(&t->role[SWIFT_TB_KERNEL], b, en);
        /* Kineto: a GPU's pid is its device index; ours: args.device (device 0 when absent),
         * the pid being the process's */
        int64_t dev = t->swift ? (e->dev >= 0 ? e->dev : 0) : e->pid;
        if (dev >= 0 && dev < SWIFT_AN_MAX_DEV)
            swift_an_ivec_push(&t->kern_dev[dev], b, en);
    } else if (ty == TB_MEMCPY) {
        swift_an_ivec_push(&t->role[SWIFT_TB_MEMCPY], b, en);
    } else {
        swift_an_ivec_push(&t->role[SWIFT_TB_MEMSET], b, en);
    }
    size_t at = (size_t)*swift_an_imap_ref(&t->dev, e->corr, (double)t->ndevc);
    if (at == t->ndevc) {
        if (t->ndevc == t->cdevc) {
            t->cdevc = t->cdevc ? 2 * t->cdevc : 1024;
            t->devc = swift_xrealloc(t->devc, t->cdevc * sizeof(*t->devc));
        }
        t->devc[t->ndevc++] = (struct devc){b, en, 0};
    }
    struct devc *d = &t->devc[at];
    if (b < d->min)
        d->min = b;
    if (en > d->max)
        d->max = en;
    d->cnt += 1;
}

static void tb_cpu_span(struct tb *t, double b, double en)
{
    if (b < t->cpu_min)
        t->cpu_min = b;
    if (en > t->cpu_max)
        t->cpu_max = en;
}

/* A host op, annotation or Python span: DataLoader, communication or CPU work. */
static void tb_host_op(struct tb *t, int ty, uint32_t name, double b, double en)
{
    unsigned nf = tb_name_flags(t, name);
    if (nf & NF_DATALOADER) {
        if (ty != TB_PYTHON) {
            swift_an_ivec_push(&t->role[SWIFT_TB_DATALOADER], b, en);
            return;
        }
    }
    if (nf & NF_COMM)
        swift_an_ivec_push(&t->role[SWIFT_TB_COMM], b, en);
    else
        swift_an_ivec_push(&t->role[SWIFT_TB_CPU], b, en);
    if (ty != TB_ANN)
        tb_cpu_span(t, b, en);
}

/* Pass 2: role intervals, runtime calls, steps (sorted by start; one step over all CPU work
 * when the trace has none). */
static void tb_collect(struct tb *t)
{
    const struct swift_an_source *s = t->s;
    for (size_t i = 0; i < s->n; i++) {
        const struct swift_an_ev *e = &s->ev[i];
        if (e->cat == SWIFT_AN_NONE)
            continue;
        const char *nm = swift_an_str(t->st, e->name);
        int ty = tb_ev_type(t, e);
        double b = e->ts, en = e->ts + e->dur;
        switch (ty) {
        case TB_KERNEL:
        case TB_MEMCPY:
        case TB_MEMSET:
            tb_device_op(t, e, ty, b, en);
            break;
        case TB_RUNTIME:
            swift_an_ivec_push(&t->role[SWIFT_TB_RUNTIME], b, en);
            if (t->nrt == t->crt) {
                t->crt = t->crt ? 2 * t->crt : 1024;
                t->rts = swift_xrealloc(t->rts, t->crt * sizeof(*t->rts));
            }
            t->rts[t->nrt++] = (struct rt){b, en, e->corr};
            break;
        case TB_STEP: {
            int64_t n = t->swift ? (e->step >= 0 ? e->step : (int64_t)t->nsteps)
                                 : strtoll(nm + 13, NULL, 10);
            t->steps = swift_xrealloc(t->steps, (t->nsteps + 1) * sizeof(*t->steps));
            t->steps[t->nsteps++] = (struct stepdef){b, en, n};
            tb_cpu_span(t, b, en);
            break;
        }
        case TB_OP:
        case TB_ANN:
        case TB_PYTHON:
            tb_host_op(t, ty, e->name, b, en);
            break;
        default:
            break;
        }
    }
    if (!t->nsteps && t->cpu_min < t->cpu_max) {
        t->steps = swift_xmalloc(sizeof(*t->steps));
        t->steps[t->nsteps++] = (struct stepdef){t->cpu_min, t->cpu_max, 0};
    }
    swift_an_sort(t->steps, t->nsteps, sizeof(*t->steps), cmp_stepdef);
    swift_an_sort(t->rts, t->nrt, sizeof(*t->rts), cmp_rt);
}

/* _find_device_steps: per step, the device ops launched by runtime calls inside it (dmin,
 * dmax, matched). Returns the device ops matched over all steps. */
static long tb_device_steps(struct tb *t)
{
    size_t nsteps = t->nsteps;
    t->dmin = swift_xmalloc((nsteps + 1) * sizeof(double));
    t->dmax = swift_xmalloc((nsteps + 1) * sizeof(double));
    t->matched = swift_xcalloc(nsteps + 1, sizeof(long));
    size_t is = 0, ir = 0;
    double smin = INFINITY, smax = -INFINITY;
    long nmatched = 0;
    while (is < nsteps && ir < t->nrt) {
        const struct rt *r = &t->rts[ir];
        if (r->b < t->steps[is].b) {
            ir++;
        } else if (r->e <= t->steps[is].e) {
            double at;
            if (swift_an_imap_get(&t->dev, r->corr, &at)) {
                const struct devc *d = &t->devc[(size_t)at];
                double v = d->min, mx = d->max, cnt = d->cnt;
                if (v < smin)
                    smin = v;
                if (mx > smax)
                    smax = mx;
                t->matched[is] += (long)cnt;
                nmatched += (long)cnt;
            }
            ir++;
        } else if (r->b < t->steps[is].e) {
            ir++;
        } else {
            t->dmin[is] = smin, t->dmax[is] = smax;
            is++;
            smin = INFINITY, smax = -INFINITY;
        }
    }
    while (is < nsteps) {
        t->dmin[is] = smin, t->dmax[is] = smax;
        smin = INFINITY, smax = -INFINITY;
        is++;
    }
    return nmatched;
}

/* The end of the last device op that ends before step 0's first one (launched before the
 * first step, or not inside one), or step 0's start. */
static double tb_first_start(struct tb *t)
{
    const struct swift_an_source *s = t->s;
    double prev_end = t->steps[0].b;
    if (t->dmin[0] == INFINITY)
        return prev_end;
    for (size_t i = 0; i < s->n; i++) {
        const struct swift_an_ev *e = &s->ev[i];
        if (e->cat == SWIFT_AN_NONE)
            continue;
        int ty = tb_ev_type(t, e);
        if (ty != TB_KERNEL && ty != TB_MEMCPY && ty != TB_MEMSET)
            continue;
        double en = e->ts + e->dur;
        if (en < t->dmin[0] && en > prev_end)
            prev_end = en;
    }
    return prev_end;
}

/* Steps extended to the device work they launched, back to back; the tail steps whose device
 * work was cut off by the end of the trace are dropped. */
static void tb_extend_steps(struct tb *t)
{
    double prev_end = tb_first_start(t);
    for (size_t i = 0; i < t->nsteps; i++) {
        double b = prev_end > t->steps[i].b ? prev_end : t->steps[i].b;
        double e = t->steps[i].e;
        if (t->dmin[i] == INFINITY)
            e = e > b ? e : b;
        else {
            e = e > t->dmax[i] ? e : t->dmax[i];
            if (e < b)
                e = b;
        }
        t->steps[i].b = b, t->steps[i].e = e;
        prev_end = e;
    }
    if (t->nsteps > 1) {
        long i = (long)t->nsteps - 1;
        while (i >= 0 && t->matched[i] == 0)
            i--;
        if (i >= 0) {
            size_t keep = (size_t)i + 1;
            if (i > 0 && (double)t->matched[i - 1] * 0.8 > (double)t->matched[i])
                keep = (size_t)i;
            t->nsteps = keep;
        }
    }
}

/* Role ranges merged; then each step's time claimed in role order (the rest is "other"). */
static void tb_claim(struct tb *t, struct swift_an_kineto *k)
{
    size_t nsteps = t->nsteps;
    for (int r = 0; r < SWIFT_TB_NROLE - 1; r++)
        t->role[r].n = swift_an_ival_merge(t->role[r].v, t->role[r].n);
    k->steps = swift_xcalloc(nsteps + 1, sizeof(*k->steps));
    k->nsteps = nsteps;
    size_t cap = 16;
    for (int r = 0; r < SWIFT_TB_NROLE - 1; r++)
        cap += t->role[r].n;
    struct swift_an_ival *slots = swift_xmalloc(cap * sizeof(*slots)),
                         *tmp = swift_xmalloc(cap * sizeof(*tmp)),
                         *claim = swift_xmalloc(cap * sizeof(*claim));
    for (size_t i = 0; i < nsteps; i++) {
        struct swift_an_tbstep *ts = &k->steps[i];
        ts->step = t->steps[i].n;
        ts->b = t->steps[i].b;
        ts->e = t->steps[i].e;
        size_t ns = 1;
        slots[0] = (struct swift_an_ival){ts->b, ts->e};
        if (ts->e <= ts->b)
            ns = 0;
        double claimed = 0;
        int keep_segs = is_worst(t->steps, nsteps, i, SWIFT_AN_TIMELINE_STEPS);
        for (int r = 0; r < SWIFT_TB_NROLE - 1; r++) {
            const struct swift_an_ivec *role = &t->role[r];
            /* only the role intervals that can meet this step */
            size_t lo = swift_an_ival_find(role->v, role->n, ts->b), hi = lo;
            while (hi < role->n && role->v[hi].b < ts->e)
                hi++;
            size_t nc = swift_an_ival_and(slots, ns, role->v + lo, hi - lo, claim);
            ts->role[r] = swift_an_ival_len(claim, nc);
            claimed += ts->role[r];
            if (keep_segs)
                swift_an_seg_add(&ts->seg, &ts->nseg, r, claim, nc, (ts->e - ts->b) / 2000);
            ns = swift_an_ival_sub(slots, ns, claim, nc, tmp);
            memcpy(slots, tmp, ns * sizeof(*slots));
        }
        ts->role[SWIFT_TB_OTHER] = (ts->e - ts->b) - claimed;
        if (keep_segs)
            swift_an_seg_sort(ts->seg, ts->nseg);
        for (int r = 0; r < SWIFT_TB_NROLE; r++)
            k->avg[r] += ts->role[r] / (double)nsteps;
        k->avg_total += (ts->e - ts->b) / (double)nsteps;
    }
    free(slots);
    free(tmp);
    free(claim);
}

/* GPU utilization over all steps, per device; we report the first device with kernels. */
static void tb_gpu_util(struct tb *t, struct swift_an_kineto *k)
{
    k->gpu_util = -1;
    if (!k->nsteps)
        return;
    double lo = k->steps[0].b, hi = k->steps[k->nsteps - 1].e;
    for (int d = 0; d < SWIFT_AN_MAX_DEV; d++) {
        if (!t->kern_dev[d].n)
            continue;
        size_t n = swift_an_ival_merge(t->kern_dev[d].v, t->kern_dev[d].n);
        if (hi > lo) {
            k->gpu_util = swift_an_ival_len_in(t->kern_dev[d].v, n, lo, hi) / (hi - lo);
            break;
        }
    }
}

void swift_an_tensorboard(const struct swift_an_set *set, const struct swift_an_source *src,
                          struct swift_an_kineto *k)
{
    struct tb t = {.s = src,
                   .st = &set->strs,
                   .swift = src->kind == SWIFT_AN_SWIFT,
                   .cpu_min = INFINITY,
                   .cpu_max = -INFINITY};
    t.cty = swift_xcalloc(set->strs.n + 1, 1);
    t.nfl = swift_xcalloc(set->strs.n + 1, 1);
    tb_comm_ops(&t);
    tb_collect(&t);
    if (tb_device_steps(&t) > 0 && t.nsteps)
        tb_extend_steps(&t);
    tb_claim(&t, k);
    tb_gpu_util(&t, k);
    free(t.dmin);
    free(t.dmax);
    free(t.matched);
    free(t.steps);
    free(t.rts);
    free(t.cty);
    free(t.nfl);
    for (int r = 0; r < SWIFT_TB_NROLE; r++)
        swift_an_ivec_free(&t.role[r]);
    for (int d = 0; d < SWIFT_AN_MAX_DEV; d++)
        swift_an_ivec_free(&t.kern_dev[d]);
    swift_an_imap_free(&t.comm_ext);
    swift_an_imap_free(&t.dev);
    free(t.devc);
}
