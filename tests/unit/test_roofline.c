/* analyze/roofline: FLOPs and bytes per op class on hand-computed cases, PyTorch's own formulas
 * (tests/ref/fixtures/roofline/torch_flops.tsv from tests/ref/gen_roofline.py), the peak table
 * and the roofline fraction. */
#include "lib/analyze/roofline.h"

#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* A tensor from a dim list (ndim 0 ... ends at -1), elt bytes per element. */
static struct swift_rf_tensor T(int elt, int ndim, ...) {
    struct swift_rf_tensor t = {.ndim = ndim, .elt = elt};
    va_list ap;
    va_start(ap, ndim);
    for (int i = 0; i < ndim; i++)
        t.d[i] = va_arg(ap, int64_t);
    va_end(ap);
    return t;
}
#define NONE ((struct swift_rf_tensor){.ndim = 0})
#define I64(x) ((int64_t)(x))

static void
test_gemm(void **state)
{
    (void)state;
    struct swift_rf_cost c;
    /* addmm(bias[1000], x[32,2048], w[2048,1000]) fp32: 2*32*1000*2048 FLOPs; bytes
     * 4*(1000 + 32*2048 + 2048*1000 + 32*1000) */
    struct swift_rf_tensor a[5] = {
        T(4, 1, I64(1000)), T(4, 2, I64(32), I64(2048)), T(4, 2, I64(2048), I64(1000)), NONE, NONE};
    assert_int_equal(swift_rf_cost("aten::addmm", a, 5, NULL, &c), SWIFT_RF_GEMM);
    assert_true(c.flops == 131072000.0);
    assert_true(c.bytes == 4.0 * (1000 + 65536 + 2048000 + 32000));
    /* mm bf16 [7,13]x[13,5]: 910 FLOPs, 2*(91+65+35) bytes */
    struct swift_rf_tensor m[2] = {T(2, 2, I64(7), I64(13)), T(2, 2, I64(13), I64(5))};
    assert_int_equal(swift_rf_cost("mm", m, 2, NULL, &c), SWIFT_RF_GEMM);
    assert_true(c.flops == 910 && c.bytes == 2.0 * (91 + 65 + 35));
    /* inner dims that do not match: no formula */
    m[1].d[0] = 12;
    assert_int_equal(swift_rf_cost("aten::mm", m, 2, NULL, &c), SWIFT_RF_NONE);
    assert_true(c.flops == 0);
    /* bmm [12,128,64]x[12,64,128] = 2*12*128*128*64 */
    struct swift_rf_tensor b[2] = {T(2, 3, I64(12), I64(128), I64(64)),
                                   T(2, 3, I64(12), I64(64), I64(128))};
    assert_int_equal(swift_rf_cost("aten::bmm", b, 2, NULL, &c), SWIFT_RF_GEMM);
    assert_true(c.flops == 25165824.0);
    /* linear(x[4,512,4096], w[11008,4096], bias): 2*2048*11008*4096 */
    struct swift_rf_tensor l[3] = {
        T(2, 3, I64(4), I64(512), I64(4096)), T(2, 2, I64(11008), I64(4096)), T(2, 1, I64(11008))};
    assert_int_equal(swift_rf_cost("aten::linear", l, 3, NULL, &c), SWIFT_RF_GEMM);
    assert_true(c.flops == 2.0 * 2048 * 11008 * 4096);
    assert_true(c.bytes == 2.0 * (2048.0 * 4096 + 11008.0 * 4096 + 11008 + 2048.0 * 11008));
    /* matmul with broadcast batch: [8,16,32]x[32,10] = 2*8*16*10*32; vector: [32]x[32,10] */
    struct swift_rf_tensor mm[2] = {T(4, 3, I64(8), I64(16), I64(32)), T(4, 2, I64(32), I64(10))};
    assert_int_equal(swift_rf_cost("aten::matmul", mm, 2, NULL, &c), SWIFT_RF_GEMM);
    assert_true(c.flops == 81920.0);
    mm[0] = T(4, 1, I64(32));
    assert_int_equal(swift_rf_cost("aten::matmul", mm, 2, NULL, &c), SWIFT_RF_GEMM);
    assert_true(c.flops == 640.0);
    /* too few tensors */
    assert_int_equal(swift_rf_cost("aten::addmm", a, 2, NULL, &c), SWIFT_RF_NONE);
}

