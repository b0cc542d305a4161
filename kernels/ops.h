/*
 * ops — the backend op table, the contract between lib/ and every backend; it includes nothing
 * from lib/. lib/model and lib/train call the math only through a `const struct swift_ops *`, so
 * they never branch on the device; the CPU table (kernels/cpu/, swift_cpu_ops) is the
 * specification every other backend is checked against (tests/kernels/). What a backend
 * observes on the device (CUPTI activity, NCCL timings) it reports through the sink of
 * kernels/device.h, which lib/ turns into trace events.
 *
 * Conventions for every op:
 * - tensors are float32, row-major, contiguous; shapes are given in the comments, e.g.
 *   in (N,I) means N rows of I floats; N is the number of tokens B*T;
 * - "+=" marks outputs that are accumulated into (gradients of weights always are, so
 *   gradient accumulation over micro-batches needs no extra copy); other outputs are written;
 * - token positions pos (N) are the position of each token inside its document: packed
 *   documents restart at 0, and a token attends to the tokens of its own document only
 *   (block-diagonal causal attention; token i of a row sees i-pos[i] .. i);
 * - pointers passed to an op are device pointers of that backend (host memory on the CPU).
 *   Host code never dereferences what alloc returned: it moves data with upload/download
 *   (weights in, checkpoints out, gradients to MPI). The CUDA backend (kernels/cuda,
 *   docs/cuda.md) allocates plain device memory (cudaMalloc); swift_cpu_strict_ops checks the
 *   rule on the CPU. Ops accept the int32 index arrays (tok, pos, targets) and RoPE's inv_freq
 *   in host memory too (CUDA uploads them once per distinct content);
 * - ops may run asynchronously: results that come back to the host (cross_entropy's sums,
 *   sumsq) wait for the queue; everything else is ordered on the backend's queue.
 */
#ifndef SWIFT_KERNELS_OPS_H
#define SWIFT_KERNELS_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/quant4.h"
#include "kernels/quant8.h"

struct swift_ops {
    const char *name; /* "cpu" */

    /* memory: alloc returns zeroed memory or NULL */
    void *(*alloc)(size_t bytes);
    void (*free)(void *p);
    void (*zero)(float *x, size_t n);
    void (*copy)(float *dst, const float *src, size_t n);
    /* host memory <-> backend memory, bytes; both have completed when they return */
    void (*upload)(void *dst, const void *host_src, size_t bytes);
    void (*download)(void *host_dst, const void *src, size_t bytes);
    /* wait until every queued op has finished (CPU: nothing to wait for); the host still reads
     * backend memory only through download */
    void (*sync)(void);
    /* --profile: record device-side events (kernels, copies, runtime calls) into the trace while
     * on; turning it off flushes them (CPU: nothing to record) */
    void (*device_trace)(int on);

    /* out (N,O) = alpha * in (N,I) @ w (O,I)^T + beta * out [+ bias (O)] */
    void (*matmul_fwd)(float *out, const float *in, const float *w, const float *bias, int N,
                       int In, int O, float alpha, float beta);
    /* din (N,I) = alpha * dout (N,O) @ w (O,I) + din_beta * din   (skipped when din is NULL)
     * dw (O,I) += alpha * dout^T @ in                              (skipped when dw is NULL)
     * db (O)   += alpha * sum over rows of dout                    (skipped when db is NULL) */
    void (*matmul_bwd)(float *din, float *dw, float *db, const float *dout, const float *in,
                       const float *w, int N, int In, int O, float alpha, float din_beta);

    /* out (N,C) = emb[tok[n]] ; demb (V,C) += scatter of dout by tok */
    void (*embed_fwd)(float *out, const int32_t *tok, const float *emb, int N, int C);
    void (*embed_bwd)(float *demb, const float *dout, const int32_t *tok, int N, int C);

    /* out (N,C) = in / sqrt(mean(in^2) + eps) * w (C); rstd (N) saved for backward */
    void (*rmsnorm_fwd)(float *out, float *rstd, const float *in, const float *w, int N, int C,
                        float eps);
    /* din (N,C) += ..., dw (C) += ... (dw may be NULL) */
    void (*rmsnorm_bwd)(float *din, float *dw, const float *dout, const float *in, const float *w,
                        const float *rstd, int N, int C);

    /* x (N,H,D) rotated in place by angle pos[n]*inv_freq[d], pairs (d, d+D/2) (HF
     * rotate_half); backward applies the inverse rotation to dx in place */
    void (*rope_fwd)(float *x, const int32_t *pos, const float *inv_freq, int N, int H, int D);
    void (*rope_bwd)(float *dx, const int32_t *pos, const float *inv_freq, int N, int H, int D);

