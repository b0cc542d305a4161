/*
 * gptq — GPTQ weight quantization of one linear layer (Frantar et al., "GPTQ: Accurate
 * Post-Training Quantization for Generative Pre-trained Transformers", 2022), as the reference
 * implementation (IST-DASLab gptq.py, auto-gptq 0.7 GPTQ.fasterquant) does it:
 *
 *     H = sum over calibration tokens of x x^T       (x: the layer's input, in_features)
 *     dead inputs (H_ii = 0): H_ii = 1, W[:, i] = 0
 *     H += damp * mean(diag H) * I
 *     U = upper Cholesky factor of H^-1             (LAPACK potrf, potri, potrf)
 *     for each block of `block` columns, for each column i in order:
 *         at the first column of a group: scale from the group's current columns (symmetric
 *             min/max rule of GPTQ's Quantizer: xmax = max(|min(w,0)|, max(w,0)),
 *             scale = 2 xmax / maxq, zero = (maxq + 1) / 2)
 *         q = clamp(round(w / scale) + zero, 0, maxq)   (round half to even)
 *         err = (w - scale (q - zero)) / U_ii
 *         the block's later columns -= err U_i,j       (the rest of W after the block, in one GEMM)
 *
 * Like the reference, a group that starts inside a block takes its scale from the columns as
 * they were when the block started (the block's own updates are applied to the working copy
 * only); with group size = block size (128, the default) the two are the same.
 *
 *     struct swift_gptq_params p = {.bits = 4, .group = 128, .block = 128, .damp = 0.01f};
 *     swift_gptq_hessian_add(H, x, ntokens, in);      // per calibration batch
 *     swift_gptq_quantize(W, H, out, in, &p, codes, scales, &stats);
 *
 * Everything is float32 (as the reference); the Hessian in-place factorisation fails only when
 * H + damping is not positive definite, which is reported and returns -1.
 */
#ifndef SWIFT_GPTQ_H
#define SWIFT_GPTQ_H

#include <stddef.h>
#include <stdint.h>

struct swift_gptq_params {
    int bits;   /* 2..8 */
    int group;  /* columns per scale group; must divide in_features */
    int block;  /* columns per lazy-update block (128) */
    float damp; /* fraction of the mean diagonal added to it (0.01) */
};

struct swift_gptq_stats {
    double loss;      /* the GPTQ objective: sum of (w - q)^2 / U_ii^2 / 2 (auto-gptq's Losses) */
    int dead_columns; /* inputs that never fired (H_ii = 0) */
};

/* H (in,in) += x^T x for x (n,in) row-major; only the upper triangle is maintained (row-major
 * i <= j); swift_gptq_quantize and swift_gptq_output_error read it so. */
void swift_gptq_hessian_add(float *H, const float *x, int n, int in);

/* Quantize W (out,in) row-major in place: on return W holds the dequantized weights
 * scale * (q - zero) that GPTQ settled on, codes (out,in) the q values, scales
 * (in/group, out) the group scales (zero is (maxq+1)/2 for every group: symmetric).
 * H (upper triangle as swift_gptq_hessian_add leaves it) is destroyed. name is for messages.
 * Returns 0, or -1 after an error. */
int swift_gptq_quantize(float *W, float *H, int out, int in, const struct swift_gptq_params *p,
                        uint8_t *codes, float *scales, struct swift_gptq_stats *st,
                        const char *name);

/* Round-to-nearest with the same scale rule and group layout (no Hessian): the baseline. W is
 * replaced by its dequantized values, codes and scales filled as above. When scale16 is set,
 * scales are rounded to fp16 before quantizing (what a loader will use). */
void swift_gptq_rtn(float *W, int out, int in, int bits, int group, int scale16, uint8_t *codes,
                    float *scales);

/* The layer's output error on the calibration inputs, relative to its output:
 * tr(D H D^T) / tr(W H W^T) with D = W - Wq, H the upper-triangle Hessian. */
double swift_gptq_output_error(const float *W, const float *Wq, const float *H, int out, int in);

/* Read one linear layer of a GPTQ checkpoint, NAME = "model.layers.0.mlp.up_proj.weight":
 * NAME's "qweight" (int32 [in/(32/bits), out]), "qzeros" (int32 [groups, out/(32/bits)]),
 * "scales" (fp16 [groups, out]) and, when present, "g_idx" (int32 [in], group of each input;
 * absent: i / (in/groups)), bits 2, 4 or 8 from the shapes, into W (out,in):
 *     W[o][i] = scales[g][o] * (q[i][o] - zero[g][o]),  g = g_idx[i]
 * with the zero as stored plus one, masked to the bits, when zeros_minus_one (auto-gptq's
 * checkpoint_format "gptq", read as its QuantLinear does; GPTQModel's "gptq_v2" stores it as
 * is). Returns 0, or -1 after an error naming the
 * file and tensor. */
struct swift_st_set;
int swift_gptq_dequant_set(const struct swift_st_set *set, const char *name, int out, int in,
                           int zeros_minus_one, float *W);

#endif
