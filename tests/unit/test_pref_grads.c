/* The preference objectives' full LoRA gradients against TRL's (autograd's): for every case of
 * tests/fixtures/pairs-ref (dpo with each loss, simpo, orpo, cpo) and tests/fixtures/kto-ref
 * (kto, weights, apo_zero_unpaired), in the "adapter" and "zero" states, the adapter is loaded
 * into the tiny Llama, one forward/backward of the objective runs over the fixture's shard as
 * one micro-batch (scale 1/samples as the trainer's mean, LoRA dropout off; KTO's rows in the
 * fixture's batch_order, which its KL rows depend on) and every gradient tensor is compared
 * elementwise to grads.safetensors "<case>.<state>.<peft name>": |ours - TRL| <= 2e-5 of the
 * tensor's largest |TRL|. The worst relative error of each case is printed. */
#include "lib/train/objective.h"

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

#include "kernels/ops.h"
#include "lib/formats/safetensors.h"
#include "lib/formats/shard.h"
#include "lib/model/lora.h"
#include "lib/train/pref_loss.h"

#define FIX "tests/fixtures/model/llama"
#define TOL 2e-5

static double num(json_t *o, const char *k, double dflt)
{
    json_t *v = json_object_get(o, k);
    return v ? json_number_value(v) : dflt;
}

/* one case in one state; returns the worst |ours - TRL| / max |TRL| over the tensors */
static double run_case(const char *dir, json_t *ex, const char *cname, json_t *params,
                       const char *state, struct swift_safetensors *ref)
{
    json_t *st = json_object_get(json_object_get(ex, "states"), state);
    const char *adapter = json_string_value(json_object_get(st, "adapter"));
    assert_non_null(adapter);
    struct swift_model m;
    assert_int_equal(swift_model_load(&m, FIX, &swift_cpu_ops, 1), 0);
    struct swift_lora_opts lo;
    assert_int_equal(swift_lora_load(&m, adapter, &lo), 0);
    m.lora_dropout = 0; /* --lora-dropout 0, as the fixture's TRL run */

    struct swift_train_opts o;
    swift_train_opts_init(&o);
    o.model = FIX;
    const char *kind = json_string_value(json_object_get(params, "kind"));
    if (!kind) /* kto-ref's params: loss_type, beta, wd, wu */
        kind = "kto";
    const char *lt = json_string_value(json_object_get(params, "loss_type"));
    if (lt)
        o.loss_type = swift_pref_loss_parse(lt);
    o.beta = num(params, "beta", o.beta);
    o.label_smoothing = num(params, "label_smoothing", o.label_smoothing);
    o.rpo_alpha = num(params, "rpo_alpha", o.rpo_alpha);
    o.simpo_gamma = num(params, "simpo_gamma", o.simpo_gamma);
    o.cpo_alpha = num(params, "cpo_alpha", o.cpo_alpha);
    o.desirable_weight = num(params, "wd", o.desirable_weight);
    o.undesirable_weight = num(params, "wu", o.undesirable_weight);
    struct swift_objective obj;
    assert_int_equal(swift_objective_init(&obj, kind, &o, &m), 0);

    struct swift_shards *sh;
    assert_int_equal(swift_shards_open(&sh, dir, 0), 0);
    /* rows of the index's max_length, as the trainer's (KTO's KL rows are cut to it) */
    int n = (int)swift_shards_count(sh), R = obj.rows_per_sample;
    int T = (int)swift_shards_index(sh)->max_length;
    size_t rows = (size_t)n * (size_t)R;
    int32_t *tok = calloc(rows * (size_t)T, sizeof(int32_t));
    int32_t *tgt = calloc(rows * (size_t)T, sizeof(int32_t));
    int32_t *pos = calloc(rows * (size_t)T, sizeof(int32_t));
    json_t *order = json_object_get(ex, "batch_order");
    for (int i = 0; i < n; i++) {
        int k = order ? (int)json_integer_value(json_array_get(order, (size_t)i)) : i;
        struct swift_sample x;
        assert_int_equal(swift_shards_get(sh, (uint64_t)k, &x), 0);
        assert_null(obj.check(&obj, &x));
        size_t off = (size_t)i * (size_t)R * (size_t)T;
        assert_int_equal(obj.fill(&obj, &x, T, tok + off, tgt + off, pos + off), 1);
    }
    struct swift_batch b = {.B = (int)rows, .T = T, .tokens = tok, .targets = tgt, .pos = pos};
    swift_model_zero_grad(&m);
    struct swift_objective_sums s = {0};
    m.dropout_seed = 1;
    assert_int_equal(obj.forward(&obj, &m, &b, 1.0f / (float)n, &s), 0);
    obj.backward(&obj, &m, &b);

    double worst = 0;
    float *want = NULL;
    for (int p = 0; p < m.nlp; p++) {
        char key[400];
        snprintf(key, sizeof(key), "%s.%s.%s", cname, state, m.lp[p].name);
        const struct swift_st_tensor *t = swift_safetensors_find(ref, key);
        if (!t)
            fail_msg("grads.safetensors lacks %s", key);
        assert_int_equal(t->numel, m.lp[p].numel);
        want = realloc(want, m.lp[p].numel * sizeof(float));
        assert_int_equal(swift_st_tensor_to_f32(t, want), 0);
        double mx = 0, err = 0;
        size_t at = 0;
        for (size_t i = 0; i < m.lp[p].numel; i++)
            mx = fmax(mx, fabs(want[i]));
        for (size_t i = 0; i < m.lp[p].numel; i++) {
            double e = fabs((double)m.lp[p].g[i] - want[i]);
            if (e > err) {
                err = e;
                at = i;
            }
        }
        double rel = mx > 0 ? err / mx : err;
        if (rel > worst)
            worst = rel;
        if (rel > TOL)
            fail_msg("%s %s %s[%zu]: gradient %.9g, TRL %.9g (max |TRL| %.3g, relative %.3g)",
                     cname,
                     state,
                     m.lp[p].name,
                     at,
                     (double)m.lp[p].g[at],
                     (double)want[at],
                     mx,
                     rel);
    }
    /* the fixture holds exactly these tensors: count this case's keys */
    int nkeys = 0;
    char pre[200];
    int lp = snprintf(pre, sizeof(pre), "%s.%s.", cname, state);
    for (size_t i = 0; i < ref->ntensors; i++)
        nkeys += !strncmp(ref->tensors[i].name, pre, (size_t)lp);
    assert_int_equal(nkeys, m.nlp);
    free(want);
    free(tok);
    free(tgt);
    free(pos);
    swift_shards_close(sh);
    swift_objective_free(&obj);
    swift_model_free(&m);
    return worst;
}

