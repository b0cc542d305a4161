/*
 * analyze/kineto — the numbers of Holistic Trace Analysis (HTA) for one source: its rows as
 * HTA parses, rounds and filters them, the temporal breakdown, the kernel-type combinations and
 * kernels by name, idle time by cause per stream, communication-computation overlap, launch
 * statistics and NCCL collectives; then the TensorBoard numbers (tensorboard.c). See kineto.h.
 */
#include "lib/analyze/internal.h"
#include "lib/core/alloc.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <math.h>
#include <pthread.h>
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

const char *const swift_an_kcombo_names[8] = {
    "IDLE",
    "COMPUTATION",
    "COMMUNICATION",
    "COMPUTATION overlapping COMMUNICATION",
    "MEMORY",
    "COMPUTATION overlapping MEMORY",
    "COMMUNICATION overlapping MEMORY",
    "COMPUTATION overlapping COMMUNICATION overlapping MEMORY"};

static const char *const ktype_names[] = {"COMPUTATION", "COMMUNICATION", "MEMORY", "OTHER"};
const char *swift_an_ktype_name(int t)
{
    return t >= 0 && t < 4 ? ktype_names[t] : "OTHER";
}

void swift_an_kineto_opts_default(struct swift_an_kineto_opts *o)
{
    o->runtime_cutoff_us = 50;
    o->launch_delay_cutoff_us = 100;
    o->consecutive_kernel_delay_us = 30;
    o->num_kernels = 10;
    o->duration_ratio = 0.8;
    o->hta_rounding = 1;
}

/* HTA hta/common/types.py + utils.get_kernel_type at f4d0062c; re.match
 * anchors at the start, as PCRE2_ANCHORED does. */
static const char *const re_src[3] = {
    "(^nccl.*)|(^hip)|(^hccl)|(.*ncclKernel.*)",
    "(^(hip)?Memcpy)|(^(hip)?Memset)|(^dma)",
    "(^nccl)|(.*Memcpy)|(.*Memset)|(.*dma)|(^.*Sync)|(^Stream Wait Event)|(cuda.*LaunchKernel)|"
    "(^runFunction)|(^hip)|(^job_exe)|(^packet)|(^pe_exe)|(^cpum_exe_subgraph)|(^hccl)|"
    "(^collective_subgraph_execution)"};
static pcre2_code *re_code[3];
static pthread_once_t re_once = PTHREAD_ONCE_INIT;

static void re_compile(void)
{
    for (int i = 0; i < 3; i++) {
        int err;
        PCRE2_SIZE eoff;
        re_code[i] = pcre2_compile(
            (PCRE2_SPTR)re_src[i], PCRE2_ZERO_TERMINATED, PCRE2_ANCHORED, &err, &eoff, NULL);
        if (!re_code[i])
            abort();
        pcre2_jit_compile(re_code[i], PCRE2_JIT_COMPLETE);
    }
}

/* Thread-safe: the patterns are compiled once, by whichever thread comes first (-j). */
static int re_match(int i, const char *s)
{
    pthread_once(&re_once, re_compile);
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re_code[i], NULL);
    int rc = pcre2_match(re_code[i], (PCRE2_SPTR)s, strlen(s), 0, 0, md, NULL);
    pcre2_match_data_free(md);
    return rc >= 0;
}

int swift_an_kernel_type(const char *name)
{
    if (re_match(0, name))
        return SWIFT_KT_COMMUNICATION;
    if (re_match(1, name))
        return SWIFT_KT_MEMORY;
    if (!re_match(2, name))
        return SWIFT_KT_COMPUTATION;
    return SWIFT_KT_OTHER;
}

/* ---------- HTA's view of the events ---------- */

struct hrow {
    double ts, end;
    const struct swift_an_ev *ev;
    int gpu;  /* HTA CPU/GPU split: stream >= 0 && correlation >= 0, or Event/Context Sync */
    int type; /* kernel type of the name */
};

