/* galore: GaLore's optimizer step against galore-torch's GaLoreAdamW (tests/ref/
 * gen_galore_fixtures.py writes tests/ref/fixtures/galore/galore.safetensors), the target
 * selection, the rank clamp.
 *
 * The SVD's singular vectors are defined up to sign (each column of U, each row of Vh), and a
 * sign flip of P changes the moments kept in the projected space (m flips, v does not), so
 * after a refresh the projections of torch and of our LAPACK need not be the same matrix. The
 * comparison is made robust in two ways: (1) the subspace projector of P (P^T P for Vh[:k],
 * P P^T for U[:, :k]) is sign-invariant and must equal torch's to 1e-4, and our P is then
 * replaced by torch's exact P (the on_refresh hook) so every step, refreshes included, is
 * compared to 1e-5 relative; (2) with our own P throughout, the steps up to the second refresh
 * are sign-invariant (m P: both flip together) and must equal torch's to 1e-5 as well. */
#include "lib/train/galore.h"

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
#include "lib/core/banned.h"

#define FIX "tests/ref/fixtures/galore/galore.safetensors"
/* the generator's constants */
#define LR 1e-2f
#define B1 0.9f
#define B2 0.95f
#define EPS 1e-8f
#define WD 0.1f
#define SCALE 0.25
#define GAP 2
#define STEPS 5

struct gcase {
    const char *name;
    int rows, cols, rank;
    float gscale;
};
static const struct gcase cases[] = {
    {"tall", 12, 6, 3, 1.0f}, {"wide", 5, 11, 2, 1.0f}, {"square", 8, 8, 4, 0.5f}};

/* tensor "<name>.<what>" or, t > 0, "<name>.<what>.<t>" */
static float *load(const struct swift_safetensors *st, const char *what, const char *name, int t,
                   size_t want)
{
    char nm[128];
    if (t > 0)
        snprintf(nm, sizeof(nm), "%s.%s.%d", name, what, t);
    else
        snprintf(nm, sizeof(nm), "%s.%s", name, what);
    const struct swift_st_tensor *x = swift_safetensors_find(st, nm);
    if (!x)
        fail_msg("fixture has no %s", nm);
    assert_int_equal(x->numel, want);
    float *out = malloc(want * sizeof(float));
    assert_int_equal(swift_st_tensor_to_f32(x, out), 0);
    return out;
}

/* the subspace projector of P: P^T P (k x cols, right) or P P^T (rows x k, left) */
static void projector(const struct swift_galore_item *it, const float *P, double *out)
{
    int R = it->rows, C = it->cols, k = it->k;
    int d = it->left ? R : C;
    for (int i = 0; i < d; i++)
        for (int j = 0; j < d; j++) {
            double s = 0;
            for (int q = 0; q < k; q++)
                s += it->left ? (double)P[i * k + q] * P[j * k + q]
                              : (double)P[q * C + i] * P[q * C + j];
            out[i * d + j] = s;
        }
}

struct hook {
    const struct swift_safetensors *st;
    const struct gcase *c;
    int t;       /* the step being taken (1-based) */
    int replace; /* use torch's exact P */
    int refreshes;
};

static void on_refresh(void *ctx, int i, struct swift_galore_item *it)
{
    struct hook *h = ctx;
    assert_int_equal(i, 0);
    size_t np = (size_t)it->k * (size_t)(it->left ? it->rows : it->cols);
    float *ref = load(h->st, "P", h->c->name, h->t, np);
    int d = it->left ? it->rows : it->cols;
    double *a = malloc((size_t)d * d * sizeof(double)), *b = malloc((size_t)d * d * sizeof(double));
    projector(it, it->P, a);
    projector(it, ref, b);
    for (int q = 0; q < d * d; q++)
        if (fabs(a[q] - b[q]) > 1e-4)
            fail_msg("%s step %d: subspace projector [%d] %g, torch %g",
                     h->c->name,
                     h->t,
                     q,
                     a[q],
                     b[q]);
    if (h->replace)
        memcpy(it->P, ref, np * sizeof(float));
    h->refreshes++;
    free(a);
    free(b);
    free(ref);
}

