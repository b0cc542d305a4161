/*
 * vexp — expf sixteen at a time with AVX-512, bit-identical to glibc's expf on a CPU with FMA
 * (the __expf_fma variant glibc's ifunc picks there, which every AVX-512 CPU has), so the
 * loops that use it give the bits their scalar specification gives.
 *
 * glibc's expf (Szabolcs Nagy's, math/e_expf.c, glibc 2.28 and later): in double precision,
 * k + r = x * 32 / ln 2 rounded to the nearest integer by adding 0x1.8p52, s = 2^(k/32) from a
 * 32-entry table with k/32's integer part added into the exponent bits, and
 * exp(x) ~= s * (C0 r^3 + C1 r^2 + C2 r + 1), rounded once to float. The operations below are
 * the ones __expf_fma executes (its disassembly: z*InvLn2N + shift and z*InvLn2N - kd each one
 * fused multiply-add, the polynomial as three), in the same order, so each lane rounds as the
 * scalar call does. Lanes with |x| >= 88 or NaN take glibc's expf itself (overflow,
 * underflow, errno, NaN), as the scalar code's branch does. tests/kernels/test_vexp.c checks
 * the equality on a sweep of every float bit pattern with a stride and on the edges.
 *
 * swift_vscale is the multiply that normalizes after such a pass.
 *
 * Call only from a function compiled for avx512f (__attribute__((target("avx512f")))) after a
 * run-time check (swift_cpu_has_avx512()).
 */
#ifndef SWIFT_KERNELS_CPU_VEXP_H
#define SWIFT_KERNELS_CPU_VEXP_H

#include <immintrin.h>
#include <math.h>
#include <stdint.h>

/* glibc's __exp2f_data: 2^(i/32) with i << 47 taken out of the bits, then the constants */
static const uint64_t swift_vexp_tab[32] = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51,
    0x3fef72b83c7d517b, 0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715, 0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d,
    0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429, 0x3feea47eb03a5585,
    0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d,
    0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069,
    0x3fef5818dcfba487, 0x3fef7c97337b9b5f, 0x3fefa4afa2a490da, 0x3fefd0765b6e4540,
};
#define SWIFT_VEXP_INVLN2N 0x40471547652b82feULL /* 0x1.71547652b82fep+5 = 32 / ln 2 */
#define SWIFT_VEXP_SHIFT 0x4338000000000000ULL   /* 0x1.8p52 */
#define SWIFT_VEXP_C0 0x3ebc6af84b912394ULL
#define SWIFT_VEXP_C1 0x3f2ebfce50fac4f3ULL
#define SWIFT_VEXP_C2 0x3f962e42ff0c52d6ULL

/* eight lanes of the fast path, x already in double */
__attribute__((target("avx512f"))) static inline __m256 swift_vexp8(__m512d xd)
{
    const __m512d inv = _mm512_castsi512_pd(_mm512_set1_epi64((long long)SWIFT_VEXP_INVLN2N)),
                  shift = _mm512_castsi512_pd(_mm512_set1_epi64((long long)SWIFT_VEXP_SHIFT)),
                  c0 = _mm512_castsi512_pd(_mm512_set1_epi64((long long)SWIFT_VEXP_C0)),
                  c1 = _mm512_castsi512_pd(_mm512_set1_epi64((long long)SWIFT_VEXP_C1)),
                  c2 = _mm512_castsi512_pd(_mm512_set1_epi64((long long)SWIFT_VEXP_C2)),
                  one = _mm512_set1_pd(1.0);
    const __m512i t0 = _mm512_loadu_si512(swift_vexp_tab),
                  t1 = _mm512_loadu_si512(swift_vexp_tab + 8),
                  t2 = _mm512_loadu_si512(swift_vexp_tab + 16),
                  t3 = _mm512_loadu_si512(swift_vexp_tab + 24);
    __m512d kd = _mm512_fmadd_pd(inv, xd, shift);
    __m512i ki = _mm512_castpd_si512(kd);
    kd = _mm512_sub_pd(kd, shift);
    __m512d r = _mm512_fmsub_pd(inv, xd, kd);
    /* T[ki % 32]: two 16-entry lookups, bit 4 picks between them */
    __m512i lo = _mm512_permutex2var_epi64(t0, ki, t1), hi = _mm512_permutex2var_epi64(t2, ki, t3);
    __mmask8 upper = _mm512_test_epi64_mask(ki, _mm512_set1_epi64(16));
    __m512i t = _mm512_mask_blend_epi64(upper, lo, hi);
    t = _mm512_add_epi64(t, _mm512_slli_epi64(ki, 47));
    __m512d s = _mm512_castsi512_pd(t);
    __m512d z = _mm512_fmadd_pd(r, c0, c1);
    __m512d r2 = _mm512_mul_pd(r, r);
    __m512d y = _mm512_fmadd_pd(r, c2, one);
    y = _mm512_fmadd_pd(z, r2, y);
    y = _mm512_mul_pd(y, s);
    return _mm512_cvtpd_ps(y);
}

/* expf of sixteen floats */
__attribute__((target("avx512f"))) static inline __m512 swift_vexpf(__m512 x)
{
    __m512i xi = _mm512_castps_si512(x);
    __m512i abstop = _mm512_and_si512(_mm512_srli_epi32(xi, 20), _mm512_set1_epi32(0x7ff));
    __mmask16 special = _mm512_cmpgt_epi32_mask(abstop, _mm512_set1_epi32(0x42a));
    __m256 lo = _mm512_castps512_ps256(x),
           hi = _mm256_castsi256_ps(_mm512_extracti64x4_epi64(_mm512_castps_si512(x), 1));
    __m256 elo = swift_vexp8(_mm512_cvtps_pd(lo)), ehi = swift_vexp8(_mm512_cvtps_pd(hi));
    __m512 e = _mm512_castsi512_ps(_mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_castps_si256(elo)), _mm256_castps_si256(ehi), 1));
    if (special) { /* |x| >= 88 or NaN: glibc itself, lane by lane */
        float xs[16], es[16];
        _mm512_storeu_ps(xs, x);
        _mm512_storeu_ps(es, e);
        for (int i = 0; i < 16; i++)
            if (special >> i & 1)
                es[i] = expf(xs[i]);
        e = _mm512_loadu_ps(es);
    }
    return e;
}

/* x[0..n) *= k: sixteen at a time, the same product per entry as the scalar loop (the
 * normalization after an exp pass) */
__attribute__((target("avx512f"))) static inline void swift_vscale(float *x, float k, size_t n)
{
    __m512 kk = _mm512_set1_ps(k);
    size_t j = 0;
    for (; j + 16 <= n; j += 16)
        _mm512_storeu_ps(x + j, _mm512_mul_ps(_mm512_loadu_ps(x + j), kk));
    for (; j < n; j++)
        x[j] *= k;
}

#endif