static int cmp_hrow_ts(const void *a, const void *b)
{
    const struct hrow *x = *(const struct hrow *const *)a, *y = *(const struct hrow *const *)b;
    if (x->ts != y->ts)
        return x->ts < y->ts ? -1 : 1;
    return (x->ev > y->ev) - (x->ev < y->ev);
}

struct ctx {
    const struct swift_an_set *set;
    const struct swift_an_source *src;
    const struct swift_an_kineto_opts *o;
    struct hrow *rows;
    size_t nrows;
    int *ntype;           /* per interned name: kernel type + 1, 0 = not computed */
    unsigned char *sflag; /* per interned string: SF_* bits, 0 = not computed */
};

static int name_type(struct ctx *c, uint32_t name)
{
    if (name >= c->set->strs.n)
        return SWIFT_KT_OTHER;
    if (!c->ntype[name])
        c->ntype[name] = swift_an_kernel_type(swift_an_str(&c->set->strs, name)) + 1;
    return c->ntype[name] - 1;
}

static int contains(const char *s, const char *sub)
{
    return strstr(s, sub) != NULL;
}

static int is_idle_cat(const char *cat)
{
    static const char *const cats[] = {"kernel",
                                       "Kernel",
                                       "gpu_memset",
                                       "Memset",
                                       "gpu_memcpy",
                                       "Memcpy",
                                       "mtia_ccp_events",
                                       NULL};
    for (int i = 0; cats[i]; i++)
        if (!strcmp(cat, cats[i]))
            return 1;
    return 0;
}

static int cmp_hrow_stream_ts(const void *a, const void *b)
{
    const struct hrow *x = *(const struct hrow *const *)a, *y = *(const struct hrow *const *)b;
    if (x->ev->stream != y->ev->stream)
        return x->ev->stream < y->ev->stream ? -1 : 1;
    return cmp_hrow_ts(a, b);
}

static int is_launch_name(const char *n)
{
    return !strcmp(n, "cudaLaunchKernel") || !strcmp(n, "cudaLaunchKernelExC") ||
           !strcmp(n, "runFunction - job_prep_and_submit_for_execution") ||
           !strcmp(n, "cudaMemcpyAsync") || !strcmp(n, "cudaMemsetAsync");
}

/* What the per-event tests below ask of a name or category, computed once per interned
 * string (strcmp and strstr per event were a tenth of the time on large traces). */
enum { SF_DONE = 0x80, SF_PROFSTEP = 1, SF_LAUNCH = 2, SF_IDLECAT = 4 };

static unsigned str_flags(struct ctx *c, uint32_t id)
{
    if (id >= c->set->strs.n)
        return 0;
    if (!c->sflag[id]) {
        const char *str = swift_an_str(&c->set->strs, id);
        c->sflag[id] = (unsigned char)(SF_DONE | (contains(str, "ProfilerStep") ? SF_PROFSTEP : 0) |
                                       (is_launch_name(str) ? SF_LAUNCH : 0) |
                                       (is_idle_cat(str) ? SF_IDLECAT : 0));
    }
    return c->sflag[id];
}

