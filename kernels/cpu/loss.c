/* Cross-entropy over the trained tokens, fused with its gradient (llm.c's fused classifier). */
#include "kernels/cpu/cpu.h"

#include <immintrin.h>
#include <math.h>
#include <stdlib.h>

#include "kernels/cpu/vexp.h"

#include "kernels/banned.h"

/* The row's maximum (the first index holding it in *arg, as a strict > scan from c = 0 finds
 * it), exp(x - max) of every entry into e (which may alias x), and their sum in double, added
 * in index order. The AVX-512 twin of the scalar loop gives the same bits (vexp.h); a row with
 * a NaN takes the scalar loop. */
static double row_exp(float *e, const float *x, int V, float *mx_out, int *arg_out)
{
    float mx = x[0];
    int arg = 0;
    for (int c = 1; c < V; c++)
        if (x[c] > mx) {
            mx = x[c];
            arg = c;
        }
    double sum = 0;
    for (int c = 0; c < V; c++) {
        float v = expf(x[c] - mx);
        if (e)
            e[c] = v;
        sum += v;
    }
    *mx_out = mx;
    *arg_out = arg;
    return sum;
}

__attribute__((target("avx512f"))) static double row_exp_avx512(float *e, const float *x, int V,
                                                                float *mx_out, int *arg_out)
{
    if (V < 16)
        return row_exp(e, x, V, mx_out, arg_out);
    __m512 vm = _mm512_loadu_ps(x);
    __mmask16 nan = _mm512_cmp_ps_mask(vm, vm, _CMP_UNORD_Q);
    int c = 16;
    for (; c + 16 <= V; c += 16) {
        __m512 v = _mm512_loadu_ps(x + c);
        nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        vm = _mm512_max_ps(vm, v);
    }
    float mx = _mm512_reduce_max_ps(vm);
    for (; c < V; c++) {
        nan |= x[c] != x[c];
        mx = x[c] > mx ? x[c] : mx;
    }
    if (nan)
        return row_exp(e, x, V, mx_out, arg_out);
    int arg = 0; /* the first entry equal to the maximum is the one the scan keeps */
    while (x[arg] != mx)
        arg++;
    mx = x[arg]; /* -0 or +0 as the scan has it */
    float buf[16];
    double sum = 0;
    __m512 m = _mm512_set1_ps(mx);
    for (c = 0; c + 16 <= V; c += 16) {
        __m512 v = swift_vexpf(_mm512_sub_ps(_mm512_loadu_ps(x + c), m));
        _mm512_storeu_ps(e ? e + c : buf, v);
        const float *b = e ? e + c : buf;
        for (int i = 0; i < 16; i++)
            sum += b[i];
    }
    for (; c < V; c++) {
        float v = expf(x[c] - mx);
        if (e)
            e[c] = v;
        sum += v;
    }
    *mx_out = mx;
    *arg_out = arg;
    return sum;
}

/* logits (N,V), targets (N) with -1 = not trained; dlogits (N,V) may alias logits */
void swift_cpu_cross_entropy(float *dlogits, double *loss_sum, long *count, long *correct,
                             const float *logits, const int32_t *targets, int N, int V,
                             float dscale)
{
    /* per-row losses summed in row order afterwards: the same total on any thread count */
    double *rl = malloc((size_t)(N > 0 ? N : 1) * sizeof(double));
    if (!rl)
        abort(); /* N doubles, next to the N*V logits already allocated */
    long cnt = 0, ok = 0;
    int simd = swift_cpu_simd_avx512();
#pragma omp parallel for schedule(static) reduction(+ : cnt, ok)
    for (int n = 0; n < N; n++) {
        rl[n] = 0;
        const float *x = logits + (size_t)n * V;
        float *dx = dlogits ? dlogits + (size_t)n * V : NULL;
        int t = targets[n];
        if (t < 0) {
            if (dx)
                for (int c = 0; c < V; c++)
                    dx[c] = 0;
            continue;
        }
        float xt = x[t], mx; /* dx may alias x */
        int arg;
        /* e = exp(x - max) once (kept in dx when there is one), summed in double */
        double sum = simd ? row_exp_avx512(dx, x, V, &mx, &arg) : row_exp(dx, x, V, &mx, &arg);
        rl[n] = log(sum) + mx - xt;
        cnt++;
        ok += arg == t;
        if (dx) {
            float k = (float)(dscale / sum);
            if (simd)
                swift_vscale(dx, k, (size_t)V);
            else
                for (int c = 0; c < V; c++)
                    dx[c] *= k;
            dx[t] -= dscale;
        }
    }
    double ls = 0;
    for (int n = 0; n < N; n++)
        ls += rl[n];
    free(rl);
    *loss_sum += ls;
    *count += cnt;
    *correct += ok;
}
