/* fuzz_gguf: the GGUF reader on arbitrary bytes, and the model config and tokenizer built from
 * its metadata (swift-infer's GGUF input), must fail with a message, never crash. */
#include "lib/core/error.h"
#include "lib/formats/gguf.h"
#include "lib/model/internal.h"
#include "lib/preprocess/tokenizer.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *devnull;
    if (!devnull) {
        devnull = fopen("/dev/null", "w");
        swift_error_set_stream(devnull);
    }
    struct swift_gguf *g;
    if (swift_gguf_parse(data, size, "fuzz.gguf", &g) == 0) {
        for (uint64_t i = 0; i < g->n_tensors; i++) {
            /* touch the first and last byte of every tensor: must be inside the buffer */
            const volatile uint8_t *p = g->tensors[i].data;
            if (g->tensors[i].nbytes)
                (void)(p[0] + p[g->tensors[i].nbytes - 1]);
        }
        swift_gguf_dump(devnull, g, 4);
        /* what swift-infer builds from the metadata: the model config and the tokenizer */
        struct swift_model_config c;
        (void)swift_model_gguf_config(&c, g, "fuzz.gguf");
        struct swift_tokenizer *tok;
        if (swift_tokenizer_from_gguf(&tok, g, "fuzz.gguf") == 0)
            swift_tokenizer_free(tok);
        swift_gguf_free(g);
    }
    return 0;
}
