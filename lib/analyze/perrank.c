/*
 * perrank — a job of many ranks (more than SWIFT_AN_RANKS_DETAIL input files, no --merge),
 * read and analysed one file per pool task: each task reads its file into a set of its own,
 * merges that set's strings into the run's in file order (so every string id, and with it every
 * order that follows ids, is what loading all files into one set gives), analyses the process,
 * builds its report object and its collectives for the matching across ranks, and frees the
 * events. Memory holds about -j files' events, plus per process the report object and the
 * summary struct swift_an_proc the rules and the ranks' summary read. The cross-rank parts
 * (collectives matched across ranks, straggler, the ranks' summary) then run on what was kept.
 *
 * While the strings of one file merge into the run's table, the other tasks keep reading and
 * analysing: a task analyses its file against a view of the table (swift_an_strtab_view) that
 * holds its own strings at their merged ids, never the table other tasks grow.
 */
#include "lib/analyze/internal.h"
#include "lib/core/pool.h"
#include "lib/core/trace.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

/* What one file leaves behind. */
struct pr_slot {
    struct swift_an_source src; /* without events */
    struct swift_an_proc proc;
    json_t *pj;    /* its object of the report's "processes" ("worst_step" null) */
    json_t *lanes; /* its worst_step lanes while among the SWIFT_AN_RANKS_DETAIL longest steps */
    struct swift_an_crank *coll;
    int ok, nfailed;
    long bad;
    size_t kept;
};

struct pr_ctx {
    struct swift_an_set *set;
    const struct swift_analyze_opts *o;
    char **files;
    struct pr_slot *slot;
    int serial; /* pool threads: no OpenMP teams inside */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t turn; /* the next file whose strings merge */
    /* the slots that hold lanes, at most SWIFT_AN_RANKS_DETAIL: the processes with the longest
     * steps so far, so the final pick (swift_an_lanes_pick: every one when there are no more
     * than SWIFT_AN_RANKS_DETAIL, else the SWIFT_AN_LANES_PROCS longest) finds its lanes */
    size_t held[SWIFT_AN_RANKS_DETAIL];
    size_t nheld;
};

/* Slot i before slot j in the lanes' order (longest step first, ties: the earlier file). */
static int lanes_before(const struct pr_ctx *c, size_t i, size_t j)
{
    double x = c->slot[i].proc.step_max, y = c->slot[j].proc.step_max;
    return x != y ? x > y : i < j;
}

/* Index in held[] of the slot that is last in the lanes' order (c->nheld > 0). */
static size_t lanes_worst(const struct pr_ctx *c)
{
    size_t w = 0;
    for (size_t k = 1; k < c->nheld; k++)
        if (lanes_before(c, c->held[w], c->held[k]))
            w = k;
    return w;
}

/* Whether slot i's lanes may be kept (under c->mu). */
static int lanes_wanted(const struct pr_ctx *c, size_t i)
{
    if (!c->slot[i].proc.nsteps)
        return 0;
    return c->nheld < SWIFT_AN_RANKS_DETAIL || lanes_before(c, i, c->held[lanes_worst(c)]);
}

/* Keep slot i's lanes (built from its events, before they go) when they may be needed; the
 * slot they push out drops its own. The kept set does not depend on the order tasks finish. */
static void lanes_keep(struct pr_ctx *c, size_t i, const struct swift_an_set *v)
{
    pthread_mutex_lock(&c->mu);
    int want = lanes_wanted(c, i);
    pthread_mutex_unlock(&c->mu);
    if (!want)
        return;
    json_t *l = swift_an_lanes_json(v, &c->slot[i].proc);
    json_t *drop = NULL;
    pthread_mutex_lock(&c->mu);
    if (c->nheld < SWIFT_AN_RANKS_DETAIL) {
        c->held[c->nheld++] = i;
        c->slot[i].lanes = l;
    } else {
        size_t w = lanes_worst(c);
        if (lanes_before(c, i, c->held[w])) {
            drop = c->slot[c->held[w]].lanes;
            c->slot[c->held[w]].lanes = NULL;
            c->held[w] = i;
            c->slot[i].lanes = l;
        } else {
            drop = l;
        }
    }
    pthread_mutex_unlock(&c->mu);
    json_decref(drop);
}

/* The file's strings into the run's table, after every earlier file's (the pool hands files out
 * in ascending order, so the one waited for is always being read: no deadlock). */
static uint32_t merge_in_order(struct pr_ctx *c, size_t i, const struct swift_an_set *priv,
                               uint32_t *map)
{
    pthread_mutex_lock(&c->mu);
    while (c->turn != i)
        pthread_cond_wait(&c->cv, &c->mu);
    swift_an_strtab_merge(&c->set->strs, &priv->strs, map);
    uint32_t n = c->set->strs.n;
    c->turn++;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return n;
}

