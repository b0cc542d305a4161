/*
 * dist — multi-process data parallelism over MPI for swift-train (docs/distributed.md).
 *
 *     struct swift_dist d;
 *     if (swift_dist_init(&d, 300.0) < 0)      // MPI_Init only under mpirun/srun; else 1 rank
 *         return 1;
 *     ... swift_trace_config.rank = d.rank, .world_size = d.world,
 *         .clock_offset_us = d.clock_offset_us ...
 *     int stop = got_sigterm;
 *     double v[2] = {ntrain, ntokens};
 *     if (swift_dist_checkin(&d, "forward", step, &stop, v, 2) < 0)   // names a dead/hung rank
 *         return 1;                                                    // v and stop: job totals
 *     ... backward ...
 *     if (swift_dist_allreduce_grads(&d, params, nparams, step) < 0)   // sum, bucketed
 *         return 1;
 *     swift_dist_finalize(&d);
 *
 * Launch detection: MPI is initialised only when a launcher started us (OMPI_COMM_WORLD_SIZE,
 * PMIX_RANK, PMI_RANK/PMI_SIZE, or srun's SLURM_STEP_ID with SLURM_NTASKS > 1), so a plain run
 * never touches MPI and every collective below is a no-op returning at once (world 1).
 *
 * Failure: every wait is a non-blocking MPI request polled against a deadline of --dist-timeout
 * seconds. swift_dist_checkin gathers every rank at rank 0 with point-to-point messages, so
 * rank 0 knows which rank did not arrive and tells the others; every rank then reports
 * "rank K (host, pid P) did not reach ... within Ns" and the call returns -1. After a failure
 * swift_dist_finalize skips MPI_Finalize (which would hang on the missing rank); the launcher
 * then ends the job.
 *
 * Clock offsets: at start-up each rank measures its CLOCK_REALTIME minus rank 0's by 16
 * ping-pongs, keeping the one with the smallest round trip (offset error <= RTT/2).
 *
 * ZeRO-1 (swift_dist_shard_*): the trainable parameters, concatenated, are cut into `world`
 * contiguous ranges; rank k keeps the optimizer state of range k only. Gradients are
 * reduce-scattered into the ranges, each rank updates its range, parameters are all-gathered.
 *
 * Backend memory: gradients and parameters (p[i].g, p[i].w) are backend memory of d->ops
 * (swift_dist_use_backend; default the CPU's): over MPI they are staged through host memory
 * with ops->download/upload. In a CUDA build with NCCL, a multi-rank run on the GPU syncs
 * them with NCCL on device buffers instead (the NCCL unique id is broadcast over MPI); the
 * spans stay grad_sync/param_sync with algo "nccl". Without NCCL a CUDA run stages through
 * host memory and MPI and says so once.
 */
#ifndef SWIFT_DIST_H
#define SWIFT_DIST_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/ops.h"
#include "lib/model/model.h"

struct swift_dist {
    int rank, world;             /* 0 and 1 without a launcher */
    int local_rank, local_world; /* on this host */
    int mpi;                     /* MPI initialised here */
    int failed;                  /* a collective failed: no MPI_Finalize */
    double timeout_s;            /* --dist-timeout */
    double clock_offset_us;      /* this rank's clock minus rank 0's */
    double min_rtt_us;           /* of the best ping-pong (0 on rank 0) */
    const char *launcher;        /* "mpirun", "srun", "pmi" or "none" */
    const char *job_id;          /* SLURM_JOB_ID or NULL */
    char host[64];
    /* OpenMPI: which MPI_Iallreduce algorithm the ranks use and who chose it ("" elsewhere) */
    char allreduce_note[160];
    int *pids;         /* world: every rank's pid (for messages) */
    char (*hosts)[64]; /* world: every rank's host */
    unsigned seq;      /* check-in sequence number (message tags) */
    float *flat;       /* packing buffer, flat_cap floats */
    size_t flat_cap;
    size_t bucket_bytes; /* all-reduce bucket size (default 4 MiB) */
    /* ZeRO-1: this rank's range [lo, hi) of the flat parameter vector of `total` floats */
    size_t total, lo, hi;
    struct swift_param *shard; /* views of the parameters cut to [lo, hi) */
    int nshard;
    /* statistics */
    double bytes_reduced; /* last step's gradient bytes through collectives */
    /* backend of the gradients and parameters (NULL: host memory) */
    const struct swift_ops *ops;
    void *nccl;   /* struct swift_nccl * when collectives run on the GPU, else NULL */
    float *dflat; /* NCCL: device packing buffer of dflat_cap floats (ops->alloc) */
    size_t dflat_cap;
    size_t chunk; /* NCCL ZeRO-1: equal range size (ceil(total/world)); 0: MPI's ranges */
};

/* Detect a launcher, MPI_Init if there is one, exchange hosts and pids, measure clock offsets.
 * timeout_s > 0. Returns 0 or -1 after reporting an error. */
int swift_dist_init(struct swift_dist *d, double timeout_s);
/* MPI_Finalize (unless a failure was reported) and free. Safe on a zeroed struct. */
void swift_dist_finalize(struct swift_dist *d);

/* A point-to-point gather at rank 0 and release. *flag is OR-ed over ranks, v[0..nv) summed
 * (nv <= 48), both returned to every rank. `what` and step name the point in messages.
 * Returns 0, or -1 when a rank did not arrive within the timeout (reported, d->failed set). */
int swift_dist_checkin(struct swift_dist *d, const char *what, long step, int *flag, double *v,
                       int nv);
/* Sum the gradients of p[0..np) over ranks in place: packed into buckets of bucket_bytes,
 * all buckets' MPI_Iallreduce in flight at once, each unpacked as it completes. A grad_sync span
 * (cat "comm", args bytes, buckets, algo) per call. Returns 0 or -1 (timeout, reported). */
int swift_dist_allreduce_grads(struct swift_dist *d, struct swift_param *p, int np, long step);
/* Sum n doubles over ranks in place (with the deadline). */
int swift_dist_allreduce_d(struct swift_dist *d, double *v, int n, const char *what, long step);
/* Barrier with the deadline. */
int swift_dist_barrier(struct swift_dist *d, const char *what, long step);

/* Gradients and parameters live in `ops`' memory (call before any collective on them;
 * swift_dist_finalize releases what this sets up). With cuda != 0 and world > 1: NCCL on
 * device `device` when the build has it (the unique id goes over MPI; -1 when NCCL cannot
 * start, reported), else host staging over MPI with a one-line notice on rank 0. */
int swift_dist_use_backend(struct swift_dist *d, const struct swift_ops *ops, int cuda, int device);
/* "nccl" or "mpi": what carries the gradients. */
const char *swift_dist_transport(const struct swift_dist *d);

/* ZeRO-1: cut p[0..np) into this rank's range; fills d->shard/nshard/lo/hi/total. */
int swift_dist_shard_init(struct swift_dist *d, struct swift_param *p, int np);
/* Reduce-scatter the gradients: afterwards this rank's range of every p[i].g holds the sum
 * over ranks (the rest is stale). */
int swift_dist_shard_reduce_scatter(struct swift_dist *d, struct swift_param *p, int np, long step);
/* All-gather the parameters: every rank's range of p[i].w to every rank. */
int swift_dist_shard_allgather(struct swift_dist *d, struct swift_param *p, int np, long step);
/* Gather a per-range state vector (hi-lo floats per rank, host memory) into full (total
 * floats, host memory) on rank 0; full may be NULL on other ranks. */
int swift_dist_shard_gather(struct swift_dist *d, const float *part, float *full, long step);

#endif
