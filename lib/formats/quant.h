/*
 * quant — ggml tensor encodings: F32 → F16/BF16 and the block quantizations Q8_0, Q4_0, Q5_0,
 * Q4_K and Q6_K, bit-exact with ggml-common.h's block layouts, and their dequantization.
 *
 * The quantizers follow ggml-quants.c's reference functions (quantize_row_*_ref): Q8_0, Q4_0 and
 * Q5_0 give the same bytes as ggml and as PyPI gguf's quants module; Q4_K uses ggml's
 * make_qkx2_quants search and Q6_K make_qx_quants, transcribed from ggml-quants.c (no
 * importance matrix). Halves are IEEE fp16 with round-to-nearest-even (as F16C and numpy);
 * BF16 is ggml_compute_fp32_to_bf16 (NaN made quiet, round-to-nearest-even).
 *
 *     size_t n = swift_ggml_row_size(SWIFT_GGML_Q8_0, ne0) * rows;   // lib/formats/gguf.h
 *     void *q = swift_xmalloc(n);                                     // lib/core/alloc.h
 *     swift_quantize(SWIFT_GGML_Q8_0, x, q, rows, ne0);
 *     swift_dequantize(SWIFT_GGML_Q8_0, q, y, rows * ne0);
 *
 * Rows are processed in parallel with OpenMP.
 */
#ifndef SWIFT_QUANT_H
#define SWIFT_QUANT_H

#include <stddef.h>
#include <stdint.h>

uint16_t swift_fp32_to_fp16(float f);
float swift_fp16_to_fp32(uint16_t h);
uint16_t swift_fp32_to_bf16(float f);
float swift_bf16_to_fp32(uint16_t h);

/* Nonzero when `type` can be produced by swift_quantize (F32, F16, BF16, Q8_0, Q4_0, Q5_0,
 * Q4_K, Q6_K). */
int swift_quant_supported(uint32_t type);

/*
 * Encode rows × ne0 floats (row-major) as `type` into dst, which holds
 * rows * swift_ggml_row_size(type, ne0) bytes. ne0 must be a multiple of the block size.
 * Returns 0, or -1 after an error (unsupported type, bad ne0).
 */
int swift_quantize(uint32_t type, const float *src, void *dst, int64_t rows, int64_t ne0);

/* Decode n elements (a multiple of the block size) of `type` to floats. Returns 0 or -1. */
int swift_dequantize(uint32_t type, const void *src, float *dst, int64_t n);

/*
 * The type llama.cpp uses for a tensor whose rows have ne0 elements when `want` is requested
 * (llama-quant.cpp, llama_tensor_get_type): K-quants need ne0 % 256 == 0, else Q4_K → Q5_0,
 * Q6_K → Q8_0; a 32-block type that still does not divide ne0 becomes F16.
 */
uint32_t swift_quant_fallback(uint32_t want, int64_t ne0);

/* Root-mean-square of a - b over n values. */
double swift_rmse(const float *a, const float *b, int64_t n);

#endif
