/* backend — choosing the op table from --device (lib/model/backend.h). */
#include "lib/model/backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "kernels/cpu/cpu.h"
#include "kernels/device.h"
#include "lib/core/error.h"
#include "lib/core/banned.h"

#ifdef SWIFT_HAVE_CUDA
/* dense bf16 tensor-core peak (GFLOP/s) of the SXM parts of a compute capability, for MFU */
static double cuda_peak_gflops(const struct swift_device_info *d)
{
    if (d->cc_major == 9 && d->cc_minor == 0)
        return 989.4e3; /* H100/H200 SXM */
    if (d->cc_major == 8 && d->cc_minor == 0)
        return 312e3; /* A100 */
    if (d->cc_major == 10 && d->cc_minor == 0)
        return 2250e3; /* B200 */
    return 0;
}
#endif

int swift_backend_select(struct swift_backend *b, const char *spec)
{
    return swift_backend_select_rank(b, spec, 0);
}

int swift_backend_select_rank(struct swift_backend *b, const char *spec, int local_rank)
{
    memset(b, 0, sizeof(*b));
    if (!spec || !*spec)
        spec = "auto";
    int want_cuda = 0, index = 0, explicit_index = 0;
    if (!strcmp(spec, "cpu")) {
        want_cuda = 0;
    } else if (!strcmp(spec, "auto")) {
        want_cuda = -1;
    } else if (!strncmp(spec, "cuda", 4) && (spec[4] == 0 || spec[4] == ':')) {
        want_cuda = 1;
        if (spec[4] == ':') {
            char *end;
            long v = strtol(spec + 5, &end, 10);
            if (end == spec + 5 || *end || v < 0 || v > 1023)
                return swift_usage("--device: bad device index in '%s'", spec);
            index = (int)v;
            explicit_index = 1;
        }
    } else {
        return swift_usage("--device: expected auto, cpu, cuda or cuda:N, not '%s'", spec);
    }
    const char *strict = getenv("SWIFT_CPU_STRICT_HOST");
    b->ops = strict && !strcmp(strict, "1") ? &swift_cpu_strict_ops : &swift_cpu_ops;
    snprintf(b->name, sizeof(b->name), "cpu");
    if (want_cuda == 0)
        return 0;
    struct swift_device_info info[16];
    char why[256] = "";
    int n = swift_device_query(info, 16, why, sizeof(why));
    if (want_cuda == 1 && !swift_device_built_with_cuda())
        return swift_error("--device %s: this build has no CUDA support (make CUDA=1)", spec);
    if (n <= 0) {
        if (want_cuda == 1)
            return swift_error("--device %s: %s%s", spec, why, n < 0 ? "; use --device cpu" : "");
        /* --device auto on a machine without a driver asked nothing of a GPU: no notice */
        if (n == 0 && swift_device_built_with_cuda())
            snprintf(b->notice, sizeof(b->notice), "no GPU (%s); running on the cpu", why);
        return 0;
    }
    if (!explicit_index && local_rank > 0) /* ranks on one host take one GPU each */
        index = local_rank % n;
    if (index >= n)
        return swift_error("--device %s: only %d CUDA device%s", spec, n, n == 1 ? "" : "s");
#ifdef SWIFT_HAVE_CUDA
    if (swift_cuda_init(index) < 0)
        return swift_error("--device %s: cannot initialise the GPU", spec);
    b->ops = &swift_cuda_ops;
    b->cuda = 1;
    b->index = index;
    b->peak_gflops = index < 16 ? cuda_peak_gflops(&info[index]) : 0;
    snprintf(b->name, sizeof(b->name), "cuda:%d", index);
#endif
    return 0;
}

int swift_backend_set_math(struct swift_backend *b, int math)
{
    if (math == SWIFT_MATH_FP32 && b->math == SWIFT_MATH_FP32)
        return 0;
    if (!b->ops->set_matmul_math || b->ops->set_matmul_math(math) < 0)
        return swift_error("--torch-dtype bfloat16: the %s backend cannot run bf16 matmuls",
                           b->name);
    b->math = math;
    b->math_fast = 1;
    if (math != SWIFT_MATH_BF16 || b->cuda)
        return 0;
    const char *impl = swift_cpu_bf16_impl();
    snprintf(b->math_impl, sizeof(b->math_impl), "%s", impl);
    b->math_fast = swift_cpu_bf16_fast_name(impl);
    if (b->math_fast)
        swift_info("bf16 matmuls: oneDNN %s", impl);
    else
        swift_warn("bf16 matmuls: oneDNN runs '%s', not an avx512_core_bf16 or AMX kernel: "
                   "this CPU has no fast bf16 path and bf16 will be slower than float32",
                   impl);
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

double swift_backend_matmul_peak_gflops(const struct swift_backend *b)
{
    const struct swift_ops *ops = b->ops;
    int n = 1024;
    size_t bytes = (size_t)n * n * sizeof(float);
    float *a = ops->alloc(bytes), *w = ops->alloc(bytes), *c = ops->alloc(bytes);
    double best = 0;
    for (int r = 0; a && w && c && r < 4; r++) {
        ops->sync();
        double t0 = now_s();
        ops->matmul_fwd(c, a, w, NULL, n, n, n, 1.0f, 0.0f);
        ops->sync();
        double g = 2.0 * n * n * n / (now_s() - t0) / 1e9;
        if (r > 0 && g > best) /* the first call creates the primitive */
            best = g;
    }
    ops->free(a);
    ops->free(w);
    ops->free(c);
    return best;
}

int swift_backend_default_math(const struct swift_backend *b, const char *model_dir, int say)
{
    if (b->cuda)
        return SWIFT_MATH_FP32;
    char path[4096];
    snprintf(path, sizeof(path), "%s/config.json", model_dir ? model_dir : ".");
    json_t *root = json_load_file(path, 0, NULL); /* none (a GGUF file): float32 */
    const char *key = "dtype", *dt = json_string_value(json_object_get(root, key));
    if (!dt)
        dt = json_string_value(json_object_get(root, key = "torch_dtype"));
    int math = SWIFT_MATH_FP32;
    if (dt && !strcmp(dt, "bfloat16")) {
        math = SWIFT_MATH_BF16;
        if (say)
            swift_info("--torch-dtype bfloat16: the checkpoint's dtype (%s in %s); "
                       "--torch-dtype float32 for fp32 matmuls",
                       key,
                       path);
    } else if (dt && !strcmp(dt, "float16") && say) {
        swift_info("--torch-dtype float32: the checkpoint is float16 (%s in %s) and the CPU has "
                   "no fp16 matmuls; fp32 holds its weights exactly (--torch-dtype bfloat16 for "
                   "bf16 matmuls)",
                   key,
                   path);
    }
    json_decref(root);
    return math;
}
