/*
 * analyze/roofline — FLOPs and bytes per op class, and device peaks. The conventions are in
 * roofline.h; tests/unit/test_roofline.c holds hand-computed cases.
 */
#include "lib/analyze/roofline.h"

#include <math.h>
#include <string.h>

#include "lib/core/banned.h"

static const char *const class_names[SWIFT_RF_NCLASS] = {"",
                                                         "gemm",
                                                         "attention_fwd",
                                                         "attention_bwd",
                                                         "conv",
                                                         "softmax",
                                                         "norm",
                                                         "elementwise",
                                                         "embedding",
                                                         "cross_entropy",
                                                         "optimizer"};

const char *swift_rf_class_name(enum swift_rf_class cls)
{
    return cls > SWIFT_RF_NONE && cls < SWIFT_RF_NCLASS ? class_names[cls] : "";
}

/* The op's variant within its class, for the formulas below. */
enum var {
    V_MM = 1,    /* a[M,K] b[K,N] */
    V_ADDMM,     /* bias, a[M,K], b[K,N] */
    V_BMM,       /* a[B,M,K] b[B,K,N] */
    V_BADDBMM,   /* bias, a[B,M,K], b[B,K,N] */
    V_MATMUL,    /* broadcasting matmul */
    V_LINEAR,    /* x[...,K] w[N,K] */
    V_SDPA,      /* q[B,H,S,D] k v first */
    V_SDPA_BSHD, /* q[B,S,H,D] k v first */
    V_SDPA_B,    /* grad_out, q[B,H,S,D], k, v */
    V_SDPA_B_BSHD,
    V_CONV,       /* x, w, bias?, stride... */
    V_CONV_B2,    /* input, grad_output, weight (cudnn_convolution_backward) */
    V_CONV_B2NEW, /* grad_output, input, weight (convolution_backward) */
    V_CONV_BIN,   /* self_size, grad_output, weight: grad_input only */
    V_SOFTMAX,
    V_SOFTMAX_B,
    V_LN,
    V_LN_B,
    V_RMS,
    V_RMS_B,
    V_EW,
    V_COPY,
    V_EMB,   /* weight[V,D], indices */
    V_EMB_B, /* grad[...,D], indices */
    V_CE,    /* logits[N,V], target */
    V_NLL,   /* log_probs[N,V], target */
    V_ADAM
};

struct opdef {
    const char *name;
    enum swift_rf_class cls;
    enum var v;
};