/* Parse + _compress_df + round_down_time_stamps + _filter_irrelevant_gpu_kernels. */
static void hta_rows(struct ctx *c)
{
    const struct swift_an_source *s = c->src;
    const struct swift_an_strtab *st = &c->set->strs;
    uint32_t trace_cat = swift_an_lookup(st, "Trace");
    uint32_t ev_sync = swift_an_lookup(st, "Event Sync"),
             ctx_sync = swift_an_lookup(st, "Context Sync");
    c->rows = swift_xcalloc(s->n, sizeof(*c->rows));
    int round = c->o->hta_rounding && s->ts_real;
    /* distinct steps and the last step start: Kineto's ProfilerStep#N names, or (our traces)
     * the "step" spans of the step thread told apart by args.step */
    int swift = s->kind == SWIFT_AN_SWIFT;
    uint32_t step_id = swift ? swift_an_lookup(st, "step") : SWIFT_AN_NONE;
    int64_t first_step = INT64_MIN;
    int multi_steps = 0;
    double last_step_start = -INFINITY;
    size_t n = 0;
    for (size_t i = 0; i < s->n; i++) {
        const struct swift_an_ev *e = &s->ev[i];
        if (e->cat == SWIFT_AN_NONE || e->cat == trace_cat)
            continue;
        struct hrow *r = &c->rows[n++];
        r->ev = e;
        r->ts = e->ts;
        r->end = e->ts + e->dur;
        if (round) {
            r->end = floor(r->end);
            r->ts = ceil(r->ts);
        }
        r->gpu = (e->stream >= 0 && e->corr >= 0) ||
                 (e->name == ev_sync && ev_sync != SWIFT_AN_NONE) ||
                 (e->name == ctx_sync && ctx_sync != SWIFT_AN_NONE);
        int is_step = swift ? step_id != SWIFT_AN_NONE && e->cat == step_id && e->name == step_id
                            : (str_flags(c, e->name) & SF_PROFSTEP) != 0;
        if (!r->gpu && is_step) {
            /* a step without args.step counts as a step of its own */
            int64_t key = !swift ? (int64_t)e->name : e->step >= 0 ? e->step : -2 - (int64_t)i;
            if (first_step == INT64_MIN)
                first_step = key;
            else if (key != first_step)
                multi_steps = 1;
            if (r->ts > last_step_start)
                last_step_start = r->ts;
        }
    }
    /* HTA (f4d0062c) does not filter MTIA traces */
    uint32_t mtia = swift_an_lookup(st, "mtia_ccp_events");
    int is_mtia = 0;
    for (size_t i = 0; i < s->n && mtia != SWIFT_AN_NONE && !is_mtia; i++)
        is_mtia = s->ev[i].cat == mtia;
    if (multi_steps && !is_mtia) {
        struct swift_an_imap cpu_corr = {0};
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            struct hrow *r = &c->rows[i];
            if (!r->gpu && r->ts < last_step_start) {
                swift_an_imap_put(&cpu_corr, r->ev->corr, 0);
                c->rows[k++] = *r;
            } else if (r->gpu) {
                c->rows[k++] = *r; /* decided below */
            }
        }
        size_t m = 0;
        for (size_t i = 0; i < k; i++)
            if (!c->rows[i].gpu || swift_an_imap_get(&cpu_corr, c->rows[i].ev->corr, NULL))
                c->rows[m++] = c->rows[i];
        n = m;
        swift_an_imap_free(&cpu_corr);
    }
    c->nrows = n;
    for (size_t i = 0; i < n; i++)
        c->rows[i].type = c->rows[i].ev->stream != -1 ? name_type(c, c->rows[i].ev->name) : -1;
}

/* Merged intervals of GPU rows (stream != -1) selected by a type mask (bit 1<<type); mask 0 = all.
 */
static size_t gpu_ivals(struct ctx *c, unsigned mask, struct swift_an_ival **out)
{
    struct swift_an_ival *v = swift_xmalloc((c->nrows + 1) * sizeof(*v));
    size_t n = 0;
    for (size_t i = 0; i < c->nrows; i++) {
        const struct hrow *r = &c->rows[i];
        if (r->ev->stream == -1)
            continue;
        if (mask && !(mask & (1u << r->type)))
            continue;
        v[n++] = (struct swift_an_ival){r->ts, r->end};
    }
    n = swift_an_ival_merge(v, n);
    *out = v;
    return n;
}

struct sweep_pt {
    double t;
    int d;
    unsigned bit;
};

static int cmp_sweep(const void *a, const void *b)
{
    const struct sweep_pt *x = a, *y = b;
    return (x->t > y->t) - (x->t < y->t);
}

static double round2(double x)
{
    return round(x * 100) / 100;
}

