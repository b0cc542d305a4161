/*
 * analyze — swift_analyze_run: load, analyse each process (our phases, or the Kineto roles),
 * build the report document, apply the rules, write the report. See lib/analyze/analyze.h.
 */
#include "lib/analyze/compare.h"
#include "lib/analyze/internal.h"
#include "lib/analyze/merge.h"
#include "lib/analyze/report.h"
#include "lib/analyze/rules.h"
#include "lib/core/alloc.h"
#include "lib/core/fileio.h"
#include "lib/core/pool.h"
#include "lib/core/trace.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

enum { SP_DATA, SP_FWD, SP_BWD, SP_SYNC, SP_OPT, SP_OTHER, SP_N };

void swift_analyze_opts_default(struct swift_analyze_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->format = SWIFT_FMT_TEXT;
    o->top = 5;
    o->threads = 1;
    o->step_lo = o->step_hi = -1;
    o->window = -1;
    o->merge_warn_bytes = 256ull << 20;
    o->regress_pct = -1;
    swift_an_thresholds_default(&o->th);
    swift_an_kineto_opts_default(&o->kopts);
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void step_stats(struct swift_an_proc *p)
{
    if (!p->nsteps)
        return;
    double *d = swift_xmalloc(p->nsteps * sizeof(*d));
    double sum = 0;
    for (size_t i = 0; i < p->nsteps; i++) {
        d[i] = p->steps[i].dur;
        sum += d[i];
        for (int k = 0; k < p->npart; k++)
            p->part_avg[k] += p->steps[i].part[k] / (double)p->nsteps;
    }
    swift_an_sort(d, p->nsteps, sizeof(*d), cmp_dbl);
    p->step_avg = sum / (double)p->nsteps;
    p->step_median =
        p->nsteps % 2 ? d[p->nsteps / 2] : (d[p->nsteps / 2 - 1] + d[p->nsteps / 2]) / 2;
    p->step_max = d[p->nsteps - 1];
    free(d);
}

static int cmp_ev_ts(const void *a, const void *b)
{
    const struct swift_an_ev *x = *(const struct swift_an_ev *const *)a;
    const struct swift_an_ev *y = *(const struct swift_an_ev *const *)b;
    return (x->ts > y->ts) - (x->ts < y->ts);
}

const char *const swift_an_phase_names[] = {
    "data_wait", "forward", "backward", "grad_sync", "optimizer", "other"};

int swift_an_phase_of(const char *name, const char *cat)
{
    if (!strcmp(name, "data_wait") || !strcmp(cat, "data"))
        return SP_DATA;
    /* a VL step (vl.c): vision and llm are its forward, llm_backward and vision_backward its
     * backward, inside each micro-batch's forward_backward span */
    if (!strcmp(name, "forward") ||
        (!strcmp(cat, "compute") && (!strcmp(name, "vision") || !strcmp(name, "llm"))))
        return SP_FWD;
    if (!strcmp(name, "backward") ||
        (!strcmp(cat, "compute") &&
         (!strcmp(name, "llm_backward") || !strcmp(name, "vision_backward"))))
        return SP_BWD;
    if (!strcmp(name, "grad_sync") || !strcmp(cat, "comm"))
        return SP_SYNC;
    if (!strcmp(name, "optimizer") || !strcmp(cat, "optim"))
        return SP_OPT;
    return -1;
}

/* A span of the step thread that takes part in the claim: a phase span, or a compute span
 * (per-layer and per-op spans of --profile steps) whose phase comes from where it lies. */
static int claim_candidate(const char *name, const char *cat)
{
    return swift_an_phase_of(name, cat) >= 0 || !strcmp(cat, "compute");
}

/* What one pass over our trace's events collects: the phase spans (ph, filtered by the step
 * thread afterwards) and the GPU busy intervals. */
struct swift_scan {
    const struct swift_an_ev **ph;
    size_t nph;
    struct swift_an_ivec busy; /* GPU events (CUPTI records, lib/model/cupti_conv.c) */
    int64_t step_tid;
};

/* The first pass: steps, checkpoint and eval time, tokenization, GPU events, phase spans. */
static void swift_scan(const struct swift_an_set *set, struct swift_an_proc *p,
                       struct swift_scan *sc)
{
    const struct swift_an_source *s = p->src;
    const struct swift_an_strtab *st = &set->strs;
    double off = s->clock_offset_us;
    struct swift_an_ivec tok = {0};
    int64_t tids[64];
    int ntids = 0;
    for (size_t i = 0; i < s->n; i++) {
        const struct swift_an_ev *e = &s->ev[i];
        const char *cat = swift_an_str(st, e->cat), *nm = swift_an_str(st, e->name);
        double b = e->ts - off, en = b + e->dur;
        if (b < p->t0 || p->t0 == 0)
            p->t0 = b;
        if (en > p->t1)
            p->t1 = en;
        if (!strcmp(cat, "step") && !strcmp(nm, "step")) {
            p->steps = swift_xrealloc(p->steps, (p->nsteps + 1) * sizeof(*p->steps));
            struct swift_an_step *sp = &p->steps[p->nsteps++];
            memset(sp, 0, sizeof(*sp));
            sp->step = e->step >= 0 ? e->step : (int64_t)p->nsteps - 1;
            sc->step_tid = e->tid;
            sp->ts = b;
            sp->dur = e->dur;
        } else if (!strcmp(cat, "ckpt")) {
            p->ckpt_us += e->dur;
        } else if (!strcmp(cat, "eval")) {
            p->eval_us += e->dur;
        } else if (!strcmp(cat, "tokenize")) {
            swift_an_ivec_push(&tok, b, en);
            p->tok_sum_us += e->dur;
            int k;
            for (k = 0; k < ntids && tids[k] != e->tid; k++)
                ;
            if (k == ntids && ntids < 64)
                tids[ntids++] = e->tid;
        } else if (!strcmp(cat, "kernel") || !strcmp(cat, "gpu_memcpy") ||
                   !strcmp(cat, "gpu_memset")) {
            swift_an_ivec_push(&sc->busy, b, en);
        } else if (claim_candidate(nm, cat)) {
            sc->ph[sc->nph++] = e; /* filtered by thread once the step thread is known */
        }
    }
    p->tok_threads = ntids;
    if (tok.n)
        p->tok_busy_us = swift_an_ival_len(tok.v, swift_an_ival_merge(tok.v, tok.n));
    swift_an_ivec_free(&tok);
}

/* The phase of each span of the step thread (ph, sorted by start), by time containment, not by
 * name: a phase span (data_wait, forward, backward, grad_sync, optimizer: swift_an_phase_of)
 * is its own phase; any other span (--profile's per-layer and per-op spans, lm_head.backward
 * or layer.3.backward inside backward) belongs to the innermost phase span that contains it and
 * adds no time of its own, so it leaves ph; a compute span inside no phase span counts as
 * forward, but for the RL spans (rl.c) and what generate, reward, ref_logps and old_logps hold,
 * and a VL step's forward_backward (its vision, llm, llm_backward and vision_backward are phase
 * spans).
 * part[i] is the phase of what stays in ph. */
static void swift_attribute(const struct swift_an_set *set, const struct swift_an_ev **ph,
                            size_t *nph, int *part)
{
    const struct swift_an_strtab *st = &set->strs;
    size_t n = *nph, nphase = 0, nrl = 0, keep = 0;
    struct swift_an_ival *iv = swift_xmalloc((n + 1) * sizeof(*iv));
    struct swift_an_ival *rl = swift_xmalloc((n + 1) * sizeof(*rl));
    for (size_t i = 0; i < n; i++) {
        part[i] = swift_an_phase_of(swift_an_str(st, ph[i]->name), swift_an_str(st, ph[i]->cat));
        if (part[i] >= 0)
            iv[nphase++] = (struct swift_an_ival){ph[i]->ts, ph[i]->ts + ph[i]->dur};
        else if (swift_an_rl_container(swift_an_rl_kind(swift_an_str(st, ph[i]->name))))
            rl[nrl++] = (struct swift_an_ival){ph[i]->ts, ph[i]->ts + ph[i]->dur};
    }
    for (size_t i = 0; i < n; i++) {
        if (part[i] < 0) {
            double b = ph[i]->ts, e = b + ph[i]->dur;
            if (swift_an_ival_enclosing(iv, nphase, b, e, SWIFT_AN_NEST_TOL) >= 0)
                continue; /* inside a phase span: its time is that span's */
            /* RL steps (rl.c): generate, reward, ref_logps, old_logps and what they hold are
             * not forward (the "rl" view splits them; here they are "other"), and train only
             * holds the step's forward and backward */
            if (swift_an_rl_kind(swift_an_str(st, ph[i]->name)) >= 0 ||
                swift_an_ival_enclosing(rl, nrl, b, e, SWIFT_AN_NEST_TOL) >= 0)
                continue;
            /* a VL step's forward_backward holds its forward and backward phase spans */
            if (!strcmp(swift_an_str(st, ph[i]->name), "forward_backward"))
                continue;
            part[i] = SP_FWD;
        }
        ph[keep] = ph[i];
        part[keep++] = part[i];
    }
    *nph = keep;
    free(iv);
    free(rl);
}

/* Each step's time claimed by the phases ph (sorted by start, part[i] the phase of ph[i]) in
 * order, the rest "other". */
static void swift_claim(struct swift_an_proc *p, const struct swift_an_ev **ph, const int *part,
                        size_t nph)
{
    double off = p->src->clock_offset_us;
    static const int order[] = {SP_DATA, SP_SYNC, SP_FWD, SP_BWD, SP_OPT};
    struct swift_an_ival slots[64], tmp[64], claim[64], mine[32];
    size_t j = 0;
    for (size_t i = 0; i < p->nsteps; i++) {
        struct swift_an_step *sp = &p->steps[i];
        double lo = sp->ts, hi = sp->ts + sp->dur;
        size_t ns = hi > lo, claimed_n;
        slots[0] = (struct swift_an_ival){lo, hi};
        while (j < nph && ph[j]->ts - off + ph[j]->dur <= lo)
            j++;
        double claimed = 0;
        for (int oi = 0; oi < 5; oi++) {
            size_t nm = 0;
            for (size_t q = j; q < nph && ph[q]->ts - off < hi && nm < 32; q++) {
                const struct swift_an_ev *e = ph[q];
                if (part[q] != order[oi])
                    continue;
                double b = e->ts - off, en = b + e->dur;
                mine[nm++] = (struct swift_an_ival){b < lo ? lo : b, en > hi ? hi : en};
            }
            nm = swift_an_ival_merge(mine, nm);
            claimed_n = swift_an_ival_and(slots, ns, mine, nm, claim);
            double len = swift_an_ival_len(claim, claimed_n);
            sp->part[order[oi]] = len;
            swift_an_seg_add(&sp->seg, &sp->nseg, order[oi], claim, claimed_n, 0);
            claimed += len;
            ns = swift_an_ival_sub(slots, ns, claim, claimed_n, tmp);
            if (ns > 32)
                ns = 32;
            memcpy(slots, tmp, ns * sizeof(*slots));
        }
        sp->part[SP_OTHER] = sp->dur - claimed;
        swift_an_seg_sort(sp->seg, sp->nseg);
    }
}

/* What the step thread was doing while the GPU sat idle: per part, averaged over steps. */
static void swift_gpu_idle(struct swift_an_proc *p, struct swift_an_ivec *busy)
{
    size_t nb = swift_an_ival_merge(busy->v, busy->n);
    for (size_t i = 0; i < p->nsteps; i++) {
        const struct swift_an_step *sp = &p->steps[i];
        double idle = sp->dur - swift_an_ival_len_in(busy->v, nb, sp->ts, sp->ts + sp->dur);
        for (size_t q = 0; q < sp->nseg; q++) {
            const struct swift_an_seg *g = &sp->seg[q];
            double v = (g->e - g->b) - swift_an_ival_len_in(busy->v, nb, g->b, g->e);
            p->gpu_idle_part[g->part] += v / (double)p->nsteps;
            idle -= v;
        }
        p->gpu_idle_part[SP_OTHER] += idle / (double)p->nsteps;
    }
}

/* Our traces: step spans partitioned into data_wait > grad_sync > forward > backward >
 * optimizer (claimed in that order where they overlap) and other. Only spans of the thread that
 * runs the step count: a prefetch thread's "data" spans overlap the step's compute and are no
 * stall (the step thread's own data_wait is). */
static void swift_proc(const struct swift_an_set *set, struct swift_an_proc *p,
                       const struct swift_an_kineto_opts *o)
{
    const struct swift_an_source *s = p->src;
    p->npart = SP_N;
    p->part_names = swift_an_phase_names;
    p->data_part = SP_DATA;
    p->comm_part = SP_SYNC;
    struct swift_scan sc = {.ph = swift_xmalloc((s->n + 1) * sizeof(*sc.ph))};
    swift_scan(set, p, &sc);
    size_t keep = 0;
    for (size_t i = 0; i < sc.nph; i++)
        if (!p->nsteps || sc.ph[i]->tid == sc.step_tid)
            sc.ph[keep++] = sc.ph[i];
    sc.nph = keep;
    swift_an_sort(sc.ph, sc.nph, sizeof(*sc.ph), cmp_ev_ts);
    int *part = swift_xmalloc((sc.nph + 1) * sizeof(*part));
    swift_attribute(set, sc.ph, &sc.nph, part);
    swift_claim(p, sc.ph, part, sc.nph);
    free(part);
    free(sc.ph);
    step_stats(p);
    /* GPU events: the analyses of Kineto traces (kineto.h) on the same events, with our step
     * spans as the steps: HTA's idle time, kernel breakdown, overlap and launch statistics,
     * and GPU utilization as the TensorBoard plugin defines it (kernel union over all steps,
     * steps extended to the device work they launched) */
    p->gpu_util = -1;
    if (sc.busy.n) {
        swift_an_kineto_analyze(set, s, o, &p->k);
        p->has_kineto = 1;
        p->gpu_util = p->k.gpu_util;
        swift_gpu_idle(p, &sc.busy);
    }
    swift_an_ivec_free(&sc.busy);
}

static void kineto_proc(const struct swift_an_set *set, struct swift_an_proc *p,
                        const struct swift_analyze_opts *o)
{
    const struct swift_an_source *s = p->src;
    swift_an_kineto_analyze(set, s, &o->kopts, &p->k);
    p->has_kineto = 1;
    p->npart = SWIFT_TB_NROLE;
    p->part_names = swift_an_tbrole_names;
    p->data_part = SWIFT_TB_DATALOADER;
    p->comm_part = SWIFT_TB_COMM;
    p->gpu_util = p->k.gpu_util;
    p->nsteps = p->k.nsteps;
    p->steps = swift_xcalloc(p->nsteps + 1, sizeof(*p->steps));
    for (size_t i = 0; i < p->nsteps; i++) {
        p->steps[i].step = p->k.steps[i].step;
        p->steps[i].ts = p->k.steps[i].b;
        p->steps[i].dur = p->k.steps[i].e - p->k.steps[i].b;
        memcpy(p->steps[i].part, p->k.steps[i].role, sizeof(p->k.steps[i].role));
        p->steps[i].seg = p->k.steps[i].seg; /* ownership moves to the proc */
        p->steps[i].nseg = p->k.steps[i].nseg;
        p->k.steps[i].seg = NULL;
    }
    for (size_t i = 0; i < s->n; i++) {
        double b = s->ev[i].ts, e = b + s->ev[i].dur;
        if (i == 0 || b < p->t0)
            p->t0 = b;
        if (e > p->t1)
            p->t1 = e;
    }
    step_stats(p);
}

long swift_an_step_of(const struct swift_an_proc *p, double ts)
{
    size_t lo = 0, hi = p->nsteps;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->steps[mid].ts <= ts)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (!lo || ts >= p->steps[lo - 1].ts + p->steps[lo - 1].dur)
        return -1;
    return (long)lo - 1;
}

