/* Fuzz the GPTQ checkpoint reader (lib/export/gptq_solve.h swift_gptq_dequant_set): any safetensors
 * file the parser accepts, read as the GPTQ tensors of "x.weight" with the weight shape taken from
 * x.qweight and x.scales, is dequantized or rejected with a message; never a crash or an
 * out-of-bounds read (g_idx values, packing, shapes all come from the input). */
#include "lib/export/gptq_solve.h"
#include "lib/formats/safetensors.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "lib/core/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *devnull;
    if (!devnull) {
        devnull = fopen("/dev/null", "w");
        swift_error_set_stream(devnull);
    }
    struct swift_safetensors st;
    if (swift_safetensors_parse(&st, data, size, "fuzz.safetensors") < 0)
        return 0;
    struct swift_st_set set = {.files = &st, .nfiles = 1, .dir = "fuzz"};
    const struct swift_st_tensor *qw = swift_safetensors_find(&st, "x.qweight");
    if (qw && qw->ndim == 2 && qw->shape[0] > 0 && qw->shape[1] > 0 && qw->shape[0] <= 4096 &&
        qw->shape[1] <= 4096) {
        for (int bits = 2; bits <= 8; bits *= 2) {
            int64_t out = qw->shape[1], in = qw->shape[0] * (32 / bits);
            if (out * in > (1 << 20))
                continue;
            float *w = malloc((size_t)(out * in) * sizeof(float));
            if (w)
                swift_gptq_dequant_set(&set, "x.weight", (int)out, (int)in, bits != 8, w);
            free(w);
        }
    }
    swift_safetensors_close(&st);
    return 0;
}
