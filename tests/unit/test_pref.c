/* Preference training (lib/train/pref_loss.h, lib/train/dpo.c): the per-pair losses on
 * hand-computed cases and their derivatives against finite differences; then through the tiny
 * Llama fixture, the objective's gradient (policy rows, reference with adapters off or a frozen
 * copy, ORPO's prompt NLL, CPO's NLL) against finite differences of its loss, and the first
 * step's DPO loss with fresh adapters: exactly ln 2. */
#include "lib/train/objective.h"
#include "lib/train/pref_loss.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lib/model/lora.h"

#define FIX "tests/fixtures/model/llama"

static struct swift_pref_out pair(int obj, int loss, double beta, double ls, double gamma,
                                  struct swift_pref_in in)
{
    struct swift_pref_params p = {
        .obj = obj, .loss = loss, .beta = beta, .label_smoothing = ls, .simpo_gamma = gamma};
    struct swift_pref_out o;
    swift_pref_pair(&p, &in, &o);
    return o;
}

#define NEAR(a, b) assert_true(fabs((double)(a) - (double)(b)) <= 1e-12 * (1 + fabs((double)(b))))

static void test_dpo_cases(void **s)
{
    (void)s;
    /* policy == reference: ln 2, rewards 0, d/dpc = -beta/2 */
    struct swift_pref_in eq = {.pc = -7, .pr = -9, .rc = -7, .rr = -9, .nc = 3, .nr = 4};
    struct swift_pref_out o = pair(SWIFT_PREF_DPO, SWIFT_PREF_SIGMOID, 0.1, 0, 0, eq);
    NEAR(o.loss, log(2.0));
    NEAR(o.dpc, -0.05);
    NEAR(o.dpr, 0.05);
    NEAR(o.reward_c, 0);
    NEAR(o.reward_r, 0);
    /* logratios +1 and -1: z = 0.1 * 2 = 0.2 */
    struct swift_pref_in in = {.pc = -10, .pr = -12, .rc = -11, .rr = -11, .nc = 4, .nr = 2};
    o = pair(SWIFT_PREF_DPO, SWIFT_PREF_SIGMOID, 0.1, 0, 0, in);
    NEAR(o.loss, 0.5981388693815918); /* log(1 + e^-0.2) */
    NEAR(o.reward_c, 0.1);
    NEAR(o.reward_r, -0.1);
    NEAR(o.logp_c, -10);
    NEAR(o.dpc, -0.1 / (1 + exp(0.2)));
    /* cDPO: -(1-ls) log s(z) - ls log s(-z) = -log s(z) + ls z */
    NEAR(pair(SWIFT_PREF_DPO, SWIFT_PREF_SIGMOID, 0.1, 0.1, 0, in).loss, 0.5981388693815918 + 0.02);
    NEAR(pair(SWIFT_PREF_DPO, SWIFT_PREF_ROBUST, 0.1, 0.1, 0, in).loss, 0.5731388693815918);
    o = pair(SWIFT_PREF_DPO, SWIFT_PREF_HINGE, 0.1, 0, 0, in);
    NEAR(o.loss, 0.8);
    NEAR(o.dpc, -0.1);
    NEAR(o.dpr, 0.1);
    /* ipo: (1/4 - (-1)/2 - 1/(2*0.1))^2 = (0.75 - 5)^2 */
    o = pair(SWIFT_PREF_DPO, SWIFT_PREF_IPO, 0.1, 0, 0, in);
    NEAR(o.loss, 18.0625);
    NEAR(o.dpc, 2 * -4.25 / 4);
    NEAR(o.dpr, -2 * -4.25 / 2);
    NEAR(o.reward_c, 0.1); /* rewards from the sums, as trl */
}

