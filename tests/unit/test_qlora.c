/* QLoRA: a model whose base linears are 4-bit (swift_model_quantize4, NF4 and FP4, with and
 * without double quantization) gives the loss and LoRA gradients of the same model with those
 * linears replaced by their dequantized float32 weights (the fused dequant-matmul against plain
 * sgemm), keeps norms, embeddings and lm_head in float32, and stores its base linears in at most
 * 0.29 of their bf16 bytes; the same for --quant-bits 8 (swift_model_quantize8, int8 rows, at
 * most 0.56 of bf16 on the fixture's narrow rows). Fixture: tests/fixtures/model/llama with its
 * LoRA adapter. */
#include "lib/model/model.h"
#include "kernels/ops.h"
#include "kernels/quant4.h"
#include "kernels/quant8.h"
#include "lib/model/lora.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define DIR "tests/fixtures/model/llama"

static void load(struct swift_model *m)
{
    struct swift_lora_opts lo;
    assert_int_equal(swift_model_load(m, DIR, &swift_cpu_ops, 1), 0);
    assert_int_equal(swift_lora_load(m, DIR "/adapter", &lo), 0);
}

static double step(struct swift_model *m, const struct swift_batch *b)
{
    struct swift_loss l = {0};
    swift_model_zero_grad(m);
    assert_int_equal(swift_model_forward(m, b, &l, 1.0f / 8), 0);
    swift_model_backward(m, b);
    return l.sum / (double)l.count;
}

/* type SWIFT_Q4_NF4/FP4 with dq, or 8: --quant-bits 8 */
static void check(int type, int dq)
{
    struct swift_model ref, q;
    load(&ref);
    load(&q);
    size_t before = q.nparams;
    if (type == 8) {
        assert_int_equal(swift_model_quantize8(&q), 0);
        assert_true((double)q.q4_bytes <= 0.56 * 2.0 * (double)q.q4_numel);
    } else {
        assert_int_equal(swift_model_quantize4(&q, type, dq), 0);
        assert_true((double)q.q4_bytes <= 0.29 * 2.0 * (double)q.q4_numel);
    }
    assert_true(q.nparams < before);
    /* the reference: the same linears, dequantized, in float32 */
    for (int l = 0; l < q.cfg.num_layers; l++)
        for (int k = 0; k < SWIFT_LIN_COUNT; k++) {
            struct swift_linear *L = &q.layers[l].lin[k];
            assert_null(L->w);
            if (type == 8) {
                assert_non_null(L->q8);
                assert_null(L->q4);
                swift_q8_dequant(L->q8, 0, L->out, ref.layers[l].lin[k].w);
            } else {
                assert_non_null(L->q4);
                swift_q4_dequant(L->q4, 0, L->q4->n, ref.layers[l].lin[k].w);
            }
        }
    assert_non_null(swift_model_param(&q, "model.norm.weight"));
    assert_null(swift_model_param(&q, "model.layers.0.mlp.up_proj.weight"));
    int B = 2, T = 8, N = B * T;
    int32_t tok[16], tgt[16], pos[16];
    for (int n = 0; n < N; n++) {
        tok[n] = (n * 37 + 11) % q.cfg.vocab_size;
        pos[n] = n % T;
    }
    for (int n = 0; n < N; n++)
        tgt[n] = n % T == T - 1 ? -1 : tok[n + 1];
    struct swift_batch b = {.B = B, .T = T, .tokens = tok, .targets = tgt, .pos = pos};
    double l0 = step(&ref, &b), l1 = step(&q, &b);
    if (fabs(l0 - l1) > 1e-5 * fabs(l0))
        fail_msg("loss %.9g, dequantized reference %.9g", l1, l0);
    assert_int_equal(q.nlora, ref.nlora);
    float gmax = 0;
    for (size_t i = 0; i < ref.nlora; i++)
        gmax = fmaxf(gmax, fabsf(ref.lora_grads[i]));
    assert_true(gmax > 0);
    for (size_t i = 0; i < ref.nlora; i++)
        if (fabsf(ref.lora_grads[i] - q.lora_grads[i]) > 1e-4f * gmax)
            fail_msg("LoRA gradient %zu: %g, dequantized reference %g",
                     i,
                     q.lora_grads[i],
                     ref.lora_grads[i]);
    swift_model_free(&ref);
    swift_model_free(&q);
}

static void test_nf4_dq(void **s)
{
    (void)s;
    check(SWIFT_Q4_NF4, 1);
}

static void test_nf4(void **s)
{
    (void)s;
    check(SWIFT_Q4_NF4, 0);
}

static void test_fp4_dq(void **s)
{
    (void)s;
    check(SWIFT_Q4_FP4, 1);
}

static void test_int8(void **s)
{
    (void)s;
    check(8, 0);
}

static void test_trainable_base_refused(void **s)
{
    (void)s;
    struct swift_model m;
    assert_int_equal(swift_model_load(&m, DIR, &swift_cpu_ops, 0), 0);
    assert_int_equal(swift_model_quantize4(&m, SWIFT_Q4_NF4, 1), -1);
    assert_int_equal(swift_model_quantize8(&m), -1);
    swift_model_free(&m);
}

/* a backend without the 4-bit ops refuses a 4-bit base (the CUDA table had none before
 * kernels/cuda/quant4.cu; test_backend_ops checks it has them now) */
static void test_backend_without_matmul4(void **s)
{
    (void)s;
    struct swift_ops nogpu = swift_cpu_ops;
    nogpu.name = "cuda";
    nogpu.matmul4_fwd = NULL;
    nogpu.matmul4_bwd = NULL;
    struct swift_model m;
    assert_int_equal(swift_model_load(&m, DIR, &nogpu, 1), 0);
    assert_int_equal(swift_model_quantize4(&m, SWIFT_Q4_NF4, 1), -1);
    nogpu.matmul8_fwd = NULL;
    nogpu.matmul8_bwd = NULL;
    assert_int_equal(swift_model_quantize8(&m), -1);
    for (int l = 0; l < m.cfg.num_layers; l++)
        assert_non_null(m.layers[l].lin[0].w); /* left as it was */
    swift_model_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nf4_dq),
        cmocka_unit_test(test_nf4),
        cmocka_unit_test(test_fp4_dq),
        cmocka_unit_test(test_int8),
        cmocka_unit_test(test_trainable_base_refused),
        cmocka_unit_test(test_backend_without_matmul4),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
