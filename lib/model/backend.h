/*
 * backend — which op table (kernels/ops.h) this process computes with, from --device: lib/
 * picks, the kernels only run. Used by swift-train and swift-eval.
 *
 *     struct swift_backend be;
 *     int rc = swift_backend_select(&be, opts->device);   // "auto", "cpu", "cuda", "cuda:N"
 *     if (rc)
 *         return rc > 0 ? SWIFT_MISUSED : SWIFT_FAILED;
 *     if (be.notice[0])
 *         swift_info("%s", be.notice);
 *     be.ops->matmul_fwd(...);
 */
#ifndef SWIFT_MODEL_BACKEND_H
#define SWIFT_MODEL_BACKEND_H

#include "kernels/ops.h"

struct swift_backend {
    const struct swift_ops *ops;
    char name[32]; /* "cpu", "cuda:0": the trace's device */
    int cuda, index;
    double peak_gflops;  /* dense bf16 peak of the GPU for MFU; 0: unknown (measure) */
    int math, math_fast; /* swift_backend_set_math: SWIFT_MATH_*; whether bf16 is fast */
    char math_impl[96];  /* the CPU's bf16 GEMM kernel (oneDNN's name), else empty */
    char notice[320];    /* "no GPU (why); running on the cpu" when auto fell back in a CUDA
                            build on a machine with a CUDA driver, else empty (no driver at all:
                            silent): the caller prints it once its inputs are checked */
};
/* spec: "auto" (or NULL: a GPU when kernels/device.h reports one, else the CPU; a CUDA build
 * without a usable GPU fills b->notice), "cpu", "cuda", "cuda:N". The CPU table is
 * swift_cpu_strict_ops when the environment has SWIFT_CPU_STRICT_HOST=1. Returns 0, 2
 * (usage error) or -1 (an explicit cuda device that cannot be used), reported. */
int swift_backend_select(struct swift_backend *b, const char *spec);
/* The same for one of several ranks on a host (lib/train/dist.h's local_rank): "auto" and "cuda"
 * take GPU local_rank % (number of GPUs); "cuda:N" is N whatever the rank. */
int swift_backend_select_rank(struct swift_backend *b, const char *spec, int local_rank);
/* --torch-dtype: the matmuls' math, SWIFT_MATH_FP32 (nothing to do) or SWIFT_MATH_BF16 (the op
 * table's set_matmul_math). On the CPU also names the oneDNN kernel the bf16 GEMMs run on in
 * b->math_impl and sets b->math_fast (avx512_core_bf16 or AMX, not a reference fallback); a
 * slow fallback is a warning, not an error. Returns 0, or -1 when the backend cannot
 * (reported). */
int swift_backend_set_math(struct swift_backend *b, int math);
/* --torch-dtype's default, as ms-swift's: the checkpoint's dtype (MODEL_DIR/config.json's dtype,
 * else torch_dtype). On the CPU bfloat16 gives SWIFT_MATH_BF16; float32, float16 (no fp16
 * matmuls on the CPU: fp32 holds fp16 weights exactly) and none give SWIFT_MATH_FP32. On a GPU
 * the default stays SWIFT_MATH_FP32. With say, one note on stderr names the dtype and why when
 * the checkpoint is bfloat16 or float16 (a float32 one, or none, runs as it says, silently). */
int swift_backend_default_math(const struct swift_backend *b, const char *model_dir, int say);
/* The backend's measured matmul rate in GFLOP/s at its current math (1024^3, best of 3), the
 * peak MFU is set against when the device has no known one. */
double swift_backend_matmul_peak_gflops(const struct swift_backend *b);

#endif
