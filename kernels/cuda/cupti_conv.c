/* cupti_conv — see cupti_conv.h. */
#if defined(SWIFT_HAVE_CUDA) && defined(SWIFT_HAVE_CUPTI)

#include "kernels/cuda/cupti_conv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cupti_runtime_cbid.h>

#include "kernels/device.h"
#include "kernels/banned.h"

/* libstdc++ (linked in CUDA builds): Itanium C++ ABI demangler */
char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

/* ---- the events, handed to the sink (kernels/device.h) ---- */

static void span(const char *cat, const char *name, int64_t tid, int64_t t0, int64_t t1,
                 const struct swift_targ *args, int nargs)
{
    struct swift_dev_event e = {.ph = 'X',
                                .cat = cat,
                                .name = name,
                                .tid = tid,
                                .ts = t0,
                                .dur = t1 - t0,
                                .args = args,
                                .nargs = nargs};
    swift_dev_emit(&e);
}

/* a launch flow: 's' at the runtime call, 'f' at the device work it launched */
static void flow(char ph, uint32_t correlation, int64_t tid, int64_t ts)
{
    struct swift_dev_event e = {
        .ph = ph, .cat = "flow", .name = "launch", .tid = tid, .ts = ts, .id = correlation};
    swift_dev_emit(&e);
}

static void counter_at(const char *name, int64_t ts, const struct swift_targ *series, int n)
{
    struct swift_dev_event e = {.ph = 'C', .name = name, .ts = ts, .args = series, .nargs = n};
    swift_dev_emit(&e);
}

void swift_cupti_conv_init(struct swift_cupti_conv *c, int64_t offset_ns, int64_t host_tid)
{
    memset(c, 0, sizeof(*c));
    c->offset_ns = offset_ns;
    c->host_tid = host_tid;
}

const char *swift_cupti_runtime_name(uint32_t cbid)
{
    switch (cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
        return "cudaLaunchKernel";
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000:
        return "cudaLaunchKernel";
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060:
        return "cudaLaunchKernelExC";
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020:
        return "cudaMemcpy";
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020:
        return "cudaMemcpyAsync";
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020:
        return "cudaMemsetAsync";
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020:
        return "cudaMemset";
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemset2DAsync_v3020:
        return "cudaMemset2DAsync";
    case CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020:
        return "cudaMalloc";
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000:
        return "cudaMallocManaged";
    case CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020:
        return "cudaFree";
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020:
        return "cudaStreamSynchronize";
    case CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020:
        return "cudaDeviceSynchronize";
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020:
        return "cudaEventSynchronize";
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020:
        return "cudaEventRecord";
    case CUPTI_RUNTIME_TRACE_CBID_cudaPointerGetAttributes_v4000:
        return "cudaPointerGetAttributes";
    case CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020:
        return "cudaGetLastError";
    default: {
        static __thread char buf[48];
        snprintf(buf, sizeof(buf), "cudaRuntimeApi#%u", cbid);
        return buf;
    }
    }
}

/* runtime calls that put work on a stream: their flow starts here */
static int launches_work(const char *name)
{
    return !strncmp(name, "cudaLaunch", 10) || !strncmp(name, "cudaMemcpy", 10) ||
           !strncmp(name, "cudaMemset", 10);
}

static void name_track(struct swift_cupti_conv *c, uint32_t dev, uint32_t stream)
{
    int64_t tid = SWIFT_GPU_TID(dev, stream);
    for (int i = 0; i < c->nnamed; i++)
        if (c->named[i] == tid)
            return;
    if (c->nnamed < SWIFT_CUPTI_MAX_TRACKS)
        c->named[c->nnamed++] = tid;
    char nm[64];
    snprintf(nm, sizeof(nm), "stream %u (cuda:%u)", stream, dev);
    swift_dev_emit(&(struct swift_dev_event){.ph = 'M', .name = nm, .tid = tid});
}

static const char *mem_kind(uint8_t k)
{
    switch (k) {
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE:
        return "Pageable";
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED:
        return "Pinned";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE:
        return "Device";
    case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY:
        return "Array";
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED:
        return "Managed";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC:
        return "Device Static";
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC:
        return "Managed Static";
    default:
        return "Unknown";
    }
}

static const char *copy_kind(uint8_t k)
{
    switch (k) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
        return "HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
        return "DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
        return "DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
        return "HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
        return "PtoP";
    default:
        return "Unknown";
    }
}

static void kernel(struct swift_cupti_conv *c, const swift_cupti_kernel *k)
{
    int64_t t0 = (int64_t)k->start + c->offset_ns, t1 = (int64_t)k->end + c->offset_ns;
    int64_t tid = SWIFT_GPU_TID(k->deviceId, k->streamId);
    name_track(c, k->deviceId, k->streamId);
    int st = -1;
    char *dm = k->name ? __cxa_demangle(k->name, NULL, NULL, &st) : NULL;
    const char *name = st == 0 && dm ? dm : k->name ? k->name : "kernel";
    char grid[48], block[48];
    snprintf(grid, sizeof(grid), "[%d, %d, %d]", k->gridX, k->gridY, k->gridZ);
    snprintf(block, sizeof(block), "[%d, %d, %d]", k->blockX, k->blockY, k->blockZ);
    struct swift_targ a[] = {
        SWIFT_TARG_I("device", k->deviceId),
        SWIFT_TARG_I("stream", k->streamId),
        SWIFT_TARG_I("correlation", k->correlationId),
        SWIFT_TARG_I("registers per thread", k->registersPerThread),
        SWIFT_TARG_I("shared memory", k->staticSharedMemory + k->dynamicSharedMemory),
        SWIFT_TARG_RAW("grid", grid),
        SWIFT_TARG_RAW("block", block),
    };
    span("kernel", name, tid, t0, t1, a, (int)(sizeof(a) / sizeof(a[0])));
    flow('f', k->correlationId, tid, t0);
    free(dm);
    c->kernels++;
    c->flows++;
}

