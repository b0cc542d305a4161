/* qmap8: the 8-bit AdamW code search of kernels/cpu/adamw8bit.c (a 65536-entry table, as
 * bitsandbytes' build_quantize_lut) against the bisection over the 255 midpoints it replaced,
 * kept here verbatim as the reference: every grid point, the midpoints and their float
 * neighbours (ties), the edges (-1, 1, 0, -0, beyond the range, tiny values) and a million
 * random values, for both maps. */
#include "kernels/cpu/cpu.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "kernels/qmap8.h"

#define LUT_STEPS 65535.0f

/* the search of adamw8bit.c before the table (commit 26e07ff), unchanged */
static uint8_t old_code(const float *mid, float x)
{
    x = x < -1.0f ? -1.0f : x > 1.0f ? 1.0f : x;
    unsigned idx = (unsigned)(uint16_t)fmaf((x + 1.0f) * 0.5f, LUT_STEPS, 0.5f);
    float val = -1.0f + (2.0f * (float)idx) / LUT_STEPS;
    int lo = 0, hi = 255;
    while (lo < hi) {
        int k = (lo + hi) / 2;
        if (mid[k] < val)
            lo = k + 1;
        else
            hi = k;
    }
    return (uint8_t)lo;
}

static void mids(const float *map, float *mid)
{
    for (int i = 0; i < 255; i++)
        mid[i] = 0.5f * (map[i] + map[i + 1]);
}

static long nchecked;

static void check(int is_signed, const float *mid, float x)
{
    uint8_t a = old_code(mid, x), b = swift_cpu_qmap8_code(is_signed, x);
    if (a != b)
        fail_msg("%s map: x=%.9g: bisection %u, table %u",
                 is_signed ? "signed" : "unsigned",
                 (double)x,
                 a,
                 b);
    nchecked++;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t next32(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}

static void one_map(int is_signed)
{
    const float *map = is_signed ? swift_qmap8_signed : swift_qmap8_unsigned;
    float mid[255];
    mids(map, mid);
    /* every grid point and its float neighbours */
    for (unsigned i = 0; i <= 65535u; i++) {
        float g = -1.0f + (2.0f * (float)i) / LUT_STEPS;
        check(is_signed, mid, g);
        check(is_signed, mid, nextafterf(g, -2.0f));
        check(is_signed, mid, nextafterf(g, 2.0f));
    }
    /* the midpoints (ties between two codes), the map values, their neighbours */
    for (int i = 0; i < 255; i++)
        for (int d = -3; d <= 3; d++) {
            float x = mid[i];
            for (int s = 0; s < (d < 0 ? -d : d); s++)
                x = nextafterf(x, d < 0 ? -2.0f : 2.0f);
            check(is_signed, mid, x);
        }
    for (int i = 0; i < 256; i++) {
        check(is_signed, mid, map[i]);
        check(is_signed, mid, nextafterf(map[i], -2.0f));
        check(is_signed, mid, nextafterf(map[i], 2.0f));
    }
    const float edges[] = {-1.0f, 1.0f,      0.0f,     -0.0f,  -1.5f,    1.5f,     -1e30f,
                           1e30f, -INFINITY, INFINITY, 1e-45f, -1e-45f,  1e-38f,   -1e-38f,
                           0.5f,  -0.5f,     1e-7f,    -1e-7f, 0.99999f, -0.99999f};
    for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++)
        check(is_signed, mid, edges[i]);
    /* random values: uniform in [-1.1, 1.1] and log-uniform magnitudes as Adam moments have */
    for (int i = 0; i < 500000; i++) {
        float u = (float)next32() / 4294967296.0f;
        check(is_signed, mid, 2.2f * u - 1.1f);
        float e = -30.0f * ((float)next32() / 4294967296.0f);
        float x = exp2f(e) * (next32() & 1 ? -1.0f : 1.0f);
        check(is_signed, mid, x);
    }
}

static void test_signed(void **state)
{
    (void)state;
    one_map(1);
}

static void test_unsigned(void **state)
{
    (void)state;
    one_map(0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_signed),
        cmocka_unit_test(test_unsigned),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    printf("# %ld values compared\n", nchecked);
    return r;
}
