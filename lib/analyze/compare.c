/*
 * analyze/compare — two runs side by side: HTA TraceDiff's per-op counts and durations, step
 * time by part, HTA's temporal breakdown, bottlenecks resolved and new, the regression gate.
 * See lib/analyze/compare.h; the renderings are in compare_report.c.
 */
#include "lib/analyze/compare.h"
#include "lib/analyze/internal.h"
#include "lib/analyze/merge.h"
#include "lib/analyze/report.h"
#include "lib/core/alloc.h"
#include "lib/core/fileio.h"
#include "lib/core/trace.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

/* ---------- one side: load and analyse ---------- */

int swift_an_side_load(struct swift_an_side *sd, const char *path,
                       const struct swift_analyze_opts *o)
{
    memset(sd, 0, sizeof(*sd));
    sd->path = path;
    swift_an_set_init(&sd->set);
    struct swift_an_set *set = &sd->set;
    int64_t t0 = swift_trace_now();
    if (swift_an_load_path(set, path, SWIFT_AN_LOAD_RECURSE) < 0)
        set->nfailed++;
    struct swift_targ a[] = {SWIFT_TARG_S("path", path),
                             SWIFT_TARG_I("events", (int64_t)set->kept)};
    swift_trace_span("io", "load", t0, swift_trace_now(), a, 2);
    if (set->bad_lines && o->strict) {
        swift_an_damage_strict(set);
        return SWIFT_FAILED;
    }
    if (set->nfailed && o->strict)
        return swift_error("'%s': %d input%s could not be read (--strict)",
                           path,
                           set->nfailed,
                           set->nfailed > 1 ? "s" : "");
    if (!set->n)
        return swift_error("'%s': no trace could be read", path);
    if (set->nfailed)
        swift_warn("'%s': %d input%s skipped, %zu analysed",
                   path,
                   set->nfailed,
                   set->nfailed > 1 ? "s" : "",
                   set->n);
    swift_an_procs_build(set, o, &sd->procs, &sd->nprocs);
    sd->report = swift_an_report_build(set, sd->procs, sd->nprocs, o);
    return 0;
}

void swift_an_side_release(struct swift_an_side *sd)
{
    json_decref(sd->report);
    if (sd->procs)
        swift_an_procs_free(sd->procs, sd->nprocs);
    swift_an_set_release(&sd->set);
    memset(sd, 0, sizeof(*sd));
}

/* The processes compared: those of --ranks, else of the lowest rank (HTA's default); one per
 * rank, the first with steps (a folder may hold a rank's preprocess and train traces), else the
 * first. Returns how many, their indices in idx (sd->nprocs + 1 entries). */
static size_t pick(const struct swift_an_side *sd, const char *ranks, size_t *idx)
{
    int lo = -1;
    for (size_t i = 0; i < sd->nprocs; i++)
        if (lo < 0 || sd->procs[i].rank < lo)
            lo = sd->procs[i].rank;
    size_t n = 0;
    for (size_t i = 0; i < sd->nprocs; i++) {
        const struct swift_an_proc *p = &sd->procs[i];
        if (ranks ? !swift_an_rank_in(ranks, p->rank) : p->rank != lo)
            continue;
        size_t k;
        for (k = 0; k < n && sd->procs[idx[k]].rank != p->rank; k++)
            ;
        if (k == n)
            idx[n++] = i;
        else if (!sd->procs[idx[k]].nsteps && p->nsteps)
            idx[k] = i;
    }
    return n;
}

/* ---------- HTA's iterations (hta/common/trace.py add_iteration) ---------- */

/* N of a name matching HTA's r"ProfilerStep\s*#\s*(\d+)" at its start, or -1. */
static int64_t profiler_step_number(const char *s)
{
    if (strncmp(s, "ProfilerStep", 12))
        return -1;
    s += 12;
    while (isspace((unsigned char)*s))
        s++;
    if (*s++ != '#')
        return -1;
    while (isspace((unsigned char)*s))
        s++;
    if (!isdigit((unsigned char)*s))
        return -1;
    int64_t v = 0;
    for (; isdigit((unsigned char)*s) && v < (INT64_MAX - 9) / 10; s++)
        v = v * 10 + (*s - '0');
    return v;
}

enum { IT_DROPPED = -3, IT_NONE = -2, IT_UNKNOWN = -1 };

struct stepiv {
    double b, e;
    size_t order; /* file order: the last containing step wins, as in HTA's loop */
    int64_t it;
};