    /* q (B*T,NH,D), k v (B*T,NKV,D), out (B*T,NH,D), probs (B,NH,T,T) softmax saved for
     * backward; head h uses kv head h/(NH/NKV); scale 1/sqrt(D); block-diagonal causal by pos */
    void (*attention_fwd)(float *out, float *probs, const float *q, const float *k, const float *v,
                          const int32_t *pos, int B, int T, int NH, int NKV, int D);
    /* dq dk dv written (same shapes as q k v) */
    void (*attention_bwd)(float *dq, float *dk, float *dv, const float *dout, const float *probs,
                          const float *q, const float *k, const float *v, const int32_t *pos, int B,
                          int T, int NH, int NKV, int D);

    /* out (n) = silu(gate) * up ; backward writes dgate, dup */
    void (*swiglu_fwd)(float *out, const float *gate, const float *up, size_t n);
    void (*swiglu_bwd)(float *dgate, float *dup, const float *dout, const float *gate,
                       const float *up, size_t n);

    /* Cross-entropy over rows whose target >= 0 (logits (N,V), targets (N), -1 = not trained).
     * Adds the sum of -log softmax[target] to *loss_sum, the count of trained rows to *count and
     * of rows whose argmax equals the target to *correct. When dlogits is non-NULL writes
     * dlogits (N,V) = dscale * (softmax - onehot) on trained rows and 0 elsewhere (dlogits may
     * alias logits). */
    void (*cross_entropy)(float *dlogits, double *loss_sum, long *count, long *correct,
                          const float *logits, const int32_t *targets, int N, int V, float dscale);

    /* out (n) = a + b (out may alias a or b) */
    void (*add)(float *out, const float *a, const float *b, size_t n);
    /* x (n) *= s */
    void (*scale)(float *x, float s, size_t n);
    /* sum of squares in double */
    double (*sumsq)(const float *x, size_t n);

    /* Inverted dropout with a counter-based RNG: mask[i] = keep(seed, i); out = in*mask/(1-p).
     * Backward: din (n) += dout * mask/(1-p). */
    void (*dropout_fwd)(float *out, uint8_t *mask, const float *in, size_t n, float p,
                        uint64_t seed);
    void (*dropout_bwd)(float *din, const float *dout, const uint8_t *mask, size_t n, float p);

    /* torch.optim.AdamW on n elements: g is multiplied by gscale (clipping) first;
     * p -= lr*wd*p; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
     * p -= lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps), with bc = 1 - beta^step */
    void (*adamw)(float *p, const float *g, float *m, float *v, size_t n, float lr, float b1,
                  float b2, float eps, float wd, float bc1, float bc2, float gscale);

    /* Inference with a key/value cache (lib/eval/kv.h); appended after the training ops. */
    /* Row gather/scatter: for i < n, row (dst_idx ? dst_idx[i] : i) of dst (rows of width
     * floats) = row (src_idx ? src_idx[i] : i) of src. dst_idx/src_idx are int32 index arrays
     * (host memory accepted, like pos), NULL for the identity; rows written must be distinct and
     * must not overlap the rows read. */
    void (*copy_rows)(float *dst, const int32_t *dst_idx, const float *src, const int32_t *src_idx,
                      int n, int width);
    /* Causal attention of N new tokens against a key/value cache that already holds them:
     * token i reads cache row row[i], whose position j starts at kcache/vcache +
     * row[i]*row_stride + j*NKV*D (a position holds NKV heads of D floats), for j = 0..pos[i].
     * q, out (N,NH,D); head h uses kv head h/(NH/NKV); scale 1/sqrt(D); one pass with an
     * online softmax in fp32. pos and row are int32 index arrays (host memory accepted).
     * D <= 512. */
    void (*attention_cached)(float *out, const float *q, const float *kcache, const float *vcache,
                             const int32_t *pos, const int32_t *row, size_t row_stride, int N,
                             int NH, int NKV, int D);

