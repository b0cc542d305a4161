/* adamw8bit — bitsandbytes' 8-bit block-wise AdamW (AdamW8bit, optimizer "adam" with
 * optim_bits=8) as its CPU backend computes it (backends/cpu/ops.py
 * _optimizer_update_8bit_blockwise_cpu and csrc/cpu_ops.cpp quantize_cpu_impl /
 * dequantizeBlockwise8bitCpu, bitsandbytes 0.50.2). See ops.h for the contract.
 *
 * Per block of 256 elements: dequantize both moments (code value times the block's absmax),
 * the Adam step in float32 in torch's op order (the scalars derived in double, as Python
 * floats are, then rounded to float), then requantize: the new absmax is the block's largest
 * magnitude and each value x/absmax is rounded to the nearest map entry through bitsandbytes'
 * 65536-bin table (nearest by midpoint on a grid of [-1, 1], which is what makes a code
 * reproducible: plain nearest-value search differs from it near midpoints). */
#include "kernels/cpu/cpu.h"

#include <math.h>

#include "kernels/qmap8.h"
#include "kernels/banned.h"

#define BLOCK 256
#define LUT_STEPS 65535.0f /* bitsandbytes' kLUTSize - 1 */

/* 0.5*(map[i] + map[i+1]) for i < 255, as build_quantize_lut computes them */
static void midpoints(const float *map, float *mid)
{
    for (int i = 0; i < 255; i++)
        mid[i] = 0.5f * (map[i] + map[i + 1]);
}

/* The code of x (already divided by the block's absmax): the grid point nearest to x (of 65536
 * over [-1, 1]), then the number of midpoints below that grid point; bitsandbytes tabulates
 * the second step (lut[i]), this counts it by bisection. */
static inline uint8_t quantize_one(const float *mid, float x)
{
    x = x < -1.0f ? -1.0f : x > 1.0f ? 1.0f : x;
    /* norm_to_lut_index: GCC contracts the last multiply-add into an FMA there (avx2,fma) */
    unsigned idx = (unsigned)(uint16_t)fmaf((x + 1.0f) * 0.5f, LUT_STEPS, 0.5f);
    float val = -1.0f + (2.0f * (float)idx) / LUT_STEPS;
    int lo = 0, hi = 255; /* count of mid[k] < val: first k with mid[k] >= val */
    while (lo < hi) {
        int k = (lo + hi) / 2;
        if (mid[k] < val)
            lo = k + 1;
        else
            hi = k;
    }
    return (uint8_t)lo;
}

/* x (len) -> codes q and the block's absmax */
static void quantize_block(const float *mid, const float *x, uint8_t *q, float *absmax, int len)
{
    float a = 0.0f;
    for (int i = 0; i < len; i++)
        if (a < fabsf(x[i]))
            a = fabsf(x[i]);
    *absmax = a;
    if (a == 0.0f) {
        for (int i = 0; i < len; i++)
            q[i] = 0;
        return;
    }
    float inv = 1.0f / a;
    for (int i = 0; i < len; i++)
        q[i] = quantize_one(mid, x[i] * inv);
}

void swift_cpu_adamw8bit(float *p, const float *g, uint8_t *m, uint8_t *v, float *am, float *av,
                         size_t n, double lr, double b1, double b2, double eps, double wd,
                         long step, float gscale)
{
    float mid1[255], mid2[255];
    midpoints(swift_qmap8_signed, mid1);
    midpoints(swift_qmap8_unsigned, mid2);
    /* the Python scalars of _optimizer_update_8bit_blockwise_cpu, rounded to float by torch */
    double c1 = 1.0 - pow(b1, (double)step), c2 = sqrt(1.0 - pow(b2, (double)step));
    const float fb1 = (float)b1, fb2 = (float)b2, omb1 = (float)(1.0 - b1),
                omb2 = (float)(1.0 - b2), fc2 = (float)c2, feps = (float)eps,
                decay = (float)(1.0 - lr * wd), ss = (float)(-lr / c1);
    size_t nb = (n + BLOCK - 1) / BLOCK;
#pragma omp parallel for schedule(static)
    for (size_t b = 0; b < nb; b++) {
        size_t o = b * BLOCK;
        int len = (int)(n - o < BLOCK ? n - o : BLOCK);
        float s1[BLOCK], s2[BLOCK];
        for (int i = 0; i < len; i++) {
            float mi = swift_qmap8_signed[m[o + i]] * am[b];
            float vi = swift_qmap8_unsigned[v[o + i]] * av[b];
            float gi = g[o + i] * gscale;
            mi = fmaf(gi, omb1, mi * fb1);      /* mul_(beta1).add_(grad, alpha=1-beta1) */
            vi = fmaf(omb2 * gi, gi, vi * fb2); /* mul_(beta2).addcmul_(grad, grad, 1-beta2) */
            float denom = sqrtf(vi) / fc2 + feps;
            float pi = p[o + i];
            if (wd > 0.0)
                pi *= decay;
            p[o + i] = pi + ss * mi / denom; /* addcdiv_: self + value * t1 / t2 */
            s1[i] = mi;
            s2[i] = vi;
        }
        quantize_block(mid1, s1, m + o, &am[b], len);
        quantize_block(mid2, s2, v + o, &av[b], len);
    }
}
