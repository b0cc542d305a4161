/* check — the CUDA backend's one way of checking a runtime call: print `file:line: call: error`
 * on stderr and abort (an op cannot return an error, and continuing would train on garbage).
 * Included by every kernels/cuda file after <cuda_runtime.h>. */
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

#endif
