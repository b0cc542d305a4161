/* lib/model/adapter: PEFT's layout read and written once, the LoRA scale, the refusals. */
#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/model/adapter.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#define FIX "tests/ref/fixtures/merge/"

static char dir[256];
static char msgbuf[4096];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/test_adapter_%d", (int)getpid());
    swift_remove_tree(dir);
    assert_int_equal(mkdir(dir, 0755), 0);
    return 0;
}
static int teardown(void **state)
{
    (void)state;
    swift_remove_tree(dir);
    return 0;
}

static void test_scale(void **state)
{
    (void)state;
    assert_true(swift_lora_scale(16, 8, 0) == 2.0f);
    assert_true(swift_lora_scale(8, 4, 1) == 4.0f);
    assert_true(swift_lora_scale(32, 8, 1) == (float)(32 / sqrt(8.0)));
}

static void test_read_peft(void **state)
{
    (void)state;
    struct swift_adapter ad;
    assert_int_equal(swift_adapter_open(&ad, FIX "adapter-lora"), 0);
    assert_int_equal(ad.cfg.r, 8);
    assert_true(ad.cfg.alpha == 16);
    assert_int_equal(ad.cfg.use_rslora, 0);
    assert_string_equal(ad.cfg.targets, "q_proj,v_proj,down_proj");
    assert_int_equal(ad.cfg.patterns, 0);
    assert_true(ad.n > 0);
    for (size_t i = 0; i < ad.n; i++) {
        assert_ptr_equal(swift_adapter_find(&ad, ad.pairs[i].module), &ad.pairs[i]);
        assert_int_equal(ad.pairs[i].a->shape[0], 8);
        assert_true(swift_adapter_alpha(&ad, ad.pairs[i].module) == 16);
    }
    assert_null(swift_adapter_find(&ad, "model.layers.0.self_attn.x_proj"));
    swift_adapter_close(&ad);
}

/* what swift_adapter_write writes, swift_adapter_open reads back */
static void test_write_read(void **state)
{
    (void)state;
    float a[2 * 3] = {1, 2, 3, 4, 5, 6}, b[4 * 2] = {0};
    char na[128], nb[128];
    swift_adapter_tensor_name(na, sizeof(na), "model.layers.0.self_attn.q_proj", 'A');
    swift_adapter_tensor_name(nb, sizeof(nb), "model.layers.0.self_attn.q_proj", 'B');
    assert_string_equal(na, "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight");
    struct swift_st_entry e[2] = {
        {.name = na, .dtype = SWIFT_DTYPE_F32, .ndim = 2, .shape = {2, 3}, .data = a},
        {.name = nb, .dtype = SWIFT_DTYPE_F32, .ndim = 2, .shape = {4, 2}, .data = b}};
    struct swift_adapter_config c = {.r = 2, .alpha = 4, .dropout = 0.05, .use_rslora = 1};
    snprintf(c.targets, sizeof(c.targets), "q_proj");
    assert_int_equal(swift_adapter_write(dir, &c, "base", e, 2), 0);
    struct swift_adapter ad;
    assert_int_equal(swift_adapter_open(&ad, dir), 0);
    assert_int_equal(ad.cfg.r, 2);
    assert_true(ad.cfg.alpha == 4);
    assert_true(ad.cfg.dropout == 0.05);
    assert_int_equal(ad.cfg.use_rslora, 1);
    assert_string_equal(ad.cfg.targets, "q_proj");
    assert_int_equal(ad.n, 1);
    assert_string_equal(ad.pairs[0].module, "model.layers.0.self_attn.q_proj");
    swift_adapter_close(&ad);
}

/* adapter_config.json with one key replaced; the error that opening it reports */
static void refused(const char *from, const char *to, const char *msg)
{
    char *src = swift_path_join(FIX "adapter-lora", "adapter_config.json");
    char *dst = swift_path_join(dir, "adapter_config.json");
    char *txt;
    size_t len;
    assert_int_equal(swift_read_file(src, 1 << 20, &txt, &len), 0);
    char *at = strstr(txt, from);
    assert_non_null(at);
    size_t nf = strlen(from), nt = strlen(to);
    char *out = malloc(len + nt + 1);
    memcpy(out, txt, (size_t)(at - txt));
    memcpy(out + (at - txt), to, nt);
    memcpy(out + (at - txt) + nt, at + nf, len - (size_t)(at - txt) - nf);
    assert_int_equal(swift_atomic_write(dst, out, len - nf + nt), 0);
    /* the tensors too: some refusals (DoRA without magnitudes) come from pairing them */
    char *ssrc = swift_path_join(FIX "adapter-lora", "adapter_model.safetensors");
    char *sdst = swift_path_join(dir, "adapter_model.safetensors");
    char *st;
    size_t stlen;
    assert_int_equal(swift_read_file(ssrc, 64 << 20, &st, &stlen), 0);
    assert_int_equal(swift_atomic_write(sdst, st, stlen), 0);
    free(st);
    free(ssrc);
    free(sdst);
    struct swift_adapter ad;
    FILE *fp = fmemopen(msgbuf, sizeof(msgbuf), "w");
    swift_error_set_stream(fp);
    assert_int_equal(swift_adapter_open(&ad, dir), -1);
    fclose(fp);
    swift_error_set_stream(NULL);
    swift_adapter_close(&ad);
    if (!strstr(msgbuf, msg))
        fail_msg("got: %s", msgbuf);
    free(src);
    free(dst);
    free(txt);
    free(out);
}

static void test_refusals(void **state)
{
    (void)state;
    refused("\"peft_type\": \"LORA\"", "\"peft_type\": \"IA3\"", "peft_type must be \"LORA\"");
    refused("\"use_dora\": false", "\"use_dora\": true", "has no lora_magnitude_vector (use_dora)");
    refused("\"bias\": \"none\"", "\"bias\": \"all\"", "bias 'all' adapters are not supported");
    refused("\"fan_in_fan_out\": false", "\"fan_in_fan_out\": true", "fan_in_fan_out adapters");
    refused("\"r\": 8", "\"r\": \"8\"", "missing or non-numeric 'r' or 'lora_alpha'");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scale),
        cmocka_unit_test(test_read_peft),
        cmocka_unit_test_setup_teardown(test_write_read, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
