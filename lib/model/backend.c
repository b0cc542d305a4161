/* backend — choosing the op table from --device (lib/model/backend.h). */
#include "lib/model/backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
