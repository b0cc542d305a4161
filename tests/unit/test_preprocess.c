/* preprocess: shards built from a real dataset read back through the trainer's API; packing
 * keeps every document intact and within max_length. */
#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/preprocess/preprocess.h"
#include "lib/formats/shard.h"
#include "lib/preprocess/template.h"

#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static char dir[256], tokdir[1024], data[512], lfdir[1024];

static int setup(void **state)
{
    (void)state;
    const char *sh = getenv("SHARED") ? getenv("SHARED") : "../shared";
    snprintf(tokdir, sizeof(tokdir), "%s/data/tokenizers/qwen3", sh);
    snprintf(lfdir, sizeof(lfdir), "%s/data/datasets/llama-factory-demo", sh);
    char src[1024];
    snprintf(src, sizeof(src), "%s/data/datasets/gsm8k/test.jsonl", sh);
    snprintf(dir, sizeof(dir), "/tmp/test_preprocess.%d", (int)getpid());
    swift_remove_tree(dir);
    swift_mkdirs(dir, 0755);
    FILE *in = fopen(src, "r");
    if (!in)
        return 0; /* the test skips */
    snprintf(data, sizeof(data), "%s/g.jsonl", dir);
    FILE *out = fopen(data, "w");
    char *line = NULL;
    size_t cap = 0;
    for (int i = 0; i < 200 && getline(&line, &cap, in) > 0; i++)
        fputs(line, out);
    free(line);
    fclose(in);
    fclose(out);
    return 0;
}
static int teardown(void **state)
{
    (void)state;
    return swift_remove_tree(dir);
}

static int build(const char *name, int packing, int threads)
{
    char *out = swift_path_join(dir, name);
    char *inputs[] = {data};
    struct swift_preprocess_opts o = {.mode = SWIFT_PP_BUILD,
                                      .tokenizer = tokdir,
                                      .output = out,
                                      .inputs = inputs,
                                      .ninputs = 1,
                                      .max_length = 512,
                                      .loss = SWIFT_LOSS_DEFAULT,
                                      .packing = packing,
                                      .seed = 42,
                                      .threads = threads,
                                      .shard_tokens = 1 << 24};
    fflush(stdout);
    int saved = dup(1), nul = open("/dev/null", O_WRONLY);
    dup2(nul, 1);
    swift_set_quiet(1);
    int rc = swift_preprocess_run(&o);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    close(nul);
    swift_set_quiet(0);
    free(out);
    return rc;
}

struct doc {
    const uint32_t *ids;
    const uint8_t *mask;
    uint32_t len;
};
static int cmp_doc(const void *a, const void *b)
{
    const struct doc *x = a, *y = b;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    int c = memcmp(x->ids, y->ids, x->len * sizeof(uint32_t));
    return c ? c : memcmp(x->mask, y->mask, x->len);
}

static size_t collect(struct swift_shards *s, struct doc *docs, uint64_t max)
{
    size_t n = 0;
    for (uint64_t i = 0; i < swift_shards_count(s); i++) {
        struct swift_sample x;
        assert_int_equal(swift_shards_get(s, i, &x), 0);
        assert_true(x.len <= max);
        uint32_t off = 0;
        for (uint32_t d = 0; d < x.n_docs; d++) {
            docs[n++] = (struct doc){x.ids + off, x.mask + off, x.doc_len[d]};
            off += x.doc_len[d];
        }
        assert_int_equal(off, x.len);
    }
    return n;
}

