/* bitsandbytes' 4-bit format on the CPU (kernels/quant4.h): quantize, dequantize, and the fused
 * dequant-matmul ops of kernels/ops.h (matmul4_fwd, matmul4_bwd). */
#include "kernels/quant4.h"
#include "kernels/cpu/cpu.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

#include <cblas.h>
#undef I /* complex.h, pulled in by cblas.h */

#include "kernels/banned.h"

/* bitsandbytes.functional.get_4bit_type("nf4") / ("fp4"), float32 */
const float swift_q4_nf4[16] = {-0x1.0000000000000p+0f,
                                -0x1.6473620000000p-1f,
                                -0x1.0cd6600000000p-1f,
                                -0x1.9465400000000p-2f,
                                -0x1.23449a0000000p-2f,
                                -0x1.7a6a7e0000000p-3f,
                                -0x1.74f0e20000000p-4f,
                                0.0f,
                                0x1.45f5fe0000000p-4f,
                                0x1.4995c60000000p-3f,
                                0x1.f809ba0000000p-3f,
                                0x1.5a06740000000p-2f,
                                0x1.c349700000000p-2f,
                                0x1.200f560000000p-1f,
                                0x1.7227660000000p-1f,
                                0x1.0000000000000p+0f};
const float swift_q4_fp4[16] = {0.0f,
                                0x1.5555560000000p-8f,
                                0x1.5555560000000p-1f,
                                0x1.0000000000000p+0f,
                                0x1.5555560000000p-2f,
                                0x1.0000000000000p-1f,
                                0x1.5555560000000p-3f,
                                0x1.0000000000000p-2f,
                                0.0f,
                                -0x1.5555560000000p-8f,
                                -0x1.5555560000000p-1f,
                                -0x1.0000000000000p+0f,
                                -0x1.5555560000000p-2f,
                                -0x1.0000000000000p-1f,
                                -0x1.5555560000000p-3f,
                                -0x1.0000000000000p-2f};
