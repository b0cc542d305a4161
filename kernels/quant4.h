/*
 * quant4 — bitsandbytes' 4-bit weight format (NF4 and FP4, blocks of 64, optional double
 * quantization of the block scales), the contract between lib/model (which quantizes a frozen
 * base weight at load) and the backends' fused dequant-matmul (kernels/ops.h matmul4_fwd and
 * matmul4_bwd). It matches bitsandbytes 0.50 `quantize_4bit` / `dequantize_4bit` on the CPU bit
 * for bit (tests/ref/gen_nf4_fixtures.py):
 *
 * - the tensor is flattened row-major and cut into blocks of SWIFT_Q4_BLOCK (64) elements, the
 *   last one ragged; absmax[b] = max |w| over block b (float32);
 * - w / absmax (full blocks: w * (1/absmax); the ragged block: w / absmax; absmax clamped to
 *   1e-38, the result to [-1, 1]) is mapped to the code whose value is nearest, a tie going to
 *   the smaller value (torch.bucketize on the midpoints of the sorted code table);
 * - two codes per byte: element 2k in the high nibble of byte k, element 2k+1 in the low one
 *   (an odd tail is padded with the code of 0);
 * - double quantization (compress_statistics): offset = mean of the absmax, and absmax - offset
 *   quantized with the signed 8-bit dynamic map in blocks of SWIFT_Q4_BLOCK2 (256) with their own
 *   float32 absmax2 (nearest code, ties to the smaller);
 * - dequantization: w = code[q] * absmax[b], with absmax[b] = dynamic[qabsmax[b]] *
 *   absmax2[b / 256] + offset under double quantization (float32 at every step).
 *
 * Storage per element: 4 bits + 32/64 (absmax) or 4 + 8/64 + 32/16384 bits with double
 * quantization (0.258 of bf16).
 *
 * Nothing here allocates backend memory: swift_q4_quantize and swift_q4_dequant work on host
 * buffers; lib/model uploads the four arrays and hands the backend a struct whose pointers are
 * backend memory.
 */
#ifndef SWIFT_KERNELS_QUANT4_H
#define SWIFT_KERNELS_QUANT4_H

#include <stddef.h>
#include <stdint.h>

#define SWIFT_Q4_BLOCK 64
#define SWIFT_Q4_BLOCK2 256

enum { SWIFT_Q4_NF4 = 0, SWIFT_Q4_FP4 = 1 };

/* One 4-bit tensor of n elements. The arrays are host memory for the functions below and
 * backend memory when the struct is passed to an op. */
struct swift_q4 {
    int type;         /* SWIFT_Q4_NF4 or SWIFT_Q4_FP4 */
    int dq;           /* double quantization of the absmax */
    size_t n;         /* elements (out*in of a linear) */
    uint8_t *codes;   /* (n+1)/2 bytes, bitsandbytes' packing */
    float *absmax;    /* nblocks floats; NULL with dq */
    uint8_t *qabsmax; /* nblocks 8-bit codes of absmax - offset (dq) */
    float *absmax2;   /* nblocks2 floats (dq) */
    float offset;     /* mean of the absmax (dq) */
};

/* The code tables: bitsandbytes' NF4 and FP4 (16 floats) and the signed dynamic map (256). */
extern const float swift_q4_nf4[16];
extern const float swift_q4_fp4[16];
extern const float swift_q4_dynamic[256];

/* Blocks of 64 (absmax count) and of 256 absmax (absmax2 count) for n elements. */
static inline size_t swift_q4_nblocks(size_t n)
{
    return (n + SWIFT_Q4_BLOCK - 1) / SWIFT_Q4_BLOCK;
}
static inline size_t swift_q4_nblocks2(size_t n)
{
    return (swift_q4_nblocks(n) + SWIFT_Q4_BLOCK2 - 1) / SWIFT_Q4_BLOCK2;
}
/* Bytes the format stores for n elements (codes + scales). */
static inline size_t swift_q4_bytes(size_t n, int dq)
{
    size_t nb = swift_q4_nblocks(n);
    return (n + 1) / 2 + (dq ? nb + 4 * swift_q4_nblocks2(n) + 4 : 4 * nb);
}

/* Quantize w (n floats, host) into q, whose type, dq and n are set and whose arrays (host) have
 * the sizes above. Returns 0, or -1 when out of memory (a scratch of nblocks floats). */
int swift_q4_quantize(struct swift_q4 *q, const float *w);
/* The scale of block b (absmax, or its double-quantized value). */
float swift_q4_scale(const struct swift_q4 *q, size_t b);
/* Dequantize elements [e0, e1) of q (host arrays) into out (e1 - e0 floats). */
void swift_q4_dequant(const struct swift_q4 *q, size_t e0, size_t e1, float *out);

#endif
