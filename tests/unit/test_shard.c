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
#include <zlib.h>

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
        {"{\"format\":\"swift-shards\",\"version\":4}", "unsupported index version 4"},
        {"{\"format\":\"swift-shards\",\"version\":3,\"max_length\":4}",
         "index version 3 needs an \"images\" object"},
        {"{\"format\":\"swift-shards\",\"version\":1,\"max_length\":4,\"images\":{}}",
         "\"images\" needs index version 3"},
        {"{\"format\":\"swift-shards\",\"version\":3,\"max_length\":4,\"images\":{\"cache\":"
         "\"/etc\"}}",
         "must be \"images\" or \"../images\""},
        {"{\"format\":\"swift-shards\",\"version\":2,\"kind\":\"grpo\"}",
         "unknown \"kind\" 'grpo' (this build reads sft, pairs, kto and prompts)"},
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

/* One shard "shard-00000.bin" of the given samples (two tokens per document) and its index of
 * `kind` (NULL: SFT). labels NULL: no label section. */
static void write_kind(const char *kind, const uint32_t *ndocs, const uint8_t *labels, int n)
{
    struct swift_shard_index ix;
    swift_shard_index_init(&ix);
    char *p0 = swift_path_join(dir, "shard-00000.bin");
    struct swift_shard_writer *w = swift_shard_writer_new(p0);
    uint32_t ids[4] = {1, 2, 3, 4}, dl[2] = {2, 2};
    uint8_t mask[4] = {0, 1, 0, 1};
    uint64_t tokens = 0;
    for (int i = 0; i < n; i++) {
        uint32_t nt = 2 * ndocs[i];
        if (labels)
            assert_int_equal(
                swift_shard_writer_add_labeled(w, ids, mask, nt, dl, ndocs[i], labels[i]), 0);
        else
            assert_int_equal(swift_shard_writer_add(w, ids, mask, nt, dl, ndocs[i]), 0);
        tokens += nt;
    }
    uint32_t crc;
    assert_int_equal(swift_shard_writer_commit(w, &crc), 0);
    assert_int_equal(swift_shard_index_add(&ix, "shard-00000.bin", (uint64_t)n, tokens, crc), 0);
    ix.kind = kind ? strdup(kind) : NULL;
    ix.max_length = 2;
    ix.samples = (uint64_t)n;
    ix.tokens = tokens;
    assert_int_equal(swift_shard_index_write(&ix, dir), 0);
    swift_shard_index_release(&ix);
    free(p0);
}

static void open_expect(const char *want)
{
    struct swift_shards *s = NULL;
    capture();
    assert_int_equal(swift_shards_open(&s, dir, 0), -1);
    release();
    if (!strstr(msgbuf, want))
        fail_msg("message '%s' lacks '%s'", msgbuf, want);
}

/* Pairs: two documents a sample, index version 2 with "kind"; KTO: the label section (file
 * version 2) read back per sample; SFT keeps version 1 and no "kind"; a mismatch is refused. */
