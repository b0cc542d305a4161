/* Generation with Qwen2-VL and Qwen2.5-VL on swift-infer's engine (lib/infer/engine.h with
 * swift_engine_set_vlm; lib/model/vlm_gen.c; swift_pkv_forward_mm): greedy tokens equal
 * transformers' generate(do_sample=False) on the committed fixtures of
 * tests/ref/gen_vlm_generate.py (tiny random models; prompts with one image, two images of
 * different sizes, none, and one again), all prompts batched together, then with chunks small
 * enough to cut the images' pads across forwards, small blocks, a pool small enough to preempt
 * and the prefix cache on (the prompts share the system prompt's blocks). Then the errors: pads
 * that do not match the grids, images for a text model, video tokens. */
#include "kernels/ops.h"
#include "lib/infer/engine.h"
#include "lib/model/model.h"
#include "lib/model/vlm.h"
#include "lib/formats/safetensors.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define FIX "tests/fixtures/vlm_gen/"
#define NP 4
#define MAXOUT 16

struct prompts {
    struct swift_safetensors in, ref;
    const int32_t *ids[NP], *grid[NP], *want[NP];
    float *pix[NP];
    int len[NP], nimg[NP], npatch[NP], nwant[NP];
};

static void prompts_open(struct prompts *p, const char *kind)
{
    char path[256];
    memset(p, 0, sizeof(*p));
    assert_int_equal(swift_safetensors_open(&p->in, FIX "inputs.safetensors"), 0);
    snprintf(path, sizeof(path), FIX "%s/gen.safetensors", kind);
    assert_int_equal(swift_safetensors_open(&p->ref, path), 0);
    for (int k = 0; k < NP; k++) {
        char n[64];
        snprintf(n, sizeof(n), "input_ids.%d", k);
        const struct swift_st_tensor *t = swift_safetensors_find(&p->in, n);
        assert_non_null(t);
        p->ids[k] = t->data;
        p->len[k] = (int)t->numel;
        snprintf(n, sizeof(n), "tokens.%d", k);
        t = swift_safetensors_find(&p->ref, n);
        assert_non_null(t);
        p->want[k] = t->data;
        p->nwant[k] = (int)t->numel;
        snprintf(n, sizeof(n), "image_grid_thw.%d", k);
        t = swift_safetensors_find(&p->in, n);
        if (!t)
            continue;
        p->grid[k] = t->data;
        p->nimg[k] = (int)t->shape[0];
        snprintf(n, sizeof(n), "pixel_values.%d", k);
        t = swift_safetensors_find(&p->in, n);
        assert_non_null(t);
        p->npatch[k] = (int)t->shape[0];
        p->pix[k] = malloc((size_t)t->numel * sizeof(float));
        assert_int_equal(swift_st_tensor_to_f32(t, p->pix[k]), 0);
    }
}

static void prompts_close(struct prompts *p)
{
    for (int k = 0; k < NP; k++)
        free(p->pix[k]);
    swift_safetensors_close(&p->in);
    swift_safetensors_close(&p->ref);
}

struct got {
    int64_t id[NP];
    int32_t tok[NP][MAXOUT];
    int n[NP], done[NP];
};

static int on_token(void *ctx, const struct swift_engine_event *ev)
{
    struct got *g = ctx;
    for (int k = 0; k < NP; k++)
        if (g->id[k] == ev->req) {
            if (ev->token >= 0 && g->n[k] < MAXOUT)
                g->tok[k][g->n[k]++] = ev->token;
            if (ev->finish != SWIFT_FINISH_NONE)
                g->done[k] = 1;
        }
    return 0;
}

