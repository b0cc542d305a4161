/*
 * analyze/ops — two tables of our traces for the report: the per-op time of --profile steps
 * (which spans take the step: op, phase, time per step, share, calls, GFLOP/s), and, for a
 * process without steps (swift-eval, swift-export, swift-preprocess, swift-download), its wall
 * time by phase: its top-level spans. See internal.h.
 */
#include "lib/analyze/breakdown.h"
#include "lib/analyze/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

static json_t *num(double v)
{
    return isfinite(v) ? json_real(round(v * 1000) / 1000) : json_null();
}

static int cmp_ev_ts_dur(const void *a, const void *b)
{
    const struct swift_an_ev *x = *(const struct swift_an_ev *const *)a;
    const struct swift_an_ev *y = *(const struct swift_an_ev *const *)b;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    if (x->ts != y->ts)
        return x->ts < y->ts ? -1 : 1;
    return (x->dur < y->dur) - (x->dur > y->dur); /* the parent first */
}

/* p holds c (same thread, p sorted first: p->ts <= c->ts, the longer first on a tie). */
static int contains(const struct swift_an_ev *p, const struct swift_an_ev *c)
{
    /* two spans with the same start and length are siblings: absolute-time ts read as doubles
     * are 0.25 us apart, so back-to-back sub-us spans can round to one interval */
    return p->tid == c->tid && p->ts <= c->ts && c->ts < p->ts + p->dur &&
           c->ts + c->dur <= p->ts + p->dur + SWIFT_AN_NEST_TOL &&
           (p->ts < c->ts || p->dur > c->dur);
}

/* One row of the op table: an op name in one phase. */
struct oprow {
    uint32_t name;
    int phase;
    long calls;
    double total, self, flops, flops_us;
};

static int cmp_self(const void *a, const void *b)
{
    const struct oprow *x = a, *y = b;
    if (x->self != y->self)
        return (x->self < y->self) - (x->self > y->self);
    return (x->total < y->total) - (x->total > y->total);
}

static struct oprow *row_of(struct oprow **rows, size_t *n, uint32_t name, int phase)
{
    for (size_t i = 0; i < *n; i++)
        if ((*rows)[i].name == name && (*rows)[i].phase == phase)
            return &(*rows)[i];
    *rows = swift_xrealloc(*rows, (*n + 1) * sizeof(**rows));
    (*rows)[*n] = (struct oprow){.name = name, .phase = phase};
    return &(*rows)[(*n)++];
}

/* The step thread's phase spans (sorted) and, within steps, its other compute spans: the
 * per-layer and per-op spans of --profile steps (sorted, parents first). */
static void op_spans(const struct swift_an_set *set, const struct swift_an_proc *p,
                     struct swift_an_ival **phv, int **php, size_t *nph,
                     const struct swift_an_ev ***ops, size_t *nops)
{
    const struct swift_an_source *s = p->src;
    const struct swift_an_strtab *st = &set->strs;
    double off = s->clock_offset_us;
    int64_t tid = INT64_MIN;
    for (size_t i = 0; i < s->n && tid == INT64_MIN; i++)
        if (!strcmp(swift_an_str(st, s->ev[i].cat), "step") &&
            !strcmp(swift_an_str(st, s->ev[i].name), "step"))
            tid = s->ev[i].tid;
    const struct swift_an_ev **ph = swift_xmalloc((s->n + 1) * sizeof(*ph));
    *ops = swift_xmalloc((s->n + 1) * sizeof(**ops));
    size_t n = 0;
    *nops = 0;
    for (size_t i = 0; i < s->n; i++) {
        const struct swift_an_ev *e = &s->ev[i];
        if (e->tid != tid)
            continue;
        const char *nm = swift_an_str(st, e->name), *cat = swift_an_str(st, e->cat);
        if (swift_an_phase_of(nm, cat) >= 0)
            ph[n++] = e;
        else if (!strcmp(cat, "compute") && swift_an_rl_kind(nm) < 0 &&
                 strcmp(nm, "forward_backward") &&
                 swift_an_step_of(p, e->ts - off) >=
                     0) /* RL spans are phases of their own (rl.c), a VL step's forward_backward
                           holds its phases (vl.c) */
            (*ops)[(*nops)++] = e;
    }
    swift_an_sort(ph, n, sizeof(*ph), cmp_ev_ts_dur);
    swift_an_sort(*ops, *nops, sizeof(**ops), cmp_ev_ts_dur);
    *phv = swift_xmalloc((n + 1) * sizeof(**phv));
    *php = swift_xmalloc((n + 1) * sizeof(**php));
    for (size_t i = 0; i < n; i++) {
        (*phv)[i] = (struct swift_an_ival){ph[i]->ts, ph[i]->ts + ph[i]->dur};
        (*php)[i] = swift_an_phase_of(swift_an_str(st, ph[i]->name), swift_an_str(st, ph[i]->cat));
    }
    *nph = n;
    free(ph);
}

