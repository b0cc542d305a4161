/*
 * cupti_conv — CUPTI activity records -> trace events (struct swift_dev_event, handed to the sink
 * of kernels/device.h, which lib/ writes into the trace), in plain C that needs no GPU, so
 * tests/unit/test_cupti_conv.c checks it on records built in memory. Only in CUDA builds with
 * CUPTI (the record layouts come from the toolkit's cupti_activity.h). kernels/cuda/cupti.c
 * collects the records with the CUPTI activity API and hands each one here.
 *
 * What a record becomes (docs/cuda.md; the names and args HTA/Kineto use, so
 * swift-trace-analyze's GPU analyses read our traces like Kineto's):
 *   CONCURRENT_KERNEL  "X" cat "kernel", demangled name, on the stream's track; args device,
 *                      stream, correlation, grid, block, registers per thread, shared memory;
 *                      plus a flow finish ("f", cat "flow", id = correlation) at its start
 *   MEMCPY             "X" cat "gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", args bytes,
 *                      memory bandwidth (GB/s), device, stream, correlation; flow finish
 *   MEMSET             "X" cat "gpu_memset", "Memset (Device)", args bytes, ...; flow finish
 *   RUNTIME            "X" cat "cuda_runtime", the API's name ("cudaLaunchKernel"), on the host
 *                      thread's track; args correlation; a flow start ("s") for calls that
 *                      launch device work (kernel launches, memcpy, memset)
 *   MEMORY2            "C" counter "memory", args allocated (bytes on the device after this
 *                      allocation or release), device, total (device memory, when known)
 * Timestamps: CUPTI nanoseconds + offset_ns = our trace clock (CLOCK_REALTIME ns); the
 * collector measures the offset once (swift_dev_now() - cuptiGetTimestamp()).
 * Tracks: stream s of device d is tid SWIFT_GPU_TID(d, s), named "stream s" (device d) once.
 */
#ifndef SWIFT_KERNELS_CUDA_CUPTI_CONV_H
#define SWIFT_KERNELS_CUDA_CUPTI_CONV_H

#if defined(SWIFT_HAVE_CUDA) && defined(SWIFT_HAVE_CUPTI)

#include <stdint.h>

#include <cupti_activity.h>

/* the newest kernel record of the toolkit (the fields read here are laid out alike in both) */
#if CUPTI_API_VERSION >= 130000
typedef CUpti_ActivityKernel10 swift_cupti_kernel;
#else
typedef CUpti_ActivityKernel9 swift_cupti_kernel;
#endif

#define SWIFT_GPU_TID(dev, stream) (1000000000LL + (int64_t)(dev)*1000000LL + (int64_t)(stream))
enum { SWIFT_CUPTI_MAX_DEV = 16, SWIFT_CUPTI_MAX_TRACKS = 256 };

struct swift_cupti_conv {
    int64_t offset_ns; /* add to CUPTI timestamps */
    int64_t host_tid;  /* track of runtime API calls (the thread that drives the GPU) */
    /* API names: NULL uses a built-in table of the calls the backend makes */
    const char *(*api_name)(uint32_t cbid);
    /* statistics */
    long kernels, memcpys, memsets, runtime, memory, flows, skipped;
    int64_t allocated[SWIFT_CUPTI_MAX_DEV]; /* bytes, from MEMORY2 records */
    int64_t total[SWIFT_CUPTI_MAX_DEV];     /* device memory size (set by the collector; 0 =
                                               unknown): written as the counter's "total" */
    int64_t named[SWIFT_CUPTI_MAX_TRACKS];  /* tracks already named */
    int nnamed;
};

void swift_cupti_conv_init(struct swift_cupti_conv *c, int64_t offset_ns, int64_t host_tid);
/* Convert one record; 1 when it became events, 0 for kinds we do not convert. */
int swift_cupti_convert(struct swift_cupti_conv *c, const CUpti_Activity *rec);
/* Name of a runtime API callback id from the built-in table ("cudaRuntimeApi#N" otherwise;
 * the pointer is valid until the next call from the same thread). */
const char *swift_cupti_runtime_name(uint32_t cbid);

#endif
#endif
