/* tokenizer_gguf: a tokenizer built from a GGUF file's tokenizer.ggml.* keys gives the ids of
 * the tokenizer.json it was exported from (swift-export's vocab.c) on llama.cpp's test vectors,
 * with and without special tokens parsed, and the same eos token and chat template; llama.cpp's
 * own ggml-vocab-gpt-2.gguf gives the vectors' ids. */
#include "lib/preprocess/tokenizer.h"

#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/export/internal.h"
#include "lib/formats/gguf.h"

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

/* Encode every text of ggml-vocab-<vec>.gguf.inp with a and b (flags); all equal, and equal to
 * the .out line when want_out. Returns the number of texts. */
static int compare(struct swift_tokenizer *a, struct swift_tokenizer *b, const char *vec, int flags,
                   int want_out)
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
    char *inp, *outp;
    size_t ilen, olen;
    assert_int_equal(swift_read_file(ipath, 1 << 24, &inp, &ilen), 0);
    assert_int_equal(swift_read_file(opath, 1 << 24, &outp, &olen), 0);
    struct swift_tok_state *sa = swift_tok_state_new(a), *sb = swift_tok_state_new(b);
    static const char sep[] = "\n__ggml_vocab_test__\n";
    char *p = inp, *o = outp;
    int total = 0;
    for (char *e; (e = strstr(p, sep)); p = e + sizeof(sep) - 1) {
        char *ol = o, *oe = strchr(o, '\n');
        assert_non_null(oe);
        *oe = 0;
        o = oe + 1;
        struct swift_tokens ta = {0}, tb = {0};
        assert_int_equal(swift_tokenizer_encode(sa, p, (size_t)(e - p), flags, &ta), 0);
        assert_int_equal(swift_tokenizer_encode(sb, p, (size_t)(e - p), flags, &tb), 0);
        assert_int_equal(ta.n, tb.n);
        assert_memory_equal(ta.ids, tb.ids, ta.n * sizeof(uint32_t));
        if (want_out) {
            char got[1 << 16];
            size_t g = 0;
            got[0] = 0;
            for (size_t i = 0; i < tb.n && g + 16 < sizeof(got); i++)
                g += (size_t)snprintf(got + g, sizeof(got) - g, " %u", tb.ids[i]);
            assert_string_equal(got, ol);
        }
        swift_tokens_release(&ta);
        swift_tokens_release(&tb);
        total++;
    }
    swift_tok_state_free(sa);
    swift_tok_state_free(sb);
    free(inp);
    free(outp);
    return total;
}

/* Write NAME's tokenizer as swift-export does into a GGUF, load it back, compare. */
static void roundtrip(const char *name, const char *arch, const char *vec, const char *pre)
{
    char dir[1024];
    snprintf(dir, sizeof(dir), "%s/data/tokenizers/%s", shared_dir(), name);
    if (!need_shared(dir)) {
        skip();
        return;
    }
    struct swift_tokenizer *json_tok, *gguf_tok;
    assert_int_equal(swift_tokenizer_load(&json_tok, dir), 0);
    struct swift_hparams hp = {0};
    snprintf(hp.arch, sizeof(hp.arch), "%s", arch);
    hp.vocab_size = swift_tokenizer_vocab_size(json_tok);
    hp.config = json_object();
    char tmpl[] = "/tmp/test_tokenizer_gguf.XXXXXX";
    assert_non_null(mkdtemp(tmpl));
    char path[1100];
    snprintf(path, sizeof(path), "%s/%s.gguf", tmpl, name);
    struct swift_gguf_writer w;
    swift_gguf_writer_init(&w);
    assert_int_equal(swift_gguf_set_str(&w, "general.architecture", arch), 0);
    assert_int_equal(swift_export_tokenizer(&w, dir, &hp, NULL), 0);
    assert_int_equal(swift_gguf_writer_begin(&w, path), 0);
    assert_int_equal(swift_gguf_writer_commit(&w), 0);
    swift_gguf_writer_release(&w);
    json_decref(hp.config);

    assert_int_equal(swift_tokenizer_load(&gguf_tok, path), 0);
    struct swift_gguf *g;
    assert_int_equal(swift_gguf_open(path, &g), 0);
    assert_string_equal(swift_gguf_get(g, "tokenizer.ggml.pre")->v.str.s, pre);
    swift_gguf_free(g);
    unlink(path);
    rmdir(tmpl);

    int n = compare(json_tok, gguf_tok, vec, 0, 1);
    assert_int_equal(n, 46);
    compare(json_tok, gguf_tok, vec, SWIFT_TOK_PARSE_SPECIAL, 0);
    const char *keys[] = {"eos_token", "bos_token", "chat_template"};
    for (int k = 0; k < 3; k++) {
        const char *a = swift_tokenizer_config_str(json_tok, keys[k]);
        const char *b = swift_tokenizer_config_str(gguf_tok, keys[k]);
        if (a)
            assert_string_equal(a, b);
    }
    /* special tokens in text: the same ids, decoded the same */
    const char *text = "<|endoftext|>hi<|im_start|> <|begin_of_text|>x<|eot_id|>";
    struct swift_tok_state *sa = swift_tok_state_new(json_tok), *sb = swift_tok_state_new(gguf_tok);
    struct swift_tokens ta = {0}, tb = {0};
    assert_int_equal(swift_tokenizer_encode(sa, text, strlen(text), SWIFT_TOK_PARSE_SPECIAL, &ta),
                     0);
    assert_int_equal(swift_tokenizer_encode(sb, text, strlen(text), SWIFT_TOK_PARSE_SPECIAL, &tb),
                     0);
    assert_int_equal(ta.n, tb.n);
    assert_memory_equal(ta.ids, tb.ids, ta.n * sizeof(uint32_t));
    char *da, *db;
    size_t la, lb;
    assert_int_equal(swift_tokenizer_decode(json_tok, ta.ids, ta.n, 0, &da, &la), 0);
    assert_int_equal(swift_tokenizer_decode(gguf_tok, tb.ids, tb.n, 0, &db, &lb), 0);
    assert_int_equal(la, lb);
    assert_memory_equal(da, db, la);
    free(da);
    free(db);
    swift_tokens_release(&ta);
    swift_tokens_release(&tb);
    swift_tok_state_free(sa);
    swift_tok_state_free(sb);
    print_message("%s: GGUF tokenizer = tokenizer.json on %d vectors\n", name, n);
    swift_tokenizer_free(json_tok);
    swift_tokenizer_free(gguf_tok);
}