static void test_attention(void **state)
{
    (void)state;
    struct swift_rf_cost c;
    /* B2 H16 S1024 D64, bf16: forward 4*B*H*S^2*D = 268435456*... */
    struct swift_rf_tensor q = T(2, 4, I64(2), I64(16), I64(1024), I64(64));
    struct swift_rf_tensor a[4] = {q, q, q, NONE};
    double fwd = 4.0 * 2 * 16 * 1024 * 1024 * 64;
    assert_int_equal(swift_rf_cost("aten::_scaled_dot_product_flash_attention", a, 4, NULL, &c),
                     SWIFT_RF_ATTN_FWD);
    assert_true(c.flops == fwd);
    assert_true(c.bytes == 4 * 2.0 * (2 * 16 * 1024 * 64)); /* q, k, v, out */
    struct swift_rf_extra x = {.causal = 1};
    assert_int_equal(swift_rf_cost("aten::scaled_dot_product_attention", a, 4, &x, &c),
                     SWIFT_RF_ATTN_FWD);
    assert_true(c.flops == fwd / 2);
    /* backward: 2.5x, grad_out first */
    struct swift_rf_tensor g[5] = {q, q, q, q, q};
    assert_int_equal(
        swift_rf_cost("aten::_scaled_dot_product_flash_attention_backward", g, 5, NULL, &c),
        SWIFT_RF_ATTN_BWD);
    assert_true(c.flops == 2.5 * fwd);
    assert_int_equal(
        swift_rf_cost("aten::_scaled_dot_product_flash_attention_backward", g, 5, &x, &c),
        SWIFT_RF_ATTN_BWD);
    assert_true(c.flops == 1.25 * fwd);
    /* [B,S,H,D] layout of _flash_attention_forward: the same numbers */
    struct swift_rf_tensor qs = T(2, 4, I64(2), I64(1024), I64(16), I64(64));
    struct swift_rf_tensor f[3] = {qs, qs, qs};
    assert_int_equal(swift_rf_cost("aten::_flash_attention_forward", f, 3, NULL, &c),
                     SWIFT_RF_ATTN_FWD);
    assert_true(c.flops == fwd);
}

static void test_conv(void **state)
{
    (void)state;
    struct swift_rf_cost c;
    /* ResNet-50's stem: x[32,3,224,224] w[64,3,7,7], stride 2, padding 3: out 112x112;
     * 2 * 32*64*112*112 * 3*7*7 */
    struct swift_rf_tensor a[3] = {T(4, 4, I64(32), I64(3), I64(224), I64(224)),
                                   T(4, 4, I64(64), I64(3), I64(7), I64(7)),
                                   NONE};
    assert_int_equal(swift_rf_cost("aten::cudnn_convolution", a, 3, NULL, &c), SWIFT_RF_NONE);
    struct swift_rf_extra x = {.nsp = 2, .stride = {2, 2}, .padding = {3, 3}, .dilation = {1, 1}};
    assert_int_equal(swift_rf_cost("aten::cudnn_convolution", a, 3, &x, &c), SWIFT_RF_CONV);
    double out = 32.0 * 64 * 112 * 112;
    assert_true(c.flops == 2 * out * 147);
    assert_true(c.bytes == 4 * (32.0 * 3 * 224 * 224 + 64 * 147 + out));
    /* backward with grad_output: twice */
    struct swift_rf_tensor b[3] = {a[0], T(4, 4, I64(32), I64(64), I64(112), I64(112)), a[1]};
    assert_int_equal(swift_rf_cost("aten::cudnn_convolution_backward", b, 3, NULL, &c),
                     SWIFT_RF_CONV);
    assert_true(c.flops == 4 * out * 147);
}