static void temporal(struct ctx *c, struct swift_an_kineto *k)
{
    struct swift_an_ival *all, *comp, *comm, *mem;
    size_t na = gpu_ivals(c, 0, &all);
    size_t nc = gpu_ivals(c, 1u << SWIFT_KT_COMPUTATION, &comp);
    size_t nm = gpu_ivals(c, 1u << SWIFT_KT_COMMUNICATION, &comm);
    size_t nmem = gpu_ivals(c, 1u << SWIFT_KT_MEMORY, &mem);
    k->has_gpu = na > 0;
    k->overlap_pct = -1;
    if (na) {
        k->kernel_us = all[na - 1].e - all[0].b;
        k->idle_us = k->kernel_us - swift_an_ival_len(all, na);
        k->compute_us = swift_an_ival_len(comp, nc);
        k->non_compute_us = k->kernel_us - k->compute_us - k->idle_us;
        if (k->kernel_us > 0) {
            k->idle_pct = round2(100 * k->idle_us / k->kernel_us);
            k->compute_pct = round2(100 * k->compute_us / k->kernel_us);
            k->non_compute_pct = round2(100 * k->non_compute_us / k->kernel_us);
        }
    }
    /* communication-computation overlap (HTA §1.5) */
    if (nm) {
        struct swift_an_ival *ov = swift_xmalloc((nm + nc + 1) * sizeof(*ov));
        size_t no = swift_an_ival_and(comm, nm, comp, nc, ov);
        k->comm_us = swift_an_ival_len(comm, nm);
        double o = swift_an_ival_len(ov, no);
        k->comm_exposed_us = k->comm_us - o;
        k->overlap_pct = k->comm_us > 0 ? round2(100 * o / k->comm_us) : 0;
        free(ov);
    }
    /* kernel-type combination table (HTA §1.4 table 1): sweep the three merged lists */
    size_t np = 0;
    struct sweep_pt *pts = swift_xmalloc(2 * (nc + nm + nmem + 1) * sizeof(*pts));
    const struct swift_an_ival *lists[3] = {comp, comm, mem};
    size_t counts[3] = {nc, nm, nmem};
    for (int l = 0; l < 3; l++)
        for (size_t i = 0; i < counts[l]; i++) {
            pts[np++] = (struct sweep_pt){lists[l][i].b, 1, 1u << l};
            pts[np++] = (struct sweep_pt){lists[l][i].e, -1, 1u << l};
        }
    swift_an_sort(pts, np, sizeof(*pts), cmp_sweep);
    unsigned mask = 0;
    double prev = np ? pts[0].t : 0;
    for (size_t i = 0; i < np;) {
        double t = pts[i].t;
        if (mask)
            k->combo_us[mask & 7] += t - prev;
        while (i < np && pts[i].t == t) {
            if (pts[i].d > 0)
                mask |= pts[i].bit;
            else
                mask &= ~pts[i].bit;
            i++;
        }
        prev = t;
    }
    free(pts);
    free(all);
    free(comp);
    free(comm);
    free(mem);
}

/* ---------- kernel breakdown by name (HTA §1.4 table 2) ---------- */

struct kagg {
    uint32_t name;
    long count, names;
    double sum, sumsq, max, min;
    /* HTA's statistics over per-name sums (set when a type has more than num_kernels names) */
    double ssum, ssumsq, smax, smin;
};

static int cmp_kagg_sum(const void *a, const void *b)
{
    const struct kagg *x = a, *y = b;
    return (x->sum < y->sum) - (x->sum > y->sum);
}

/* By name; arg is the string table. */
static int cmp_krow_name(const void *a, const void *b, void *arg)
{
    const struct swift_an_strtab *sort_st = arg;
    const struct swift_an_krow *x = a, *y = b;
    const char *nx = x->name == SWIFT_AN_NONE ? "others" : swift_an_str(sort_st, x->name);
    const char *ny = y->name == SWIFT_AN_NONE ? "others" : swift_an_str(sort_st, y->name);
    return strcmp(nx, ny);
}

