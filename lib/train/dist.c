/* dist — see dist.h. */
#include "lib/train/dist.h"
#include "lib/core/mem.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include "kernels/cuda/comm_nccl.h"
#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/trace.h"
#include "lib/core/banned.h"

#if defined(SWIFT_HAVE_CUDA) && defined(SWIFT_HAVE_NCCL)
#define HAVE_NCCL 1
#else
#define HAVE_NCCL 0
#endif

#define TAG_CLOCK 7
#define TAG_CHECKIN 1000 /* + seq % 16384 */
#define TAG_RELEASE 20000
#define TAG_DIAG 21000 /* after a collective timed out: who is missing? */
#define TAG_DIAG_RELEASE 21001

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double real_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static long env_long(const char *name, long dflt)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return dflt;
    char *end;
    long v = strtol(s, &end, 10);
    return *end ? dflt : v;
}

static const char *detect_launcher(void)
{
    if (getenv("OMPI_COMM_WORLD_SIZE"))
        return "mpirun";
    if (getenv("PMIX_RANK"))
        return getenv("SLURM_STEP_ID") ? "srun" : "pmix";
    if (getenv("PMI_RANK") || getenv("PMI_SIZE"))
        return getenv("SLURM_STEP_ID") ? "srun" : "pmi";
    if (getenv("SLURM_STEP_ID") && env_long("SLURM_NTASKS", 1) > 1)
        return "srun";
    return NULL;
}

/* OpenMPI 4.1's libnbc MPI_Iallreduce (nbc_iallreduce.c) picks binomial (reduce to rank 0,
 * then broadcast) below 4 ranks, below 64 KiB, or in place -- our gradients are always in
 * place -- so the bytes cross each link one way and then back, serialised: twice the time of a
 * ring on a network link (docs/distributed.md "What we tested and how"). Make the ring the
 * default, before MPI_Init reads its parameters, unless the user chose an algorithm in the
 * environment (mpirun --mca sets it there too). Returns NULL when it set the ring, else the
 * user's value ("" when not OpenMPI, or the ring could not be set). */
#define NBC_ALG_VAR "OMPI_MCA_coll_libnbc_iallreduce_algorithm"
static const char *default_allreduce_ring(void)
{
#ifdef OPEN_MPI
    const char *v = getenv(NBC_ALG_VAR);
    if (v)
        return v;
    if (setenv(NBC_ALG_VAR, "1", 0) == 0)
        return NULL;
#endif
    return "";
}

/* Between two polls of pending requests: OpenMPI progresses non-blocking collectives only
 * inside MPI calls, so poll (yielding the core) for the first 200 ms of a wait, then back off
 * to sleeps of up to 1 ms (a long wait is a slow rank, not a transfer). */
static void poll_pause(double since)
{
    if (mono_s() - since < 0.2) {
        sched_yield();
        return;
    }
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
}

/* Wait for n requests until the deadline; 0, or -1 when it passed (requests left pending). */
static int wait_all(MPI_Request *rq, int n, double deadline)
{
    double t0 = mono_s();
    for (;;) {
        int done = 0;
        MPI_Testall(n, rq, &done, MPI_STATUSES_IGNORE);
        if (done)
            return 0;
        if (mono_s() > deadline)
            return -1;
        poll_pause(t0);
    }
}

static int fail_plain(struct swift_dist *d, const char *what, long step)
{
    d->failed = 1;
    return swift_error("rank %d: %s of step %ld did not complete within --dist-timeout %gs; a "
                       "rank died or hangs",
                       d->rank,
                       what,
                       step,
                       d->timeout_s);
}