void swift_an_proc_one(const struct swift_an_set *set, const struct swift_analyze_opts *o, size_t i,
                       struct swift_an_proc *p)
{
    const struct swift_an_source *s = &set->src[i];
    p->src = s;
    p->rank = s->rank >= 0 ? s->rank : 0;
    p->data_part = p->comm_part = -1;
    if (s->kind == SWIFT_AN_SWIFT) {
        if (s->process_name)
            snprintf(p->label, sizeof(p->label), "%s", s->process_name);
        else
            snprintf(p->label,
                     sizeof(p->label),
                     "swift-%s rank %d @ %s",
                     s->stage ? s->stage : "?",
                     p->rank,
                     s->host ? s->host : "?");
        swift_proc(set, p, &o->kopts);
    } else {
        const char *base = strrchr(s->path, '/');
        snprintf(p->label, sizeof(p->label), "%s rank %d", base ? base + 1 : s->path, p->rank);
        kineto_proc(set, p, o);
    }
    p->mem_reserved = -1;
    for (int d = 0; d < SWIFT_AN_MAX_DEV; d++) {
        if (s->mem_peak[d] > p->mem_peak) {
            p->mem_peak = s->mem_peak[d];
            p->mem_total = s->mem_total[d];
            p->mem_peak_ts = s->mem_peak_ts[d];
            p->mem_dev = d;
        }
    }
    if (p->mem_peak > 0)
        p->mem_reserved = swift_an_mem_reserved_at_peak(s, p->mem_dev);
}

