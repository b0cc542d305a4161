/* safetensors: the reference package's file, byte-identical writes, every header check. */
#include "lib/formats/safetensors.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/core/error.h"
#include "lib/core/fileio.h"

#define REF "tests/fixtures/safetensors/ref.safetensors"

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

static void test_read_reference(void **state)
{
    (void)state;
    struct swift_safetensors st;
    assert_int_equal(swift_safetensors_open(&st, REF), 0);
    assert_int_equal(st.ntensors, 7);
    assert_string_equal(swift_safetensors_meta(&st, "format"), "pt");
    assert_int_equal(st.header_len % 8, 0);

    const struct swift_st_tensor *a = swift_safetensors_find(&st, "a");
    assert_non_null(a);
    assert_int_equal(a->dtype, SWIFT_DTYPE_F32);
    assert_int_equal(a->ndim, 2);
    assert_int_equal(a->shape[0], 2);
    assert_int_equal(a->shape[1], 3);
    float f[6];
    assert_int_equal(swift_st_tensor_to_f32(a, f), 0);
    for (int i = 0; i < 6; i++)
        assert_true(f[i] == i * 0.5f - 1.0f);

    const struct swift_st_tensor *b = swift_safetensors_find(&st, "b");
    assert_int_equal(b->dtype, SWIFT_DTYPE_BF16);
    assert_int_equal(swift_st_tensor_to_f32(b, f), 0);
    assert_true(f[0] == 1.0f && f[1] == -2.5f && f[2] == 3.140625f);
    assert_true(f[3] == 65536.0f); /* 65504 rounds to 65536 in bf16 */

    const struct swift_st_tensor *c = swift_safetensors_find(&st, "c");
    assert_int_equal(c->dtype, SWIFT_DTYPE_F16);
    assert_int_equal(swift_st_tensor_to_f32(c, f), 0);
    assert_true(f[0] == 0.5f && f[1] == -1.0f && f[2] == 6.103515625e-05f);

    const struct swift_st_tensor *e = swift_safetensors_find(&st, "e");
    assert_int_equal(e->ndim, 0);
    assert_int_equal(e->numel, 1);
    assert_int_equal(swift_st_tensor_to_f32(e, f), 0);
    assert_true(f[0] == 42.0f);

    const struct swift_st_tensor *z = swift_safetensors_find(&st, "z");
    assert_int_equal(z->numel, 0);
    assert_int_equal(z->dtype, SWIFT_DTYPE_U8);

    capture();
    const struct swift_st_tensor *d = swift_safetensors_find(&st, "d");
    assert_int_equal(swift_st_tensor_to_f32(d, f), -1);
    int64_t want[2] = {3, 2};
    assert_int_equal(swift_st_tensor_check_shape(a, 2, want), -1);
    release();
    assert_non_null(strstr(msgbuf, "only F32, F16 and BF16"));
    assert_non_null(strstr(msgbuf, "tensor 'a' has shape [2, 3], expected [3, 2]"));
    assert_null(swift_safetensors_find(&st, "nope"));
    swift_safetensors_close(&st);
}