/* Sample standard deviation (pandas' ddof=1; 0 for one value, as HTA's fillna(0)). */
static double sample_std(long n, double sum, double sumsq)
{
    if (n < 2)
        return 0;
    double var = (sumsq - sum * (sum / (double)n)) / (double)(n - 1);
    return var > 0 ? sqrt(var) : 0;
}

/* Fold name row `g` into `o` (HTA's "others" group): launches and per-name sums. */
static void kagg_fold(struct kagg *o, const struct kagg *g)
{
    o->count += g->count;
    o->names++;
    o->sum += g->sum;
    o->sumsq += g->sumsq;
    o->max = g->max > o->max ? g->max : o->max;
    o->min = g->min < o->min ? g->min : o->min;
    o->ssum += g->sum;
    o->ssumsq += g->sum * g->sum;
    o->smax = g->sum > o->smax ? g->sum : o->smax;
    o->smin = g->sum < o->smin ? g->sum : o->smin;
}

/* HTA _aggr_gpu_kernel_time: with more than num_kernels names, the names past the
 * duration_ratio quantile of the cumulative sum (or past num_kernels) become "others", and HTA
 * regroups the per-name table on its "sum" column, so max/min/mean/std then describe the
 * per-name sums (a kept name: max = min = mean = sum, std 0). Returns the rows kept. */
static size_t kagg_regroup(struct kagg *agg, size_t na, const struct swift_an_kineto_opts *o)
{
    for (size_t i = 0; i < na; i++) {
        agg[i].ssum = agg[i].smax = agg[i].smin = agg[i].sum;
        agg[i].ssumsq = agg[i].sum * agg[i].sum;
    }
    if ((int)na <= o->num_kernels) {
        for (size_t i = 0; i < na; i++)
            agg[i].names = 0; /* statistics stay per launch, as HTA's first groupby */
        return na;
    }
    struct kagg others = {.name = SWIFT_AN_NONE,
                          .min = INFINITY,
                          .max = -INFINITY,
                          .smin = INFINITY,
                          .smax = -INFINITY};
    swift_an_sort(agg, na, sizeof(*agg), cmp_kagg_sum);
    double *cs = swift_xmalloc(na * sizeof(*cs));
    for (size_t i = 0; i < na; i++)
        cs[i] = (i ? cs[i - 1] : 0) + agg[i].sum;
    double pos = o->duration_ratio * (double)(na - 1);
    size_t lo = (size_t)floor(pos);
    size_t hi = lo + 1 < na ? lo + 1 : lo;
    double q = cs[lo] + (pos - (double)lo) * (cs[hi] - cs[lo]);
    size_t nkeep = 0;
    for (size_t i = 0; i < na; i++) {
        if (cs[i] > q || (int)i >= o->num_kernels)
            kagg_fold(&others, &agg[i]);
        else
            agg[nkeep++] = agg[i];
    }
    free(cs);
    if (others.count)
        agg[nkeep++] = others;
    return nkeep;
}

static struct swift_an_krow krow_of(int type, const struct kagg *g)
{
    double mean = g->sum / (double)g->count;
    struct swift_an_krow r = {.type = type,
                              .name = g->name,
                              .count = g->count,
                              .names = g->names ? g->names : 1,
                              .sum = g->sum,
                              .lmax = g->max,
                              .lmin = g->min,
                              .lmean = mean,
                              .lstd = sample_std(g->count, g->sum, g->sumsq)};
    if (g->names) { /* regrouped on the per-name sums */
        r.max = g->smax;
        r.min = g->smin;
        r.mean = g->ssum / (double)r.names;
        r.std = sample_std(r.names, g->ssum, g->ssumsq);
    } else {
        r.max = r.lmax;
        r.min = r.lmin;
        r.mean = r.lmean;
        r.std = r.lstd;
    }
    return r;
}