struct build_ctx {
    const struct swift_an_set *set;
    const struct swift_analyze_opts *o;
    struct swift_an_proc *ps;
};

/* Process i of the set (one pool task: it reads the set and writes only ps[i]). */
static void proc_one(void *ctx, long i, int worker)
{
    (void)worker;
    const struct build_ctx *c = ctx;
    swift_an_proc_one(c->set, c->o, (size_t)i, &c->ps[i]);
}

int swift_an_procs_build(const struct swift_an_set *set, const struct swift_analyze_opts *o,
                         struct swift_an_proc **procs, size_t *nprocs)
{
    struct swift_an_proc *ps = swift_xcalloc(set->n + 1, sizeof(*ps));
    struct build_ctx c = {set, o, ps};
    /* each process alone, in parallel with --threads: the results do not depend on the
     * number of threads (tests/cli/trace-analyze-ranks.bats) */
    int nt = o->threads > 0 ? o->threads : swift_ncpus();
    if (nt > 1 && set->n > 1) {
        struct swift_pool *pool = swift_pool_new(nt);
        swift_pool_for(pool, (long)set->n, 1, proc_one, &c);
        swift_pool_free(pool);
    } else {
        for (size_t i = 0; i < set->n; i++)
            proc_one(&c, (long)i, 0);
    }
    swift_an_collectives(set, ps, set->n);
    *procs = ps;
    *nprocs = set->n;
    return 0;
}