static void test_qwen3(void **state)
{
    (void)state;
    roundtrip("qwen3", "qwen3", "qwen2", "qwen2");
}
static void test_llama3(void **state)
{
    (void)state;
    roundtrip("llama3", "llama", "llama-bpe", "llama-bpe");
}
static void test_llama3_instruct(void **state)
{
    (void)state;
    roundtrip("llama3-instruct", "llama", "llama-bpe", "llama-bpe");
}
static void test_gpt2(void **state)
{
    (void)state;
    roundtrip("gpt2", "llama", "gpt-2", "gpt-2");
}

/* llama.cpp's own vocabulary file (written by gguf-py) against its vectors */
static void test_llamacpp_gpt2_gguf(void **state)
{
    (void)state;
    char path[1024], dir[1024];
    snprintf(path, sizeof(path), "%s/data/tokenizer-vectors/ggml-vocab-gpt-2.gguf", shared_dir());
    snprintf(dir, sizeof(dir), "%s/data/tokenizers/gpt2", shared_dir());
    if (!need_shared(path) || !need_shared(dir)) {
        skip();
        return;
    }
    struct swift_tokenizer *a, *b;
    assert_int_equal(swift_tokenizer_load(&a, dir), 0);
    assert_int_equal(swift_tokenizer_load(&b, path), 0);
    assert_int_equal(compare(a, b, "gpt-2", 0, 1), 46);
    swift_tokenizer_free(a);
    swift_tokenizer_free(b);
}

/* A GGUF without tokenizer keys, or with a tokenizer we do not build: a clear error. */
static void test_bad(void **state)
{
    (void)state;
    char tmpl[] = "/tmp/test_tokenizer_gguf.XXXXXX";
    assert_non_null(mkdtemp(tmpl));
    char path[1100];
    snprintf(path, sizeof(path), "%s/x.gguf", tmpl);
    for (int k = 0; k < 3; k++) {
        struct swift_gguf_writer w;
        swift_gguf_writer_init(&w);
        if (k >= 1)
            assert_int_equal(
                swift_gguf_set_str(&w, "tokenizer.ggml.model", k == 1 ? "llama" : "gpt2"), 0);
        if (k == 2) {
            const char *toks[] = {"a"};
            assert_int_equal(swift_gguf_set_str(&w, "tokenizer.ggml.pre", "falcon"), 0);
            assert_int_equal(swift_gguf_set_arr_str(&w, "tokenizer.ggml.tokens", toks, 1), 0);
        }
        assert_int_equal(swift_gguf_writer_begin(&w, path), 0);
        assert_int_equal(swift_gguf_writer_commit(&w), 0);
        swift_gguf_writer_release(&w);
        struct swift_tokenizer *t;
        assert_int_equal(swift_tokenizer_load(&t, path), -1);
        assert_null(t);
    }
    unlink(path);
    rmdir(tmpl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_qwen3),
        cmocka_unit_test(test_llama3),
        cmocka_unit_test(test_llama3_instruct),
        cmocka_unit_test(test_gpt2),
        cmocka_unit_test(test_llamacpp_gpt2_gguf),
        cmocka_unit_test(test_bad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
