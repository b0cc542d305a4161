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

static char dir[256], tokdir[1024], data[512];

static int setup(void **state)
{
    (void)state;
    const char *sh = getenv("SHARED") ? getenv("SHARED") : "../shared";
    snprintf(tokdir, sizeof(tokdir), "%s/data/tokenizers/qwen3", sh);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_packing_keeps_documents, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
