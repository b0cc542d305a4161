/*
 * cupti — device-side tracing for --profile on the CUDA backend (CUDA builds only): kernels,
 * memcpy/memset, runtime API calls and device memory as trace events (lib/model/cupti_conv.h says
 * which). Reached through the op table's device_trace(on); lib/ never calls it directly.
 */
#ifndef SWIFT_CUPTI_H
#define SWIFT_CUPTI_H

#if defined(SWIFT_HAVE_CUDA) && defined(SWIFT_HAVE_CUPTI)
/* Start collecting (no-op when tracing is off or already started). 0 or -1, reported. */
int swift_cupti_start(void);
/* Stop, flush every buffer into the trace. 0 or -1, reported. */
int swift_cupti_stop(void);
#endif

#endif
