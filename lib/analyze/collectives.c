/*
 * analyze/collectives — each collective matched across the ranks of a job, its time on every
 * rank split into skew (waiting for the last rank to arrive) and transfer, with nccl-tests'
 * algorithm and bus bandwidth (docs/bottlenecks.md, "Collectives").
 *
 * What is a collective: on Kineto traces the GPU kernels of HTA's COMMUNICATION type (names
 * nccl..., ...ncclKernel..., hccl...); on ours the "comm" spans (grad_sync, param_sync,
 * sync_wait: lib/train/dist.c). Matching, per job (the processes of one multi-rank run, as the
 * straggler rule groups them), per key (Kineto: the process group name when the kernel carries
 * NCCL args, else the stream; ours: the span name), along each rank's sequence in time order:
 *   ours:   the same (step, occurrence of that name within the step) on every rank (every rank
 *           runs the same collectives in the same order in a step);
 *   Kineto with NCCL's sequence number ("Seq" or "seq" in the kernels' args, newer
 *           PyTorch) on every collective of the key on every rank: the same (process group,
 *           seq) on every rank, whatever the order or the times;
 *   Kineto otherwise: the heads of all ranks are one collective when they are the same kind
 *           and all overlap in time (a collective ends on no rank before the last one
 *           arrived); otherwise the head that ends first can match nothing later and is
 *           dropped (this also skips the kernels a sampled trace has on one rank only).
 * For a matched collective with start b_r and duration d_r on rank r: last = max b_r;
 * skew_r = min(last - b_r, d_r), transfer_r = d_r - skew_r; the rank that started last caused
 * the skew: it is charged the longest skew of the others. Bandwidth as nccl-tests reports it:
 * algbw = bytes / transfer, busbw = algbw * factor (allreduce 2(n-1)/n, allgather,
 * reducescatter and alltoall (n-1)/n, broadcast, reduce and send/recv 1), with bytes the
 * larger of the in and out message (Kineto args: nelems * dtype size; ours: args.bytes).
 * busbw is set against the peak of the link between the GPUs (link_of: by the
 * deviceProperties name; per direction, as nccl-tests' busbw compares to).
 */
#include "lib/analyze/internal.h"
#include "lib/analyze/kineto.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

enum {
    CK_OTHER,
    CK_ALLREDUCE,
    CK_ALLGATHER,
    CK_REDUCESCATTER,
    CK_ALLTOALL,
    CK_BCAST,
    CK_REDUCE,
    CK_SENDRECV,
    CK_BARRIER
};

struct citem {
    double b, e, bytes;
    int64_t tag; /* ours: step * 4096 + occurrence; Kineto: NCCL's Seq, or -1 (match by
                    overlap) */
    uint32_t key;
    int kind, gsize;
};

struct swift_an_crank {
    struct citem *it;
    size_t n;
};

static int has_ci(const char *s, const char *w)
{
    size_t n = strlen(w);
    for (; *s; s++)
        if (!strncasecmp(s, w, n))
            return 1;
    return 0;
}

static int kind_of(const char *s)
{
    if (has_ci(s, "allreduce") || has_ci(s, "all_reduce"))
        return CK_ALLREDUCE;
    if (has_ci(s, "allgather") || has_ci(s, "all_gather"))
        return CK_ALLGATHER;
    if (has_ci(s, "reducescatter") || has_ci(s, "reduce_scatter"))
        return CK_REDUCESCATTER;
    if (has_ci(s, "alltoall") || has_ci(s, "all_to_all"))
        return CK_ALLTOALL;
    if (has_ci(s, "broadcast"))
        return CK_BCAST;
    if (has_ci(s, "sendrecv") || has_ci(s, "send") || has_ci(s, "recv"))
        return CK_SENDRECV;
    if (has_ci(s, "reduce"))
        return CK_REDUCE;
    if (has_ci(s, "barrier"))
        return CK_BARRIER;
    return CK_OTHER;
}

/* nccl-tests' busbw / algbw for n ranks */
double swift_an_busbw_factor(const char *collective, int n)
{
    if (n < 1)
        return NAN;
    switch (kind_of(collective)) {
    case CK_ALLREDUCE:
        return 2.0 * (n - 1) / n;
    case CK_ALLGATHER:
    case CK_REDUCESCATTER:
    case CK_ALLTOALL:
        return (double)(n - 1) / n;
    case CK_BCAST:
    case CK_REDUCE:
    case CK_SENDRECV:
        return 1;
    default:
        return NAN;
    }
}