/* Our writer, given the same tensors, writes the reference package's bytes exactly. */
static void test_write_identical(void **state)
{
    (void)state;
    struct swift_safetensors st;
    assert_int_equal(swift_safetensors_open(&st, REF), 0);
    struct swift_st_entry e[8];
    size_t n = 0;
    /* feed them in reverse name order: the writer sorts like the reference */
    for (size_t i = st.ntensors; i-- > 0;) {
        const struct swift_st_tensor *t = &st.tensors[i];
        e[n].name = t->name;
        e[n].dtype = t->dtype;
        e[n].ndim = t->ndim;
        memcpy(e[n].shape, t->shape, sizeof(t->shape));
        e[n].data = t->data;
        n++;
    }
    char tmpl[] = "/tmp/test_st_XXXXXX";
    assert_non_null(mkdtemp(tmpl));
    char *out = swift_path_join(tmpl, "out.safetensors");
    assert_int_equal(swift_safetensors_write(out, e, n, NULL), 0);
    char *x, *y;
    size_t xl, yl;
    assert_int_equal(swift_read_file(REF, 1 << 20, &x, &xl), 0);
    assert_int_equal(swift_read_file(out, 1 << 20, &y, &yl), 0);
    assert_int_equal(xl, yl);
    assert_memory_equal(x, y, xl);
    free(x);
    free(y);

    /* sharded: small limit -> several shards + index, read back as a set */
    assert_int_equal(swift_safetensors_write_sharded(tmpl, e, n, 20), 0);
    struct swift_st_set set;
    assert_int_equal(swift_st_set_open(&set, tmpl), 0);
    assert_true(set.nfiles > 1);
    for (size_t i = 0; i < st.ntensors; i++) {
        const struct swift_st_tensor *t = swift_st_set_find(&set, st.tensors[i].name);
        assert_non_null(t);
        assert_int_equal(t->end - t->begin, st.tensors[i].end - st.tensors[i].begin);
        assert_memory_equal(t->data, st.tensors[i].data, t->end - t->begin);
    }
    swift_st_set_close(&set);
    assert_int_equal(swift_remove_tree(tmpl), 0);
    free(out);
    swift_safetensors_close(&st);
}

/* Build a file image: 8-byte length + header (as given) + `nbuf` zero bytes. */
static size_t mk(uint8_t *buf, const char *hdr, size_t nbuf)
{
    size_t n = strlen(hdr);
    for (int i = 0; i < 8; i++)
        buf[i] = (uint8_t)((uint64_t)n >> (8 * i));
    memcpy(buf + 8, hdr, n);
    memset(buf + 8 + n, 0, nbuf);
    return 8 + n + nbuf;
}

static void expect_bad(const char *hdr, size_t nbuf, const char *msg)
{
    static uint8_t buf[4096];
    size_t len = mk(buf, hdr, nbuf);
    struct swift_safetensors st;
    capture();
    int rc = swift_safetensors_parse(&st, buf, len, "x.safetensors");
    release();
    if (rc != -1 || !strstr(msgbuf, msg))
        fail_msg("header %s: rc %d, message '%s', expected '%s'", hdr, rc, msgbuf, msg);
    assert_true(strncmp(msgbuf, "test_safetensors:x.safetensors: ", 32) == 0);
}

static void test_bad_headers(void **state)
{
    (void)state;
    swift_set_progname("test_safetensors");
    static uint8_t buf[256];
    struct swift_safetensors st;
    /* good minimal file, then each rule broken once */
    size_t len = mk(buf, "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}  ", 8);
    assert_int_equal(swift_safetensors_parse(&st, buf, len, "x"), 0);
    swift_safetensors_close(&st);

    expect_bad("[1]", 0, "does not start with '{'");
    expect_bad("{\"w\":", 0, "header byte");
    expect_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
               4,
               "truncated or trailing data");
    expect_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
               12,
               "truncated or trailing data");
    expect_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}",
               8,
               "shape and dtype need 12");
    expect_bad("{\"w\":{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":[0,8]}}",
               8,
               "unknown dtype 'F33'");
    expect_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}",
               8,
               "shape[0] is not a non-negative integer");
    expect_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
               8,
               "starts at byte 4 of the buffer, expected 0");
    expect_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
               "\"v\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
               8,
               "expected 4");
    expect_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
               "\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
               8,
               "duplicate");
    expect_bad("{\"__metadata__\":{\"format\":1}}", 0, "is not a string");
    expect_bad(
        "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", 8, "END < BEGIN");
    expect_bad(
        "{\"w\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,1]}}", 1, "not whole bytes");
    expect_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],"
               "\"data_offsets\":[0,8]}}",
               8,
               "shape too large");

    /* header length beyond the file and beyond 100 MB */
    memset(buf, 0, sizeof(buf));
    buf[0] = 100;
    capture();
    assert_int_equal(swift_safetensors_parse(&st, buf, 20, "x.safetensors"), -1);
    release();
    assert_non_null(strstr(msgbuf, "runs past the end of the file"));
    buf[0] = 0;
    buf[4] = 1; /* 2^32 */
    capture();
    assert_int_equal(swift_safetensors_parse(&st, buf, 20, "x.safetensors"), -1);
    release();
    assert_non_null(strstr(msgbuf, "exceeds the 100000000-byte limit"));
    capture();
    assert_int_equal(swift_safetensors_open(&st, "/nonexistent.safetensors"), -1);
    release();
    assert_non_null(strstr(msgbuf, "cannot open '/nonexistent.safetensors'"));
}

