/* GRPO's loss against TRL 1.16.0's GRPOTrainer (tests/fixtures/grpo, written by
 * tests/ref/gen_grpo_fixtures.py; the cases and what TRL was given are in its expected.json):
 * (a) swift_grpo_advantages = TRL's advantages for each scale_rewards (1e-6), and the rows' std
 *     (frac_reward_zero_std);
 * (b) swift_grpo_loss on TRL's per-token log-probs, old/ref log-probs and advantages, for each
 *     loss_type, scale, beta and epsilon of the fixture: contrib / items = TRL's loss (1e-5
 *     relative), kl and the clip_ratio metrics = TRL's, dlogp / items = autograd's d loss / d
 *     per_token_logps (1e-5 of the largest);
 * (c) the model: tests/fixtures/eval/llama fully trainable on swift_cpu_strict_ops (the host never
 *     reads backend memory but through download, as on CUDA), the rows prompt + completion
 *     right-padded, swift_model_token_logps = TRL's per-token log-probs (1e-5; at temperature 0.7
 *     through swift_model_scale_dlogits), the loss on them = TRL's, then swift_model_token_grad
 *     with w = dlogp / items and swift_model_backward: every parameter's gradient = TRL's autograd
 *     gradient (2e-5 of the tensor's largest |TRL|, as tests/unit/test_pref_grads.c). */
#include "lib/train/grpo_loss.h"

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
#include "lib/model/model.h"

#define DIR "tests/fixtures/grpo"
#define MODEL "tests/fixtures/eval/llama"

static json_t *ex;
static struct swift_safetensors ten;
static int R, TC;      /* rows, TRL's completion width */
static int *off, *len; /* row r's completion tokens: [r*TC, r*TC + len[r]) */

static int setup(void **s)
{
    (void)s;
    json_error_t je;
    ex = json_load_file(DIR "/expected.json", 0, &je);
    if (!ex)
        fail_msg(DIR "/expected.json: %s", je.text);
    assert_int_equal(swift_safetensors_open(&ten, DIR "/tensors.safetensors"), 0);
    json_t *co = json_object_get(ex, "completion_ids");
    R = (int)json_array_size(co);
    off = calloc((size_t)R, sizeof(int));
    len = calloc((size_t)R, sizeof(int));
    TC = 0;
    for (int r = 0; r < R; r++) {
        len[r] = (int)json_array_size(json_array_get(co, (size_t)r));
        TC = len[r] > TC ? len[r] : TC;
    }
    for (int r = 0; r < R; r++)
        off[r] = r * TC;
    return 0;
}

static int teardown(void **s)
{
    (void)s;
    free(off);
    free(len);
    swift_safetensors_close(&ten);
    json_decref(ex);
    return 0;
}

/* tensor "<c>.<what>" as doubles (n floats expected); NULL when absent and !need */
static double *vec(const char *c, const char *what, size_t n, int need)
{
    char key[300];
    snprintf(key, sizeof(key), "%s.%s", c, what);
    const struct swift_st_tensor *t = swift_safetensors_find(&ten, key);
    if (!t) {
        if (need)
            fail_msg("tensors.safetensors lacks %s", key);
        return NULL;
    }
    assert_int_equal(t->numel, n);
    float *f = malloc(n * sizeof(float));
    double *d = malloc(n * sizeof(double));
    assert_int_equal(swift_st_tensor_to_f32(t, f), 0);
    for (size_t i = 0; i < n; i++)
        d[i] = f[i];
    free(f);
    return d;
}

static double num(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    if (!v)
        fail_msg("expected.json lacks %s", k);
    return json_number_value(v);
}

static void params_of(json_t *c, struct swift_grpo_params *p)
{
    json_t *pa = json_object_get(c, "params");
    p->loss_type = swift_grpo_loss_parse(json_string_value(json_object_get(pa, "loss_type")));
    assert_true(p->loss_type >= 0);
    p->beta = num(pa, "beta");
    p->epsilon_low = num(pa, "epsilon_low");
    p->epsilon_high = num(pa, "epsilon_high");
    p->max_completion_length = (int)num(pa, "max_completion_length");
    p->kl_uncorrected = !json_is_true(json_object_get(pa, "use_bias_correction_kl"));
}

static double worst_loss; /* the largest |loss - TRL's| / |TRL's| seen */

static void close_to(double got, double want, double tol, const char *c, const char *what)
{
    if (!strcmp(what, "loss") && want != 0)
        worst_loss = fmax(worst_loss, fabs(got - want) / fabs(want));
    if (!(fabs(got - want) <= tol * fmax(1.0, fabs(want))))
        fail_msg("%s %s: %.9g, TRL %.9g", c, what, got, want);
}