void swift_an_procs_free(struct swift_an_proc *procs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < procs[i].nsteps; j++)
            free(procs[i].steps[j].seg);
        free(procs[i].steps);
        if (procs[i].has_kineto)
            swift_an_kineto_release(&procs[i].k);
    }
    free(procs);
}

/* ---------- the report document ---------- */

static json_t *num(double v)
{
    if (!isfinite(v))
        return json_null();
    return json_real(v);
}

static double r3(double v)
{
    return round(v * 1000) / 1000;
}

static json_t *step_json(const struct swift_an_proc *p, const struct swift_an_step *sp,
                         int with_timeline)
{
    json_t *o = json_pack("{s:I,s:o,s:o}",
                          "step",
                          (json_int_t)sp->step,
                          "ts",
                          num(sp->ts),
                          "dur_us",
                          num(r3(sp->dur)));
    json_t *us = json_object();
    for (int k = 0; k < p->npart; k++)
        json_object_set_new(us, p->part_names[k], num(r3(sp->part[k])));
    json_object_set_new(o, "us", us);
    if (sp->nseg && with_timeline) {
        /* [part, start, end] in µs from the step's start, in time order */
        json_t *tl = json_array();
        for (size_t i = 0; i < sp->nseg; i++)
            json_array_append_new(tl,
                                  json_pack("[s,o,o]",
                                            p->part_names[sp->seg[i].part],
                                            num(r3(sp->seg[i].b - sp->ts)),
                                            num(r3(sp->seg[i].e - sp->ts))));
        json_object_set_new(o, "timeline", tl);
    }
    return o;
}

/* Longest first; arg is the process. */
static int cmp_step_dur(const void *a, const void *b, void *arg)
{
    const struct swift_an_proc *sort_proc = arg;
    double x = sort_proc->steps[*(const size_t *)a].dur,
           y = sort_proc->steps[*(const size_t *)b].dur;
    return (x < y) - (x > y);
}

size_t swift_an_worst_steps(const struct swift_an_proc *p, int top, size_t **out)
{
    size_t *idx = swift_xmalloc((p->nsteps + 1) * sizeof(*idx));
    for (size_t i = 0; i < p->nsteps; i++)
        idx[i] = i;
    swift_an_sort_r(idx, p->nsteps, sizeof(*idx), cmp_step_dur, (void *)p);
    *out = idx;
    return p->nsteps < (size_t)top ? p->nsteps : (size_t)top;
}

/* Host-side spans (CPU ops, annotations, our phases) by name: count and inclusive time, the
 * n largest totals. GPU work (stream >= 0), steps and the profiler's own spans are left out. */
