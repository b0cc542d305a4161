/* DoRA (swift-train --lora-dora) against PEFT's use_dora=True on the tiny Llama, with the values
 * tests/ref/gen_dora_fixtures.py wrote in tests/fixtures/dora-ref:
 * - PEFT's adapter loads; logits, loss and every lora_A / lora_B / lora_magnitude_vector gradient
 *   equal PEFT's to 1e-5 relative (dropout 0);
 * - an adapter swift-train saved (ours/) gives the logits PEFT's PeftModel.from_pretrained gave
 *   for it, and our writer still writes it byte for byte;
 * - a Qwen2 with q/k/v biases (the bias is not scaled) gives PEFT's logits;
 * - the key/value cache's forward (generation) gives PEFT's logits too;
 * - with dropout (PEFT recomputes the base on the dropped input), the gradient is the loss's
 *   directional derivative (central differences, the same dropout masks). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/ops.h"
#include "lib/core/fileio.h"
#include "lib/formats/safetensors.h"
#include "lib/model/lora.h"
#include "lib/model/internal.h"
#include "lib/model/kv.h"
#include "lib/model/model.h"

#define FIX "tests/fixtures/model/llama"
#define REF "tests/fixtures/dora-ref"
#define TOL 1e-5
#define NTOK 16

static int32_t tok[NTOK], tgt[NTOK], pos[NTOK];
static struct swift_batch batch = {.B = 2, .T = 8, .tokens = tok, .targets = tgt, .pos = pos};

static float *tensor(const struct swift_safetensors *st, const char *name, size_t numel)
{
    const struct swift_st_tensor *t = swift_safetensors_find(st, name);
    if (!t)
        fail_msg("%s lacks %s", st->path, name);
    assert_int_equal(t->numel, numel);
    float *x = malloc(numel * sizeof(float));
    assert_int_equal(swift_st_tensor_to_f32(t, x), 0);
    return x;
}

static void read_batch(const struct swift_safetensors *ref)
{
    float *t = tensor(ref, "tokens", NTOK), *g = tensor(ref, "targets", NTOK);
    for (int i = 0; i < NTOK; i++) {
        tok[i] = (int32_t)t[i];
        tgt[i] = (int32_t)g[i];
        pos[i] = i % batch.T;
    }
    free(t);
    free(g);
}

/* worst |a - b| / max |b| */
static double rel_err(const float *a, const float *b, size_t n)
{
    double mx = 0, err = 0;
    for (size_t i = 0; i < n; i++) {
        mx = fmax(mx, fabs(b[i]));
        err = fmax(err, fabs((double)a[i] - b[i]));
    }
    return mx > 0 ? err / mx : err;
}

static void load(struct swift_model *m, const char *adapter)
{
    assert_int_equal(swift_model_load(m, FIX, &swift_cpu_ops, 1), 0);
    struct swift_lora_opts lo;
    assert_int_equal(swift_lora_load(m, adapter, &lo), 0);
    assert_true(lo.use_dora);
}

static void check_logits(struct swift_model *m, const float *want, const char *what)
{
    assert_int_equal(swift_model_forward_logits(m, &batch, 0), 0);
    size_t n = (size_t)NTOK * m->cfg.vocab_size;
    double e = rel_err(swift_model_logits(m), want, n);
    print_message("# %s: logits relative error %.3g\n", what, e);
    if (e > TOL)
        fail_msg("%s: logits differ from PEFT's by %.3g relative", what, e);
}

static long trained(void)
{
    long c = 0;
    for (int i = 0; i < NTOK; i++)
        c += tgt[i] >= 0;
    return c;
}

