/* comm_nccl — see comm_nccl.h. */
#if defined(SWIFT_HAVE_CUDA) && defined(SWIFT_HAVE_NCCL)

#include "kernels/cuda/comm_nccl.h"

#include <string.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include "kernels/device.h"
#include "kernels/banned.h"

#define CKN(call)                                                                                  \
    do {                                                                                           \
        ncclResult_t ckn_r = (call);                                                               \
        if (ckn_r != ncclSuccess)                                                                  \
            return swift_dev_error(                                                                \
                "%s:%d: %s: %s", __FILE__, __LINE__, #call, ncclGetErrorString(ckn_r));            \
    } while (0)
#define CKR(call)                                                                                  \
    do {                                                                                           \
        cudaError_t ckr_e = (call);                                                                \
        if (ckr_e != cudaSuccess)                                                                  \
            return swift_dev_error(                                                                \
                "%s:%d: %s: %s", __FILE__, __LINE__, #call, cudaGetErrorString(ckr_e));            \
    } while (0)

_Static_assert(sizeof(ncclUniqueId) == SWIFT_NCCL_ID_BYTES, "ncclUniqueId size");

int swift_nccl_unique_id(unsigned char id[SWIFT_NCCL_ID_BYTES])
{
    ncclUniqueId u;
    CKN(ncclGetUniqueId(&u));
    memcpy(id, &u, sizeof(u));
    return 0;
}

int swift_nccl_init(struct swift_nccl *c, const unsigned char id[SWIFT_NCCL_ID_BYTES], int rank,
                    int world, int device)
{
    memset(c, 0, sizeof(*c));
    ncclUniqueId u;
    memcpy(&u, id, sizeof(u));
    CKR(cudaSetDevice(device));
    cudaStream_t s;
    CKR(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    ncclComm_t comm;
    CKN(ncclCommInitRank(&comm, world, u, rank));
    c->comm = comm;
    c->stream = s;
    c->rank = rank;
    c->world = world;
    c->device = device;
    return 0;
}

int swift_nccl_allreduce_sum(struct swift_nccl *c, float *buf, size_t n)
{
    int64_t t0 = swift_dev_now();
    CKN(ncclAllReduce(
        buf, buf, n, ncclFloat32, ncclSum, (ncclComm_t)c->comm, (cudaStream_t)c->stream));
    CKR(cudaStreamSynchronize((cudaStream_t)c->stream));
    struct swift_targ a[] = {SWIFT_TARG_I("bytes", (int64_t)(n * sizeof(float))),
                             SWIFT_TARG_I("world", c->world),
                             SWIFT_TARG_S("dtype", "float32"),
                             SWIFT_TARG_S("collective", "all_reduce")};
    struct swift_dev_event e = {.ph = 'X',
                                .cat = "comm",
                                .name = "all_reduce",
                                .ts = t0,
                                .dur = swift_dev_now() - t0,
                                .args = a,
                                .nargs = 4};
    swift_dev_emit(&e); /* tid 0: the calling thread */
    return 0;
}

int swift_nccl_allreduce_raw(struct swift_nccl *c, float *buf, size_t n)
{
    CKN(ncclAllReduce(
        buf, buf, n, ncclFloat32, ncclSum, (ncclComm_t)c->comm, (cudaStream_t)c->stream));
    CKR(cudaStreamSynchronize((cudaStream_t)c->stream));
    return 0;
}

int swift_nccl_reduce_scatter_sum(struct swift_nccl *c, const float *send, float *recv,
                                  size_t count)
{
    CKN(ncclReduceScatter(
        send, recv, count, ncclFloat32, ncclSum, (ncclComm_t)c->comm, (cudaStream_t)c->stream));
    CKR(cudaStreamSynchronize((cudaStream_t)c->stream));
    return 0;
}

int swift_nccl_allgather(struct swift_nccl *c, const float *send, float *recv, size_t count)
{
    CKN(ncclAllGather(
        send, recv, count, ncclFloat32, (ncclComm_t)c->comm, (cudaStream_t)c->stream));
    CKR(cudaStreamSynchronize((cudaStream_t)c->stream));
    return 0;
}

void swift_nccl_free(struct swift_nccl *c)
{
    if (c->comm)
        ncclCommDestroy((ncclComm_t)c->comm);
    if (c->stream)
        cudaStreamDestroy((cudaStream_t)c->stream);
    memset(c, 0, sizeof(*c));
}

#endif