json_t *swift_an_ops_json(const struct swift_an_set *set, const struct swift_an_proc *p, int top)
{
    if (p->src->kind != SWIFT_AN_SWIFT || !p->nsteps)
        return json_null();
    struct swift_an_ival *phv;
    int *php;
    size_t nph, nops;
    const struct swift_an_ev **ops;
    op_spans(set, p, &phv, &php, &nph, &ops, &nops);
    char *profiled = swift_xcalloc(p->nsteps + 1, 1);
    double *child = swift_xcalloc(nops + 1, sizeof(*child));
    size_t *stack = swift_xmalloc((nops + 1) * sizeof(*stack)), ns = 0;
    struct oprow *rows = NULL;
    size_t nrows = 0;
    for (size_t i = 0; i < nops; i++) { /* self time: minus the direct children's time */
        while (ns && !contains(ops[stack[ns - 1]], ops[i]))
            ns--;
        if (ns)
            child[stack[ns - 1]] += ops[i]->dur;
        stack[ns++] = i;
        profiled[swift_an_step_of(p, ops[i]->ts - p->src->clock_offset_us)] = 1;
    }
    for (size_t i = 0; i < nops; i++) {
        const struct swift_an_ev *e = ops[i];
        long c = swift_an_ival_enclosing(phv, nph, e->ts, e->ts + e->dur, SWIFT_AN_NEST_TOL);
        struct oprow *r = row_of(&rows, &nrows, e->name, c >= 0 ? php[c] : 1 /* forward */);
        r->calls++;
        r->total += e->dur;
        r->self += e->dur > child[i] ? e->dur - child[i] : 0;
        if (e->aux > 0) {
            r->flops += (double)e->aux;
            r->flops_us += e->dur;
        }
    }
    size_t np = 0;
    double step_us = 0;
    for (size_t i = 0; i < p->nsteps; i++)
        if (profiled[i]) {
            np++;
            step_us += p->steps[i].dur;
        }
    json_t *out = json_null();
    if (np) {
        step_us /= (double)np;
        swift_an_sort(rows, nrows, sizeof(*rows), cmp_self);
        json_t *a = json_array();
        for (size_t i = 0; i < nrows && i < (size_t)top; i++) {
            const struct oprow *r = &rows[i];
            json_array_append_new(
                a,
                json_pack(
                    "{s:s,s:s,s:o,s:o,s:o,s:o,s:o,s:o}",
                    "name",
                    swift_an_str(&set->strs, r->name),
                    "phase",
                    swift_an_phase_names[r->phase],
                    "calls_per_step",
                    num((double)r->calls / (double)np),
                    "self_us_per_step",
                    num(r->self / (double)np),
                    "total_us_per_step",
                    num(r->total / (double)np),
                    "share",
                    step_us > 0 ? json_real(round(r->self / np / step_us * 1e6) / 1e6)
                                : json_null(),
                    "gflops",
                    r->flops_us > 0 ? num(r->flops / r->flops_us / 1e3) : json_null(),
                    "peak_fraction",
                    r->flops_us > 0 && p->src->peak_gflops > 0
                        ? json_real(
                              round(r->flops / r->flops_us / 1e3 / p->src->peak_gflops * 1e4) / 1e4)
                        : json_null()));
        }
        out = json_pack("{s:I,s:o,s:o,s:I,s:o}",
                        "steps",
                        (json_int_t)np,
                        "peak_gflops",
                        p->src->peak_gflops > 0 ? num(p->src->peak_gflops) : json_null(),
                        "step_us",
                        num(step_us),
                        "n_rows",
                        (json_int_t)nrows,
                        "rows",
                        a);
    }
    free(rows);
    free(stack);
    free(child);
    free(profiled);
    free(ops);
    free(phv);
    free(php);
    return out;
}

