// vision.cu — the vision tower's ops (kernels/cpu/vision.c is the specification): LayerNorm
// with bias, GELU (erf, quick), and bidirectional attention inside segments (cu_seqlens), one
// block per (token, head) with the scores in `probs`; the backward adds into dq, dk and dv with
// atomicAdd. Plain kernels, no tensor cores: the vision tower of the models it serves is small
// next to the language model. Compile-checked; not yet run on a GPU.
#include "kernels/cuda/internal.h"

__global__ void k_layernorm_fwd(float *out, float *mean, float *rstd, const float *in,
                                const float *w, const float *b, int C, float eps)
{
    const float *x = in + (size_t)blockIdx.x * C;
    float *y = out + (size_t)blockIdx.x * C;
    float s = 0;
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        s += x[c];
    float mu = block_sum(s) / (float)C, v = 0;
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        v += (x[c] - mu) * (x[c] - mu);
    float r = rsqrtf(block_sum(v) / (float)C + eps);
    if (threadIdx.x == 0) {
        mean[blockIdx.x] = mu;
        rstd[blockIdx.x] = r;
    }
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        y[c] = (x[c] - mu) * r * w[c] + (b ? b[c] : 0.0f);
}

__global__ void k_layernorm_bwd_dx(float *din, const float *dout, const float *in, const float *w,
                                   const float *mean, const float *rstd, int C)
{
    size_t off = (size_t)blockIdx.x * C;
    const float *x = in + off, *dy = dout + off;
    float mu = mean[blockIdx.x], r = rstd[blockIdx.x], s1 = 0, s2 = 0;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float g = dy[c] * w[c];
        s1 += g;
        s2 += g * (x[c] - mu) * r;
    }
    s1 = block_sum(s1) / (float)C;
    s2 = block_sum(s2) / (float)C;
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        din[off + c] += r * (dy[c] * w[c] - s1 - (x[c] - mu) * r * s2);
}

/* one thread per column, rows summed in order */
__global__ void k_layernorm_bwd_dw(float *dw, float *db, const float *dout, const float *in,
                                   const float *mean, const float *rstd, int N, int C)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C)
        return;
    float sw = 0, sb = 0;
    for (int n = 0; n < N; n++) {
        float dy = dout[(size_t)n * C + c];
        sw += dy * (in[(size_t)n * C + c] - mean[n]) * rstd[n];
        sb += dy;
    }
    if (dw)
        dw[c] += sw;
    if (db)
        db[c] += sb;
}

void swift_cuda_layernorm_fwd(float *out, float *mean, float *rstd, const float *in, const float *w,
                              const float *b, int N, int C, float eps)
{
    SHAPE(N >= 0 && C > 0);
    need_init();
    if (N == 0)
        return;
    k_layernorm_fwd<<<N, 256, 0, G.stream>>>(out, mean, rstd, in, w, b, C, eps);
    CKK();
}

void swift_cuda_layernorm_bwd(float *din, float *dw, float *db, const float *dout, const float *in,
                              const float *w, const float *mean, const float *rstd, int N, int C)
{
    SHAPE(N >= 0 && C > 0);
    need_init();
    if (N == 0)
        return;
    k_layernorm_bwd_dx<<<N, 256, 0, G.stream>>>(din, dout, in, w, mean, rstd, C);
    CKK();
    if (dw || db) {
        k_layernorm_bwd_dw<<<(C + 255) / 256, 256, 0, G.stream>>>(
            dw, db, dout, in, mean, rstd, N, C);
        CKK();
    }
}

__device__ inline float gelu1(float x, int kind, float *grad)
{
    if (kind == SWIFT_GELU_QUICK) {
        float s = 1.0f / (1.0f + expf(-1.702f * x));
        if (grad)
            *grad = s + 1.702f * x * s * (1.0f - s);
        return x * s;
    }
    float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752f));
    if (grad)
        *grad = cdf + x * 0.39894228040143268f * expf(-0.5f * x * x);
    return x * cdf;
}

__global__ void k_gelu_fwd(float *out, const float *in, size_t n, int kind)
{
    GRID_STRIDE(i, n)
    out[i] = gelu1(in[i], kind, NULL);
}

__global__ void k_gelu_bwd(float *din, const float *dout, const float *in, size_t n, int kind)
{
    GRID_STRIDE(i, n)
    {
        float g;
        gelu1(in[i], kind, &g);
        din[i] = dout[i] * g;
    }
}

void swift_cuda_gelu_fwd(float *out, const float *in, size_t n, int kind)
{
    need_init();
    if (!n)
        return;
    k_gelu_fwd<<<blocks_for(n, 256), 256, 0, G.stream>>>(out, in, n, kind);
    CKK();
}

void swift_cuda_gelu_bwd(float *din, const float *dout, const float *in, size_t n, int kind)
{
    need_init();
    if (!n)
        return;
    k_gelu_bwd<<<blocks_for(n, 256), 256, 0, G.stream>>>(din, dout, in, n, kind);
    CKK();
}

/* token t's segment: its start c0, length L and where its probabilities start */
__device__ inline void seg_of(const int32_t *cu, int nseg, int t, int NH, int *c0, int *L,
                              size_t *off)
{
    size_t o = 0;
    for (int s = 0; s < nseg; s++) {
        int l = cu[s + 1] - cu[s];
        if (t < cu[s + 1]) {
            *c0 = cu[s];
            *L = l;
            *off = o * (size_t)NH;
            return;
        }
        o += (size_t)l * l;
    }
    *c0 = t;
    *L = 0;
    *off = 0;
}

