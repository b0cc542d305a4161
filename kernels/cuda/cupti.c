/* cupti — the CUPTI activity collector behind the CUDA backend's device_trace op (CUDA builds
 * only). Records are converted by kernels/cuda/cupti_conv.c as CUPTI hands back each filled
 * buffer. */
#if defined(SWIFT_HAVE_CUDA) && defined(SWIFT_HAVE_CUPTI)

#include "kernels/cuda/cupti.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime.h>
#include <cupti.h>

#include "kernels/cuda/cupti_conv.h"
#include "kernels/device.h"
#include "kernels/banned.h"

#define CKC(call)                                                                                  \
    do {                                                                                           \
        CUptiResult ckc_r = (call);                                                                \
        if (ckc_r != CUPTI_SUCCESS) {                                                              \
            const char *ckc_s = NULL;                                                              \
            cuptiGetResultString(ckc_r, &ckc_s);                                                   \
            return swift_dev_error(                                                                \
                "%s:%d: %s: %s", __FILE__, __LINE__, #call, ckc_s ? ckc_s : "?");                  \
        }                                                                                          \
    } while (0)

enum { BUF_SIZE = 8 << 20, ALIGN = 8 };

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct swift_cupti_conv conv;
static int running, registered;

static void CUPTIAPI buffer_requested(uint8_t **buf, size_t *size, size_t *max_records)
{
    void *p = NULL;
    if (posix_memalign(&p, ALIGN, BUF_SIZE))
        p = NULL;
    *buf = p;
    *size = p ? BUF_SIZE : 0;
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size,
                                      size_t valid)
{
    (void)ctx;
    (void)size;
    CUpti_Activity *rec = NULL;
    pthread_mutex_lock(&mu);
    while (valid > 0 && cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS)
        swift_cupti_convert(&conv, rec);
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped)
        swift_dev_warn("CUPTI dropped %zu activity records", dropped);
    pthread_mutex_unlock(&mu);
    free(buf);
}

static const CUpti_ActivityKind kinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_RUNTIME,
    CUPTI_ACTIVITY_KIND_MEMORY2,
};

int swift_cupti_start(void)
{
    if (running || !swift_dev_tracing())
        return 0;
    if (!registered) {
        CKC(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
        registered = 1;
    }
    uint64_t c0 = 0;
    int64_t h0 = swift_dev_now();
    CKC(cuptiGetTimestamp(&c0));
    int64_t h1 = swift_dev_now();
    pthread_mutex_lock(&mu);
    int64_t alloc[SWIFT_CUPTI_MAX_DEV];
    for (int i = 0; i < SWIFT_CUPTI_MAX_DEV; i++)
        alloc[i] = conv.allocated[i];
    swift_cupti_conv_init(&conv, (h0 + h1) / 2 - (int64_t)c0, swift_dev_tid());
    for (int i = 0; i < SWIFT_CUPTI_MAX_DEV; i++)
        conv.allocated[i] = alloc[i];
    int dev = 0;
    size_t free_b = 0, total_b = 0;
    if (cudaGetDevice(&dev) == cudaSuccess && dev >= 0 && dev < SWIFT_CUPTI_MAX_DEV &&
        cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
        conv.total[dev] = (int64_t)total_b;
    pthread_mutex_unlock(&mu);
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
        CKC(cuptiActivityEnable(kinds[i]));
    running = 1;
    return 0;
}

int swift_cupti_stop(void)
{
    if (!running)
        return 0;
    running = 0;
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
        CKC(cuptiActivityDisable(kinds[i]));
    CKC(cuptiActivityFlushAll(1));
    return 0;
}

#endif