static void generate(struct swift_vlm *v, const struct prompts *p,
                     const struct swift_engine_opts *o, struct swift_engine_stats *st)
{
    char err[256] = "";
    int32_t eos = 258; /* <|im_end|> */
    struct swift_engine *e = swift_engine_new(&v->llm, o, &eos, 1, err, sizeof(err));
    assert_non_null(e);
    swift_engine_set_vlm(e, v);
    struct swift_sampling s = swift_sampling_defaults();
    s.max_tokens = 12;
    struct got g = {0};
    for (int k = 0; k < NP; k++) {
        struct swift_engine_images im = {.pixels = p->pix[k],
                                         .npatches = p->npatch[k],
                                         .grid_thw = p->grid[k],
                                         .nimages = p->nimg[k]};
        g.id[k] = swift_engine_add_images(
            e, p->ids[k], p->len[k], &im, &s, on_token, &g, err, sizeof(err));
        if (g.id[k] < 0)
            fail_msg("add %d: %s", k, err);
    }
    int rc;
    while ((rc = swift_engine_step(e)) > 0)
        ;
    assert_int_equal(rc, 0);
    for (int k = 0; k < NP; k++) {
        assert_true(g.done[k]);
        assert_int_equal(g.n[k], p->nwant[k]);
        for (int i = 0; i < g.n[k]; i++)
            if (g.tok[k][i] != p->want[k][i])
                fail_msg(
                    "prompt %d token %d: %d, transformers %d", k, i, g.tok[k][i], p->want[k][i]);
    }
    swift_engine_stats(e, st);
    swift_engine_free(e);
}

static void check_kind(const char *kind)
{
    struct swift_vlm v;
    char dir[128];
    snprintf(dir, sizeof(dir), FIX "%s", kind);
    assert_int_equal(
        swift_vlm_load(&v, dir, &swift_cpu_ops, SWIFT_VLM_VIT | SWIFT_VLM_ALIGNER | SWIFT_VLM_LLM),
        0);
    struct prompts p;
    prompts_open(&p, kind);
    struct swift_engine_stats st;
    struct swift_engine_opts o = swift_engine_defaults();
    generate(&v, &p, &o, &st);
    /* chunks of 16 tokens (an image's 6..12 pads cut across forwards), blocks of 4, a pool too
     * small for the four together: preemption recomputes prompts with their images */
    o.max_num_batched_tokens = 16;
    o.max_num_seqs = 4;
    o.block_size = 4;
    o.num_blocks = 40;
    generate(&v, &p, &o, &st);
    assert_true(st.preemptions > 0);
    assert_true(st.cached_tokens > 0); /* the system prompt's blocks, before the first image */
    o.prefix_caching = 0;
    o.num_blocks = 0;
    generate(&v, &p, &o, &st);
    prompts_close(&p);
    swift_vlm_free(&v);
}

static void test_qwen2_vl(void **state)
{
    (void)state;
    check_kind("qwen2_vl");
}

static void test_qwen2_5_vl(void **state)
{
    (void)state;
    check_kind("qwen2_5_vl");
}

static void test_errors(void **state)
{
    (void)state;
    struct swift_vlm v;
    assert_int_equal(
        swift_vlm_load(
            &v, FIX "qwen2_vl", &swift_cpu_ops, SWIFT_VLM_VIT | SWIFT_VLM_ALIGNER | SWIFT_VLM_LLM),
        0);
    struct prompts p;
    prompts_open(&p, "qwen2_vl");
    char err[256] = "";
    int32_t eos = 258;
    struct swift_engine_opts o = swift_engine_defaults();
    struct swift_engine *e = swift_engine_new(&v.llm, &o, &eos, 1, err, sizeof(err));
    assert_non_null(e);
    struct swift_sampling s = swift_sampling_defaults();
    struct swift_engine_images im = {
        .pixels = p.pix[1], .npatches = p.npatch[1], .grid_thw = p.grid[1], .nimages = 2};
    /* no VLM set: the engine takes no images */
    assert_int_equal(
        swift_engine_add_images(e, p.ids[1], p.len[1], &im, &s, NULL, NULL, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "takes no images"));
    swift_engine_set_vlm(e, &v);
    /* two runs of pads, one image: the grids do not match */
    im.nimages = 1;
    assert_int_equal(
        swift_engine_add_images(e, p.ids[1], p.len[1], &im, &s, NULL, NULL, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "pads"));
    /* pads and no images at all */
    assert_int_equal(swift_engine_add(e, p.ids[1], p.len[1], &s, NULL, NULL, err, sizeof(err)), -1);
    /* a video token */
    int32_t vid[3] = {1, 262, 2};
    assert_int_equal(swift_engine_add(e, vid, 3, &s, NULL, NULL, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "video"));
    /* the text-only prompt still goes */
    assert_true(swift_engine_add(e, p.ids[2], p.len[2], &s, NULL, NULL, err, sizeof(err)) > 0);
    while (swift_engine_step(e) > 0)
        ;
    swift_engine_free(e);
    prompts_close(&p);
    swift_vlm_free(&v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_qwen2_vl),
        cmocka_unit_test(test_qwen2_5_vl),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
