/*
 * analyze/roofline — FLOPs and bytes of one op call from its input shapes and dtypes, and the
 * peak compute and memory bandwidth of a device, so that an op's achieved TFLOP/s and TB/s can
 * be set against the device's roofline.
 *
 * The op is named as the PyTorch profiler names it ("aten::addmm"; the "aten::" prefix is
 * optional) and its inputs are given as Kineto's record_shapes writes them ("Input Dims":
 * one dim list per argument, [] for a scalar or an argument that is no tensor; "Input type":
 * "float", "c10::BFloat16", ...). Usage:
 *
 *     struct swift_rf_tensor in[3] = {{2, {1000}, 4}, ...};
 *     struct swift_rf_cost c;
 *     if (swift_rf_cost("aten::addmm", in, 3, NULL, &c) != SWIFT_RF_NONE)
 *         printf("%g FLOPs, %g bytes\n", c.flops, c.bytes);
 *
 * Conventions (the unit tests hold them; tests/ref/gen_roofline.py checks the GEMM, conv and
 * attention ones against PyTorch's own formulas in torch/utils/flop_counter.py):
 * - One multiply-add is 2 FLOPs. GEMM (mm, addmm, bmm, baddbmm, matmul, linear): 2·M·N·K per
 *   matrix product (times the batch); the bias add of addmm is not counted (as
 *   torch.utils.flop_counter). Bytes: every tensor input once plus the output, at their dtype.
 * - Attention (scaled_dot_product_attention and the flash / efficient / cuDNN kernels):
 *   forward 2·B·H·S·T·D (Q·Kᵀ) + 2·B·H·S·T·Dv (P·V), that is 4·B·H·S²·D for S = T, D = Dv;
 *   backward 2·B·H·S·T·(3·D + 2·Dv) (the five products of torch.utils.flop_counter's
 *   sdpa_backward_flop_count), 2.5× the forward. Causal: half of each, the convention of the
 *   FlashAttention paper's benchmarks (flash-attn benchmarks/benchmark_flash_attention.py,
 *   flops(): 4·batch·seqlen²·nheads·headdim // (2 if causal), bwd 2.5×); torch.utils
 *   .flop_counter does not halve. Bytes: Q, K, V and the output (a fused kernel never writes
 *   the S×T scores); backward also dO read and dQ, dK, dV written.
 * - Convolution: 2·prod(output)·prod(weight[1:]) (torch's conv_flop_count); the forward's
 *   output needs stride, padding and dilation (swift_rf_extra), or it has no formula; the
 *   backward ops (convolution_backward, cudnn_convolution_backward) carry grad_output and count
 *   grad_input plus grad_weight, twice the forward; cudnn_convolution_backward_input once.
 * - No counter in PyTorch for the ones below; our convention, per element of the (largest)
 *   input: softmax / log_softmax 5 (max, subtract, exp, sum, divide or log), their backward 3;
 *   layer and batch norm 8, RMS norm 4, their backward twice that; elementwise ops 1 per
 *   output element (copy 0); embedding 0 (a gather: bytes only), its backward 1 per gradient
 *   element; cross-entropy 6 per logit (log_softmax 5 + NLL gather 1); AdamW / Adam 14 per
 *   parameter (moments 7, bias correction 2, update with decay 5) reading parameter, gradient
 *   and two moments and writing three.
 */
#ifndef SWIFT_ANALYZE_ROOFLINE_H
#define SWIFT_ANALYZE_ROOFLINE_H

#include <stddef.h>
#include <stdint.h>

#define SWIFT_RF_MAXDIM 8

/* One argument of an op call. ndim -1 (or 0 with no dims given) is no tensor: a scalar, a list,
 * None. elt: bytes per element (swift_rf_dtype_size); 0 when unknown (counted as 4). */
struct swift_rf_tensor {
    int ndim;
    int64_t d[SWIFT_RF_MAXDIM];
    int elt;
};

/* What a call carries besides its tensors (all optional: pass NULL for none). */
struct swift_rf_extra {
    int causal; /* attention: 1 causal (half the FLOPs) */
    int nsp;    /* convolution: spatial dims in stride/padding/dilation, 0: unknown */
    int64_t stride[3], padding[3], dilation[3];
};

enum swift_rf_class {
    SWIFT_RF_NONE = 0,
    SWIFT_RF_GEMM,
    SWIFT_RF_ATTN_FWD,
    SWIFT_RF_ATTN_BWD,
    SWIFT_RF_CONV,
    SWIFT_RF_SOFTMAX,
    SWIFT_RF_NORM,
    SWIFT_RF_ELEMENTWISE,
    SWIFT_RF_EMBEDDING,
    SWIFT_RF_CROSS_ENTROPY,
    SWIFT_RF_OPTIMIZER,
    SWIFT_RF_NCLASS
};

struct swift_rf_cost {
    enum swift_rf_class cls;
    double flops, bytes;
};

/* The class of op `name` ("aten::mm" or "mm"); SWIFT_RF_NONE when it has no formula. */
enum swift_rf_class swift_rf_class_of(const char *name);
/* "gemm", "attention_fwd", "attention_bwd", "conv", "softmax", "norm", "elementwise",
 * "embedding", "cross_entropy", "optimizer" ("" for SWIFT_RF_NONE). */
const char *swift_rf_class_name(enum swift_rf_class cls);

/* The cost of one call of `name` with arguments in[0..n) (x may be NULL). Returns the class
 * and fills *c, or SWIFT_RF_NONE (c zeroed) when the op has no formula or the shapes do not
 * fit it (too few tensors, ranks that do not match). */
enum swift_rf_class swift_rf_cost(const char *name, const struct swift_rf_tensor *in, size_t n,
                                  const struct swift_rf_extra *x, struct swift_rf_cost *c);

/* Bytes per element of a Kineto "Input type" ("float" 4, "c10::BFloat16" 2, "c10::Half" 2,
 * "double" 8, "long int" / "int64_t" 8, "int" 4, "bool" / "unsigned char" 1, "float8..." 1);
 * 0 for a type that is no tensor's element ("Scalar", "GenericList", "", ...). */
int swift_rf_dtype_size(const char *type);

/* Peak dense throughput of a device for one element type and its memory bandwidth. */
struct swift_rf_peak {
    double tflops; /* TFLOP/s for the dtype (tensor cores where the dtype uses them) */
    double tbps;   /* TB/s of device memory */
};
/* The peak of the device named `device` (Kineto deviceProperties name, e.g. "NVIDIA H100 80GB
 * HBM3") for element size `elt` (2: bf16/fp16, 4: fp32 without TF32, 8: fp64); 0 and *p
 * filled, or -1 for a device (or dtype) the table does not know. Sources in roofline.c. */
int swift_rf_peak(const char *device, int elt, struct swift_rf_peak *p);

/* The fraction of the roofline an op reached: achieved FLOP/s over min(peak FLOP/s, intensity ·
 * peak bytes/s), from flops, bytes and its time in µs; with no FLOPs (a copy, a gather) the
 * achieved bytes/s over the peak; NAN when time or bytes is not positive. */
double swift_rf_fraction(double flops, double bytes, double us, const struct swift_rf_peak *p);

#endif