static void run_case(const struct gcase *c, int replace, int steps)
{
    struct swift_safetensors st;
    assert_int_equal(swift_safetensors_open(&st, FIX), 0);
    size_t n = (size_t)c->rows * c->cols;
    float *w = load(&st, "w0", c->name, 0, n), *g = calloc(n, sizeof(float));
    char name[64];
    snprintf(name, sizeof(name), "model.layers.0.mlp.up_proj.weight");
    struct swift_param p = {.name = name, .w = w, .g = g, .ndim = 2, .numel = n, .decay = 1};
    p.shape[0] = c->rows;
    p.shape[1] = c->cols;
    struct swift_galore gl;
    struct swift_galore_opts go = {
        .rank = c->rank, .gap = GAP, .scale = SCALE, .targets = "all-linear"};
    assert_int_equal(swift_galore_init(&gl, &swift_cpu_ops, &p, 1, &go, B1, B2, EPS, WD), 1);
    assert_int_equal(gl.it[0].left, c->rows < c->cols);
    struct hook h = {.st = &st, .c = c, .replace = replace};
    gl.on_refresh = on_refresh;
    gl.hook_ctx = &h;
    for (int t = 1; t <= steps; t++) {
        float *gt = load(&st, "g", c->name, t, n);
        memcpy(g, gt, n * sizeof(float));
        free(gt);
        h.t = t;
        assert_int_equal(swift_galore_step(&gl, LR, c->gscale), 0);
        float *ref = load(&st, "w", c->name, t, n);
        for (size_t i = 0; i < n; i++) {
            double tol = 1e-5 * fmax(1.0, fabs(ref[i]));
            if (fabs((double)w[i] - ref[i]) > tol)
                fail_msg("%s step %d [%zu]: %.9g, GaLoreAdamW %.9g", c->name, t, i, w[i], ref[i]);
        }
        free(ref);
    }
    assert_int_equal(h.refreshes, (steps + GAP - 1) / GAP);
    swift_galore_free(&gl);
    swift_safetensors_close(&st);
    free(w);
    free(g);
}

/* every step, refreshes included, with torch's projection */
static void test_steps_match_galore_torch(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        run_case(&cases[i], 1, STEPS);
}

/* our own SVD throughout, up to the second refresh (sign-invariant) */
static void test_own_svd_first_period(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        run_case(&cases[i], 0, GAP);
}

static void test_targets(void **state)
{
    (void)state;
    struct swift_param p = {.ndim = 2, .g = (float *)&p};
    const char *yes[] = {"model.layers.0.self_attn.q_proj.weight",
                         "model.layers.3.self_attn.o_proj.weight",
                         "model.layers.1.mlp.down_proj.weight",
                         "model.layers.1.mlp.gate_proj.weight"};
    const char *no[] = {"model.embed_tokens.weight",
                        "lm_head.weight",
                        "model.norm.weight",
                        "model.layers.0.self_attn.q_proj.bias"};
    for (int i = 0; i < 4; i++) {
        p.name = (char *)yes[i];
        assert_true(swift_galore_targets("all-linear", &p));
        p.name = (char *)no[i];
        assert_false(swift_galore_targets("all-linear", &p));
        assert_false(swift_galore_targets("embed_tokens,lm_head,norm", &p));
    }
    p.name = (char *)"model.layers.0.self_attn.v_proj.weight";
    assert_true(swift_galore_targets("q_proj, v_proj", &p));
    p.name = (char *)"model.layers.0.self_attn.k_proj.weight";
    assert_false(swift_galore_targets("q_proj,v_proj", &p));
    p.ndim = 1; /* a 1-D parameter is never projected */
    p.name = (char *)"model.layers.0.self_attn.q_proj.weight";
    assert_false(swift_galore_targets("all-linear", &p));
    p.ndim = 2;
    p.g = NULL; /* frozen */
    assert_false(swift_galore_targets("all-linear", &p));
}

/* rank above min(rows, cols) is clamped (torch slices U[:, :rank]); state sizes */
static void test_rank_clamp_and_state(void **state)
{
    (void)state;
    float w[6 * 4] = {0}, g[6 * 4] = {0};
    for (int i = 0; i < 24; i++)
        g[i] = (float)((i * 7) % 5) - 2.0f + 0.1f * (float)i;
    struct swift_param p = {.name = (char *)"model.layers.0.self_attn.q_proj.weight",
                            .w = w,
                            .g = g,
                            .ndim = 2,
                            .numel = 24,
                            .decay = 0};
    p.shape[0] = 6;
    p.shape[1] = 4;
    struct swift_galore gl;
    struct swift_galore_opts go = {.rank = 16, .gap = 50, .scale = 1, .targets = "all-linear"};
    assert_int_equal(swift_galore_init(&gl, &swift_cpu_ops, &p, 1, &go, B1, B2, EPS, 0), 1);
    assert_int_equal(gl.it[0].k, 4);
    assert_int_equal(gl.state, 4 * 4 + 2 * 6 * 4);
    assert_int_equal(swift_galore_index(&gl, &p), 0);
    assert_int_equal(swift_galore_step(&gl, 1e-3f, 1.0f), 0);
    /* full rank (rows >= cols: P = Vh, 4 x 4) is orthogonal: P P^T = I */
    const float *P = gl.it[0].P;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            double d = 0;
            for (int q = 0; q < 4; q++)
                d += (double)P[i * 4 + q] * P[j * 4 + q];
            assert_float_equal(d, i == j ? 1.0 : 0.0, 1e-5);
        }
    for (int i = 0; i < 24; i++) /* moved, by at most lr * scale per element-ish */
        assert_true(isfinite(w[i]) && fabsf(w[i]) < 1e-2f);
    swift_galore_free(&gl);
    go.targets = "lm_head";
    assert_int_equal(swift_galore_init(&gl, &swift_cpu_ops, &p, 1, &go, B1, B2, EPS, 0), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_steps_match_galore_torch),
        cmocka_unit_test(test_own_svd_first_period),
        cmocka_unit_test(test_targets),
        cmocka_unit_test(test_rank_clamp_and_state),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
