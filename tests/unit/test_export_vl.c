/* export --merge-lora on vision-language models (Qwen2-VL, Qwen2.5-VL; tests/fixtures/vlm): the
 * merged directory, loaded by swift_vlm_load, gives the logits of the base with the adapter
 * attached; the vision tower and the merger are copied bit for bit, the keys keep the input's
 * layout; adapters in either key layout and modules_to_save tensors beside them are applied. */
#include "lib/core/error.h"
#include "kernels/ops.h"
#include "lib/core/fileio.h"
#include "lib/export/export.h"
#include "lib/export/internal.h"
#include "lib/formats/gguf.h"
#include "lib/formats/quant.h"
#include "lib/formats/safetensors.h"
#include "lib/model/lora.h"
#include "lib/model/vlm.h"

#include <fcntl.h>
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

#define FIX "tests/fixtures/vlm/"
#define ALL (SWIFT_VLM_VIT | SWIFT_VLM_ALIGNER | SWIFT_VLM_LLM)

static char tmp[256], adir[300], outdir[300];

static int setup(void **state)
{
    (void)state;
    snprintf(tmp, sizeof(tmp), "/tmp/test_export_vl_%d", (int)getpid());
    swift_remove_tree(tmp);
    assert_int_equal(swift_mkdirs(tmp, 0755), 0);
    snprintf(adir, sizeof(adir), "%s/adapter", tmp);
    snprintf(outdir, sizeof(outdir), "%s/merged", tmp);
    assert_int_equal(swift_mkdirs(adir, 0755), 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    swift_remove_tree(tmp);
    return 0;
}

/* the fixture's inputs: two rows, two images */
struct vin {
    struct swift_safetensors st;
    int32_t *tok, *grid, *tgt;
    float *pix;
    struct swift_vlm_batch b;
};

static void *tensor(struct swift_safetensors *st, const char *name, size_t *n)
{
    const struct swift_st_tensor *t = swift_safetensors_find(st, name);
    assert_non_null(t);
    *n = t->numel;
    if (t->dtype == SWIFT_DTYPE_I32) {
        int32_t *o = malloc(t->numel * sizeof(int32_t) + 4);
        memcpy(o, t->data, t->numel * sizeof(int32_t));
        return o;
    }
    float *o = malloc(t->numel * sizeof(float) + 4);
    assert_int_equal(swift_st_tensor_to_f32(t, o), 0);
    return o;
}

static void vin_open(struct vin *in)
{
    assert_int_equal(swift_safetensors_open(&in->st, FIX "inputs.safetensors"), 0);
    size_t n, ng, np;
    in->tok = tensor(&in->st, "input_ids", &n);
    in->grid = tensor(&in->st, "image_grid_thw", &ng);
    in->pix = tensor(&in->st, "pixel_values", &np);
    const struct swift_st_tensor *ids = swift_safetensors_find(&in->st, "input_ids");
    in->tgt = malloc(n * sizeof(int32_t)); /* every next token (the loss is not compared) */
    for (size_t i = 0; i < n; i++)
        in->tgt[i] = (i + 1) % (size_t)ids->shape[1] ? in->tok[i + 1] : -1;
    struct swift_vlm_batch b = {.B = (int)ids->shape[0],
                                .T = (int)ids->shape[1],
                                .tokens = in->tok,
                                .targets = in->tgt,
                                .pixels = in->pix,
                                .npatches = (int)(np / 1176),
                                .grid_thw = in->grid,
                                .nimages = (int)(ng / 3)};
    in->b = b;
}

static void vin_close(struct vin *in)
{
    free(in->tok);
    free(in->tgt);
    free(in->grid);
    free(in->pix);
    swift_safetensors_close(&in->st);
}

/* logits of model dir (with the adapter in adapter_dir attached when not NULL), malloc'ed */
static float *logits_of(const char *dir, const char *adapter_dir, size_t *n)
{
    struct swift_vlm v;
    assert_int_equal(swift_vlm_load(&v, dir, &swift_cpu_ops, ALL), 0);
    if (adapter_dir) {
        struct swift_lora_opts lo;
        assert_int_equal(swift_lora_load(&v.llm, adapter_dir, &lo), 0);
    }
    struct vin in;
    vin_open(&in);
    struct swift_loss l = {0};
    assert_int_equal(swift_vlm_forward(&v, &in.b, &l, 0.0f), 0);
    *n = (size_t)in.b.B * in.b.T * v.llm.cfg.vocab_size;
    float *o = malloc(*n * sizeof(float));
    memcpy(o, swift_vlm_logits(&v), *n * sizeof(float));
    vin_close(&in);
    swift_vlm_free(&v);
    return o;
}

/* A trained-looking adapter on every linear of the language model: A and B nonzero. */
static void make_adapter(const char *base)
{
    struct swift_vlm v;
    assert_int_equal(swift_vlm_load(&v, base, &swift_cpu_ops, ALL), 0);
    struct swift_lora_opts lo = {
        .rank = 4, .alpha = 8, .dropout = 0, .targets = "all-linear", .seed = 7};
    assert_int_equal(swift_lora_attach(&v.llm, &lo), 0);
    for (size_t i = 0; i < v.llm.nlora; i++)
        v.llm.lora_params[i] = 0.2f * (float)sin(0.37 * (double)i + 0.5);
    assert_int_equal(swift_lora_save(&v.llm, &lo, adir, base), 0);
    swift_vlm_free(&v);
}

static void export_merge(const char *base, const char *dtype)
{
    struct swift_export_opts o = {.model_dir = base,
                                  .output = outdir,
                                  .merge_lora = adir,
                                  .to = "hf",
                                  .dtype = dtype,
                                  .force = 1};
    fflush(stdout); /* the JSON summary line goes to /dev/null, not into the TAP stream */
    int saved = dup(1), null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    int rc = swift_export_run(&o);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    close(null);
    assert_int_equal(rc, 0);
}

/* every tensor of base under the same name in out; the vision side's bytes identical */
static void check_layout_and_vision(const char *base)
{
    struct swift_st_set b = {0}, m = {0};
    assert_int_equal(swift_st_set_open(&b, base), 0);
    assert_int_equal(swift_st_set_open(&m, outdir), 0);
    size_t nvis = 0;
    for (size_t f = 0; f < b.nfiles; f++)
        for (size_t i = 0; i < b.files[f].ntensors; i++) {
            const struct swift_st_tensor *t = &b.files[f].tensors[i];
            const struct swift_st_tensor *u = swift_st_set_find(&m, t->name);
            if (!u)
                fail_msg("merged directory lacks '%s'", t->name);
            assert_int_equal(u->numel, t->numel);
            if (strstr(t->name, "visual.")) {
                nvis++;
                assert_int_equal(u->dtype, t->dtype);
                assert_int_equal(u->ndim, t->ndim);
                assert_memory_equal(u->data, t->data, t->end - t->begin);
            }
        }
    assert_true(nvis >= 20);
    swift_st_set_close(&b);
    swift_st_set_close(&m);
    char *p = swift_path_join(outdir, "config.json");
    char *cfg = NULL;
    size_t len;
    assert_int_equal(swift_read_file(p, 1 << 20, &cfg, &len), 0);
    assert_non_null(strstr(cfg, "\"vision_config\""));
    free(cfg);
    free(p);
}

static void check_logits(const char *base)
{
    size_t n1, n2;
    float *want = logits_of(base, adir, &n1);
    float *got = logits_of(outdir, NULL, &n2);
    float *plain = logits_of(base, NULL, &n2);
    assert_int_equal(n1, n2);
    double d = 0, moved = 0, r = 1e-30;
    for (size_t i = 0; i < n1; i++) {
        d = fmax(d, fabs((double)got[i] - want[i]));
        moved = fmax(moved, fabs((double)plain[i] - want[i]));
        r = fmax(r, fabs((double)want[i]));
    }
    print_message("# %s: merged vs base+adapter max|d|/max|l| = %.3g (the adapter moves them "
                  "%.3g)\n",
                  base,
                  d / r,
                  moved / r);
    assert_true(moved / r > 1e-2); /* the adapter matters */
    assert_true(d / r < 1e-5);
    free(want);
    free(got);
    free(plain);
}

static void test_qwen2_vl_module_layout(void **state)
{
    (void)state;
    make_adapter(FIX "qwen2_vl");
    export_merge(FIX "qwen2_vl", "fp32");
    check_layout_and_vision(FIX "qwen2_vl");
    check_logits(FIX "qwen2_vl");
}

static void test_qwen2_5_vl_hub_layout(void **state)
{
    (void)state;
    make_adapter(FIX "qwen2_5_vl");
    export_merge(FIX "qwen2_5_vl", NULL);
    check_layout_and_vision(FIX "qwen2_5_vl");
    check_logits(FIX "qwen2_5_vl");
}

/* Rewrite the adapter's file: its modules in the hub's layout (model.layers.*; swift-train saves
 * transformers 5's model.language_model.layers.*), plus a full tensor visual.merger.mlp.2.bias
 * (modules_to_save) and, when bad, a full tensor the base lacks. */
static void rewrite_adapter(int bad, float *bias, int64_t nbias)
{
    char *p = swift_path_join(adir, "adapter_model.safetensors");
    struct swift_safetensors st;
    assert_int_equal(swift_safetensors_open(&st, p), 0);
    struct swift_st_entry *e = calloc(st.ntensors + 2, sizeof(*e));
    char **names = calloc(st.ntensors + 2, sizeof(*names));
    size_t n = 0;
    const char *pre = "base_model.model.model.language_model.";
    for (size_t i = 0; i < st.ntensors; i++, n++) {
        const struct swift_st_tensor *t = &st.tensors[i];
        size_t len = strlen(t->name) + 32;
        names[n] = malloc(len);
        assert_int_equal(strncmp(t->name, pre, strlen(pre)), 0);
        snprintf(names[n], len, "base_model.model.model.%s", t->name + strlen(pre));
        e[n].name = names[n];
        e[n].dtype = t->dtype;
        e[n].ndim = t->ndim;
        memcpy(e[n].shape, t->shape, sizeof(e[n].shape));
        e[n].data = t->data;
    }
    if (nbias) {
        e[n].name = bad ? "base_model.model.visual.merger.mlp.9.bias"
                        : "base_model.model.model.visual.merger.mlp.2.bias";
        e[n].dtype = SWIFT_DTYPE_F32;
        e[n].ndim = 1;
        e[n].shape[0] = nbias;
        e[n].data = bias;
        n++;
    }
    assert_int_equal(swift_safetensors_write(p, e, n, NULL), 0);
    for (size_t i = 0; i < st.ntensors; i++)
        free(names[i]);
    free(names);
    free(e);
    swift_safetensors_close(&st);
    free(p);
}

static void test_hub_layout_adapter_and_modules_to_save(void **state)
{
    (void)state;
    /* the hub-layout base (visual.*, model.*): first the adapter as swift-train saves it, in
     * transformers 5's layout (what peft loads onto Qwen2_5_VLForConditionalGeneration) */
    make_adapter(FIX "qwen2_5_vl");
    export_merge(FIX "qwen2_5_vl", "fp32");
    char first[400];
    snprintf(first, sizeof(first), "%s/first", tmp);
    assert_int_equal(rename(outdir, first), 0);
    /* then the same adapter in the hub's key layout, with a modules_to_save tensor */
    float bias[32];
    for (int i = 0; i < 32; i++)
        bias[i] = 0.01f * (float)i - 0.1f;
    rewrite_adapter(0, bias, 32);
    export_merge(FIX "qwen2_5_vl", "fp32");
    struct swift_st_set a = {0}, m = {0};
    assert_int_equal(swift_st_set_open(&a, first), 0);
    assert_int_equal(swift_st_set_open(&m, outdir), 0);
    for (size_t f = 0; f < a.nfiles; f++)
        for (size_t i = 0; i < a.files[f].ntensors; i++) {
            const struct swift_st_tensor *t = &a.files[f].tensors[i];
            const struct swift_st_tensor *u = swift_st_set_find(&m, t->name);
            assert_non_null(u);
            if (!strcmp(t->name, "visual.merger.mlp.2.bias"))
                assert_memory_equal(u->data, bias, sizeof(bias));
            else
                assert_memory_equal(u->data, t->data, t->end - t->begin);
        }
    swift_st_set_close(&a);
    swift_st_set_close(&m);
    /* a modules_to_save tensor the base lacks is an adapter/base mismatch */
    make_adapter(FIX "qwen2_5_vl");
    rewrite_adapter(1, bias, 32);
    char msg[2048] = "";
    FILE *fp = fmemopen(msg, sizeof(msg), "w");
    swift_error_set_stream(fp);
    struct swift_export_opts o = {
        .model_dir = FIX "qwen2_5_vl", .output = outdir, .merge_lora = adir, .force = 1};
    int rc = swift_export_run(&o);
    swift_error_set_stream(NULL);
    fclose(fp);
    assert_int_equal(rc, -1);
    assert_non_null(strstr(msg, "adapter/base mismatch"));
    assert_non_null(strstr(msg, "'base_model.model.visual.merger.mlp.9.bias'"));
}

/* swift-train's VL adapters are named after transformers 5's module tree (peft loads them onto
 * Qwen2VLForConditionalGeneration); adapters in the hub's layout still load */
static void test_adapter_names(void **state)
{
    (void)state;
    make_adapter(FIX "qwen2_vl");
    char *p = swift_path_join(adir, "adapter_model.safetensors");
    struct swift_safetensors st;
    assert_int_equal(swift_safetensors_open(&st, p), 0);
    assert_non_null(swift_safetensors_find(
        &st, "base_model.model.model.language_model.layers.0.self_attn.q_proj.lora_A.weight"));
    assert_non_null(swift_safetensors_find(
        &st, "base_model.model.model.language_model.layers.1.mlp.down_proj.lora_B.weight"));
    swift_safetensors_close(&st);
    free(p);
    size_t n1, n2;
    float *a = logits_of(FIX "qwen2_vl", adir, &n1);
    rewrite_adapter(0, NULL, 0); /* to model.layers.* */
    float *b = logits_of(FIX "qwen2_vl", adir, &n2);
    assert_int_equal(n1, n2);
    assert_memory_equal(a, b, n1 * sizeof(float));
    free(a);
    free(b);
}

/* gguf tensor `name` (F32 or F16) as floats; its element count into *n */
static float *gguf_floats(const struct swift_gguf *g, const char *name, size_t *n)
{
    long i = swift_gguf_find_tensor(g, name);
    if (i < 0)
        fail_msg("mmproj lacks %s", name);
    const struct swift_gguf_tensor *t = &g->tensors[i];
    *n = (size_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
    float *o = malloc(*n * sizeof(float) + 4);
    for (size_t k = 0; k < *n; k++)
        o[k] = t->type == SWIFT_GGML_F32 ? ((const float *)t->data)[k]
                                         : swift_fp16_to_fp32(((const uint16_t *)t->data)[k]);
    return o;
}

/* the safetensors tensor of a fixture as floats */
static float *st_floats(const struct swift_st_set *set, const char *name, size_t *n)
{
    const struct swift_st_tensor *t = swift_st_set_find(set, name);
    if (!t)
        fail_msg("fixture lacks %s", name);
    *n = t->numel;
    float *o = malloc(t->numel * sizeof(float) + 4);
    assert_int_equal(swift_st_tensor_to_f32(t, o), 0);
    return o;
}

/* --mmproj (f32): the slices llama.cpp's converter makes, value for value: qkv rows and bias
 * thirds, the patch embedding's temporal taps; the merger copied */
static void test_mmproj_values(void **state)
{
    (void)state;
    char path[400];
    snprintf(path, sizeof(path), "%s/mmproj.gguf", tmp);
    struct swift_export_opts o = {
        .model_dir = FIX "qwen2_vl", .output = path, .dtype = "f32", .mmproj = path};
    fflush(stdout);
    int saved = dup(1), null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    int rc = swift_export_mmproj(&o, FIX "qwen2_vl");
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    close(null);
    assert_int_equal(rc, 0);
    struct swift_gguf *g = NULL;
    assert_int_equal(swift_gguf_open(path, &g), 0);
    struct swift_st_set set = {0};
    assert_int_equal(swift_st_set_open(&set, FIX "qwen2_vl"), 0);
    size_t n, m;
    const int E = 16, P = 14 * 14;
    for (int k = 0; k < 3; k++) { /* block 1's qkv: rows and bias in thirds */
        char nm[64];
        float *w = st_floats(&set, "model.visual.blocks.1.attn.qkv.weight", &m);
        snprintf(nm, sizeof(nm), "v.blk.1.attn_%c.weight", "qkv"[k]);
        float *gw = gguf_floats(g, nm, &n);
        assert_int_equal(n, (size_t)E * E);
        assert_memory_equal(gw, w + (size_t)k * E * E, n * sizeof(float));
        free(w);
        free(gw);
        w = st_floats(&set, "model.visual.blocks.1.attn.qkv.bias", &m);
        snprintf(nm, sizeof(nm), "v.blk.1.attn_%c.bias", "qkv"[k]);
        gw = gguf_floats(g, nm, &n);
        assert_int_equal(n, (size_t)E);
        assert_memory_equal(gw, w + (size_t)k * E, n * sizeof(float));
        free(w);
        free(gw);
    }
    float *pe = st_floats(&set, "model.visual.patch_embed.proj.weight", &m); /* (E, 3, 2, P) */
    for (int kt = 0; kt < 2; kt++) {
        float *gp = gguf_floats(g, kt ? "v.patch_embd.weight.1" : "v.patch_embd.weight", &n);
        assert_int_equal(n, (size_t)E * 3 * P);
        for (size_t ec = 0; ec < (size_t)E * 3; ec++)
            for (int i = 0; i < P; i++) {
                float want = pe[(ec * 2 + (size_t)kt) * P + (size_t)i];
                assert_true(fabsf(gp[ec * P + (size_t)i] - want) <= 1e-3f * fabsf(want) + 1e-7f);
            }
        free(gp);
    }
    free(pe);
    float *a = st_floats(&set, "model.visual.merger.mlp.2.weight", &m);
    float *b = gguf_floats(g, "mm.2.weight", &n);
    assert_int_equal(n, m);
    assert_memory_equal(a, b, n * sizeof(float));
    free(a);
    free(b);
    swift_st_set_close(&set);
    swift_gguf_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_adapter_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mmproj_values, setup, teardown),
        cmocka_unit_test_setup_teardown(test_qwen2_vl_module_layout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_qwen2_5_vl_hub_layout, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_hub_layout_adapter_and_modules_to_save, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