/* bitsandbytes.functional.create_dynamic_map(signed=True), float32 */
const float swift_q4_dynamic[256] = {-0x1.fc66660000000p-1f,  -0x1.f533340000000p-1f,
                                     -0x1.ee00000000000p-1f,  -0x1.e6cccc0000000p-1f,
                                     -0x1.df999a0000000p-1f,  -0x1.d866660000000p-1f,
                                     -0x1.d133340000000p-1f,  -0x1.ca00000000000p-1f,
                                     -0x1.c2cccc0000000p-1f,  -0x1.bb999a0000000p-1f,
                                     -0x1.b466660000000p-1f,  -0x1.ad33340000000p-1f,
                                     -0x1.a600000000000p-1f,  -0x1.9ecccc0000000p-1f,
                                     -0x1.97999a0000000p-1f,  -0x1.9066660000000p-1f,
                                     -0x1.8933340000000p-1f,  -0x1.8200000000000p-1f,
                                     -0x1.7acccc0000000p-1f,  -0x1.73999a0000000p-1f,
                                     -0x1.6c66680000000p-1f,  -0x1.6533340000000p-1f,
                                     -0x1.5e00000000000p-1f,  -0x1.56cccc0000000p-1f,
                                     -0x1.4f999a0000000p-1f,  -0x1.4866680000000p-1f,
                                     -0x1.4133340000000p-1f,  -0x1.3a00000000000p-1f,
                                     -0x1.32cccc0000000p-1f,  -0x1.2b999a0000000p-1f,
                                     -0x1.2466680000000p-1f,  -0x1.1d33340000000p-1f,
                                     -0x1.1600000000000p-1f,  -0x1.0ecccc0000000p-1f,
                                     -0x1.0799980000000p-1f,  -0x1.0066660000000p-1f,
                                     -0x1.f266640000000p-2f,  -0x1.e400000000000p-2f,
                                     -0x1.d599980000000p-2f,  -0x1.c733340000000p-2f,
                                     -0x1.b8cccc0000000p-2f,  -0x1.aa66660000000p-2f,
                                     -0x1.9c00000000000p-2f,  -0x1.8d99980000000p-2f,
                                     -0x1.7f33340000000p-2f,  -0x1.70cccc0000000p-2f,
                                     -0x1.6266660000000p-2f,  -0x1.5400000000000p-2f,
                                     -0x1.4599980000000p-2f,  -0x1.3733340000000p-2f,
                                     -0x1.28cccc0000000p-2f,  -0x1.1a66680000000p-2f,
                                     -0x1.0c00000000000p-2f,  -0x1.fb33320000000p-3f,
                                     -0x1.de66660000000p-3f,  -0x1.c1999a0000000p-3f,
                                     -0x1.a4cccc0000000p-3f,  -0x1.8800000000000p-3f,
                                     -0x1.6b33340000000p-3f,  -0x1.4e66660000000p-3f,
                                     -0x1.31999a0000000p-3f,  -0x1.14cccc0000000p-3f,
                                     -0x1.f000000000000p-4f,  -0x1.b666680000000p-4f,
                                     -0x1.93d70a0000000p-4f,  -0x1.8851ee0000000p-4f,
                                     -0x1.7cccce0000000p-4f,  -0x1.7147ae0000000p-4f,
                                     -0x1.65c2900000000p-4f,  -0x1.5a3d700000000p-4f,
                                     -0x1.4eb8540000000p-4f,  -0x1.4333340000000p-4f,
                                     -0x1.37ae140000000p-4f,  -0x1.2c28f60000000p-4f,
                                     -0x1.20a3d60000000p-4f,  -0x1.151eba0000000p-4f,
                                     -0x1.09999a0000000p-4f,  -0x1.fc28f60000000p-5f,
                                     -0x1.e51eba0000000p-5f,  -0x1.ce147a0000000p-5f,
                                     -0x1.b70a3e0000000p-5f,  -0x1.a000000000000p-5f,
                                     -0x1.88f5c20000000p-5f,  -0x1.71eb860000000p-5f,
                                     -0x1.5ae1460000000p-5f,  -0x1.43d70a0000000p-5f,
                                     -0x1.2cccce0000000p-5f,  -0x1.15c2900000000p-5f,
                                     -0x1.fd70a40000000p-6f,  -0x1.cf5c2a0000000p-6f,
                                     -0x1.a147ae0000000p-6f,  -0x1.7333340000000p-6f,
                                     -0x1.451eba0000000p-6f,  -0x1.170a3e0000000p-6f,
                                     -0x1.d1eb860000000p-7f,  -0x1.75c2900000000p-7f,
                                     -0x1.3e76c80000000p-7f,  -0x1.2c08300000000p-7f,
                                     -0x1.19999a0000000p-7f,  -0x1.072b020000000p-7f,
                                     -0x1.e978d40000000p-8f,  -0x1.c49ba60000000p-8f,
                                     -0x1.9fbe760000000p-8f,  -0x1.7ae1480000000p-8f,
                                     -0x1.56041a0000000p-8f,  -0x1.3126e80000000p-8f,
                                     -0x1.0c49ba0000000p-8f,  -0x1.ced9140000000p-9f,
                                     -0x1.851eb80000000p-9f,  -0x1.3b645a0000000p-9f,
                                     -0x1.e353f80000000p-10f, -0x1.4fdf3a0000000p-10f,
                                     -0x1.eecbfe0000000p-11f, -0x1.b3d07c0000000p-11f,
                                     -0x1.78d5000000000p-11f, -0x1.3dd9820000000p-11f,
                                     -0x1.02de020000000p-11f, -0x1.8fc5060000000p-12f,
                                     -0x1.19ce0a0000000p-12f, -0x1.47ae160000000p-13f,
                                     -0x1.743e960000000p-14f, -0x1.15df660000000p-14f,
                                     -0x1.6f00680000000p-15f, -0x1.64840c0000000p-16f,
                                     -0x1.040bfe0000000p-17f, -0x1.b435280000000p-19f,
                                     -0x1.27476e0000000p-21f, 0.0f,
                                     0x1.27476e0000000p-21f,  0x1.b435280000000p-19f,
                                     0x1.040bfe0000000p-17f,  0x1.64840c0000000p-16f,
                                     0x1.6f00680000000p-15f,  0x1.15df660000000p-14f,
                                     0x1.743e960000000p-14f,  0x1.47ae160000000p-13f,
                                     0x1.19ce0a0000000p-12f,  0x1.8fc5060000000p-12f,
                                     0x1.02de020000000p-11f,  0x1.3dd9820000000p-11f,
                                     0x1.78d5000000000p-11f,  0x1.b3d07c0000000p-11f,
                                     0x1.eecbfe0000000p-11f,  0x1.4fdf3a0000000p-10f,
                                     0x1.e353f80000000p-10f,  0x1.3b645a0000000p-9f,
                                     0x1.851eb80000000p-9f,   0x1.ced9140000000p-9f,
                                     0x1.0c49ba0000000p-8f,   0x1.3126e80000000p-8f,
                                     0x1.56041a0000000p-8f,   0x1.7ae1480000000p-8f,
                                     0x1.9fbe760000000p-8f,   0x1.c49ba60000000p-8f,
                                     0x1.e978d40000000p-8f,   0x1.072b020000000p-7f,
                                     0x1.19999a0000000p-7f,   0x1.2c08300000000p-7f,
                                     0x1.3e76c80000000p-7f,   0x1.75c2900000000p-7f,
                                     0x1.d1eb860000000p-7f,   0x1.170a3e0000000p-6f,
                                     0x1.451eba0000000p-6f,   0x1.7333340000000p-6f,
                                     0x1.a147ae0000000p-6f,   0x1.cf5c2a0000000p-6f,
                                     0x1.fd70a40000000p-6f,   0x1.15c2900000000p-5f,
                                     0x1.2cccce0000000p-5f,   0x1.43d70a0000000p-5f,
                                     0x1.5ae1460000000p-5f,   0x1.71eb860000000p-5f,
                                     0x1.88f5c20000000p-5f,   0x1.a000000000000p-5f,
                                     0x1.b70a3e0000000p-5f,   0x1.ce147a0000000p-5f,
                                     0x1.e51eba0000000p-5f,   0x1.fc28f60000000p-5f,
                                     0x1.09999a0000000p-4f,   0x1.151eba0000000p-4f,
                                     0x1.20a3d60000000p-4f,   0x1.2c28f60000000p-4f,
                                     0x1.37ae140000000p-4f,   0x1.4333340000000p-4f,
                                     0x1.4eb8540000000p-4f,   0x1.5a3d700000000p-4f,
                                     0x1.65c2900000000p-4f,   0x1.7147ae0000000p-4f,
                                     0x1.7cccce0000000p-4f,   0x1.8851ee0000000p-4f,
                                     0x1.93d70a0000000p-4f,   0x1.b666680000000p-4f,
                                     0x1.f000000000000p-4f,   0x1.14cccc0000000p-3f,
                                     0x1.31999a0000000p-3f,   0x1.4e66660000000p-3f,
                                     0x1.6b33340000000p-3f,   0x1.8800000000000p-3f,
                                     0x1.a4cccc0000000p-3f,   0x1.c1999a0000000p-3f,
                                     0x1.de66660000000p-3f,   0x1.fb33320000000p-3f,
                                     0x1.0c00000000000p-2f,   0x1.1a66680000000p-2f,
                                     0x1.28cccc0000000p-2f,   0x1.3733340000000p-2f,
                                     0x1.4599980000000p-2f,   0x1.5400000000000p-2f,
                                     0x1.6266660000000p-2f,   0x1.70cccc0000000p-2f,
                                     0x1.7f33340000000p-2f,   0x1.8d99980000000p-2f,
                                     0x1.9c00000000000p-2f,   0x1.aa66660000000p-2f,
                                     0x1.b8cccc0000000p-2f,   0x1.c733340000000p-2f,
                                     0x1.d599980000000p-2f,   0x1.e400000000000p-2f,
                                     0x1.f266640000000p-2f,   0x1.0066660000000p-1f,
                                     0x1.0799980000000p-1f,   0x1.0ecccc0000000p-1f,
                                     0x1.1600000000000p-1f,   0x1.1d33340000000p-1f,
                                     0x1.2466680000000p-1f,   0x1.2b999a0000000p-1f,
                                     0x1.32cccc0000000p-1f,   0x1.3a00000000000p-1f,
                                     0x1.4133340000000p-1f,   0x1.4866680000000p-1f,
                                     0x1.4f999a0000000p-1f,   0x1.56cccc0000000p-1f,
                                     0x1.5e00000000000p-1f,   0x1.6533340000000p-1f,
                                     0x1.6c66680000000p-1f,   0x1.73999a0000000p-1f,
                                     0x1.7acccc0000000p-1f,   0x1.8200000000000p-1f,
                                     0x1.8933340000000p-1f,   0x1.9066660000000p-1f,
                                     0x1.97999a0000000p-1f,   0x1.9ecccc0000000p-1f,
                                     0x1.a600000000000p-1f,   0x1.ad33340000000p-1f,
                                     0x1.b466660000000p-1f,   0x1.bb999a0000000p-1f,
                                     0x1.c2cccc0000000p-1f,   0x1.ca00000000000p-1f,
                                     0x1.d133340000000p-1f,   0x1.d866660000000p-1f,
                                     0x1.df999a0000000p-1f,   0x1.e6cccc0000000p-1f,
                                     0x1.ee00000000000p-1f,   0x1.f533340000000p-1f,
                                     0x1.fc66660000000p-1f,   0x1.0000000000000p+0f};