static void test_per_element(void **state)
{
    (void)state;
    struct swift_rf_cost c;
    struct swift_rf_tensor x = T(2, 2, I64(4096), I64(32000)); /* bf16 logits */
    double n = 4096.0 * 32000;
    struct swift_rf_tensor s[3] = {x, NONE, NONE};
    assert_int_equal(swift_rf_cost("aten::_softmax", s, 3, NULL, &c), SWIFT_RF_SOFTMAX);
    assert_true(c.flops == 5 * n && c.bytes == 2 * 2 * n);
    /* layer norm x[8,512,768] w[768] b[768] fp32: 8/elem; bytes x + w + b + out */
    struct swift_rf_tensor ln[5] = {
        T(4, 3, I64(8), I64(512), I64(768)), NONE, T(4, 1, I64(768)), T(4, 1, I64(768)), NONE};
    double ne = 8.0 * 512 * 768;
    assert_int_equal(swift_rf_cost("aten::native_layer_norm", ln, 5, NULL, &c), SWIFT_RF_NORM);
    assert_true(c.flops == 8 * ne && c.bytes == 4 * (2 * ne + 1536));
    struct swift_rf_tensor rms[2] = {ln[0], ln[2]};
    assert_int_equal(swift_rf_cost("aten::rms_norm", rms, 2, NULL, &c), SWIFT_RF_NORM);
    assert_true(c.flops == 4 * ne && c.bytes == 4 * (2 * ne + 768));
    /* add_(a, b, alpha): 1 per element, two read, one written */
    struct swift_rf_tensor e[3] = {ln[0], ln[0], NONE};
    assert_int_equal(swift_rf_cost("aten::add_", e, 3, NULL, &c), SWIFT_RF_ELEMENTWISE);
    assert_true(c.flops == ne && c.bytes == 3 * 4 * ne);
    assert_int_equal(swift_rf_cost("aten::zero_", e, 1, NULL, &c), SWIFT_RF_ELEMENTWISE);
    assert_true(c.flops == 0 && c.bytes == 4 * ne);
    /* embedding(weight[32000,4096] bf16, ids[4,512] int64): bytes ids + 2 * rows */
    struct swift_rf_tensor em[2] = {T(2, 2, I64(32000), I64(4096)), T(8, 2, I64(4), I64(512))};
    assert_int_equal(swift_rf_cost("aten::embedding", em, 2, NULL, &c), SWIFT_RF_EMBEDDING);
    assert_true(c.flops == 0 && c.bytes == 8 * 2048.0 + 2 * 2048.0 * 4096 * 2);
    /* cross-entropy over logits[2048, 32000] fp32, target[2048] int64 */
    struct swift_rf_tensor ce[2] = {T(4, 2, I64(2048), I64(32000)), T(8, 1, I64(2048))};
    assert_int_equal(swift_rf_cost("aten::cross_entropy_loss", ce, 2, NULL, &c),
                     SWIFT_RF_CROSS_ENTROPY);
    assert_true(c.flops == 6 * 2048.0 * 32000);
    /* AdamW over 1M fp32 parameters: 14 FLOPs and 7 tensors of 4 bytes each */
    struct swift_rf_tensor p[1] = {T(4, 1, I64(1000000))};
    assert_int_equal(swift_rf_cost("aten::_fused_adamw_", p, 1, NULL, &c), SWIFT_RF_OPTIMIZER);
    assert_true(c.flops == 14e6 && c.bytes == 28e6);
    assert_int_equal(swift_rf_cost("aten::view", p, 1, NULL, &c), SWIFT_RF_NONE);
    assert_string_equal(swift_rf_class_name(SWIFT_RF_ATTN_BWD), "attention_bwd");
    assert_int_equal(swift_rf_class_of("aten::linear"), SWIFT_RF_GEMM);
}

