/* Every backward op of the CPU backend against central finite differences of its forward op
 * (objective L = sum(out * R) for a fixed random R), in float32 with h = 1e-2 and a relative
 * tolerance of 1e-3 on the gradient vector (max |analytic - numeric| / max |numeric|).
 * AdamW against its formula in double. The CUDA backend, when it exists, is compared with
 * these same ops. */
#include "kernels/ops.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static const struct swift_ops *ops = &swift_cpu_ops;
static uint64_t rs = 12345;
static float frand(void)
{
    rs = rs * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((rs >> 40) / 16777216.0 * 2.0 - 1.0);
}
/* every buffer of a test is freed by its teardown */
static void *allocs[256];
static int nallocs;
static void *keep(void *p)
{
    if (nallocs < 256)
        allocs[nallocs++] = p;
    return p;
}
static int release_all(void **state)
{
    (void)state;
    while (nallocs > 0)
        free(allocs[--nallocs]);
    return 0;
}
static float *rnd(size_t n)
{
    float *x = keep(malloc(n * sizeof(float)));
    for (size_t i = 0; i < n; i++)
        x[i] = frand();
    return x;
}
static float *zeros(size_t n)
{
    return keep(calloc(n, sizeof(float)));
}

/* the forward under test writes out (nout) from the current inputs */
typedef void (*fwd_fn)(void *ctx, float *out);

static double objective(fwd_fn f, void *ctx, float *out, size_t nout, const float *R)
{
    f(ctx, out);
    double s = 0;
    for (size_t i = 0; i < nout; i++)
        s += (double)out[i] * R[i];
    return s;
}

/* compare grad (n) of input x (n) with finite differences */
static double fd_check(const char *what, fwd_fn f, void *ctx, float *x, size_t n, const float *grad,
                       size_t nout, const float *R)
{
    float *out = malloc(nout * sizeof(float));
    double maxnum = 0, maxerr = 0;
    const float h = 1e-2f;
    for (size_t i = 0; i < n; i++) {
        float x0 = x[i];
        x[i] = x0 + h;
        double lp = objective(f, ctx, out, nout, R);
        x[i] = x0 - h;
        double lm = objective(f, ctx, out, nout, R);
        x[i] = x0;
        double num = (lp - lm) / (2 * h);
        maxnum = fmax(maxnum, fabs(num));
        maxerr = fmax(maxerr, fabs(num - grad[i]));
    }
    free(out);
    double rel = maxerr / (maxnum > 1e-6 ? maxnum : 1e-6);
    printf("# %-22s max rel err %.2e (max |grad| %.3g)\n", what, rel, maxnum);
    assert_true(rel < 1e-3);
    return rel;
}

/* ---- matmul ---- */
struct mm {
    int N, I, O;
    float *x, *w, *b;
};
static void mm_fwd(void *c, float *out)
{
    struct mm *m = c;
    ops->matmul_fwd(out, m->x, m->w, m->b, m->N, m->I, m->O, 1.0f, 0.0f);
}
static void test_matmul(void **s)
{
    (void)s;
    struct mm m = {5, 7, 3, rnd(35), rnd(21), rnd(3)};
    size_t nout = 15;
    float *R = rnd(nout), *dx = zeros(35), *dw = zeros(21), *db = zeros(3);
    ops->matmul_bwd(dx, dw, db, R, m.x, m.w, m.N, m.I, m.O, 1.0f, 0.0f);
    fd_check("matmul din", mm_fwd, &m, m.x, 35, dx, nout, R);
    fd_check("matmul dw", mm_fwd, &m, m.w, 21, dw, nout, R);
    fd_check("matmul db", mm_fwd, &m, m.b, 3, db, nout, R);
}

/* ---- rmsnorm ---- */
struct rn {
    int N, C;
    float *x, *w, *rstd;
};
static void rn_fwd(void *c, float *out)
{
    struct rn *r = c;
    ops->rmsnorm_fwd(out, r->rstd, r->x, r->w, r->N, r->C, 1e-5f);
}
static void test_rmsnorm(void **s)
{
    (void)s;
    struct rn r = {4, 6, rnd(24), rnd(6), zeros(4)};
    float *R = rnd(24), *out = zeros(24), *dx = zeros(24), *dw = zeros(6);
    rn_fwd(&r, out);
    ops->rmsnorm_bwd(dx, dw, R, r.x, r.w, r.rstd, r.N, r.C);
    fd_check("rmsnorm din", rn_fwd, &r, r.x, 24, dx, 24, R);
    fd_check("rmsnorm dw", rn_fwd, &r, r.w, 6, dw, 24, R);
}