static void test_kinds_and_labels(void **state)
{
    (void)state;
    uint32_t two[3] = {2, 2, 2}, one[3] = {1, 1, 1};
    uint8_t lab[3] = {1, 0, 1};
    char *idx = swift_path_join(dir, "index.json");
    char *bin = swift_path_join(dir, "shard-00000.bin");
    char *text;
    size_t len;

    write_kind("pairs", two, NULL, 3);
    assert_int_equal(swift_read_file(idx, 1 << 20, &text, &len), 0);
    assert_non_null(strstr(text, "\"version\": 2,\n  \"kind\": \"pairs\""));
    free(text);
    struct swift_shards *s;
    assert_int_equal(swift_shards_open(&s, dir, 0), 0);
    const struct swift_shard_index *ix = swift_shards_index(s);
    assert_string_equal(swift_shard_index_kind(ix), "pairs");
    assert_int_equal(swift_shard_index_check_kind(ix, "pairs", "--rlhf dpo", "d"), 0);
    capture();
    assert_int_equal(swift_shard_index_check_kind(ix, "sft", "SFT", "d"), -1);
    release();
    assert_non_null(strstr(msgbuf,
                           "d/index.json: the shards hold preference pairs (kind \"pairs\"), SFT "
                           "needs SFT samples (make them with swift-preprocess --kind sft)"));
    struct swift_sample x;
    assert_int_equal(swift_shards_get(s, 2, &x), 0);
    assert_int_equal(x.n_docs, 2);
    assert_int_equal(x.label, 0);
    swift_shards_close(s);

    write_kind("pairs", one, NULL, 3); /* a sample of one document under kind "pairs" */
    open_expect("sample 0 is not a pair (kind \"pairs\" needs two documents)");

    write_kind("kto", one, lab, 3);
    assert_int_equal(swift_read_file(bin, 1 << 20, &text, &len), 0);
    assert_int_equal((unsigned char)text[8], SWIFT_SHARD_VERSION_LABELS);
    assert_int_equal((unsigned char)text[52], SWIFT_SHARD_FLAG_LABELS);
    free(text);
    assert_int_equal(swift_shards_open(&s, dir, 0), 0);
    assert_string_equal(swift_shard_index_kind(swift_shards_index(s)), "kto");
    for (int i = 0; i < 3; i++) {
        assert_int_equal(swift_shards_get(s, (uint64_t)i, &x), 0);
        assert_int_equal(x.label, lab[i]);
        assert_int_equal(x.len, 2);
    }
    capture();
    assert_int_equal(
        swift_shard_index_check_kind(swift_shards_index(s), "pairs", "--rlhf dpo", "d"), -1);
    release();
    assert_non_null(strstr(msgbuf,
                           "hold KTO's labelled samples (kind \"kto\"), --rlhf dpo needs "
                           "preference pairs (make them with swift-preprocess --kind pairs)"));
    swift_shards_close(s);

    write_kind(NULL, one, lab, 3); /* labels in an SFT directory */
    open_expect("offset 8: has the label section, but index.json's kind is \"sft\"");
    write_kind("kto", one, NULL, 3);
    open_expect("offset 8: lacks the label section, but index.json's kind is \"kto\"");

    write_kind(NULL, one, NULL, 3); /* SFT: as before (version 1 everywhere, no "kind") */
    assert_int_equal(swift_read_file(idx, 1 << 20, &text, &len), 0);
    assert_null(strstr(text, "kind"));
    assert_non_null(strstr(text, "\"version\": 1,"));
    free(text);
    assert_int_equal(swift_read_file(bin, 1 << 20, &text, &len), 0);
    assert_int_equal(text[8], 1);
    free(text);

    /* a labelled and an unlabelled sample do not mix in one file */
    struct swift_shard_writer *w = swift_shard_writer_new(bin);
    uint32_t ids[2] = {1, 2};
    assert_int_equal(swift_shard_writer_add(w, ids, NULL, 2, NULL, 0), 0);
    capture();
    assert_int_equal(swift_shard_writer_add_labeled(w, ids, NULL, 2, NULL, 0, 1), -1);
    release();
    assert_non_null(strstr(msgbuf, "a labelled sample after 1 unlabelled ones"));
    swift_shard_writer_free(w);
    free(idx);
    free(bin);
}

static void fix_crc(unsigned char *b, size_t len)
{
    uLong c = crc32(crc32(0L, Z_NULL, 0), b + 64, (uInt)(len - 64));
    for (int i = 0; i < 4; i++)
        b[48 + i] = (unsigned char)(c >> (8 * i));
}

/* A label byte other than 0/1 and unknown flags in a version-2 file are named with offsets. */
static void test_label_corrupt(void **state)
{
    (void)state;
    uint32_t one[2] = {1, 1};
    uint8_t lab[2] = {1, 0};
    write_kind("kto", one, lab, 2);
    char *bin = swift_path_join(dir, "shard-00000.bin");
    unsigned char *buf;
    size_t len;
    assert_int_equal(swift_read_file(bin, 1 << 20, (char **)&buf, &len), 0);
    /* layout: 64 header, 3x8 sample_tok, 3x8 sample_doc, 2x4 doc_len -> ids at 120, 4x4 ids,
     * mask at 136 (4), labels at 140 */
    assert_int_equal(buf[140], 1);
    buf[140] = 7;
    fix_crc(buf, len);
    capture();
    assert_int_equal(swift_shard_check(buf, len, "k.bin"), -1);
    release();
    assert_non_null(strstr(msgbuf, "offset 140: label 7 of sample 0 is not 0 or 1"));
    buf[140] = 1;
    buf[52] = 5; /* bit 2 is nobody's (bit 1, 3 with labels, is the metadata section's) */
    fix_crc(buf, len);
    capture();
    assert_int_equal(swift_shard_check(buf, len, "k.bin"), -1);
    release();
    assert_non_null(strstr(msgbuf, "offset 52: unknown flags 00000005 for version 2"));
    buf[52] = 3; /* says metadata follows the labels, but the payload ends there */
    fix_crc(buf, len);
    capture();
    assert_int_equal(swift_shard_check(buf, len, "k.bin"), -1);
    release();
    assert_non_null(strstr(msgbuf, "offset 40: payload size 80 does not match the counts (104)"));
    free(buf);
    free(bin);
}