static void test_packing_keeps_documents(void **state)
{
    (void)state;
    if (access(data, R_OK) != 0 || access(tokdir, R_OK) != 0) {
        if (getenv("CI") && !strcmp(getenv("CI"), "true"))
            fail_msg("shared data missing");
        skip();
    }
    assert_int_equal(build("plain", SWIFT_PACK_NONE, 1), 0);
    assert_int_equal(build("packed", SWIFT_PACK_BINPACK, 2), 0);
    assert_int_equal(build("seq", SWIFT_PACK_SEQUENTIAL, 2), 0);
    char *pa = swift_path_join(dir, "plain"), *pb = swift_path_join(dir, "packed"),
         *pc = swift_path_join(dir, "seq");
    struct swift_shards *a, *b, *c;
    assert_int_equal(swift_shards_open(&a, pa, 0), 0);
    assert_int_equal(swift_shards_open(&b, pb, 0), 0);
    assert_int_equal(swift_shards_open(&c, pc, 0), 0);
    const struct swift_shard_index *ia = swift_shards_index(a), *ib = swift_shards_index(b);
    assert_int_equal(swift_shards_count(a), 200);
    assert_int_equal(ia->documents, 200);
    assert_int_equal(ib->documents, 200);
    assert_true(swift_shards_count(b) < 200);
    assert_int_equal(ia->tokens, ib->tokens);
    assert_int_equal(ia->trained_tokens, ib->trained_tokens);
    assert_true(ib->packing_efficiency > 0.9 && ib->packing_efficiency <= 1.0);
    assert_string_equal(ib->packing, "binpack");
    assert_string_equal(ia->template_name, "qwen3");
    /* the first gsm8k sample: starts with <|im_start|>user, ends with <|im_end|>\n, and the
     * mask covers the answer only */
    struct swift_sample x;
    swift_shards_get(a, 0, &x);
    assert_int_equal(x.ids[0], 151644);
    assert_int_equal(x.ids[x.len - 2], 151645);
    assert_int_equal(x.mask[0], 0);
    assert_int_equal(x.mask[x.len - 2], 1);
    assert_int_equal(x.mask[x.len - 1], 0);
    struct doc *da = calloc(200, sizeof(*da)), *db = calloc(200, sizeof(*db)),
               *dc = calloc(200, sizeof(*dc));
    assert_int_equal(collect(a, da, 512), 200);
    assert_int_equal(collect(b, db, 512), 200);
    assert_int_equal(collect(c, dc, 512), 200);
    /* sequential packing keeps the input order */
    for (int i = 0; i < 200; i++)
        assert_int_equal(cmp_doc(&da[i], &dc[i]), 0);
    qsort(da, 200, sizeof(*da), cmp_doc);
    qsort(db, 200, sizeof(*db), cmp_doc);
    for (int i = 0; i < 200; i++)
        assert_int_equal(cmp_doc(&da[i], &db[i]), 0);
    free(da);
    free(db);
    free(dc);
    swift_shards_close(a);
    swift_shards_close(b);
    swift_shards_close(c);
    free(pa);
    free(pb);
    free(pc);
}

/* Build a shard directory `name` of a preference file (kind from the rows). */
static int build_pref(const char *name, const char *file, double val_ratio, int threads)
{
    char *out = swift_path_join(dir, name), *in = swift_path_join(lfdir, file);
    char *inputs[] = {in};
    struct swift_preprocess_opts o = {.mode = SWIFT_PP_BUILD,
                                      .tokenizer = tokdir,
                                      .output = out,
                                      .inputs = inputs,
                                      .ninputs = 1,
                                      .max_length = 8192,
                                      .kind = -1,
                                      .val_ratio = val_ratio,
                                      .seed = 42,
                                      .threads = threads,
                                      .shard_tokens = 1 << 16};
    fflush(stdout);
    int saved = dup(1), nul = open("/dev/null", O_WRONLY);
    dup2(nul, 1);
    swift_set_quiet(1);
    int rc = swift_preprocess_run(&o);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    close(nul);
    swift_set_quiet(0);
    free(out);
    free(in);
    return rc;
}

/* Every sample of a pair directory: two documents, the same prompt tokens (mask 0), then a
 * response whose mask ends on <|im_end|> and leaves the final "\n" out. Returns the samples. */