static void test_cpo_cases(void **s)
{
    (void)s;
    struct swift_pref_in in = {.pc = -10, .pr = -12, .nc = 5, .nr = 4};
    struct swift_pref_out o = pair(SWIFT_PREF_CPO, SWIFT_PREF_SIGMOID, 0.1, 0, 0, in);
    NEAR(o.loss, 0.5981388693815918);
    NEAR(o.reward_c, -1.0);
    NEAR(o.reward_r, -1.2);
    /* simpo on means (-2, -3), beta 2, gamma 0.5: z = 2 (1 - 0.25) = 1.5 */
    o = pair(SWIFT_PREF_CPO, SWIFT_PREF_SIMPO, 2.0, 0, 0.5, in);
    NEAR(o.loss, 0.2014132779827524);
    NEAR(o.reward_c, -4.0);
    NEAR(o.reward_r, -6.0);
    NEAR(o.logp_c, -2.0);
    NEAR(o.dpc, -2.0 / (1 + exp(1.5)) / 5);
    /* ipo on means: (1 - 5)^2 */
    NEAR(pair(SWIFT_PREF_CPO, SWIFT_PREF_IPO, 0.1, 0, 0, in).loss, 16.0);
    assert_int_equal(swift_pref_loss_ok(SWIFT_PREF_CPO, SWIFT_PREF_ROBUST), 0);
    assert_int_equal(swift_pref_loss_ok(SWIFT_PREF_DPO, SWIFT_PREF_SIMPO), 0);
    assert_int_equal(swift_pref_loss_parse("robust"), SWIFT_PREF_ROBUST);
    /* kto and apo_zero_unpaired are --rlhf kto's (lib/train/kto.c), no pair objective's */
    assert_int_equal(swift_pref_loss_parse("kto"), SWIFT_PREF_KTO);
    assert_int_equal(swift_pref_loss_parse("apo_zero_unpaired"), SWIFT_PREF_APO_ZERO_UNPAIRED);
    assert_int_equal(swift_pref_loss_ok(SWIFT_PREF_DPO, SWIFT_PREF_KTO), 0);
    assert_int_equal(swift_pref_loss_ok(SWIFT_PREF_CPO, SWIFT_PREF_APO_ZERO_UNPAIRED), 0);
    assert_int_equal(swift_pref_loss_parse("nca_pair"), -1);
}

static void test_orpo_case(void **s)
{
    (void)s;
    /* means -0.5 and -1.5: log odds = 1 - (log(1 - e^-0.5) - log(1 - e^-1.5)) */
    struct swift_pref_in in = {.pc = -2, .pr = -3, .nc = 4, .nr = 2};
    struct swift_pref_out o = pair(SWIFT_PREF_ORPO, 0, 0.1, 0, 0, in);
    NEAR(o.log_odds, 1.6802696706417346);
    NEAR(o.odds_ratio, -0.1708592171464785);
    NEAR(o.loss, 0.017085921714647852);
    NEAR(o.reward_c, -0.05);
    NEAR(o.reward_r, -0.15);
}

/* every objective and loss type: d loss / d pc, d pr against central differences */
static void test_derivatives(void **s)
{
    (void)s;
    const int cases[][2] = {{SWIFT_PREF_DPO, SWIFT_PREF_SIGMOID},
                            {SWIFT_PREF_DPO, SWIFT_PREF_HINGE},
                            {SWIFT_PREF_DPO, SWIFT_PREF_IPO},
                            {SWIFT_PREF_DPO, SWIFT_PREF_ROBUST},
                            {SWIFT_PREF_CPO, SWIFT_PREF_SIGMOID},
                            {SWIFT_PREF_CPO, SWIFT_PREF_HINGE},
                            {SWIFT_PREF_CPO, SWIFT_PREF_IPO},
                            {SWIFT_PREF_CPO, SWIFT_PREF_SIMPO},
                            {SWIFT_PREF_ORPO, SWIFT_PREF_SIGMOID}};
    const struct swift_pref_in pts[] = {{-20, -23, -21, -21.5, 9, 11},
                                        {-3.1, -2.2, -2.9, -2.0, 4, 3},
                                        {-40, -35, -38, -36, 20, 17}};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
        for (size_t k = 0; k < sizeof(pts) / sizeof(pts[0]); k++) {
            struct swift_pref_params p = {.obj = cases[c][0],
                                          .loss = cases[c][1],
                                          .beta = 0.3,
                                          .label_smoothing = 0.1,
                                          .simpo_gamma = 0.5};
            struct swift_pref_out o, a, b;
            swift_pref_pair(&p, &pts[k], &o);
            for (int w = 0; w < 2; w++) {
                const double h = 1e-6;
                struct swift_pref_in ip = pts[k], im = pts[k];
                *(w ? &ip.pr : &ip.pc) += h;
                *(w ? &im.pr : &im.pc) -= h;
                swift_pref_pair(&p, &ip, &a);
                swift_pref_pair(&p, &im, &b);
                double fd = (a.loss - b.loss) / (2 * h), an = w ? o.dpr : o.dpc;
                if (fabs(fd - an) > 1e-6 * (1 + fabs(an)))
                    fail_msg("obj %d loss %d point %zu d/d%s: %.9g vs %.9g",
                             cases[c][0],
                             cases[c][1],
                             k,
                             w ? "pr" : "pc",
                             an,
                             fd);
            }
        }
}

