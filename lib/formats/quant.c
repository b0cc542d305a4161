/* quant — ggml encodings, transcribed from ggml-quants.c's reference quantizers. See quant.h. */
#include "lib/formats/quant.h"
#include "lib/core/error.h"
#include "lib/formats/gguf.h"

#include <math.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "lib/core/banned.h"

#define QK4_0 32
#define QK5_0 32
#define QK8_0 32
#define QK_K 256
#define GROUP_MAX_EPS 1e-15f

static inline uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ggml_compute_fp32_to_fp16 (the portable path of ggml-impl.h): round to nearest even, with
 * subnormals, infinities and NaN. Same result as F16C's _cvtss_sh(x, 0) and numpy. */
uint16_t swift_fp32_to_fp16(float f)
{
    const float scale_to_inf = 0x1.0p+112f;
    const float scale_to_zero = 0x1.0p-110f;
    float base = (fabsf(f) * scale_to_inf) * scale_to_zero;
    const uint32_t w = f2u(f);
    const uint32_t shl1_w = w + w;
    const uint32_t sign = w & 0x80000000u;
    uint32_t bias = shl1_w & 0xFF000000u;
    if (bias < 0x71000000u)
        bias = 0x71000000u;
    base = u2f((bias >> 1) + 0x07800000u) + base;
    const uint32_t bits = f2u(base);
    const uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
    const uint32_t mantissa_bits = bits & 0x00000FFFu;
    const uint32_t nonsign = exp_bits + mantissa_bits;
    return (uint16_t)((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

float swift_fp16_to_fp32(uint16_t h)
{
    const uint32_t w = (uint32_t)h << 16;
    const uint32_t sign = w & 0x80000000u;
    const uint32_t two_w = w + w;
    const uint32_t exp_offset = 0xE0u << 23;
    const float exp_scale = 0x1.0p-112f;
    const float normalized_value = u2f((two_w >> 4) + exp_offset) * exp_scale;
    const uint32_t magic_mask = 126u << 23;
    const float magic_bias = 0.5f;
    const float denormalized_value = u2f((two_w >> 17) | magic_mask) - magic_bias;
    const uint32_t denormalized_cutoff = 1u << 27;
    const uint32_t result =
        sign | (two_w < denormalized_cutoff ? f2u(denormalized_value) : f2u(normalized_value));
    return u2f(result);
}

uint16_t swift_fp32_to_bf16(float f)
{
    uint32_t u = f2u(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it quiet */
        return (uint16_t)((u >> 16) | 64);
    return (uint16_t)((u + (0x7fffu + ((u >> 16) & 1))) >> 16);
}

float swift_bf16_to_fp32(uint16_t h)
{
    return u2f((uint32_t)h << 16);
}

static inline int nearest_int(float fval)
{
    float val = fval + 12582912.f;
    int i;
    memcpy(&i, &val, sizeof(int));
    return (i & 0x007fffff) - 0x00400000;
}

#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

static void put_half(uint8_t *p, float f)
{
    uint16_t h = swift_fp32_to_fp16(f);
    p[0] = (uint8_t)h;
    p[1] = (uint8_t)(h >> 8);
}
static float get_half(const uint8_t *p)
{
    return swift_fp16_to_fp32((uint16_t)(p[0] | p[1] << 8));
}

/* roundf (half away from zero) for |v| < 2^31, without a libm call: v - (int)v is exact. */
static inline int round_away(float v)
{
    int i = (int)v;
    float r = v - (float)i;
    return i + (r >= 0.5f) - (r <= -0.5f);
}

/* The value of largest magnitude among x[0..n), sign kept (the first of equals; 0 for all
 * zeros): ggml's Q4_0 and Q5_0 scale by it. */
static float signed_absmax(const float *x, int n)
{
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++) {
        const float v = x[j];
        if (amax < fabsf(v)) {
            amax = fabsf(v);
            max = v;
        }
    }
    return max;
}

/* ---- Q8_0: {ggml_half d; int8_t qs[32]} ---- */
static void q8_0_row(const float *x, uint8_t *y, int64_t k)
{
    for (int64_t i = 0; i < k / QK8_0; i++, x += QK8_0, y += 34) {
        float amax = 0.0f;
        for (int j = 0; j < QK8_0; j++)
            amax = MAX(amax, fabsf(x[j]));
        const float d = amax / ((1 << 7) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        put_half(y, d);
        for (int j = 0; j < QK8_0; j++)
            y[2 + j] = (uint8_t)(int8_t)round_away(x[j] * id);
    }
}
static void dq8_0(const uint8_t *y, float *x, int64_t k)
{
    for (int64_t i = 0; i < k / QK8_0; i++, x += QK8_0, y += 34) {
        const float d = get_half(y);
        for (int j = 0; j < QK8_0; j++)
            x[j] = (float)(int8_t)y[2 + j] * d;
    }
}

/* ---- Q4_0: {ggml_half d; uint8_t qs[16]}, element j low nibble, j+16 high nibble ---- */
static void q4_0_row(const float *x, uint8_t *y, int64_t k)
{
    for (int64_t i = 0; i < k / QK4_0; i++, x += QK4_0, y += 18) {
        const float max = signed_absmax(x, QK4_0);
        const float d = max / -8;
        const float id = d ? 1.0f / d : 0.0f;
        put_half(y, d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            const float x0 = x[j] * id;
            const float x1 = x[QK4_0 / 2 + j] * id;
            const uint8_t xi0 = (uint8_t)MIN(15, (int8_t)(x0 + 8.5f));
            const uint8_t xi1 = (uint8_t)MIN(15, (int8_t)(x1 + 8.5f));
            y[2 + j] = (uint8_t)(xi0 | (xi1 << 4));
        }
    }
}
static void dq4_0(const uint8_t *y, float *x, int64_t k)
{
    for (int64_t i = 0; i < k / QK4_0; i++, x += QK4_0, y += 18) {
        const float d = get_half(y);
        for (int j = 0; j < QK4_0 / 2; j++) {
            x[j] = (float)((y[2 + j] & 0x0F) - 8) * d;
            x[j + QK4_0 / 2] = (float)((y[2 + j] >> 4) - 8) * d;
        }
    }
}

/* ---- Q5_0: {ggml_half d; uint8_t qh[4]; uint8_t qs[16]} ---- */
static void q5_0_row(const float *x, uint8_t *y, int64_t k)
{
    for (int64_t i = 0; i < k / QK5_0; i++, x += QK5_0, y += 22) {
        const float max = signed_absmax(x, QK5_0);
        const float d = max / -16;
        const float id = d ? 1.0f / d : 0.0f;
        put_half(y, d);
        uint32_t qh = 0;
        for (int j = 0; j < QK5_0 / 2; j++) {
            const float x0 = x[j] * id;
            const float x1 = x[QK5_0 / 2 + j] * id;
            const uint8_t xi0 = (uint8_t)MIN(31, (int8_t)(x0 + 16.5f));
            const uint8_t xi1 = (uint8_t)MIN(31, (int8_t)(x1 + 16.5f));
            y[6 + j] = (uint8_t)((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
            qh |= ((xi0 & 0x10u) >> 4) << (j + 0);
            qh |= ((xi1 & 0x10u) >> 4) << (j + QK5_0 / 2);
        }
        for (int b = 0; b < 4; b++)
            y[2 + b] = (uint8_t)(qh >> (8 * b));
    }
}
static void dq5_0(const uint8_t *y, float *x, int64_t k)
{
    for (int64_t i = 0; i < k / QK5_0; i++, x += QK5_0, y += 22) {
        const float d = get_half(y);
        const uint32_t qh =
            (uint32_t)y[2] | (uint32_t)y[3] << 8 | (uint32_t)y[4] << 16 | (uint32_t)y[5] << 24;
        for (int j = 0; j < QK5_0 / 2; j++) {
            const uint8_t xh_0 = (uint8_t)(((qh >> (j + 0)) << 4) & 0x10);
            const uint8_t xh_1 = (uint8_t)(((qh >> (j + 12))) & 0x10);
            const int32_t x0 = ((y[6 + j] & 0x0F) | xh_0) - 16;
            const int32_t x1 = ((y[6 + j] >> 4) | xh_1) - 16;
            x[j] = (float)x0 * d;
            x[j + QK5_0 / 2] = (float)x1 * d;
        }
    }
}

/* ---- Q4_K: {ggml_half d; ggml_half dmin; uint8_t scales[12]; uint8_t qs[128]} ---- */
static float make_qkx2_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L,
                              float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep,
                              int use_mad)
{
    float min = x[0];
    float max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min)
            min = x[i];
        if (x[i] > max)
            max = x[i];
        float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0)
        min = 0;
    if (max == min) {
        for (int i = 0; i < n; ++i)
            L[i] = 0;
        *the_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_mad = 0;
    for (int i = 0; i < n; ++i) {
        int l = nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)MAX(0, MIN(nmax, l));
        float diff = scale * L[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        float w = weights[i];
        best_mad += w * diff;
    }
    if (nstep < 1) {
        *the_min = -min;
        return scale;
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * (x[i] - min));
            l = MAX(0, MIN(nmax, l));
            Laux[i] = (uint8_t)l;
            float w = weights[i];
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float mad = 0;
            for (int i = 0; i < n; ++i) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                diff = use_mad ? fabsf(diff) : diff * diff;
                float w = weights[i];
                mad += w * diff;
            }
            if (mad < best_mad) {
                for (int i = 0; i < n; ++i)
                    L[i] = Laux[i];
                best_mad = mad;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

static inline void get_scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m)
{
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
    }
}

static void q4_k_row(const float *x, uint8_t *y, int64_t k)
{
    uint8_t L[QK_K], Laux[32];
    float weights[32], mins[QK_K / 32], scales[QK_K / 32];
    for (int64_t i = 0; i < k / QK_K; i++, x += QK_K, y += 144) {
        uint8_t *ys = y + 4;
        memset(ys, 0, 12);
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < QK_K / 32; ++j) {
            float sum_x2 = 0;
            for (int l = 0; l < 32; ++l)
                sum_x2 += x[32 * j + l] * x[32 * j + l];
            float av_x = sqrtf(sum_x2 / 32);
            for (int l = 0; l < 32; ++l)
                weights[l] = av_x + fabsf(x[32 * j + l]);
            scales[j] = make_qkx2_quants(
                32, 15, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, -1.f, 0.1f, 20, 0);
            if (scales[j] > max_scale)
                max_scale = scales[j];
            if (mins[j] > max_min)
                max_min = mins[j];
        }
        float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
        float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
        for (int j = 0; j < QK_K / 32; ++j) {
            uint8_t ls = (uint8_t)nearest_int(inv_scale * scales[j]);
            uint8_t lm = (uint8_t)nearest_int(inv_min * mins[j]);
            ls = MIN(63, ls);
            lm = MIN(63, lm);
            if (j < 4) {
                ys[j] = ls;
                ys[j + 4] = lm;
            } else {
                ys[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
                ys[j - 4] |= (uint8_t)((ls >> 4) << 6);
                ys[j - 0] |= (uint8_t)((lm >> 4) << 6);
            }
        }
        put_half(y, max_scale / 63.f);
        put_half(y + 2, max_min / 63.f);
        const float dd = get_half(y), dmin = get_half(y + 2);
        for (int j = 0; j < QK_K / 32; ++j) {
            uint8_t sc, m;
            get_scale_min_k4(j, ys, &sc, &m);
            const float d = dd * sc;
            if (!d)
                continue;
            const float dm = dmin * m;
            for (int ii = 0; ii < 32; ++ii) {
                int l = nearest_int((x[32 * j + ii] + dm) / d);
                l = MAX(0, MIN(15, l));
                L[32 * j + ii] = (uint8_t)l;
            }
        }
        uint8_t *q = y + 16;
        for (int j = 0; j < QK_K; j += 64) {
            for (int l = 0; l < 32; ++l)
                q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
            q += 32;
        }
    }
}

static void dq4_k(const uint8_t *y, float *x, int64_t k)
{
    for (int64_t i = 0; i < k / QK_K; i++, y += 144) {
        const float d = get_half(y), min = get_half(y + 2);
        const uint8_t *sc4 = y + 4, *q = y + 16;
        int is = 0;
        for (int j = 0; j < QK_K; j += 64) {
            uint8_t sc, m;
            get_scale_min_k4(is + 0, sc4, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            get_scale_min_k4(is + 1, sc4, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; ++l)
                *x++ = d1 * (q[l] & 0xF) - m1;
            for (int l = 0; l < 32; ++l)
                *x++ = d2 * (q[l] >> 4) - m2;
            q += 32;
            is += 2;
        }
    }
}

/* ---- Q6_K: {uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; ggml_half d} ---- */
static float make_qx_quants(int n, int nmax, const float *x, int8_t *L, int rmse_type)
{
    float max = 0, amax = 0;
    for (int i = 0; i < n; ++i) {
        float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < GROUP_MAX_EPS) {
        for (int i = 0; i < n; ++i)
            L[i] = 0;
        return 0.f;
    }
    float iscale = -nmax / max;
    /* rmse_type 1 (weights x^2), as quantize_row_q6_K_ref calls it */
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = nearest_int(iscale * x[i]);
        l = MAX(-nmax, MIN(nmax - 1, l));
        L[i] = (int8_t)(l + nmax);
        float w = rmse_type == 1 ? x[i] * x[i] : 1;
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0)
            continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * x[i]);
            l = MAX(-nmax, MIN(nmax - 1, l));
            float w = rmse_type == 1 ? x[i] * x[i] : 1;
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i) {
                int l = nearest_int(iscale * x[i]);
                L[i] = (int8_t)(nmax + MAX(-nmax, MIN(nmax - 1, l)));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

static void q6_k_row(const float *x, uint8_t *y, int64_t k)
{
    int8_t L[QK_K];
    float scales[QK_K / 16];
    for (int64_t i = 0; i < k / QK_K; i++, x += QK_K, y += 210) {
        uint8_t *ql = y, *qh = y + 128;
        int8_t *ysc = (int8_t *)(y + 192);
        float max_scale = 0, max_abs_scale = 0;
        for (int ib = 0; ib < QK_K / 16; ++ib) {
            const float scale = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib, 1);
            scales[ib] = scale;
            const float abs_scale = fabsf(scale);
            if (abs_scale > max_abs_scale) {
                max_abs_scale = abs_scale;
                max_scale = scale;
            }
        }
        if (max_abs_scale < GROUP_MAX_EPS) {
            memset(y, 0, 210);
            continue;
        }
        float iscale = -128.f / max_scale;
        put_half(y + 208, 1 / iscale);
        for (int ib = 0; ib < QK_K / 16; ++ib)
            ysc[ib] = (int8_t)MIN(127, nearest_int(iscale * scales[ib]));
        const float dd = get_half(y + 208);
        for (int j = 0; j < QK_K / 16; ++j) {
            float d = dd * ysc[j];
            if (!d)
                continue;
            for (int ii = 0; ii < 16; ++ii) {
                int l = nearest_int(x[16 * j + ii] / d);
                l = MAX(-32, MIN(31, l));
                L[16 * j + ii] = (int8_t)(l + 32);
            }
        }
        for (int j = 0; j < QK_K; j += 128) {
            for (int l = 0; l < 32; ++l) {
                const uint8_t q1 = L[j + l + 0] & 0xF;
                const uint8_t q2 = L[j + l + 32] & 0xF;
                const uint8_t q3 = L[j + l + 64] & 0xF;
                const uint8_t q4 = L[j + l + 96] & 0xF;
                ql[l + 0] = (uint8_t)(q1 | (q3 << 4));
                ql[l + 32] = (uint8_t)(q2 | (q4 << 4));
                qh[l] = (uint8_t)((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                                  ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
            }
            ql += 64;
            qh += 32;
        }
    }
}

static void dq6_k(const uint8_t *y, float *x, int64_t k)
{
    for (int64_t i = 0; i < k / QK_K; i++, y += 210) {
        const float d = get_half(y + 208);
        const uint8_t *ql = y, *qh = y + 128;
        const int8_t *sc = (const int8_t *)(y + 192);
        for (int n = 0; n < QK_K; n += 128) {
            for (int l = 0; l < 32; ++l) {
                int is = l / 16;
                const int8_t q1 = (int8_t)((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int8_t q2 = (int8_t)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int8_t q3 = (int8_t)((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int8_t q4 = (int8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                x[l + 0] = d * sc[is + 0] * q1;
                x[l + 32] = d * sc[is + 2] * q2;
                x[l + 64] = d * sc[is + 4] * q3;
                x[l + 96] = d * sc[is + 6] * q4;
            }
            x += 128;
            ql += 64;
            qh += 32;
            sc += 8;
        }
    }
}

/* ---- dispatch ---- */

int swift_quant_supported(uint32_t type)
{
    switch (type) {
    case SWIFT_GGML_F32:
    case SWIFT_GGML_F16:
    case SWIFT_GGML_BF16:
    case SWIFT_GGML_Q8_0:
    case SWIFT_GGML_Q4_0:
    case SWIFT_GGML_Q5_0:
    case SWIFT_GGML_Q4_K:
    case SWIFT_GGML_Q6_K:
        return 1;
    default:
        return 0;
    }
}

#if defined(__x86_64__)
/* F16C: the same round-to-nearest-even conversion, 8 values per instruction */
__attribute__((target("avx,f16c"))) static void f16_row_f16c(const float *x, uint8_t *y, int64_t k)
{
    int64_t j = 0;
    for (; j + 8 <= k; j += 8) {
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + j), _MM_FROUND_TO_NEAREST_INT);
        _mm_storeu_si128((__m128i *)(y + 2 * j), h);
    }
    for (; j < k; j++) {
        uint16_t h = swift_fp32_to_fp16(x[j]);
        memcpy(y + 2 * j, &h, 2);
    }
}
static int have_f16c(void)
{
    static int cached = -1;
    if (cached < 0)
        cached = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
    return cached;
}
#else
static int have_f16c(void)
{
    return 0;
}
static void f16_row_f16c(const float *x, uint8_t *y, int64_t k)
{
    (void)x, (void)y, (void)k;
}
#endif

static void quantize_row(uint32_t type, const float *x, uint8_t *y, int64_t k)
{
    switch (type) {
    case SWIFT_GGML_F32:
        memcpy(y, x, (size_t)k * 4);
        break;
    case SWIFT_GGML_F16:
        if (have_f16c()) {
            f16_row_f16c(x, y, k);
            break;
        }
        for (int64_t j = 0; j < k; j++) {
            uint16_t h = swift_fp32_to_fp16(x[j]);
            memcpy(y + 2 * j, &h, 2);
        }
        break;
    case SWIFT_GGML_BF16:
        for (int64_t j = 0; j < k; j++) {
            uint16_t h = swift_fp32_to_bf16(x[j]);
            memcpy(y + 2 * j, &h, 2);
        }
        break;
    case SWIFT_GGML_Q8_0:
        q8_0_row(x, y, k);
        break;
    case SWIFT_GGML_Q4_0:
        q4_0_row(x, y, k);
        break;
    case SWIFT_GGML_Q5_0:
        q5_0_row(x, y, k);
        break;
    case SWIFT_GGML_Q4_K:
        q4_k_row(x, y, k);
        break;
    case SWIFT_GGML_Q6_K:
        q6_k_row(x, y, k);
        break;
    }
}

int swift_quantize(uint32_t type, const float *src, void *dst, int64_t rows, int64_t ne0)
{
    if (!swift_quant_supported(type))
        return swift_error("cannot quantize to %s", swift_ggml_type_name(type));
    size_t rs = swift_ggml_row_size(type, (uint64_t)ne0);
    if (ne0 <= 0 || !rs)
        return swift_error("cannot quantize rows of %lld elements to %s: not a multiple of %d",
                           (long long)ne0,
                           swift_ggml_type_name(type),
                           swift_ggml_blck_size(type));
    /* Split into chunks of whole blocks so that small matrices still use every core. */
    int blck = swift_ggml_blck_size(type);
    int64_t nblk = rows * (ne0 / blck);
    int64_t chunk_blk = (int64_t)(65536 / blck) > 0 ? 65536 / blck : 1; /* ~64K values */
    int64_t nchunks = (nblk + chunk_blk - 1) / chunk_blk;
    size_t bsz = swift_ggml_type_size(type);
#pragma omp parallel for schedule(dynamic, 1) if (nchunks > 1)
    for (int64_t c = 0; c < nchunks; c++) {
        int64_t b0 = c * chunk_blk;
        int64_t nb = MIN(chunk_blk, nblk - b0);
        quantize_row(type, src + b0 * blck, (uint8_t *)dst + (size_t)b0 * bsz, nb * blck);
    }
    return 0;
}

int swift_dequantize(uint32_t type, const void *src, float *dst, int64_t n)
{
    int blck = swift_ggml_blck_size(type);
    if (!blck || n % blck)
        return swift_error(
            "cannot dequantize %lld elements of %s", (long long)n, swift_ggml_type_name(type));
    const uint8_t *s = src;
    switch (type) {
    case SWIFT_GGML_F32:
        memcpy(dst, src, (size_t)n * 4);
        return 0;
    case SWIFT_GGML_F16:
        for (int64_t j = 0; j < n; j++)
            dst[j] = swift_fp16_to_fp32((uint16_t)(s[2 * j] | s[2 * j + 1] << 8));
        return 0;
    case SWIFT_GGML_BF16:
        for (int64_t j = 0; j < n; j++)
            dst[j] = swift_bf16_to_fp32((uint16_t)(s[2 * j] | s[2 * j + 1] << 8));
        return 0;
    case SWIFT_GGML_Q8_0:
        dq8_0(s, dst, n);
        return 0;
    case SWIFT_GGML_Q4_0:
        dq4_0(s, dst, n);
        return 0;
    case SWIFT_GGML_Q5_0:
        dq5_0(s, dst, n);
        return 0;
    case SWIFT_GGML_Q4_K:
        dq4_k(s, dst, n);
        return 0;
    case SWIFT_GGML_Q6_K:
        dq6_k(s, dst, n);
        return 0;
    default:
        return swift_error("cannot dequantize %s", swift_ggml_type_name(type));
    }
}

uint32_t swift_quant_fallback(uint32_t want, int64_t ne0)
{
    uint32_t t = want;
    if ((t == SWIFT_GGML_Q4_K || t == SWIFT_GGML_Q6_K) && ne0 % QK_K)
        t = t == SWIFT_GGML_Q4_K ? SWIFT_GGML_Q5_0 : SWIFT_GGML_Q8_0;
    int b = swift_ggml_blck_size(t);
    if (b > 1 && ne0 % b)
        t = SWIFT_GGML_F16;
    return t;
}

double swift_rmse(const float *a, const float *b, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        s += d * d;
    }
    return n ? sqrt(s / (double)n) : 0.0;
}