static void measure_clock(struct swift_dist *d)
{
    /* up to 64 round trips per peer, fewer once one is under 50 us (the offset's error is at
     * most half the round trip); rank 0 and the peer agree on the count through `more` */
    enum { ROUNDS = 64 };
    for (int peer = 1; peer < d->world; peer++) {
        int more = 1;
        for (int i = 0; i < ROUNDS && more; i++) {
            if (d->rank == 0) {
                double got[2];
                MPI_Recv(got, 2, MPI_DOUBLE, peer, TAG_CLOCK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                double t = real_us();
                more = got[1] != 0;
                MPI_Send(&t, 1, MPI_DOUBLE, peer, TAG_CLOCK, MPI_COMM_WORLD);
            } else if (d->rank == peer) {
                more = (i < 8 || d->min_rtt_us > 50) && i + 1 < ROUNDS;
                double t0 = real_us(), tm, msg[2] = {t0, more};
                MPI_Send(msg, 2, MPI_DOUBLE, 0, TAG_CLOCK, MPI_COMM_WORLD);
                MPI_Recv(&tm, 1, MPI_DOUBLE, 0, TAG_CLOCK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                double t1 = real_us(), rtt = t1 - t0;
                if (i == 0 || rtt < d->min_rtt_us) {
                    d->min_rtt_us = rtt;
                    d->clock_offset_us = (t0 + t1) / 2 - tm;
                }
            }
        }
    }
}

int swift_dist_init(struct swift_dist *d, double timeout_s)
{
    memset(d, 0, sizeof(*d));
    d->world = 1;
    d->local_world = 1;
    d->timeout_s = timeout_s > 0 ? timeout_s : 300;
    d->bucket_bytes = 4u << 20;
    d->job_id = getenv("SLURM_JOB_ID");
    if (gethostname(d->host, sizeof(d->host)) < 0)
        snprintf(d->host, sizeof(d->host), "?");
    d->host[sizeof(d->host) - 1] = 0;
    const char *l = detect_launcher();
    d->launcher = l ? l : "none";
    if (!l) {
        d->pids = swift_xmalloc(sizeof(int));
        d->hosts = swift_xmalloc(sizeof(*d->hosts));
        d->pids[0] = (int)getpid();
        memcpy(d->hosts[0], d->host, sizeof(d->host));
        return 0;
    }
    const char *alg = default_allreduce_ring();
    int provided = 0;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        return swift_error("MPI_Init failed (launched by %s)", l);
    d->mpi = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &d->world);
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, d->rank, MPI_INFO_NULL, &local);
    MPI_Comm_rank(local, &d->local_rank);
    MPI_Comm_size(local, &d->local_world);
    MPI_Comm_free(&local);
    d->pids = swift_xcalloc((size_t)d->world, sizeof(int));
    d->hosts = swift_xcalloc((size_t)d->world, sizeof(*d->hosts));
    int pid = (int)getpid();
    MPI_Allgather(&pid, 1, MPI_INT, d->pids, 1, MPI_INT, MPI_COMM_WORLD);
    MPI_Allgather(d->host, 64, MPI_CHAR, d->hosts, 64, MPI_CHAR, MPI_COMM_WORLD);
    measure_clock(d);
    if (!alg)
        snprintf(d->allreduce_note,
                 sizeof(d->allreduce_note),
                 "ring (swift-train's default: %s=1; set it, or mpirun --mca, to choose another)",
                 NBC_ALG_VAR);
    else if (*alg)
        snprintf(d->allreduce_note, sizeof(d->allreduce_note), "%s=%s (yours)", NBC_ALG_VAR, alg);
    return 0;
}

void swift_dist_finalize(struct swift_dist *d)
{
    if (d->mpi && !d->failed) {
        int fin = 0;
        MPI_Finalized(&fin);
        if (!fin)
            MPI_Finalize();
    }
    d->mpi = 0;
#if HAVE_NCCL
    if (d->nccl) {
        swift_nccl_free(d->nccl);
        free(d->nccl);
        d->nccl = NULL;
    }
#endif
    if (d->dflat && d->ops)
        swift_mem_free(d->ops->free, d->dflat);
    d->dflat = NULL;
    d->dflat_cap = 0;
    free(d->pids);
    free(d->hosts);
    free(d->flat);
    free(d->shard);
    d->pids = NULL;
    d->hosts = NULL;
    d->flat = NULL;
    d->shard = NULL;
}

struct ckmsg {
    int32_t seq, flag, missing, pad;
    double v[48];
};
/* The bytes of a check-in carrying nv values: only those travel, so the usual check-in (at most
 * 16 values) stays as small as it always was. (OpenMPI's shared-memory transport sends small
 * messages eagerly: a release to a rank stopped between its check-in and its receive still
 * completes, and the next collective's timeout names that rank.) */
static int ckmsg_bytes(int nv)
{
    return (int)(offsetof(struct ckmsg, v) + (size_t)nv * sizeof(double));
}

