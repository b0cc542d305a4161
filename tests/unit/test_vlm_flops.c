/* The vision side's FLOPs of a Qwen2-VL / Qwen2.5-VL step (lib/model/vlm_flops.h): a hand count
 * on the tiny Qwen2-VL config, the window attention of Qwen2.5-VL's, and the counts of
 * torch.utils.flop_counter.FlopCounterMode on transformers' vision tower and merger for every
 * combination of frozen groups (tests/fixtures/vlm/flops.json, tests/ref/gen_vlm_flops.py):
 * equal, not just close. */
#include "lib/model/vlm_flops.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>
#include <jansson.h>

#include "lib/core/banned.h"

#define FIX "tests/fixtures/vlm/"

static void config(const char *kind, struct swift_vlm_config *vc)
{
    char path[256];
    snprintf(path, sizeof(path), FIX "%s/config.json", kind);
    json_t *root = json_load_file(path, 0, NULL);
    assert_non_null(root);
    struct swift_model_config tc;
    assert_int_equal(swift_vlm_config_parse(vc, &tc, root, path), 0);
    json_decref(root);
}

/* qwen2_vl: embed 16, mlp 32 (mlp_ratio 2), depth 2, out 32, patch_dim 3·2·14·14 = 1176; two
 * images of 24 and 4 patches (28; 7 merged tokens of 4·16 = 64 floats) */
static void test_hand_count(void **state)
{
    (void)state;
    struct swift_vlm_config vc;
    config("qwen2_vl", &vc);
    int32_t grid[] = {1, 4, 6, 1, 2, 2};
    struct swift_vlm_flops_parts f;
    swift_vlm_flops_forward(&vc, grid, 2, &f);
    assert_true(f.patch == 2.0 * 28 * 1176 * 16);
    /* per patch and block: q, k, v, proj 4·16·16 + fc1, fc2 2·16·32 = 2048 */
    assert_true(f.blocks == 2.0 * 28 * 2048 * 2);
    /* Q·Kᵀ and P·V inside each image: 4 · embed · (24² + 4²) per block */
    assert_true(f.attention == 4.0 * 16 * (24 * 24 + 4 * 4) * 2);
    assert_true(f.merger == 2.0 * 7 * (64 * 64 + 64 * 32));
    double fwd = f.patch + f.blocks + f.attention + f.merger;
    assert_true(fwd == 1444864.0);
    /* both frozen: forward only (LoRA on the language model, the default) */
    assert_true(swift_vlm_vision_flops(&vc, SWIFT_VLM_VIT | SWIFT_VLM_ALIGNER, grid, 2) == fwd);
    /* the merger trains: its input and weight gradients */
    assert_true(swift_vlm_vision_flops(&vc, SWIFT_VLM_VIT, grid, 2) == fwd + 2 * f.merger);
    /* the ViT trains, the merger frozen: the merger's input gradients, the blocks' both, the
     * patch embedding's weights */
    assert_true(swift_vlm_vision_flops(&vc, SWIFT_VLM_ALIGNER, grid, 2) ==
                fwd + f.merger + 2 * (f.blocks + f.attention) + f.patch);
    assert_true(swift_vlm_vision_flops(&vc, 0, grid, 2) ==
                3 * fwd - f.patch); /* everything trains */
    assert_true(swift_vlm_vision_flops(&vc, 0, grid, 0) == 0);
}

/* qwen2_5_vl: window_size 56 = 2x2 merged tokens; full attention in block 1 of 3. A grid of
 * 6x10 patches is 3x5 merged tokens: windows of 2x2, 2x2, 2x1, 1x2, 1x2, 1x1 merged tokens, of
 * 16, 16, 8, 8, 8, 4 patches. */
static void test_windows(void **state)
{
    (void)state;
    struct swift_vlm_config vc;
    config("qwen2_5_vl", &vc);
    int32_t grid[] = {1, 6, 10};
    struct swift_vlm_flops_parts f;
    swift_vlm_flops_forward(&vc, grid, 1, &f);
    double win = 16 * 16 * 2 + 8 * 8 * 3 + 4 * 4, full = 60 * 60;
    assert_true(f.attention == 4.0 * 16 * (2 * win + full));
    /* SwiGLU: gate, up, down 3·16·24 */
    assert_true(f.blocks == 2.0 * 60 * (4 * 16 * 16 + 3 * 16 * 24) * 3);
}

/* FlopCounterMode's counts on transformers' modules (the fixture inputs' two images) */
static void test_torch_counts(void **state)
{
    (void)state;
    json_t *root = json_load_file(FIX "flops.json", 0, NULL);
    assert_non_null(root);
    const char *kind;
    json_t *k;
    int checked = 0;
    json_object_foreach(root, kind, k)
    {
        struct swift_vlm_config vc;
        config(kind, &vc);
        json_t *g = json_object_get(k, "grids");
        int n = (int)json_array_size(g);
        int32_t grid[3 * 8];
        assert_true(n > 0 && n <= 8);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < 3; j++)
                grid[3 * i + j] =
                    (int32_t)json_integer_value(json_array_get(json_array_get(g, i), j));
        size_t i;
        json_t *c;
        json_array_foreach(json_object_get(k, "cases"), i, c)
        {
            int frozen = (int)json_integer_value(json_object_get(c, "frozen"));
            double want = (double)json_integer_value(json_object_get(c, "flops"));
            double got = swift_vlm_vision_flops(&vc, frozen, grid, n);
            if (got != want)
                fail_msg("%s frozen %d: %.0f FLOPs, torch counts %.0f", kind, frozen, got, want);
            checked++;
        }
    }
    assert_int_equal(checked, 8);
    json_decref(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_count),
        cmocka_unit_test(test_windows),
        cmocka_unit_test(test_torch_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