/* FP4's codes in ascending value (torch.argsort of the table, the two zeros in index order):
 * bitsandbytes quantizes with torch.bucketize over the sorted table and maps back */
static const uint8_t fp4_order[16] = {11, 10, 13, 12, 15, 14, 9, 0, 8, 1, 6, 7, 4, 5, 2, 3};

static const float *code_table(int type)
{
    return type == SWIFT_Q4_FP4 ? swift_q4_fp4 : swift_q4_nf4;
}

/* The code of x in [-1, 1]: the number of midpoints of the sorted table strictly below x
 * (torch.bucketize, right=False), mapped back through the sort order. */
static uint8_t code4(int type, const float *mid, float x)
{
    int k = 0;
    while (k < 15 && mid[k] < x)
        k++;
    return type == SWIFT_Q4_FP4 ? fp4_order[k] : (uint8_t)k;
}

/* The nearest entry of the dynamic map (ties to the smaller), as bitsandbytes' CPU
 * quantize_block: the binary search's left neighbour, then the right one if strictly nearer. */
static uint8_t code8(float x)
{
    int lo = 0, hi = 255; /* largest i with dynamic[i] <= x, 0 below the table */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (swift_q4_dynamic[mid] <= x)
            lo = mid;
        else
            hi = mid - 1;
    }
    if (lo < 255 && fabsf(x - swift_q4_dynamic[lo + 1]) < fabsf(x - swift_q4_dynamic[lo]))
        lo++;
    return (uint8_t)lo;
}

