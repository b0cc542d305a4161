// matmul8.cu — the fused 8-bit dequant-matmul of --quant-bits 8 (kernels/quant8.h;
// kernels/cpu/quant8.c is the specification, ops.h the contract). A plain kernel, one thread per
// output element, that dequantizes each weight as it reads it (w = (CB * SCB[row]) * 1/127, the
// CPU's float32 steps): simple, not fast; no copy of the layer is ever materialized. Compiled in
// CUDA builds; not yet checked on a GPU against the CPU op.
#include "kernels/cuda/internal.h"

__device__ static float deq8(const int8_t *cb, const float *scb, int o, int i, int In)
{
    return __fmul_rn(__fmul_rn((float)cb[(size_t)o * In + i], scb[o]), SWIFT_Q8_INV127);
}

// out (N,O) = in (N,I) @ dequant(w)^T + beta * out [+ bias (O)]
__global__ void k_matmul8_fwd(float *out, const float *in, const int8_t *cb, const float *scb,
                              const float *bias, int N, int In, int O, float beta)
{
    size_t n = (size_t)N * (size_t)O;
    GRID_STRIDE(idx, n)
    {
        int r = (int)(idx / (size_t)O), o = (int)(idx % (size_t)O);
        const float *x = in + (size_t)r * In;
        float s = 0.0f;
        for (int i = 0; i < In; i++)
            s += x[i] * deq8(cb, scb, o, i, In);
        if (beta != 0.0f)
            s += beta * out[idx];
        out[idx] = s + (bias ? bias[o] : 0.0f);
    }
}

// din (N,I) = dout (N,O) @ dequant(w) + din_beta * din
__global__ void k_matmul8_bwd(float *din, const float *dout, const int8_t *cb, const float *scb,
                              int N, int In, int O, float din_beta)
{
    size_t n = (size_t)N * (size_t)In;
    GRID_STRIDE(idx, n)
    {
        int r = (int)(idx / (size_t)In), i = (int)(idx % (size_t)In);
        const float *d = dout + (size_t)r * O;
        float s = 0.0f;
        for (int o = 0; o < O; o++)
            s += d[o] * deq8(cb, scb, o, i, In);
        din[idx] = din_beta != 0.0f ? din_beta * din[idx] + s : s;
    }
}

void swift_cuda_matmul8_fwd(float *out, const float *in, const struct swift_q8 *w,
                            const float *bias, int N, int In, int O, float beta)
{
    size_t n = (size_t)N * (size_t)O;
    if (!n)
        return;
    need_init();
    k_matmul8_fwd<<<blocks_for(n, 256), 256, 0, G.stream>>>(
        out, in, w->cb, w->scb, bias, N, In, O, beta);
    CKK();
}

void swift_cuda_matmul8_bwd(float *din, const float *dout, const struct swift_q8 *w, int N, int In,
                            int O, float din_beta)
{
    size_t n = (size_t)N * (size_t)In;
    if (!n)
        return;
    need_init();
    k_matmul8_bwd<<<blocks_for(n, 256), 256, 0, G.stream>>>(
        din, dout, w->cb, w->scb, N, In, O, din_beta);
    CKK();
}
