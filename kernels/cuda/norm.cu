// norm.cu — embedding lookup and RMSNorm (kernels/cpu/norm.c is the specification). The
// embedding backward adds with atomicAdd; RMSNorm's weight gradient sums rows in a fixed order.
#include "kernels/cuda/internal.h"

__global__ void k_embed_fwd(float *out, const int32_t *tok, const float *emb, int N, int C)
{
    size_t n = (size_t)N * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = emb[(size_t)tok[i / C] * C + i % C];
}

__global__ void k_embed_bwd(float *demb, const float *dout, const int32_t *tok, int N, int C)
{
    size_t n = (size_t)N * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        atomicAdd(&demb[(size_t)tok[i / C] * C + i % C], dout[i]);
}

void swift_cuda_embed_fwd(float *out, const int32_t *tok, const float *emb, int N, int C)
{
    SHAPE(N >= 0 && C > 0);
    need_init();
    const int32_t *t = dev_i32(tok, (size_t)N);
    k_embed_fwd<<<blocks_for((size_t)N * C, 256), 256, 0, G.stream>>>(out, t, emb, N, C);
    CKK();
}

void swift_cuda_embed_bwd(float *demb, const float *dout, const int32_t *tok, int N, int C)
{
    SHAPE(N >= 0 && C > 0);
    need_init();
    const int32_t *t = dev_i32(tok, (size_t)N);
    k_embed_bwd<<<blocks_for((size_t)N * C, 256), 256, 0, G.stream>>>(demb, dout, t, N, C);
    CKK();
}

__global__ void k_rmsnorm_fwd(float *out, float *rstd, const float *in, const float *w, int C,
                              float eps)
{
    const float *x = in + (size_t)blockIdx.x * C;
    float *y = out + (size_t)blockIdx.x * C;
    float ss = 0;
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        ss += x[c] * x[c];
    ss = block_sum(ss);
    float r = rsqrtf(ss / (float)C + eps);
    if (threadIdx.x == 0)
        rstd[blockIdx.x] = r;
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        y[c] = w[c] * (x[c] * r);
}

__global__ void k_rmsnorm_bwd_dx(float *din, const float *dout, const float *in, const float *w,
                                 const float *rstd, int C)
{
    size_t off = (size_t)blockIdx.x * C;
    const float *x = in + off, *dy = dout + off;
    float *dx = din + off;
    float r = rstd[blockIdx.x], dot = 0;
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        dot += w[c] * dy[c] * x[c];
    dot = block_sum(dot);
    float k = dot * r * r * r / (float)C;
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        dx[c] += r * w[c] * dy[c] - x[c] * k;
}

/* dw[c] += sum_n dy x r: a block of 32 columns x 32 row-slices, fixed order (deterministic) */
__global__ void k_rmsnorm_bwd_dw(float *dw, const float *dout, const float *in, const float *rstd,
                                 int N, int C)
{
    __shared__ float sh[32][33];
    int c = blockIdx.x * 32 + threadIdx.x;
    float s = 0;
    if (c < C)
        for (int n = threadIdx.y; n < N; n += 32)
            s += dout[(size_t)n * C + c] * in[(size_t)n * C + c] * rstd[n];
    sh[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        float t = 0;
        for (int i = 0; i < 32; i++)
            t += sh[i][threadIdx.x];
        dw[c] += t;
    }
}

static unsigned row_threads(int C)
{
    unsigned t = 32;
    while (t < 1024 && t < (unsigned)C)
        t *= 2;
    return t > 512 ? 512 : t;
}

void swift_cuda_rmsnorm_fwd(float *out, float *rstd, const float *in, const float *w, int N, int C,
                            float eps)
{
    SHAPE(N >= 0 && C > 0);
    need_init();
    if (N == 0)
        return;
    k_rmsnorm_fwd<<<N, row_threads(C), 0, G.stream>>>(out, rstd, in, w, C, eps);
    CKK();
}

void swift_cuda_rmsnorm_bwd(float *din, float *dw, const float *dout, const float *in,
                            const float *w, const float *rstd, int N, int C)
{
    SHAPE(N >= 0 && C > 0);
    need_init();
    if (N == 0)
        return;
    k_rmsnorm_bwd_dx<<<N, row_threads(C), 0, G.stream>>>(din, dout, in, w, rstd, C);
    CKK();
    if (dw) {
        k_rmsnorm_bwd_dw<<<(C + 31) / 32, dim3(32, 32), 0, G.stream>>>(dw, dout, in, rstd, N, C);
        CKK();
    }
}
