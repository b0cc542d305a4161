/* The quantized bases' matmuls (quant4.c, quant8.c): the weight dequantized a tile of rows at a
 * time (about 1 MiB, never the whole layer) and multiplied with OpenBLAS sgemm. */
#include "kernels/cpu/cpu.h"

#include <stdlib.h>

#include <cblas.h>
#undef I /* complex.h, pulled in by cblas.h */

#include "kernels/banned.h"

static int tile_rows(int In, int O)
{
    int r = (1 << 18) / (In > 0 ? In : 1);
    return r < 1 ? 1 : r > O ? O : r;
}

static float *tile_alloc(int rows, int In)
{
    float *t = malloc((size_t)rows * (size_t)In * sizeof(float));
    if (!t)
        abort(); /* about 1 MiB, beside activations already allocated */
    return t;
}

void swift_cpu_matmul_deq_fwd(float *out, const float *in, const void *w, swift_cpu_deq_rows dq,
                              const float *bias, int N, int In, int O, float beta)
{
    int R = tile_rows(In, O);
    float *tile = tile_alloc(R, In);
    for (int o0 = 0; o0 < O; o0 += R) {
        int r = O - o0 < R ? O - o0 : R;
        dq(w, o0, r, In, tile);
        cblas_sgemm(CblasRowMajor,
                    CblasNoTrans,
                    CblasTrans,
                    N,
                    r,
                    In,
                    1.0f,
                    in,
                    In,
                    tile,
                    In,
                    beta,
                    out + o0,
                    O);
    }
    free(tile);
    if (bias) {
#pragma omp parallel for schedule(static)
        for (int n = 0; n < N; n++)
            for (int o = 0; o < O; o++)
                out[(size_t)n * O + o] += bias[o];
    }
}

void swift_cpu_matmul_deq_bwd(float *din, const float *dout, const void *w, swift_cpu_deq_rows dq,
                              int N, int In, int O, float din_beta)
{
    int R = tile_rows(In, O);
    float *tile = tile_alloc(R, In);
    for (int o0 = 0; o0 < O; o0 += R) {
        int r = O - o0 < R ? O - o0 : R;
        dq(w, o0, r, In, tile);
        cblas_sgemm(CblasRowMajor,
                    CblasNoTrans,
                    CblasNoTrans,
                    N,
                    In,
                    r,
                    1.0f,
                    dout + o0,
                    O,
                    tile,
                    In,
                    o0 == 0 ? din_beta : 1.0f,
                    din,
                    In);
    }
    free(tile);
}
