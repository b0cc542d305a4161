/* tokenizer: id-for-id against llama.cpp's vectors (shared data) and the committed reference
 * fixtures made by PyPI `tokenizers` (tests/ref/gen_tokenizer.py); decode round trips. */
#include "lib/tokenizer.h"

#include "lib/error.h"
#include "lib/fileio.h"
#include "lib/pool.h"

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
    snprintf(ipath, sizeof(ipath), "%s/data/tokenizer-vectors/ggml-vocab-%s.gguf.inp",
             shared_dir(), vec);
    snprintf(opath, sizeof(opath), "%s/data/tokenizer-vectors/ggml-vocab-%s.gguf.out",
             shared_dir(), vec);
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
            print_message("%s #%d: text '%.*s'\n  want%s\n  got %s\n", vec, total,
                          (int)(e - p), p, ol, got);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vectors_qwen),
        cmocka_unit_test(test_vectors_llama3),
        cmocka_unit_test(test_vectors_gpt2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