static void check_dir(const char *dir)
{
    char path[300];
    snprintf(path, sizeof(path), "%s/expected.json", dir);
    json_error_t je;
    json_t *ex = json_load_file(path, 0, &je);
    if (!ex)
        fail_msg("%s: %s", path, je.text);
    struct swift_safetensors ref;
    snprintf(path, sizeof(path), "%s/grads.safetensors", dir);
    assert_int_equal(swift_safetensors_open(&ref, path), 0);
    const char *cname;
    json_t *c;
    double all = 0;
    json_object_foreach(json_object_get(ex, "cases"), cname, c)
    {
        json_t *params = json_object_get(c, "params");
        assert_non_null(params);
        const char *states[] = {"adapter", "zero"};
        for (int k = 0; k < 2; k++) {
            double w = run_case(dir, ex, cname, params, states[k], &ref);
            printf("# %s %s: worst |grad - TRL| / max |TRL| over the tensors %.2g\n",
                   cname,
                   states[k],
                   w);
            all = fmax(all, w);
        }
    }
    printf("# %s: worst %.2g (tolerance %.0e)\n", dir, all, TOL);
    swift_safetensors_close(&ref);
    json_decref(ex);
}

static void test_pairs(void **s)
{
    (void)s;
    check_dir("tests/fixtures/pairs-ref");
}

static void test_kto(void **s)
{
    (void)s;
    check_dir("tests/fixtures/kto-ref");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pairs),
        cmocka_unit_test(test_kto),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