/* One shard of prompt samples (kind "prompts" unless `kind` says otherwise): sample i has
 * ndocs[i] documents of two tokens and metadata metas[i] (NULL metas: no metadata section);
 * labels non-NULL: the label section too. */
static void write_prompts(const char *kind, const uint32_t *ndocs, const char *const *metas,
                          const uint8_t *labels, int n)
{
    struct swift_shard_index ix;
    swift_shard_index_init(&ix);
    char *p0 = swift_path_join(dir, "shard-00000.bin");
    struct swift_shard_writer *w = swift_shard_writer_new(p0);
    uint32_t ids[4] = {5, 6, 7, 8}, dl[2] = {2, 2};
    uint8_t mask[4] = {0, 0, 0, 0};
    uint64_t tokens = 0;
    for (int i = 0; i < n; i++) {
        uint32_t nt = 2 * ndocs[i];
        const char *m = metas ? metas[i] : NULL;
        uint32_t ml = m ? (uint32_t)strlen(m) : 0;
        int rc;
        if (m && labels)
            rc = swift_shard_writer_add_labeled_meta(
                w, ids, mask, nt, dl, ndocs[i], labels[i], m, ml);
        else if (m)
            rc = swift_shard_writer_add_meta(w, ids, mask, nt, dl, ndocs[i], m, ml);
        else
            rc = swift_shard_writer_add(w, ids, mask, nt, dl, ndocs[i]);
        assert_int_equal(rc, 0);
        tokens += nt;
    }
    uint32_t crc;
    assert_int_equal(swift_shard_writer_commit(w, &crc), 0);
    assert_int_equal(swift_shard_index_add(&ix, "shard-00000.bin", (uint64_t)n, tokens, crc), 0);
    ix.kind = kind ? strdup(kind) : NULL;
    ix.max_length = 4;
    ix.samples = (uint64_t)n;
    ix.tokens = tokens;
    assert_int_equal(swift_shard_index_write(&ix, dir), 0);
    swift_shard_index_release(&ix);
    free(p0);
}

/* Kind "prompts": the metadata section (file version 2, flag bit 1) read back per sample, index
 * version 2 with "kind"; what an older reader checks refuses the file; kinds checked both ways. */
