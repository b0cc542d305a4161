/* tokenizer: id-for-id against llama.cpp's vectors (shared data) and the committed reference
 * fixtures made by PyPI `tokenizers` (tests/ref/gen_tokenizer.py); decode round trips. */
#include "lib/preprocess/tokenizer.h"

#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/core/pool.h"

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

static const char *shared_dir(void)
{
    const char *s = getenv("SHARED");
    return s ? s : "../shared";
}

static int need_shared(const char *path)
{
    if (access(path, R_OK) == 0)
        return 1;
    if (getenv("CI") && !strcmp(getenv("CI"), "true"))
        fail_msg("shared data missing: %s", path);
    return 0;
}

static struct swift_tokenizer *load(const char *name)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/data/tokenizers/%s", shared_dir(), name);
    if (!need_shared(path))
        return NULL;
    struct swift_tokenizer *tok;
    assert_int_equal(swift_tokenizer_load(&tok, path), 0);
    return tok;
}

/* Compare every text of ggml-vocab-<vec>.gguf.inp with its .out line. */
static void run_vectors(const char *tokname, const char *vec, int expect)
{
    char ipath[1024], opath[1024];
    snprintf(ipath,
             sizeof(ipath),
             "%s/data/tokenizer-vectors/ggml-vocab-%s.gguf.inp",
             shared_dir(),
             vec);
    snprintf(opath,
             sizeof(opath),
             "%s/data/tokenizer-vectors/ggml-vocab-%s.gguf.out",
             shared_dir(),
             vec);
    if (!need_shared(ipath)) {
        skip();
        return;
    }
    struct swift_tokenizer *tok = load(tokname);
    struct swift_tok_state *st = swift_tok_state_new(tok);
    char *inp, *outp;
    size_t ilen, olen;
    assert_int_equal(swift_read_file(ipath, 1 << 24, &inp, &ilen), 0);
    assert_int_equal(swift_read_file(opath, 1 << 24, &outp, &olen), 0);
    static const char sep[] = "\n__ggml_vocab_test__\n";
    char *p = inp, *o = outp;
    int total = 0, ok = 0;
    for (;;) {
        char *e = strstr(p, sep);
        if (!e)
            break; /* the empty last piece */
        char *ol = o, *oe = strchr(o, '\n');
        assert_non_null(oe);
        *oe = 0;
        o = oe + 1;
        struct swift_tokens t = {0};
        assert_int_equal(swift_tokenizer_encode(st, p, (size_t)(e - p), 0, &t), 0);
        char got[1 << 16];
        size_t g = 0;
        got[0] = 0;
        for (size_t i = 0; i < t.n && g + 16 < sizeof(got); i++)
            g += (size_t)snprintf(got + g, sizeof(got) - g, " %u", t.ids[i]);
        total++;
        if (!strcmp(got, ol))
            ok++;
        else
            print_message(
                "%s #%d: text '%.*s'\n  want%s\n  got %s\n", vec, total, (int)(e - p), p, ol, got);
        /* decode gives the text back (all these are valid UTF-8) */
        char *dec;
        size_t dlen;
        assert_int_equal(swift_tokenizer_decode(tok, t.ids, t.n, 0, &dec, &dlen), 0);
        if (dlen != (size_t)(e - p) || memcmp(dec, p, dlen))
            if (strcmp(vec, "qwen2")) /* NFC may change the text */
                fail_msg("%s #%d: decode differs", vec, total);
        free(dec);
        swift_tokens_release(&t);
        p = e + sizeof(sep) - 1;
    }
    print_message("%s vs %s: %d/%d\n", tokname, vec, ok, total);
    assert_int_equal(total, expect);
    assert_int_equal(ok, total);
    free(inp);
    free(outp);
    swift_tok_state_free(st);
    swift_tokenizer_free(tok);
}

static void test_vectors_qwen(void **state)
{
    (void)state;
    run_vectors("qwen3", "qwen2", 46);
}
static void test_vectors_llama3(void **state)
{
    (void)state;
    run_vectors("llama3", "llama-bpe", 46);
}
static void test_vectors_gpt2(void **state)
{
    (void)state;
    run_vectors("gpt2", "gpt-2", 46);
}

