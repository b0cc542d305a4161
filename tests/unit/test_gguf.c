/* gguf: writer → reader round trip of every value type, alignment, bounds errors. */
#include "lib/core/error.h"
#include "lib/formats/gguf.h"

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
static FILE *capture(void)
{
    memset(msgbuf, 0, sizeof(msgbuf));
    FILE *fp = fmemopen(msgbuf, sizeof(msgbuf), "w");
    swift_error_set_stream(fp);
    return fp;
}
static void release(FILE *fp)
{
    fclose(fp);
    swift_error_set_stream(NULL);
}

static char *tmpfile_path(void)
{
    static char path[64];
    snprintf(path, sizeof(path), "/tmp/test_gguf_%d.gguf", (int)getpid());
    return path;
}

static int write_sample(const char *path, uint32_t align)
{
    struct swift_gguf_writer w;
    swift_gguf_writer_init(&w);
    if (align)
        assert_int_equal(swift_gguf_set_u32(&w, "general.alignment", align), 0);
    assert_int_equal(swift_gguf_set_str(&w, "general.architecture", "llama"), 0);
    assert_int_equal(swift_gguf_set_u32(&w, "llama.block_count", 2), 0);
    assert_int_equal(swift_gguf_set_f32(&w, "eps", 1e-5f), 0);
    assert_int_equal(swift_gguf_set_bool(&w, "flag", 1), 0);
    assert_int_equal(swift_gguf_set_i32(&w, "neg", -7), 0);
    const char *toks[] = {"a", "b c", "\xc4\xa0the"};
    assert_int_equal(swift_gguf_set_arr_str(&w, "tokens", toks, 3), 0);
    int32_t ty[] = {1, 3, 5};
    assert_int_equal(swift_gguf_set_arr_i32(&w, "types", ty, 3), 0);
    /* every scalar type, and a nested array */
    struct swift_gguf_value v = {.type = SWIFT_GGUF_U8, .v.u = 200};
    assert_int_equal(swift_gguf_set(&w, "u8", &v), 0);
    v = (struct swift_gguf_value){.type = SWIFT_GGUF_I8, .v.i = -100};
    assert_int_equal(swift_gguf_set(&w, "i8", &v), 0);
    v = (struct swift_gguf_value){.type = SWIFT_GGUF_U16, .v.u = 65000};
    assert_int_equal(swift_gguf_set(&w, "u16", &v), 0);
    v = (struct swift_gguf_value){.type = SWIFT_GGUF_I16, .v.i = -30000};
    assert_int_equal(swift_gguf_set(&w, "i16", &v), 0);
    v = (struct swift_gguf_value){.type = SWIFT_GGUF_U64, .v.u = 1ull << 40};
    assert_int_equal(swift_gguf_set(&w, "u64", &v), 0);
    v = (struct swift_gguf_value){.type = SWIFT_GGUF_I64, .v.i = -(1ll << 40)};
    assert_int_equal(swift_gguf_set(&w, "i64", &v), 0);
    v = (struct swift_gguf_value){.type = SWIFT_GGUF_F64, .v.f = 0.1};
    assert_int_equal(swift_gguf_set(&w, "f64", &v), 0);
    struct swift_gguf_value inner[2] = {{.type = SWIFT_GGUF_U32, .v.u = 1},
                                        {.type = SWIFT_GGUF_U32, .v.u = 2}};
    struct swift_gguf_value outer[1] = {{.type = SWIFT_GGUF_ARRAY}};
    outer[0].v.arr.elem_type = SWIFT_GGUF_U32;
    outer[0].v.arr.n = 2;
    outer[0].v.arr.items = inner;
    v = (struct swift_gguf_value){.type = SWIFT_GGUF_ARRAY};
    v.v.arr.elem_type = SWIFT_GGUF_ARRAY;
    v.v.arr.n = 1;
    v.v.arr.items = outer;
    assert_int_equal(swift_gguf_set(&w, "nested", &v), 0);
    assert_int_equal(swift_gguf_set_u32(&w, "llama.block_count", 3), 0); /* replaces */
    float a[6] = {1, 2, 3, 4, 5, 6};
    uint16_t h[32] = {0};
    assert_int_equal(swift_gguf_add_tensor(&w, "a", 2, (uint64_t[]){3, 2}, SWIFT_GGML_F32), 0);
    assert_int_equal(swift_gguf_add_tensor(&w, "h", 1, (uint64_t[]){32}, SWIFT_GGML_F16), 1);
    if (swift_gguf_writer_begin(&w, path) < 0)
        return -1;
    assert_int_equal(swift_gguf_writer_write_data(&w, a, sizeof(a)), 0);
    assert_int_equal(swift_gguf_writer_write_data(&w, h, sizeof(h)), 0);
    int rc = swift_gguf_writer_commit(&w);
    swift_gguf_writer_release(&w);
    return rc;
}

