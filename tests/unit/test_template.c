/* template + dataset: ids equal to the official Jinja templates (fixtures from
 * tests/ref/gen_template.py), loss masks, bad conversations. */
#include "lib/preprocess/dataset.h"
#include "lib/preprocess/template.h"
#include "lib/preprocess/tokenizer.h"

#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static struct swift_tokenizer *load(const char *name)
{
    const char *sh = getenv("SHARED") ? getenv("SHARED") : "../shared";
    char path[1024];
    snprintf(path, sizeof(path), "%s/data/tokenizers/%s", sh, name);
    if (access(path, R_OK) != 0) {
        if (getenv("CI") && !strcmp(getenv("CI"), "true"))
            fail_msg("shared data missing: %s", path);
        return NULL;
    }
    struct swift_tokenizer *tok;
    assert_int_equal(swift_tokenizer_load(&tok, path), 0);
    return tok;
}

/* Encode one row object; returns 0 or -1 with err. */
static int encode_row(const char *tpl, struct swift_tokenizer *tok, json_t *row, int loss,
                      struct swift_encoded *e, char *err, size_t errlen)
{
    struct swift_tok_state *st = swift_tok_state_new(tok);
    struct swift_conv conv = {0};
    json_t *owned;
    int rc = swift_row_to_conv(row, NULL, NULL, &conv, &owned, err, errlen);
    if (rc == 0)
        rc = swift_template_encode(swift_template_find(tpl), st, tok, &conv, loss, e, err, errlen);
    json_decref(owned);
    free(conv.msg);
    swift_tok_state_free(st);
    return rc;
}

static void run_fixture(const char *tpl, const char *tokname)
{
    struct swift_tokenizer *tok = load(tokname);
    if (!tok) {
        skip();
        return;
    }
    char path[256];
    snprintf(path, sizeof(path), "tests/ref/template/%s.jsonl", tpl);
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    char *line = NULL;
    size_t cap = 0;
    int n = 0, ok = 0;
    while (getline(&line, &cap, fp) > 0) {
        json_t *f = json_loads(line, 0, NULL);
        assert_non_null(f);
        struct swift_encoded e = {0};
        char err[512];
        int rc = encode_row(
            tpl, tok, json_object_get(f, "row"), SWIFT_LOSS_DEFAULT, &e, err, sizeof(err));
        if (rc < 0)
            fail_msg("%s #%d: %s", tpl, n, err);
        json_t *want = json_object_get(f, "ids");
        int same = e.tok.n == json_array_size(want);
        for (size_t i = 0; same && i < e.tok.n; i++)
            same = (json_int_t)e.tok.ids[i] == json_integer_value(json_array_get(want, i));
        json_t *wt = json_object_get(f, "text");
        char *wn; /* the Jinja text, NFC-normalized as ours is */
        size_t wl;
        assert_int_equal(
            swift_tokenizer_normalize(tok, json_string_value(wt), json_string_length(wt), &wn, &wl),
            0);
        if (same && e.len == wl && !memcmp(e.text, wn, wl))
            ok++;
        else
            print_message(
                "%s #%d differs:\n want %s\n got  %s\n", tpl, n, json_string_value(wt), e.text);
        free(wn);
        /* something is trained, and never a token outside the assistant turns' reach */
        assert_true(e.trained > 0 && e.trained < e.tok.n);
        swift_encoded_release(&e);
        json_decref(f);
        n++;
    }
    print_message("%s vs official Jinja (transformers): %d/%d\n", tpl, ok, n);
    assert_true(n >= 10);
    assert_int_equal(ok, n);
    free(line);
    fclose(fp);
    swift_tokenizer_free(tok);
}

static void test_qwen2_5(void **s)
{
    (void)s;
    run_fixture("qwen2_5", "qwen3");
}
static void test_qwen(void **s)
{
    (void)s;
    run_fixture("qwen", "qwen3");
}
static void test_qwen3(void **s)
{
    (void)s;
    run_fixture("qwen3", "qwen3");
}
static void test_llama3(void **s)
{
    (void)s;
    run_fixture("llama3", "llama3-instruct");
}

/* The mask as ids: trained tokens decoded, in order. */
static char *trained_text(struct swift_tokenizer *tok, const struct swift_encoded *e)
{
    uint32_t *ids = malloc(e->tok.n * sizeof(uint32_t) + 4);
    size_t k = 0;
    for (size_t i = 0; i < e->tok.n; i++)
        if (e->mask[i])
            ids[k++] = e->tok.ids[i];
    char *t;
    assert_int_equal(swift_tokenizer_decode(tok, ids, k, 0, &t, NULL), 0);
    free(ids);
    return t;
}