static const struct opdef ops[] = {
    {"mm", SWIFT_RF_GEMM, V_MM},
    {"addmm", SWIFT_RF_GEMM, V_ADDMM},
    {"_addmm_activation", SWIFT_RF_GEMM, V_ADDMM},
    {"bmm", SWIFT_RF_GEMM, V_BMM},
    {"baddbmm", SWIFT_RF_GEMM, V_BADDBMM},
    {"matmul", SWIFT_RF_GEMM, V_MATMUL},
    {"linear", SWIFT_RF_GEMM, V_LINEAR},
    {"scaled_dot_product_attention", SWIFT_RF_ATTN_FWD, V_SDPA},
    {"_scaled_dot_product_flash_attention", SWIFT_RF_ATTN_FWD, V_SDPA},
    {"_scaled_dot_product_efficient_attention", SWIFT_RF_ATTN_FWD, V_SDPA},
    {"_scaled_dot_product_cudnn_attention", SWIFT_RF_ATTN_FWD, V_SDPA},
    {"_scaled_dot_product_flash_attention_for_cpu", SWIFT_RF_ATTN_FWD, V_SDPA},
    {"_flash_attention_forward", SWIFT_RF_ATTN_FWD, V_SDPA_BSHD},
    {"_efficient_attention_forward", SWIFT_RF_ATTN_FWD, V_SDPA_BSHD},
    {"_scaled_dot_product_flash_attention_backward", SWIFT_RF_ATTN_BWD, V_SDPA_B},
    {"_scaled_dot_product_efficient_attention_backward", SWIFT_RF_ATTN_BWD, V_SDPA_B},
    {"_scaled_dot_product_cudnn_attention_backward", SWIFT_RF_ATTN_BWD, V_SDPA_B},
    {"_scaled_dot_product_flash_attention_for_cpu_backward", SWIFT_RF_ATTN_BWD, V_SDPA_B},
    {"_flash_attention_backward", SWIFT_RF_ATTN_BWD, V_SDPA_B_BSHD},
    {"_efficient_attention_backward", SWIFT_RF_ATTN_BWD, V_SDPA_B_BSHD},
    {"convolution", SWIFT_RF_CONV, V_CONV},
    {"_convolution", SWIFT_RF_CONV, V_CONV},
    {"conv1d", SWIFT_RF_CONV, V_CONV},
    {"conv2d", SWIFT_RF_CONV, V_CONV},
    {"conv3d", SWIFT_RF_CONV, V_CONV},
    {"cudnn_convolution", SWIFT_RF_CONV, V_CONV},
    {"convolution_backward", SWIFT_RF_CONV, V_CONV_B2NEW},
    {"cudnn_convolution_backward", SWIFT_RF_CONV, V_CONV_B2},
    {"cudnn_convolution_backward_input", SWIFT_RF_CONV, V_CONV_BIN},
    {"softmax", SWIFT_RF_SOFTMAX, V_SOFTMAX},
    {"_softmax", SWIFT_RF_SOFTMAX, V_SOFTMAX},
    {"log_softmax", SWIFT_RF_SOFTMAX, V_SOFTMAX},
    {"_log_softmax", SWIFT_RF_SOFTMAX, V_SOFTMAX},
    {"_softmax_backward_data", SWIFT_RF_SOFTMAX, V_SOFTMAX_B},
    {"_log_softmax_backward_data", SWIFT_RF_SOFTMAX, V_SOFTMAX_B},
    {"layer_norm", SWIFT_RF_NORM, V_LN},
    {"native_layer_norm", SWIFT_RF_NORM, V_LN},
    {"native_layer_norm_backward", SWIFT_RF_NORM, V_LN_B},
    {"batch_norm", SWIFT_RF_NORM, V_LN},
    {"native_batch_norm", SWIFT_RF_NORM, V_LN},
    {"cudnn_batch_norm", SWIFT_RF_NORM, V_LN},
    {"native_batch_norm_backward", SWIFT_RF_NORM, V_LN_B},
    {"cudnn_batch_norm_backward", SWIFT_RF_NORM, V_LN_B},
    {"rms_norm", SWIFT_RF_NORM, V_RMS},
    {"_fused_rms_norm", SWIFT_RF_NORM, V_RMS},
    {"_fused_rms_norm_backward", SWIFT_RF_NORM, V_RMS_B},
    {"add", SWIFT_RF_ELEMENTWISE, V_EW},
    {"add_", SWIFT_RF_ELEMENTWISE, V_EW},
    {"sub", SWIFT_RF_ELEMENTWISE, V_EW},
    {"sub_", SWIFT_RF_ELEMENTWISE, V_EW},
    {"mul", SWIFT_RF_ELEMENTWISE, V_EW},
    {"mul_", SWIFT_RF_ELEMENTWISE, V_EW},
    {"div", SWIFT_RF_ELEMENTWISE, V_EW},
    {"div_", SWIFT_RF_ELEMENTWISE, V_EW},
    {"neg", SWIFT_RF_ELEMENTWISE, V_EW},
    {"exp", SWIFT_RF_ELEMENTWISE, V_EW},
    {"rsqrt", SWIFT_RF_ELEMENTWISE, V_EW},
    {"pow", SWIFT_RF_ELEMENTWISE, V_EW},
    {"relu", SWIFT_RF_ELEMENTWISE, V_EW},
    {"relu_", SWIFT_RF_ELEMENTWISE, V_EW},
    {"gelu", SWIFT_RF_ELEMENTWISE, V_EW},
    {"gelu_backward", SWIFT_RF_ELEMENTWISE, V_EW},
    {"silu", SWIFT_RF_ELEMENTWISE, V_EW},
    {"silu_", SWIFT_RF_ELEMENTWISE, V_EW},
    {"silu_backward", SWIFT_RF_ELEMENTWISE, V_EW},
    {"sigmoid", SWIFT_RF_ELEMENTWISE, V_EW},
    {"tanh", SWIFT_RF_ELEMENTWISE, V_EW},
    {"threshold_backward", SWIFT_RF_ELEMENTWISE, V_EW},
    {"clamp_min", SWIFT_RF_ELEMENTWISE, V_EW},
    {"clamp_min_", SWIFT_RF_ELEMENTWISE, V_EW},
    {"fill_", SWIFT_RF_ELEMENTWISE, V_COPY},
    {"zero_", SWIFT_RF_ELEMENTWISE, V_COPY},
    {"copy_", SWIFT_RF_ELEMENTWISE, V_COPY},
    {"embedding", SWIFT_RF_EMBEDDING, V_EMB},
    {"embedding_dense_backward", SWIFT_RF_EMBEDDING, V_EMB_B},
    {"cross_entropy_loss", SWIFT_RF_CROSS_ENTROPY, V_CE},
    {"nll_loss", SWIFT_RF_CROSS_ENTROPY, V_NLL},
    {"nll_loss_forward", SWIFT_RF_CROSS_ENTROPY, V_NLL},
    {"_fused_adamw_", SWIFT_RF_OPTIMIZER, V_ADAM},
    {"_fused_adam_", SWIFT_RF_OPTIMIZER, V_ADAM},
    {"adamw", SWIFT_RF_OPTIMIZER, V_ADAM},
};