/* Every corpus text against the fixture made by PyPI tokenizers (tests/ref/gen_tokenizer.py). */
static void run_fixture(const char *name)
{
    struct swift_tokenizer *tok = load(name);
    if (!tok) {
        skip();
        return;
    }
    char fpath[512];
    snprintf(fpath, sizeof(fpath), "tests/ref/tokenizer/%s.jsonl", name);
    FILE *cf = fopen("tests/ref/tokenizer/corpus.jsonl", "r");
    FILE *ff = fopen(fpath, "r");
    assert_non_null(cf);
    assert_non_null(ff);
    struct swift_tok_state *st = swift_tok_state_new(tok);
    struct swift_pool *pool = swift_pool_new(3);
    char *cl = NULL, *fl = NULL;
    size_t ccap = 0, fcap = 0;
    int n = 0, ok = 0, ok_sp = 0, ok_dec = 0;
    const char *texts[256];
    size_t lens[256];
    json_t *keep[256];
    json_t *want_sp[256];
    while (getline(&cl, &ccap, cf) > 0 && getline(&fl, &fcap, ff) > 0 && n < 256) {
        json_t *c = json_loads(cl, 0, NULL), *f = json_loads(fl, 0, NULL);
        assert_non_null(c);
        assert_non_null(f);
        json_t *text = json_object_get(c, "text");
        const char *t = json_string_value(text);
        size_t tl = json_string_length(text);
        for (int mode = 0; mode < 2; mode++) {
            json_t *want = json_object_get(f, mode ? "ids_special" : "ids");
            struct swift_tokens tk = {0};
            int flags = mode ? SWIFT_TOK_PARSE_SPECIAL | SWIFT_TOK_ADD_SPECIAL : 0;
            assert_int_equal(swift_tokenizer_encode(st, t, tl, flags, &tk), 0);
            int same = tk.n == json_array_size(want);
            for (size_t i = 0; same && i < tk.n; i++)
                same = (json_int_t)tk.ids[i] == json_integer_value(json_array_get(want, i));
            if (same)
                mode ? ok_sp++ : ok++;
            else {
                char *w = json_dumps(want, JSON_COMPACT);
                print_message("%s #%d mode %d: '%s'\n  want %s\n  got ", name, n, mode, t, w);
                for (size_t i = 0; i < tk.n; i++)
                    print_message("%u,", tk.ids[i]);
                print_message("\n");
                free(w);
            }
            if (mode) {
                char *dec;
                size_t dl;
                assert_int_equal(swift_tokenizer_decode(tok, tk.ids, tk.n, 0, &dec, &dl), 0);
                json_t *wd = json_object_get(f, "decoded");
                if (dl == json_string_length(wd) && !memcmp(dec, json_string_value(wd), dl))
                    ok_dec++;
                else
                    print_message(
                        "%s #%d decode: want '%s' got '%s'\n", name, n, json_string_value(wd), dec);
                free(dec);
            }
            swift_tokens_release(&tk);
        }
        texts[n] = t;
        lens[n] = tl;
        keep[n] = c;
        want_sp[n] = json_incref(json_object_get(f, "ids_special"));
        json_decref(f);
        n++;
    }
    /* the same through the thread pool */
    struct swift_tokens *outs = calloc((size_t)n, sizeof(*outs));
    assert_int_equal(swift_tokenizer_encode_many(tok,
                                                 pool,
                                                 (size_t)n,
                                                 texts,
                                                 lens,
                                                 SWIFT_TOK_PARSE_SPECIAL | SWIFT_TOK_ADD_SPECIAL,
                                                 outs),
                     0);
    int ok_pool = 0;
    for (int i = 0; i < n; i++) {
        int same = outs[i].n == json_array_size(want_sp[i]);
        for (size_t k = 0; same && k < outs[i].n; k++)
            same = (json_int_t)outs[i].ids[k] == json_integer_value(json_array_get(want_sp[i], k));
        ok_pool += same;
        swift_tokens_release(&outs[i]);
        json_decref(keep[i]);
        json_decref(want_sp[i]);
    }
    free(outs);
    print_message("%s vs tokenizers fixture: %d/%d plain, %d/%d special, %d/%d decode, %d/%d "
                  "pool\n",
                  name,
                  ok,
                  n,
                  ok_sp,
                  n,
                  ok_dec,
                  n,
                  ok_pool,
                  n);
    assert_true(n > 90);
    assert_int_equal(ok, n);
    assert_int_equal(ok_sp, n);
    assert_int_equal(ok_dec, n);
    assert_int_equal(ok_pool, n);
    free(cl);
    free(fl);
    fclose(cf);
    fclose(ff);
    swift_pool_free(pool);
    swift_tok_state_free(st);
    swift_tokenizer_free(tok);
}

static void test_fixture_qwen3(void **state)
{
    (void)state;
    run_fixture("qwen3");
}
static void test_fixture_llama3(void **state)
{
    (void)state;
    run_fixture("llama3");
}
static void test_fixture_llama3_instruct(void **state)
{
    (void)state;
    run_fixture("llama3-instruct");
}
static void test_fixture_gpt2(void **state)
{
    (void)state;
    run_fixture("gpt2");
}