static int report_missing(struct swift_dist *d, int k, const char *what, long step)
{
    d->failed = 1;
    if (k == d->rank) /* stopped or slow past the deadline, then resumed */
        return swift_error("rank %d: the other ranks gave up waiting for this rank at %s of step "
                           "%ld (--dist-timeout %gs)",
                           k,
                           what,
                           step,
                           d->timeout_s);
    return swift_error("rank %d (%s, pid %d) did not reach %s of step %ld within --dist-timeout "
                       "%gs; it died or hangs",
                       k,
                       d->hosts[k],
                       d->pids[k],
                       what,
                       step,
                       d->timeout_s);
}

static int checkin_impl(struct swift_dist *d, const char *what, long step, int *flag, double *v,
                        int nv, int diag)
{
    if (d->world == 1)
        return 0;
    if (nv > 48)
        nv = 48;
    int64_t t0 = swift_trace_now();
    int tag = diag ? TAG_DIAG : TAG_CHECKIN + (int)(d->seq++ % 16384u);
    int rtag = diag ? TAG_DIAG_RELEASE : TAG_RELEASE;
    struct ckmsg me = {.seq = (int32_t)d->seq, .flag = *flag, .missing = -1};
    for (int i = 0; i < nv; i++)
        me.v[i] = v[i];
    double deadline = mono_s() + d->timeout_s;
    if (d->rank == 0) {
        int n = d->world - 1;
        struct ckmsg *in = swift_xcalloc((size_t)n, sizeof(*in));
        MPI_Request *rq = swift_xcalloc((size_t)n, sizeof(*rq));
        for (int k = 0; k < n; k++)
            MPI_Irecv(&in[k], (int)sizeof(*in), MPI_BYTE, k + 1, tag, MPI_COMM_WORLD, &rq[k]);
        int missing = -1;
        if (wait_all(rq, n, deadline) < 0) {
            for (int k = 0; k < n && missing < 0; k++) {
                int done = 0;
                MPI_Test(&rq[k], &done, MPI_STATUS_IGNORE);
                if (!done)
                    missing = k + 1;
            }
        }
        struct ckmsg out = me;
        if (missing < 0) {
            for (int k = 0; k < n; k++) {
                out.flag |= in[k].flag;
                for (int i = 0; i < nv; i++)
                    out.v[i] += in[k].v[i];
            }
        }
        out.missing = missing;
        /* tell every rank that arrived (a missing one gets a message it may never read) */
        MPI_Request *sq = swift_xcalloc((size_t)n, sizeof(*sq));
        int ns = 0;
        for (int k = 0; k < n; k++)
            MPI_Isend(&out, ckmsg_bytes(nv), MPI_BYTE, k + 1, rtag, MPI_COMM_WORLD, &sq[ns++]);
        if (wait_all(sq, ns, mono_s() + (missing < 0 ? d->timeout_s : 2.0)) < 0 && missing < 0) {
            free(sq);
            free(in);
            free(rq);
            return fail_plain(d, what, step);
        }
        free(sq);
        free(in);
        free(rq);
        if (missing >= 0)
            return report_missing(d, missing, what, step);
        *flag = out.flag;
        for (int i = 0; i < nv; i++)
            v[i] = out.v[i];
    } else {
        struct ckmsg out;
        MPI_Request rq[2];
        MPI_Isend(&me, ckmsg_bytes(nv), MPI_BYTE, 0, tag, MPI_COMM_WORLD, &rq[0]);
        MPI_Irecv(&out, (int)sizeof(out), MPI_BYTE, 0, rtag, MPI_COMM_WORLD, &rq[1]);
        /* rank 0 decides after its own timeout: give it that long again */
        if (wait_all(rq, 2, deadline + d->timeout_s) < 0)
            return report_missing(d, 0, what, step);
        if (out.missing >= 0)
            return report_missing(d, out.missing, what, step);
        *flag = out.flag;
        for (int i = 0; i < nv; i++)
            v[i] = out.v[i];
    }
    if (diag)
        return -2; /* everyone answered */
    /* time here is time waiting for the slowest rank: the analyzer counts it as communication */
    swift_trace_span("comm",
                     "sync_wait",
                     t0,
                     swift_trace_now(),
                     (struct swift_targ[]){SWIFT_TARG_S("point", what), SWIFT_TARG_I("step", step)},
                     2);
    return 0;
}