static double factor_of(int kind, int n)
{
    static const char *const nm[] = {"",
                                     "allreduce",
                                     "allgather",
                                     "reducescatter",
                                     "alltoall",
                                     "broadcast",
                                     "reduce",
                                     "sendrecv",
                                     ""};
    return swift_an_busbw_factor(nm[kind], n);
}

static double dtype_size(const char *t)
{
    if (has_ci(t, "double") || has_ci(t, "long") || has_ci(t, "int64"))
        return 8;
    if (has_ci(t, "half") || has_ci(t, "bfloat16") || has_ci(t, "short") || has_ci(t, "16"))
        return 2;
    if (has_ci(t, "float") || has_ci(t, "int"))
        return 4;
    if (has_ci(t, "byte") || has_ci(t, "char") || has_ci(t, "bool") || has_ci(t, "8"))
        return 1;
    return 0;
}

int swift_an_same_job(const struct swift_an_proc *a, const struct swift_an_proc *b)
{
    const struct swift_an_source *x = a->src, *y = b->src;
    if (x->kind != y->kind || x->world_size != y->world_size || x->world_size < 2)
        return 0;
    if (strcmp(x->stage ? x->stage : "", y->stage ? y->stage : ""))
        return 0;
    if (x->kind == SWIFT_AN_KINETO) {
        const char *sx = strrchr(x->path, '/'), *sy = strrchr(y->path, '/');
        size_t lx = sx ? (size_t)(sx - x->path) : 0, ly = sy ? (size_t)(sy - y->path) : 0;
        if (lx != ly || strncmp(x->path, y->path, lx))
            return 0;
    }
    return 1;
}

static void push(struct swift_an_crank *r, size_t *cap, struct citem it)
{
    if (r->n == *cap) {
        *cap = *cap ? *cap * 2 : 64;
        r->it = swift_xrealloc(r->it, *cap * sizeof(*r->it));
    }
    r->it[r->n++] = it;
}

static int cmp_item(const void *a, const void *b, void *arg)
{
    (void)arg;
    const struct citem *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return (x->b > y->b) - (x->b < y->b);
}

static int is_comm_kernel(const char *nm)
{
    return !strncmp(nm, "nccl", 4) || !strncmp(nm, "hccl", 4) || strstr(nm, "ncclKernel");
}

/* One process's collectives, sorted by key then start. */
static void collect(const struct swift_an_set *set, const struct swift_an_proc *p,
                    struct swift_an_crank *r)
{
    const struct swift_an_source *s = p->src;
    const struct swift_an_strtab *st = &set->strs;
    size_t cap = 0;
    int zero = 0; /* ours: param_sync spans mean ZeRO-1, whose grad_sync is a reduce-scatter */
    uint32_t cat_comm = swift_an_lookup(st, "comm"), cat_kernel = swift_an_lookup(st, "kernel");
    for (size_t i = 0; i < s->n && s->kind == SWIFT_AN_SWIFT; i++)
        if (s->ev[i].cat == cat_comm && !strcmp(swift_an_str(st, s->ev[i].name), "param_sync"))
            zero = 1;
    /* Kineto: whether each kernel name is a communication kernel, decided once per name */
    unsigned char *isc = s->kind == SWIFT_AN_KINETO ? swift_xcalloc(st->n + 1, 1) : NULL;
    for (size_t i = 0; i < s->n; i++) {
        const struct swift_an_ev *e = &s->ev[i];
        const char *nm = swift_an_str(st, e->name);
        struct citem it = {.b = e->ts, .e = e->ts + e->dur, .tag = -1, .key = e->name};
        if (s->kind == SWIFT_AN_SWIFT) {
            if (e->cat != cat_comm || cat_comm == SWIFT_AN_NONE)
                continue;
            it.b -= s->clock_offset_us;
            it.e -= s->clock_offset_us;
            it.kind = !strcmp(nm, "grad_sync")    ? (zero ? CK_REDUCESCATTER : CK_ALLREDUCE)
                      : !strcmp(nm, "param_sync") ? CK_ALLGATHER
                                                  : CK_BARRIER;
            it.bytes = (double)e->aux;
            it.gsize = s->world_size;
            it.tag = (int64_t)e->step * 4096;
        } else {
            if (e->cat != cat_kernel || cat_kernel == SWIFT_AN_NONE || e->name >= st->n)
                continue;
            if (!isc[e->name])
                isc[e->name] = is_comm_kernel(nm) ? 2 : 1;
            if (isc[e->name] != 2)
                continue;
            it.key = 0x80000000u | (uint32_t)(e->stream & 0x7fffffff);
            it.kind = kind_of(nm);
            it.gsize = s->world_size;
            if (e->comm != SWIFT_AN_NONE) {
                const struct swift_an_comm *cm = &s->comm[e->comm];
                if (cm->pg_name != SWIFT_AN_NONE)
                    it.key = cm->pg_name;
                if (cm->collective != SWIFT_AN_NONE)
                    it.kind = kind_of(swift_an_str(st, cm->collective));
                if (cm->group_size > 0)
                    it.gsize = (int)cm->group_size;
                if (cm->seq >= 0)
                    it.tag = cm->seq;
                int64_t ne = cm->in_nelems > cm->out_nelems ? cm->in_nelems : cm->out_nelems;
                double ds =
                    cm->dtype != SWIFT_AN_NONE ? dtype_size(swift_an_str(st, cm->dtype)) : 0;
                it.bytes = ne > 0 ? (double)ne * ds : 0;
            }
        }
        push(r, &cap, it);
    }
    free(isc);
    swift_an_sort_r(r->it, r->n, sizeof(*r->it), cmp_item, NULL);
    /* ours: the occurrence of a name within its step completes the tag */
    for (size_t i = 0; i < r->n && s->kind == SWIFT_AN_SWIFT; i++) {
        size_t occ = 0;
        for (size_t j = i; j-- > 0 && r->it[j].key == r->it[i].key && occ < 4095;)
            if (r->it[j].tag / 4096 == r->it[i].tag / 4096)
                occ++;
            else
                break;
        r->it[i].tag += (int64_t)occ;
    }
}

