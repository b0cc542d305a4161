/* Reward model scores (lib/model/score.c) against transformers: the reward models our swift-train
 * saved (tests/fixtures/rm/full: LlamaForSequenceClassification; tests/fixtures/rm/lora: a LoRA
 * adapter with the score head in modules_to_save) score the 8 rows of expected.json as
 * transformers' AutoModelForSequenceClassification (and peft) do, to 1e-5; the gradient of a
 * score equals finite differences. Fixtures: tests/ref/gen_rm_fixtures.py. */
#include "lib/model/model.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include <cmocka.h>
#include <jansson.h>

#include "kernels/ops.h"
#include "lib/model/lora.h"

#define RM "tests/fixtures/rm/"

struct rows {
    int B, T, pad;
    int32_t *tok, *tgt, *pos, *idx;
};

/* expected.json's rows, right-padded with pad_token_id into one batch; idx: each row's score
 * token by swift_model_score_pos */
static json_t *load_rows(struct rows *r)
{
    json_error_t err;
    json_t *e = json_load_file(RM "expected.json", 0, &err);
    assert_non_null(e);
    json_t *rows = json_object_get(e, "rows");
    r->B = (int)json_array_size(rows);
    r->pad = (int)json_integer_value(json_object_get(e, "pad_token_id"));
    r->T = 0;
    for (int b = 0; b < r->B; b++)
        if ((int)json_array_size(json_array_get(rows, b)) > r->T)
            r->T = (int)json_array_size(json_array_get(rows, b));
    size_t N = (size_t)r->B * r->T;
    r->tok = calloc(N, sizeof(int32_t));
    r->tgt = calloc(N, sizeof(int32_t));
    r->pos = calloc(N, sizeof(int32_t));
    r->idx = calloc((size_t)r->B, sizeof(int32_t));
    for (int b = 0; b < r->B; b++) {
        json_t *row = json_array_get(rows, b);
        int L = (int)json_array_size(row);
        for (int t = 0; t < r->T; t++) {
            size_t n = (size_t)b * r->T + t;
            r->tok[n] = t < L ? (int32_t)json_integer_value(json_array_get(row, t)) : r->pad;
            r->pos[n] = t < L ? t : t - L;
            r->tgt[n] = -1;
        }
        r->idx[b] = b * r->T + swift_model_score_pos(r->tok + (size_t)b * r->T, L, r->pad);
    }
    return e;
}

static void free_rows(struct rows *r)
{
    free(r->tok);
    free(r->tgt);
    free(r->pos);
    free(r->idx);
}

static void check_scores(struct swift_model *m, const char *key)
{
    struct rows r;
    json_t *e = load_rows(&r);
    json_t *want = json_object_get(e, key);
    assert_int_equal((int)json_array_size(want), r.B);
    struct swift_batch b = {.B = r.B, .T = r.T, .tokens = r.tok, .targets = r.tgt, .pos = r.pos};
    assert_int_equal(swift_model_forward_hidden(m, &b, 0), 0);
    float got[64];
    assert_true(r.B <= 64);
    assert_int_equal(swift_model_score(m, r.idx, r.B, got), 0);
    for (int i = 0; i < r.B; i++) {
        double w = json_real_value(json_array_get(want, i));
        if (fabs(got[i] - w) > 1e-5) {
            print_error("%s row %d: ours %.8f transformers %.8f\n", key, i, got[i], w);
            fail();
        }
    }
    free_rows(&r);
    json_decref(e);
}

static void test_full(void **state)
{
    (void)state;
    struct swift_model m;
    /* config.json says LlamaForSequenceClassification: the head is read, no lm_head needed */
    assert_int_equal(swift_model_load(&m, RM "full", &swift_cpu_ops, 1), 0);
    assert_int_equal(m.cfg.score, 1);
    assert_int_equal(m.cfg.pad_token_id, 2);
    assert_non_null(m.score);
    check_scores(&m, "full");
    swift_model_free(&m);
}

static void test_lora(void **state)
{
    (void)state;
    struct swift_model m;
    struct swift_lora_opts lo;
    assert_int_equal(swift_model_load_score(&m, "tests/fixtures/model/llama", &swift_cpu_ops, 1, 7),
                     0);
    assert_int_equal(swift_lora_load(&m, RM "lora", &lo), 0);
    check_scores(&m, "lora");
    swift_model_free(&m);
}

static void test_lora_needs_score(void **state)
{
    (void)state;
    struct swift_model m;
    struct swift_lora_opts lo;
    assert_int_equal(swift_model_load(&m, "tests/fixtures/model/llama", &swift_cpu_ops, 1), 0);
    assert_int_equal(swift_lora_load(&m, RM "lora", &lo), -1);
    swift_model_free(&m);
}

/* d (sum_i c_i score_i) / d parameter from swift_model_score_backward against central
 * differences, for the head and one norm weight (the path through the model) */
static void test_backward(void **state)
{
    (void)state;
    struct swift_model m;
    assert_int_equal(swift_model_load(&m, RM "full", &swift_cpu_ops, 0), 0);
    struct rows r;
    json_t *e = load_rows(&r);
    struct swift_batch b = {.B = r.B, .T = r.T, .tokens = r.tok, .targets = r.tgt, .pos = r.pos};
    float c[64], s[64];
    for (int i = 0; i < r.B; i++)
        c[i] = (i % 2 ? -0.5f : 1.0f) * (float)(i + 1) / 4;
    swift_model_zero_grad(&m);
    assert_int_equal(swift_model_forward_hidden(&m, &b, 1), 0);
    assert_int_equal(swift_model_score(&m, r.idx, r.B, s), 0);
    assert_int_equal(swift_model_score_backward(&m, &b, r.idx, r.B, c), 0);
    const char *names[] = {
        "score.weight", "model.norm.weight", "model.layers.0.mlp.up_proj.weight"};
    for (int k = 0; k < 3; k++) {
        struct swift_param *p = swift_model_param(&m, names[k]);
        assert_non_null(p);
        for (size_t j = 0; j < p->numel; j += p->numel / 5 + 1) {
            float w0 = p->w[j], h = 1e-2f;
            double f[2];
            for (int sgn = 0; sgn < 2; sgn++) {
                p->w[j] = w0 + (sgn ? -h : h);
                assert_int_equal(swift_model_forward_hidden(&m, &b, 0), 0);
                assert_int_equal(swift_model_score(&m, r.idx, r.B, s), 0);
                f[sgn] = 0;
                for (int i = 0; i < r.B; i++)
                    f[sgn] += (double)c[i] * s[i];
            }
            p->w[j] = w0;
            double fd = (f[0] - f[1]) / (2 * h), g = p->g[j];
            if (fabs(fd - g) > 2e-3 * (fabs(fd) + 0.05)) {
                print_error(
                    "%s[%zu]: backward %.6g, finite differences %.6g\n", names[k], j, g, fd);
                fail();
            }
        }
    }
    free_rows(&r);
    json_decref(e);
    swift_model_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full),
        cmocka_unit_test(test_lora),
        cmocka_unit_test(test_lora_needs_score),
        cmocka_unit_test(test_backward),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