    /* DoRA (lib/model/lora.h); appended after the inference ops. */
    /* out (N,C) = beta * out + x (N,C) * g (C) [+ bias (C)]: g broadcast over the rows (N = 1,
     * C = n: the elementwise product); x may alias out; beta 0 ignores out's old contents. */
    void (*mul_cols)(float *out, const float *x, const float *g, const float *bias, size_t N, int C,
                     float beta);
    /* bitsandbytes' 8-bit block-wise AdamW (bnb.optim.AdamW8bit), as its CPU backend computes
     * it, on n elements of one parameter. m, v (n) are the moments' uint8 codes: m indexes the
     * signed dynamic map, v the unsigned one (kernels/qmap8.h); am, av (ceil(n/256)) the
     * absmax of each block of 256 elements (the last block may be shorter). Per block: m =
     * map1[m]*am, v = map2[v]*av; g *= gscale; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
     * p *= 1 - lr*wd; p -= lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps), bc = 1 - beta^step; then m
     * and v are requantized (absmax = the block's largest magnitude, codes nearest by
     * bitsandbytes' 65536-bin table). The hyper-parameters come in double and the scalars are
     * derived in double, as Python floats are, before the float32 element math. NULL in a
     * table that does not have it. */
    void (*adamw8bit)(float *p, const float *g, uint8_t *m, uint8_t *v, float *am, float *av,
                      size_t n, double lr, double b1, double b2, double eps, double wd, long step,
                      float gscale);
    /* QLoRA's frozen base (appended after the cache ops): w is a 4-bit weight (O,I) in
     * bitsandbytes' layout (kernels/quant4.h; the struct in host memory, its arrays backend
     * memory), dequantized a block of rows at a time into a small buffer, never as a whole:
     * out (N,O) = in (N,I) @ dequant(w)^T + beta * out [+ bias (O)]
     * din (N,I) = dout (N,O) @ dequant(w) + din_beta * din   (no weight gradient: frozen)
     * NULL on a backend without them (lib/model refuses a 4-bit base there). */
    void (*matmul4_fwd)(float *out, const float *in, const struct swift_q4 *w, const float *bias,
                        int N, int In, int O, float beta);
    void (*matmul4_bwd)(float *din, const float *dout, const struct swift_q4 *w, int N, int In,
                        int O, float din_beta);
    /* --quant-bits 8's frozen base (appended after matmul4): w is an int8 weight (O,I) with one
     * absmax per row, bitsandbytes' Int8Params layout (kernels/quant8.h; the struct in host
     * memory, its arrays backend memory), dequantized a block of rows at a time, never whole;
     * the same contract as matmul4_fwd/bwd. NULL on a backend without them. */
    void (*matmul8_fwd)(float *out, const float *in, const struct swift_q8 *w, const float *bias,
                        int N, int In, int O, float beta);
    void (*matmul8_bwd)(float *din, const float *dout, const struct swift_q8 *w, int N, int In,
                        int O, float din_beta);

    /* Paged attention (lib/model/pkv.h, swift-infer's cache), appended after the 4-bit and 8-bit
     * ops: attention_cached with the cache cut into blocks of block_size positions. Position j of
     * token i lives in block b = tables[toff[i] + j / block_size], at kcache/vcache +
     * (b*block_size + j % block_size)*NKV*D; j = 0..pos[i]. tables (ntables) holds the block
     * tables of the call's sequences one after the other. pos, toff and tables are int32 index
     * arrays (host memory accepted). The same loop as attention_cached (one pass, online
     * softmax in fp32, positions in order), so both give the same bits on the same keys.
     * D <= 512. */
    void (*attention_paged)(float *out, const float *q, const float *kcache, const float *vcache,
                            const int32_t *pos, const int32_t *toff, const int32_t *tables,
                            int ntables, int block_size, int N, int NH, int NKV, int D);
    /* Mixed precision (appended last): the compute of matmul_fwd/matmul_bwd
     * from now on, for the whole process. SWIFT_MATH_FP32 (the default): fp32 throughout.
     * SWIFT_MATH_BF16: in, w and dout are rounded to bf16 (nearest-even) and the products
     * accumulate in fp32 into fp32 outputs (bias and db stay fp32) — the numerics of
     * torch.autocast(bfloat16) for linear layers; on the CPU through oneDNN
     * (kernels/cpu/matmul_bf16.c), the specification for other backends (tests/kernels).
     * Returns 0, or -1 when the backend cannot (the math is unchanged); NULL: fp32 only. */
    int (*set_matmul_math)(int mode);