static void test_peft_forward_and_grads(void **state)
{
    (void)state;
    struct swift_safetensors ref;
    assert_int_equal(swift_safetensors_open(&ref, REF "/ref.safetensors"), 0);
    read_batch(&ref);
    struct swift_model m;
    load(&m, REF "/adapter");
    m.lora_dropout = 0; /* the reference ran with dropout 0 */
    float *want = tensor(&ref, "logits", (size_t)NTOK * m.cfg.vocab_size);
    check_logits(&m, want, "PEFT's adapter");
    free(want);

    swift_model_zero_grad(&m);
    struct swift_loss loss = {0};
    long cnt = trained();
    m.dropout_seed = 1;
    assert_int_equal(swift_model_forward(&m, &batch, &loss, 1.0f / (float)cnt), 0);
    swift_model_backward(&m, &batch);
    float *wl = tensor(&ref, "loss", 1);
    print_message("# loss %.9g, PEFT %.9g\n", loss.sum / (double)loss.count, (double)wl[0]);
    assert_true(fabs(loss.sum / (double)loss.count - wl[0]) <= TOL * fabs(wl[0]));
    free(wl);
    int nmag = 0;
    double worst = 0;
    for (int p = 0; p < m.nlp; p++) {
        char key[400];
        snprintf(key, sizeof(key), "grad.%s", m.lp[p].name);
        float *g = tensor(&ref, key, m.lp[p].numel);
        double e = rel_err(m.lp[p].g, g, m.lp[p].numel);
        worst = fmax(worst, e);
        if (e > TOL)
            fail_msg("%s: gradient differs from PEFT's by %.3g relative", m.lp[p].name, e);
        nmag += strstr(m.lp[p].name, "lora_magnitude_vector") != NULL;
        free(g);
    }
    print_message(
        "# %d gradients (%d magnitudes): worst relative error %.3g\n", m.nlp, nmag, worst);
    assert_int_equal(nmag, 14);
    assert_int_equal(m.nlp, 42);
    swift_model_free(&m);
    swift_safetensors_close(&ref);
}

static void same_file(const char *a, const char *b)
{
    char *x, *y;
    size_t nx, ny;
    assert_int_equal(swift_read_file(a, 1 << 24, &x, &nx), 0);
    assert_int_equal(swift_read_file(b, 1 << 24, &y, &ny), 0);
    if (nx != ny || memcmp(x, y, nx))
        fail_msg("%s differs from %s", a, b);
    free(x);
    free(y);
}

static void test_ours_in_peft(void **state)
{
    (void)state;
    struct swift_safetensors ref, peft;
    assert_int_equal(swift_safetensors_open(&ref, REF "/ref.safetensors"), 0);
    assert_int_equal(swift_safetensors_open(&peft, REF "/ours-peft.safetensors"), 0);
    read_batch(&ref);
    struct swift_model m;
    load(&m, REF "/ours");
    float *want = tensor(&peft, "logits", (size_t)NTOK * m.cfg.vocab_size);
    check_logits(&m, want, "our adapter in PEFT");
    free(want);
    /* what PEFT loaded is what our writer writes */
    char dir[] = "/tmp/test_dora_XXXXXX";
    assert_non_null(mkdtemp(dir));
    struct swift_lora_opts lo;
    struct swift_model m2;
    assert_int_equal(swift_model_load(&m2, FIX, &swift_cpu_ops, 1), 0);
    assert_int_equal(swift_lora_load(&m2, REF "/ours", &lo), 0);
    assert_int_equal(swift_lora_save(&m2, &lo, dir, FIX), 0);
    char *s1 = swift_path_join(dir, "adapter_model.safetensors");
    char *c1 = swift_path_join(dir, "adapter_config.json");
    same_file(s1, REF "/ours/adapter_model.safetensors");
    same_file(c1, REF "/ours/adapter_config.json");
    remove(s1);
    remove(c1);
    remove(dir);
    free(s1);
    free(c1);
    swift_model_free(&m);
    swift_model_free(&m2);
    swift_safetensors_close(&ref);
    swift_safetensors_close(&peft);
}

/* q/k/v biases (the merge fixtures' Qwen2 base): PEFT leaves the bias out of the scaling */
static void test_bias_qwen2(void **state)
{
    (void)state;
    struct swift_safetensors ref;
    assert_int_equal(swift_safetensors_open(&ref, REF "/qwen2-ref.safetensors"), 0);
    struct swift_model m;
    assert_int_equal(swift_model_load(&m, "tests/ref/fixtures/merge/base", &swift_cpu_ops, 1), 0);
    assert_non_null(m.layers[0].lin[SWIFT_LIN_Q].b);
    struct swift_lora_opts lo;
    assert_int_equal(swift_lora_load(&m, "tests/ref/fixtures/merge/adapter-dora", &lo), 0);
    assert_true(lo.use_dora);
    size_t V = (size_t)m.cfg.vocab_size;
    float *ids = tensor(&ref, "ids", 8), *want = tensor(&ref, "logits", 8 * V);
    int32_t t8[8], tg[8], p8[8];
    for (int i = 0; i < 8; i++) {
        t8[i] = (int32_t)ids[i];
        tg[i] = -1;
        p8[i] = i;
    }
    struct swift_batch b = {.B = 1, .T = 8, .tokens = t8, .targets = tg, .pos = p8};
    assert_int_equal(swift_model_forward_logits(&m, &b, 0), 0);
    double e = rel_err(swift_model_logits(&m), want, 8 * V);
    print_message("# Qwen2 (q/k/v bias): logits relative error %.3g\n", e);
    assert_true(e <= TOL);
    free(ids);
    free(want);
    swift_model_free(&m);
    swift_safetensors_close(&ref);
}