struct opagg {
    uint32_t name, cat;
    long count;
    double sum;
};
static int cmp_opagg(const void *a, const void *b)
{
    const struct opagg *x = a, *y = b;
    return (x->sum < y->sum) - (x->sum > y->sum);
}

static json_t *top_ops(const struct swift_an_set *set, const struct swift_an_proc *p, int n)
{
    const struct swift_an_source *s = p->src;
    const struct swift_an_strtab *st = &set->strs;
    uint32_t *slot = swift_xcalloc(st->n + 1, sizeof(*slot));
    struct opagg *agg = NULL;
    size_t na = 0;
    for (size_t i = 0; i < s->n; i++) {
        const struct swift_an_ev *e = &s->ev[i];
        if (e->stream >= 0 || e->name >= st->n)
            continue;
        const char *cat = swift_an_str(st, e->cat), *nm = swift_an_str(st, e->name);
        if (!strcmp(cat, "step") || !strcmp(cat, "Trace") || !strncmp(nm, "ProfilerStep#", 13) ||
            !strcmp(cat, "kernel") || !strcmp(cat, "Kernel") || !strcmp(cat, "gpu_memcpy") ||
            !strcmp(cat, "gpu_memset") || !strcmp(cat, "gpu_user_annotation") ||
            !strcmp(cat, "Memcpy") || !strcmp(cat, "Memset"))
            continue;
        if (!slot[e->name]) {
            agg = swift_xrealloc(agg, (na + 1) * sizeof(*agg));
            agg[na++] = (struct opagg){e->name, e->cat, 0, 0};
            slot[e->name] = (uint32_t)na;
        }
        agg[slot[e->name] - 1].count++;
        agg[slot[e->name] - 1].sum += e->dur;
    }
    swift_an_sort(agg, na, sizeof(*agg), cmp_opagg);
    json_t *a = json_array();
    for (size_t i = 0; i < na && i < (size_t)n; i++)
        json_array_append_new(
            a,
            json_pack("{s:s,s:s,s:I,s:o}",
                      "name",
                      swift_an_str(st, agg[i].name),
                      "cat",
                      agg[i].cat == SWIFT_AN_NONE ? "" : swift_an_str(st, agg[i].cat),
                      "count",
                      (json_int_t)agg[i].count,
                      "sum_us",
                      num(r3(agg[i].sum))));
    free(agg);
    free(slot);
    return a;
}

/* The mean step split into parts: names, µs and fraction of the step. */
static json_t *breakdown_json(const struct swift_an_proc *p)
{
    json_t *bd = json_object(), *us = json_object(), *fr = json_object(), *roles = json_array();
    for (int k = 0; k < p->npart; k++) {
        json_array_append_new(roles, json_string(p->part_names[k]));
        json_object_set_new(us, p->part_names[k], num(r3(p->part_avg[k])));
        json_object_set_new(
            fr,
            p->part_names[k],
            num(p->step_avg > 0 ? round(p->part_avg[k] / p->step_avg * 1e6) / 1e6 : 0));
    }
    json_object_set_new(bd, "parts", roles);
    json_object_set_new(bd, "step_us", num(r3(p->step_avg)));
    json_object_set_new(bd, "us", us);
    json_object_set_new(bd, "fraction", fr);
    return bd;
}

/* HTA's kernel-type combination table: time and share of each label seen. */
static json_t *kernel_types_json(const struct swift_an_kineto *k)
{
    json_t *kt = json_array();
    double tot = 0;
    for (int c = 1; c < 8; c++)
        tot += k->combo_us[c];
    for (int c = 1; c < 8; c++)
        if (k->combo_us[c] > 0)
            json_array_append_new(kt,
                                  json_pack("{s:s,s:o,s:o}",
                                            "type",
                                            swift_an_kcombo_names[c],
                                            "us",
                                            num(k->combo_us[c]),
                                            "pct",
                                            num(round(1000 * k->combo_us[c] / tot) / 10)));
    return kt;
}

/* HTA's kernel breakdown by name. */
static json_t *kernels_json(const struct swift_an_set *set, const struct swift_an_kineto *k)
{
    json_t *kr = json_array();
    for (size_t i = 0; i < k->nkrows; i++) {
        const struct swift_an_krow *r = &k->krows[i];
        json_array_append_new(
            kr,
            json_pack("{s:s,s:s,s:I,s:I,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}",
                      "type",
                      swift_an_ktype_name(r->type),
                      "name",
                      r->name == SWIFT_AN_NONE ? "others" : swift_an_str(&set->strs, r->name),
                      "count",
                      (json_int_t)r->count,
                      "names",
                      (json_int_t)r->names,
                      "sum_us",
                      num(r->sum),
                      "max_us",
                      num(r->max),
                      "min_us",
                      num(r->min),
                      "mean_us",
                      num(r->mean),
                      "std_us",
                      num(r->std),
                      "launch_max_us",
                      num(r->lmax),
                      "launch_min_us",
                      num(r->lmin),
                      "launch_mean_us",
                      num(r->lmean),
                      "launch_std_us",
                      num(r->lstd)));
    }
    return kr;
}