static void test_prompts_meta(void **state)
{
    (void)state;
    uint32_t one[3] = {1, 1, 1}, two[3] = {1, 2, 1};
    const char *metas[3] = {"{\"prompt\":\"What is 3 + 4?\",\"answer\":\"#### 7\"}",
                            "",
                            "{\"prompt\":\"\xc3\xa9t\xc3\xa9\",\"n\":[1,2]}"};
    char *idx = swift_path_join(dir, "index.json");
    char *bin = swift_path_join(dir, "shard-00000.bin");
    char *text;
    size_t len;

    write_prompts("prompts", one, metas, NULL, 3);
    assert_int_equal(swift_read_file(idx, 1 << 20, &text, &len), 0);
    assert_non_null(strstr(text, "\"version\": 2,\n  \"kind\": \"prompts\""));
    free(text);
    assert_int_equal(swift_read_file(bin, 1 << 20, &text, &len), 0);
    /* what this build's predecessors check: version 1 only, or version 2 with flags == labels */
    assert_int_equal((unsigned char)text[8], SWIFT_SHARD_VERSION_LABELS);
    assert_int_equal((unsigned char)text[52], SWIFT_SHARD_FLAG_META);
    assert_int_not_equal((unsigned char)text[52], SWIFT_SHARD_FLAG_LABELS);
    free(text);
    struct swift_shards *s;
    assert_int_equal(swift_shards_open(&s, dir, 0), 0);
    const struct swift_shard_index *ix = swift_shards_index(s);
    assert_string_equal(swift_shard_index_kind(ix), "prompts");
    assert_int_equal(swift_shard_index_check_kind(ix, "prompts", "--rlhf grpo", "d"), 0);
    struct swift_sample x;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(swift_shards_get(s, (uint64_t)i, &x), 0);
        assert_int_equal(x.meta_len, strlen(metas[i]));
        assert_non_null(x.meta);
        assert_memory_equal(x.meta, metas[i], x.meta_len);
        assert_int_equal(x.n_docs, 1);
        assert_int_equal(x.len, 2);
        assert_int_equal(x.label, 0);
    }
    capture();
    assert_int_equal(swift_shard_index_check_kind(ix, "pairs", "--rlhf dpo", "d"), -1);
    release();
    assert_non_null(strstr(msgbuf,
                           "d/index.json: the shards hold prompts (GRPO) (kind \"prompts\"), "
                           "--rlhf dpo needs preference pairs (make them with swift-preprocess "
                           "--kind pairs)"));
    swift_shards_close(s);

    write_kind(NULL, one, NULL, 3); /* SFT data for GRPO: the message names --kind prompts */
    assert_int_equal(swift_shards_open(&s, dir, 0), 0);
    assert_int_equal(swift_shards_get(s, 0, &x), 0);
    assert_null(x.meta);
    assert_int_equal(x.meta_len, 0);
    capture();
    assert_int_equal(
        swift_shard_index_check_kind(swift_shards_index(s), "prompts", "--rlhf grpo", "d"), -1);
    release();
    assert_non_null(strstr(msgbuf,
                           "the shards hold SFT samples (kind \"sft\"), --rlhf grpo needs prompts "
                           "(GRPO) (make them with swift-preprocess --kind prompts)"));
    swift_shards_close(s);

    write_prompts(NULL, one, metas, NULL, 3); /* metadata in an SFT directory */
    open_expect("offset 8: has the metadata section, but index.json's kind is \"sft\"");
    write_prompts("prompts", one, NULL, NULL, 3);
    open_expect("offset 8: lacks the metadata section, but index.json's kind is \"prompts\"");
    write_prompts("prompts", two, metas, NULL, 3);
    open_expect("offset 104: sample 1 is not one document (kind \"prompts\" needs one)");

    /* both sections: labels, then metadata (flags 3); kto refuses the metadata */
    uint8_t lab[3] = {1, 0, 1};
    write_prompts("kto", one, metas, lab, 3);
    assert_int_equal(swift_read_file(bin, 1 << 20, &text, &len), 0);
    assert_int_equal((unsigned char)text[52], SWIFT_SHARD_FLAG_LABELS | SWIFT_SHARD_FLAG_META);
    assert_int_equal(swift_shard_check((unsigned char *)text, len, "b.bin"), 0);
    free(text);
    open_expect("offset 8: has the metadata section, but index.json's kind is \"kto\"");
    free(idx);
    free(bin);
}

/* The writer keeps a file's samples all with metadata or all without, and metadata an object. */
static void test_meta_writer_rules(void **state)
{
    (void)state;
    char *bin = swift_path_join(dir, "w.bin");
    uint32_t ids[2] = {1, 2};
    struct swift_shard_writer *w = swift_shard_writer_new(bin);
    assert_int_equal(swift_shard_writer_add(w, ids, NULL, 2, NULL, 0), 0);
    capture();
    assert_int_equal(swift_shard_writer_add_meta(w, ids, NULL, 2, NULL, 0, "{}", 2), -1);
    release();
    assert_non_null(strstr(msgbuf, "a sample with metadata after 1 without"));
    swift_shard_writer_free(w);
    w = swift_shard_writer_new(bin);
    assert_int_equal(swift_shard_writer_add_meta(w, ids, NULL, 2, NULL, 0, "{}", 2), 0);
    capture();
    assert_int_equal(swift_shard_writer_add(w, ids, NULL, 2, NULL, 0), -1);
    release();
    assert_non_null(strstr(msgbuf, "a sample without metadata after samples with it"));
    capture();
    assert_int_equal(swift_shard_writer_add_meta(w, ids, NULL, 2, NULL, 0, "[1]", 3), -1);
    release();
    assert_non_null(strstr(msgbuf, "must be a JSON object's text without NUL bytes"));
    capture();
    assert_int_equal(swift_shard_writer_add_meta(w, ids, NULL, 2, NULL, 0, "{\0}", 3), -1);
    release();
    assert_non_null(strstr(msgbuf, "without NUL bytes"));
    assert_int_equal(swift_shard_writer_samples(w), 1);
    swift_shard_writer_free(w);
    free(bin);
}

