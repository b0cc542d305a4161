// loss.cu — cross-entropy over the trained tokens, fused with its gradient (kernels/cpu/loss.c is
// the specification): one block per row, log-sum-exp in double, lowest-index argmax.
#include "kernels/cuda/internal.h"

/* one block per row: loss (double), trained flag, argmax hit; dlogits in place when asked */
__global__ void k_cross_entropy(float *dlogits, double *row_loss, int *row_flags,
                                const float *logits, const int32_t *targets, int V, float dscale)
{
    int n = blockIdx.x;
    const float *x = logits + (size_t)n * V;
    float *dx = dlogits ? dlogits + (size_t)n * V : NULL;
    int t = targets[n];
    if (t < 0) {
        if (dx)
            for (int c = threadIdx.x; c < V; c += blockDim.x)
                dx[c] = 0;
        if (threadIdx.x == 0) {
            row_loss[n] = 0;
            row_flags[n] = 0;
        }
        return;
    }
    /* max and its first index (ties: lowest index, as the CPU loop) */
    float mx = -INFINITY;
    int arg = V;
    for (int c = threadIdx.x; c < V; c += blockDim.x)
        if (x[c] > mx) {
            mx = x[c];
            arg = c;
        }
    __shared__ float smx[1024];
    __shared__ int sarg[1024];
    smx[threadIdx.x] = mx;
    sarg[threadIdx.x] = arg;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            float om = smx[threadIdx.x + s];
            int oa = sarg[threadIdx.x + s];
            if (om > smx[threadIdx.x] || (om == smx[threadIdx.x] && oa < sarg[threadIdx.x])) {
                smx[threadIdx.x] = om;
                sarg[threadIdx.x] = oa;
            }
        }
        __syncthreads();
    }
    mx = smx[0];
    arg = sarg[0];
    __syncthreads();
    double sum = 0;
    for (int c = threadIdx.x; c < V; c += blockDim.x)
        sum += exp((double)x[c] - mx);
    sum = block_sum(sum);
    double lse = mx + log(sum);
    float xt = x[t];
    __syncthreads(); /* every thread has read x[t] before dx (which may alias x) is written */
    if (dx) {
        for (int c = threadIdx.x; c < V; c += blockDim.x) {
            float g = (float)exp((double)x[c] - lse) * dscale;
            dx[c] = c == t ? g - dscale : g;
        }
    }
    if (threadIdx.x == 0) {
        row_loss[n] = lse - xt;
        row_flags[n] = 1 | (arg == t ? 2 : 0);
    }
}

__global__ void k_ce_reduce(double *out, const double *row_loss, const int *flags, int N)
{
    double s = 0, cnt = 0, ok = 0;
    for (int i = threadIdx.x; i < N; i += blockDim.x) {
        s += row_loss[i];
        cnt += flags[i] & 1;
        ok += (flags[i] >> 1) & 1;
    }
    s = block_sum(s);
    cnt = block_sum(cnt);
    ok = block_sum(ok);
    if (threadIdx.x == 0) {
        out[0] = s;
        out[1] = cnt;
        out[2] = ok;
    }
}

static struct {
    double *loss, *out;
    int *flags;
    int cap;
} CE;

void swift_cuda_cross_entropy(float *dlogits, double *loss_sum, long *count, long *correct,
                              const float *logits, const int32_t *targets, int N, int V,
                              float dscale)
{
    SHAPE(N >= 0 && V > 0);
    need_init();
    if (N == 0)
        return;
    const int32_t *t = dev_i32(targets, (size_t)N);
    if (CE.cap < N) {
        if (CE.loss) {
            CK(cudaStreamSynchronize(G.stream));
            CK(cudaFree(CE.loss));
            CK(cudaFree(CE.flags));
        }
        if (!CE.out)
            CK(cudaMalloc(&CE.out, 3 * sizeof(double)));
        CK(cudaMalloc(&CE.loss, (size_t)N * sizeof(double)));
        CK(cudaMalloc(&CE.flags, (size_t)N * sizeof(int)));
        CE.cap = N;
    }
    k_cross_entropy<<<N, 1024, 0, G.stream>>>(dlogits, CE.loss, CE.flags, logits, t, V, dscale);
    CKK();
    k_ce_reduce<<<1, 1024, 0, G.stream>>>(CE.out, CE.loss, CE.flags, N);
    CKK();
    double r[3];
    CK(cudaMemcpyAsync(r, CE.out, sizeof(r), cudaMemcpyDeviceToHost, G.stream));
    CK(cudaStreamSynchronize(G.stream));
    *loss_sum += r[0];
    *count += (long)r[1];
    *correct += (long)r[2];
}