/* A pair (prompt 2 tokens, chosen 2, rejected 1) into two rows of 5: positions restart per row,
 * targets on the response only (ORPO: the chosen row's prompt targets as -2 - id); padding. */
static void test_fill(void **s)
{
    (void)s;
    struct swift_train_opts o;
    swift_train_opts_init(&o);
    const uint32_t ids[] = {5, 6, 7, 8, 5, 6, 9}, docs[] = {4, 3};
    const uint8_t mask[] = {0, 0, 1, 1, 0, 0, 1};
    struct swift_sample x = {.ids = ids, .mask = mask, .len = 7, .doc_len = docs, .n_docs = 2};
    for (int orpo = 0; orpo < 2; orpo++) {
        struct swift_objective obj;
        assert_int_equal(swift_objective_init(&obj, orpo ? "orpo" : "dpo", &o, NULL), 0);
        assert_string_equal(obj.kind, "pairs");
        assert_string_equal(obj.item, "pairs");
        assert_null(obj.check(&obj, &x));
        int32_t tok[10], tgt[10], pos[10];
        assert_int_equal(obj.fill(&obj, &x, 5, tok, tgt, pos), 1);
        const int32_t etok[] = {5, 6, 7, 8, 0, 5, 6, 9, 0, 0};
        const int32_t epos[] = {0, 1, 2, 3, 0, 0, 1, 2, 0, 1};
        const int32_t etgt[] = {orpo ? -8 : -1, 7, 8, -1, -1, -1, 9, -1, -1, -1};
        assert_memory_equal(tok, etok, sizeof(tok));
        assert_memory_equal(pos, epos, sizeof(pos));
        assert_memory_equal(tgt, etgt, sizeof(tgt));
        assert_int_equal(obj.fill(&obj, NULL, 5, tok, tgt, pos), 0);
        for (int t = 0; t < 10; t++)
            assert_int_equal(tgt[t], -1);
        swift_objective_free(&obj);
    }
    /* not a pair; a pair without a rejected response */
    struct swift_objective obj;
    assert_int_equal(swift_objective_init(&obj, "dpo", &o, NULL), 0);
    struct swift_sample one = {.ids = ids, .mask = mask, .len = 4, .doc_len = docs, .n_docs = 1};
    assert_non_null(strstr(obj.check(&obj, &one), "is not a pair"));
    const uint8_t nomask[] = {0, 0, 1, 1, 0, 0, 0};
    x.mask = nomask;
    assert_non_null(strstr(obj.check(&obj, &x), "no response tokens in its rejected document"));
    swift_objective_free(&obj);
}

/* ---- through the model ---- */

/* Two pairs over a shared prompt of 5 tokens (vocabulary 128), rows of T = 16. */
enum { T = 16, NPAIR = 2 };
struct pairs {
    uint32_t ids[NPAIR][32];
    uint8_t mask[NPAIR][32];
    uint32_t docs[NPAIR][2];
    int32_t tok[NPAIR * 2 * T], tgt[NPAIR * 2 * T], pos[NPAIR * 2 * T];
};

static void make_pairs(struct pairs *P, const struct swift_objective *obj)
{
    for (int p = 0; p < NPAIR; p++) {
        int lc = 6 + p, lr = 4 + 3 * p, n = 0;
        for (int d = 0; d < 2; d++) {
            int lresp = d ? lr : lc;
            for (int t = 0; t < 5 + lresp; t++) {
                P->ids[p][n] = (uint32_t)((7 * t + 13 * p + (t >= 5 ? 31 * d : 0)) % 128);
                P->mask[p][n++] = t >= 5;
            }
            P->docs[p][d] = (uint32_t)(5 + lresp);
        }
        struct swift_sample x = {.ids = P->ids[p],
                                 .mask = P->mask[p],
                                 .len = (uint32_t)n,
                                 .doc_len = P->docs[p],
                                 .n_docs = 2};
        assert_null(obj->check(obj, &x));
        size_t off = (size_t)p * 2 * T;
        assert_int_equal(obj->fill(obj, &x, T, P->tok + off, P->tgt + off, P->pos + off), 1);
    }
}