static int cmp_stepiv(const void *a, const void *b)
{
    const struct stepiv *x = a, *y = b;
    return (x->b > y->b) - (x->b < y->b);
}

/* One event as HTA holds it: ts and dur after the ns rounding, or IT_DROPPED. */
struct hev {
    double ts, dur;
    int64_t it;
};

/* The iteration of a host event starting at ts: the step holding it that comes last in file
 * order (steps sorted by start, maxe[i] the largest end among steps 0..i), or IT_UNKNOWN. */
static int64_t host_iteration(const struct stepiv *st, const double *maxe, size_t n, double ts)
{
    size_t lo = 0, hi = n;
    while (lo < hi) { /* first step starting after ts */
        size_t mid = (lo + hi) / 2;
        if (st[mid].b <= ts)
            lo = mid + 1;
        else
            hi = mid;
    }
    int64_t it = IT_UNKNOWN;
    size_t best = 0;
    for (size_t j = lo; j-- > 0 && maxe[j] > ts;)
        if (ts < st[j].e && (it == IT_UNKNOWN || st[j].order >= best)) {
            it = st[j].it;
            best = st[j].order;
        }
    return it;
}

/* A growing list of step numbers. */
struct itlist {
    int64_t *v;
    size_t n;
};

/* The events of one source as HTA reads them, each with its iteration (IT_DROPPED: HTA drops
 * it; IT_NONE: stream 0, no iteration); the step numbers seen are added to its. Returns a
 * malloc'ed array parallel to src->ev. */
static struct hev *hta_events(const struct swift_an_set *set, const struct swift_an_source *s,
                              const struct swift_analyze_opts *o, struct itlist *its)
{
    const struct swift_an_strtab *strs = &set->strs;
    uint32_t trace_cat = swift_an_lookup(strs, "Trace"),
             ev_sync = swift_an_lookup(strs, "Event Sync"),
             ctx_sync = swift_an_lookup(strs, "Context Sync");
    int swift = s->kind == SWIFT_AN_SWIFT;
    uint32_t step_id = swift ? swift_an_lookup(strs, "step") : SWIFT_AN_NONE;
    int round = !swift && o->kopts.hta_rounding && s->ts_real;
    struct hev *h = swift_xmalloc((s->n + 1) * sizeof(*h));
    struct stepiv *st = swift_xmalloc((s->n + 1) * sizeof(*st));
    int64_t *stepno = swift_xmalloc((strs->n + 1) * sizeof(*stepno));
    for (uint32_t i = 0; i < strs->n; i++)
        stepno[i] = swift ? -1 : profiler_step_number(swift_an_str(strs, i));
    size_t ns = 0;
    for (size_t i = 0; i < s->n; i++) {
        const struct swift_an_ev *e = &s->ev[i];
        h[i].it = IT_DROPPED;
        if (e->cat == SWIFT_AN_NONE || e->cat == trace_cat)
            continue;
        h[i].it = IT_UNKNOWN;
        h[i].ts = e->ts;
        h[i].dur = e->dur;
        if (round) {
            h[i].ts = ceil(e->ts);
            h[i].dur = floor(e->ts + e->dur) - h[i].ts;
        }
        int64_t it = swift ? (e->cat == step_id && e->name == step_id ? e->step : -1)
                           : (e->name < strs->n ? stepno[e->name] : -1);
        if (it >= 0) {
            st[ns++] = (struct stepiv){h[i].ts, h[i].ts + h[i].dur, i, it};
            its->v = swift_xrealloc(its->v, (its->n + 1) * sizeof(*its->v));
            its->v[its->n++] = it;
        }
    }
    free(stepno);
    swift_an_sort(st, ns, sizeof(*st), cmp_stepiv);
    double *maxe = swift_xmalloc((ns + 1) * sizeof(*maxe));
    for (size_t j = 0; j < ns; j++)
        maxe[j] = j && maxe[j - 1] > st[j].e ? maxe[j - 1] : st[j].e;
    /* host events first; then each GPU event (stream > 0) takes the iteration of the host
     * event with its correlation id (transform_correlation_to_index: the last one wins) */
    struct swift_an_imap corr = {0};
    for (size_t i = 0; i < s->n; i++) {
        const struct swift_an_ev *e = &s->ev[i];
        if (h[i].it == IT_DROPPED)
            continue;
        int gpu = (e->stream >= 0 && e->corr >= 0) ||
                  (e->name != SWIFT_AN_NONE && (e->name == ev_sync || e->name == ctx_sync));
        if (e->stream < 0)
            h[i].it = host_iteration(st, maxe, ns, h[i].ts);
        else if (e->stream == 0)
            h[i].it = IT_NONE;
        if (!gpu && e->corr != -1)
            *swift_an_imap_ref(&corr, e->corr, (double)h[i].it) = (double)h[i].it;
    }
    for (size_t i = 0; i < s->n; i++) {
        const struct swift_an_ev *e = &s->ev[i];
        double v;
        if (h[i].it == IT_DROPPED || e->stream <= 0)
            continue;
        int gpu = e->corr >= 0 || e->name == ev_sync || e->name == ctx_sync;
        h[i].it = gpu && swift_an_imap_get(&corr, e->corr, &v) ? (int64_t)v : IT_UNKNOWN;
    }
    swift_an_imap_free(&corr);
    free(maxe);
    free(st);
    return h;
}