static void kernel_rows(struct ctx *c, struct swift_an_kineto *k)
{
    uint32_t nn = c->set->strs.n;
    struct kagg *agg = swift_xcalloc(nn, sizeof(*agg));
    int *seen = swift_xcalloc(nn, sizeof(*seen));
    for (int type = 0; type < 3; type++) {
        size_t na = 0;
        memset(seen, 0, nn * sizeof(*seen));
        for (size_t i = 0; i < c->nrows; i++) {
            const struct hrow *r = &c->rows[i];
            if (r->type != type) /* type is -1 when stream is -1 (hta_rows) */
                continue;
            uint32_t nm = r->ev->name;
            if (!seen[nm]) {
                seen[nm] = (int)++na;
                agg[na - 1] =
                    (struct kagg){.name = nm, .names = 1, .min = INFINITY, .max = -INFINITY};
            }
            struct kagg *g = &agg[seen[nm] - 1];
            double d = r->end - r->ts;
            g->count++;
            g->sum += d;
            g->sumsq += d * d;
            if (d > g->max)
                g->max = d;
            if (d < g->min)
                g->min = d;
        }
        if (!na)
            continue;
        size_t nkeep = kagg_regroup(agg, na, c->o);
        size_t base = k->nkrows;
        k->krows = swift_xrealloc(k->krows, (k->nkrows + nkeep) * sizeof(*k->krows));
        for (size_t i = 0; i < nkeep; i++)
            k->krows[k->nkrows++] = krow_of(type, &agg[i]);
        swift_an_sort_r(
            k->krows + base, nkeep, sizeof(*k->krows), cmp_krow_name, (void *)&c->set->strs);
    }
    free(agg);
    free(seen);
}

/* ---------- idle time by cause (HTA §1.3) and launch statistics (§1.6) ---------- */

/* Host rows by correlation: the first one's start, and the first launch call's duration and
 * end (one map probe per row instead of three). */
struct rtcorr {
    double ts, dur, end;
    int launch;
};

static struct rtcorr *rt_by_corr(struct ctx *c, struct swift_an_imap *m)
{
    struct rtcorr *v = NULL;
    size_t n = 0, cap = 0;
    for (size_t i = 0; i < c->nrows; i++) {
        const struct hrow *r = &c->rows[i];
        if (r->gpu || r->ev->corr < 0)
            continue;
        size_t at = (size_t)*swift_an_imap_ref(m, r->ev->corr, (double)n);
        if (at == n) {
            if (n == cap) {
                cap = cap ? 2 * cap : 1024;
                v = swift_xrealloc(v, cap * sizeof(*v));
            }
            v[n++] = (struct rtcorr){.ts = r->ts};
        }
        if (!v[at].launch && r->ev->stream == -1 && (str_flags(c, r->ev->name) & SF_LAUNCH))
            v[at] = (struct rtcorr){v[at].ts, r->end - r->ts, r->end, 1};
    }
    return v;
}