/* ---------- processes without steps: wall time by phase ---------- */

struct phrow {
    uint32_t name, cat;
    long count;
    double us;
};

static int cmp_us(const void *a, const void *b)
{
    const struct phrow *x = a, *y = b;
    return (x->us < y->us) - (x->us > y->us);
}

/* Host spans only: GPU work and the profiler's own spans are no phase of the program. */
static int host_span(const char *cat, const struct swift_an_ev *e)
{
    return e->stream < 0 && strcmp(cat, "kernel") && strcmp(cat, "Kernel") &&
           strcmp(cat, "gpu_memcpy") && strcmp(cat, "gpu_memset") && strcmp(cat, "Memcpy") &&
           strcmp(cat, "Memset") && strcmp(cat, "gpu_user_annotation") && strcmp(cat, "Trace") &&
           strcmp(cat, "cuda_runtime") && strcmp(cat, "cuda_driver");
}

json_t *swift_an_phases_json(const struct swift_an_set *set, const struct swift_an_proc *p, int top)
{
    const struct swift_an_source *s = p->src;
    const struct swift_an_strtab *st = &set->strs;
    if (p->nsteps)
        return json_null();
    const struct swift_an_ev **ev = swift_xmalloc((s->n + 1) * sizeof(*ev));
    size_t n = 0;
    for (size_t i = 0; i < s->n; i++)
        if (host_span(swift_an_str(st, s->ev[i].cat), &s->ev[i]))
            ev[n++] = &s->ev[i];
    swift_an_sort(ev, n, sizeof(*ev), cmp_ev_ts_dur); /* by thread, then time, parents first */
    struct phrow *rows = NULL;
    size_t nrows = 0;
    struct swift_an_ivec cover = {0};
    const struct swift_an_ev *open = NULL; /* the top-level span of this thread that is open */
    for (size_t i = 0; i < n; i++) {
        const struct swift_an_ev *e = ev[i];
        if (open && contains(open, e))
            continue; /* nested: part of its top-level span */
        open = e;
        swift_an_ivec_push(&cover, e->ts, e->ts + e->dur);
        size_t k;
        for (k = 0; k < nrows && rows[k].name != e->name; k++)
            ;
        if (k == nrows) {
            rows = swift_xrealloc(rows, (nrows + 1) * sizeof(*rows));
            rows[nrows++] = (struct phrow){e->name, e->cat, 0, 0};
        }
        rows[k].count++;
        rows[k].us += e->dur;
    }
    double wall = p->t1 - p->t0;
    double covered = swift_an_ival_len(cover.v, swift_an_ival_merge(cover.v, cover.n));
    swift_an_sort(rows, nrows, sizeof(*rows), cmp_us);
    json_t *a = json_array();
    for (size_t i = 0; i < nrows && i < (size_t)top; i++)
        json_array_append_new(
            a,
            json_pack("{s:s,s:s,s:I,s:o,s:o}",
                      "name",
                      swift_an_str(st, rows[i].name),
                      "cat",
                      rows[i].cat == SWIFT_AN_NONE ? "" : swift_an_str(st, rows[i].cat),
                      "count",
                      (json_int_t)rows[i].count,
                      "us",
                      num(rows[i].us),
                      "share",
                      wall > 0 ? json_real(round(rows[i].us / wall * 1e6) / 1e6) : json_null()));
    json_t *out = json_pack("{s:o,s:o,s:I,s:o}",
                            "wall_us",
                            num(wall),
                            "untraced_us",
                            num(wall - covered > 0 ? wall - covered : 0),
                            "n_rows",
                            (json_int_t)nrows,
                            "rows",
                            a);
    swift_an_ivec_free(&cover);
    free(rows);
    free(ev);
    return out;
}
