/* The CPU backend's op table. */
#include "kernels/ops.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu.h"
#include "kernels/banned.h"

static void *cpu_alloc(size_t bytes)
{
    /* 64-byte aligned, zeroed */
    void *p = NULL;
    size_t sz = (bytes + 63) / 64 * 64;
    if (posix_memalign(&p, 64, sz ? sz : 64))
        return NULL;
    memset(p, 0, sz ? sz : 64);
    return p;
}
static void cpu_free(void *p)
{
    free(p);
}
static void cpu_zero(float *x, size_t n)
{
    memset(x, 0, n * sizeof(float));
}
static void cpu_copy(float *dst, const float *src, size_t n)
{
    memcpy(dst, src, n * sizeof(float));
}

static void cpu_upload(void *dst, const void *src, size_t bytes)
{
    memcpy(dst, src, bytes);
}
static void cpu_download(void *dst, const void *src, size_t bytes)
{
    memcpy(dst, src, bytes);
}
static void cpu_sync(void)
{
}
static void cpu_device_trace(int on)
{
    (void)on;
}

const struct swift_ops swift_cpu_ops = {
    .name = "cpu",
    .alloc = cpu_alloc,
    .free = cpu_free,
    .zero = cpu_zero,
    .copy = cpu_copy,
    .upload = cpu_upload,
    .download = cpu_download,
    .sync = cpu_sync,
    .device_trace = cpu_device_trace,
    .matmul_fwd = swift_cpu_matmul_fwd,
    .matmul_bwd = swift_cpu_matmul_bwd,
    .embed_fwd = swift_cpu_embed_fwd,
    .embed_bwd = swift_cpu_embed_bwd,
    .rmsnorm_fwd = swift_cpu_rmsnorm_fwd,
    .rmsnorm_bwd = swift_cpu_rmsnorm_bwd,
    .rope_fwd = swift_cpu_rope_fwd,
    .rope_bwd = swift_cpu_rope_bwd,
    .attention_fwd = swift_cpu_attention_fwd,
    .attention_bwd = swift_cpu_attention_bwd,
    .swiglu_fwd = swift_cpu_swiglu_fwd,
    .swiglu_bwd = swift_cpu_swiglu_bwd,
    .cross_entropy = swift_cpu_cross_entropy,
    .add = swift_cpu_add,
    .scale = swift_cpu_scale,
    .sumsq = swift_cpu_sumsq,
    .dropout_fwd = swift_cpu_dropout_fwd,
    .dropout_bwd = swift_cpu_dropout_bwd,
    .adamw = swift_cpu_adamw,
    .copy_rows = swift_cpu_copy_rows,
    .attention_cached = swift_cpu_attention_cached,
    .mul_cols = swift_cpu_mul_cols,
    .adamw8bit = swift_cpu_adamw8bit,
    .matmul4_fwd = swift_cpu_matmul4_fwd,
    .matmul4_bwd = swift_cpu_matmul4_bwd,
    .matmul8_fwd = swift_cpu_matmul8_fwd,
    .matmul8_bwd = swift_cpu_matmul8_bwd,
    .attention_paged = swift_cpu_attention_paged,
    .set_matmul_math = swift_cpu_set_matmul_math,
    .layernorm_fwd = swift_cpu_layernorm_fwd,
    .layernorm_bwd = swift_cpu_layernorm_bwd,
    .gelu_fwd = swift_cpu_gelu_fwd,
    .gelu_bwd = swift_cpu_gelu_bwd,
    .attention_seg_fwd = swift_cpu_attention_seg_fwd,
    .attention_seg_bwd = swift_cpu_attention_seg_bwd,
};