static void idle_and_launch(struct ctx *c, struct swift_an_kineto *k)
{
    struct swift_an_imap rt = {0};
    struct rtcorr *rv = rt_by_corr(c, &rt);
    const struct hrow **sel = swift_xmalloc((c->nrows + 1) * sizeof(*sel));
    size_t n = 0;
    double sum_cpu = 0, sum_delay = 0;
    for (size_t i = 0; i < c->nrows; i++) {
        const struct hrow *r = &c->rows[i];
        if (r->ev->stream == -1)
            continue;
        double at;
        if (swift_an_imap_get(&rt, r->ev->corr, &at) && rv[(size_t)at].launch) {
            double cpu_dur = rv[(size_t)at].dur, cpu_end = rv[(size_t)at].end;
            double gpu_dur = r->end - r->ts;
            double delay = r->ts - cpu_end;
            if (delay < 0)
                delay = 0;
            k->launches++;
            sum_cpu += cpu_dur;
            sum_delay += delay;
            if (cpu_dur <= c->o->runtime_cutoff_us && gpu_dur < cpu_dur)
                k->short_kernels++;
            if (cpu_dur > c->o->runtime_cutoff_us)
                k->runtime_outliers++;
            if (delay > c->o->launch_delay_cutoff_us)
                k->delay_outliers++;
        }
        if (r->ev->cat != SWIFT_AN_NONE && (str_flags(c, r->ev->cat) & SF_IDLECAT))
            sel[n++] = r;
    }
    if (k->launches) {
        k->launch_cpu_us = sum_cpu / (double)k->launches;
        k->launch_delay_us = sum_delay / (double)k->launches;
    }
    swift_an_sort(sel, n, sizeof(*sel), cmp_hrow_stream_ts);
    for (size_t i = 0; i < n;) {
        int32_t stream = sel[i]->ev->stream;
        struct swift_an_idle_row row = {.stream = stream};
        double prev_end = sel[i]->end;
        for (i++; i < n && sel[i]->ev->stream == stream; i++) {
            double gap = sel[i]->ts - prev_end, at;
            int has_rt = swift_an_imap_get(&rt, sel[i]->ev->corr, &at);
            if (has_rt && rv[(size_t)at].ts > prev_end)
                row.host_wait += gap;
            else if (gap < c->o->consecutive_kernel_delay_us)
                row.kernel_wait += gap;
            else
                row.other += gap;
            prev_end = sel[i]->end;
        }
        k->idle = swift_xrealloc(k->idle, (k->nidle + 1) * sizeof(*k->idle));
        k->idle[k->nidle++] = row;
    }
    free(sel);
    swift_an_imap_free(&rt);
    free(rv);
}

/* ---------- NCCL ---------- */

/* Longest first; arg is the source's event array. */
static int cmp_idx_dur(const void *a, const void *b, void *arg)
{
    const struct swift_an_ev *nccl_src_ev = arg;
    double x = nccl_src_ev[*(const size_t *)a].dur, y = nccl_src_ev[*(const size_t *)b].dur;
    return (x < y) - (x > y);
}

size_t swift_an_kineto_nccl(const struct swift_an_set *set, const struct swift_an_source *src,
                            size_t **idx)
{
    size_t n = 0;
    *idx = swift_xmalloc((src->n + 1) * sizeof(**idx));
    for (size_t i = 0; i < src->n; i++) {
        const char *nm = swift_an_str(&set->strs, src->ev[i].name);
        if (src->ev[i].stream >= 0 &&
            (!strncmp(nm, "ncclKernel", 10) || !strncmp(nm, "ncclDevKernel", 13)))
            (*idx)[n++] = i;
    }
    swift_an_sort_r(*idx, n, sizeof(**idx), cmp_idx_dur, (void *)src->ev);
    return n;
}

/* ---------- entry ---------- */

int swift_an_kineto_analyze(const struct swift_an_set *set, const struct swift_an_source *src,
                            const struct swift_an_kineto_opts *o, struct swift_an_kineto *k)
{
    memset(k, 0, sizeof(*k));
    struct ctx c = {.set = set, .src = src, .o = o};
    c.ntype = swift_xcalloc(set->strs.n + 1, sizeof(int));
    c.sflag = swift_xcalloc(set->strs.n + 1, 1);
    hta_rows(&c);
    temporal(&c, k);
    kernel_rows(&c, k);
    idle_and_launch(&c, k);
    swift_an_tensorboard(set, src, k);
    k->sm_eff = -1;
    for (size_t i = 0; i < src->n; i++) {
        const struct swift_an_ev *e = &src->ev[i];
        if (e->stream >= 0 && e->comm != SWIFT_AN_NONE) {
            k->ncoll++;
            k->coll_us += e->dur;
        }
    }
    free(c.rows);
    free(c.ntype);
    free(c.sflag);
    return 0;
}

void swift_an_kineto_release(struct swift_an_kineto *k)
{
    for (size_t i = 0; i < k->nsteps; i++)
        free(k->steps[i].seg);
    free(k->krows);
    free(k->idle);
    free(k->steps);
    memset(k, 0, sizeof(*k));
}