static void pr_one(void *ctx, long li, int worker)
{
    (void)worker;
    struct pr_ctx *c = ctx;
    size_t i = (size_t)li;
    struct pr_slot *sl = &c->slot[i];
    struct swift_an_set priv;
    swift_an_set_init(&priv);
    priv.max_events = c->set->max_events;
    swift_an_stream_serial(c->serial);
    int64_t t0 = swift_trace_now();
    swift_an_load_path(&priv, c->files[i], 0);
    struct swift_targ a[] = {SWIFT_TARG_S("path", c->files[i]),
                             SWIFT_TARG_I("events", (int64_t)priv.kept)};
    swift_trace_span("io", "load", t0, swift_trace_now(), a, 2);
    /* a file that failed still merges its strings: loading into one set keeps them too */
    uint32_t *map = swift_xmalloc(((size_t)priv.strs.n + 1) * sizeof(*map));
    uint32_t gn = merge_in_order(c, i, &priv, map);
    sl->nfailed = priv.nfailed;
    sl->bad = priv.bad_lines;
    sl->kept = priv.kept;
    if (priv.n == 1) {
        struct swift_an_source *s = &priv.src[0];
        swift_an_source_remap(s, map, priv.strs.n);
        struct swift_an_set v = {.src = s, .n = 1, .cap = 1, .max_events = priv.max_events};
        swift_an_strtab_view(&v.strs, &priv.strs, map, gn);
        swift_an_proc_one(&v, c->o, 0, &sl->proc);
        sl->pj = swift_an_proc_json(&v, &sl->proc, c->o, 0);
        lanes_keep(c, i, &v);
        sl->coll = swift_an_coll_collect(&v, &sl->proc);
        swift_an_strtab_view_release(&v.strs);
        swift_an_source_drop_events(s);
        sl->src = *s;
        memset(s, 0, sizeof(*s));
        priv.n = 0;
        sl->ok = 1;
    }
    free(map);
    swift_an_stream_serial(0);
    swift_an_set_release(&priv);
}

/* The slots that hold a process into set, procs, pjs and items, in file order. */
static size_t gather(struct swift_an_set *set, struct pr_slot *slot, size_t nfiles,
                     struct swift_an_proc *ps, json_t **pjs, json_t **plane,
                     struct swift_an_crank **items)
{
    size_t n = 0;
    for (size_t i = 0; i < nfiles; i++) {
        struct pr_slot *sl = &slot[i];
        set->nfailed += sl->nfailed;
        set->bad_lines += sl->bad;
        set->kept += sl->kept;
        if (!sl->ok)
            continue;
        set->src[n] = sl->src;
        ps[n] = sl->proc;
        ps[n].src = &set->src[n];
        pjs[n] = sl->pj;
        plane[n] = sl->lanes;
        items[n++] = sl->coll;
    }
    set->n = n;
    return n;
}

int swift_an_per_rank_run(struct swift_an_set *set, char **files, size_t nfiles,
                          const struct swift_analyze_opts *o, struct swift_an_proc **procs,
                          size_t *nprocs, json_t **report)
{
    struct pr_slot *slot = swift_xcalloc(nfiles + 1, sizeof(*slot));
    struct pr_ctx c = {.set = set, .o = o, .files = files, .slot = slot};
    pthread_mutex_init(&c.mu, NULL);
    pthread_cond_init(&c.cv, NULL);
    set->src = swift_xcalloc(nfiles + 1, sizeof(*set->src));
    set->cap = nfiles + 1;
    /* the report's objects are built on the pool's threads: jansson's hash seed first, here */
    json_decref(json_object());
    int64_t t0 = swift_trace_now();
    int nt = o->threads > 0 ? o->threads : swift_ncpus();
    if (nt > 1) {
        c.serial = 1;
        struct swift_pool *pool = swift_pool_new(nt);
        swift_pool_for(pool, (long)nfiles, 1, pr_one, &c);
        swift_pool_free(pool);
    } else {
        for (size_t i = 0; i < nfiles; i++)
            pr_one(&c, (long)i, 0);
    }
    pthread_cond_destroy(&c.cv);
    pthread_mutex_destroy(&c.mu);
    struct swift_an_proc *ps = swift_xcalloc(nfiles + 1, sizeof(*ps));
    json_t **pjs = swift_xcalloc(nfiles + 1, sizeof(*pjs));
    json_t **plane = swift_xcalloc(nfiles + 1, sizeof(*plane));
    struct swift_an_crank **items = swift_xcalloc(nfiles + 1, sizeof(*items));
    size_t n = gather(set, slot, nfiles, ps, pjs, plane, items);
    free(slot);
    int rc = swift_an_loaded_check(set, o);
    if (rc == 0) {
        swift_an_coll_match(ps, n, items);
        *report = swift_an_report_build_procs(set, ps, n, pjs, plane, o);
        swift_trace_span("stage", "analyze", t0, swift_trace_now(), NULL, 0);
        *procs = ps;
        *nprocs = n;
    } else {
        for (size_t i = 0; i < n; i++)
            json_decref(pjs[i]);
        swift_an_procs_free(ps, n);
        *procs = NULL;
        *nprocs = 0;
    }
    for (size_t i = 0; i < n; i++) {
        swift_an_crank_free(items[i]);
        json_decref(plane[i]);
    }
    free(items);
    free(plane);
    free(pjs);
    return rc;
}