static void quantize_absmax(struct swift_q4 *q, const float *absmax, size_t nb)
{
    double s = 0; /* torch's float mean: the sum rounded to float, then divided */
    for (size_t b = 0; b < nb; b++)
        s += absmax[b];
    q->offset = (float)s / (float)nb;
    for (size_t b0 = 0; b0 < nb; b0 += SWIFT_Q4_BLOCK2) {
        size_t b1 = b0 + SWIFT_Q4_BLOCK2 < nb ? b0 + SWIFT_Q4_BLOCK2 : nb;
        float am = -FLT_MAX;
        for (size_t b = b0; b < b1; b++)
            am = fmaxf(am, fabsf(absmax[b] - q->offset));
        q->absmax2[b0 / SWIFT_Q4_BLOCK2] = am;
        for (size_t b = b0; b < b1; b++)
            q->qabsmax[b] = am > 0 ? code8((absmax[b] - q->offset) / am) : 127;
    }
}

int swift_q4_quantize(struct swift_q4 *q, const float *w)
{
    const float *code = code_table(q->type);
    float sorted[16], mid[15];
    for (int k = 0; k < 16; k++)
        sorted[k] = code[q->type == SWIFT_Q4_FP4 ? fp4_order[k] : k];
    for (int k = 0; k < 15; k++)
        mid[k] = (sorted[k] + sorted[k + 1]) / 2.0f;
    size_t n = q->n, nb = swift_q4_nblocks(n);
    float *absmax = q->dq ? malloc(nb * sizeof(float)) : q->absmax;
    if (!absmax)
        return -1;
#pragma omp parallel for schedule(static)
    for (size_t b = 0; b < nb; b++) {
        size_t e0 = b * SWIFT_Q4_BLOCK, e1 = e0 + SWIFT_Q4_BLOCK < n ? e0 + SWIFT_Q4_BLOCK : n;
        float am = 0;
        for (size_t e = e0; e < e1; e++)
            am = fmaxf(am, fabsf(w[e]));
        absmax[b] = am;
        float c = am > 1e-38f ? am : 1e-38f, inv = 1.0f / c;
        int ragged = e1 - e0 < SWIFT_Q4_BLOCK;
        for (size_t e = e0; e < e1; e += 2) { /* blocks are even: a byte never straddles two */
            uint8_t hl[2];
            for (int j = 0; j < 2; j++) {
                float x = e + j < e1 ? (ragged ? w[e + j] / c : w[e + j] * inv) : 0.0f;
                x = x < -1.0f ? -1.0f : x > 1.0f ? 1.0f : x;
                hl[j] = code4(q->type, mid, x);
            }
            q->codes[e / 2] = (uint8_t)(hl[0] << 4 | hl[1]);
        }
    }
    if (q->dq) {
        quantize_absmax(q, absmax, nb);
        free(absmax);
    }
    return 0;
}

