// internal.h — what the files of the CUDA backend share; C++ only, not part of the library's
// interface (kernels/ops.h). As in kernels/cpu/, each op family has its file: matmul.cu
// (cuBLASLt), norm.cu (embedding, RMSNorm), rope.cu, attention.cu (the cuBLAS path; the fused one
// is flash_attn.cu), elementwise.cu (SwiGLU, add, scale, sumsq, dropout, AdamW), loss.cu
// (cross-entropy), kvcache.cu (copy_rows, attention_cached, attention_paged), adamw8bit.cu,
// quant4.cu (QLoRA's fused 4-bit dequant-matmul), matmul8.cu (the 8-bit base); ops.cu holds the
// state, the initialisation, memory, the index-array cache and the op table.
#ifndef SWIFT_KERNELS_CUDA_INTERNAL_H
#define SWIFT_KERNELS_CUDA_INTERNAL_H

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {
#include "kernels/ops.h"
}

#include "kernels/cuda/check.h"

/* The backend's state (ops.cu): one device, one stream, the cuBLAS(Lt) handles and workspaces. */
struct swift_cuda_state {
    int ready, device, math;
    cudaStream_t stream;
    cublasLtHandle_t lt;
    cublasHandle_t blas;
    void *lt_ws;
    size_t lt_ws_size;
    float *scratch; /* attention dP / dS (B,NH,T,T) */
    size_t scratch_n;
    double *red; /* reductions: partial sums (RED_BLOCKS + 4 doubles) */
    size_t allocated;
};
extern struct swift_cuda_state swift_cuda;
static struct swift_cuda_state &G = swift_cuda; /* the short name every file uses */

enum { RED_BLOCKS = 1024 };

/* Initialise on GPU 0 unless swift_cuda_init() ran; abort() when that fails. */
void swift_cuda_need_init(void);
static inline void need_init(void)
{
    swift_cuda_need_init();
}

/* A device copy of a small read-only array that may live in host memory (int32 tokens,
 * positions, targets; RoPE's inv_freq), cached per (pointer, length, content); device pointers
 * are returned as they are. */
const void *swift_cuda_dev_ro(const void *p, size_t bytes);
static inline const void *dev_ro(const void *p, size_t bytes)
{
    return swift_cuda_dev_ro(p, bytes);
}
static inline const int32_t *dev_i32(const int32_t *p, size_t n)
{
    return (const int32_t *)swift_cuda_dev_ro(p, n * sizeof(int32_t));
}

static inline unsigned blocks_for(size_t n, unsigned threads)
{
    size_t b = (n + threads - 1) / threads;
    return (unsigned)(b > 65535u * 16 ? 65535u * 16 : (b ? b : 1));
}

#define GRID_STRIDE(i, n)                                                                          \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n);                        \
         i += (size_t)gridDim.x * blockDim.x)

/* ---------------- block reductions (all threads of the block get the result) ---------------- */

template <typename T> __device__ T block_sum(T v)
{
    __shared__ T sh[32];
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0)
        sh[wid] = v;
    __syncthreads();
    int nw = (blockDim.x + 31) >> 5;
    v = threadIdx.x < nw ? sh[threadIdx.x] : (T)0;
    if (wid == 0)
        for (int o = 16; o > 0; o >>= 1)
            v += __shfl_xor_sync(0xffffffffu, v, o);
    if (threadIdx.x == 0)
        sh[0] = v;
    __syncthreads();
    v = sh[0];
    __syncthreads();
    return v;
}

__device__ inline float block_max(float v)
{
    __shared__ float sh[32];
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0)
        sh[wid] = v;
    __syncthreads();
    int nw = (blockDim.x + 31) >> 5;
    v = threadIdx.x < nw ? sh[threadIdx.x] : -INFINITY;
    if (wid == 0)
        for (int o = 16; o > 0; o >>= 1)
            v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (threadIdx.x == 0)
        sh[0] = v;
    __syncthreads();
    v = sh[0];
    __syncthreads();
    return v;
}

/* ---------------- the ops, one family per file (the table is in ops.cu) ---------------- */

void swift_cuda_matmul_fwd(float *out, const float *in, const float *w, const float *bias, int N,
                           int In, int O, float alpha, float beta);
void swift_cuda_matmul_bwd(float *din, float *dw, float *db, const float *dout, const float *in,
                           const float *w, int N, int In, int O, float alpha, float din_beta);