/* Charge one matched collective (heads h[] of the m ranks) to the ranks' stats. */
static void charge(struct swift_an_proc **mem, size_t m, struct swift_an_crank *rk, const size_t *h)
{
    size_t last = 0;
    for (size_t r = 1; r < m; r++)
        if (rk[r].it[h[r]].b > rk[last].it[h[last]].b)
            last = r;
    double lb = rk[last].it[h[last]].b, caused = 0;
    for (size_t r = 0; r < m; r++) {
        const struct citem *c = &rk[r].it[h[r]];
        double d = c->e - c->b, sk = fmin(lb - c->b, d), tr = d - sk;
        struct swift_an_coll_stats *cs = &mem[r]->coll;
        cs->n++;
        cs->us += d;
        cs->skew_us += sk;
        cs->transfer_us += tr;
        if (sk > caused)
            caused = sk;
        double f = factor_of(c->kind, c->gsize > 0 ? c->gsize : (int)m);
        if (c->bytes > 0 && tr > 0 && isfinite(f)) {
            cs->bw_bytes += c->bytes;
            cs->bw_us += tr;
            cs->bus_bytes += c->bytes * f;
        }
    }
    if (caused > 0) {
        mem[last]->coll.last_n++;
        mem[last]->coll.caused_us += caused;
    }
}

/* Match the collectives of one key along the m ranks' sequences (see the top). */
static void match_key(struct swift_an_proc **mem, size_t m, struct swift_an_crank *rk, size_t *h,
                      const size_t *end)
{
    for (;;) {
        for (size_t r = 0; r < m; r++)
            if (h[r] >= end[r])
                return;
        size_t lo = 0;
        int same = 1;
        int64_t tmax = rk[0].it[h[0]].tag;
        double bmax = rk[0].it[h[0]].b;
        for (size_t r = 1; r < m; r++) {
            const struct citem *c = &rk[r].it[h[r]], *l = &rk[lo].it[h[lo]];
            if (c->tag > tmax)
                tmax = c->tag;
            if (c->b > bmax)
                bmax = c->b;
            if (c->tag != rk[0].it[h[0]].tag || c->kind != rk[0].it[h[0]].kind)
                same = 0;
            if (c->tag < 0 ? c->e < l->e : c->tag < l->tag)
                lo = r;
        }
        if (tmax >= 0) { /* tagged: drop the lowest tag until all agree */
            if (same) {
                charge(mem, m, rk, h);
                for (size_t r = 0; r < m; r++)
                    h[r]++;
            } else {
                h[lo]++;
            }
            continue;
        }
        if (same && bmax <= rk[lo].it[h[lo]].e) {
            charge(mem, m, rk, h);
            for (size_t r = 0; r < m; r++)
                h[r]++;
        } else {
            h[lo]++;
        }
    }
}

static int cmp_tag(const void *a, const void *b, void *arg)
{
    (void)arg;
    const struct citem *x = a, *y = b;
    if (x->tag != y->tag)
        return x->tag < y->tag ? -1 : 1;
    return (x->b > y->b) - (x->b < y->b);
}

