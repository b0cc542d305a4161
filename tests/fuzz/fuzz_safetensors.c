/* Fuzz the safetensors header parser: any input is accepted or rejected with a message, never a
 * crash or an out-of-bounds read (every accepted tensor is read whole). */
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
    if (swift_safetensors_parse(&st, data, size, "fuzz.safetensors") == 0) {
        volatile uint8_t sink = 0;
        for (size_t i = 0; i < st.ntensors; i++) {
            const struct swift_st_tensor *t = &st.tensors[i];
            const uint8_t *p = t->data;
            for (uint64_t j = 0; j < t->end - t->begin; j++)
                sink ^= p[j];
            if (t->numel < (1u << 20) &&
                (t->dtype == SWIFT_DTYPE_F32 || t->dtype == SWIFT_DTYPE_BF16 ||
                 t->dtype == SWIFT_DTYPE_F16)) {
                float *f = malloc((t->numel ? t->numel : 1) * sizeof(float));
                if (f)
                    swift_st_tensor_to_f32(t, f);
                free(f);
            }
            if (swift_safetensors_find(&st, t->name) != t)
                abort();
        }
        (void)sink;
        swift_safetensors_close(&st);
    }
    return 0;
}
