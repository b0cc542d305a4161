/* KTO (lib/train/kto.c) without a model: the per-sample loss and its derivative against
 * hand-computed values and finite differences (kto and apo_zero_unpaired, both labels, the
 * weights), the KL estimate's clamp at 0, the rows fill makes (the label carried in the
 * targets), the sample check, and the keys log writes (TRL KTOTrainer's names). */
#include "lib/train/kto.h"

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

#include "lib/train/objective.h"
#include "lib/train/pref_loss.h"

static void close_to(double got, double want)
{
    if (fabs(got - want) > 1e-12 * (fabs(want) > 1 ? fabs(want) : 1)) {
        fail_msg("got %.17g want %.17g", got, want);
    }
}

/* 1 - s(z) with z = beta (lr - kl): beta 0.1, lr 2, kl 0.5 -> z 0.15 (python, float64) */
static void test_kto_values(void **state)
{
    (void)state;
    struct swift_kto_params p = {
        .loss = SWIFT_KTO_KTO, .beta = 0.1, .desirable_weight = 1, .undesirable_weight = 1};
    double d;
    close_to(swift_kto_sample(&p, 1, 2.0, 0.5, &d), 0.4625701546562504);
    close_to(d, -0.024859900667754301);
    /* undesirable: 1 - s(beta (kl - lr)) = 1 - s(-0.15) = s(0.15) */
    close_to(swift_kto_sample(&p, 0, 2.0, 0.5, &d), 1 - 0.4625701546562504);
    close_to(d, 0.024859900667754301);
    p.desirable_weight = 1.5;
    p.undesirable_weight = 0.7;
    close_to(swift_kto_sample(&p, 1, 2.0, 0.5, &d), 0.6938552319843756);
    close_to(swift_kto_sample(&p, 0, 2.0, 0.5, &d), 0.7 * (1 - 0.4625701546562504));
    /* policy = reference, kl 0: every sample's loss is w/2 */
    close_to(swift_kto_sample(&p, 1, 0, 0, &d), 0.75);
    close_to(swift_kto_sample(&p, 0, 0, 0, &d), 0.35);
}

static void test_apo_values(void **state)
{
    (void)state;
    struct swift_kto_params p = {.loss = SWIFT_KTO_APO_ZERO_UNPAIRED,
                                 .beta = 0.1,
                                 .desirable_weight = 1,
                                 .undesirable_weight = 0.7};
    double d;
    /* the KL term is not used: kl 3 changes nothing */
    close_to(swift_kto_sample(&p, 1, 2.0, 3.0, &d), 0.45016600268752205);
    close_to(swift_kto_sample(&p, 0, 2.0, 3.0, &d), 0.38488379811873452);
    close_to(d, 0.017326160089830196);
}

/* d loss / d logp against central differences, every loss, label and a spread of log-ratios */
static void test_derivatives(void **state)
{
    (void)state;
    const double lrs[] = {-40, -3, -0.2, 0, 0.7, 5, 60};
    for (int loss = 0; loss < 2; loss++)
        for (int lab = 0; lab < 2; lab++)
            for (size_t i = 0; i < sizeof(lrs) / sizeof(lrs[0]); i++) {
                struct swift_kto_params p = {
                    .loss = loss, .beta = 0.3, .desirable_weight = 1.2, .undesirable_weight = 0.8};
                double d, dp, dm, h = 1e-5;
                swift_kto_sample(&p, lab, lrs[i], 0.4, &d);
                double fp = swift_kto_sample(&p, lab, lrs[i] + h, 0.4, &dp);
                double fm = swift_kto_sample(&p, lab, lrs[i] - h, 0.4, &dm);
                double fd = (fp - fm) / (2 * h);
                if (fabs(fd - d) > 1e-7)
                    fail_msg("loss %d label %d lr %g: d %.12g fd %.12g", loss, lab, lrs[i], d, fd);
            }
}

static void test_kl(void **state)
{
    (void)state;
    const double a[] = {-10, -12, -9}, b[] = {-11, -11, -11};
    close_to(swift_kto_kl(a, b, 3), 2.0 / 3); /* (1 - 1 + 2) / 3 */
    const double c[] = {-13, -12, -12};
    assert_true(swift_kto_kl(c, b, 3) == 0.0); /* a negative mean is clamped to 0 */
    assert_true(swift_kto_kl(a, b, 0) == 0.0);
}

