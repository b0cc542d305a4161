/* Fuzz the preference-row paths: kind detection, rows -> chosen/rejected conversations (every
 * ms-swift, LLaMA-Factory, TRL and KTO form, with and without --columns renames) and, when the
 * shared Qwen3 tokenizer is there ($SHARED/data/tokenizers/qwen3), the pair encoding with the
 * shared prompt and masks. The first byte picks the kind (auto, pairs, kto) and the template; the
 * rest is JSON Lines. */
#include "lib/core/error.h"
#include "lib/preprocess/dataset.h"
#include "lib/preprocess/template.h"
#include "lib/preprocess/tokenizer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct swift_tokenizer *tok;
static struct swift_tok_state *st;

static void setup(void)
{
    static FILE *devnull;
    devnull = fopen("/dev/null", "w");
    swift_error_set_stream(devnull);
    const char *sh = getenv("SHARED") ? getenv("SHARED") : "../shared";
    char dir[1024];
    snprintf(dir, sizeof(dir), "%s/data/tokenizers/qwen3", sh);
    if (swift_tokenizer_load(&tok, dir) == 0)
        st = swift_tok_state_new(tok);
}

/* One row: its kind, its conversations, and (with a tokenizer) its tokens. */
static void one_row(const char *s, size_t n, int force, const struct swift_template *t,
                    const struct swift_columns *cols, struct swift_conv *c, struct swift_conv *r,
                    struct swift_encoded *e0, struct swift_encoded *e1)
{
    json_t *obj = json_loadb(s, n, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(obj)) {
        json_decref(obj);
        return;
    }
    int kind = force >= 0 ? force : swift_row_kind(obj);
    if (kind != SWIFT_KIND_SFT) {
        json_t *owned = NULL;
        int label;
        char err[256];
        if (swift_row_to_pref(
                obj, cols, n % 3 ? NULL : "sys", kind, c, r, &label, &owned, err, sizeof(err)) ==
                0 &&
            st) {
            size_t prompt = 0;
            if (swift_template_encode_pair(t,
                                           st,
                                           tok,
                                           c,
                                           kind == SWIFT_KIND_PAIRS ? r : NULL,
                                           e0,
                                           e1,
                                           &prompt,
                                           err,
                                           sizeof(err)) == 0) {
                if (prompt > e0->tok.n)
                    abort();
                for (size_t i = 0; i < prompt; i++)
                    if (e0->mask[i] || (kind == SWIFT_KIND_PAIRS &&
                                        (e1->mask[i] || e1->tok.ids[i] != e0->tok.ids[i])))
                        abort(); /* the prompt is shared and never trained */
            }
        }
        json_decref(owned);
    }
    json_decref(obj);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    if (!ready) {
        setup();
        ready = 1;
    }
    if (size == 0)
        return 0;
    static const char *const names[] = {"qwen3", "llama3", "default", "chatml", "generation"};
    int force = data[0] % 3 - 1; /* -1 auto, SWIFT_KIND_PAIRS - 1 = 0 ... */
    if (force == 0)
        force = SWIFT_KIND_PAIRS;
    else if (force == 1)
        force = SWIFT_KIND_KTO;
    const struct swift_template *t = swift_template_find(names[(data[0] / 3) % 5]);
    struct swift_columns cols;
    swift_columns_parse(&cols, data[0] & 0x80 ? "good:chosen,bad:rejected,q:prompt" : NULL);
    struct swift_conv c = {0}, r = {0};
    struct swift_encoded e0 = {0}, e1 = {0};
    const char *p = (const char *)data + 1, *end = (const char *)data + size;
    for (int rows = 0; p < end && rows < 64; rows++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        one_row(p, n, force, t, &cols, &c, &r, &e0, &e1);
        p += n + 1;
    }
    free(c.msg);
    free(r.msg);
    swift_encoded_release(&e0);
    swift_encoded_release(&e1);
    swift_columns_release(&cols);
    return 0;
}