static const struct opdef *find(const char *name)
{
    if (!name)
        return NULL;
    if (!strncmp(name, "aten::", 6))
        name += 6;
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
        if (!strcmp(ops[i].name, name))
            return &ops[i];
    return NULL;
}

enum swift_rf_class swift_rf_class_of(const char *name)
{
    const struct opdef *d = find(name);
    return d ? d->cls : SWIFT_RF_NONE;
}

/* ---------- shapes ---------- */

static int is_t(const struct swift_rf_tensor *t)
{
    return t && t->ndim > 0;
}

static double numel(const struct swift_rf_tensor *t)
{
    double n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= (double)t->d[i];
    return n;
}

static double esz(const struct swift_rf_tensor *t)
{
    return t->elt > 0 ? t->elt : 4;
}

static double tbytes(const struct swift_rf_tensor *t)
{
    return is_t(t) ? numel(t) * esz(t) : 0;
}

/* Every tensor argument once. */
static double in_bytes(const struct swift_rf_tensor *in, size_t n)
{
    double b = 0;
    for (size_t i = 0; i < n; i++)
        b += tbytes(&in[i]);
    return b;
}

/* The tensor argument with the most elements (-1 when none). */
static long largest(const struct swift_rf_tensor *in, size_t n)
{
    long best = -1;
    for (size_t i = 0; i < n; i++)
        if (is_t(&in[i]) && (best < 0 || numel(&in[i]) > numel(&in[best])))
            best = (long)i;
    return best;
}

/* ---------- GEMM ---------- */

/* 2·batch·M·N·K, bytes: inputs + output [batch, M, N] at the dtype of a. */
static int gemm(const struct swift_rf_tensor *in, size_t n, size_t ia, double batch, double m,
                double nn, double k, struct swift_rf_cost *c)
{
    c->flops = 2 * batch * m * nn * k;
    c->bytes = in_bytes(in, n) + batch * m * nn * esz(&in[ia]);
    return 0;
}

static int cost_gemm(enum var v, const struct swift_rf_tensor *in, size_t n,
                     struct swift_rf_cost *c)
{
    size_t ia = v == V_ADDMM || v == V_BADDBMM ? 1 : 0;
    if (n < ia + 2 || !is_t(&in[ia]) || !is_t(&in[ia + 1]))
        return -1;
    const struct swift_rf_tensor *a = &in[ia], *b = &in[ia + 1];
    switch (v) {
    case V_MM:
    case V_ADDMM:
        if (a->ndim != 2 || b->ndim != 2 || a->d[1] != b->d[0])
            return -1;
        return gemm(in, n, ia, 1, (double)a->d[0], (double)b->d[1], (double)a->d[1], c);
    case V_BMM:
    case V_BADDBMM:
        if (a->ndim != 3 || b->ndim != 3 || a->d[2] != b->d[1] || a->d[0] != b->d[0])
            return -1;
        return gemm(
            in, n, ia, (double)a->d[0], (double)a->d[1], (double)b->d[2], (double)a->d[2], c);
    case V_LINEAR: /* x[..., K] w[N, K] */
        if (b->ndim != 2 || a->d[a->ndim - 1] != b->d[1])
            return -1;
        return gemm(in, n, 0, numel(a) / (double)b->d[1], 1, (double)b->d[0], (double)b->d[1], c);
    default: { /* matmul: a[..., M, K] b[..., K, N], 1-d operands promoted, batch broadcast */
        double m = a->ndim >= 2 ? (double)a->d[a->ndim - 2] : 1;
        double k = (double)a->d[a->ndim - 1];
        double kb = b->ndim >= 2 ? (double)b->d[b->ndim - 2] : (double)b->d[0];
        double nn = b->ndim >= 2 ? (double)b->d[b->ndim - 1] : 1;
        if (k != kb)
            return -1;
        double ba = a->ndim > 2 ? numel(a) / (m * k) : 1,
               bb = b->ndim > 2 ? numel(b) / (k * nn) : 1;
        return gemm(in, n, 0, ba > bb ? ba : bb, m, nn, k, c);
    }
    }
}