/* a desirable and an undesirable sample of 3 prompt + 2 completion tokens in rows of 7 */
static void test_fill_check(void **state)
{
    (void)state;
    struct swift_train_opts o;
    swift_train_opts_init(&o);
    struct swift_objective obj;
    assert_int_equal(swift_objective_init(&obj, "kto", &o, NULL), 0);
    assert_string_equal(obj.kind, "kto");
    assert_int_equal(obj.rows_per_sample, 1);
    const uint32_t ids[] = {5, 6, 7, 8, 9}, docs[] = {5};
    const uint8_t mask[] = {0, 0, 0, 1, 1};
    struct swift_sample x = {
        .ids = ids, .mask = mask, .len = 5, .doc_len = docs, .n_docs = 1, .label = 1};
    int32_t tok[7], tgt[7], pos[7];
    assert_null(obj.check(&obj, &x));
    assert_int_equal(obj.fill(&obj, &x, 7, tok, tgt, pos), 1);
    const int32_t etok[] = {5, 6, 7, 8, 9, 0, 0}, etgt[] = {-1, -1, 8, 9, -1, -1, -1},
                  epos[] = {0, 1, 2, 3, 4, 0, 1};
    assert_memory_equal(tok, etok, sizeof(tok));
    assert_memory_equal(tgt, etgt, sizeof(tgt));
    assert_memory_equal(pos, epos, sizeof(pos));
    x.label = 0; /* undesirable: the completion's targets are -2 - id */
    assert_int_equal(obj.fill(&obj, &x, 7, tok, tgt, pos), 1);
    assert_int_equal(tgt[2], -10);
    assert_int_equal(tgt[3], -11);
    assert_int_equal(obj.fill(&obj, NULL, 7, tok, tgt, pos), 0);
    for (int t = 0; t < 7; t++)
        assert_int_equal(tgt[t], -1);
    const uint8_t none[] = {0, 0, 0, 0, 0};
    x.mask = none;
    assert_non_null(strstr(obj.check(&obj, &x), "no completion tokens"));
    const uint32_t two[] = {3, 2};
    x.mask = mask;
    x.doc_len = two;
    x.n_docs = 2;
    assert_non_null(strstr(obj.check(&obj, &x), "one document"));
    swift_objective_free(&obj);
    o.loss_type = SWIFT_PREF_SIGMOID;
    assert_int_equal(swift_objective_init(&obj, "kto", &o, NULL), -1);
    o.loss_type = SWIFT_PREF_APO_ZERO_UNPAIRED;
    assert_int_equal(swift_objective_init(&obj, "kto", &o, NULL), 0);
    swift_objective_free(&obj);
}

/* log: TRL's keys; those of a label without samples are left out */
static void test_log(void **state)
{
    (void)state;
    struct swift_train_opts o;
    swift_train_opts_init(&o);
    struct swift_objective obj;
    assert_int_equal(swift_objective_init(&obj, "kto", &o, NULL), 0);
    struct swift_objective_sums s = {.loss = {.sum = 1.0, .count = 2}};
    /* reward c, reward r, logp c, logp r, logits c, tokens c, logits r, tokens r, nc, nr, kl,
     * micro-batches */
    const double x[12] = {0.4, 0, -20, 0, 3, 6, 0, 0, 2, 0, 0.5, 2};
    memcpy(s.extra, x, sizeof(x));
    json_t *rec = json_object();
    obj.log(&obj, &s, "eval_", rec);
    close_to(json_real_value(json_object_get(rec, "eval_kl")), 0.25);
    close_to(json_real_value(json_object_get(rec, "eval_rewards/chosen")), 0.2);
    close_to(json_real_value(json_object_get(rec, "eval_logps/chosen")), -10);
    close_to(json_real_value(json_object_get(rec, "eval_logits/chosen")), 0.5);
    assert_null(json_object_get(rec, "eval_rewards/rejected"));
    assert_null(json_object_get(rec, "eval_rewards/margins"));
    assert_null(json_object_get(rec, "eval_logits/rejected"));
    json_decref(rec);
    swift_objective_free(&obj);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kto_values),
        cmocka_unit_test(test_apo_values),
        cmocka_unit_test(test_derivatives),
        cmocka_unit_test(test_kl),
        cmocka_unit_test(test_fill_check),
        cmocka_unit_test(test_log),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