/* ---------- compare_traces: per name, counts and total duration ---------- */

struct opsum {
    const char *name;
    long count;
    double dur;
};

static int cmp_opsum_name(const void *a, const void *b)
{
    return strcmp(((const struct opsum *)a)->name, ((const struct opsum *)b)->name);
}

/* What one side's chosen processes hold in the chosen iterations. */
struct side_ops {
    struct opsum *ops; /* by name, sorted */
    size_t n;
    int whole;            /* no steps: every event counts */
    int64_t it_lo, it_hi; /* the iterations compared */
    json_t *its;          /* their numbers (array) */
};

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The iterations compared on a side: --steps A-B, or its first (HTA's default). Sets it_lo,
 * it_hi, its (the step numbers in that range) and whole (no steps: every event counts).
 * Returns 0, or -1 after reporting (--steps outside the side's steps). */
static int choose_iterations(struct itlist *its, const struct swift_an_side *sd,
                             const struct swift_analyze_opts *o, const char *which,
                             struct side_ops *out)
{
    swift_an_sort(its->v, its->n, sizeof(*its->v), cmp_i64);
    out->whole = its->n == 0;
    if (out->whole) {
        out->its = json_null();
        if (o->step_lo >= 0)
            return swift_error(
                "--steps %ld-%ld: %s '%s' has no steps", o->step_lo, o->step_hi, which, sd->path);
        return 0;
    }
    int64_t mn = its->v[0], mx = its->v[its->n - 1];
    out->it_lo = o->step_lo >= 0 ? o->step_lo : mn;
    out->it_hi = o->step_lo >= 0 ? o->step_hi : mn;
    out->its = json_array();
    for (size_t i = 0; i < its->n; i++)
        if (its->v[i] >= out->it_lo && its->v[i] <= out->it_hi &&
            (!i || its->v[i] != its->v[i - 1]))
            json_array_append_new(out->its, json_integer(its->v[i]));
    if (!json_array_size(out->its))
        return swift_error("--steps %ld-%ld: %s '%s' has steps %lld-%lld only",
                           o->step_lo,
                           o->step_hi,
                           which,
                           sd->path,
                           (long long)mn,
                           (long long)mx);
    return 0;
}

/* Sum the events of the chosen processes by name over the chosen iterations. Returns 0, or -1
 * after reporting (--steps outside the side's steps). */
static int side_ops(const struct swift_an_side *sd, const size_t *idx, size_t np,
                    const struct swift_analyze_opts *o, const char *which, struct side_ops *out)
{
    const struct swift_an_strtab *strs = &sd->set.strs;
    struct hev **hv = swift_xcalloc(np + 1, sizeof(*hv));
    struct itlist its = {0};
    memset(out, 0, sizeof(*out));
    for (size_t k = 0; k < np; k++)
        hv[k] = hta_events(&sd->set, sd->procs[idx[k]].src, o, &its);
    int rc = choose_iterations(&its, sd, o, which, out);
    free(its.v);
    long *cnt = swift_xcalloc(strs->n + 1, sizeof(*cnt));
    double *dur = swift_xcalloc(strs->n + 1, sizeof(*dur));
    for (size_t k = 0; k < np && !rc; k++) {
        const struct swift_an_source *s = sd->procs[idx[k]].src;
        for (size_t i = 0; i < s->n; i++) {
            const struct hev *h = &hv[k][i];
            uint32_t nm = s->ev[i].name;
            if (h->it == IT_DROPPED || nm >= strs->n)
                continue;
            if (!out->whole && (h->it < out->it_lo || h->it > out->it_hi))
                continue;
            cnt[nm]++;
            dur[nm] += h->dur;
        }
    }
    for (uint32_t i = 0; i < strs->n; i++)
        if (cnt[i]) {
            out->ops = swift_xrealloc(out->ops, (out->n + 1) * sizeof(*out->ops));
            out->ops[out->n++] = (struct opsum){swift_an_str(strs, i), cnt[i], dur[i]};
        }
    swift_an_sort(out->ops, out->n, sizeof(*out->ops), cmp_opsum_name);
    for (size_t k = 0; k < np; k++)
        free(hv[k]);
    free(hv);
    free(cnt);
    free(dur);
    return rc;
}

static json_t *num(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

static double r3(double v)
{
    return round(v * 1000) / 1000;
}

/* 100 (b - a) / a, NAN when a is 0 or unknown. */
static double pct_of(double a, double b)
{
    return isfinite(a) && isfinite(b) && a != 0 ? round(1e4 * (b - a) / fabs(a)) / 100 : NAN;
}

static const char *const change_names[] = {
    "added", "deleted", "increased", "decreased", "unchanged"};

/* ops_diff's bucket of a row (each row is in exactly one). */
static int change_of(long c, long t)
{
    if (c == 0)
        return 0;
    if (t == 0)
        return 1;
    return t > c ? 2 : t < c ? 3 : 4;
}

struct oprow {
    const char *name;
    long cc, tc;
    double cd, td;
};

static int cmp_oprow(const void *a, const void *b)
{
    const struct oprow *x = a, *y = b;
    double dx = fabs(x->td - x->cd), dy = fabs(y->td - y->cd);
    if (dx != dy)
        return dx < dy ? 1 : -1;
    return strcmp(x->name, y->name);
}

/* The rows of compare_traces (largest duration change first) and the ops_diff lists. */
static json_t *ops_json(const struct side_ops *c, const struct side_ops *t)
{
    struct oprow *rows = swift_xmalloc((c->n + t->n + 1) * sizeof(*rows));
    size_t n = 0, i = 0, j = 0;
    while (i < c->n || j < t->n) {
        int d = i == c->n ? 1 : j == t->n ? -1 : strcmp(c->ops[i].name, t->ops[j].name);
        struct oprow r = {d <= 0 ? c->ops[i].name : t->ops[j].name, 0, 0, 0, 0};
        if (d <= 0) {
            r.cc = c->ops[i].count;
            r.cd = c->ops[i++].dur;
        }
        if (d >= 0) {
            r.tc = t->ops[j].count;
            r.td = t->ops[j++].dur;
        }
        rows[n++] = r;
    }
    json_t *arr = json_array(), *diff = json_object(), *counts = json_object();
    for (int k = 0; k < 5; k++) {
        json_object_set_new(diff, change_names[k], json_array());
        json_object_set_new(counts, change_names[k], json_integer(0));
    }
    for (size_t k = 0; k < n; k++) { /* ops_diff's lists: by name, as HTA's index */
        const char *ch = change_names[change_of(rows[k].cc, rows[k].tc)];
        json_array_append_new(json_object_get(diff, ch), json_string(rows[k].name));
        json_t *cn = json_object_get(counts, ch);
        json_integer_set(cn, json_integer_value(cn) + 1);
    }
    swift_an_sort(rows, n, sizeof(*rows), cmp_oprow);
    for (size_t k = 0; k < n; k++) {
        const struct oprow *r = &rows[k];
        int ch = change_of(r->cc, r->tc);
        json_array_append_new(arr,
                              json_pack("{s:s,s:I,s:o,s:I,s:o,s:I,s:o,s:s,s:s}",
                                        "name",
                                        r->name,
                                        "control_counts",
                                        (json_int_t)r->cc,
                                        "control_total_duration",
                                        num(r3(r->cd)),
                                        "test_counts",
                                        (json_int_t)r->tc,
                                        "test_total_duration",
                                        num(r3(r->td)),
                                        "diff_counts",
                                        (json_int_t)(r->tc - r->cc),
                                        "diff_duration",
                                        num(r3(r->td - r->cd)),
                                        "counts_change_categories",
                                        r->tc > r->cc   ? "+"
                                        : r->tc < r->cc ? "-"
                                                        : "=",
                                        "change",
                                        change_names[ch]));
    }
    free(rows);
    return json_pack("{s:o,s:o,s:o,s:o,s:I,s:o,s:o}",
                     "control_iterations",
                     json_incref(c->its),
                     "test_iterations",
                     json_incref(t->its),
                     "counts",
                     counts,
                     "diff",
                     diff,
                     "n",
                     (json_int_t)n,
                     "rows",
                     arr,
                     "whole",
                     json_boolean(c->whole || t->whole));
}

/* ---------- step time, parts, HTA temporal breakdown ---------- */

#define MAX_CPARTS (2 * SWIFT_AN_MAX_PARTS)

struct side_steps {
    size_t nsteps;
    double mean, median;
    const char *part[MAX_CPARTS];
    double part_us[MAX_CPARTS]; /* mean per step */
    int npart;
    int has_temporal;
    double idle, compute, non_compute, kernel; /* HTA temporal, summed over processes */
    double gpu_util;                           /* mean over processes with one, NAN none */
};

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int part_slot(struct side_steps *ss, const char *name)
{
    for (int k = 0; k < ss->npart; k++)
        if (!strcmp(ss->part[k], name))
            return k;
    if (ss->npart == MAX_CPARTS)
        return -1;
    ss->part[ss->npart] = name;
    ss->part_us[ss->npart] = 0;
    return ss->npart++;
}

/* Step time of the chosen processes over their steps (--steps A-B: those only). */
static void side_steps(const struct swift_an_side *sd, const size_t *idx, size_t np,
                       const struct swift_analyze_opts *o, struct side_steps *ss)
{
    memset(ss, 0, sizeof(*ss));
    ss->gpu_util = NAN;
    size_t cap = 0, nutil = 0;
    for (size_t k = 0; k < np; k++)
        cap += sd->procs[idx[k]].nsteps;
    double *d = swift_xmalloc((cap + 1) * sizeof(*d)), sum = 0, util = 0;
    for (size_t k = 0; k < np; k++) {
        const struct swift_an_proc *p = &sd->procs[idx[k]];
        for (int q = 0; q < p->npart; q++)
            part_slot(ss, p->part_names[q]);
        for (size_t i = 0; i < p->nsteps; i++) {
            const struct swift_an_step *sp = &p->steps[i];
            if (o->step_lo >= 0 && (sp->step < o->step_lo || sp->step > o->step_hi))
                continue;
            d[ss->nsteps++] = sp->dur;
            sum += sp->dur;
            for (int q = 0; q < p->npart; q++) {
                int slot = part_slot(ss, p->part_names[q]);
                if (slot >= 0)
                    ss->part_us[slot] += sp->part[q];
            }
        }
        if (p->has_kineto && p->k.has_gpu) {
            ss->has_temporal = 1;
            ss->idle += p->k.idle_us;
            ss->compute += p->k.compute_us;
            ss->non_compute += p->k.non_compute_us;
            ss->kernel += p->k.kernel_us;
        }
        if (p->gpu_util >= 0) {
            util += p->gpu_util;
            nutil++;
        }
    }
    if (nutil)
        ss->gpu_util = util / (double)nutil;
    if (ss->nsteps) {
        swift_an_sort(d, ss->nsteps, sizeof(*d), cmp_dbl);
        size_t n = ss->nsteps;
        ss->mean = sum / (double)n;
        ss->median = n % 2 ? d[n / 2] : (d[n / 2 - 1] + d[n / 2]) / 2;
        for (int q = 0; q < ss->npart; q++)
            ss->part_us[q] /= (double)n;
    }
    free(d);
}

static json_t *step_time_json(const struct side_steps *c, const struct side_steps *t)
{
    json_t *o = json_object();
    const struct side_steps *s2[2] = {c, t};
    static const char *const key[2] = {"control", "test"};
    for (int i = 0; i < 2; i++)
        json_object_set_new(o,
                            key[i],
                            !s2[i]->nsteps ? json_null()
                                           : json_pack("{s:I,s:o,s:o}",
                                                       "steps",
                                                       (json_int_t)s2[i]->nsteps,
                                                       "mean_us",
                                                       num(r3(s2[i]->mean)),
                                                       "median_us",
                                                       num(r3(s2[i]->median))));
    int both = c->nsteps && t->nsteps;
    json_object_set_new(o, "delta_us", both ? num(r3(t->mean - c->mean)) : json_null());
    json_object_set_new(o, "delta_pct", both ? num(pct_of(c->mean, t->mean)) : json_null());
    return o;
}

static json_t *delta_row(const char *key, const char *name, double a, double b)
{
    return json_pack("{s:s,s:o,s:o,s:o,s:o}",
                     key,
                     name,
                     "control_us",
                     num(r3(a)),
                     "test_us",
                     num(r3(b)),
                     "delta_us",
                     num(r3(b - a)),
                     "delta_pct",
                     num(pct_of(a, b)));
}

/* Mean µs per step by part, over the union of both sides' parts (NAN where a side has none). */
static json_t *breakdown_json(const struct side_steps *c, const struct side_steps *t)
{
    json_t *a = json_array();
    if (!c->nsteps && !t->nsteps)
        return a;
    struct side_steps u = {0};
    for (int q = 0; q < c->npart; q++)
        part_slot(&u, c->part[q]);
    for (int q = 0; q < t->npart; q++)
        part_slot(&u, t->part[q]);
    for (int q = 0; q < u.npart; q++) {
        double v[2] = {NAN, NAN};
        const struct side_steps *s2[2] = {c, t};
        for (int i = 0; i < 2; i++)
            for (int k = 0; k < s2[i]->npart; k++)
                if (s2[i]->nsteps && !strcmp(s2[i]->part[k], u.part[q]))
                    v[i] = s2[i]->part_us[k];
        json_array_append_new(a, delta_row("part", u.part[q], v[0], v[1]));
    }
    return a;
}

static double pct2(double x, double tot)
{
    return tot > 0 ? round(10000 * x / tot) / 100 : NAN;
}

/* HTA's temporal breakdown on both sides (idle, compute, non-compute, and the span). */
static json_t *temporal_json(const struct side_steps *c, const struct side_steps *t)
{
    if (!c->has_temporal && !t->has_temporal)
        return json_null();
    json_t *a = json_array();
    static const char *const names[] = {"idle", "compute", "non_compute", "kernel"};
    const struct side_steps *s2[2] = {c, t};
    for (int q = 0; q < 4; q++) {
        double v[2], pc[2];
        for (int i = 0; i < 2; i++) {
            const struct side_steps *s = s2[i];
            double x[4] = {s->idle, s->compute, s->non_compute, s->kernel};
            v[i] = s->has_temporal ? x[q] : NAN;
            pc[i] = s->has_temporal ? pct2(x[q], s->kernel) : NAN;
        }
        json_t *r = delta_row("part", names[q], v[0], v[1]);
        json_object_set_new(r, "control_pct", num(pc[0]));
        json_object_set_new(r, "test_pct", num(pc[1]));
        json_array_append_new(a, r);
    }
    return a;
}

/* ---------- bottlenecks resolved, new, persisting ---------- */

static int sev_rank(const char *s)
{
    return !strcmp(s, "critical") ? SWIFT_SEV_CRITICAL
           : !strcmp(s, "warn")   ? SWIFT_SEV_WARN
           : *s                   ? SWIFT_SEV_INFO
                                  : SWIFT_SEV_NONE;
}

/* A side's worst entry of rule `id`, or NULL. */
static json_t *worst_of(json_t *report, const char *id)
{
    json_t *best = NULL, *b;
    size_t i;
    json_array_foreach(json_object_get(report, "bottlenecks"), i, b)
    {
        if (strcmp(swift_an_jstr(b, "rule"), id))
            continue;
        if (!best ||
            sev_rank(swift_an_jstr(b, "severity")) > sev_rank(swift_an_jstr(best, "severity")))
            best = b;
    }
    return best;
}

static json_t *bottleneck_entry(const char *id, json_t *c, json_t *t)
{
    json_t *w = t ? t : c;
    return json_pack("{s:s,s:o,s:o,s:s,s:s}",
                     "rule",
                     id,
                     "control_severity",
                     c ? json_string(swift_an_jstr(c, "severity")) : json_null(),
                     "test_severity",
                     t ? json_string(swift_an_jstr(t, "severity")) : json_null(),
                     "process",
                     swift_an_jstr(w, "process"),
                     "summary",
                     swift_an_jstr(w, "summary"));
}

static json_t *bottlenecks_json(json_t *crep, json_t *trep)
{
    json_t *res = json_array(), *nw = json_array(), *per = json_array();
    for (size_t r = 0; swift_an_rule_ids[r]; r++) {
        const char *id = swift_an_rule_ids[r];
        json_t *c = worst_of(crep, id), *t = worst_of(trep, id);
        if (c || t)
            json_array_append_new(!t ? res : !c ? nw : per, bottleneck_entry(id, c, t));
    }
    return json_pack("{s:o,s:o,s:o}", "resolved", res, "new", nw, "persisting", per);
}

/* ---------- the document ---------- */

static json_t *side_json(const struct swift_an_side *sd, const size_t *idx, size_t np)
{
    json_t *labels = json_array(), *ranks = json_array();
    int kinds = 0;
    for (size_t k = 0; k < np; k++) {
        const struct swift_an_proc *p = &sd->procs[idx[k]];
        json_array_append_new(labels, json_string(p->label));
        json_array_append_new(ranks, json_integer(p->rank));
        kinds |= p->src->kind;
    }
    return json_pack("{s:s,s:o,s:o,s:s,s:I,s:i,s:I}",
                     "path",
                     sd->path,
                     "processes",
                     labels,
                     "ranks",
                     ranks,
                     "format",
                     kinds == SWIFT_AN_SWIFT    ? "swift"
                     : kinds == SWIFT_AN_KINETO ? "kineto"
                                                : "mixed",
                     "processes_loaded",
                     (json_int_t)sd->nprocs,
                     "inputs_failed",
                     sd->set.nfailed,
                     "bad_lines",
                     (json_int_t)sd->set.bad_lines);
}

json_t *swift_an_compare_build(const struct swift_an_side *control,
                               const struct swift_an_side *test, const struct swift_analyze_opts *o)
{
    const struct swift_an_side *sd[2] = {control, test};
    static const char *const which[2] = {"control", "test"};
    size_t *idx[2], np[2];
    struct side_ops so[2];
    struct side_steps ss[2];
    int rc = 0;
    for (int i = 0; i < 2; i++) {
        idx[i] = swift_xmalloc((sd[i]->nprocs + 1) * sizeof(*idx[i]));
        np[i] = pick(sd[i], o->ranks, idx[i]);
        if (!np[i] && rc == 0)
            rc = swift_error(
                "--ranks %s: %s '%s' has none of them", o->ranks, which[i], sd[i]->path);
        memset(&so[i], 0, sizeof(so[i]));
        if (rc == 0)
            rc = side_ops(sd[i], idx[i], np[i], o, which[i], &so[i]);
        side_steps(sd[i], idx[i], np[i], o, &ss[i]);
    }
    json_t *doc = NULL;
    if (rc == 0) {
        doc = json_object();
        json_object_set_new(doc, "schema_version", json_integer(SWIFT_REPORT_SCHEMA_VERSION));
        json_object_set_new(doc, "tool", json_string("swift-trace-analyze"));
        json_object_set_new(doc, "version", json_string(SWIFT_VERSION));
        json_object_set_new(doc, "mode", json_string("compare"));
        json_object_set_new(doc, "control", side_json(control, idx[0], np[0]));
        json_object_set_new(doc, "test", side_json(test, idx[1], np[1]));
        json_object_set_new(doc,
                            "steps",
                            o->step_lo >= 0
                                ? json_pack("[I,I]", (json_int_t)o->step_lo, (json_int_t)o->step_hi)
                                : json_null());
        json_object_set_new(doc, "step_time", step_time_json(&ss[0], &ss[1]));
        json_object_set_new(doc, "breakdown", breakdown_json(&ss[0], &ss[1]));
        json_object_set_new(doc, "temporal", temporal_json(&ss[0], &ss[1]));
        json_object_set_new(doc,
                            "gpu_utilization",
                            isfinite(ss[0].gpu_util) || isfinite(ss[1].gpu_util)
                                ? json_pack("{s:o,s:o}",
                                            "control",
                                            num(round(ss[0].gpu_util * 1e6) / 1e6),
                                            "test",
                                            num(round(ss[1].gpu_util * 1e6) / 1e6))
                                : json_null());
        json_object_set_new(doc, "ops", ops_json(&so[0], &so[1]));
        json_object_set_new(doc, "bottlenecks", bottlenecks_json(control->report, test->report));
        double peak[2] = {0, 0};
        for (int i = 0; i < 2; i++)
            for (size_t k = 0; k < np[i]; k++)
                peak[i] = fmax(peak[i], sd[i]->procs[idx[i][k]].mem_peak);
        json_object_set_new(doc, "memory", swift_an_compare_memory(peak[0], peak[1]));
        json_object_set_new(
            doc,
            "roofline",
            swift_an_compare_roofline(
                json_array_get(json_object_get(control->report, "processes"), idx[0][0]),
                json_array_get(json_object_get(test->report, "processes"), idx[1][0]),
                o->top > 10 ? o->top : 10));
        json_t *reg = json_null();
        if (o->regress_pct >= 0) {
            double d =
                json_number_value(json_object_get(json_object_get(doc, "step_time"), "delta_pct"));
            int known = ss[0].nsteps && ss[1].nsteps;
            reg = json_pack("{s:o,s:o}",
                            "threshold_pct",
                            num(o->regress_pct),
                            "regressed",
                            known ? json_boolean(d > o->regress_pct) : json_null());
        }
        json_object_set_new(doc, "regression", reg);
    }
    for (int i = 0; i < 2; i++) {
        free(idx[i]);
        free(so[i].ops);
        json_decref(so[i].its);
    }
    return doc;
}

/* --fail-on warn|critical in a comparison: a bottleneck of the test at that level or worse that
 * control did not have at that level (new, or worse than before). Its rule id, or NULL. */
static const char *new_at_level(json_t *doc, int level)
{
    json_t *bs = json_object_get(doc, "bottlenecks"), *b;
    static const char *const lists[] = {"new", "persisting"};
    for (int l = 0; l < 2; l++) {
        size_t i;
        json_array_foreach(json_object_get(bs, lists[l]), i, b)
        {
            int t = sev_rank(swift_an_jstr(b, "test_severity")),
                c = sev_rank(swift_an_jstr(b, "control_severity"));
            if (t >= level && c < level)
                return swift_an_jstr(b, "rule");
        }
    }
    return NULL;
}

static int write_doc(json_t *doc, const struct swift_analyze_opts *o)
{
    if (!o->output || !strcmp(o->output, "-"))
        return swift_an_compare_print(stdout, doc, o->format, o->top);
    struct swift_atomic af;
    if (swift_atomic_open(&af, o->output) < 0)
        return -1;
    if (swift_an_compare_print(af.fp, doc, o->format, o->top) < 0) {
        swift_atomic_abort(&af);
        return swift_error("cannot write '%s'", o->output);
    }
    return swift_atomic_commit(&af);
}

/* The gates, after the report is written: 0, or SWIFT_FAILED after saying why. */
static int gates(json_t *doc, const struct swift_analyze_opts *o)
{
    int rc = 0;
    json_t *st = json_object_get(doc, "step_time");
    if (o->regress_pct >= 0) {
        json_t *c = json_object_get(st, "control"), *t = json_object_get(st, "test");
        double d = swift_an_jnum(st, "delta_pct");
        if (!json_is_object(c) || !json_is_object(t))
            rc = swift_error("--fail-on regression: the %s has no steps to time",
                             !json_is_object(c) ? "control" : "test");
        else if (d > o->regress_pct)
            rc =
                swift_error("mean step time regressed %.2f%% (%.3f ms -> %.3f ms), above --fail-on "
                            "regression=%g",
                            d,
                            swift_an_jnum(c, "mean_us") / 1e3,
                            swift_an_jnum(t, "mean_us") / 1e3,
                            o->regress_pct);
    }
    const char *id = o->fail_on ? new_at_level(doc, o->fail_on) : NULL;
    if (id)
        rc = swift_error("new bottleneck at or above --fail-on level in the test: %s", id);
    return rc;
}

int swift_an_compare_run(const struct swift_analyze_opts *o)
{
    if (o->npaths != 2)
        return swift_usage("--compare takes two traces or directories, CONTROL and TEST (got %d)",
                           o->npaths);
    struct swift_an_side c, t;
    int rc = swift_an_side_load(&c, o->paths[0], o);
    if (rc == 0)
        rc = swift_an_side_load(&t, o->paths[1], o);
    else
        memset(&t, 0, sizeof(t));
    json_t *doc = NULL;
    if (rc == 0) {
        int64_t t0 = swift_trace_now();
        doc = swift_an_compare_build(&c, &t, o);
        swift_trace_span("stage", "compare", t0, swift_trace_now(), NULL, 0);
        if (!doc)
            rc = SWIFT_FAILED;
    }
    if (rc == 0 && write_doc(doc, o) < 0)
        rc = SWIFT_FAILED;
    if (rc == 0)
        rc = gates(doc, o);
    json_decref(doc);
    swift_an_side_release(&c);
    if (t.path)
        swift_an_side_release(&t);
    return rc;
}