/* ---------- attention ---------- */

static int cost_attn(enum var v, const struct swift_rf_tensor *in, size_t n, int causal,
                     struct swift_rf_cost *c)
{
    int bwd = v == V_SDPA_B || v == V_SDPA_B_BSHD;
    int bshd = v == V_SDPA_BSHD || v == V_SDPA_B_BSHD;
    size_t iq = bwd ? 1 : 0;
    if (n < iq + 3)
        return -1;
    const struct swift_rf_tensor *q = &in[iq], *k = &in[iq + 1], *vv = &in[iq + 2];
    if (q->ndim != 4 || k->ndim != 4 || vv->ndim != 4)
        return -1;
    int ih = bshd ? 2 : 1, is = bshd ? 1 : 2;
    double b = (double)q->d[0], h = (double)q->d[ih], s = (double)q->d[is];
    double t = (double)k->d[is], d = (double)q->d[3], dv = (double)vv->d[3];
    if (k->d[3] != q->d[3] || k->d[is] != vv->d[is])
        return -1;
    double fl = bwd ? 2 * b * h * s * t * (3 * d + 2 * dv) : 2 * b * h * s * t * (d + dv);
    c->flops = causal ? fl / 2 : fl;
    double out = b * h * s * dv * esz(q);
    if (bwd) /* dO, Q, K, V, O read (+ what else is passed), dQ, dK, dV written */
        c->bytes = in_bytes(in, n) + tbytes(q) + tbytes(k) + tbytes(vv);
    else
        c->bytes = tbytes(q) + tbytes(k) + tbytes(vv) + out;
    return 0;
}

/* ---------- convolution ---------- */

/* 2·prod(out)·prod(w[1:]); bytes: x + w + out. */
static void conv_of(const struct swift_rf_tensor *x, const struct swift_rf_tensor *w, double out,
                    double times, struct swift_rf_cost *c)
{
    double wk = numel(w) / (double)w->d[0];
    c->flops = times * 2 * out * wk;
    c->bytes = tbytes(x) + tbytes(w) + out * esz(w);
}

static int cost_conv(enum var v, const struct swift_rf_tensor *in, size_t n,
                     const struct swift_rf_extra *x, struct swift_rf_cost *c)
{
    if (n < 3 && v != V_CONV)
        return -1;
    if (v == V_CONV) {
        if (n < 2 || !is_t(&in[0]) || in[1].ndim != in[0].ndim || in[0].ndim < 3 || !x ||
            x->nsp != in[0].ndim - 2 || x->nsp > 3)
            return -1;
        const struct swift_rf_tensor *xi = &in[0], *w = &in[1];
        double out = (double)xi->d[0] * (double)w->d[0];
        for (int i = 0; i < x->nsp; i++) {
            int64_t o =
                (xi->d[2 + i] + 2 * x->padding[i] - x->dilation[i] * (w->d[2 + i] - 1) - 1) /
                    (x->stride[i] ? x->stride[i] : 1) +
                1;
            if (o <= 0)
                return -1;
            out *= (double)o;
        }
        conv_of(xi, w, out, 1, c);
        c->bytes += tbytes(&in[2]) * (n > 2);
        return 0;
    }
    const struct swift_rf_tensor *go = &in[v == V_CONV_B2NEW ? 0 : 1], *w = &in[2];
    const struct swift_rf_tensor *xi = &in[v == V_CONV_B2NEW ? 1 : 0];
    if (!is_t(go) || w->ndim != go->ndim || go->ndim < 3)
        return -1;
    if (v == V_CONV_BIN) {
        conv_of(go, w, numel(go), 1, c); /* reads dO and w, writes dX (as large as x) */
        return 0;
    }
    if (xi->ndim != go->ndim)
        return -1;
    conv_of(go, w, numel(go), 2, c);
    c->bytes = 2 * tbytes(xi) + 2 * tbytes(w) + tbytes(go); /* x, w, dO read; dX, dW written */
    return 0;
}

