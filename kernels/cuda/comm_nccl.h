/*
 * comm_nccl — collectives across GPUs through NCCL (CUDA builds with nccl.h only).
 * lib/train/dist.c drives them for swift-train under mpirun with --device cuda (gradient
 * all-reduce, ZeRO-1's reduce-scatter and all-gather), the unique id broadcast over MPI;
 * compiled, never run on GPUs. Errors and the all_reduce span go through the sink of
 * kernels/device.h.
 *
 *     unsigned char id[SWIFT_NCCL_ID_BYTES];
 *     if (rank == 0) swift_nccl_unique_id(id);      // then broadcast id to every rank
 *     struct swift_nccl c;
 *     swift_nccl_init(&c, id, rank, world, device);
 *     swift_nccl_allreduce_sum(&c, grads, n);        // float32, in place, on the backend stream
 *     swift_nccl_free(&c);
 */
#ifndef SWIFT_KERNELS_CUDA_COMM_NCCL_H
#define SWIFT_KERNELS_CUDA_COMM_NCCL_H

#if defined(SWIFT_HAVE_CUDA) && defined(SWIFT_HAVE_NCCL)
#include <stddef.h>

enum { SWIFT_NCCL_ID_BYTES = 128 };

struct swift_nccl {
    void *comm;   /* ncclComm_t */
    void *stream; /* cudaStream_t the collective runs on */
    int rank, world, device;
};

/* 0 or -1 (reported with file:line: call: error). */
int swift_nccl_unique_id(unsigned char id[SWIFT_NCCL_ID_BYTES]);
int swift_nccl_init(struct swift_nccl *c, const unsigned char id[SWIFT_NCCL_ID_BYTES], int rank,
                    int world, int device);
/* Sum n floats of device memory in place across ranks and wait for it; the span "all_reduce"
 * (cat comm) covers enqueue to completion with args bytes, world, dtype. */
int swift_nccl_allreduce_sum(struct swift_nccl *c, float *buf, size_t n);
/* The same collectives without a span (the caller's grad_sync/param_sync span covers them);
 * each waits for completion. Device memory; the caller has synchronised the stream that wrote
 * the input. reduce_scatter: recv (count) = the sum over ranks of send[rank*count ..] (send has
 * world*count floats; recv may be send + rank*count). allgather: recv (world*count) = every
 * rank's send (count); send may be recv + rank*count. */
int swift_nccl_allreduce_raw(struct swift_nccl *c, float *buf, size_t n);
int swift_nccl_reduce_scatter_sum(struct swift_nccl *c, const float *send, float *recv,
                                  size_t count);
int swift_nccl_allgather(struct swift_nccl *c, const float *send, float *recv, size_t count);
void swift_nccl_free(struct swift_nccl *c);
#endif

#endif
