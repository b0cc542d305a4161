/* bnb: models that transformers + bitsandbytes saved (tests/ref/gen_bnb_models.py: nf4 with
 * double quantization, fp4, int8) load as stored, the codes copied, and their forward gives
 * transformers' logits; damaged files fail with the file and the tensor named. */
#include "lib/model/model.h"
#include "kernels/ops.h"
#include "kernels/quant4.h"
#include "kernels/quant8.h"
#include "lib/formats/safetensors.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define DIR "tests/ref/fixtures/bnb/"

static const float *tensor(const struct swift_safetensors *st, const char *name, size_t n)
{
    const struct swift_st_tensor *t = swift_safetensors_find(st, name);
    assert_non_null(t);
    assert_int_equal(t->numel, n);
    return t->data;
}

static double max_err(const float *a, const float *b, size_t n)
{
    double e = 0;
    for (size_t i = 0; i < n; i++)
        e = fmax(e, fabs((double)a[i] - (double)b[i]));
    return e;
}

/* logits of the model in DIR/variant on the reference tokens; against "logits" (tol) and
 * "logits_deq" (1e-4) */
static void check(const char *variant, double tol)
{
    char dir[256], path[300];
    snprintf(dir, sizeof(dir), DIR "%s", variant);
    struct swift_model m;
    assert_int_equal(swift_model_load(&m, dir, &swift_cpu_ops, 1), 0);
    snprintf(path, sizeof(path), "%s/model.safetensors", dir);
    struct swift_safetensors st;
    assert_int_equal(swift_safetensors_open(&st, path), 0);
    /* every linear as stored: no float copy, the codes equal the file's bytes */
    for (int l = 0; l < m.cfg.num_layers; l++)
        for (int k = 0; k < SWIFT_LIN_COUNT; k++) {
            struct swift_linear *L = &m.layers[l].lin[k];
            char nm[200];
            snprintf(nm, sizeof(nm), "%s.weight", L->name);
            const struct swift_st_tensor *w = swift_safetensors_find(&st, nm);
            assert_non_null(w);
            assert_null(L->w);
            if (m.cfg.bnb_bits == 8) {
                assert_non_null(L->q8);
                assert_memory_equal(L->q8->cb, w->data, (size_t)L->out * L->in);
            } else {
                assert_non_null(L->q4);
                assert_memory_equal(L->q4->codes, w->data, (size_t)L->out * L->in / 2);
            }
        }
    assert_null(swift_model_param(&m, "model.layers.0.mlp.up_proj.weight"));
    assert_true(m.q4_bytes > 0);
    swift_safetensors_close(&st);
    snprintf(path, sizeof(path), "%s/ref_logits.safetensors", dir);
    assert_int_equal(swift_safetensors_open(&st, path), 0);
    const struct swift_st_tensor *tt = swift_safetensors_find(&st, "tokens");
    assert_non_null(tt);
    int T = (int)tt->numel, V = m.cfg.vocab_size;
    int32_t tok[64], pos[64], tgt[64];
    assert_true(T <= 64);
    memcpy(tok, tt->data, (size_t)T * sizeof(int32_t));
    for (int t = 0; t < T; t++) {
        pos[t] = t;
        tgt[t] = -1;
    }
    struct swift_batch b = {.B = 1, .T = T, .tokens = tok, .targets = tgt, .pos = pos};
    struct swift_loss loss = {0};
    assert_int_equal(swift_model_forward(&m, &b, &loss, 0.0f), 0);
    size_t n = (size_t)T * V;
    double e = max_err(swift_model_logits(&m), tensor(&st, "logits", n), n);
    double ed = max_err(swift_model_logits(&m), tensor(&st, "logits_deq", n), n);
    printf("# %s: logits max abs err %.3g against transformers, %.3g against the dequantized "
           "float model\n",
           variant,
           e,
           ed);
    assert_true(e < tol);
    assert_true(ed < 1e-4);
    swift_safetensors_close(&st);
    swift_model_free(&m);
}

static void test_nf4_dq(void **s)
{
    (void)s;
    check("nf4-dq", 1e-4);
}

static void test_fp4(void **s)
{
    (void)s;
    check("fp4", 1e-4);
}

/* transformers runs LLM.int8 (float16 activations quantized to int8, outliers in float16); ours
 * is weight-only int8 in float32: equal to the dequantized model, near transformers' */
static void test_int8(void **s)
{
    (void)s;
    check("int8", 0.3);
}

static void test_full_tuning_refused(void **s)
{
    (void)s;
    struct swift_model m;
    assert_int_equal(swift_model_load(&m, DIR "nf4-dq", &swift_cpu_ops, 0), -1);
}

static void test_requantize_refused(void **s)
{
    (void)s;
    struct swift_model m;
    assert_int_equal(swift_model_load(&m, DIR "nf4-dq", &swift_cpu_ops, 1), 0);
    assert_int_equal(swift_model_quantize4(&m, SWIFT_Q4_NF4, 1), -1);
    assert_int_equal(swift_model_quantize8(&m), -1);
    swift_model_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nf4_dq),
        cmocka_unit_test(test_fp4),
        cmocka_unit_test(test_int8),
        cmocka_unit_test(test_full_tuning_refused),
        cmocka_unit_test(test_requantize_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
