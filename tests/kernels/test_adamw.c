/* The CPU AdamW (kernels/cpu/elementwise.c) against torch.optim.AdamW's update written out one
 * element at a time in plain C: bit for bit, on lengths that exercise the 16-wide AVX-512 path,
 * its chunks and the scalar tail, with gradient scaling (the clip factor), several steps so the
 * moments carry over. The vector path must keep the scalar's operations and their order (no FMA
 * contraction), so the demo's training digest stays the same on any CPU. */
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

#include "kernels/cpu/cpu.h"

static uint64_t rs = 7;
static float frand(void)
{
    rs = rs * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((rs >> 40) / 16777216.0 * 2.0 - 1.0);
}

/* the reference: torch.optim.AdamW's single-tensor update, one element at a time */
static void ref(float *p, const float *g, float *m, float *v, size_t n, float lr, float b1,
                float b2, float eps, float wd, float bc1, float bc2, float gscale)
{
    float step = lr / bc1, sbc2 = sqrtf(bc2);
    for (size_t i = 0; i < n; i++) {
        volatile float gi = g[i] * gscale; /* volatile: keep this loop scalar */
        p[i] *= 1.0f - lr * wd;
        m[i] = b1 * m[i] + (1.0f - b1) * gi;
        v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
        p[i] -= step * m[i] / (sqrtf(v[i]) / sbc2 + eps);
    }
}

static void run(size_t n, float gscale)
{
    float *a[4], *b[4];
    for (int k = 0; k < 4; k++) {
        a[k] = malloc(n * sizeof(float));
        b[k] = malloc(n * sizeof(float));
    }
    for (size_t i = 0; i < n; i++) {
        a[0][i] = frand();
        a[2][i] = 0;
        a[3][i] = 0;
    }
    for (int k = 0; k < 4; k++)
        memcpy(b[k], a[k], n * sizeof(float));
    for (int t = 1; t <= 3; t++) {
        for (size_t i = 0; i < n; i++)
            a[1][i] = b[1][i] = frand() * (i % 7 == 0 ? 1e-3f : 1.0f);
        float bc1 = 1.0f - powf(0.9f, (float)t), bc2 = 1.0f - powf(0.95f, (float)t);
        swift_cpu_adamw(
            a[0], a[1], a[2], a[3], n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, bc1, bc2, gscale);
        ref(b[0], b[1], b[2], b[3], n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, bc1, bc2, gscale);
    }
    for (int k = 0; k < 4; k++) {
        if (k != 1)
            assert_memory_equal(a[k], b[k], n * sizeof(float));
        free(a[k]);
        free(b[k]);
    }
}

static void test_bit_identical(void **st)
{
    (void)st;
    run(1, 1.0f);
    run(15, 0.5f);
    run(16, 1.0f);
    run(16 * 1000 + 13, 0.37f);
    run(16384 * 6 + 5, 1.0f); /* several chunks, in parallel */
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_bit_identical),
    };
    return cmocka_run_group_tests(t, NULL, NULL);
}