void swift_cuda_embed_fwd(float *out, const int32_t *tok, const float *emb, int N, int C);
void swift_cuda_embed_bwd(float *demb, const float *dout, const int32_t *tok, int N, int C);
void swift_cuda_rmsnorm_fwd(float *out, float *rstd, const float *in, const float *w, int N, int C,
                            float eps);
void swift_cuda_rmsnorm_bwd(float *din, float *dw, const float *dout, const float *in,
                            const float *w, const float *rstd, int N, int C);
void swift_cuda_rope_fwd(float *x, const int32_t *pos, const float *f, int N, int H, int D);
void swift_cuda_rope_bwd(float *x, const int32_t *pos, const float *f, int N, int H, int D);
void swift_cuda_attention_fwd(float *out, float *probs, const float *q, const float *k,
                              const float *v, const int32_t *pos, int B, int T, int NH, int NKV,
                              int D);
void swift_cuda_attention_bwd(float *dq, float *dk, float *dv, const float *dout,
                              const float *probs, const float *q, const float *k, const float *v,
                              const int32_t *pos, int B, int T, int NH, int NKV, int D);
void swift_cuda_swiglu_fwd(float *out, const float *gate, const float *up, size_t n);
void swift_cuda_swiglu_bwd(float *dgate, float *dup, const float *dout, const float *gate,
                           const float *up, size_t n);
void swift_cuda_add(float *out, const float *a, const float *b, size_t n);
void swift_cuda_scale(float *x, float s, size_t n);
void swift_cuda_mul_cols(float *out, const float *x, const float *g, const float *bias, size_t N,
                         int C, float beta);
double swift_cuda_sumsq(const float *x, size_t n);
void swift_cuda_dropout_fwd(float *out, uint8_t *mask, const float *in, size_t n, float p,
                            uint64_t seed);
void swift_cuda_dropout_bwd(float *din, const float *dout, const uint8_t *mask, size_t n, float p);
void swift_cuda_adamw(float *p, const float *g, float *m, float *v, size_t n, float lr, float b1,
                      float b2, float eps, float wd, float bc1, float bc2, float gscale);
void swift_cuda_cross_entropy(float *dlogits, double *loss_sum, long *count, long *correct,
                              const float *logits, const int32_t *targets, int N, int V,
                              float dscale);
void swift_cuda_copy_rows(float *dst, const int32_t *dst_idx, const float *src,
                          const int32_t *src_idx, int n, int width);
void swift_cuda_attention_cached(float *out, const float *q, const float *kcache,
                                 const float *vcache, const int32_t *pos, const int32_t *row,
                                 size_t row_stride, int N, int NH, int NKV, int D);
void swift_cuda_layernorm_fwd(float *out, float *mean, float *rstd, const float *in, const float *w,
                              const float *b, int N, int C, float eps);
void swift_cuda_layernorm_bwd(float *din, float *dw, float *db, const float *dout, const float *in,
                              const float *w, const float *mean, const float *rstd, int N, int C);
void swift_cuda_gelu_fwd(float *out, const float *in, size_t n, int kind);
void swift_cuda_gelu_bwd(float *din, const float *dout, const float *in, size_t n, int kind);
void swift_cuda_attention_seg_fwd(float *out, float *probs, const float *q, const float *k,
                                  const float *v, const int32_t *cu, int nseg, int N, int NH,
                                  int D);
void swift_cuda_attention_seg_bwd(float *dq, float *dk, float *dv, const float *dout,
                                  const float *probs, const float *q, const float *k,
                                  const float *v, const int32_t *cu, int nseg, int N, int NH,
                                  int D);
void swift_cuda_attention_paged(float *out, const float *q, const float *kcache,
                                const float *vcache, const int32_t *pos, const int32_t *toff,
                                const int32_t *tables, int ntables, int block_size, int N, int NH,
                                int NKV, int D);
void swift_cuda_adamw8bit(float *p, const float *g, uint8_t *m, uint8_t *v, float *am, float *av,
                          size_t n, double lr, double b1, double b2, double eps, double wd,
                          long step, float gscale);
void swift_cuda_matmul4_fwd(float *out, const float *in, const struct swift_q4 *w,
                            const float *bias, int N, int In, int O, float beta);
void swift_cuda_matmul4_bwd(float *din, const float *dout, const struct swift_q4 *w, int N, int In,
                            int O, float din_beta);
void swift_cuda_matmul8_fwd(float *out, const float *in, const struct swift_q8 *w,
                            const float *bias, int N, int In, int O, float beta);
void swift_cuda_matmul8_bwd(float *din, const float *dout, const struct swift_q8 *w, int N, int In,
                            int O, float din_beta);

#endif