static void memcpy_rec(struct swift_cupti_conv *c, const CUpti_ActivityMemcpy6 *m)
{
    int64_t t0 = (int64_t)m->start + c->offset_ns, t1 = (int64_t)m->end + c->offset_ns;
    int64_t tid = SWIFT_GPU_TID(m->deviceId, m->streamId);
    name_track(c, m->deviceId, m->streamId);
    char name[96];
    snprintf(name,
             sizeof(name),
             "Memcpy %s (%s -> %s)",
             copy_kind(m->copyKind),
             mem_kind(m->srcKind),
             mem_kind(m->dstKind));
    double gbps = t1 > t0 ? (double)m->bytes / (double)(t1 - t0) : 0; /* bytes/ns = GB/s */
    struct swift_targ a[] = {
        SWIFT_TARG_I("device", m->deviceId),
        SWIFT_TARG_I("stream", m->streamId),
        SWIFT_TARG_I("correlation", m->correlationId),
        SWIFT_TARG_I("bytes", m->bytes),
        SWIFT_TARG_D("memory bandwidth (GB/s)", gbps),
    };
    span("gpu_memcpy", name, tid, t0, t1, a, (int)(sizeof(a) / sizeof(a[0])));
    flow('f', m->correlationId, tid, t0);
    c->memcpys++;
    c->flows++;
}

static void memset_rec(struct swift_cupti_conv *c, const CUpti_ActivityMemset4 *m)
{
    int64_t t0 = (int64_t)m->start + c->offset_ns, t1 = (int64_t)m->end + c->offset_ns;
    int64_t tid = SWIFT_GPU_TID(m->deviceId, m->streamId);
    name_track(c, m->deviceId, m->streamId);
    char name[64];
    snprintf(name, sizeof(name), "Memset (%s)", mem_kind((uint8_t)m->memoryKind));
    struct swift_targ a[] = {
        SWIFT_TARG_I("device", m->deviceId),
        SWIFT_TARG_I("stream", m->streamId),
        SWIFT_TARG_I("correlation", m->correlationId),
        SWIFT_TARG_I("bytes", m->bytes),
    };
    span("gpu_memset", name, tid, t0, t1, a, (int)(sizeof(a) / sizeof(a[0])));
    flow('f', m->correlationId, tid, t0);
    c->memsets++;
    c->flows++;
}

static void api_rec(struct swift_cupti_conv *c, const CUpti_ActivityAPI *r)
{
    int64_t t0 = (int64_t)r->start + c->offset_ns, t1 = (int64_t)r->end + c->offset_ns;
    const char *name = c->api_name ? c->api_name(r->cbid) : NULL;
    if (!name)
        name = swift_cupti_runtime_name(r->cbid);
    struct swift_targ a[] = {
        SWIFT_TARG_I("correlation", r->correlationId),
        SWIFT_TARG_I("cbid", r->cbid),
    };
    span("cuda_runtime", name, c->host_tid, t0, t1, a, 2);
    if (launches_work(name)) {
        flow('s', r->correlationId, c->host_tid, t0);
        c->flows++;
    }
    c->runtime++;
}

static void memory_rec(struct swift_cupti_conv *c, const CUpti_ActivityMemory4 *m)
{
    if (m->deviceId >= SWIFT_CUPTI_MAX_DEV)
        return;
    if (m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION)
        c->allocated[m->deviceId] += (int64_t)m->bytes;
    else if (m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE)
        c->allocated[m->deviceId] -= (int64_t)m->bytes;
    else
        return;
    struct swift_targ a[] = {
        SWIFT_TARG_I("allocated", c->allocated[m->deviceId]),
        SWIFT_TARG_I("device", m->deviceId),
        SWIFT_TARG_I("total", c->total[m->deviceId]),
    };
    counter_at(
        "memory", (int64_t)m->timestamp + c->offset_ns, a, c->total[m->deviceId] > 0 ? 3 : 2);
    c->memory++;
}

int swift_cupti_convert(struct swift_cupti_conv *c, const CUpti_Activity *rec)
{
    switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        kernel(c, (const swift_cupti_kernel *)rec);
        return 1;
    case CUPTI_ACTIVITY_KIND_MEMCPY:
        memcpy_rec(c, (const CUpti_ActivityMemcpy6 *)rec);
        return 1;
    case CUPTI_ACTIVITY_KIND_MEMSET:
        memset_rec(c, (const CUpti_ActivityMemset4 *)rec);
        return 1;
    case CUPTI_ACTIVITY_KIND_RUNTIME:
        api_rec(c, (const CUpti_ActivityAPI *)rec);
        return 1;
    case CUPTI_ACTIVITY_KIND_MEMORY2:
        memory_rec(c, (const CUpti_ActivityMemory4 *)rec);
        return 1;
    default:
        c->skipped++;
        return 0;
    }
}

#endif