/* Kineto: a key whose collectives all carry NCCL's Seq on every rank is matched by it (each
 * rank's range [h, end) in Seq order); otherwise by overlap in time (tags cleared). */
static void kineto_tags(struct swift_an_crank *rk, size_t m, const size_t *h, const size_t *end)
{
    int all = 1;
    for (size_t r = 0; r < m && all; r++)
        for (size_t i = h[r]; i < end[r] && all; i++)
            all = rk[r].it[i].tag >= 0;
    for (size_t r = 0; r < m; r++) {
        if (all)
            swift_an_sort_r(rk[r].it + h[r], end[r] - h[r], sizeof(*rk[r].it), cmp_tag, NULL);
        else
            for (size_t i = h[r]; i < end[r]; i++)
                rk[r].it[i].tag = -1;
    }
}

/* The m members of one job, mem[r]'s collectives rk0[r] (borrowed). */
static void match_job(struct swift_an_proc **mem, size_t m, struct swift_an_crank *const *rk0)
{
    struct swift_an_crank *rk = swift_xcalloc(m, sizeof(*rk));
    size_t *h = swift_xcalloc(m, sizeof(*h)), *end = swift_xcalloc(m, sizeof(*end));
    for (size_t r = 0; r < m; r++)
        rk[r] = *rk0[r];
    /* walk the keys in order on every rank at once */
    for (;;) {
        uint32_t key = UINT32_MAX;
        int any = 0;
        for (size_t r = 0; r < m; r++)
            if (h[r] < rk[r].n && (!any || rk[r].it[h[r]].key < key))
                key = rk[r].it[h[r]].key, any = 1;
        if (!any)
            break;
        for (size_t r = 0; r < m; r++) {
            end[r] = h[r];
            while (end[r] < rk[r].n && rk[r].it[end[r]].key == key)
                end[r]++;
        }
        if (mem[0]->src->kind == SWIFT_AN_KINETO)
            kineto_tags(rk, m, h, end);
        match_key(mem, m, rk, h, end);
        for (size_t r = 0; r < m; r++)
            h[r] = end[r];
    }
    free(rk);
    free(h);
    free(end);
}

struct swift_an_crank *swift_an_coll_collect(const struct swift_an_set *set,
                                             const struct swift_an_proc *p)
{
    struct swift_an_crank *r = swift_xcalloc(1, sizeof(*r));
    if (p->src->world_size >= 2) /* swift_an_same_job: alone, nothing to match */
        collect(set, p, r);
    return r;
}

void swift_an_crank_free(struct swift_an_crank *c)
{
    struct swift_an_crank *r = c;
    if (r)
        free(r->it);
    free(r);
}

void swift_an_coll_match(struct swift_an_proc *ps, size_t n, struct swift_an_crank *const *items)
{
    struct swift_an_proc **mem = swift_xcalloc(n + 1, sizeof(*mem));
    struct swift_an_crank **rk = swift_xcalloc(n + 1, sizeof(*rk));
    for (size_t g = 0; g < n; g++) {
        int lead = 1;
        for (size_t q = 0; q < g && lead; q++)
            if (swift_an_same_job(&ps[q], &ps[g]))
                lead = 0;
        if (!lead)
            continue;
        size_t m = 0;
        for (size_t q = 0; q < n; q++)
            if (swift_an_same_job(&ps[q], &ps[g])) {
                rk[m] = items[q];
                mem[m++] = &ps[q];
            }
        if (m >= 2)
            match_job(mem, m, rk);
    }
    free(rk);
    free(mem);
}

void swift_an_collectives(const struct swift_an_set *set, struct swift_an_proc *ps, size_t n)
{
    struct swift_an_crank **items = swift_xcalloc(n + 1, sizeof(*items));
    for (size_t i = 0; i < n; i++)
        items[i] = swift_an_coll_collect(set, &ps[i]);
    swift_an_coll_match(ps, n, items);
    for (size_t i = 0; i < n; i++)
        swift_an_crank_free(items[i]);
    free(items);
}

