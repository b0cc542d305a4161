/* Linear layers through OpenBLAS sgemm. Weights are PyTorch's nn.Linear layout (O,I). */
#include "kernels/cpu/cpu.h"

#include <cblas.h>
#undef I /* complex.h, pulled in by cblas.h */

#include "kernels/banned.h"

/* out (N,O) = alpha * in (N,I) @ w (O,I)^T + beta * out, then + bias (O) on every row */
void swift_cpu_matmul_fp32_fwd(float *out, const float *in, const float *w, const float *bias,
                               int N, int In, int O, float alpha, float beta)
{
    int mv = N <= SWIFT_CPU_MATVEC_MAX_M ? swift_cpu_matvec_impl() : SWIFT_CPU_MATVEC_BLAS;
    if (mv != SWIFT_CPU_MATVEC_BLAS) {
        /* decode steps (one to a few rows): our matvec (matvec.c) reads w once for all rows on
         * the OpenMP threads; OpenBLAS 0.3.21's sgemv (the path before) streamed the 151936 x
         * 512 output head at a third of llama.cpp's rate and its threads spun beside ours */
        swift_cpu_matvec_f32(out, in, w, bias, N, In, O, alpha, beta);
        return;
    }
    if (N == 1) { /* $SWIFT_CPU_MATVEC=blas: OpenBLAS 0.3.21 runs sgemv twice as fast as sgemm */
        cblas_sgemv(CblasRowMajor, CblasNoTrans, O, In, alpha, w, In, in, 1, beta, out, 1);
        if (bias)
            for (int o = 0; o < O; o++)
                out[o] += alpha * bias[o];
        return;
    }
    cblas_sgemm(
        CblasRowMajor, CblasNoTrans, CblasTrans, N, O, In, alpha, in, In, w, In, beta, out, O);
    if (bias) {
#pragma omp parallel for schedule(static)
        for (int n = 0; n < N; n++)
            for (int o = 0; o < O; o++)
                out[(size_t)n * O + o] += alpha * bias[o];
    }
}

/* din (N,I) = alpha * dout (N,O) @ w (O,I) + din_beta * din
 * dw  (O,I) += alpha * dout^T (O,N) @ in (N,I)
 * db  (O)   += alpha * sum_n dout[n] */
void swift_cpu_matmul_fp32_bwd(float *din, float *dw, float *db, const float *dout, const float *in,
                               const float *w, int N, int In, int O, float alpha, float din_beta)
{
    if (din)
        cblas_sgemm(CblasRowMajor,
                    CblasNoTrans,
                    CblasNoTrans,
                    N,
                    In,
                    O,
                    alpha,
                    dout,
                    O,
                    w,
                    In,
                    din_beta,
                    din,
                    In);
    if (dw)
        cblas_sgemm(CblasRowMajor,
                    CblasTrans,
                    CblasNoTrans,
                    O,
                    In,
                    N,
                    alpha,
                    dout,
                    O,
                    in,
                    In,
                    1.0f,
                    dw,
                    In);
    if (db) {
#pragma omp parallel for schedule(static)
        for (int o = 0; o < O; o++) {
            double s = 0;
            for (int n = 0; n < N; n++)
                s += dout[(size_t)n * O + o];
            db[o] += alpha * (float)s;
        }
    }
}

/* the op table's matmuls: fp32 (OpenBLAS) or bf16 (oneDNN, matmul_bf16.c) by set_matmul_math */
void swift_cpu_matmul_fwd(float *out, const float *in, const float *w, const float *bias, int N,
                          int In, int O, float alpha, float beta)
{
    if (swift_cpu_matmul_math() == SWIFT_CPU_MATH_BF16)
        swift_cpu_matmul_bf16_fwd(out, in, w, bias, N, In, O, alpha, beta);
    else
        swift_cpu_matmul_fp32_fwd(out, in, w, bias, N, In, O, alpha, beta);
}

void swift_cpu_matmul_bwd(float *din, float *dw, float *db, const float *dout, const float *in,
                          const float *w, int N, int In, int O, float alpha, float din_beta)
{
    if (swift_cpu_matmul_math() == SWIFT_CPU_MATH_BF16)
        swift_cpu_matmul_bf16_bwd(din, dw, db, dout, in, w, N, In, O, alpha, din_beta);
    else
        swift_cpu_matmul_fp32_bwd(din, dw, db, dout, in, w, N, In, O, alpha, din_beta);
}
