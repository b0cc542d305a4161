/*
 * quant8 — bitsandbytes' 8-bit weight format (Int8Params: LLM.int8's weights, without its
 * outlier decomposition), the contract between lib/model (which quantizes a frozen base weight at
 * load, swift-train --quant-bits 8) and the backends' fused dequant-matmul (kernels/ops.h
 * matmul8_fwd and matmul8_bwd). It matches bitsandbytes 0.50 `Int8Params` on the CPU bit for bit
 * (tests/ref/gen_int8_fixtures.py):
 *
 * - the weight (rows, cols) = (out, in) is first rounded to float16 (Int8Params quantizes
 *   `data.to(float16)`), then per row: SCB[r] = max |w| over the row (float32 of the float16);
 * - CB[r][c] = round-half-to-even(w * ((1 / SCB[r]) * 127)) as int8, float32 at each step
 *   (torch computes 127.0 / SCB as reciprocal then product; an all-zero row gives codes 0);
 * - dequantization (int8_vectorwise_dequant): w = (CB * SCB[r]) * (float)(1/127), float32 at each
 *   step.
 *
 * Storage per element: 8 bits + 32/in bits (about 0.5 of bf16). No outlier columns (LLM.int8's
 * threshold): the frozen base is weight-only quantized, the activations stay float32.
 *
 * Nothing here allocates backend memory: swift_q8_quantize and swift_q8_dequant work on host
 * buffers; lib/model uploads the two arrays and hands the backend a struct whose pointers are
 * backend memory.
 */
#ifndef SWIFT_KERNELS_QUANT8_H
#define SWIFT_KERNELS_QUANT8_H

#include <stddef.h>
#include <stdint.h>

/* One 8-bit weight of rows x cols. The arrays are host memory for the functions below and
 * backend memory when the struct is passed to an op. */
struct swift_q8 {
    int rows, cols; /* out, in of a linear */
    int8_t *cb;     /* rows*cols codes, row-major (bitsandbytes' CB) */
    float *scb;     /* rows absmax (bitsandbytes' SCB) */
};

/* bitsandbytes' 1/127 as its dequantizer multiplies (7.874015718698502e-3 in float32) */
#define SWIFT_Q8_INV127 7.874015718698502e-3f

/* Bytes the format stores (codes + scales). */
static inline size_t swift_q8_bytes(int rows, int cols)
{
    return (size_t)rows * (size_t)cols + 4 * (size_t)rows;
}

/* Quantize w (rows*cols floats, host) into q, whose rows and cols are set and whose arrays (host)
 * have the sizes above. */
void swift_q8_quantize(struct swift_q8 *q, const float *w);
/* Dequantize rows [r0, r1) of q (host arrays) into out ((r1 - r0) * cols floats). */
void swift_q8_dequant(const struct swift_q8 *q, int r0, int r1, float *out);
/* x rounded to the nearest float16 (ties to even) and back: the Int8Params input. */
float swift_q8_f16_round(float x);

#endif
