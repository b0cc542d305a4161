/* optim 8-bit: swift_adamw_init_8bit (bitsandbytes' AdamW8bit) against bnb on the CPU
 * (tests/ref/gen_adam8_fixtures.py: tests/fixtures/adam8/adam8.safetensors), step by step on
 * the same gradients: weights, uint8 codes and absmax of both moments; the 32-bit states of a
 * parameter below min_8bit_size; the maps of kernels/qmap8.h; the state size; the CUDA kernel
 * against the CPU's (when a GPU is present). */
#include "lib/train/optim.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#ifdef SWIFT_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include "kernels/ops.h"
#include "kernels/qmap8.h"
#include "lib/formats/safetensors.h"

#define FIX "tests/fixtures/adam8/adam8.safetensors"

static struct swift_safetensors st;

/* KIND.S.P, or KIND.P when s is 0 */
static const struct swift_st_tensor *get(const char *kind, int s, const char *p)
{
    char nm[128];
    if (s)
        snprintf(nm, sizeof(nm), "%s.%d.%s", kind, s, p);
    else
        snprintf(nm, sizeof(nm), "%s.%s", kind, p);
    const struct swift_st_tensor *t = swift_safetensors_find(&st, nm);
    if (!t)
        fail_msg("%s: no tensor %s", FIX, nm);
    return t;
}

static float *f32(const struct swift_st_tensor *t)
{
    float *x = malloc((t->numel ? t->numel : 1) * sizeof(float));
    assert_int_equal(swift_st_tensor_to_f32(t, x), 0);
    return x;
}

static double meta(const char *k)
{
    const char *s = swift_safetensors_meta(&st, k);
    assert_non_null(s);
    return strtod(s, NULL);
}

static void test_maps(void **state)
{
    (void)state;
    float *q1 = f32(swift_safetensors_find(&st, "qmap1"));
    float *q2 = f32(swift_safetensors_find(&st, "qmap2"));
    assert_memory_equal(q1, swift_qmap8_signed, sizeof(swift_qmap8_signed));
    assert_memory_equal(q2, swift_qmap8_unsigned, sizeof(swift_qmap8_unsigned));
    free(q1);
    free(q2);
}

/* Tolerances. bitsandbytes' CPU path is float32 element math in torch's op order, ours the same
 * order; a few weights still come out one ulp apart (torch's vectorized loops, not visible from
 * Python), so: weights within 1e-6 of max(|w|, 1e-3) (an ulp is 6e-8 relative; the 32-bit
 * path of the small parameter is torch's AdamW formula, the same update as bnb's to rounding),
 * absmax within 1e-6 relative, codes equal except at most 1 in 1000 off by one (a moment an ulp
 * from a table boundary). Seen: codes and absmax bit-equal, weights 4.2e-7. bitsandbytes' own
 * test of AdamW8bit against torch's 32-bit AdamW is far looser (weights atol 1e-5 rtol 1e-3,
 * states atol 3e-3 rtol 1e-3 with up to 20 outliers): quantization error, not op order. */