static void test_parse(void **s)
{
    (void)s;
    assert_int_equal(swift_grpo_loss_parse("grpo"), SWIFT_GRPO_LOSS_GRPO);
    assert_int_equal(swift_grpo_loss_parse("bnpo"), SWIFT_GRPO_LOSS_BNPO);
    assert_int_equal(swift_grpo_loss_parse("dr_grpo"), SWIFT_GRPO_LOSS_DR_GRPO);
    assert_int_equal(swift_grpo_loss_parse("dapo"), SWIFT_GRPO_LOSS_DAPO);
    assert_int_equal(swift_grpo_loss_parse("dr-grpo"), -1);
    assert_int_equal(swift_grpo_loss_parse("cispo"), -1);
    assert_int_equal(swift_grpo_scale_parse("group"), SWIFT_GRPO_SCALE_GROUP);
    assert_int_equal(swift_grpo_scale_parse("batch"), SWIFT_GRPO_SCALE_BATCH);
    assert_int_equal(swift_grpo_scale_parse("none"), SWIFT_GRPO_SCALE_NONE);
    assert_int_equal(swift_grpo_scale_parse("true"), SWIFT_GRPO_SCALE_GROUP);
    assert_int_equal(swift_grpo_scale_parse("false"), SWIFT_GRPO_SCALE_NONE);
    assert_int_equal(swift_grpo_scale_parse("1"), -1);
    assert_string_equal(swift_grpo_loss_name(SWIFT_GRPO_LOSS_DR_GRPO), "dr_grpo");
    assert_string_equal(swift_grpo_scale_name(SWIFT_GRPO_SCALE_BATCH), "batch");
}

/* (a) */
static void test_advantages(void **s)
{
    (void)s;
    json_t *rw = json_object_get(ex, "rewards");
    int n = (int)json_array_size(rw), G = (int)num(ex, "G");
    assert_int_equal(n, R);
    double *rewards = malloc((size_t)n * sizeof(double));
    double *adv = malloc((size_t)n * sizeof(double)), *sd = malloc((size_t)n * sizeof(double));
    for (int i = 0; i < n; i++)
        rewards[i] = json_number_value(json_array_get(rw, (size_t)i));
    const char *cname;
    json_t *c;
    int seen[3] = {0};
    json_object_foreach(json_object_get(ex, "cases"), cname, c)
    {
        const char *sc =
            json_string_value(json_object_get(json_object_get(c, "params"), "scale_rewards"));
        int scale = swift_grpo_scale_parse(sc);
        assert_true(scale >= 0);
        seen[scale] = 1;
        swift_grpo_advantages(rewards, n, G, scale, adv, sd);
        double *want = vec(cname, "advantages", (size_t)n, 1);
        json_t *wsd = json_object_get(c, "reward_std_rows");
        int zero = 0;
        for (int i = 0; i < n; i++) {
            if (fabs(adv[i] - want[i]) > 1e-6 * fmax(1.0, fabs(want[i])))
                fail_msg("%s: advantage %d: %.9g, TRL %.9g", cname, i, adv[i], want[i]);
            close_to(sd[i], json_number_value(json_array_get(wsd, (size_t)i)), 1e-6, cname, "std");
            zero += sd[i] <= 1e-8;
        }
        close_to((double)zero / n, num(c, "frac_reward_zero_std"), 1e-6, cname, "zero std");
        free(want);
    }
    assert_true(seen[0] && seen[1] && seen[2]);
    free(rewards);
    free(adv);
    free(sd);
}

/* The loss of case c on log-probs lp (R x TC); checks loss and metrics, returns dlogp / items
 * (R x TC, 0 on padding; caller frees) and the worst relative dlogp error against TRL's. */