float swift_q4_scale(const struct swift_q4 *q, size_t b)
{
    if (!q->dq)
        return q->absmax[b];
    float s = swift_q4_dynamic[q->qabsmax[b]] * q->absmax2[b / SWIFT_Q4_BLOCK2];
    return s + q->offset;
}

void swift_q4_dequant(const struct swift_q4 *q, size_t e0, size_t e1, float *out)
{
    const float *code = code_table(q->type);
    size_t e = e0;
    while (e < e1) {
        size_t b = e / SWIFT_Q4_BLOCK, end = (b + 1) * SWIFT_Q4_BLOCK;
        if (end > e1)
            end = e1;
        float s = swift_q4_scale(q, b);
        if (e & 1) { /* a range starting at a low nibble */
            out[e - e0] = code[q->codes[e / 2] & 15] * s;
            e++;
        }
        for (; e + 1 < end; e += 2) { /* whole bytes: high nibble, then low */
            uint8_t byte = q->codes[e / 2];
            out[e - e0] = code[byte >> 4] * s;
            out[e + 1 - e0] = code[byte & 15] * s;
        }
        if (e < end) { /* a range ending at a high nibble */
            out[e - e0] = code[q->codes[e / 2] >> 4] * s;
            e++;
        }
    }
}

/* rows [o0, o0+R) of w (O,I) into tile (R,I) (swift_cpu_deq_rows, for matmul_deq.c) */
static void dequant_rows(const void *wv, int o0, int R, int In, float *tile)
{
    const struct swift_q4 *w = wv;
#pragma omp parallel for schedule(static)
    for (int r = 0; r < R; r++) {
        size_t e0 = (size_t)(o0 + r) * In;
        swift_q4_dequant(w, e0, e0 + (size_t)In, tile + (size_t)r * In);
    }
}

/* out (N,O) = in (N,I) @ dequant(w)^T + beta * out, then + bias (O) on every row */
void swift_cpu_matmul4_fwd(float *out, const float *in, const struct swift_q4 *w, const float *bias,
                           int N, int In, int O, float beta)
{
    swift_cpu_matmul_deq_fwd(out, in, w, dequant_rows, bias, N, In, O, beta);
}

/* din (N,I) = dout (N,O) @ dequant(w) (O,I) + din_beta * din */
void swift_cpu_matmul4_bwd(float *din, const float *dout, const struct swift_q4 *w, int N, int In,
                           int O, float din_beta)
{
    swift_cpu_matmul_deq_bwd(din, dout, w, dequant_rows, N, In, O, din_beta);
}
