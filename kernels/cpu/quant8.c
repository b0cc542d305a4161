/* bitsandbytes' 8-bit weight format on the CPU (kernels/quant8.h): quantize, dequantize, and the
 * fused dequant-matmul ops of kernels/ops.h (matmul8_fwd, matmul8_bwd). */
#include "kernels/quant8.h"
#include "kernels/cpu/cpu.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#undef I /* complex.h, pulled in by cblas.h */

#include "kernels/banned.h"

float swift_q8_f16_round(float x)
{
    float a = fabsf(x);
    if (!(a < 65520.0f)) /* rounds to infinity in float16 (or NaN stays NaN) */
        return a != a ? x : copysignf(INFINITY, x);
    if (a < 0x1p-14f) /* float16 subnormals: multiples of 2^-24, exact after scaling */
        return rintf(x * 0x1p24f) * 0x1p-24f;
    uint32_t u;
    memcpy(&u, &x, 4);
    u += 0xFFFu + ((u >> 13) & 1u); /* 10 mantissa bits, ties to even */
    u &= ~0x1FFFu;
    memcpy(&x, &u, 4);
    return x;
}

void swift_q8_quantize(struct swift_q8 *q, const float *w)
{
    int C = q->cols;
#pragma omp parallel for schedule(static)
    for (int r = 0; r < q->rows; r++) {
        const float *row = w + (size_t)r * C;
        float am = 0.0f;
        for (int c = 0; c < C; c++)
            am = fmaxf(am, fabsf(swift_q8_f16_round(row[c])));
        q->scb[r] = am;
        /* torch's 127.0 / row_stats is reciprocal(row_stats) * 127 (Tensor.__rdiv__) */
        float s = (1.0f / am) * 127.0f; /* inf for a zero row: its codes are 0 */
        int8_t *cb = q->cb + (size_t)r * C;
        for (int c = 0; c < C; c++)
            cb[c] = am > 0.0f ? (int8_t)rintf(swift_q8_f16_round(row[c]) * s) : 0;
    }
}

void swift_q8_dequant(const struct swift_q8 *q, int r0, int r1, float *out)
{
    int C = q->cols;
    for (int r = r0; r < r1; r++) {
        const int8_t *cb = q->cb + (size_t)r * C;
        float s = q->scb[r], *o = out + (size_t)(r - r0) * C;
        for (int c = 0; c < C; c++)
            o[c] = ((float)cb[c] * s) * SWIFT_Q8_INV127;
    }
}

/* rows [o0, o0+R) of w (O,I) into tile (R,I) (swift_cpu_deq_rows, for matmul_deq.c) */
static void dequant_rows(const void *wv, int o0, int R, int In, float *tile)
{
    const struct swift_q8 *w = wv;
    (void)In; /* w->cols */
#pragma omp parallel for schedule(static)
    for (int r = 0; r < R; r++)
        swift_q8_dequant(w, o0 + r, o0 + r + 1, tile + (size_t)r * w->cols);
}

/* out (N,O) = in (N,I) @ dequant(w)^T + beta * out, then + bias (O) on every row */
void swift_cpu_matmul8_fwd(float *out, const float *in, const struct swift_q8 *w, const float *bias,
                           int N, int In, int O, float beta)
{
    swift_cpu_matmul_deq_fwd(out, in, w, dequant_rows, bias, N, In, O, beta);
}

/* din (N,I) = dout (N,O) @ dequant(w) (O,I) + din_beta * din */
void swift_cpu_matmul8_bwd(float *din, const float *dout, const struct swift_q8 *w, int N, int In,
                           int O, float din_beta)
{
    swift_cpu_matmul_deq_bwd(din, dout, w, dequant_rows, N, In, O, din_beta);
}