/* GPT-2's original encoder.json + vocab.bpe give the same ids as its tokenizer.json. */
static void test_gpt2_encoder_json(void **state)
{
    (void)state;
    char dir[1024], e[1100], b[1100];
    snprintf(dir, sizeof(dir), "%s/data/tokenizers/gpt2", shared_dir());
    snprintf(e, sizeof(e), "%s/encoder.json", dir);
    snprintf(b, sizeof(b), "%s/vocab.bpe", dir);
    if (!need_shared(e)) {
        skip();
        return;
    }
    char *et, *bt;
    size_t el, bl;
    assert_int_equal(swift_read_file(e, 1 << 24, &et, &el), 0);
    assert_int_equal(swift_read_file(b, 1 << 24, &bt, &bl), 0);
    struct swift_tokenizer *a, *j = load("gpt2");
    assert_int_equal(swift_tokenizer_load_gpt2(&a, et, el, bt, bl, e), 0);
    struct swift_tok_state *sa = swift_tok_state_new(a), *sj = swift_tok_state_new(j);
    const char *text = "Hello world<|endoftext|> it's 2024: 中文 👨‍👩‍👧   x\r\n";
    struct swift_tokens ta = {0}, tj = {0};
    assert_int_equal(swift_tokenizer_encode(sa, text, strlen(text), SWIFT_TOK_PARSE_SPECIAL, &ta),
                     0);
    assert_int_equal(swift_tokenizer_encode(sj, text, strlen(text), SWIFT_TOK_PARSE_SPECIAL, &tj),
                     0);
    assert_int_equal(ta.n, tj.n);
    assert_memory_equal(ta.ids, tj.ids, ta.n * sizeof(uint32_t));
    assert_int_equal(swift_tokenizer_token_id(a, "<|endoftext|>"), 50256);
    assert_true(swift_tokenizer_is_special(a, 50256));
    swift_tokens_release(&ta);
    swift_tokens_release(&tj);
    swift_tok_state_free(sa);
    swift_tok_state_free(sj);
    swift_tokenizer_free(a);
    swift_tokenizer_free(j);
    free(et);
    free(bt);
}

static char msgbuf[4096];
static void expect_load_error(const char *json, const char *want)
{
    FILE *fp = fmemopen(msgbuf, sizeof(msgbuf), "w");
    memset(msgbuf, 0, sizeof(msgbuf));
    swift_error_set_stream(fp);
    struct swift_tokenizer *tok = (void *)1;
    int rc = swift_tokenizer_load_json(&tok, json, strlen(json), "t.json");
    fclose(fp);
    swift_error_set_stream(NULL);
    assert_int_equal(rc, -1);
    assert_null(tok);
    if (!strstr(msgbuf, want))
        fail_msg("'%s' lacks '%s'", msgbuf, want);
}

static void test_bad_tokenizer_json(void **state)
{
    (void)state;
    expect_load_error("{", "t.json:1:");
    expect_load_error("[]", "no \"model\" object");
    expect_load_error("{\"model\":{\"type\":\"Unigram\"}}", "unsupported model type 'Unigram'");
    expect_load_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]}}",
                      "not a byte-level BPE vocabulary (no token for byte 0x00)");
    expect_load_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":-3},\"merges\":[]}}",
                      "vocab entry 'a': id must be an integer");
    expect_load_error("{\"model\":{\"type\":\"BPE\",\"vocab\":[],\"merges\":[]}}",
                      "model.vocab must be an object");
}

static void test_invalid_utf8(void **state)
{
    (void)state;
    struct swift_tokenizer *tok = load("gpt2");
    if (!tok) {
        skip();
        return;
    }
    struct swift_tok_state *st = swift_tok_state_new(tok);
    struct swift_tokens t = {0};
    FILE *fp = fmemopen(msgbuf, sizeof(msgbuf), "w");
    memset(msgbuf, 0, sizeof(msgbuf));
    swift_error_set_stream(fp);
    assert_int_equal(swift_tokenizer_encode(st, "abc\xff", 4, 0, &t), -1);
    assert_int_equal(swift_tokenizer_encode(st, "ab\xe4\xb8", 4, 0, &t), -1);
    fclose(fp);
    swift_error_set_stream(NULL);
    assert_non_null(strstr(msgbuf, "not valid UTF-8 (byte offset 3)"));
    assert_non_null(strstr(msgbuf, "not valid UTF-8 (byte offset 2)"));
    /* decoding a lone continuation byte token gives U+FFFD, as HF does */
    /* (expected bytes from tokenizers' decode of the same ids) */
    uint32_t ids[][3] = {{127, 226, 0}, {171, 120, 0}, {171, 120, 171}};
    const char *want[] = {"\xc3\x84", "\xef\xbf\xbd", "\xef\xbf\xbd\xef\xbf\xbd"};
    for (int i = 0; i < 3; i++) {
        char *dec;
        size_t dl;
        assert_int_equal(swift_tokenizer_decode(tok, ids[i], i == 2 ? 3 : 2, 0, &dec, &dl), 0);
        assert_string_equal(dec, want[i]);
        free(dec);
    }
    swift_tokens_release(&t);
    swift_tok_state_free(st);
    swift_tokenizer_free(tok);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vectors_qwen),
        cmocka_unit_test(test_vectors_llama3),
        cmocka_unit_test(test_vectors_gpt2),
        cmocka_unit_test(test_fixture_qwen3),
        cmocka_unit_test(test_fixture_llama3),
        cmocka_unit_test(test_fixture_llama3_instruct),
        cmocka_unit_test(test_fixture_gpt2),
        cmocka_unit_test(test_gpt2_encoder_json),
        cmocka_unit_test(test_bad_tokenizer_json),
        cmocka_unit_test(test_invalid_utf8),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
