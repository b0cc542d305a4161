/*
 * cpu — the CPU backend's kernels (the specification for every other backend). Each function
 * is one entry of struct swift_ops (kernels/ops.h), which documents shapes and semantics.
 */
#ifndef SWIFT_KERNELS_CPU_H
#define SWIFT_KERNELS_CPU_H

#include <stddef.h>
#include <stdint.h>

void swift_cpu_matmul_fwd(float *out, const float *in, const float *w, const float *bias, int N,
                          int I, int O, float alpha, float beta);
void swift_cpu_matmul_bwd(float *din, float *dw, float *db, const float *dout, const float *in,
                          const float *w, int N, int I, int O, float alpha, float din_beta);
/* matmul.c: the fp32 GEMMs (OpenBLAS); matmul_fwd/bwd above run them or the bf16 ones by the
 * math set with swift_cpu_set_matmul_math (the op table's set_matmul_math) */
void swift_cpu_matmul_fp32_fwd(float *out, const float *in, const float *w, const float *bias,
                               int N, int I, int O, float alpha, float beta);
void swift_cpu_matmul_fp32_bwd(float *din, float *dw, float *db, const float *dout, const float *in,
                               const float *w, int N, int I, int O, float alpha, float din_beta);
/* matvec.c: matmul_fwd's fp32 path for N <= SWIFT_CPU_MATVEC_MAX_M rows (decode steps): one pass
 * over w for all rows, AVX-512 or AVX2+FMA picked at run time, OpenMP over output rows; the
 * scalar path is the specification. _impl: the path taken (the best this CPU has, or
 * $SWIFT_CPU_MATVEC=blas|scalar|avx2|avx512 when it has that one; blas: OpenBLAS as
 * before, for comparisons), _name its name, _supported
 * whether this CPU runs a path, _with runs a given path (tests; blas or one the CPU lacks runs
 * scalar).
 * M > MAX_M is accepted (groups of MAX_M rows, w read once per group). */
enum { SWIFT_CPU_MATVEC_MAX_M = 8 };
enum {
    SWIFT_CPU_MATVEC_BLAS = 0,
    SWIFT_CPU_MATVEC_SCALAR = 1,
    SWIFT_CPU_MATVEC_AVX2 = 2,
    SWIFT_CPU_MATVEC_AVX512 = 3
};
int swift_cpu_matvec_impl(void);
const char *swift_cpu_matvec_name(int impl);
int swift_cpu_matvec_supported(int impl);
void swift_cpu_matvec_f32(float *out, const float *in, const float *w, const float *bias, int M,
                          int In, int O, float alpha, float beta);
void swift_cpu_matvec_f32_with(int impl, float *out, const float *in, const float *w,
                               const float *bias, int M, int In, int O, float alpha, float beta);
/* matmul_bf16.c: the same contracts with in, w and dout rounded to bf16 (nearest-even) and fp32
 * accumulation and outputs, through oneDNN; they fall back to fp32 when oneDNN fails */
enum { SWIFT_CPU_MATH_FP32 = 0, SWIFT_CPU_MATH_BF16 = 1 };
int swift_cpu_set_matmul_math(int mode);
int swift_cpu_matmul_math(void);
void swift_cpu_matmul_bf16_fwd(float *out, const float *in, const float *w, const float *bias,
                               int N, int I, int O, float alpha, float beta);
void swift_cpu_matmul_bf16_bwd(float *din, float *dw, float *db, const float *dout, const float *in,
                               const float *w, int N, int I, int O, float alpha, float din_beta);
/* One bf16 GEMM with fp32 accumulation, C (M,N) = alpha * A @ B + beta * C, row-major with
 * rows lda, ldb, ldc apart as stored: FWD A (M,K) @ B (N,K)^T; DIN A (M,K) @ B (K,N); DW
 * A (K,M)^T @ B (K,N). Returns 0, or -1 when oneDNN cannot (the caller computes it in fp32). */
enum { SWIFT_CPU_BF16_FWD = 0, SWIFT_CPU_BF16_DIN = 1, SWIFT_CPU_BF16_DW = 2 };
int swift_cpu_bf16_gemm(int kind, int M, int N, int K, float alpha, float beta, const uint16_t *a,
                        int lda, const uint16_t *b, int ldb, float *c, int ldc);
