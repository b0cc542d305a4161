/* GPTQ speed on one linear layer (lib/export/gptq_solve.h): reads W (out,in) and X (n,in) float32
 * from a safetensors file written by tests/bench/gptq_ref.py, times the Hessian (H = X^T X) and the
 * quantization (int4, group 128, block 128, damp 0.01), prints one JSON line. */
#include "lib/core/cli.h"
#include "lib/export/gptq_solve.h"
#include "lib/formats/safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: bench_gptq FILE.safetensors\n");
        return 2;
    }
    struct swift_safetensors st;
    if (swift_safetensors_open(&st, argv[1]) < 0)
        return 1;
    const struct swift_st_tensor *tw = swift_safetensors_find(&st, "W");
    const struct swift_st_tensor *tx = swift_safetensors_find(&st, "X");
    if (!tw || !tx || tw->ndim != 2 || tx->ndim != 2 || tw->shape[1] != tx->shape[1]) {
        fprintf(stderr, "bench_gptq: %s needs W (out,in) and X (n,in)\n", argv[1]);
        return 1;
    }
    int out = (int)tw->shape[0], in = (int)tw->shape[1], n = (int)tx->shape[0];
    float *W = malloc(tw->numel * 4), *X = malloc(tx->numel * 4);
    float *H = calloc((size_t)in * in, 4);
    uint8_t *codes = malloc(tw->numel);
    float *scales = malloc((size_t)(in / 128) * out * 4);
    if (!W || !X || !H || !codes || !scales || swift_st_tensor_to_f32(tw, W) < 0 ||
        swift_st_tensor_to_f32(tx, X) < 0)
        return 1;
    double t0 = now();
    swift_gptq_hessian_add(H, X, n, in);
    double t1 = now();
    struct swift_gptq_params p = {.bits = 4, .group = 128, .block = 128, .damp = 0.01f};
    struct swift_gptq_stats s;
    if (swift_gptq_quantize(W, H, out, in, &p, codes, scales, &s, "bench") < 0)
        return 1;
    double t2 = now();
    printf("{\"out\":%d,\"in\":%d,\"tokens\":%d,\"hessian_s\":%.4f,\"quantize_s\":%.4f,"
           "\"loss\":%.6g}\n",
           out,
           in,
           n,
           t1 - t0,
           t2 - t1,
           s.loss);
    free(W);
    free(X);
    free(H);
    free(codes);
    free(scales);
    swift_safetensors_close(&st);
    return 0;
}