    /* The vision tower of Qwen2-VL / Qwen2.5-VL (lib/model/vlm.h), appended after the mixed
     * precision switch. NULL on a backend without them (lib/model refuses a vision model there).
     * LayerNorm with bias (torch's nn.LayerNorm: biased variance): out (N,C) = (in - mean) *
     * rstd * w (C) + b (C) (b may be NULL); mean, rstd (N) saved for backward. */
    void (*layernorm_fwd)(float *out, float *mean, float *rstd, const float *in, const float *w,
                          const float *b, int N, int C, float eps);
    /* din (N,C) += ..., dw (C) += ..., db (C) += ... (dw, db may be NULL) */
    void (*layernorm_bwd)(float *din, float *dw, float *db, const float *dout, const float *in,
                          const float *w, const float *mean, const float *rstd, int N, int C);
    /* out (n) = gelu(in): kind SWIFT_GELU_ERF x * Phi(x) (nn.GELU()), SWIFT_GELU_QUICK
     * x * sigmoid(1.702 x) (QuickGELU); backward writes din = dout * gelu'(in) */
    void (*gelu_fwd)(float *out, const float *in, size_t n, int kind);
    void (*gelu_bwd)(float *din, const float *dout, const float *in, size_t n, int kind);
    /* Bidirectional attention inside segments (flash-attention's cu_seqlens): segment s is the
     * tokens cu[s] .. cu[s+1]-1 and each of them attends to all the tokens of its segment and
     * to no other. q, k, v, out (N,NH,D), N = cu[nseg] (passed too); scale 1/sqrt(D); cu (nseg+1)
     * an int32 index array (host memory accepted), non-decreasing from 0. probs holds the softmax
     * for backward: segment s's (NH,L,L), L = cu[s+1]-cu[s], at NH * sum over the earlier segments
     * of L^2. Backward writes dq, dk, dv (N,NH,D). */
    void (*attention_seg_fwd)(float *out, float *probs, const float *q, const float *k,
                              const float *v, const int32_t *cu, int nseg, int N, int NH, int D);
    void (*attention_seg_bwd)(float *dq, float *dk, float *dv, const float *dout,
                              const float *probs, const float *q, const float *k, const float *v,
                              const int32_t *cu, int nseg, int N, int NH, int D);
};

enum { SWIFT_MATH_FP32 = 0, SWIFT_MATH_BF16 = 1 };
enum { SWIFT_GELU_ERF = 0, SWIFT_GELU_QUICK = 1 };

/* The CPU backend (kernels/cpu): OpenBLAS sgemm for matmuls, OpenMP loops elsewhere. */
extern const struct swift_ops swift_cpu_ops;
/* The same math with host access forbidden (kernels/cpu/strict.c, for tests): alloc returns
 * whole pages kept PROT_NONE except while an op, upload or download runs, so host code that
 * dereferences backend memory dies with SIGSEGV, as it would on a device. Results are
 * swift_cpu_ops' bit for bit. lib/model/backend.h picks it instead of the CPU table when
 * SWIFT_CPU_STRICT_HOST=1. Not for production: every op costs two mprotect per allocation. */
extern const struct swift_ops swift_cpu_strict_ops;

#ifdef SWIFT_HAVE_CUDA
/* The CUDA backend (kernels/cuda/, the table in ops.cu): cuBLASLt matmuls, CUDA kernels
 * elsewhere. Select the GPU with swift_cuda_init(index) before the first op (0, or -1 after an
 * error on stderr). */
extern const struct swift_ops swift_cuda_ops;
int swift_cuda_init(int device);
/* Matmul compute: SWIFT_CUDA_MATH_FP32 (exact), _TF32 (default) or _BF16 (bf16 inputs, fp32
 * accumulation); also read from $SWIFT_CUDA_MATH=fp32|tf32|bf16 at init. */
enum { SWIFT_CUDA_MATH_FP32 = 0, SWIFT_CUDA_MATH_TF32, SWIFT_CUDA_MATH_BF16 };
void swift_cuda_set_math(int mode);
/* Attention: SWIFT_CUDA_ATTN_FLASH (fused kernels, kernels/cuda/flash_attn.cu; head dims up to
 * 256), _CUBLAS (batched GEMMs + masked softmax) or _AUTO (default: flash when the head dim is
 * supported); also read from $SWIFT_CUDA_ATTN=flash|cublas at the first attention op unless
 * this was called before. On the flash path attention_fwd keeps the per-query log-sum-exp (and,
 * when T > D, a copy of out) at the start of `probs` instead of the probabilities; a backward
 * must run on the path of its forward. */
enum { SWIFT_CUDA_ATTN_AUTO = 0, SWIFT_CUDA_ATTN_FLASH, SWIFT_CUDA_ATTN_CUBLAS };
void swift_cuda_set_attention(int mode);
/* Bytes of device memory in use by this process's backend allocations. */
size_t swift_cuda_mem_allocated(void);
#endif

/* FLOPs of one matmul forward (2*N*I*O), for MFU and --profile spans. */
static inline double swift_matmul_flops(int N, int In, int O)
{
    return 2.0 * (double)N * (double)In * (double)O;
}

#endif