/* generation's forward (the key/value cache: DoRA's product in the model's grown scratch),
 * one token per call for row 1 after row 0's eight at once: PEFT's logits */
static void test_kv_cache(void **state)
{
    (void)state;
    struct swift_safetensors ref;
    assert_int_equal(swift_safetensors_open(&ref, REF "/ref.safetensors"), 0);
    read_batch(&ref);
    struct swift_model m;
    load(&m, REF "/adapter");
    size_t V = (size_t)m.cfg.vocab_size;
    float *want = tensor(&ref, "logits", NTOK * V);
    struct swift_kv kv;
    assert_int_equal(swift_kv_init(&kv, &m, 2, 16, 8), 0);
    float *lg = malloc(NTOK * V * sizeof(float));
    int rows[8] = {0}, idx[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    assert_int_equal(swift_kv_forward(&kv, tok, rows, 8, idx, 8, lg), 0);
    for (int t = 0; t < 8; t++) {
        int row = 1, w = 0;
        assert_int_equal(swift_kv_forward(&kv, &tok[8 + t], &row, 1, &w, 1, lg + (8 + t) * V), 0);
    }
    double e = rel_err(lg, want, NTOK * V);
    print_message("# key/value cache: logits relative error %.3g\n", e);
    assert_true(e <= TOL);
    free(lg);
    free(want);
    swift_kv_release(&kv);
    swift_model_free(&m);
    swift_safetensors_close(&ref);
}

static double loss_at(struct swift_model *m)
{
    struct swift_loss loss = {0};
    m->dropout_seed = 99;
    assert_int_equal(swift_model_forward_logits(m, &batch, 1), 0); /* dropout on */
    swift_model_token_nll(m, tgt, 0, NTOK, &loss, 0);
    return loss.sum / (double)loss.count;
}

static void test_dropout_directional(void **state)
{
    (void)state;
    struct swift_safetensors ref;
    assert_int_equal(swift_safetensors_open(&ref, REF "/ref.safetensors"), 0);
    read_batch(&ref);
    swift_safetensors_close(&ref);
    struct swift_model m;
    load(&m, REF "/adapter");
    m.lora_dropout = 0.3f;
    swift_model_zero_grad(&m);
    struct swift_loss loss = {0};
    m.dropout_seed = 99;
    assert_int_equal(swift_model_forward(&m, &batch, &loss, 1.0f / (float)trained()), 0);
    swift_model_backward(&m, &batch);
    /* along d = the gradient: dL/dt = |g|^2 */
    size_t n = m.nlora;
    float *w0 = malloc(n * sizeof(float)), *d = malloc(n * sizeof(float));
    memcpy(w0, m.lora_params, n * sizeof(float));
    memcpy(d, m.lora_grads, n * sizeof(float));
    double gg = 0;
    for (size_t i = 0; i < n; i++)
        gg += (double)d[i] * d[i];
    double h = 1e-2 / sqrt(gg), lp, lm;
    /* the norm is detached: hold it at this point's value, as the gradient does */
    m.dora->keep_norm = 1;
    for (size_t i = 0; i < n; i++)
        m.lora_params[i] = w0[i] + (float)h * d[i];
    lp = loss_at(&m);
    for (size_t i = 0; i < n; i++)
        m.lora_params[i] = w0[i] - (float)h * d[i];
    lm = loss_at(&m);
    double fd = (lp - lm) / (2 * h);
    print_message("# dropout 0.3: |g|^2 %.6g, central difference %.6g\n", gg, fd);
    assert_true(fabs(fd - gg) <= 2e-3 * gg);
    free(w0);
    free(d);
    swift_model_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_peft_forward_and_grads),
        cmocka_unit_test(test_ours_in_peft),
        cmocka_unit_test(test_kv_cache),
        cmocka_unit_test(test_bias_qwen2),
        cmocka_unit_test(test_dropout_directional),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