static void test_roundtrip(void **state)
{
    (void)state;
    const char *path = tmpfile_path();
    assert_int_equal(write_sample(path, 0), 0);
    struct swift_gguf *g;
    assert_int_equal(swift_gguf_open(path, &g), 0);
    assert_int_equal(g->version, 3);
    assert_int_equal(g->alignment, 32);
    assert_int_equal(g->n_kv, 15);
    assert_int_equal(g->n_tensors, 2);
    const struct swift_gguf_value *v = swift_gguf_get(g, "llama.block_count");
    assert_non_null(v);
    assert_int_equal(v->type, SWIFT_GGUF_U32);
    assert_int_equal(v->v.u, 3);
    assert_string_equal(g->kv[1].key, "llama.block_count"); /* order of first setting */
    v = swift_gguf_get(g, "tokens");
    assert_int_equal(v->v.arr.n, 3);
    assert_string_equal(v->v.arr.items[2].v.str.s, "\xc4\xa0the");
    assert_int_equal(swift_gguf_get(g, "i8")->v.i, -100);
    assert_int_equal(swift_gguf_get(g, "i16")->v.i, -30000);
    assert_int_equal(swift_gguf_get(g, "u16")->v.u, 65000);
    assert_int_equal(swift_gguf_get(g, "i64")->v.i, -(1ll << 40));
    assert_true(swift_gguf_get(g, "f64")->v.f == 0.1);
    assert_true(swift_gguf_get(g, "eps")->v.f == (double)1e-5f);
    v = swift_gguf_get(g, "nested");
    assert_int_equal(v->v.arr.items[0].v.arr.items[1].v.u, 2);
    long i = swift_gguf_find_tensor(g, "a");
    assert_int_equal(i, 0);
    assert_int_equal(g->tensors[0].ne[0], 3);
    assert_int_equal(g->tensors[0].ne[1], 2);
    assert_int_equal(g->tensors[0].nbytes, 24);
    assert_int_equal(g->tensors[1].offset, 32);
    assert_int_equal(g->data_offset % 32, 0);
    assert_true(((const float *)g->tensors[0].data)[5] == 6.0f);
    swift_gguf_free(g);

    /* alignment from general.alignment */
    assert_int_equal(write_sample(path, 64), 0);
    assert_int_equal(swift_gguf_open(path, &g), 0);
    assert_int_equal(g->alignment, 64);
    assert_int_equal(g->tensors[1].offset, 64);
    assert_int_equal(g->data_offset % 64, 0);
    swift_gguf_free(g);
    unlink(path);
}