static void test_steps(void **state)
{
    (void)state;
    const char *names[] = {"small", "blocks16", "ragged"};
    enum { NP = 3 };
    int steps = (int)meta("steps");
    struct swift_param ps[NP];
    for (int i = 0; i < NP; i++) {
        const struct swift_st_tensor *t = get("init", 0, names[i]);
        ps[i] = (struct swift_param){.name = (char *)names[i],
                                     .ndim = t->ndim,
                                     .shape = {t->shape[0], t->ndim > 1 ? t->shape[1] : 0},
                                     .numel = t->numel,
                                     .decay = 1};
        ps[i].w = f32(t);
        ps[i].g = malloc(t->numel * sizeof(float));
    }
    struct swift_adamw o;
    assert_int_equal(swift_adamw_init_8bit(&o,
                                           &swift_cpu_ops,
                                           ps,
                                           NP,
                                           (float)meta("beta1"),
                                           (float)meta("beta2"),
                                           (float)meta("eps"),
                                           (float)meta("weight_decay")),
                     0);
    assert_false(swift_adamw_is_8bit(&o, 1000));
    assert_true(swift_adamw_is_8bit(&o, 4096));
    assert_int_equal(o.total8, 4096 + 4800);
    assert_int_equal(o.blocks8, 16 + 19);
    const char *lrs = swift_safetensors_meta(&st, "lr");
    long bad_codes = 0, codes = 0, diff8 = 0;
    double worst_p = 0, worst_a = 0, worst_s = 0;
    for (int s = 1; s <= steps; s++) {
        char *end;
        float lr = (float)strtod(lrs, &end);
        lrs = *end ? end + 1 : end;
        for (int i = 0; i < NP; i++) {
            float *g = f32(get("grad", s, names[i]));
            memcpy(ps[i].g, g, ps[i].numel * sizeof(float));
            free(g);
        }
        swift_adamw_step(&o, lr, 1.0f);
        size_t off = 0, off8 = 0, blk = 0;
        for (int i = 0; i < NP; i++) {
            size_t n = ps[i].numel, nb = (n + 255) / 256;
            float *want = f32(get("param", s, names[i]));
            int is8 = swift_adamw_is_8bit(&o, n);
            for (size_t j = 0; j < n; j++) {
                double e = fabs(ps[i].w[j] - want[j]) / (fabs(want[j]) + 1e-3);
                worst_p = fmax(worst_p, e);
                diff8 += is8 && ps[i].w[j] != want[j];
            }
            free(want);
            if (!swift_adamw_is_8bit(&o, n)) {
                float *wm = f32(get("exp_avg", s, names[i]));
                float *wv = f32(get("exp_avg_sq", s, names[i]));
                double mx = 0, vx = 0; /* relative to the largest: m cancels to ~0 at times */
                for (size_t j = 0; j < n; j++) {
                    mx = fmax(mx, fabs(wm[j]));
                    vx = fmax(vx, fabs(wv[j]));
                }
                for (size_t j = 0; j < n; j++) {
                    worst_s = fmax(worst_s, fabs(o.m[off + j] - wm[j]) / mx);
                    worst_s = fmax(worst_s, fabs(o.v[off + j] - wv[j]) / vx);
                }
                free(wm);
                free(wv);
                off += n;
                continue;
            }
            const char *sn[2] = {"state1", "state2"};
            const char *an[2] = {"absmax1", "absmax2"};
            for (int k = 0; k < 2; k++) {
                const struct swift_st_tensor *q = get(sn[k], s, names[i]);
                assert_int_equal(q->dtype, SWIFT_DTYPE_U8);
                assert_int_equal(q->numel, n);
                const uint8_t *wq = q->data, *ours = (k ? o.qv : o.qm) + off8;
                for (size_t j = 0; j < n; j++) {
                    int d = abs((int)ours[j] - (int)wq[j]);
                    assert_true(d <= 1);
                    bad_codes += d != 0;
                }
                codes += (long)n;
                float *wa = f32(get(an[k], s, names[i]));
                const float *oa = (k ? o.av : o.am) + blk;
                for (size_t j = 0; j < nb; j++)
                    worst_a = fmax(worst_a, fabs(oa[j] - wa[j]) / (fabs(wa[j]) + 1e-30));
                free(wa);
            }
            off8 += n;
            blk += nb;
        }
    }
    printf("# %d steps: weights worst rel err %.3g, absmax %.3g, 32-bit states %.3g, codes off by "
           "one %ld of %ld, 8-bit weights not bit-equal %ld\n",
           steps,
           worst_p,
           worst_a,
           worst_s,
           bad_codes,
           codes,
           diff8);
    assert_true(worst_p < 1e-6);
    assert_true(worst_a < 1e-6);
    assert_true(worst_s < 1e-6);
    assert_true(bad_codes * 1000 <= codes);
    /* about a quarter of AdamW's 8 bytes per element: 1000 small elements stay 32-bit */
    size_t b = swift_adamw_state_bytes(&o);
    assert_int_equal(b, 1000 * 8 + 8896 * 2 + 35 * 8);
    swift_adamw_free(&o);
    for (int i = 0; i < NP; i++) {
        free(ps[i].w);
        free(ps[i].g);
    }
}

#ifdef SWIFT_HAVE_CUDA
static float *dev_copy(const struct swift_ops *o, const float *h, size_t n)
{
    float *d = o->alloc(n * sizeof(float));
    assert_non_null(d);
    o->upload(d, h, n * sizeof(float));
    return d;
}

/* Both bytes equal after download */
static void same(const struct swift_ops *o, const void *dev, const void *host, size_t bytes,
                 const char *what, int s)
{
    void *h = malloc(bytes ? bytes : 1);
    o->download(h, dev, bytes);
    if (memcmp(h, host, bytes))
        fail_msg("step %d: cuda %s differs from the cpu's", s, what);
    free(h);
}
#endif

