// adamw8bit.cu — bitsandbytes' 8-bit block-wise AdamW (kernels/cpu/adamw8bit.c is the
// specification; ops.h the contract). One thread block per block of 256 elements, one thread per
// element. Every float operation is the CPU's, spelled with round-to-nearest intrinsics so nvcc
// cannot contract a multiply and an add into an FMA the CPU does not do (and fmaf where it does):
// the codes, absmax and weights are meant to be the CPU's bit for bit. The block's absmax is a
// shared-memory max (exact in any order).
#include "kernels/cuda/internal.h"
#include "kernels/qmap8.h"

#define QBLOCK 256

struct qmaps {
    float map1[256], map2[256]; // signed (m), unsigned (v): kernels/qmap8.h
};

__device__ static uint8_t quantize_one(const float *mid, float x)
{
    x = x < -1.0f ? -1.0f : x > 1.0f ? 1.0f : x;
    unsigned idx = __float2uint_rz(__fmaf_rn(__fmul_rn(__fadd_rn(x, 1.0f), 0.5f), 65535.0f, 0.5f));
    float val = __fadd_rn(-1.0f, __fdiv_rn(__fmul_rn(2.0f, (float)idx), 65535.0f));
    int lo = 0, hi = 255;
    while (lo < hi) {
        int k = (lo + hi) / 2;
        if (mid[k] < val)
            lo = k + 1;
        else
            hi = k;
    }
    return (uint8_t)lo;
}

__global__ void k_adamw8bit(float *p, const float *g, uint8_t *m, uint8_t *v, float *am, float *av,
                            size_t n, struct qmaps q, float fb1, float omb1, float fb2, float omb2,
                            float fc2, float feps, int decay_on, float decay, float ss,
                            float gscale)
{
    __shared__ float mid1[255], mid2[255], r1[QBLOCK], r2[QBLOCK];
    size_t b = blockIdx.x, i = b * QBLOCK + threadIdx.x;
    int t = threadIdx.x, in = i < n;
    if (t < 255) {
        mid1[t] = __fmul_rn(0.5f, __fadd_rn(q.map1[t], q.map1[t + 1]));
        mid2[t] = __fmul_rn(0.5f, __fadd_rn(q.map2[t], q.map2[t + 1]));
    }
    float mi = 0.0f, vi = 0.0f;
    if (in) {
        mi = __fmul_rn(q.map1[m[i]], am[b]);
        vi = __fmul_rn(q.map2[v[i]], av[b]);
        float gi = __fmul_rn(g[i], gscale);
        mi = __fmaf_rn(gi, omb1, __fmul_rn(mi, fb1));
        vi = __fmaf_rn(__fmul_rn(omb2, gi), gi, __fmul_rn(vi, fb2));
        float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), fc2), feps);
        float pi = p[i];
        if (decay_on)
            pi = __fmul_rn(pi, decay);
        p[i] = __fadd_rn(pi, __fdiv_rn(__fmul_rn(ss, mi), denom));
    }
    r1[t] = fabsf(mi);
    r2[t] = fabsf(vi);
    __syncthreads();
    for (int s = QBLOCK / 2; s > 0; s /= 2) {
        if (t < s) {
            r1[t] = fmaxf(r1[t], r1[t + s]);
            r2[t] = fmaxf(r2[t], r2[t + s]);
        }
        __syncthreads();
    }
    float a1 = r1[0], a2 = r2[0];
    if (t == 0) {
        am[b] = a1;
        av[b] = a2;
    }
    if (!in)
        return;
    m[i] = a1 == 0.0f ? 0 : quantize_one(mid1, __fmul_rn(mi, __fdiv_rn(1.0f, a1)));
    v[i] = a2 == 0.0f ? 0 : quantize_one(mid2, __fmul_rn(vi, __fdiv_rn(1.0f, a2)));
}

void swift_cuda_adamw8bit(float *p, const float *g, uint8_t *m, uint8_t *v, float *am, float *av,
                          size_t n, double lr, double b1, double b2, double eps, double wd,
                          long step, float gscale)
{
    need_init();
    if (!n)
        return;
    struct qmaps q;
    memcpy(q.map1, swift_qmap8_signed, sizeof(q.map1));
    memcpy(q.map2, swift_qmap8_unsigned, sizeof(q.map2));
    // the scalars as the CPU derives them (in double, then float)
    double c1 = 1.0 - pow(b1, (double)step), c2 = sqrt(1.0 - pow(b2, (double)step));
    size_t nb = (n + QBLOCK - 1) / QBLOCK;
    k_adamw8bit<<<(unsigned)nb, QBLOCK, 0, G.stream>>>(p,
                                                       g,
                                                       m,
                                                       v,
                                                       am,
                                                       av,
                                                       n,
                                                       q,
                                                       (float)b1,
                                                       (float)(1.0 - b1),
                                                       (float)b2,
                                                       (float)(1.0 - b2),
                                                       (float)c2,
                                                       (float)eps,
                                                       wd > 0.0,
                                                       (float)(1.0 - lr * wd),
                                                       (float)(-lr / c1),
                                                       gscale);
    CKK();
}
