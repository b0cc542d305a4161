/* shard: write/read round trip, index.json, and corrupt files named with their offset. */
#include "lib/formats/shard.h"

#include "lib/core/error.h"
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

static char msgbuf[8192];
static FILE *cap;
static void capture(void)
{
    memset(msgbuf, 0, sizeof(msgbuf));
    cap = fmemopen(msgbuf, sizeof(msgbuf), "w");
    swift_error_set_stream(cap);
}
static void release(void)
{
    fclose(cap);
    swift_error_set_stream(NULL);
}

static char dir[256];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/test_shard.%d", (int)getpid());
    swift_remove_tree(dir);
    return swift_mkdirs(dir, 0755);
}
static int teardown(void **state)
{
    (void)state;
    return swift_remove_tree(dir);
}

/* Writes two shards: shard-00000 with samples {3 tokens}, {packed 2+4}; shard-00001 with {5}. */
static void write_fixture(void)
{
    struct swift_shard_index ix;
    swift_shard_index_init(&ix);
    char *p0 = swift_path_join(dir, "shard-00000.bin");
    char *p1 = swift_path_join(dir, "shard-00001.bin");
    struct swift_shard_writer *w = swift_shard_writer_new(p0);
    assert_non_null(w);
    uint32_t a[] = {1, 2, 3};
    uint8_t am[] = {0, 1, 1};
    assert_int_equal(swift_shard_writer_add(w, a, am, 3, NULL, 0), 0);
    uint32_t b[] = {10, 11, 12, 13, 14, 15};
    uint8_t bm[] = {0, 1, 0, 0, 1, 1};
    uint32_t bd[] = {2, 4};
    assert_int_equal(swift_shard_writer_add(w, b, bm, 6, bd, 2), 0);
    uint32_t bad[] = {2, 5};
    capture();
    assert_int_equal(swift_shard_writer_add(w, b, bm, 6, bad, 2), -1);
    release();
    assert_non_null(strstr(msgbuf, "document lengths sum to 7, not 6"));
    assert_int_equal(swift_shard_writer_samples(w), 2);
    assert_int_equal(swift_shard_writer_tokens(w), 9);
    uint32_t crc0, crc1;
    assert_int_equal(swift_shard_writer_commit(w, &crc0), 0);
    w = swift_shard_writer_new(p1);
    uint32_t c[] = {7, 7, 7, 7, 99};
    assert_int_equal(swift_shard_writer_add(w, c, NULL, 5, NULL, 0), 0);
    assert_int_equal(swift_shard_writer_commit(w, &crc1), 0);
    assert_int_equal(swift_shard_index_add(&ix, "shard-00000.bin", 2, 9, crc0), 0);
    assert_int_equal(swift_shard_index_add(&ix, "shard-00001.bin", 1, 5, crc1), 0);
    ix.tokenizer_sha256 = strdup("ab12");
    ix.template_name = strdup("qwen3");
    ix.packing = strdup("binpack");
    ix.split = strdup("train");
    ix.max_length = 8;
    ix.vocab_size = 100;
    ix.samples = 3;
    ix.documents = 4;
    ix.tokens = 14;
    ix.trained_tokens = 10;
    ix.len_mean = 3.5;
    ix.len_min = 2;
    ix.len_max = 5;
    assert_int_equal(swift_shard_index_write(&ix, dir), 0);
    swift_shard_index_release(&ix);
    free(p0);
    free(p1);
}

static void test_round_trip(void **state)
{
    (void)state;
    write_fixture();
    struct swift_shards *s;
    assert_int_equal(swift_shards_open(&s, dir, 0), 0);
    assert_int_equal(swift_shards_count(s), 3);
    const struct swift_shard_index *ix = swift_shards_index(s);
    assert_string_equal(ix->template_name, "qwen3");
    assert_string_equal(ix->tokenizer_sha256, "ab12");
    assert_string_equal(ix->packing, "binpack");
    assert_int_equal(ix->max_length, 8);
    assert_int_equal(ix->trained_tokens, 10);
    assert_int_equal(ix->len_max, 5);
    assert_true(ix->len_mean == 3.5);
    assert_null(ix->loss);
    struct swift_sample x;
    assert_int_equal(swift_shards_get(s, 0, &x), 0);
    assert_int_equal(x.len, 3);
    assert_int_equal(x.ids[2], 3);
    assert_int_equal(x.mask[0], 0);
    assert_int_equal(x.n_docs, 1);
    assert_int_equal(x.doc_len[0], 3);
    assert_int_equal(swift_shards_get(s, 1, &x), 0);
    assert_int_equal(x.len, 6);
    assert_int_equal(x.ids[0], 10);
    assert_int_equal(x.ids[5], 15);
    assert_int_equal(x.mask[4], 1);
    assert_int_equal(x.n_docs, 2);
    assert_int_equal(x.doc_len[0], 2);
    assert_int_equal(x.doc_len[1], 4);
    assert_int_equal(swift_shards_get(s, 2, &x), 0);
    assert_int_equal(x.len, 5);
    assert_int_equal(x.ids[4], 99);
    assert_int_equal(x.mask[4], 1);
    capture();
    assert_int_equal(swift_shards_get(s, 3, &x), -1);
    release();
    assert_non_null(strstr(msgbuf, "sample 3 out of range (3 samples)"));
    swift_shards_close(s);
}

