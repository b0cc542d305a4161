/* check — the CUDA backend's one way of checking a runtime call: print `file:line: call: error`
 * on stderr and abort (an op cannot return an error, and continuing would train on garbage).
 * CK for the CUDA runtime, CKB for cuBLAS(Lt), SHAPE for an op's shape checks. Included by every
 * kernels/cuda .cu file after <cuda_runtime.h> (and <cublas_v2.h> where CKB is used). */
#ifndef SWIFT_CUDA_CHECK_H
#define SWIFT_CUDA_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t ck_e = (call);                                                                 \
        if (ck_e != cudaSuccess) {                                                                 \
            fprintf(                                                                               \
                stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(ck_e));   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)
#define CKK() CK(cudaGetLastError())
#define CKB(call)                                                                                  \
    do {                                                                                           \
        cublasStatus_t ck_s = (call);                                                              \
        if (ck_s != CUBLAS_STATUS_SUCCESS) {                                                       \
            fprintf(stderr,                                                                        \
                    "%s:%d: %s: %s\n",                                                             \
                    __FILE__,                                                                      \
                    __LINE__,                                                                      \
                    #call,                                                                         \
                    cublasGetStatusString(ck_s));                                                  \
            abort();                                                                               \
        }                                                                                          \
    } while (0)
#define SHAPE(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: bad shape: %s\n", __FILE__, __LINE__, #cond);                  \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#endif