/* block (t, h): the scores of query t against its segment, softmax into probs, then out */
__global__ void k_attention_seg_fwd(float *out, float *probs, const float *q, const float *k,
                                    const float *v, const int32_t *cu, int nseg, int NH, int D)
{
    int t = blockIdx.x, h = blockIdx.y, c0, L;
    size_t off, RS = (size_t)NH * D;
    seg_of(cu, nseg, t, NH, &c0, &L, &off);
    float *p = probs + off + ((size_t)h * L + (t - c0)) * L;
    const float *qi = q + (size_t)t * RS + (size_t)h * D;
    float scale = rsqrtf((float)D), mx = -INFINITY;
    for (int j = threadIdx.x; j < L; j += blockDim.x) {
        const float *kj = k + (size_t)(c0 + j) * RS + (size_t)h * D;
        float d = 0;
        for (int e = 0; e < D; e++)
            d += qi[e] * kj[e];
        p[j] = d * scale;
        mx = fmaxf(mx, p[j]);
    }
    mx = block_max(mx);
    float sum = 0;
    for (int j = threadIdx.x; j < L; j += blockDim.x) {
        p[j] = expf(p[j] - mx);
        sum += p[j];
    }
    sum = block_sum(sum);
    for (int j = threadIdx.x; j < L; j += blockDim.x)
        p[j] /= sum;
    __syncthreads();
    float *o = out + (size_t)t * RS + (size_t)h * D;
    for (int e = threadIdx.x; e < D; e += blockDim.x) {
        float a = 0;
        for (int j = 0; j < L; j++)
            a += p[j] * v[(size_t)(c0 + j) * RS + (size_t)h * D + e];
        o[e] = a;
    }
}

/* block (t, h): dot = sum_j p_j dP_j with dP_j = dout_t . v_j, then per key j again
 * g_j = p_j (dP_j - dot) / sqrt(D): dv_j += p_j dout_t, dk_j += g_j q_t, dq_t += g_j k_j, all
 * atomically (dq, dk, dv zeroed first) */
__global__ void k_attention_seg_bwd(float *dq, float *dk, float *dv, const float *dout,
                                    const float *probs, const float *q, const float *k,
                                    const float *v, const int32_t *cu, int nseg, int NH, int D)
{
    int t = blockIdx.x, h = blockIdx.y, c0, L;
    size_t off, RS = (size_t)NH * D;
    seg_of(cu, nseg, t, NH, &c0, &L, &off);
    const float *p = probs + off + ((size_t)h * L + (t - c0)) * L;
    const float *go = dout + (size_t)t * RS + (size_t)h * D;
    const float *qi = q + (size_t)t * RS + (size_t)h * D;
    float *dqi = dq + (size_t)t * RS + (size_t)h * D;
    float scale = rsqrtf((float)D), dot = 0;
    for (int j = threadIdx.x; j < L; j += blockDim.x) {
        const float *vj = v + (size_t)(c0 + j) * RS + (size_t)h * D;
        float d = 0;
        for (int e = 0; e < D; e++)
            d += go[e] * vj[e];
        dot += p[j] * d;
    }
    dot = block_sum(dot);
    for (int j = threadIdx.x; j < L; j += blockDim.x) {
        const float *vj = v + (size_t)(c0 + j) * RS + (size_t)h * D;
        const float *kj = k + (size_t)(c0 + j) * RS + (size_t)h * D;
        float *dvj = dv + (size_t)(c0 + j) * RS + (size_t)h * D;
        float *dkj = dk + (size_t)(c0 + j) * RS + (size_t)h * D, d = 0;
        for (int e = 0; e < D; e++)
            d += go[e] * vj[e];
        float g = p[j] * (d - dot) * scale;
        for (int e = 0; e < D; e++) {
            atomicAdd(&dvj[e], p[j] * go[e]);
            atomicAdd(&dkj[e], g * qi[e]);
            atomicAdd(&dqi[e], g * kj[e]);
        }
    }
}

void swift_cuda_attention_seg_fwd(float *out, float *probs, const float *q, const float *k,
                                  const float *v, const int32_t *cu, int nseg, int N, int NH, int D)
{
    SHAPE(nseg >= 0 && N >= 0 && NH > 0 && D > 0);
    need_init();
    if (N == 0)
        return;
    const int32_t *c = dev_i32(cu, (size_t)nseg + 1);
    k_attention_seg_fwd<<<dim3((unsigned)N, (unsigned)NH), 128, 0, G.stream>>>(
        out, probs, q, k, v, c, nseg, NH, D);
    CKK();
}

void swift_cuda_attention_seg_bwd(float *dq, float *dk, float *dv, const float *dout,
                                  const float *probs, const float *q, const float *k,
                                  const float *v, const int32_t *cu, int nseg, int N, int NH, int D)
{
    SHAPE(nseg >= 0 && N >= 0 && NH > 0 && D > 0);
    need_init();
    size_t n = (size_t)N * NH * D;
    if (N == 0)
        return;
    CK(cudaMemsetAsync(dq, 0, n * sizeof(float), G.stream));
    CK(cudaMemsetAsync(dk, 0, n * sizeof(float), G.stream));
    CK(cudaMemsetAsync(dv, 0, n * sizeof(float), G.stream));
    const int32_t *c = dev_i32(cu, (size_t)nseg + 1);
    k_attention_seg_bwd<<<dim3((unsigned)N, (unsigned)NH), 128, 0, G.stream>>>(
        dq, dk, dv, dout, probs, q, k, v, c, nseg, NH, D);
    CKK();
}
