/* Rotary position embedding, Hugging Face's rotate_half convention: dimension d pairs with
 * d + D/2 and turns by pos * inv_freq[d]. */
#include "kernels/cpu/cpu.h"

#include <math.h>

#include "kernels/banned.h"

static void rotate(float *x, const int32_t *pos, const float *inv_freq, int N, int H, int D,
                   float sign)
{
    int half = D / 2;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        for (int d = 0; d < half; d++) {
            float ang = (float)pos[n] * inv_freq[d]; /* float product, as HF computes it */
            float c = cosf(ang), s = sign * sinf(ang);
            for (int h = 0; h < H; h++) {
                float *v = x + ((size_t)n * H + h) * D;
                float a = v[d], b = v[d + half];
                v[d] = a * c - b * s;
                v[d + half] = b * c + a * s;
            }
        }
    }
}

/* x (N,H,D) in place */
void swift_cpu_rope_fwd(float *x, const int32_t *pos, const float *inv_freq, int N, int H, int D)
{
    rotate(x, pos, inv_freq, N, H, D, 1.0f);
}

/* the rotation is orthogonal: its gradient is the rotation by -angle */
void swift_cpu_rope_bwd(float *dx, const int32_t *pos, const float *inv_freq, int N, int H, int D)
{
    rotate(dx, pos, inv_freq, N, H, D, -1.0f);
}
