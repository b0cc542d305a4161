// flash_attn.h — between kernels/cuda/attention.cu (the attention ops) and
// kernels/cuda/flash_attn.cu (the fused attention kernels). C++ only; not part of the library's
// C interface (kernels/ops.h).
#ifndef SWIFT_FLASH_ATTN_H
#define SWIFT_FLASH_ATTN_H

#include <cuda_runtime.h>
#include <stdint.h>

// Whether attention with head dim D takes the fused path: swift_cuda_set_attention() or
// $SWIFT_CUDA_ATTN=flash|cublas (read at the first call); by default flash when D is supported.
// An explicit flash with an unsupported D is refused: message on stderr, abort().
bool swift_flash_use(int D);

// The op table's attention_fwd / attention_bwd on the fused path, queued on stream st. pos is a
// device pointer. probs (B,NH,T,T) is used as storage: L (B,NH,T) at offset 0 and, when
// flash_saves_out(T, D), a copy of out at offset B*NH*T (kernels/cuda/flash_plan.h); backward
// must get the probs its forward wrote on the same path.
void swift_flash_fwd(cudaStream_t st, float *out, float *probs, const float *q, const float *k,
                     const float *v, const int32_t *pos, int B, int T, int NH, int NKV, int D);
void swift_flash_bwd(cudaStream_t st, float *dq, float *dk, float *dv, const float *dout,
                     const float *probs, const float *q, const float *k, const float *v,
                     const int32_t *pos, int B, int T, int NH, int NKV, int D);

#endif
