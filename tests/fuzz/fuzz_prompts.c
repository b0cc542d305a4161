/* Fuzz the GRPO prompt rows (swift-preprocess --kind prompts): rows -> a conversation ending with
 * a user turn and the metadata (every ms-swift, TRL and field form, with and without --columns
 * renames and --system), the prompt encoding with the generation prompt (the byte-level ChatML
 * tokenizer of tests/fixtures/eval/llama) and the shard writer's acceptance of the metadata. The
 * first byte picks the template and the options; the rest is JSON Lines. */
#include "lib/core/error.h"
#include "lib/formats/shard.h"
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
    if (swift_tokenizer_load(&tok, "tests/fixtures/eval/llama") == 0)
        st = swift_tok_state_new(tok);
}

/* The metadata is one JSON object whose "prompt" is the last (user) message's content. */
static void check_meta(const struct swift_conv *c, const char *meta, size_t len)
{
    json_t *m = json_loadb(meta, len, JSON_REJECT_DUPLICATES, NULL);
    json_t *p = json_object_get(m, "prompt");
    const struct swift_message *last = &c->msg[c->n - 1];
    if (!json_is_object(m) || !json_is_string(p) || last->role != SWIFT_ROLE_USER ||
        json_string_length(p) != last->len ||
        memcmp(json_string_value(p), last->content, last->len))
        abort();
    if (strncmp(meta, "{\"prompt\":", 10) || memchr(meta, 0, len))
        abort();
    json_decref(m);
}

static void one_row(const char *s, size_t n, const struct swift_template *t,
                    const struct swift_columns *cols, const char *system, struct swift_conv *c,
                    struct swift_encoded *e, struct swift_shard_writer *w)
{
    json_t *obj = json_loadb(s, n, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(obj)) {
        json_decref(obj);
        return;
    }
    json_t *owned = NULL;
    char *meta = NULL, err[256];
    size_t len = 0;
    if (swift_row_to_prompt(obj, cols, system, c, &meta, &len, &owned, err, sizeof(err)) == 0) {
        check_meta(c, meta, len);
        if (st && swift_template_encode_prompt(t, st, tok, c, e, err, sizeof(err)) == 0) {
            if (e->trained)
                abort(); /* a prompt trains nothing */
            for (size_t i = 0; i < e->tok.n; i++)
                if (e->mask[i])
                    abort();
            if (e->tok.n &&
                swift_shard_writer_add_meta(
                    w, e->tok.ids, e->mask, (uint32_t)e->tok.n, NULL, 0, meta, (uint32_t)len) < 0)
                abort(); /* the writer takes every metadata text the rows give */
        }
    }
    free(meta);
    json_decref(owned);
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
    static const char *const names[] = {
        "chatml", "qwen3", "llama3", "default", "generation", "qwen"};
    const struct swift_template *t = swift_template_find(names[(data[0] & 0x3f) % 6]);
    struct swift_columns cols;
    swift_columns_parse(&cols, data[0] & 0x80 ? "q:question,gold:answer,msgs:messages" : NULL);
    const char *system = data[0] & 0x40 ? "Be exact." : NULL;
    struct swift_conv c = {0};
    struct swift_encoded e = {0};
    struct swift_shard_writer *w = swift_shard_writer_new("fuzz.bin");
    const char *p = (const char *)data + 1, *end = (const char *)data + size;
    for (int rows = 0; p < end && rows < 64; rows++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        one_row(p, n, t, &cols, system, &c, &e, w);
        p += n + 1;
    }
    unsigned char *buf;
    size_t len;
    if (swift_shard_serialize(w, &buf, &len) == 0) {
        if (swift_shard_check(buf, len, "fuzz") != 0)
            abort();
        free(buf);
    }
    swift_shard_writer_free(w);
    free(c.msg);
    swift_encoded_release(&e);
    swift_columns_release(&cols);
    return 0;
}
