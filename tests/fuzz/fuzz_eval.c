/* Fuzz the eval task readers (MMLU CSV, multiple-choice/GSM8K JSONL) and the number extractor:
 * any bytes give items or a positioned error, never a crash. */
#include "lib/core/error.h"
#include "lib/eval/eval.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *devnull;
    if (!devnull)
        devnull = fopen("/dev/null", "w");
    swift_error_set_stream(devnull);
    static const int tasks[] = {SWIFT_EVAL_MMLU, SWIFT_EVAL_MC, SWIFT_EVAL_GSM8K, SWIFT_EVAL_EXACT};
    for (int t = 0; t < 4; t++) {
        FILE *in = fmemopen((void *)data, size ? size : 1, "r");
        if (!in)
            return 0;
        struct swift_eval_set set;
        swift_eval_set_init(&set);
        if (tasks[t] == SWIFT_EVAL_MMLU)
            swift_eval_read_mmlu_stream(in, "fuzz.csv", "s", &set);
        else
            swift_eval_read_jsonl_stream(tasks[t], in, "fuzz.jsonl", &set);
        for (size_t i = 0; i < set.n; i++) {
            char *p = swift_eval_prompt(tasks[t], &set.items[i], NULL, 0);
            free(p);
        }
        swift_eval_set_release(&set);
        fclose(in);
    }
    char *s = malloc(size + 1);
    if (s) {
        memcpy(s, data, size);
        s[size] = 0;
        char out[64];
        swift_eval_extract_number(s, out, sizeof(out));
        free(s);
    }
    return 0;
}