int swift_dist_checkin(struct swift_dist *d, const char *what, long step, int *flag, double *v,
                       int nv)
{
    return checkin_impl(d, what, step, flag, v, nv, 0);
}

/* A collective timed out: the live ranks all time out in it too, so a point-to-point check-in
 * names the rank that is missing; otherwise the generic message. */
static int fail_generic(struct swift_dist *d, const char *what, long step)
{
    int flag = 0;
    if (checkin_impl(d, what, step, &flag, NULL, 0, 1) == -1)
        return -1;
    return fail_plain(d, what, step);
}

static int ensure_flat(struct swift_dist *d, size_t n)
{
    if (n <= d->flat_cap)
        return 0;
    d->flat = swift_xrealloc(d->flat, n * sizeof(float));
    d->flat_cap = n;
    return 0;
}

/* n floats between backend memory x (a gradient or parameter) and a packing buffer: the
 * host buffer d->flat through download/upload (memcpy without a backend), or the device
 * buffer d->dflat by a backend copy (dev) */
static void stage(const struct swift_dist *d, float *flat, float *x, size_t n, int to_flat, int dev)
{
    const struct swift_ops *ops = d->ops;
    if (dev)
        ops->copy(to_flat ? flat : x, to_flat ? x : flat, n);
    else if (!ops)
        memcpy(to_flat ? flat : x, to_flat ? x : flat, n * sizeof(float));
    else if (to_flat)
        ops->download(flat, x, n * sizeof(float));
    else
        ops->upload(x, flat, n * sizeof(float));
}

/* copy floats [a, b) of the concatenated vector between the parameters' g (or w) and flat */
static void xfer(const struct swift_dist *d, struct swift_param *p, int np, float *flat, size_t a,
                 size_t b, int to_flat, int use_w, int dev)
{
    size_t off = 0;
    for (int i = 0; i < np && off < b; i++) {
        size_t n = p[i].numel, s = a > off ? a - off : 0, e = b - off < n ? b - off : n;
        if (off + n > a && s < e)
            stage(d, flat + off + s, (use_w ? p[i].w : p[i].g) + s, e - s, to_flat, dev);
        off += n;
    }
}

static size_t total_of(const struct swift_param *p, int np)
{
    size_t t = 0;
    for (int i = 0; i < np; i++)
        t += p[i].numel;
    return t;
}

/* The span of one gradient/parameter exchange ("grad_sync", "param_sync"), with the bytes it
 * moved (also kept in d->bytes_reduced for the step record). buckets < 0: not bucketed. */
static void sync_span(struct swift_dist *d, const char *name, int64_t t0, size_t total, int buckets,
                      const char *algo, long step)
{
    d->bytes_reduced = (double)total * sizeof(float);
    struct swift_targ a[] = {SWIFT_TARG_I("bytes", (int64_t)total * 4),
                             SWIFT_TARG_S("algo", algo),
                             SWIFT_TARG_I("world_size", d->world),
                             SWIFT_TARG_I("step", step),
                             SWIFT_TARG_I("buckets", buckets)};
    swift_trace_span("comm", name, t0, swift_trace_now(), a, buckets < 0 ? 4 : 5);
}

/* ---- the backend of the gradients; NCCL on the GPU ---- */

const char *swift_dist_transport(const struct swift_dist *d)
{
    return d->nccl ? "nccl" : "mpi";
}

int swift_dist_use_backend(struct swift_dist *d, const struct swift_ops *ops, int cuda, int device)
{
    d->ops = ops;
    if (!cuda || d->world == 1)
        return 0;
#if HAVE_NCCL
    /* rank 0 makes the unique id; byte 0 says whether it could */
    unsigned char id[1 + SWIFT_NCCL_ID_BYTES];
    memset(id, 0, sizeof(id));
    if (d->rank == 0)
        id[0] = swift_nccl_unique_id(id + 1) == 0;
    MPI_Request rq;
    MPI_Ibcast(id, (int)sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD, &rq);
    if (wait_all(&rq, 1, mono_s() + d->timeout_s) < 0)
        return fail_generic(d, "NCCL unique id broadcast", 0);
    if (!id[0]) {
        d->failed = 1;
        return swift_error("rank %d: rank 0 could not create an NCCL unique id", d->rank);
    }
    struct swift_nccl *c = swift_xcalloc(1, sizeof(*c));
    int bad = swift_nccl_init(c, id + 1, d->rank, d->world, device) < 0;
    if (bad)
        free(c);
    else
        d->nccl = c;
    int any = bad;
    if (swift_dist_checkin(d, "NCCL init", 0, &any, NULL, 0) < 0)
        return -1;
    if (any) {
        d->failed = 1;
        return bad ? -1 : swift_error("rank %d: NCCL failed to start on another rank", d->rank);
    }
    if (d->rank == 0)
        swift_info("gradients are summed with NCCL on the GPUs (%d ranks)", d->world);
    return 0;
#else
    (void)device;
    if (d->rank == 0)
        swift_info("this build has no NCCL: gradients of the GPUs are summed over MPI through "
                   "host memory (download, MPI, upload)");
    return 0;
#endif
}

