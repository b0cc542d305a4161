/*
 * analyze/lanes — the worst step of a process, lane by lane: every span that runs during the
 * step, on its host thread (our traces' tid, Kineto's tid) or its GPU stream (args.stream of
 * kernels, copies and memsets), with its nesting depth, for the HTML report's timeline
 * ("worst_step" in docs/formats.md). Bounded: at most LANES_MAX lanes (the busiest), depths
 * below DEPTH_MAX, runs of tiny spans merged into one box, and at most BOXES_MAX boxes per lane
 * (the longest); what was left out is counted. Reads only; no analysis number depends on it.
 */
#include "lib/analyze/breakdown.h"
#include "lib/analyze/internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/core/banned.h"

#define LANES_MAX 12   /* lanes shown: the ones with the most span time */
#define DEPTH_MAX 6    /* nesting levels kept per lane */
#define BOXES_MAX 300  /* boxes per lane: the longest */
#define TINY_PX 2000.0 /* spans shorter than step / TINY_PX merge with their tiny neighbours */

struct lbox {
    const struct swift_an_ev *e;
    double b, e_; /* clipped to the step, µs from its start */
    int depth;
    long count; /* spans merged into this box */
    int mixed;  /* merged spans of several names */
    size_t lane;
};

struct lane {
    int gpu;      /* 1: a GPU stream, 0: a host thread */
    int64_t id;   /* tid or stream */
    int dev;      /* the stream's device, -1 */
    double busy;  /* span time at depth 0 */
    double first; /* first start */
    long spans, merged, deep, dropped;
    long shown; /* while choosing the lanes shown: the lane's index before sorting */
    int depth;
};

/* Kernels, copies and memsets: Kineto's "kernel", "gpu_memcpy", "gpu_memset",
 * "gpu_user_annotation" (older traces "Kernel", "Memcpy", "Memset"); ours the same names. */
static int is_gpu(const char *cat)
{
    return !strncmp(cat, "gpu_", 4) || !strcasecmp(cat, "kernel") || !strcasecmp(cat, "memcpy") ||
           !strcasecmp(cat, "memset");
}

/* The step spans themselves (ours: cat step; Kineto: ProfilerStep#N) and Python stack frames
 * (with_stack: dozens of levels above the ops) are not drawn. */
static int skipped(const char *cat, const char *name)
{
    return !strcmp(cat, "step") || !strncmp(name, "ProfilerStep#", 13) ||
           !strcmp(cat, "python_function") || !strcmp(cat, "Trace") || !strcmp(cat, "flow");
}

static int cmp_box(const void *a, const void *b)
{
    const struct lbox *x = a, *y = b;
    if (x->lane != y->lane)
        return x->lane < y->lane ? -1 : 1;
    if (x->b != y->b)
        return x->b < y->b ? -1 : 1;
    return (x->e_ < y->e_) - (x->e_ > y->e_); /* the parent first */
}

/* Boxes of one lane and depth in time order for merging: by depth, then start. */
static int cmp_depth(const void *a, const void *b)
{
    const struct lbox *x = a, *y = b;
    if (x->depth != y->depth)
        return x->depth < y->depth ? -1 : 1;
    return (x->b > y->b) - (x->b < y->b);
}

static int cmp_len(const void *a, const void *b)
{
    const struct lbox *x = a, *y = b;
    double lx = x->e_ - x->b, ly = y->e_ - y->b;
    return (lx < ly) - (lx > ly);
}

static size_t lane_of(struct lane **ls, size_t *n, int gpu, int64_t id, int dev)
{
    for (size_t i = 0; i < *n; i++)
        if ((*ls)[i].gpu == gpu && (*ls)[i].id == id && (*ls)[i].dev == dev)
            return i;
    *ls = swift_xrealloc(*ls, (*n + 1) * sizeof(**ls));
    (*ls)[*n] = (struct lane){.gpu = gpu, .id = id, .dev = dev, .first = INFINITY};
    return (*n)++;
}