/* ---------- the per-element classes ---------- */

static int cost_elem(enum var v, const struct swift_rf_tensor *in, size_t n,
                     struct swift_rf_cost *c)
{
    long il = largest(in, n);
    if (il < 0)
        return -1;
    const struct swift_rf_tensor *t = &in[il];
    double ne = numel(t), e = esz(t), all = in_bytes(in, n);
    switch (v) {
    case V_SOFTMAX:
        c->flops = 5 * ne;
        c->bytes = 2 * ne * e;
        break;
    case V_SOFTMAX_B: /* grad_out, output: read both, write grad_in */
        c->flops = 3 * ne;
        c->bytes = all + ne * e;
        break;
    case V_LN:
    case V_RMS:
        c->flops = (v == V_LN ? 8 : 4) * ne;
        c->bytes = all + ne * e;
        break;
    case V_LN_B:
    case V_RMS_B:
        c->flops = (v == V_LN_B ? 16 : 8) * ne;
        c->bytes = all + ne * e;
        break;
    case V_COPY:
        c->flops = 0;
        c->bytes = all + ne * e;
        if (n == 1 || (n > 1 && !is_t(&in[1]))) /* fill_, zero_: a write */
            c->bytes = ne * e;
        break;
    default:
        c->flops = ne;
        c->bytes = all + ne * e;
        break;
    }
    return 0;
}

static int cost_misc(enum var v, const struct swift_rf_tensor *in, size_t n,
                     struct swift_rf_cost *c)
{
    if (n < 2 || !is_t(&in[0]) || !is_t(&in[1]))
        return -1;
    const struct swift_rf_tensor *a = &in[0], *b = &in[1];
    double dim = (double)a->d[a->ndim - 1];
    switch (v) {
    case V_EMB: /* weight[V, D], indices[...]: read the rows, write them out */
        if (a->ndim != 2)
            return -1;
        c->flops = 0;
        c->bytes = tbytes(b) + 2 * numel(b) * dim * esz(a);
        return 0;
    case V_EMB_B: /* grad[..., D], indices: accumulate each gradient row into its weight row */
        c->flops = numel(a);
        c->bytes = tbytes(a) + tbytes(b) + 2 * numel(a) * esz(a);
        return 0;
    case V_CE: /* logits[N, V] (or [V]), target: log_softmax then the NLL gather */
        c->flops = 6 * numel(a);
        c->bytes = 2 * tbytes(a) + tbytes(b) + esz(a);
        return 0;
    default: /* nll_loss: log_probs[N, V], target: one gather per row */
        c->flops = numel(a) / dim;
        c->bytes = numel(a) / dim * esz(a) + tbytes(b) + esz(a);
        return 0;
    }
}

static int cost_adam(const struct swift_rf_tensor *in, size_t n, struct swift_rf_cost *c)
{
    /* params first: its tensors (a Kineto TensorList records no dims: then no formula) */
    if (n < 1 || !is_t(&in[0]))
        return -1;
    double p = numel(&in[0]);
    c->flops = 14 * p;
    c->bytes = 7 * p * esz(&in[0]);
    return 0;
}

enum swift_rf_class swift_rf_cost(const char *name, const struct swift_rf_tensor *in, size_t n,
                                  const struct swift_rf_extra *x, struct swift_rf_cost *c)
{
    memset(c, 0, sizeof(*c));
    const struct opdef *d = find(name);
    if (!d || (n && !in))
        return SWIFT_RF_NONE;
    int rc;
    switch (d->cls) {
    case SWIFT_RF_GEMM:
        rc = cost_gemm(d->v, in, n, c);
        break;
    case SWIFT_RF_ATTN_FWD:
    case SWIFT_RF_ATTN_BWD:
        rc = cost_attn(d->v, in, n, x && x->causal, c);
        break;
    case SWIFT_RF_CONV:
        rc = cost_conv(d->v, in, n, x, c);
        break;
    case SWIFT_RF_EMBEDDING:
    case SWIFT_RF_CROSS_ENTROPY:
        rc = cost_misc(d->v, in, n, c);
        break;
    case SWIFT_RF_OPTIMIZER:
        rc = cost_adam(in, n, c);
        break;
    default:
        rc = cost_elem(d->v, in, n, c);
        break;
    }
    if (rc < 0 || !isfinite(c->flops) || !isfinite(c->bytes)) {
        memset(c, 0, sizeof(*c));
        return SWIFT_RF_NONE;
    }
    c->cls = d->cls;
    return d->cls;
}