#if HAVE_NCCL
static int ensure_dflat(struct swift_dist *d, size_t n)
{
    if (n <= d->dflat_cap)
        return 0;
    if (d->dflat)
        swift_mem_free(d->ops->free, d->dflat);
    d->dflat = swift_mem_alloc(d->ops->alloc, SWIFT_MEM_OTHER, (n ? n : 1) * sizeof(float));
    d->dflat_cap = d->dflat ? n : 0;
    if (!d->dflat)
        return swift_error("out of device memory for the %zu-float communication buffer", n);
    return 0;
}

/* p[0..np)'s gradients back to back in memory (the model's and LoRA's are)? */
static float *contiguous_grads(struct swift_param *p, int np)
{
    size_t off = 0;
    for (int i = 0; i < np; i++) {
        if (!p[i].g || p[i].g != p[0].g + off)
            return NULL;
        off += p[i].numel;
    }
    return np ? p[0].g : NULL;
}

static int nccl_fail(struct swift_dist *d, const char *what, long step)
{
    d->failed = 1;
    return swift_error("rank %d: NCCL %s of step %ld failed", d->rank, what, step);
}

static int nccl_allreduce_grads(struct swift_dist *d, struct swift_param *p, int np, long step)
{
    int64_t t0 = swift_trace_now();
    size_t total = total_of(p, np);
    float *buf = contiguous_grads(p, np);
    if (!buf) { /* pack into the device buffer */
        if (ensure_dflat(d, total) < 0)
            return -1;
        buf = d->dflat;
        xfer(d, p, np, buf, 0, total, 1, 0, 1);
    }
    d->ops->sync(); /* the gradients are written on the backend's stream */
    if (swift_nccl_allreduce_raw(d->nccl, buf, total) < 0)
        return nccl_fail(d, "gradient all-reduce", step);
    if (buf == d->dflat)
        xfer(d, p, np, buf, 0, total, 0, 0, 1);
    sync_span(d, "grad_sync", t0, total, 1, "nccl", step);
    return 0;
}

/* ZeRO-1 on NCCL: ranges of d->chunk floats (the last one shorter), in a padded device buffer
 * of world x chunk floats; kind 0 reduce-scatters gradients, 1 all-gathers parameters */
static int nccl_shard(struct swift_dist *d, int kind, struct swift_param *p, int np, long step)
{
    int64_t t0 = swift_trace_now();
    size_t chunk = d->chunk;
    if (ensure_dflat(d, chunk * (size_t)d->world) < 0)
        return -1;
    float *mine = d->dflat + chunk * (size_t)d->rank;
    int rc;
    if (kind == 0) {
        xfer(d, p, np, d->dflat, 0, d->total, 1, 0, 1);
        d->ops->sync();
        rc = swift_nccl_reduce_scatter_sum(d->nccl, d->dflat, mine, chunk);
        if (rc == 0)
            xfer(d, p, np, d->dflat, d->lo, d->hi, 0, 0, 1);
    } else {
        xfer(d, p, np, d->dflat, d->lo, d->hi, 1, 1, 1);
        d->ops->sync();
        rc = swift_nccl_allgather(d->nccl, mine, d->dflat, chunk);
        if (rc == 0)
            xfer(d, p, np, d->dflat, 0, d->total, 0, 1, 1);
    }
    if (rc < 0)
        return nccl_fail(d, kind == 0 ? "gradient reduce-scatter" : "parameter all-gather", step);
    sync_span(d, kind == 0 ? "grad_sync" : "param_sync", t0, d->total, -1, "nccl", step);
    return 0;
}
#endif