/* HTA's idle time breakdown, per stream. */
static json_t *idle_json(const struct swift_an_kineto *k)
{
    json_t *idle = json_array();
    for (size_t i = 0; i < k->nidle; i++) {
        const struct swift_an_idle_row *r = &k->idle[i];
        double t = r->host_wait + r->kernel_wait + r->other;
        json_array_append_new(idle,
                              json_pack("{s:i,s:o,s:o,s:o,s:o,s:o,s:o}",
                                        "stream",
                                        r->stream,
                                        "host_wait_us",
                                        num(r->host_wait),
                                        "kernel_wait_us",
                                        num(r->kernel_wait),
                                        "other_us",
                                        num(r->other),
                                        "host_wait_ratio",
                                        num(t ? round(100 * r->host_wait / t) / 100 : 0),
                                        "kernel_wait_ratio",
                                        num(t ? round(100 * r->kernel_wait / t) / 100 : 0),
                                        "other_ratio",
                                        num(t ? round(100 * r->other / t) / 100 : 0)));
    }
    return idle;
}

/* The NCCL kernels: how many, and the `top` longest with their collective's args. */
static json_t *nccl_json(const struct swift_an_set *set, const struct swift_an_source *s, int top)
{
    size_t *ni;
    size_t nn = swift_an_kineto_nccl(set, s, &ni);
    json_t *col = json_array();
    for (size_t i = 0; i < nn && i < (size_t)top; i++) {
        const struct swift_an_ev *e = &s->ev[ni[i]];
        json_t *c = json_pack("{s:s,s:o,s:o}",
                              "name",
                              swift_an_str(&set->strs, e->name),
                              "ts",
                              num(e->ts),
                              "dur_us",
                              num(e->dur));
        if (e->comm != SWIFT_AN_NONE) {
            const struct swift_an_comm *cm = &s->comm[e->comm];
            const struct swift_an_strtab *st = &set->strs;
#define S(id) ((id) == SWIFT_AN_NONE ? json_null() : json_string(swift_an_str(st, id)))
            json_object_set_new(c, "collective_name", S(cm->collective));
            json_object_set_new(c, "in_msg_nelems", json_integer(cm->in_nelems));
            json_object_set_new(c, "out_msg_nelems", json_integer(cm->out_nelems));
            json_object_set_new(c, "group_size", json_integer(cm->group_size));
            json_object_set_new(c, "dtype", S(cm->dtype));
            json_object_set_new(c, "in_split_size", S(cm->in_split));
            json_object_set_new(c, "out_split_size", S(cm->out_split));
            json_object_set_new(c, "process_group_name", S(cm->pg_name));
            json_object_set_new(c, "process_group_desc", S(cm->pg_desc));
            json_object_set_new(c, "process_group_ranks", S(cm->pg_ranks));
#undef S
        }
        json_array_append_new(col, c);
    }
    free(ni);
    return json_pack("{s:I,s:o}", "kernels", (json_int_t)nn, "longest", col);
}

/* The GPU analyses (kineto.h) into j: temporal, overlap, kernels, idle, launch, NCCL. */
static void gpu_json(json_t *j, const struct swift_an_set *set, const struct swift_an_proc *p,
                     const struct swift_analyze_opts *o)
{
    const struct swift_an_kineto *k = &p->k;
    json_object_set_new(j,
                        "temporal",
                        json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o}",
                                  "idle_us",
                                  num(k->idle_us),
                                  "compute_us",
                                  num(k->compute_us),
                                  "non_compute_us",
                                  num(k->non_compute_us),
                                  "kernel_us",
                                  num(k->kernel_us),
                                  "idle_pct",
                                  num(k->idle_pct),
                                  "compute_pct",
                                  num(k->compute_pct),
                                  "non_compute_pct",
                                  num(k->non_compute_pct)));
    json_object_set_new(
        j, "comm_comp_overlap_pct", k->overlap_pct >= 0 ? num(k->overlap_pct) : json_null());
    json_object_set_new(j, "kernel_types", kernel_types_json(k));
    json_object_set_new(j, "kernels", kernels_json(set, k));
    json_object_set_new(j, "idle_breakdown", idle_json(k));
    json_object_set_new(j,
                        "launch",
                        json_pack("{s:I,s:I,s:I,s:I,s:o,s:o}",
                                  "launches",
                                  (json_int_t)k->launches,
                                  "short_kernels",
                                  (json_int_t)k->short_kernels,
                                  "runtime_outliers",
                                  (json_int_t)k->runtime_outliers,
                                  "delay_outliers",
                                  (json_int_t)k->delay_outliers,
                                  "mean_cpu_us",
                                  num(r3(k->launch_cpu_us)),
                                  "mean_delay_us",
                                  num(r3(k->launch_delay_us))));
    json_object_set_new(j, "nccl", nccl_json(set, p->src, o->top));
}

/* Every step, with the timeline of the longest ones. */
static json_t *step_list_json(const struct swift_an_proc *p)
{
    json_t *steps = json_array();
    size_t *worst;
    size_t nw = swift_an_worst_steps(p, SWIFT_AN_TIMELINE_STEPS, &worst);
    for (size_t i = 0; i < p->nsteps; i++) {
        int w = 0;
        for (size_t q = 0; q < nw && !w; q++)
            w = worst[q] == i;
        json_array_append_new(steps, step_json(p, &p->steps[i], w));
    }
    free(worst);
    return steps;
}

