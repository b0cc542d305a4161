/* bpe_train: training is deterministic and its output is byte-identical to the committed
 * fixture (tests/fixtures/bpe/tokenizer.json, which tests/ref/gen_bpe_fixture.py loads with the
 * real Hugging Face `tokenizers` to produce reference encodings). Corpus: the first 100 kB of
 * tinyshakespeare from $SHARED. SWIFT_UPDATE_FIXTURES=1 rewrites the fixture. */
#include "lib/preprocess/bpe_train.h"
#include "lib/core/fileio.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#ifndef FIXTURES
#define FIXTURES "tests/fixtures"
#endif

static const char *specials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", NULL};

static void test_byte_map(void **state)
{
    (void)state;
    assert_int_equal(swift_bpe_byte_to_unicode('A'), 'A');
    assert_int_equal(swift_bpe_byte_to_unicode(' '), 0x120);  /* 'Ġ' */
    assert_int_equal(swift_bpe_byte_to_unicode('\n'), 0x10A); /* 'Ċ' */
    assert_int_equal(swift_bpe_byte_to_unicode(0), 0x100);
    assert_int_equal(swift_bpe_byte_to_unicode(173), 0x143);
}

static void test_matches_fixture(void **state)
{
    (void)state;
    const char *shared = getenv("SHARED") ? getenv("SHARED") : "../shared";
    char corpus[4096];
    snprintf(corpus, sizeof(corpus), "%s/data/datasets/tinyshakespeare/input.txt", shared);
    if (access(corpus, R_OK)) {
        if (getenv("CI") && !strcmp(getenv("CI"), "true"))
            fail_msg("missing shared data: %s", corpus);
        skip();
    }
    char *text;
    size_t len;
    assert_int_equal(swift_read_file(corpus, 2 << 20, &text, &len), 0);
    if (len > 100000)
        len = 100000;
    char dir[] = "/tmp/swift-bpe-XXXXXX";
    assert_non_null(mkdtemp(dir));
    struct swift_bpe_train_opts o = {.vocab_size = 512,
                                     .specials = specials,
                                     .eos_token = "<|im_end|>",
                                     .pad_token = "<|endoftext|>"};
    assert_int_equal(swift_bpe_train(text, len, dir, &o), 0);
    free(text);
    char *got_path = swift_path_join(dir, "tokenizer.json"), *got, *want;
    size_t glen, wlen;
    assert_int_equal(swift_read_file(got_path, 64 << 20, &got, &glen), 0);
    const char *fixture = FIXTURES "/bpe/tokenizer.json";
    if (getenv("SWIFT_UPDATE_FIXTURES"))
        assert_int_equal(swift_atomic_write(fixture, got, glen), 0);
    assert_int_equal(swift_read_file(fixture, 64 << 20, &want, &wlen), 0);
    assert_int_equal(glen, wlen);
    assert_memory_equal(got, want, glen);
    free(got);
    free(want);
    free(got_path);
    swift_remove_tree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_byte_map),
        cmocka_unit_test(test_matches_fixture),
    };
    return cmocka_run_group_tests_name("bpe_train", tests, NULL, NULL);
}