/* The CUDA kernel against the CPU one, in lockstep on the fixture's gradients: codes, absmax and
 * the 8-bit parameters' weights bit for bit (the kernel spells the CPU's float operations with
 * round-to-nearest intrinsics); the small parameter (the float32 AdamW kernels) within 1e-6.
 * Skipped without a GPU. */
static void test_cuda(void **state)
{
    (void)state;
#ifdef SWIFT_HAVE_CUDA
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0 || swift_cuda_init(0) < 0)
        skip();
    const struct swift_ops *cu = &swift_cuda_ops;
    const char *names[] = {"small", "blocks16", "ragged"};
    enum { NP = 3 };
    struct swift_param hp[NP], dp[NP];
    for (int i = 0; i < NP; i++) {
        const struct swift_st_tensor *t = get("init", 0, names[i]);
        hp[i] = (struct swift_param){.name = (char *)names[i],
                                     .ndim = t->ndim,
                                     .shape = {t->shape[0], t->ndim > 1 ? t->shape[1] : 0},
                                     .numel = t->numel,
                                     .decay = 1};
        hp[i].w = f32(t);
        hp[i].g = malloc(t->numel * sizeof(float));
        dp[i] = hp[i];
        dp[i].w = dev_copy(cu, hp[i].w, t->numel);
        dp[i].g = dev_copy(cu, hp[i].g, t->numel);
    }
    struct swift_adamw oh, od;
    assert_int_equal(swift_adamw_init_8bit(&oh, &swift_cpu_ops, hp, NP, 0.9f, 0.95f, 1e-8f, 0.1f),
                     0);
    assert_int_equal(swift_adamw_init_8bit(&od, cu, dp, NP, 0.9f, 0.95f, 1e-8f, 0.1f), 0);
    for (int s = 1; s <= (int)meta("steps"); s++) {
        for (int i = 0; i < NP; i++) {
            float *g = f32(get("grad", s, names[i]));
            memcpy(hp[i].g, g, hp[i].numel * sizeof(float));
            cu->upload(dp[i].g, g, hp[i].numel * sizeof(float));
            free(g);
        }
        swift_adamw_step(&oh, 2e-3f, 0.75f);
        swift_adamw_step(&od, 2e-3f, 0.75f);
        same(cu, od.qm, oh.qm, oh.total8, "state1 codes", s);
        same(cu, od.qv, oh.qv, oh.total8, "state2 codes", s);
        same(cu, od.am, oh.am, oh.blocks8 * sizeof(float), "absmax1", s);
        same(cu, od.av, oh.av, oh.blocks8 * sizeof(float), "absmax2", s);
        for (int i = 0; i < NP; i++) {
            float *w = malloc(hp[i].numel * sizeof(float));
            cu->download(w, dp[i].w, hp[i].numel * sizeof(float));
            for (size_t j = 0; j < hp[i].numel; j++)
                if (swift_adamw_is_8bit(&oh, hp[i].numel))
                    assert_true(w[j] == hp[i].w[j]);
                else
                    assert_true(fabsf(w[j] - hp[i].w[j]) <= 1e-6f * (fabsf(hp[i].w[j]) + 1e-3f));
            free(w);
        }
    }
    printf("# cuda: codes, absmax and 8-bit weights equal to the cpu's over %d steps\n",
           (int)meta("steps"));
    swift_adamw_free(&oh);
    swift_adamw_free(&od);
    for (int i = 0; i < NP; i++) {
        free(hp[i].w);
        free(hp[i].g);
        cu->free(dp[i].w);
        cu->free(dp[i].g);
    }
#else
    skip();
#endif
}

/* A backend without the op refuses with a message, no crash. */
static void test_no_kernel(void **state)
{
    (void)state;
    struct swift_ops ops = swift_cpu_ops;
    ops.adamw8bit = NULL;
    float w[4] = {0}, g[4] = {0};
    struct swift_param p = {.name = "x", .w = w, .g = g, .ndim = 1, .shape = {4}, .numel = 4};
    struct swift_adamw o;
    assert_int_equal(swift_adamw_init_8bit(&o, &ops, &p, 1, 0.9f, 0.95f, 1e-8f, 0), -1);
}

int main(void)
{
    if (swift_safetensors_open(&st, FIX) < 0)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_maps),
        cmocka_unit_test(test_steps),
        cmocka_unit_test(test_no_kernel),
        cmocka_unit_test(test_cuda),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    swift_safetensors_close(&st);
    return rc;
}
