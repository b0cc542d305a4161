/*
 * cupti — device-side tracing for --profile on the CUDA backend (CUDA builds with CUPTI only):
 * kernels, memcpy/memset, runtime API calls and device memory as trace events
 * (kernels/cuda/cupti_conv.h says which), reported through the sink of kernels/device.h.
 * Reached through the op table's device_trace(on) (kernels/cuda/ops.cu); lib/ never calls it.
 */
#ifndef SWIFT_KERNELS_CUDA_CUPTI_H
#define SWIFT_KERNELS_CUDA_CUPTI_H

#if defined(SWIFT_HAVE_CUDA) && defined(SWIFT_HAVE_CUPTI)
/* Start collecting (no-op when the sink wants no events, or already started). 0 or -1,
 * reported. */
int swift_cupti_start(void);
/* Stop, flush every buffer into the sink. 0 or -1, reported. */
int swift_cupti_stop(void);
#endif

#endif