json_t *swift_an_proc_json(const struct swift_an_set *set, const struct swift_an_proc *p,
                           const struct swift_analyze_opts *o, int lanes)
{
    const struct swift_an_source *s = p->src;
    json_t *j = json_object();
    json_object_set_new(j, "label", json_string(p->label));
    json_object_set_new(j, "path", json_string(s->path));
    json_object_set_new(j, "format", json_string(s->kind == SWIFT_AN_SWIFT ? "swift" : "kineto"));
    json_object_set_new(j, "stage", s->stage ? json_string(s->stage) : json_null());
    json_object_set_new(j, "rank", json_integer(p->rank));
    json_object_set_new(j, "world_size", json_integer(s->world_size > 0 ? s->world_size : 1));
    json_object_set_new(j, "host", s->host ? json_string(s->host) : json_null());
    json_object_set_new(j, "events", json_integer((json_int_t)s->n));
    swift_an_damage_json(j, &s->damage);
    json_object_set_new(j, "wall_us", num(r3(p->t1 - p->t0)));
    json_object_set_new(j, "t0", num(p->t0));
    json_object_set_new(j, "steps", json_integer((json_int_t)p->nsteps));
    /* a process without steps has no step time: its wall time by phase instead */
    json_object_set_new(j,
                        "step_time_us",
                        !p->nsteps ? json_null()
                                   : json_pack("{s:o,s:o,s:o}",
                                               "mean",
                                               num(r3(p->step_avg)),
                                               "median",
                                               num(r3(p->step_median)),
                                               "max",
                                               num(r3(p->step_max))));
    json_object_set_new(j, "breakdown", p->nsteps ? breakdown_json(p) : json_null());
    json_object_set_new(j, "phases", swift_an_phases_json(set, p, o->top));
    json_object_set_new(j, "ops", swift_an_ops_json(set, p, o->top));
    json_object_set_new(j, "rl", swift_an_rl_json(set, p, o->top));
    json_object_set_new(j, "multimodal", swift_an_vl_json(set, p, o->top));
    json_object_set_new(j, "inference", swift_an_infer_json(p));
    json_object_set_new(j, "op_roofline", swift_an_oproof_json(set, p, o->top < 20 ? 20 : o->top));
    json_object_set_new(
        j, "gpu_utilization", p->gpu_util >= 0 ? num(round(p->gpu_util * 1e6) / 1e6) : json_null());
    json_object_set_new(j, "ckpt_us", num(r3(p->ckpt_us)));
    json_object_set_new(j, "eval_us", num(r3(p->eval_us)));
    if (p->tok_threads)
        json_object_set_new(j,
                            "tokenize",
                            json_pack("{s:i,s:o,s:o}",
                                      "threads",
                                      p->tok_threads,
                                      "busy_us",
                                      num(r3(p->tok_busy_us)),
                                      "sum_us",
                                      num(r3(p->tok_sum_us))));
    json_t *cats = swift_an_memory_categories_json(p->src);
    if (p->mem_peak > 0 || cats) {
        json_t *m =
            json_pack("{s:o,s:o,s:o,s:o,s:o}",
                      "peak_bytes",
                      num(p->mem_peak > 0 ? p->mem_peak : swift_an_jnum(cats, "total")),
                      "device_bytes",
                      p->mem_total > 0 ? num(p->mem_total) : json_null(),
                      "peak_pct",
                      p->mem_total > 0 ? num(r3(100 * p->mem_peak / p->mem_total)) : json_null(),
                      "reserved_at_peak_bytes",
                      p->mem_reserved >= 0 ? num(p->mem_reserved) : json_null(),
                      "fragmentation_bytes",
                      p->mem_reserved >= 0 ? num(p->mem_reserved - p->mem_peak) : json_null());
        json_t *devs = swift_an_memory_devices_json(set, p->src, p->t0 + p->src->clock_offset_us);
        json_object_set_new(m, "devices", devs ? devs : json_array());
        json_object_set_new(m, "by_category", cats ? cats : json_null());
        json_object_set_new(j, "memory", m);
    }
    if (p->has_kineto && p->k.has_gpu) {
        gpu_json(j, set, p, o);
    } else {
        json_object_set_new(j, "temporal", json_null());
        json_object_set_new(j, "comm_comp_overlap_pct", json_null());
    }
    json_object_set_new(j, "top_ops", top_ops(set, p, o->top));
    json_object_set_new(j, "step_list", step_list_json(p));
    json_object_set_new(j, "worst_step", lanes ? swift_an_lanes_json(set, p) : json_null());
    return j;
}

json_t *swift_an_report_build(const struct swift_an_set *set, const struct swift_an_proc *procs,
                              size_t n, const struct swift_analyze_opts *o)
{
    return swift_an_report_build_procs(set, procs, n, NULL, NULL, o);
}