/* ---------- dtypes ---------- */

int swift_rf_dtype_size(const char *t)
{
    if (!t)
        return 0;
    if (!strncmp(t, "c10::", 5))
        t += 5;
    static const struct {
        const char *name;
        int size;
    } types[] = {{"float", 4},
                 {"double", 8},
                 {"BFloat16", 2},
                 {"Half", 2},
                 {"long int", 8},
                 {"int64_t", 8},
                 {"long", 8},
                 {"int", 4},
                 {"short int", 2},
                 {"bool", 1},
                 {"unsigned char", 1},
                 {"signed char", 1},
                 {"complex<float>", 8},
                 {"complex<double>", 16}};
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        if (!strcmp(types[i].name, t))
            return types[i].size;
    if (!strncmp(t, "Float8", 6) || !strncmp(t, "float8", 6))
        return 1;
    return 0;
}

/* ---------- device peaks ---------- */

/*
 * Dense (no sparsity) peaks from the vendors' datasheets:
 * - H100 SXM5 / H200: NVIDIA H100 Tensor Core GPU datasheet and H200 product page: BF16/FP16
 *   989.4 TFLOP/s, FP32 66.9 (no TF32), FP64 66.9 (tensor); HBM3 3.35 TB/s (H100 SXM),
 *   HBM3e 4.8 TB/s (H200). H100 PCIe: BF16 756, FP32 51.2, FP64 51.2; 2.0 TB/s.
 * - A100: NVIDIA A100 datasheet: BF16/FP16 312, FP32 19.5, FP64 19.5 (tensor); 80GB SXM4
 *   2.039 TB/s, 80GB PCIe 1.935 TB/s, 40GB 1.555 TB/s.
 * - V100: NVIDIA V100 datasheet: FP16 tensor 125 (SXM2, the DGX Station's "DGXS" too) or 112
 *   (PCIe), FP32 15.7 / 14, FP64 7.8 / 7; HBM2 900 GB/s. No BF16 (2-byte: the FP16 figure).
 * - L4: NVIDIA L4 datasheet: FP16/BF16 121, FP32 30.3; 300 GB/s.
 * Matched by substring of the deviceProperties name, the more specific first.
 */
static const struct {
    const char *match;
    double p16, p32, p64, tbps;
} peaks[] = {
    {"H200", 989.4, 66.9, 66.9, 4.8},
    {"H100 PCIe", 756.0, 51.2, 51.2, 2.0},
    {"H100", 989.4, 66.9, 66.9, 3.35},
    {"A100-SXM4-80GB", 312.0, 19.5, 19.5, 2.039},
    {"A100 80GB PCIe", 312.0, 19.5, 19.5, 1.935},
    {"A100", 312.0, 19.5, 19.5, 1.555},
    {"V100-PCIE", 112.0, 14.0, 7.0, 0.9},
    {"V100", 125.0, 15.7, 7.8, 0.9},
    {"L4", 121.0, 30.3, 0.49, 0.3},
};

int swift_rf_peak(const char *device, int elt, struct swift_rf_peak *p)
{
    if (!device)
        return -1;
    for (size_t i = 0; i < sizeof(peaks) / sizeof(peaks[0]); i++) {
        if (!strstr(device, peaks[i].match))
            continue;
        double t = elt == 2 ? peaks[i].p16 : elt == 4 ? peaks[i].p32 : elt == 8 ? peaks[i].p64 : 0;
        if (t <= 0)
            return -1;
        p->tflops = t;
        p->tbps = peaks[i].tbps;
        return 0;
    }
    return -1;
}

double swift_rf_fraction(double flops, double bytes, double us, const struct swift_rf_peak *p)
{
    if (!(us > 0) || !(bytes > 0) || !(flops >= 0) || !p || !(p->tflops > 0) || !(p->tbps > 0))
        return NAN;
    if (flops == 0) /* a copy or a gather: the bandwidth roof alone */
        return bytes / (us * 1e-6) / (p->tbps * 1e12);
    double ai = flops / bytes;      /* FLOP per byte */
    double roof = p->tflops * 1e12; /* FLOP/s */
    if (ai * p->tbps * 1e12 < roof)
        roof = ai * p->tbps * 1e12;
    return flops / (us * 1e-6) / roof;
}