/* Corrupt metadata sections are named with the byte offset (CRC fixed so the structure is what
 * fails). Layout of two samples of two tokens: 64 header, 3x8 sample_tok, 3x8 sample_doc, 2x4
 * doc_len -> ids at 120 (4x4), mask at 136 (4), meta_off at 144 (3x8), meta at 168. */
static void test_meta_corrupt(void **state)
{
    (void)state;
    uint32_t one[2] = {1, 1};
    const char *metas[2] = {"{\"a\":1}", "{}"}; /* 7 + 2 bytes: the file ends at 184 */
    write_prompts("prompts", one, metas, NULL, 2);
    char *bin = swift_path_join(dir, "shard-00000.bin");
    unsigned char *buf;
    size_t len;
    assert_int_equal(swift_read_file(bin, 1 << 20, (char **)&buf, &len), 0);
    assert_int_equal(len, 184);
    assert_int_equal(buf[152], 7); /* meta_off[1] */
    assert_int_equal(buf[160], 9); /* meta_off[2] */
    assert_int_equal(buf[168], '{');
    static const struct {
        long off;
        unsigned char val;
        const char *want;
    } cases[] = {
        {152, 10, "offset 152: bad metadata offsets for sample 0"},
        {144, 1, "offset 144: first metadata offset is not 0"},
        {160, 17, "offset 160: metadata size 17 does not fit the payload (120 bytes)"},
        {160, 9, "offset 168: metadata of sample 0 is not a JSON object's text"},
        {170, 0, "offset 168: metadata of sample 0 is not a JSON object's text (or holds a NUL"},
        {175, '}', "offset 175: metadata of sample 1 is not a JSON object's text"},
        {52, 6, "offset 52: unknown flags 00000006 for version 2"},
        {52, 0, "offset 52: unknown flags 00000000 for version 2"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        unsigned char *b = malloc(len);
        memcpy(b, buf, len);
        b[cases[i].off] = cases[i].val;
        if (cases[i].off == 152)
            b[160] = 9; /* meta_off = {0, 10, 9} */
        if (cases[i].off == 160 && cases[i].val == 9)
            b[152] = 3; /* meta_off = {0, 3, 9}: sample 0 is "{\"a" */
        fix_crc(b, len);
        capture();
        assert_int_equal(swift_shard_check(b, len, "m.bin"), -1);
        release();
        if (!strstr(msgbuf, cases[i].want) || !strstr(msgbuf, "m.bin"))
            fail_msg("case %zu: '%s' lacks '%s'", i, msgbuf, cases[i].want);
        free(b);
    }
    capture();
    assert_int_equal(swift_shard_check(buf, len - 8, "m.bin"), -1);
    release();
    assert_non_null(strstr(msgbuf, "offset 176: file size 176, header says 184 (truncated"));
    assert_int_equal(swift_shard_check(buf, len, "m.bin"), 0);
    free(buf);
    free(bin);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt, setup, teardown),
        cmocka_unit_test(test_bad_magic_message_exact),
        cmocka_unit_test(test_index_errors),
        cmocka_unit_test_setup_teardown(test_vocab_check, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kinds_and_labels, setup, teardown),
        cmocka_unit_test_setup_teardown(test_label_corrupt, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prompts_meta, setup, teardown),
        cmocka_unit_test_setup_teardown(test_meta_writer_rules, setup, teardown),
        cmocka_unit_test_setup_teardown(test_meta_corrupt, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