/* loss of the batch (forward only) */
static double loss_of(struct swift_objective *obj, struct swift_model *m,
                      const struct swift_batch *b)
{
    struct swift_objective_sums s = {0};
    assert_int_equal(obj->forward(obj, m, b, 0.0f, &s), 0);
    return s.loss.sum / (double)s.loss.count;
}

static void check_grad(const char *name, int lora, double rpo, double *first)
{
    struct swift_model m;
    assert_int_equal(swift_model_load(&m, FIX, &swift_cpu_ops, lora), 0);
    if (lora) {
        struct swift_lora_opts lo = {
            .rank = 4, .alpha = 8, .dropout = 0.1f, .targets = "all-linear", .seed = 3};
        assert_int_equal(swift_lora_attach(&m, &lo), 0);
    }
    struct swift_train_opts o;
    swift_train_opts_init(&o);
    o.model = FIX;
    o.rpo_alpha = rpo;
    struct swift_objective obj;
    assert_int_equal(swift_objective_init(&obj, name, &o, &m), 0);
    assert_int_equal(obj.rows_per_sample, 2);
    struct pairs P;
    make_pairs(&P, &obj);
    struct swift_batch b = {
        .B = 2 * NPAIR, .T = T, .tokens = P.tok, .targets = P.tgt, .pos = P.pos};
    if (first)
        *first = loss_of(&obj, &m, &b);
    /* move the policy off the reference */
    float *w = lora ? m.lora_params : m.params;
    size_t nw = lora ? m.nlora : m.nparams;
    for (size_t i = 0; i < nw; i++)
        w[i] += 0.02f * (float)((int)((i * 7919) % 13) - 6);
    swift_model_zero_grad(&m);
    struct swift_objective_sums s = {0};
    m.dropout_seed = 5;
    assert_int_equal(obj.forward(&obj, &m, &b, 1.0f / NPAIR, &s), 0);
    obj.backward(&obj, &m, &b);
    const float *g = lora ? m.lora_grads : m.grads;
    double worst = 0;
    for (int k = 0; k < 12; k++) {
        size_t i = (size_t)k * 104729u % nw;
        float keep = w[i];
        const double h = 1e-2;
        w[i] = keep + (float)h;
        double lp = loss_of(&obj, &m, &b);
        w[i] = keep - (float)h;
        double lm = loss_of(&obj, &m, &b);
        w[i] = keep;
        double fd = (lp - lm) / (2 * h), err = fabs(fd - g[i]) / (1e-3 + fabs(fd));
        if (err > worst)
            worst = err;
        if (err > 2e-2)
            fail_msg("%s %s: parameter %zu gradient %.6g, finite difference %.6g",
                     name,
                     lora ? "lora" : "full",
                     i,
                     (double)g[i],
                     fd);
    }
    printf("# %s %s: worst relative error of 12 gradient elements %.2g\n",
           name,
           lora ? "lora" : "full",
           worst);
    swift_objective_free(&obj);
    swift_model_free(&m);
}

static void test_dpo_lora_grad(void **s)
{
    (void)s;
    double first;
    check_grad("dpo", 1, 0, &first);
    assert_true(first == log(2.0)); /* fresh adapters: B = 0, the policy is the reference */
}

static void test_dpo_full_grad(void **s)
{
    (void)s;
    check_grad("dpo", 0, 0.5, NULL); /* a frozen copy as reference; RPO's NLL */
}

static void test_ref_free_grads(void **s)
{
    (void)s;
    check_grad("orpo", 1, 0, NULL);
    check_grad("cpo", 1, 0, NULL);
    check_grad("simpo", 0, 0, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dpo_cases),
        cmocka_unit_test(test_cpo_cases),
        cmocka_unit_test(test_orpo_case),
        cmocka_unit_test(test_derivatives),
        cmocka_unit_test(test_fill),
        cmocka_unit_test(test_dpo_lora_grad),
        cmocka_unit_test(test_dpo_full_grad),
        cmocka_unit_test(test_ref_free_grads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