static uint64_t check_pairs(const char *name)
{
    char *p = swift_path_join(dir, name);
    struct swift_shards *s;
    assert_int_equal(swift_shards_open(&s, p, 0), 0);
    const struct swift_shard_index *ix = swift_shards_index(s);
    assert_string_equal(swift_shard_index_kind(ix), "pairs");
    assert_string_equal(ix->loss, "last_round");
    assert_int_equal(ix->documents, 2 * swift_shards_count(s));
    if (swift_shards_count(s) > 100) /* --shard-tokens 64K: pairs never straddle files */
        assert_true(ix->n_shards > 1);
    for (uint64_t i = 0; i < swift_shards_count(s); i++) {
        struct swift_sample x;
        assert_int_equal(swift_shards_get(s, i, &x), 0);
        assert_int_equal(x.n_docs, 2);
        assert_int_equal(x.label, 0);
        const uint32_t *c = x.ids, *r = x.ids + x.doc_len[0];
        const uint8_t *cm = x.mask, *rm = x.mask + x.doc_len[0];
        uint32_t pc = 0, pr = 0;
        while (pc < x.doc_len[0] && !cm[pc])
            pc++;
        while (pr < x.doc_len[1] && !rm[pr])
            pr++;
        assert_int_equal(pc, pr);
        assert_true(pc > 0 && pc < x.doc_len[0] && pr < x.doc_len[1]);
        assert_memory_equal(c, r, pc * sizeof(uint32_t));
        assert_int_equal(c[0], 151644); /* <|im_start|> */
        uint32_t n0 = x.doc_len[0], n1 = x.doc_len[1];
        assert_int_equal(c[n0 - 2], 151645);
        assert_int_equal(r[n1 - 2], 151645);
        assert_true(cm[n0 - 2] && !cm[n0 - 1] && rm[n1 - 2] && !rm[n1 - 1]);
        assert_true(x.len <= 2 * ix->max_length);
    }
    uint64_t n = swift_shards_count(s);
    swift_shards_close(s);
    free(p);
    return n;
}

static void test_pairs_and_kto(void **state)
{
    (void)state;
    char *src = swift_path_join(lfdir, "dpo_en_demo.json");
    int have = access(src, R_OK) == 0 && access(tokdir, R_OK) == 0;
    free(src);
    if (!have) {
        if (getenv("CI") && !strcmp(getenv("CI"), "true"))
            fail_msg("shared data missing");
        skip();
    }
    /* pairs, with a validation split: both directories hold pairs, 300 in all */
    assert_int_equal(build_pref("dpo", "dpo_en_demo.json", 0.1, 2), 0);
    uint64_t ntrain = check_pairs("dpo"), nval = check_pairs("dpo/val");
    assert_int_equal(nval, 30);
    assert_int_equal(ntrain + nval, 300);
    /* byte-identical with one thread */
    assert_int_equal(build_pref("dpo1", "dpo_en_demo.json", 0.1, 1), 0);
    char *a = swift_path_join(dir, "dpo/shard-00000.bin"),
         *b = swift_path_join(dir, "dpo1/shard-00000.bin");
    char *ta, *tb;
    size_t la, lb;
    assert_int_equal(swift_read_file(a, 1 << 26, &ta, &la), 0);
    assert_int_equal(swift_read_file(b, 1 << 26, &tb, &lb), 0);
    assert_int_equal(la, lb);
    assert_memory_equal(ta, tb, la);
    free(ta);
    free(tb);
    free(a);
    free(b);
    /* KTO: the file's labels, in order, are the samples' labels */
    assert_int_equal(build_pref("kto", "kto_en_demo.json", 0, 2), 0);
    char *kp = swift_path_join(dir, "kto"), *kf = swift_path_join(lfdir, "kto_en_demo.json");
    char *text;
    size_t len;
    assert_int_equal(swift_read_file(kf, 1 << 26, &text, &len), 0);
    struct swift_shards *s;
    assert_int_equal(swift_shards_open(&s, kp, 0), 0);
    assert_string_equal(swift_shard_index_kind(swift_shards_index(s)), "kto");
    assert_int_equal(swift_shards_count(s), 300);
    const char *q = text;
    uint64_t ntrue = 0;
    for (uint64_t i = 0; i < 300; i++) {
        const char *t = strstr(q, "\"label\": true"), *f = strstr(q, "\"label\": false");
        assert_true(t || f);
        int want = t && (!f || t < f);
        q = want ? t + 1 : f + 1;
        struct swift_sample x;
        assert_int_equal(swift_shards_get(s, i, &x), 0);
        assert_int_equal(x.n_docs, 1);
        assert_int_equal(x.label, want);
        ntrue += (uint64_t)want;
    }
    assert_true(ntrue > 0 && ntrue < 300);
    swift_shards_close(s);
    free(text);
    free(kp);
    free(kf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_packing_keeps_documents, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pairs_and_kto, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
