/* Cross-entropy over the trained tokens, fused with its gradient (llm.c's fused classifier). */
#include "kernels/cpu/cpu.h"

#include <math.h>
#include <stdlib.h>

#include "kernels/banned.h"

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
        float mx = x[0];
        int arg = 0;
        for (int c = 1; c < V; c++)
            if (x[c] > mx) {
                mx = x[c];
                arg = c;
            }
        float xt = x[t]; /* dx may alias x */
        /* e = exp(x - max) once (kept in dx when there is one), summed in double */
        double sum = 0;
        if (dx) {
            for (int c = 0; c < V; c++) {
                dx[c] = expf(x[c] - mx);
                sum += dx[c];
            }
        } else {
            for (int c = 0; c < V; c++)
                sum += expf(x[c] - mx);
        }
        rl[n] = log(sum) + mx - xt;
        cnt++;
        ok += arg == t;
        if (dx) {
            float k = (float)(dscale / sum);
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
