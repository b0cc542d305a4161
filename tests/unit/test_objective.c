/* The objective table and SFT's parts that need no model: packed rows (positions restart per
 * document, targets only inside a document where the mask trains them, padding rows), the
 * number of items a sample brings, the metrics it logs. */
#include "lib/train/objective.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static void test_table(void **state)
{
    (void)state;
    struct swift_train_opts o;
    swift_train_opts_init(&o);
    struct swift_objective obj;
    assert_int_equal(swift_objective_init(&obj, "sft", &o, NULL), 0);
    assert_string_equal(obj.name, "sft");
    assert_int_equal(obj.rows_per_sample, 1);
    assert_int_equal(obj.nextra, 0);
    assert_string_equal(obj.item, "tokens");
    assert_non_null(obj.fill);
    assert_non_null(obj.forward);
    assert_non_null(obj.backward);
    assert_non_null(obj.log);
    swift_objective_free(&obj);
    assert_null(obj.name);
    assert_int_equal(swift_objective_init(&obj, "no-such-objective", &o, NULL), -1);
    swift_objective_free(&obj); /* safe on what a failed init left */
}

/* two documents (3 + 2 tokens) in a row of 7: targets never cross the document boundary */
static void test_sft_fill(void **state)
{
    (void)state;
    struct swift_train_opts o;
    swift_train_opts_init(&o);
    struct swift_objective obj;
    assert_int_equal(swift_objective_init(&obj, "sft", &o, NULL), 0);
    const uint32_t ids[] = {5, 6, 7, 8, 9}, docs[] = {3, 2};
    const uint8_t mask[] = {0, 1, 1, 0, 1};
    struct swift_sample x = {.ids = ids, .mask = mask, .len = 5, .doc_len = docs, .n_docs = 2};
    int32_t tok[7], tgt[7], pos[7];
    assert_int_equal(obj.fill(&obj, &x, 7, tok, tgt, pos), 3);
    const int32_t etok[] = {5, 6, 7, 8, 9, 0, 0}, etgt[] = {6, 7, -1, 9, -1, -1, -1},
                  epos[] = {0, 1, 2, 0, 1, 0, 1};
    assert_memory_equal(tok, etok, sizeof(tok));
    assert_memory_equal(tgt, etgt, sizeof(tgt));
    assert_memory_equal(pos, epos, sizeof(pos));
    /* a padding row: no items, nothing trained */
    assert_int_equal(obj.fill(&obj, NULL, 7, tok, tgt, pos), 0);
    for (int t = 0; t < 7; t++) {
        assert_int_equal(tok[t], 0);
        assert_int_equal(tgt[t], -1);
        assert_int_equal(pos[t], t);
    }
    swift_objective_free(&obj);
}

static void test_sft_log(void **state)
{
    (void)state;
    struct swift_train_opts o;
    swift_train_opts_init(&o);
    struct swift_objective obj;
    assert_int_equal(swift_objective_init(&obj, "sft", &o, NULL), 0);
    struct swift_objective_sums s = {.loss = {.sum = 3.0, .count = 4, .correct = 1}};
    json_t *rec = json_object();
    obj.log(&obj, &s, "", rec);
    obj.log(&obj, &s, "eval_", rec);
    assert_true(json_real_value(json_object_get(rec, "token_acc")) == 0.25);
    assert_true(json_real_value(json_object_get(rec, "eval_token_acc")) == 0.25);
    assert_int_equal(json_object_size(rec), 2);
    struct swift_objective_sums none = {0}; /* nothing trained: 0, not a division by zero */
    obj.log(&obj, &none, "", rec);
    assert_true(json_real_value(json_object_get(rec, "token_acc")) == 0.0);
    json_decref(rec);
    swift_objective_free(&obj);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_sft_fill),
        cmocka_unit_test(test_sft_log),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