/* ---- rope ---- */
struct rp {
    int N, H, D;
    float *x, *tmp, *inv;
    int32_t *pos;
};
static void rp_fwd(void *c, float *out)
{
    struct rp *r = c;
    memcpy(out, r->x, (size_t)r->N * r->H * r->D * sizeof(float));
    ops->rope_fwd(out, r->pos, r->inv, r->N, r->H, r->D);
}
static void test_rope(void **s)
{
    (void)s;
    int32_t pos[4] = {0, 1, 2, 0};
    float inv[4] = {1.0f, 0.3f, 0.05f, 0.001f};
    struct rp r = {4, 2, 8, rnd(64), NULL, inv, pos};
    float *R = rnd(64), *dx = zeros(64);
    memcpy(dx, R, 64 * sizeof(float));
    ops->rope_bwd(dx, pos, inv, r.N, r.H, r.D);
    fd_check("rope dx", rp_fwd, &r, r.x, 64, dx, 64, R);
}

/* ---- attention over packed documents, GQA ---- */
struct at {
    int B, T, NH, NKV, D;
    float *q, *k, *v, *probs;
    int32_t *pos;
};
static void at_fwd(void *c, float *out)
{
    struct at *a = c;
    ops->attention_fwd(out, a->probs, a->q, a->k, a->v, a->pos, a->B, a->T, a->NH, a->NKV, a->D);
}
static void test_attention(void **s)
{
    (void)s;
    /* row 0: one document of 5; row 1: documents of 2 and 3 */
    int32_t pos[10] = {0, 1, 2, 3, 4, 0, 1, 0, 1, 2};
    struct at a = {2, 5, 4, 2, 4, rnd(160), rnd(80), rnd(80), zeros(2 * 4 * 25), pos};
    size_t nq = 160, nk = 80;
    float *R = rnd(nq), *out = zeros(nq), *dq = zeros(nq), *dk = zeros(nk), *dv = zeros(nk);
    at_fwd(&a, out);
    ops->attention_bwd(dq, dk, dv, R, a.probs, a.q, a.k, a.v, pos, a.B, a.T, a.NH, a.NKV, a.D);
    fd_check("attention dq", at_fwd, &a, a.q, nq, dq, nq, R);
    fd_check("attention dk", at_fwd, &a, a.k, nk, dk, nq, R);
    fd_check("attention dv", at_fwd, &a, a.v, nk, dv, nq, R);
    /* block-diagonal: the first token of row 1's second document ignores the first document */
    float *out2 = zeros(nq);
    float save = a.k[(5 + 1) * 2 * 4]; /* row 1, token 1 (document 1), kv head 0 */
    a.k[(5 + 1) * 2 * 4] += 5.0f;
    at_fwd(&a, out2);
    for (int h = 0; h < 4; h++)
        for (int d = 0; d < 4; d++) {
            size_t i = ((size_t)(5 + 2) * 4 + h) * 4 + d; /* row 1, token 2 = doc 2 start */
            assert_true(out[i] == out2[i]);
        }
    a.k[(5 + 1) * 2 * 4] = save;
}

/* ---- swiglu ---- */
struct sg {
    float *g, *u;
    size_t n;
};
static void sg_fwd(void *c, float *out)
{
    struct sg *q = c;
    ops->swiglu_fwd(out, q->g, q->u, q->n);
}
static void test_swiglu(void **s)
{
    (void)s;
    struct sg q = {rnd(12), rnd(12), 12};
    float *R = rnd(12), *dg = zeros(12), *du = zeros(12);
    for (int i = 0; i < 12; i++)
        q.g[i] *= 3;
    ops->swiglu_bwd(dg, du, R, q.g, q.u, 12);
    fd_check("swiglu dgate", sg_fwd, &q, q.g, 12, dg, 12, R);
    fd_check("swiglu dup", sg_fwd, &q, q.u, 12, du, 12, R);
}