/* Corrupt byte `off` of shard-00000 (xor), expect `want` in the message. */
static void corrupt_expect(long off, unsigned char x, const char *want, long truncate_to)
{
    write_fixture();
    char *p0 = swift_path_join(dir, "shard-00000.bin");
    FILE *fp = fopen(p0, "r+b");
    assert_non_null(fp);
    if (off >= 0) {
        fseek(fp, off, SEEK_SET);
        int c = fgetc(fp);
        fseek(fp, off, SEEK_SET);
        fputc(c ^ x, fp);
    }
    fclose(fp);
    if (truncate_to >= 0)
        assert_int_equal(truncate(p0, truncate_to), 0);
    struct swift_shards *s = (void *)1;
    capture();
    assert_int_equal(swift_shards_open(&s, dir, 0), -1);
    release();
    assert_null(s);
    if (!strstr(msgbuf, want) || !strstr(msgbuf, p0))
        fail_msg("message '%s' lacks '%s' or the file name", msgbuf, want);
    free(p0);
}

static void test_corrupt(void **state)
{
    (void)state;
    corrupt_expect(0, 0x20, ": offset 0: bad magic", -1);
    corrupt_expect(8, 0x02, "offset 8: unsupported shard version 3", -1);
    corrupt_expect(12, 0x01, "offset 12: bad header size 65", -1);
    corrupt_expect(40, 0x08, "offset 40: payload size", -1);
    corrupt_expect(64 + 3 * 8 * 2 + 3 * 4 + 4 + 8, 0x01, "offset 64: payload CRC32 mismatch", -1);
    corrupt_expect(-1, 0, "(truncated or trailing data)", 100);
    corrupt_expect(-1, 0, "file too short", 3);
}

static void test_bad_magic_message_exact(void **state)
{
    (void)state;
    unsigned char buf[64] = "NOTSHARD";
    swift_set_progname("swift-x");
    capture();
    assert_int_equal(swift_shard_check(buf, sizeof(buf), "x.bin"), -1);
    release();
    assert_string_equal(msgbuf, "swift-x:x.bin: offset 0: bad magic (not a swift shard)\n");
}

static void test_index_errors(void **state)
{
    (void)state;
    struct swift_shard_index ix;
    const char *cases[][2] = {
        {"[]", "index must be a JSON object"},
        {"{\"format\":\"x\"}", "not a shard index"},
        {"{\"format\":\"swift-shards\",\"version\":2}", "unsupported index version 2"},
        {"{\"format\":\"swift-shards\",\"version\":1,\"max_length\":4,\"counts\":{\"samples\":1,"
         "\"tokens\":2},\"shards\":[{\"file\":\"../x\",\"samples\":1,\"tokens\":2}]}",
         "must be a plain name"},
        {"{\"format\":\"swift-shards\",\"version\":1,\"max_length\":4,\"counts\":{\"samples\":2,"
         "\"tokens\":2},\"shards\":[{\"file\":\"a.bin\",\"samples\":1,\"tokens\":2}]}",
         "shard list holds 1 samples / 2 tokens, counts say 2 / 2"},
        {"{\"format\":", "idx.json:1:"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        capture();
        assert_int_equal(swift_shard_index_parse(&ix, cases[i][0], strlen(cases[i][0]), "idx.json"),
                         -1);
        release();
        if (!strstr(msgbuf, cases[i][1]))
            fail_msg("case %zu: '%s' lacks '%s'", i, msgbuf, cases[i][1]);
    }
}

static void test_vocab_check(void **state)
{
    (void)state;
    write_fixture();
    /* rewrite index with a smaller vocab: id 99 is out of range */
    struct swift_shard_index ix;
    assert_int_equal(swift_shard_index_read(&ix, dir), 0);
    ix.vocab_size = 50;
    assert_int_equal(swift_shard_index_write(&ix, dir), 0);
    swift_shard_index_release(&ix);
    struct swift_shards *s;
    capture();
    assert_int_equal(swift_shards_open(&s, dir, 0), -1);
    release();
    assert_non_null(strstr(msgbuf, "token id 99 >= vocab size 50"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt, setup, teardown),
        cmocka_unit_test(test_bad_magic_message_exact),
        cmocka_unit_test(test_index_errors),
        cmocka_unit_test_setup_teardown(test_vocab_check, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