static float *check_loss(const char *cname, json_t *c, const double *lp, double *worst)
{
    struct swift_grpo_params p;
    params_of(c, &p);
    size_t n = (size_t)R * (size_t)TC;
    double *old = json_is_true(json_object_get(c, "old")) ? vec(cname, "old", n, 1) : NULL;
    double *ref = json_is_true(json_object_get(c, "ref")) ? vec(cname, "ref", n, 1) : NULL;
    assert_true((ref != NULL) == (p.beta != 0.0));
    double *adv = vec(cname, "advantages", (size_t)R, 1);
    double *want = vec(cname, "dlogp", n, 1);
    float *dl = calloc(n, sizeof(float));
    /* two micro-batches (rows [0,5) and [5,R)) as one step of one rank: the sums still give
     * TRL's loss of the whole batch for dapo (a token mean), and for grpo/dr_grpo (a row mean);
     * bnpo's is a mean of the micro-batches' token means, so it runs in one */
    struct swift_grpo_stats st = {0};
    int split = p.loss_type == SWIFT_GRPO_LOSS_BNPO ? R : 5;
    double c1 = swift_grpo_loss(&p, split, off, len, lp, old, ref, adv, dl, &st);
    if (split < R)
        swift_grpo_loss(
            &p, R - split, off + split, len + split, lp, old, ref, adv + split, dl, &st);
    assert_true(split < R || c1 == st.contrib);
    close_to(st.contrib / st.items, num(c, "loss"), 1e-5, cname, "loss");
    json_t *m = json_object_get(c, "metrics");
    if (p.beta != 0.0)
        close_to(st.kl_sum / st.tokens, num(m, "kl"), 1e-5, cname, "kl");
    else
        assert_null(json_object_get(m, "kl"));
    close_to(st.clip_low / st.tokens, num(m, "clip_ratio/low_mean"), 1e-6, cname, "low_mean");
    close_to(st.clip_high / st.tokens, num(m, "clip_ratio/high_mean"), 1e-6, cname, "high_mean");
    close_to(
        st.clip_region / st.tokens, num(m, "clip_ratio/region_mean"), 1e-6, cname, "region_mean");
    assert_true(st.seqs > 0);
    close_to(st.seq_low_min, num(m, "clip_ratio/low_min"), 1e-6, cname, "low_min");
    close_to(st.seq_high_max, num(m, "clip_ratio/high_max"), 1e-6, cname, "high_max");
    assert_int_equal((long)st.tokens, (long)num(c, "num_items_in_batch"));
    double mx = 0, err = 0;
    for (size_t i = 0; i < n; i++) {
        dl[i] = (float)(dl[i] / st.items);
        mx = fmax(mx, fabs(want[i]));
    }
    size_t at = 0;
    for (size_t i = 0; i < n; i++)
        if (fabs(dl[i] - want[i]) > err) {
            err = fabs(dl[i] - want[i]);
            at = i;
        }
    if (err > 1e-5 * mx)
        fail_msg("%s: d loss / d logp[%zu] %.9g, autograd %.9g (max %.3g)",
                 cname,
                 at,
                 (double)dl[at],
                 want[at],
                 mx);
    *worst = fmax(*worst, err / mx);
    free(old);
    free(ref);
    free(adv);
    free(want);
    return dl;
}

/* (b) */
static void test_loss(void **s)
{
    (void)s;
    const char *cname;
    json_t *c;
    int types[4] = {0}, ncases = 0;
    double worst = 0;
    json_object_foreach(json_object_get(ex, "cases"), cname, c)
    {
        double *lp = vec(cname, "logps", (size_t)R * (size_t)TC, 1);
        free(check_loss(cname, c, lp, &worst));
        struct swift_grpo_params p;
        params_of(c, &p);
        types[p.loss_type] = 1;
        ncases++;
        free(lp);
    }
    assert_true(types[0] && types[1] && types[2] && types[3]);
    printf("# %d cases: kl, clip ratios = TRL's; worst relative loss error %.2g, worst |dlogp - "
           "autograd| / max %.2g\n",
           ncases,
           worst_loss,
           worst);
}