json_t *swift_an_report_build_procs(const struct swift_an_set *set,
                                    const struct swift_an_proc *procs, size_t n, json_t **pjs,
                                    json_t *const *plane, const struct swift_analyze_opts *o)
{
    json_t *r = json_object();
    json_object_set_new(r, "schema_version", json_integer(SWIFT_REPORT_SCHEMA_VERSION));
    json_object_set_new(r, "tool", json_string("swift-trace-analyze"));
    json_object_set_new(r, "version", json_string(SWIFT_VERSION));
    json_t *ps = json_array();
    double t0 = INFINITY, t1 = -INFINITY;
    char *lanes = swift_an_lanes_pick(procs, n);
    for (size_t i = 0; i < n; i++) {
        json_t *pj;
        if (pjs) {
            pj = pjs[i];
            json_object_set_new(pj,
                                "worst_step",
                                lanes[i] && plane && plane[i] ? json_incref(plane[i])
                                                              : json_null());
        } else {
            pj = swift_an_proc_json(set, &procs[i], o, lanes[i]);
        }
        json_array_append_new(ps, pj);
        if (procs[i].t0 < t0)
            t0 = procs[i].t0;
        if (procs[i].t1 > t1)
            t1 = procs[i].t1;
    }
    free(lanes);
    json_object_set_new(r, "inputs_failed", json_integer(set->nfailed));
    json_object_set_new(r, "bad_lines", json_integer(set->bad_lines));
    json_object_set_new(r, "wall_us", n ? num(r3(t1 - t0)) : json_null());
    json_object_set_new(r, "processes", ps);
    json_object_set_new(r, "collectives", swift_an_collectives_json(procs, n));
    json_object_set_new(r, "ranks", swift_an_ranks_json(procs, n, o->top));
    json_object_set_new(r, "bottlenecks", json_array());
    swift_an_rules_apply(r, set, procs, n, o);
    return r;
}

static int max_severity(json_t *report)
{
    int sev = 0;
    size_t i;
    json_t *b;
    json_array_foreach(json_object_get(report, "bottlenecks"), i, b)
    {
        const char *s = json_string_value(json_object_get(b, "severity"));
        int v = s && !strcmp(s, "critical") ? SWIFT_SEV_CRITICAL
                : s && !strcmp(s, "warn")   ? SWIFT_SEV_WARN
                                            : SWIFT_SEV_INFO;
        if (v > sev)
            sev = v;
    }
    return sev;
}

int swift_an_loaded_check(const struct swift_an_set *set, const struct swift_analyze_opts *o)
{
    if (set->bad_lines && o->strict) {
        swift_an_damage_strict(set);
        return SWIFT_FAILED;
    }
    if (set->nfailed && o->strict) {
        swift_error(
            "%d input%s could not be read (--strict)", set->nfailed, set->nfailed > 1 ? "s" : "");
        return SWIFT_FAILED;
    }
    if (!set->n) {
        swift_error("no trace could be read");
        return SWIFT_FAILED;
    }
    if (set->nfailed)
        swift_warn(
            "%d input%s skipped, %zu analysed", set->nfailed, set->nfailed > 1 ? "s" : "", set->n);
    return 0;
}

/* Every file into set (upto[i]: the files of paths[0..i]), then every process analysed. */
static int load_and_build(struct swift_an_set *set, char **files, const size_t *upto,
                          const struct swift_analyze_opts *o, struct swift_an_proc **procs,
                          size_t *n, json_t **report)
{
    size_t f = 0;
    for (int i = 0; i < o->npaths; i++) {
        int64_t t0 = swift_trace_now();
        for (; f < upto[i]; f++)
            swift_an_load_path(set, files[f], SWIFT_AN_LOAD_RECURSE);
        struct swift_targ a[] = {SWIFT_TARG_S("path", o->paths[i]),
                                 SWIFT_TARG_I("events", (int64_t)set->kept)};
        swift_trace_span("io", "load", t0, swift_trace_now(), a, 2);
    }
    if (swift_an_loaded_check(set, o) < 0)
        return SWIFT_FAILED;
    int64_t t0 = swift_trace_now();
    swift_an_procs_build(set, o, procs, n);
    *report = swift_an_report_build(set, *procs, *n, o);
    swift_trace_span("stage", "analyze", t0, swift_trace_now(), NULL, 0);
    return 0;
}

int swift_analyze_run(const struct swift_analyze_opts *o)
{
    if (o->compare)
        return swift_an_compare_run(o);
    struct swift_an_set set;
    swift_an_set_init(&set);
    /* the input files first: how many decides how they are read */
    char **files = NULL;
    size_t nf = 0, cap = 0, *upto = swift_xcalloc((size_t)o->npaths + 1, sizeof(*upto));
    for (int i = 0; i < o->npaths; i++) {
        if (swift_an_list_path(o->paths[i], SWIFT_AN_LOAD_RECURSE, &files, &nf, &cap) < 0)
            set.nfailed++;
        upto[i] = nf;
    }
    struct swift_an_proc *procs = NULL;
    size_t n = 0;
    json_t *report = NULL;
    int rc = !o->merge && nf >= SWIFT_AN_PER_RANK_MIN
                 ? swift_an_per_rank_run(&set, files, nf, o, &procs, &n, &report)
                 : load_and_build(&set, files, upto, o, &procs, &n, &report);
    for (size_t i = 0; i < nf; i++)
        free(files[i]);
    free(files);
    free(upto);
    if (rc < 0) {
        swift_an_procs_free(procs, n);
        swift_an_set_release(&set);
        return SWIFT_FAILED;
    }
    if (o->merge && swift_an_merge_write(&set, procs, n, report, o) < 0)
        rc = SWIFT_FAILED;
    if (rc == 0 && o->emit_patch && swift_an_patch_write(report, o->output, o->emit_patch) < 0)
        rc = SWIFT_FAILED;
    else if (rc == 0 && !o->emit_patch &&
             swift_an_report_write(report, o->format, o->output, o->top) < 0)
        rc = SWIFT_FAILED;
    if (rc == 0 && o->fail_on && max_severity(report) >= o->fail_on) {
        swift_error("bottleneck at or above --fail-on level found");
        rc = SWIFT_FAILED;
    }
    json_decref(report);
    swift_an_procs_free(procs, n);
    swift_an_set_release(&set);
    return rc;
}