/*
 * The peak of the link between two GPUs of one node, per direction (the figure nccl-tests'
 * busbw is compared to), by the deviceProperties name, the more specific first:
 * - H100 SXM5 and H200: NVLink 4, 900 GB/s total bidirectional (NVIDIA H100 Tensor Core GPU
 *   datasheet, "NVLink: 900GB/s"; H200 product page, "NVIDIA NVLink: 900GB/s"): 450 each way.
 * - H100 NVL: NVLink bridge 600 GB/s bidirectional (H100 datasheet, H100 NVL column): 300.
 * - A100 SXM4: NVLink 3, 600 GB/s bidirectional (NVIDIA A100 datasheet): 300.
 * - V100 SXM2 (the DGX Station's "DGXS" too): NVLink 2, 300 GB/s bidirectional (NVIDIA V100
 *   datasheet): 150.
 * - PCIe cards without NVLink (H100 PCIe, A100 PCIe, L4, V100 PCIe): the x16 slot, PCI-SIG's
 *   16 / 32 GT/s per lane for Gen4 / Gen5 with 128b/130b coding, 31.5 / 63 GB/s raw each way,
 *   of which about 80% is data after TLP headers: ~25 GB/s (Gen4: A100 PCIe, L4), ~50 GB/s
 *   (Gen5: H100 PCIe); Gen3 (V100 PCIe, 8 GT/s): ~12 GB/s.
 * Across nodes the network is the link (not known from the trace): rows say which link they
 * assumed ("link").
 */
static const struct {
    const char *match, *link;
    double gbps;
} links[] = {
    {"H100 PCIe", "PCIe Gen5 x16", 50},
    {"H100 NVL", "NVLink bridge (H100 NVL)", 300},
    {"H100", "NVLink 4 (H100 SXM)", 450},
    {"H200", "NVLink 4 (H200)", 450},
    {"A100 80GB PCIe", "PCIe Gen4 x16", 25},
    {"A100-PCIE", "PCIe Gen4 x16", 25},
    {"A100", "NVLink 3 (A100 SXM)", 300},
    {"V100-PCIE", "PCIe Gen3 x16", 12},
    {"V100", "NVLink 2 (V100 SXM2)", 150},
    {"L4", "PCIe Gen4 x16", 25},
};

int swift_an_link_of(const struct swift_an_source *s, const char **name, double *gbps)
{
    json_t *props = json_object_get(s->meta, "deviceProperties");
    const char *dev = json_string_value(json_object_get(json_array_get(props, 0), "name"));
    for (size_t i = 0; dev && i < sizeof(links) / sizeof(links[0]); i++)
        if (strstr(dev, links[i].match)) {
            *name = links[i].link;
            *gbps = links[i].gbps;
            return 0;
        }
    return -1;
}

double swift_an_bw_round(double gbps)
{
    if (!isfinite(gbps) || gbps == 0)
        return gbps;
    double m = pow(10, 3 - floor(log10(fabs(gbps))));
    return round(gbps * m) / m;
}

static json_t *num2(double v)
{
    return isfinite(v) ? json_real(round(v * 100) / 100) : json_null();
}

json_t *swift_an_collectives_json(const struct swift_an_proc *ps, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) {
        const struct swift_an_proc *p = &ps[i];
        const struct swift_an_coll_stats *c = &p->coll;
        if (!c->n)
            continue;
        double alg = c->bw_us > 0 ? c->bw_bytes / c->bw_us / 1e3 : NAN; /* bytes/us -> GB/s */
        double bus = c->bw_us > 0 ? c->bus_bytes / c->bw_us / 1e3 : NAN;
        json_t *o = json_object();
        json_object_set_new(o, "process", json_string(p->label));
        json_object_set_new(o, "rank", json_integer(p->rank));
        json_object_set_new(o, "matched", json_integer((json_int_t)c->n));
        json_object_set_new(o, "comm_us", num2(c->us));
        json_object_set_new(o, "skew_us", num2(c->skew_us));
        json_object_set_new(o, "transfer_us", num2(c->transfer_us));
        json_object_set_new(o, "skew_pct", num2(c->us > 0 ? 100 * c->skew_us / c->us : NAN));
        json_object_set_new(o, "bytes", num2(c->bw_bytes));
        json_object_set_new(
            o, "algbw_gbps", isfinite(alg) ? json_real(swift_an_bw_round(alg)) : json_null());
        json_object_set_new(
            o, "busbw_gbps", isfinite(bus) ? json_real(swift_an_bw_round(bus)) : json_null());
        const char *ln = NULL;
        double lg = NAN;
        swift_an_link_of(p->src, &ln, &lg);
        json_object_set_new(o, "link", ln ? json_string(ln) : json_null());
        json_object_set_new(o, "link_gbps", num2(lg));
        json_object_set_new(o,
                            "busbw_link_fraction",
                            isfinite(bus) && lg > 0 ? json_real(round(bus / lg * 1e4) / 1e4)
                                                    : json_null());
        json_object_set_new(o, "arrived_last", json_integer((json_int_t)c->last_n));
        json_object_set_new(o, "skew_caused_us", num2(c->caused_us));
        json_array_append_new(a, o);
    }
    return a;
}