static void test_bad_input(void **state)
{
    (void)state;
    const char *path = tmpfile_path();
    assert_int_equal(write_sample(path, 0), 0);
    char *buf;
    size_t len;
    FILE *fp = fopen(path, "rb");
    fseek(fp, 0, SEEK_END);
    len = (size_t)ftell(fp);
    rewind(fp);
    buf = malloc(len);
    assert_int_equal(fread(buf, 1, len, fp), len);
    fclose(fp);
    unlink(path);
    struct swift_gguf *g;
    /* every truncation fails cleanly */
    FILE *cap = capture();
    for (size_t n = 0; n < len; n++)
        assert_int_equal(swift_gguf_parse(buf, n, "t.gguf", &g), -1);
    release(cap);
    cap = capture();
    assert_int_equal(swift_gguf_parse(buf, 10, "t.gguf", &g), -1);
    fflush(cap);
    assert_non_null(strstr(msgbuf, "t.gguf:@8: tensor count needs 8 bytes"));
    release(cap);
    /* bad magic */
    buf[0] = 'X';
    cap = capture();
    assert_int_equal(swift_gguf_parse(buf, len, "t.gguf", &g), -1);
    fflush(cap);
    assert_non_null(strstr(msgbuf, "t.gguf:@0: not a GGUF file"));
    release(cap);
    buf[0] = 'G';
    /* huge string length in the first key */
    memset(buf + 24, 0xff, 8);
    cap = capture();
    assert_int_equal(swift_gguf_parse(buf, len, "t.gguf", &g), -1);
    fflush(cap);
    assert_non_null(strstr(msgbuf, "t.gguf:@24: key length"));
    release(cap);
    free(buf);
}

static void test_writer_checks(void **state)
{
    (void)state;
    struct swift_gguf_writer w;
    swift_gguf_writer_init(&w);
    FILE *cap = capture();
    assert_int_equal(swift_gguf_add_tensor(&w, "q", 2, (uint64_t[]){33, 2}, SWIFT_GGML_Q8_0), -1);
    assert_int_equal(swift_gguf_add_tensor(&w, "x", 1, (uint64_t[]){4}, SWIFT_GGML_F32), 0);
    assert_int_equal(swift_gguf_add_tensor(&w, "x", 1, (uint64_t[]){4}, SWIFT_GGML_F32), -1);
    assert_int_equal(swift_gguf_set_u32(&w, "general.alignment", 12), -1);
    fflush(cap);
    assert_non_null(strstr(msgbuf, "not a multiple of the type's block size"));
    assert_non_null(strstr(msgbuf, "duplicate tensor 'x'"));
    release(cap);
    /* commit with a tensor missing: nothing under the final name */
    const char *path = tmpfile_path();
    unlink(path);
    assert_int_equal(swift_gguf_writer_begin(&w, path), 0);
    cap = capture();
    assert_int_equal(swift_gguf_writer_commit(&w), -1);
    release(cap);
    assert_int_equal(access(path, F_OK), -1);
    swift_gguf_writer_release(&w);
}

static void test_real_file(void **state)
{
    (void)state;
    const char *shared = getenv("SHARED");
    char path[4096];
    snprintf(path,
             sizeof(path),
             "%s/data/tokenizer-vectors/ggml-vocab-gpt-2.gguf",
             shared ? shared : "../shared");
    if (access(path, R_OK)) {
        if (getenv("CI") && !strcmp(getenv("CI"), "true"))
            fail_msg("missing %s", path);
        skip();
    }
    struct swift_gguf *g;
    assert_int_equal(swift_gguf_open(path, &g), 0);
    assert_int_equal(g->n_kv, 16);
    assert_string_equal(swift_gguf_get(g, "tokenizer.ggml.pre")->v.str.s, "gpt-2");
    const struct swift_gguf_value *t = swift_gguf_get(g, "tokenizer.ggml.tokens");
    assert_int_equal(t->v.arr.n, 50257);
    assert_string_equal(t->v.arr.items[50256].v.str.s, "<|endoftext|>");
    assert_int_equal(swift_gguf_get(g, "tokenizer.ggml.merges")->v.arr.n, 50000);
    swift_gguf_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_writer_checks),
        cmocka_unit_test(test_real_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