/* The same GEMM over a batch of up to three dimensions n[0] x n[1] x n[2] (outer first), as one
 * oneDNN call that threads over the batch: the matrices of batch index (i, j, l) start at
 * s[0] i + s[1] j + s[2] l elements into a, b, c (sa, sb, sc). A zero stride in sa or sb reads
 * the same matrix along that dimension (broadcast: grouped KV heads); sa[0] and sc[0] must not
 * be zero, and no two C matrices may overlap. Returns 0, or -1 as swift_cpu_bf16_gemm. */
struct swift_cpu_bf16_batch {
    int n[3];
    long sa[3], sb[3], sc[3];
};
int swift_cpu_bf16_gemm_batch(int kind, const struct swift_cpu_bf16_batch *bt, int M, int N, int K,
                              float alpha, float beta, const uint16_t *a, int lda,
                              const uint16_t *b, int ldb, float *c, int ldc);
/* attention_bf16.c: attention_fwd/bwd's contracts with the four score and value GEMMs in bf16
 * (q, k, v, the probabilities, dout and dS rounded; softmax and its gradient in fp32), as
 * torch.autocast runs them; attention_fwd/bwd call them under SWIFT_CPU_MATH_BF16. Return 0, or
 * -1 (nothing usable written) when oneDNN or memory fails: the caller runs the fp32 op. */
int swift_cpu_attention_bf16_fwd(float *out, float *probs, const float *q, const float *k,
                                 const float *v, const int32_t *pos, int B, int T, int NH, int NKV,
                                 int D);
int swift_cpu_attention_bf16_bwd(float *dq, float *dk, float *dv, const float *dout,
                                 const float *probs, const float *q, const float *k, const float *v,
                                 int B, int T, int NH, int NKV, int D);
/* elementwise.c: whether the AVX-512 twins of the exp loops (cross-entropy, attention's softmax,
 * SwiGLU; vexp.h) run: the CPU has AVX-512F and swift_cpu_set_simd(0) has not turned them off
 * (tests compare the two; the twins give the scalar loops' bits) */
int swift_cpu_simd_avx512(void);
void swift_cpu_set_simd(int on);
/* fp32 -> bf16, round to nearest even (torch's cast) */
void swift_cpu_to_bf16(uint16_t *dst, const float *src, size_t n);
/* the same on the calling thread only (for rows inside a parallel loop) */
void swift_cpu_to_bf16_row(uint16_t *dst, const float *src, size_t n);
/* the oneDNN implementation the bf16 GEMMs run on (probing once), and whether a name is a
 * fast one (avx512_core_bf16 or amx, not a reference/fp32 fallback) */
const char *swift_cpu_bf16_impl(void);
int swift_cpu_bf16_fast_name(const char *impl);
void swift_cpu_embed_fwd(float *out, const int32_t *tok, const float *emb, int N, int C);
void swift_cpu_embed_bwd(float *demb, const float *dout, const int32_t *tok, int N, int C);
void swift_cpu_rmsnorm_fwd(float *out, float *rstd, const float *in, const float *w, int N, int C,
                           float eps);
void swift_cpu_rmsnorm_bwd(float *din, float *dw, const float *dout, const float *in,
                           const float *w, const float *rstd, int N, int C);
void swift_cpu_rope_fwd(float *x, const int32_t *pos, const float *inv_freq, int N, int H, int D);
void swift_cpu_rope_bwd(float *dx, const int32_t *pos, const float *inv_freq, int N, int H, int D);
void swift_cpu_attention_fwd(float *out, float *probs, const float *q, const float *k,
                             const float *v, const int32_t *pos, int B, int T, int NH, int NKV,
                             int D);
void swift_cpu_attention_bwd(float *dq, float *dk, float *dv, const float *dout, const float *probs,
                             const float *q, const float *k, const float *v, const int32_t *pos,
                             int B, int T, int NH, int NKV, int D);
void swift_cpu_swiglu_fwd(float *out, const float *gate, const float *up, size_t n);
void swift_cpu_swiglu_bwd(float *dgate, float *dup, const float *dout, const float *gate,
                          const float *up, size_t n);
void swift_cpu_cross_entropy(float *dlogits, double *loss_sum, long *count, long *correct,
                             const float *logits, const int32_t *targets, int N, int V,
                             float dscale);