int swift_dist_allreduce_grads(struct swift_dist *d, struct swift_param *p, int np, long step)
{
    if (d->world == 1)
        return 0;
#if HAVE_NCCL
    if (d->nccl)
        return nccl_allreduce_grads(d, p, np, step);
#endif
    int64_t t0 = swift_trace_now();
    size_t total = total_of(p, np);
    if (ensure_flat(d, total) < 0)
        return -1;
    size_t bf = d->bucket_bytes / sizeof(float);
    int nb = (int)((total + bf - 1) / bf);
    MPI_Request *rq = swift_xcalloc((size_t)(nb ? nb : 1), sizeof(*rq));
    char *unpacked = swift_xcalloc((size_t)(nb ? nb : 1), 1);
    /* pack bucket b and start its all-reduce before packing the next one */
    for (int b = 0; b < nb; b++) {
        size_t a = (size_t)b * bf, e = a + bf < total ? a + bf : total;
        xfer(d, p, np, d->flat, a, e, 1, 0, 0);
        MPI_Iallreduce(
            MPI_IN_PLACE, d->flat + a, (int)(e - a), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &rq[b]);
    }
    double t_wait = mono_s(), deadline = t_wait + d->timeout_s;
    int left = nb, rc = 0;
    while (left > 0) {
        for (int b = 0; b < nb; b++) {
            if (unpacked[b])
                continue;
            int done = 0;
            MPI_Test(&rq[b], &done, MPI_STATUS_IGNORE);
            if (done) {
                size_t a = (size_t)b * bf, e = a + bf < total ? a + bf : total;
                xfer(d, p, np, d->flat, a, e, 0, 0, 0);
                unpacked[b] = 1;
                left--;
            }
        }
        if (left && mono_s() > deadline) {
            rc = fail_generic(d, "gradient all-reduce", step);
            break;
        }
        if (left)
            poll_pause(t_wait);
    }
    free(rq);
    free(unpacked);
    sync_span(d, "grad_sync", t0, total, nb, "mpi_iallreduce_sum", step);
    return rc;
}

int swift_dist_allreduce_d(struct swift_dist *d, double *v, int n, const char *what, long step)
{
    if (d->world == 1)
        return 0;
    int64_t t0 = swift_trace_now();
    MPI_Request rq;
    MPI_Iallreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &rq);
    if (wait_all(&rq, 1, mono_s() + d->timeout_s) < 0)
        return fail_generic(d, what, step);
    /* a few doubles: the time is waiting for the other ranks (the last one still receiving the
     * reduce-scatter on a slow link), communication like a check-in's */
    swift_trace_span("comm",
                     "sync_wait",
                     t0,
                     swift_trace_now(),
                     (struct swift_targ[]){SWIFT_TARG_S("point", what), SWIFT_TARG_I("step", step)},
                     2);
    return 0;
}

int swift_dist_barrier(struct swift_dist *d, const char *what, long step)
{
    int flag = 0;
    return swift_dist_checkin(d, what, step, &flag, NULL, 0);
}

/* ---- ZeRO-1 ---- */

static size_t range_lo(size_t total, int world, int k)
{
    return (size_t)((unsigned __int128)total * (unsigned)k / (unsigned)world);
}

/* rank k's range [*a, *b): MPI's proportional cut, or NCCL's equal chunks (d->chunk) */
static void range_of(const struct swift_dist *d, int k, size_t *a, size_t *b)
{
    if (d->chunk) {
        size_t x = d->chunk * (size_t)k, y = x + d->chunk;
        *a = x < d->total ? x : d->total;
        *b = y < d->total ? y : d->total;
    } else {
        *a = range_lo(d->total, d->world, k);
        *b = range_lo(d->total, d->world, k + 1);
    }
}