static void test_dtype_peak(void **state)
{
    (void)state;
    assert_int_equal(swift_rf_dtype_size("float"), 4);
    assert_int_equal(swift_rf_dtype_size("c10::BFloat16"), 2);
    assert_int_equal(swift_rf_dtype_size("c10::Half"), 2);
    assert_int_equal(swift_rf_dtype_size("long int"), 8);
    assert_int_equal(swift_rf_dtype_size("GenericList"), 0);
    assert_int_equal(swift_rf_dtype_size(""), 0);
    struct swift_rf_peak p;
    assert_int_equal(swift_rf_peak("NVIDIA H100 80GB HBM3", 2, &p), 0);
    assert_true(p.tflops == 989.4 && p.tbps == 3.35);
    assert_int_equal(swift_rf_peak("NVIDIA H100 PCIe", 4, &p), 0);
    assert_true(p.tflops == 51.2);
    assert_int_equal(swift_rf_peak("Tesla V100-DGXS-32GB", 4, &p), 0);
    assert_true(p.tflops == 15.7 && p.tbps == 0.9);
    assert_int_equal(swift_rf_peak("AMD Radeon Graphics", 2, &p), -1);
    assert_int_equal(swift_rf_peak("NVIDIA H200", 1, &p), -1);
    /* fraction: 1 TFLOP in 1 s at intensity 1000 on 100 TFLOP/s, 1 TB/s: compute-bound roof
     * 100 TFLOP/s -> 0.01; intensity 10: memory roof 10 TFLOP/s -> 0.1 */
    p = (struct swift_rf_peak){100, 1};
    assert_true(fabs(swift_rf_fraction(1e12, 1e9, 1e6, &p) - 0.01) < 1e-12);
    assert_true(fabs(swift_rf_fraction(1e12, 1e11, 1e6, &p) - 0.1) < 1e-12);
    assert_true(fabs(swift_rf_fraction(0, 5e11, 1e6, &p) - 0.5) < 1e-12);
    assert_true(isnan(swift_rf_fraction(1e12, 1e9, 0, &p)));
}

/* Each fixture row: op, Kineto "Input Dims", torch's FLOPs; ours must be equal. */
static void test_torch_reference(void **state)
{
    (void)state;
    FILE *fp = fopen("tests/ref/fixtures/roofline/torch_flops.tsv", "r");
    assert_non_null(fp);
    char line[4096];
    int rows = 0;
    while (fgets(line, sizeof(line), fp)) {
        if (line[0] == '#')
            continue;
        char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
        assert_non_null(t2);
        *t1 = *t2 = 0;
        json_error_t err;
        json_t *dims = json_loads(t1 + 1, 0, &err);
        assert_non_null(dims);
        struct swift_rf_tensor in[16];
        size_t n = json_array_size(dims);
        assert_true(n <= 16);
        for (size_t i = 0; i < n; i++) {
            json_t *d = json_array_get(dims, i);
            in[i] = (struct swift_rf_tensor){.ndim = (int)json_array_size(d), .elt = 2};
            for (size_t j = 0; j < json_array_size(d); j++)
                in[i].d[j] = json_integer_value(json_array_get(d, j));
        }
        struct swift_rf_cost c;
        if (swift_rf_cost(line, in, n, NULL, &c) == SWIFT_RF_NONE ||
            c.flops != strtod(t2 + 1, NULL))
            fail_msg("%s %s: ours %.0f, torch %s", line, t1 + 1, c.flops, t2 + 1);
        json_decref(dims);
        rows++;
    }
    fclose(fp);
    assert_true(rows >= 20);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm),
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_conv),
        cmocka_unit_test(test_per_element),
        cmocka_unit_test(test_dtype_peak),
        cmocka_unit_test(test_torch_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