void swift_cpu_add(float *out, const float *a, const float *b, size_t n);
void swift_cpu_scale(float *x, float s, size_t n);
void swift_cpu_mul_cols(float *out, const float *x, const float *g, const float *bias, size_t N,
                        int C, float beta);
double swift_cpu_sumsq(const float *x, size_t n);
void swift_cpu_dropout_fwd(float *out, uint8_t *mask, const float *in, size_t n, float p,
                           uint64_t seed);
void swift_cpu_dropout_bwd(float *din, const float *dout, const uint8_t *mask, size_t n, float p);
void swift_cpu_adamw8bit(float *p, const float *g, uint8_t *m, uint8_t *v, float *am, float *av,
                         size_t n, double lr, double b1, double b2, double eps, double wd,
                         long step, float gscale);
/* The 8-bit code of x (in [-1, 1] after division by the block's absmax) in bitsandbytes'
 * signed (is_signed) or unsigned dynamic map: its 65536-bin table lookup (adamw8bit.c). */
uint8_t swift_cpu_qmap8_code(int is_signed, float x);
void swift_cpu_adamw(float *p, const float *g, float *m, float *v, size_t n, float lr, float b1,
                     float b2, float eps, float wd, float bc1, float bc2, float gscale);
void swift_cpu_copy_rows(float *dst, const int32_t *dst_idx, const float *src,
                         const int32_t *src_idx, int n, int width);
void swift_cpu_attention_cached(float *out, const float *q, const float *kcache,
                                const float *vcache, const int32_t *pos, const int32_t *row,
                                size_t row_stride, int N, int NH, int NKV, int D);
void swift_cpu_layernorm_fwd(float *out, float *mean, float *rstd, const float *in, const float *w,
                             const float *b, int N, int C, float eps);
void swift_cpu_layernorm_bwd(float *din, float *dw, float *db, const float *dout, const float *in,
                             const float *w, const float *mean, const float *rstd, int N, int C);
void swift_cpu_gelu_fwd(float *out, const float *in, size_t n, int kind);
void swift_cpu_gelu_bwd(float *din, const float *dout, const float *in, size_t n, int kind);
void swift_cpu_attention_seg_fwd(float *out, float *probs, const float *q, const float *k,
                                 const float *v, const int32_t *cu, int nseg, int N, int NH, int D);
void swift_cpu_attention_seg_bwd(float *dq, float *dk, float *dv, const float *dout,
                                 const float *probs, const float *q, const float *k, const float *v,
                                 const int32_t *cu, int nseg, int N, int NH, int D);
void swift_cpu_attention_paged(float *out, const float *q, const float *kcache, const float *vcache,
                               const int32_t *pos, const int32_t *toff, const int32_t *tables,
                               int ntables, int block_size, int N, int NH, int NKV, int D);

/* quant4.c: the fused 4-bit dequant-matmul (kernels/quant4.h) */
struct swift_q4;
/* A matmul over a weight (O,I) stored in some quantized format (matmul_deq.c): dq writes rows
 * [o0, o0+R) of w dequantized into tile (R,I); quant4.c and quant8.c pass theirs. */
typedef void (*swift_cpu_deq_rows)(const void *w, int o0, int R, int In, float *tile);
void swift_cpu_matmul_deq_fwd(float *out, const float *in, const void *w, swift_cpu_deq_rows dq,
                              const float *bias, int N, int In, int O, float beta);
void swift_cpu_matmul_deq_bwd(float *din, const float *dout, const void *w, swift_cpu_deq_rows dq,
                              int N, int In, int O, float din_beta);
void swift_cpu_matmul4_fwd(float *out, const float *in, const struct swift_q4 *w, const float *bias,
                           int N, int I, int O, float beta);
void swift_cpu_matmul4_bwd(float *din, const float *dout, const struct swift_q4 *w, int N, int I,
                           int O, float din_beta);

/* quant8.c: the fused 8-bit dequant-matmul (kernels/quant8.h) */
struct swift_q8;
void swift_cpu_matmul8_fwd(float *out, const float *in, const struct swift_q8 *w, const float *bias,
                           int N, int I, int O, float beta);
void swift_cpu_matmul8_bwd(float *din, const float *dout, const struct swift_q8 *w, int N, int I,
                           int O, float din_beta);

#endif
