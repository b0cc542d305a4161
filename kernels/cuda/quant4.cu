// quant4.cu — QLoRA's fused dequant-matmul on the GPU (kernels/cpu/quant4.c is the
// specification, kernels/quant4.h the format, kernels/ops.h the contract):
//   matmul4_fwd: out (N,O) = in (N,I) @ dequant(w)^T + beta * out [+ bias (O)]
//   matmul4_bwd: din (N,I) = dout (N,O) @ dequant(w) + din_beta * din
// w is bitsandbytes' 4-bit weight (O,I): the struct in host memory, its arrays (codes, absmax or
// qabsmax + absmax2) device memory, as lib/model/quant4.c uploads them. The weight is never
// expanded in full: each thread block dequantizes the 64 x 16 tile of w it needs next into
// shared memory (code[q] * absmax, absmax = dynamic[qabsmax] * absmax2 + offset under double
// quantization, every step a float32 round-to-nearest operation as on the CPU, so the tile holds
// exactly the CPU's dequantized values) and multiplies it with the matching 64 x 16 tile of the
// activations: a plain tiled fp32 GEMM on CUDA cores (256 threads, 4 x 4 outputs each),
// correct first, not fast; no tensor cores whatever swift_cuda_set_math says. Only the
// accumulation order differs from the CPU's sgemm (float tolerance, tests/kernels). The index
// arithmetic is kernels/cuda/quant4_tile.h, shared with a CPU replay
// (tests/unit/test_quant4_tile.c).
#include "kernels/cuda/internal.h"
#include "kernels/cuda/quant4_tile.h"

// the code tables of kernels/quant4.h (nf4, fp4; the signed dynamic map), copied once
__constant__ float c_q4_code[2][16];
__constant__ float c_q4_dyn[256];

static void q4_tables(void)
{
    static int ready;
    if (ready)
        return;
    // queued on the backend's stream: every kernel launched after it sees the tables
    CK(cudaMemcpyToSymbolAsync(
        c_q4_code, swift_q4_nf4, sizeof(swift_q4_nf4), 0, cudaMemcpyHostToDevice, G.stream));
    CK(cudaMemcpyToSymbolAsync(c_q4_code,
                               swift_q4_fp4,
                               sizeof(swift_q4_fp4),
                               sizeof(swift_q4_nf4),
                               cudaMemcpyHostToDevice,
                               G.stream));
    CK(cudaMemcpyToSymbolAsync(
        c_q4_dyn, swift_q4_dynamic, sizeof(swift_q4_dynamic), 0, cudaMemcpyHostToDevice, G.stream));
    ready = 1;
}

// C (N,NC) = A (N,K) @ W' + beta * C [+ bias (NC)]: kernels/cuda/quant4_tile.h has the layout
// (BWD 0: the forward, BWD 1: the backward; In is w's row length either way). Block (x: Q4_TM
// rows of A, y: Q4_TC columns of C); thread (tx, ty) computes rows ty + 16 i and columns
// tx + 16 j, i, j < 4.
template <int BWD>
__global__ void __launch_bounds__(Q4_THREADS)
    k_matmul4(float *C, const float *A, struct swift_q4 q, const float *bias, int N, int K, int NC,
              int In, float beta)
{
    __shared__ float As[Q4_TK][Q4_TM + 1], Ws[Q4_TK][Q4_TC + 1];
    __shared__ float code[16], dyn[256];
    int t = threadIdx.x, tx = t % 16, ty = t / 16;
    int n0 = blockIdx.x * Q4_TM, j0 = blockIdx.y * Q4_TC;
    if (t < 16)
        code[t] = c_q4_code[q.type == SWIFT_Q4_FP4][t];
    dyn[t] = c_q4_dyn[t];
    float acc[4][4] = {{0}};
    for (int k0 = 0; k0 < K; k0 += Q4_TK) {
        __syncthreads(); // the tables are loaded; the previous tiles are consumed
        for (int idx = t; idx < Q4_TM * Q4_TK; idx += Q4_THREADS) {
            int r, c;
            q4_tile_a(idx, &r, &c);
            int n = n0 + r, k = k0 + c;
            As[c][r] = n < N && k < K ? A[(size_t)n * K + k] : 0.0f;
        }
        for (int idx = t; idx < Q4_TC * Q4_TK; idx += Q4_THREADS) {
            int r, c;
            q4_tile_w(BWD, idx, &r, &c);
            int j = j0 + r, k = k0 + c;
            Ws[c][r] = j < NC && k < K ? q4_elem(&q, code, dyn, q4_w_index(BWD, j, k, In)) : 0.0f;
        }
        __syncthreads();
        for (int c = 0; c < Q4_TK; c++) {
            float a[4], w[4];
            for (int i = 0; i < 4; i++)
                a[i] = As[c][ty + 16 * i];
            for (int j = 0; j < 4; j++)
                w[j] = Ws[c][tx + 16 * j];
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 4; j++)
                    acc[i][j] = fmaf(a[i], w[j], acc[i][j]);
        }
    }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            int n = n0 + ty + 16 * i, col = j0 + tx + 16 * j;
            if (n < N && col < NC)
                q4_store(&C[(size_t)n * NC + col], acc[i][j], beta, bias, col);
        }
}

static void q4_check(const struct swift_q4 *w, int In, int O)
{
    SHAPE(w && w->codes && (w->type == SWIFT_Q4_NF4 || w->type == SWIFT_Q4_FP4));
    SHAPE(w->dq ? w->qabsmax && w->absmax2 : w->absmax != NULL);
    SHAPE(w->n == (size_t)In * (size_t)O);
}

template <int BWD>
static void launch(float *C, const float *A, const struct swift_q4 *w, const float *bias, int N,
                   int K, int NC, int In, float beta)
{
    if (N <= 0 || NC <= 0)
        return;
    q4_tables();
    unsigned gx = (unsigned)((N + Q4_TM - 1) / Q4_TM), gy = (unsigned)((NC + Q4_TC - 1) / Q4_TC);
    SHAPE(gy <= 65535u);
    k_matmul4<BWD><<<dim3(gx, gy), Q4_THREADS, 0, G.stream>>>(C, A, *w, bias, N, K, NC, In, beta);
    CKK();
}

void swift_cuda_matmul4_fwd(float *out, const float *in, const struct swift_q4 *w,
                            const float *bias, int N, int In, int O, float beta)
{
    SHAPE(N >= 0 && In >= 0 && O >= 0 && out && in);
    q4_check(w, In, O);
    need_init();
    launch<0>(out, in, w, bias, N, In, O, In, beta);
}

void swift_cuda_matmul4_bwd(float *din, const float *dout, const struct swift_q4 *w, int N, int In,
                            int O, float din_beta)
{
    SHAPE(N >= 0 && In >= 0 && O >= 0 && din && dout);
    q4_check(w, In, O);
    need_init();
    launch<1>(din, dout, w, NULL, N, O, In, In, din_beta);
}
