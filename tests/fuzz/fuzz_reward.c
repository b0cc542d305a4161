/* Fuzz the reward pieces of lib/train/reward.h that read untrusted text: the answer extraction
 * and number parsing (completions are whatever a model writes), the accuracy comparison, and the
 * reply-line parser (whatever a reward program prints). Nothing crashes, reads out of bounds or
 * returns a non-finite value; the first half of the input is the completion, the second half
 * the reference. */
#include "lib/train/reward.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = 0; /* text stops at the first NUL, as a C string does */
    char out[SWIFT_REWARD_ANSWER_MAX], small[3];
    double v;
    for (int ref = 0; ref < 2; ref++) {
        if (swift_reward_extract_answer(text, ref, out, sizeof out) &&
            swift_reward_parse_number(out, &v) && !isfinite(v))
            abort();
        swift_reward_extract_answer(text, ref, small, sizeof small);
        if (strlen(small) > 2)
            abort();
    }
    size_t half = strlen(text) / 2;
    char *reference = strdup(text + half);
    if (reference) {
        text[half] = 0;
        double a = swift_reward_accuracy(text, reference);
        if (a != 0 && a != 1)
            abort();
        free(reference);
    }
    /* every line of the raw bytes as a reply line (no NUL terminator inside the length) */
    size_t start = 0;
    for (size_t i = 0; i <= size; i++) {
        if (i == size || data[i] == '\n') {
            if (swift_reward_parse_reply((const char *)data + start, i - start, &v) && !isfinite(v))
                abort();
            start = i + 1;
        }
    }
    free(text);
    return 0;
}