/* ---- cross-entropy: objective is the loss itself ---- */
struct ce {
    int N, V;
    float *x;
    int32_t *t;
};
static void ce_fwd(void *c, float *out)
{
    struct ce *e = c;
    double ls = 0;
    long n = 0, ok = 0;
    ops->cross_entropy(NULL, &ls, &n, &ok, e->x, e->t, e->N, e->V, 0.0f);
    out[0] = (float)(ls / 3.0);
}
static void test_cross_entropy(void **s)
{
    (void)s;
    int32_t t[4] = {2, -1, 0, 5};
    struct ce e = {4, 6, rnd(24), t};
    float one = 1, *dx = zeros(24);
    double ls = 0;
    long n = 0, ok = 0;
    ops->cross_entropy(dx, &ls, &n, &ok, e.x, t, 4, 6, 1.0f / 3.0f);
    assert_int_equal(n, 3);
    for (int c = 0; c < 6; c++)
        assert_true(dx[6 + c] == 0.0f); /* untrained row */
    fd_check("cross_entropy dlogits", ce_fwd, &e, e.x, 24, dx, 1, &one);
}

/* ---- embedding ---- */
struct em {
    int N, C;
    int32_t *tok;
    float *emb;
};
static void em_fwd(void *c, float *out)
{
    struct em *e = c;
    ops->embed_fwd(out, e->tok, e->emb, e->N, e->C);
}
static void test_embed(void **s)
{
    (void)s;
    int32_t tok[5] = {1, 3, 1, 0, 3};
    struct em e = {5, 3, tok, rnd(12)};
    float *R = rnd(15), *de = zeros(12);
    ops->embed_bwd(de, R, tok, 5, 3);
    fd_check("embedding demb", em_fwd, &e, e.emb, 12, de, 15, R);
}

/* ---- dropout: deterministic, unbiased scale, backward uses the same mask ---- */
static void test_dropout(void **s)
{
    (void)s;
    size_t n = 10000;
    float *x = zeros(n), *y = zeros(n), *y2 = zeros(n), *dx = zeros(n), *g = zeros(n);
    uint8_t *m = keep(calloc(n, 1)), *m2 = keep(calloc(n, 1));
    for (size_t i = 0; i < n; i++)
        x[i] = g[i] = 1.0f;
    ops->dropout_fwd(y, m, x, n, 0.25f, 7);
    ops->dropout_fwd(y2, m2, x, n, 0.25f, 7);
    assert_memory_equal(m, m2, n);
    double kept = 0;
    for (size_t i = 0; i < n; i++)
        kept += m[i];
    assert_true(fabs(kept / n - 0.75) < 0.02);
    ops->dropout_bwd(dx, g, m, n, 0.25f);
    for (size_t i = 0; i < n; i++)
        assert_true(dx[i] == y[i]);
}

/* ---- AdamW against torch's formula in double ---- */
static void test_adamw(void **s)
{
    (void)s;
    float p[3] = {0.5f, -1.0f, 2.0f}, g[3] = {0.1f, -0.2f, 0.0f}, m[3] = {0}, v[3] = {0};
    double P[3] = {0.5, -1.0, 2.0}, M[3] = {0}, Vv[3] = {0};
    for (int step = 1; step <= 3; step++) {
        double lr = 1e-2, wd = 0.1, b1 = 0.9, b2 = 0.95, eps = 1e-8;
        double bc1 = 1 - pow(b1, step), bc2 = 1 - pow(b2, step);
        ops->adamw(p,
                   g,
                   m,
                   v,
                   3,
                   (float)lr,
                   (float)b1,
                   (float)b2,
                   (float)eps,
                   (float)wd,
                   (float)bc1,
                   (float)bc2,
                   0.5f);
        for (int i = 0; i < 3; i++) {
            double gi = g[i] * 0.5;
            P[i] *= 1 - lr * wd;
            M[i] = b1 * M[i] + (1 - b1) * gi;
            Vv[i] = b2 * Vv[i] + (1 - b2) * gi * gi;
            P[i] -= lr / bc1 * M[i] / (sqrt(Vv[i]) / sqrt(bc2) + eps);
            assert_true(fabs(P[i] - p[i]) < 1e-6);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_matmul, release_all),
        cmocka_unit_test_teardown(test_rmsnorm, release_all),
        cmocka_unit_test_teardown(test_rope, release_all),
        cmocka_unit_test_teardown(test_attention, release_all),
        cmocka_unit_test_teardown(test_swiglu, release_all),
        cmocka_unit_test_teardown(test_cross_entropy, release_all),
        cmocka_unit_test_teardown(test_embed, release_all),
        cmocka_unit_test_teardown(test_dropout, release_all),
        cmocka_unit_test_teardown(test_adamw, release_all),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