/* Nesting depth within each lane (bx sorted by lane, start, longest first): the spans still
 * open when a span starts are its ancestors. */
static void depths(struct lbox *bx, size_t n, struct lane *ls)
{
    double open[64];
    int nopen = 0;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || bx[i].lane != bx[i - 1].lane)
            nopen = 0;
        while (nopen && open[nopen - 1] <= bx[i].b + SWIFT_AN_NEST_TOL / 2)
            nopen--;
        bx[i].depth = nopen;
        if (nopen < 64)
            open[nopen++] = bx[i].e_;
        struct lane *l = &ls[bx[i].lane];
        l->spans++;
        if (!bx[i].depth)
            l->busy += bx[i].e_ - bx[i].b;
        if (bx[i].b < l->first)
            l->first = bx[i].b;
    }
}

/* One pass over boxes sorted by depth and start: a box shorter than `tiny` joins the box before
 * it at its depth when that one is short too (under 4 tiny) and the gap under tiny. Returns the
 * boxes left. */
static size_t merge_pass(struct lbox *bx, size_t k, double tiny)
{
    size_t m = 0;
    for (size_t i = 0; i < k; i++) {
        struct lbox *prev = m ? &bx[m - 1] : NULL;
        double pw = prev ? prev->e_ - prev->b : 0;
        if (prev && bx[i].e_ - bx[i].b < tiny && prev->depth == bx[i].depth &&
            pw < (prev->count > 1 ? 4 * tiny : tiny) && bx[i].b - prev->e_ < tiny) {
            prev->mixed |= bx[i].mixed || prev->e->name != bx[i].e->name;
            prev->e_ = fmax(prev->e_, bx[i].e_);
            prev->count += bx[i].count;
            continue;
        }
        bx[m++] = bx[i];
    }
    return m;
}

/* One lane's boxes (bx[0..n), any order) bounded: too deep dropped, runs of tiny neighbours at
 * one depth merged (coarser until BOXES_MAX boxes or 1/400 of the step), then the BOXES_MAX
 * longest kept, in time order. Returns the boxes kept. */
static size_t bound_lane(struct lbox *bx, size_t n, struct lane *l, double tiny, double dur)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (bx[i].depth >= DEPTH_MAX) {
            l->deep++;
            continue;
        }
        bx[k++] = bx[i];
    }
    swift_an_sort(bx, k, sizeof(*bx), cmp_depth);
    size_t m = merge_pass(bx, k, tiny);
    for (double t = 2 * tiny; m > BOXES_MAX && t <= dur / 400; t *= 2)
        m = merge_pass(bx, m, t);
    l->merged = (long)k - (long)m;
    if (m > BOXES_MAX) {
        swift_an_sort(bx, m, sizeof(*bx), cmp_len);
        for (size_t i = BOXES_MAX; i < m; i++)
            l->dropped += bx[i].count;
        l->merged -= l->dropped - (long)(m - BOXES_MAX); /* spans of dropped boxes: dropped */
        m = BOXES_MAX;
    }
    swift_an_sort(bx, m, sizeof(*bx), cmp_box);
    return m;
}

static double r3(double v)
{
    return round(v * 1000) / 1000;
}

