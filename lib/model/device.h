/*
 * device — which accelerator this process can use, and why not when it cannot.
 *
 * Built with CUDA (make CUDA=1, the default when nvcc is present), swift_device_query() asks the
 * CUDA runtime; a CUDA build on a machine without a GPU reports 0 devices and the reason, and
 * every command falls back to the CPU with a one-line notice. Built without CUDA it reports 0
 * and "built without CUDA".
 */
#ifndef SWIFT_DEVICE_H
#define SWIFT_DEVICE_H

#include <stddef.h>

struct swift_device_info {
    int index;
    char name[256];
    size_t total_mem; /* bytes */
    int cc_major, cc_minor;
    int sm_count;
};

/* Fill up to max entries; returns the number of usable CUDA devices (0 with why[] set). */
int swift_device_query(struct swift_device_info *info, int max, char *why, size_t whylen);
/* 1 if this binary was built with CUDA support. */
int swift_device_built_with_cuda(void);

#ifdef SWIFT_HAVE_CUDA
/* Implemented in kernels/cuda/device.cu. */
int swift_cuda_query(struct swift_device_info *info, int max, char *why, size_t whylen);
#endif

#endif
