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
 * reproducible: plain nearest-value search differs from it near midpoints). The table is built
 * once per process, as bitsandbytes does; a code is one lookup (it was a bisection over the
 * 255 midpoints per value, ~25x slower than fp32 AdamW's step). */
#include "kernels/cpu/cpu.h"

#include <math.h>
#include <pthread.h>

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

/* The grid point nearest to x (already divided by the block's absmax), of 65536 over [-1, 1]:
 * norm_to_lut_index (GCC contracts its last multiply-add into an FMA there, avx2/fma). */
static inline unsigned grid_index(float x)
{
    x = x < -1.0f ? -1.0f : x > 1.0f ? 1.0f : x;
    return (unsigned)(uint16_t)fmaf((x + 1.0f) * 0.5f, LUT_STEPS, 0.5f);
}

/* bitsandbytes' lut[idx] (build_quantize_lut): the number of midpoints below grid point idx.
 * The grid values rise with idx, so one sweep counts them. */
static void build_lut(const float *map, uint8_t *lut)
{
    float mid[255];
    midpoints(map, mid);
    int k = 0;
    for (unsigned idx = 0; idx <= 65535u; idx++) {
        float val = -1.0f + (2.0f * (float)idx) / LUT_STEPS;
        while (k < 255 && mid[k] < val)
            k++;
        lut[idx] = (uint8_t)k;
    }
}

/* The two tables (64 KiB each), built once per process as bitsandbytes caches its own. */
static uint8_t lut_signed[65536], lut_unsigned[65536];
static pthread_once_t lut_once = PTHREAD_ONCE_INIT;

static void build_luts(void)
{
    build_lut(swift_qmap8_signed, lut_signed);
    build_lut(swift_qmap8_unsigned, lut_unsigned);
}

uint8_t swift_cpu_qmap8_code(int is_signed, float x)
{
    pthread_once(&lut_once, build_luts);
    return (is_signed ? lut_signed : lut_unsigned)[grid_index(x)];
}

/* x (len) -> codes q and the block's absmax */
static void quantize_block(const uint8_t *lut, const float *x, uint8_t *q, float *absmax, int len)
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
        q[i] = lut[grid_index(x[i] * inv)];
}

struct step_consts {
    float fb1, fb2, omb1, omb2, fc2, feps, decay, ss;
    int decays;
};

/* One block: dequantize, the Adam step in float32 (torch's op order), requantize. */
static void step_block(const struct step_consts *k, float *p, const float *g, uint8_t *m,
                       uint8_t *v, float *am, float *av, int len, float gscale)
{
    float s1[BLOCK], s2[BLOCK];
    for (int i = 0; i < len; i++) {
        float mi = swift_qmap8_signed[m[i]] * *am;
        float vi = swift_qmap8_unsigned[v[i]] * *av;
        float gi = g[i] * gscale;
        mi = fmaf(gi, k->omb1, mi * k->fb1);      /* mul_(beta1).add_(grad, alpha=1-beta1) */
        vi = fmaf(k->omb2 * gi, gi, vi * k->fb2); /* mul_(beta2).addcmul_(grad, grad, 1-beta2) */
        float denom = sqrtf(vi) / k->fc2 + k->feps;
        float pi = p[i];
        if (k->decays)
            pi *= k->decay;
        p[i] = pi + k->ss * mi / denom; /* addcdiv_: self + value * t1 / t2 */
        s1[i] = mi;
        s2[i] = vi;
    }
    quantize_block(lut_signed, s1, m, am, len);
    quantize_block(lut_unsigned, s2, v, av, len);
}

void swift_cpu_adamw8bit(float *p, const float *g, uint8_t *m, uint8_t *v, float *am, float *av,
                         size_t n, double lr, double b1, double b2, double eps, double wd,
                         long step, float gscale)
{
    pthread_once(&lut_once, build_luts);
    /* the Python scalars of _optimizer_update_8bit_blockwise_cpu, rounded to float by torch */
    double c1 = 1.0 - pow(b1, (double)step), c2 = sqrt(1.0 - pow(b2, (double)step));
    const struct step_consts k = {(float)b1,
                                  (float)b2,
                                  (float)(1.0 - b1),
                                  (float)(1.0 - b2),
                                  (float)c2,
                                  (float)eps,
                                  (float)(1.0 - lr * wd),
                                  (float)(-lr / c1),
                                  wd > 0.0};
    size_t nb = (n + BLOCK - 1) / BLOCK;
#pragma omp parallel for schedule(static)
    for (size_t b = 0; b < nb; b++) {
        size_t o = b * BLOCK;
        int len = (int)(n - o < BLOCK ? n - o : BLOCK);
        step_block(&k, p + o, g + o, m + o, v + o, &am[b], &av[b], len, gscale);
    }
}