static json_t *lane_json(const struct swift_an_set *set, const struct lane *l, struct lbox *bx,
                         size_t n, json_t *cats)
{
    char label[96];
    const struct swift_an_strtab *st = &set->strs;
    if (l->gpu && l->dev >= 0)
        snprintf(label, sizeof(label), "GPU %d stream %" PRId64, l->dev, l->id);
    else if (l->gpu)
        snprintf(label, sizeof(label), "stream %" PRId64, l->id);
    else if (l->id <= -1000000) /* a thread named by a string (load.h) */
        snprintf(label, sizeof(label), "thread %s", swift_an_str(st, (uint32_t)(-1000000 - l->id)));
    else
        snprintf(label, sizeof(label), "CPU thread %" PRId64, l->id);
    json_t *boxes = json_array();
    int depth = 0;
    for (size_t i = 0; i < n; i++) {
        const char *cat = swift_an_str(st, bx[i].e->cat);
        size_t c, nc = json_array_size(cats);
        for (c = 0; c < nc && strcmp(json_string_value(json_array_get(cats, c)), cat); c++)
            ;
        if (c == nc)
            json_array_append_new(cats, json_string(cat));
        char name[160];
        if (bx[i].count > 1 && bx[i].mixed)
            snprintf(name, sizeof(name), "%ld short spans", bx[i].count);
        else
            swift_an_trunc_name(name, sizeof(name), swift_an_str(st, bx[i].e->name));
        json_array_append_new(boxes,
                              json_pack("[f,f,i,s,i,I]",
                                        r3(bx[i].b),
                                        r3(bx[i].e_),
                                        bx[i].depth,
                                        name,
                                        (int)c,
                                        (json_int_t)bx[i].count));
        depth = bx[i].depth + 1 > depth ? bx[i].depth + 1 : depth;
    }
    return json_pack("{s:s,s:I,s:s,s:i,s:I,s:I,s:I,s:I,s:o}",
                     "kind",
                     l->gpu ? "stream" : "thread",
                     "id",
                     (json_int_t)l->id,
                     "label",
                     label,
                     "depth",
                     depth,
                     "spans",
                     (json_int_t)l->spans,
                     "merged",
                     (json_int_t)l->merged,
                     "too_deep",
                     (json_int_t)l->deep,
                     "dropped",
                     (json_int_t)l->dropped,
                     "boxes",
                     boxes);
}

/* Host threads first (in order of their first span), then streams by device and number. */
static int cmp_lane_order(const void *a, const void *b)
{
    const struct lane *x = a, *y = b;
    if (x->gpu != y->gpu)
        return x->gpu - y->gpu;
    if (x->gpu)
        return x->dev != y->dev ? (x->dev > y->dev) - (x->dev < y->dev)
                                : (x->id > y->id) - (x->id < y->id);
    return (x->first > y->first) - (x->first < y->first);
}

static int cmp_lane_busy(const void *a, const void *b)
{
    const struct lane *x = a, *y = b;
    return (x->busy < y->busy) - (x->busy > y->busy);
}

/* The spans of the step [lo, hi) (aligned clock) as boxes with their lanes. */
static struct lbox *collect(const struct swift_an_set *set, const struct swift_an_proc *p,
                            double lo, double hi, struct lane **ls, size_t *nl, size_t *nb)
{
    const struct swift_an_source *s = p->src;
    const struct swift_an_strtab *st = &set->strs;
    double off = s->clock_offset_us;
    struct lbox *bx = NULL;
    size_t n = 0, cap = 0;
    for (size_t i = 0; i < s->n; i++) {
        const struct swift_an_ev *e = &s->ev[i];
        double b = e->ts - off, en = b + e->dur;
        if (!(e->dur > 0) || en <= lo || b >= hi)
            continue;
        const char *cat = swift_an_str(st, e->cat);
        if (skipped(cat, swift_an_str(st, e->name)))
            continue;
        int gpu = e->stream >= 0 && is_gpu(cat);
        if (n == cap) {
            cap = cap ? 2 * cap : 1024;
            bx = swift_xrealloc(bx, cap * sizeof(*bx));
        }
        bx[n++] = (struct lbox){
            .e = e,
            .b = (b < lo ? lo : b) - lo,
            .e_ = (en > hi ? hi : en) - lo,
            .count = 1,
            .lane = lane_of(ls, nl, gpu, gpu ? e->stream : e->tid, gpu ? e->dev : -1)};
    }
    *nb = n;
    return bx;
}

