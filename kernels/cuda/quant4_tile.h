/* quant4_tile — the index arithmetic of QLoRA's fused 4-bit dequant-matmul kernel
 * (kernels/cuda/quant4.cu), as plain inline C so the same code runs in the kernel and in a CPU
 * unit test (tests/unit/test_quant4_tile.c replays the kernel's tiles with it against the CPU
 * op): which element of the 4-bit weight a tile slot holds, its dequantized value, and the
 * write of one output.
 *
 * The kernel computes C (N,NC) = A (N,K) @ W' + beta * C [+ bias (NC)], W' the dequantized
 * weight w (O,I) seen as (K,NC): forward (bwd 0): K = I, NC = O, W'[k][j] = w[j][k]; backward
 * (bwd 1): K = O, NC = I, W'[k][j] = w[k][j]. A thread block of Q4_THREADS threads owns
 * Q4_TM rows of A and Q4_TC columns of C and walks K in steps of Q4_TK: it loads the A tile and
 * dequantizes the W' tile into shared memory (slot idx of the Q4_TM x Q4_TK or Q4_TK x Q4_TC
 * tile: q4_tile_a, q4_tile_w), then each thread (tx, ty) = (t % 16, t / 16) accumulates the 4 x
 * 4 outputs rows ty + 16 i, columns tx + 16 j. */
#ifndef SWIFT_QUANT4_TILE_H
#define SWIFT_QUANT4_TILE_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/quant4.h"

#ifdef __CUDACC__
#define Q4_HD __host__ __device__
#else
#define Q4_HD
#endif
#ifdef __CUDA_ARCH__
/* on the device, round-to-nearest operations that nvcc cannot fuse: the CPU's, one by one */
#define Q4_MUL(a, b) __fmul_rn(a, b)
#define Q4_ADD(a, b) __fadd_rn(a, b)
#else
#define Q4_MUL(a, b) ((a) * (b))
#define Q4_ADD(a, b) ((a) + (b))
#endif

enum { Q4_TM = 64, Q4_TC = 64, Q4_TK = 16, Q4_THREADS = 256 };

/* Slot idx (0 .. Q4_TM*Q4_TK-1) of the A tile: row *r, k offset *c; k runs fastest, so
 * consecutive threads read consecutive floats. */
Q4_HD static inline void q4_tile_a(int idx, int *r, int *c)
{
    *r = idx / Q4_TK;
    *c = idx % Q4_TK;
}

/* Slot idx (0 .. Q4_TC*Q4_TK-1) of the W' tile: column *r of C, k offset *c; the order follows
 * w's rows in memory (k fastest in the forward, the column in the backward). */
Q4_HD static inline void q4_tile_w(int bwd, int idx, int *r, int *c)
{
    *r = bwd ? idx % Q4_TC : idx / Q4_TK;
    *c = bwd ? idx / Q4_TC : idx % Q4_TK;
}

/* The flat index in w (O,I), In = I, of W'[k][j]. */
Q4_HD static inline size_t q4_w_index(int bwd, int j, int k, int In)
{
    return bwd ? (size_t)k * (size_t)In + (size_t)j : (size_t)j * (size_t)In + (size_t)k;
}

/* Element e of w dequantized, as swift_q4_dequant computes it (code: the type's 16 values, dyn:
 * the signed dynamic map; q's arrays readable where this runs). */
Q4_HD static inline float q4_elem(const struct swift_q4 *q, const float *code, const float *dyn,
                                  size_t e)
{
    uint8_t byte = q->codes[e >> 1];
    int c = (e & 1) ? (byte & 15) : (byte >> 4);
    size_t b = e / SWIFT_Q4_BLOCK;
    float s = q->dq ? Q4_ADD(Q4_MUL(dyn[q->qabsmax[b]], q->absmax2[b / SWIFT_Q4_BLOCK2]), q->offset)
                    : q->absmax[b];
    return Q4_MUL(code[c], s);
}

/* One output: *c = acc + beta * *c (beta 0: *c is not read, BLAS's rule) [+ bias]. */
Q4_HD static inline void q4_store(float *c, float acc, float beta, const float *bias, int col)
{
    float v = acc;
    if (beta != 0.0f)
        v += beta * *c;
    if (bias)
        v += bias[col];
    *c = v;
}

#endif
