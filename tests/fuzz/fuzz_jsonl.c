/* Fuzz the JSON Lines reader: any bytes give values or a positioned error, never a crash. */
#include "lib/core/error.h"
#include "lib/core/jsonl.h"

#include <stdint.h>
#include <stdio.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *devnull;
    if (!devnull)
        devnull = fopen("/dev/null", "w");
    swift_error_set_stream(devnull);
    FILE *in = fmemopen((void *)data, size ? size : 1, "r");
    if (!in)
        return 0;
    struct swift_jsonl r;
    swift_jsonl_init_fp(&r, in, "fuzz.jsonl", size % 2 ? SWIFT_JSONL_SKIP_INVALID : 0);
    r.max_line = 4096;
    json_t *v;
    while (swift_jsonl_next(&r, &v) > 0)
        json_decref(v);
    swift_jsonl_close(&r);
    fclose(in);
    return 0;
}