json_t *swift_an_lanes_json(const struct swift_an_set *set, const struct swift_an_proc *p)
{
    if (!p->nsteps)
        return json_null();
    size_t *worst;
    swift_an_worst_steps(p, 1, &worst);
    const struct swift_an_step *sp = &p->steps[worst[0]];
    free(worst);
    struct lane *ls = NULL;
    size_t nl = 0, nb;
    struct lbox *bx = collect(set, p, sp->ts, sp->ts + sp->dur, &ls, &nl, &nb);
    swift_an_sort(bx, nb, sizeof(*bx), cmp_box);
    depths(bx, nb, ls);
    /* the lanes kept: the busiest LANES_MAX, shown in lane order; map old index -> new */
    size_t *rank = swift_xmalloc((nl + 1) * sizeof(*rank));
    struct lane *sorted = swift_xmalloc((nl + 1) * sizeof(*sorted));
    if (nl) /* ls is NULL when the step holds no span */
        memcpy(sorted, ls, nl * sizeof(*ls));
    for (size_t i = 0; i < nl; i++)
        sorted[i].shown = (long)i; /* remember the old index */
    swift_an_sort(sorted, nl, sizeof(*sorted), cmp_lane_busy);
    size_t keep = nl < LANES_MAX ? nl : LANES_MAX;
    swift_an_sort(sorted, keep, sizeof(*sorted), cmp_lane_order);
    for (size_t i = 0; i < nl; i++)
        rank[i] = SIZE_MAX;
    for (size_t i = 0; i < keep; i++)
        rank[sorted[i].shown] = i;
    size_t m = 0;
    for (size_t i = 0; i < nb; i++)
        if (rank[bx[i].lane] != SIZE_MAX) {
            bx[m] = bx[i];
            bx[m++].lane = rank[bx[i].lane];
        }
    swift_an_sort(bx, m, sizeof(*bx), cmp_box);
    json_t *lanes = json_array(), *cats = json_array();
    double tiny = sp->dur / TINY_PX;
    for (size_t i = 0, j; i < m; i = j) {
        for (j = i; j < m && bx[j].lane == bx[i].lane; j++)
            ;
        struct lane *l = &sorted[bx[i].lane];
        size_t k = bound_lane(bx + i, j - i, l, tiny, sp->dur);
        json_array_append_new(lanes, lane_json(set, l, bx + i, k, cats));
    }
    json_t *o = json_pack("{s:I,s:f,s:f,s:i,s:i,s:[s,s,s,s,s,s],s:o,s:o}",
                          "step",
                          (json_int_t)sp->step,
                          "ts",
                          sp->ts,
                          "dur_us",
                          r3(sp->dur),
                          "lanes_seen",
                          (int)nl,
                          "lanes_shown",
                          (int)keep,
                          "box_columns",
                          "start_us",
                          "end_us",
                          "depth",
                          "name",
                          "category",
                          "count",
                          "categories",
                          cats,
                          "lanes",
                          lanes);
    free(rank);
    free(sorted);
    free(ls);
    free(bx);
    return o;
}

static int cmp_step_max(const void *a, const void *b, void *arg)
{
    const struct swift_an_proc *ps = arg;
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    double x = ps[i].step_max, y = ps[j].step_max;
    if (x != y)
        return (x < y) - (x > y);
    return (i > j) - (i < j); /* ties: the earlier process (qsort_r need not be stable) */
}

char *swift_an_lanes_pick(const struct swift_an_proc *ps, size_t n)
{
    char *keep = swift_xcalloc(n + 1, 1);
    if (n <= SWIFT_AN_RANKS_DETAIL) {
        for (size_t i = 0; i < n; i++)
            keep[i] = ps[i].nsteps > 0;
        return keep;
    }
    size_t *idx = swift_xmalloc((n + 1) * sizeof(*idx)), m = 0;
    for (size_t i = 0; i < n; i++)
        if (ps[i].nsteps)
            idx[m++] = i;
    swift_an_sort_r(idx, m, sizeof(*idx), cmp_step_max, (void *)ps);
    for (size_t i = 0; i < m && i < SWIFT_AN_LANES_PROCS; i++)
        keep[idx[i]] = 1;
    free(idx);
    return keep;
}