static void test_masks(void **state)
{
    (void)state;
    struct swift_tokenizer *tok = load("qwen3");
    if (!tok) {
        skip();
        return;
    }
    const char *conv = "{\"messages\":[{\"role\":\"user\",\"content\":\"Q1\"},"
                       "{\"role\":\"assistant\",\"content\":\"A1\"},"
                       "{\"role\":\"user\",\"content\":\"Q2\"},"
                       "{\"role\":\"assistant\",\"content\":\"A2\"}]}";
    json_t *row = json_loads(conv, 0, NULL);
    struct swift_encoded e = {0};
    char err[256];
    assert_int_equal(encode_row("qwen2_5", tok, row, SWIFT_LOSS_DEFAULT, &e, err, sizeof(err)), 0);
    char *t = trained_text(tok, &e);
    assert_string_equal(t, "A1<|im_end|>\nA2<|im_end|>");
    free(t);
    assert_int_equal(encode_row("qwen2_5", tok, row, SWIFT_LOSS_LAST_ROUND, &e, err, sizeof(err)),
                     0);
    t = trained_text(tok, &e);
    assert_string_equal(t, "A2<|im_end|>");
    free(t);
    assert_int_equal(encode_row("qwen3", tok, row, SWIFT_LOSS_LAST_ROUND, &e, err, sizeof(err)), 0);
    t = trained_text(tok, &e);
    assert_string_equal(t, "<think>\n\n</think>\n\nA2<|im_end|>");
    free(t);
    assert_int_equal(encode_row("qwen2_5", tok, row, SWIFT_LOSS_ALL, &e, err, sizeof(err)), 0);
    assert_int_equal(e.trained, e.tok.n - 1); /* all but the final "\n" */
    json_decref(row);
    /* per-message loss overrides */
    row = json_loads("{\"messages\":[{\"role\":\"user\",\"content\":\"Q1\"},"
                     "{\"role\":\"assistant\",\"content\":\"A1\",\"loss\":false},"
                     "{\"role\":\"user\",\"content\":\"Q2\"},"
                     "{\"role\":\"assistant\",\"content\":\"A2\"}]}",
                     0,
                     NULL);
    assert_int_equal(encode_row("chatml", tok, row, SWIFT_LOSS_DEFAULT, &e, err, sizeof(err)), 0);
    t = trained_text(tok, &e);
    assert_string_equal(t, "A2<|im_end|>");
    free(t);
    assert_string_equal(e.text,
                        "<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>"
                        "\n<|im_start|>user\nQ2<|im_end|>\n<|im_start|>assistant\nA2"
                        "<|im_end|>\n");
    json_decref(row);
    /* alpaca under ms-swift's default template; generation for text */
    row = json_loads("{\"instruction\":\"Add\",\"input\":\"1 1\",\"output\":\"2\"}", 0, NULL);
    assert_int_equal(encode_row("default", tok, row, SWIFT_LOSS_DEFAULT, &e, err, sizeof(err)), 0);
    assert_string_equal(e.text,
                        "You are a helpful assistant.\n\n### Human:\nAdd\n1 1\n\n### "
                        "Assistant:\n2<|im_end|>");
    t = trained_text(tok, &e);
    assert_string_equal(t, "2<|im_end|>");
    free(t);
    json_decref(row);
    row = json_loads("{\"text\":\"Once upon a time\"}", 0, NULL);
    assert_int_equal(encode_row("generation", tok, row, SWIFT_LOSS_DEFAULT, &e, err, sizeof(err)),
                     0);
    assert_string_equal(e.text, "Once upon a time<|im_end|>");
    assert_int_equal(e.trained, e.tok.n);
    json_decref(row);
    swift_encoded_release(&e);
    swift_tokenizer_free(tok);
}

static void test_bad_conversations(void **state)
{
    (void)state;
    struct swift_tokenizer *tok = load("qwen3");
    if (!tok) {
        skip();
        return;
    }
    const char *cases[][2] = {
        {"{\"messages\":[]}", "empty conversation"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"user\",\"content\":"
         "\"b\"}]}",
         "roles out of order (user after user)"},
        {"{\"messages\":[{\"role\":\"assistant\",\"content\":\"a\"}]}",
         "roles out of order (assistant before any user message)"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}",
         "conversation ends with a user message, not an assistant one"},
        {"{\"messages\":[{\"role\":\"wizard\",\"content\":\"a\"}]}", "unknown role 'wizard'"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":7}]}", "must be a string"},
        {"{\"conversations\":[{\"from\":\"human\"}]}", "message 1: missing \"value\""},
        {"{\"foo\":1}", "no known fields"},
        {"{\"instruction\":\"x\"}", "missing response"},
        {"{\"text\":\"plain\"}", "needs --template generation"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *row = json_loads(cases[i][0], 0, NULL);
        assert_non_null(row);
        struct swift_encoded e = {0};
        char err[256] = "";
        assert_int_equal(encode_row("qwen3", tok, row, SWIFT_LOSS_DEFAULT, &e, err, sizeof(err)),
                         -1);
        if (!strstr(err, cases[i][1]))
            fail_msg("case %zu: '%s' lacks '%s'", i, err, cases[i][1]);
        swift_encoded_release(&e);
        json_decref(row);
    }
    swift_tokenizer_free(tok);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_qwen2_5),
        cmocka_unit_test(test_qwen),
        cmocka_unit_test(test_qwen3),
        cmocka_unit_test(test_llama3),
        cmocka_unit_test(test_masks),
        cmocka_unit_test(test_bad_conversations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