static void test_conversions(void **state)
{
    (void)state;
    /* exhaustive: every finite f16 survives f16 -> f32 -> f16 */
    for (uint32_t h = 0; h < 65536; h++) {
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff))
            continue; /* NaN payloads */
        assert_int_equal(swift_f32_to_f16(swift_f16_to_f32((uint16_t)h)), h);
        assert_int_equal(swift_f32_to_bf16(swift_bf16_to_f32((uint16_t)h)), h);
    }
    assert_int_equal(swift_f32_to_bf16(1.00390625f), 0x3f80); /* tie to even */
    assert_int_equal(swift_f32_to_bf16(1.01171875f), 0x3f82);
    assert_int_equal(swift_f32_to_f16(65520.0f), 0x7c00);
    assert_int_equal(swift_f32_to_f16(1e-8f), 0);
    assert_int_equal(swift_dtype_bits(SWIFT_DTYPE_F6_E2M3), 6);
    assert_int_equal(swift_dtype_parse("BF16"), SWIFT_DTYPE_BF16);
    assert_int_equal(swift_dtype_parse("bf16"), -1);
}

static void test_set_errors(void **state)
{
    (void)state;
    char tmpl[] = "/tmp/test_st_XXXXXX";
    assert_non_null(mkdtemp(tmpl));
    struct swift_st_set set;
    capture();
    assert_int_equal(swift_st_set_open(&set, tmpl), -1);
    release();
    assert_non_null(strstr(msgbuf, "neither model.safetensors nor"));
    char *idx = swift_path_join(tmpl, "model.safetensors.index.json");
    const char *j = "{\"metadata\":{},\"weight_map\":{\"w\":\"../evil.safetensors\"}}";
    assert_int_equal(swift_atomic_write(idx, j, strlen(j)), 0);
    capture();
    assert_int_equal(swift_st_set_open(&set, tmpl), -1);
    release();
    assert_non_null(strstr(msgbuf, "not a file in the directory"));
    float w = 1;
    struct swift_st_entry e = {
        .name = "w", .dtype = SWIFT_DTYPE_F32, .ndim = 1, .shape = {1}, .data = &w};
    char *sh = swift_path_join(tmpl, "s1.safetensors");
    assert_int_equal(swift_safetensors_write(sh, &e, 1, NULL), 0);
    j = "{\"metadata\":{},\"weight_map\":{\"w\":\"s1.safetensors\",\"v\":\"s1.safetensors\"}}";
    assert_int_equal(swift_atomic_write(idx, j, strlen(j)), 0);
    capture();
    assert_int_equal(swift_st_set_open(&set, tmpl), -1);
    release();
    assert_non_null(strstr(msgbuf, "puts 'v' in s1.safetensors, which does not hold it"));
    free(sh);
    free(idx);
    assert_int_equal(swift_remove_tree(tmpl), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_reference),
        cmocka_unit_test(test_write_identical),
        cmocka_unit_test(test_bad_headers),
        cmocka_unit_test(test_conversions),
        cmocka_unit_test(test_set_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