int swift_dist_shard_init(struct swift_dist *d, struct swift_param *p, int np)
{
    d->total = total_of(p, np);
    if (d->total > (size_t)INT_MAX) /* MPI counts and displacements are int */
        return swift_error("--zero 1: %zu trainable parameters, more than 2^31-1 are not supported",
                           d->total);
    /* NCCL's reduce-scatter and all-gather move equal counts per rank */
    d->chunk = d->nccl ? (d->total + (size_t)d->world - 1) / (size_t)d->world : 0;
    range_of(d, d->rank, &d->lo, &d->hi);
    free(d->shard);
    d->shard = swift_xcalloc((size_t)(np ? np : 1), sizeof(*d->shard));
    d->nshard = 0;
    size_t off = 0;
    for (int i = 0; i < np; i++) {
        size_t n = p[i].numel, s = d->lo > off ? d->lo - off : 0,
               e = d->hi - off < n ? d->hi - off : n;
        if (d->hi > off && off + n > d->lo && s < e) {
            struct swift_param v = p[i];
            v.w = p[i].w + s;
            v.g = p[i].g + s;
            v.numel = e - s;
            v.ndim = 1;
            v.shape[0] = (int64_t)(e - s);
            v.shape[1] = 0;
            d->shard[d->nshard++] = v;
        }
        off += n;
    }
    return ensure_flat(d, d->total ? d->total : 1);
}

static void counts(const struct swift_dist *d, int *cnt, int *dsp)
{
    for (int k = 0; k < d->world; k++) {
        size_t a, b;
        range_of(d, k, &a, &b);
        cnt[k] = (int)(b - a);
        dsp[k] = (int)a;
    }
}

static int shard_coll(struct swift_dist *d, int kind, struct swift_param *p, int np, long step,
                      const float *part, float *full)
{
    int *cnt = swift_xcalloc((size_t)d->world, sizeof(int)),
        *dsp = swift_xcalloc((size_t)d->world, sizeof(int));
    counts(d, cnt, dsp);
    int64_t t0 = swift_trace_now();
    MPI_Request rq;
    const char *what = kind == 0   ? "gradient reduce-scatter"
                       : kind == 1 ? "parameter all-gather"
                                   : "optimizer-state gather";
    if (kind == 0) {
        xfer(d, p, np, d->flat, 0, d->total, 1, 0, 0);
        MPI_Ireduce_scatter(MPI_IN_PLACE, d->flat, cnt, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &rq);
    } else if (kind == 1) {
        xfer(d, p, np, d->flat, d->lo, d->hi, 1, 1, 0);
        MPI_Iallgatherv(
            MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, d->flat, cnt, dsp, MPI_FLOAT, MPI_COMM_WORLD, &rq);
    } else {
        MPI_Igatherv(
            part, cnt[d->rank], MPI_FLOAT, full, cnt, dsp, MPI_FLOAT, 0, MPI_COMM_WORLD, &rq);
    }
    int rc = 0;
    if (wait_all(&rq, 1, mono_s() + d->timeout_s) < 0)
        rc = fail_generic(d, what, step);
    else if (kind == 0) {
        /* MPI_IN_PLACE reduce-scatter leaves this rank's block at the start of the buffer */
        memmove(d->flat + d->lo, d->flat, (d->hi - d->lo) * sizeof(float));
        xfer(d, p, np, d->flat, d->lo, d->hi, 0, 0, 0);
    } else if (kind == 1)
        xfer(d, p, np, d->flat, 0, d->total, 0, 1, 0);
    if (kind < 2) {
        sync_span(d,
                  kind == 0 ? "grad_sync" : "param_sync",
                  t0,
                  d->total,
                  -1,
                  kind == 0 ? "mpi_ireduce_scatter_sum" : "mpi_iallgatherv",
                  step);
    }
    free(cnt);
    free(dsp);
    return rc;
}

int swift_dist_shard_reduce_scatter(struct swift_dist *d, struct swift_param *p, int np, long step)
{
#if HAVE_NCCL
    if (d->nccl && d->world > 1)
        return nccl_shard(d, 0, p, np, step);
#endif
    return d->world == 1 ? 0 : shard_coll(d, 0, p, np, step, NULL, NULL);
}

int swift_dist_shard_allgather(struct swift_dist *d, struct swift_param *p, int np, long step)
{
#if HAVE_NCCL
    if (d->nccl && d->world > 1)
        return nccl_shard(d, 1, p, np, step);
#endif
    return d->world == 1 ? 0 : shard_coll(d, 1, p, np, step, NULL, NULL);
}

int swift_dist_shard_gather(struct swift_dist *d, const float *part, float *full, long step)
{
    if (d->world == 1) {
        if (full != part)
            memcpy(full, part, d->total * sizeof(float));
        return 0;
    }
    return shard_coll(d, 2, NULL, 0, step, part, full);
}