/* (c) one case with parameter gradients; returns the worst relative gradient error */
static double model_case(const char *cname, json_t *c)
{
    struct swift_model m;
    assert_int_equal(swift_model_load(&m, MODEL, &swift_cpu_strict_ops, 0), 0);
    json_t *pr = json_object_get(ex, "prompt_ids"), *co = json_object_get(ex, "completion_ids");
    int pad = (int)num(ex, "pad"), T = 0;
    for (int r = 0; r < R; r++) {
        int L = (int)json_array_size(json_array_get(pr, (size_t)r)) + len[r];
        T = L > T ? L : T;
    }
    size_t N = (size_t)R * (size_t)T;
    int32_t *tok = malloc(N * sizeof(int32_t)), *tgt = malloc(N * sizeof(int32_t));
    int32_t *pos = malloc(N * sizeof(int32_t));
    int *plen = malloc((size_t)R * sizeof(int));
    for (int r = 0; r < R; r++) {
        json_t *p = json_array_get(pr, (size_t)r), *q = json_array_get(co, (size_t)r);
        plen[r] = (int)json_array_size(p);
        for (int t = 0; t < T; t++) {
            size_t i = (size_t)r * T + t;
            int k = t - plen[r];
            tok[i] = t < plen[r]  ? (int32_t)json_integer_value(json_array_get(p, (size_t)t))
                     : k < len[r] ? (int32_t)json_integer_value(json_array_get(q, (size_t)k))
                                  : pad;
            pos[i] = t;
            /* the token at t predicts completion token k + 1 */
            tgt[i] = k + 1 >= 0 && k + 1 < len[r]
                         ? (int32_t)json_integer_value(json_array_get(q, (size_t)(k + 1)))
                         : -1;
        }
    }
    double temp = num(json_object_get(c, "params"), "temperature");
    struct swift_batch b = {.B = R, .T = T, .tokens = tok, .targets = tgt, .pos = pos};
    swift_model_zero_grad(&m);
    assert_int_equal(swift_model_forward_logits(&m, &b, 1), 0);
    if (temp != 1.0)
        swift_model_scale_dlogits(&m, 0, (int)N, (float)(1.0 / temp));
    /* our per-token log-probs in TRL's (R, TC) layout */
    size_t n = (size_t)R * (size_t)TC;
    double *want = vec(cname, "logps", n, 1), *lp = calloc(n, sizeof(double));
    double *row = malloc((size_t)T * sizeof(double));
    for (int r = 0; r < R; r++) {
        swift_model_token_logps(&m, tgt, r * T, (r + 1) * T, row);
        for (int k = 0; k < len[r]; k++) {
            lp[off[r] + k] = row[plen[r] - 1 + k];
            if (fabs(lp[off[r] + k] - want[off[r] + k]) > 1e-5)
                fail_msg("%s: row %d token %d: log-prob %.9g, TRL %.9g",
                         cname,
                         r,
                         k,
                         lp[off[r] + k],
                         want[off[r] + k]);
        }
        for (int t = 0; t < T; t++)
            if (tgt[(size_t)r * T + t] < 0)
                assert_true(row[t] == 0.0);
    }
    double wdl = 0;
    float *dl = check_loss(cname, c, lp, &wdl); /* dlogp / items on our log-probs */
    float *w = calloc((size_t)T, sizeof(float));
    for (int r = 0; r < R; r++) {
        for (int t = 0; t < T; t++)
            w[t] = 0;
        for (int k = 0; k < len[r]; k++)
            w[plen[r] - 1 + k] = dl[off[r] + k];
        swift_model_token_grad(&m, tgt, r * T, (r + 1) * T, w);
    }
    if (temp != 1.0)
        swift_model_scale_dlogits(&m, 0, (int)N, (float)(1.0 / temp));
    swift_model_backward(&m, &b);

    double worst = 0;
    for (int p = 0; p < m.np; p++) {
        char what[300];
        snprintf(what, sizeof(what), "grad.%s", m.p[p].name);
        double *gw = vec(cname, what, m.p[p].numel, 1);
        assert_non_null(m.p[p].g);
        float *g = malloc(m.p[p].numel * sizeof(float)); /* backend memory: download */
        m.ops->download(g, m.p[p].g, m.p[p].numel * sizeof(float));
        double mx = 0, err = 0;
        size_t at = 0;
        for (size_t i = 0; i < m.p[p].numel; i++)
            mx = fmax(mx, fabs(gw[i]));
        for (size_t i = 0; i < m.p[p].numel; i++)
            if (fabs(g[i] - gw[i]) > err) {
                err = fabs(g[i] - gw[i]);
                at = i;
            }
        double rel = mx > 0 ? err / mx : err;
        worst = fmax(worst, rel);
        if (rel > 2e-5)
            fail_msg("%s %s[%zu]: gradient %.9g, TRL %.9g (max |TRL| %.3g)",
                     cname,
                     m.p[p].name,
                     at,
                     (double)g[at],
                     gw[at],
                     mx);
        free(gw);
        free(g);
    }
    /* the fixture holds a gradient for every parameter, no more */
    char pre[200];
    int npre = snprintf(pre, sizeof(pre), "%s.grad.", cname), nkeys = 0;
    for (size_t i = 0; i < ten.ntensors; i++)
        nkeys += !strncmp(ten.tensors[i].name, pre, (size_t)npre);
    assert_int_equal(nkeys, m.np);
    free(w);
    free(dl);
    free(row);
    free(lp);
    free(want);
    free(plen);
    free(tok);
    free(tgt);
    free(pos);
    swift_model_free(&m);
    return worst;
}

static void test_model_grads(void **s)
{
    (void)s;
    const char *cname;
    json_t *c;
    int ncases = 0;
    json_object_foreach(json_object_get(ex, "cases"), cname, c)
    {
        if (!json_is_true(json_object_get(c, "grads")))
            continue;
        double w = model_case(cname, c);
        printf("# %s: log-probs and loss = TRL's; worst |grad - TRL| / max |TRL| %.2g\n", cname, w);
        ncases++;
    }
    assert_true(ncases >= 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_advantages),
        cmocka_unit_test(test_loss),
        cmocka_unit_test(test_model_grads),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
