// device.cu — CUDA device discovery behind swift_device_query (kernels/device.h). Every runtime
// call is checked; a machine without a GPU (or without a driver) is a normal answer, not an error.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

extern "C" {
#include "kernels/device.h"
}

extern "C" int swift_cuda_query(struct swift_device_info *info, int max, char *why, size_t whylen)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky error */
        /* the runtime says "driver version is insufficient" also when there is no driver at
         * all (no libcuda.so.1: a machine with the toolkit and no GPU) */
        void *drv = e == cudaErrorInsufficientDriver ? dlopen("libcuda.so.1", RTLD_LAZY) : NULL;
        if (e == cudaErrorInsufficientDriver && !drv) {
            snprintf(why, whylen, "no CUDA driver (libcuda.so.1 not found)");
            return -1;
        }
        if (drv)
            dlclose(drv);
        snprintf(why, whylen, "no usable CUDA device: %s", cudaGetErrorString(e));
        return 0;
    }
    if (n == 0) {
        snprintf(why, whylen, "no CUDA device found");
        return 0;
    }
    for (int i = 0; i < n && i < max; i++) {
        cudaDeviceProp p;
        e = cudaGetDeviceProperties(&p, i);
        if (e != cudaSuccess) {
            snprintf(why,
                     whylen,
                     "%s:%d: cudaGetDeviceProperties: %s",
                     __FILE__,
                     __LINE__,
                     cudaGetErrorString(e));
            return 0;
        }
        info[i].index = i;
        snprintf(info[i].name, sizeof(info[i].name), "%s", p.name);
        info[i].total_mem = p.totalGlobalMem;
        info[i].cc_major = p.major;
        info[i].cc_minor = p.minor;
        info[i].sm_count = p.multiProcessorCount;
    }
    return n;
}
