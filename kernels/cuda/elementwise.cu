// elementwise.cu — SwiGLU, add, scale, dropout, AdamW and sumsq (kernels/cpu/elementwise.c is
// the specification). Dropout uses the CPU's splitmix64 counter RNG, so masks are bit-identical;
// sumsq reduces in double over a fixed grid in a fixed order.
#include "kernels/cuda/internal.h"

__global__ void k_swiglu_fwd(float *out, const float *gate, const float *up, size_t n)
{
    GRID_STRIDE(i, n)
    {
        float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

__global__ void k_swiglu_bwd(float *dgate, float *dup, const float *dout, const float *gate,
                             const float *up, size_t n)
{
    GRID_STRIDE(i, n)
    {
        float g = gate[i], s = 1.0f / (1.0f + expf(-g)), d = dout[i], u = up[i];
        dup[i] = d * g * s;
        dgate[i] = d * u * s * (1.0f + g * (1.0f - s));
    }
}

__global__ void k_add(float *out, const float *a, const float *b, size_t n)
{
    GRID_STRIDE(i, n) out[i] = a[i] + b[i];
}

__global__ void k_scale(float *x, float s, size_t n)
{
    GRID_STRIDE(i, n) x[i] *= s;
}

__global__ void k_mul_cols(float *out, const float *x, const float *g, const float *bias, size_t n,
                           int C, float beta)
{
    GRID_STRIDE(i, n)
    {
        size_t c = i % (size_t)C;
        float v = x[i] * g[c] + (bias ? bias[c] : 0.0f);
        out[i] = beta != 0.0f ? beta * out[i] + v : v;
    }
}

__device__ uint64_t splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

__global__ void k_dropout_fwd(float *out, uint8_t *mask, const float *in, size_t n, float keep,
                              uint64_t thresh, uint64_t seed)
{
    GRID_STRIDE(i, n)
    {
        uint8_t m = splitmix64(seed ^ splitmix64(i)) >= thresh;
        mask[i] = m;
        out[i] = m ? in[i] * keep : 0.0f;
    }
}

__global__ void k_dropout_bwd(float *din, const float *dout, const uint8_t *mask, size_t n,
                              float keep)
{
    GRID_STRIDE(i, n) if (mask[i]) din[i] += dout[i] * keep;
}

__global__ void k_adamw(float *p, const float *g, float *m, float *v, size_t n, float lr, float b1,
                        float b2, float eps, float wd, float step, float sbc2, float gscale)
{
    GRID_STRIDE(i, n)
    {
        float gi = g[i] * gscale, pi = p[i] * (1.0f - lr * wd);
        float mi = b1 * m[i] + (1.0f - b1) * gi;
        float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = pi - step * mi / (sqrtf(vi) / sbc2 + eps);
    }
}

void swift_cuda_swiglu_fwd(float *out, const float *gate, const float *up, size_t n)
{
    need_init();
    k_swiglu_fwd<<<blocks_for(n, 256), 256, 0, G.stream>>>(out, gate, up, n);
    CKK();
}
void swift_cuda_swiglu_bwd(float *dgate, float *dup, const float *dout, const float *gate,
                           const float *up, size_t n)
{
    need_init();
    k_swiglu_bwd<<<blocks_for(n, 256), 256, 0, G.stream>>>(dgate, dup, dout, gate, up, n);
    CKK();
}
void swift_cuda_add(float *out, const float *a, const float *b, size_t n)
{
    need_init();
    k_add<<<blocks_for(n, 256), 256, 0, G.stream>>>(out, a, b, n);
    CKK();
}
void swift_cuda_mul_cols(float *out, const float *x, const float *g, const float *bias, size_t N,
                         int C, float beta)
{
    size_t n = N * (size_t)C;
    if (!n)
        return;
    need_init();
    k_mul_cols<<<blocks_for(n, 256), 256, 0, G.stream>>>(out, x, g, bias, n, C, beta);
    CKK();
}
void swift_cuda_scale(float *x, float s, size_t n)
{
    need_init();
    k_scale<<<blocks_for(n, 256), 256, 0, G.stream>>>(x, s, n);
    CKK();
}
void swift_cuda_dropout_fwd(float *out, uint8_t *mask, const float *in, size_t n, float p,
                            uint64_t seed)
{
    SHAPE(p >= 0.0f && p < 1.0f);
    need_init();
    float keep = 1.0f / (1.0f - p);
    uint64_t thresh = (uint64_t)((double)p * 18446744073709551616.0);
    k_dropout_fwd<<<blocks_for(n, 256), 256, 0, G.stream>>>(out, mask, in, n, keep, thresh, seed);
    CKK();
}
void swift_cuda_dropout_bwd(float *din, const float *dout, const uint8_t *mask, size_t n, float p)
{
    SHAPE(p >= 0.0f && p < 1.0f);
    need_init();
    k_dropout_bwd<<<blocks_for(n, 256), 256, 0, G.stream>>>(din, dout, mask, n, 1.0f / (1.0f - p));
    CKK();
}
void swift_cuda_adamw(float *p, const float *g, float *m, float *v, size_t n, float lr, float b1,
                      float b2, float eps, float wd, float bc1, float bc2, float gscale)
{
    need_init();
    k_adamw<<<blocks_for(n, 256), 256, 0, G.stream>>>(
        p, g, m, v, n, lr, b1, b2, eps, wd, lr / bc1, sqrtf(bc2), gscale);
    CKK();
}

/* fixed grid, fixed order: the same sum on every run */
__global__ void k_sumsq_part(double *part, const float *x, size_t n)
{
    double s = 0;
    GRID_STRIDE(i, n) s += (double)x[i] * x[i];
    s = block_sum(s);
    if (threadIdx.x == 0)
        part[blockIdx.x] = s;
}

__global__ void k_sum_parts(double *out, const double *part, int np)
{
    double s = 0;
    for (int i = threadIdx.x; i < np; i += blockDim.x)
        s += part[i];
    s = block_sum(s);
    if (threadIdx.x == 0)
        *out = s;
}

double swift_cuda_sumsq(const float *x, size_t n)
{
    need_init();
    if (n == 0)
        return 0;
    unsigned nb = blocks_for(n, 256);
    if (nb > RED_BLOCKS)
        nb = RED_BLOCKS;
    k_sumsq_part<<<nb, 256, 0, G.stream>>>(G.red, x, n);
    CKK();
    k_sum_parts<<<1, 256, 0, G.stream>>>(G.red + RED_BLOCKS, G.red, (int)nb);
    CKK();
    double r = 0;
    CK(cudaMemcpyAsync(&r, G.red + RED_BLOCKS, sizeof(r), cudaMemcpyDeviceToHost, G.stream));
    CK(cudaStreamSynchronize(G.stream));
    return r;
}
