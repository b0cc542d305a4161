/* Qwen2-VL and Qwen2.5-VL (lib/model/vlm.h) against transformers 5.24 on the committed fixtures
 * of tests/ref/gen_vlm_fixtures.py: tiny random models, two images of different grids in row 0
 * and a text-only row 1. Checked: the M-RoPE positions (exact), the merged image embeddings,
 * logits and loss (1e-5 relative to the largest reference value; measured about 1e-6), and the
 * gradients of the patch embedding, ViT block 0, the merger, LLM layer 0, embed_tokens, the final
 * norm and lm_head (5e-5 relative to each tensor's largest entry; measured at most 3.1e-6;
 * float32, OpenBLAS vs torch). Qwen2-VL's fixture has transformers' module key layout
 * (model.visual.*, model.language_model.*), Qwen2.5-VL's the hub's (visual.*, model.*); the flat
 * config.json of the first hub checkpoints (rope_scaling {type: mrope}) loads the same model.
 * Then: freeze groups (a frozen group has no gradients, the others' are bit for bit unchanged),
 * LoRA on the language model with the ViT frozen lowers the loss, the strict CPU table gives the
 * CPU's bits (no host access to backend memory), and bad batches are errors. Packing: the
 * samples [row 1, row 0, row 1] in one row (positions restarting at each) give the logits, the
 * loss and every gradient of the same samples run one a row, to float tolerance, for both models
 * (so packing is tied to transformers through the one-a-row checks above), and the same row
 * against transformers' own packed path (tests/ref/gen_vlm_packed.py): positions, logits, loss,
 * gradients. */
#include "lib/model/vlm.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include <cmocka.h>
#include <jansson.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/ops.h"
#include "lib/formats/safetensors.h"
#include "lib/model/lora.h"
#include "lib/model/adapter.h"
#include "lib/core/fileio.h"

#define FIX "tests/fixtures/vlm/"

struct vin {
    struct swift_safetensors st;
    struct swift_vlm_batch b;
    int32_t *tok, *tgt, *grid;
    float *pix;
};

static void *tensor(struct swift_safetensors *st, const char *name, size_t *numel)
{
    const struct swift_st_tensor *t = swift_safetensors_find(st, name);
    if (!t)
        fail_msg("fixture lacks %s", name);
    *numel = (size_t)t->numel;
    if (t->dtype == SWIFT_DTYPE_I32) {
        int32_t *o = malloc(*numel * sizeof(int32_t) + 4);
        memcpy(o, t->data, *numel * sizeof(int32_t));
        return o;
    }
    float *o = malloc(*numel * sizeof(float) + 4);
    assert_int_equal(swift_st_tensor_to_f32(t, o), 0);
    return o;
}

static void vin_open(struct vin *in)
{
    assert_int_equal(swift_safetensors_open(&in->st, FIX "inputs.safetensors"), 0);
    size_t n, ng, np;
    in->tok = tensor(&in->st, "input_ids", &n);
    int32_t *lab = tensor(&in->st, "labels", &n);
    in->grid = tensor(&in->st, "image_grid_thw", &ng);
    in->pix = tensor(&in->st, "pixel_values", &np);
    const struct swift_st_tensor *ids = swift_safetensors_find(&in->st, "input_ids");
    int B = (int)ids->shape[0], T = (int)ids->shape[1];
    in->tgt = malloc(n * sizeof(int32_t));
    for (int r = 0; r < B; r++)
        for (int t = 0; t < T; t++) { /* transformers' shift: token t predicts label t+1 */
            size_t i = (size_t)r * T + t;
            in->tgt[i] = t + 1 < T && lab[i + 1] != -100 ? lab[i + 1] : -1;
        }
    free(lab);
    struct swift_vlm_batch b = {.B = B,
                                .T = T,
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

/* max |a - b| / max |b| */
static double rel(const float *a, const float *b, size_t n)
{
    double d = 0, r = 1e-30;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        r = fmax(r, fabs((double)b[i]));
    }
    return d / r;
}

static long trained(const struct vin *in)
{
    long c = 0;
    for (int i = 0; i < in->b.B * in->b.T; i++)
        c += in->tgt[i] >= 0;
    return c;
}

/* forward + backward; loss into *lossv */
static void step(struct swift_vlm *v, struct vin *in, double *lossv)
{
    struct swift_loss l = {0};
    swift_vlm_zero_grad(v);
    assert_int_equal(swift_vlm_forward(v, &in->b, &l, 1.0f / (float)trained(in)), 0);
    *lossv = l.sum / (double)l.count;
    swift_vlm_backward(v, &in->b);
}

static void check_forward(struct swift_vlm *v, struct vin *in, struct swift_safetensors *ref)
{
    struct swift_loss l = {0};
    assert_int_equal(swift_vlm_forward(v, &in->b, &l, 0.0f), 0);
    size_t n;
    int32_t *pos = tensor(ref, "position_ids", &n);
    int32_t *ours = malloc(n * sizeof(int32_t));
    assert_int_equal(
        swift_vlm_rope_index(
            &v->vc, in->b.tokens, in->b.B, in->b.T, in->b.grid_thw, in->b.nimages, ours),
        0);
    assert_memory_equal(ours, pos, n * sizeof(int32_t));
    free(ours);
    free(pos);
    float *emb = tensor(ref, "image_embeds", &n);
    int nm = swift_vlm_image_embeds(v, NULL);
    assert_int_equal((size_t)nm * v->llm.cfg.hidden_size, n);
    float *me = malloc(n * sizeof(float));
    assert_int_equal(swift_vlm_image_embeds(v, me), nm);
    double e = rel(me, emb, n);
    free(me);
    printf("# %s: image embeds rel %.2e\n", v->vc.model_type, e);
    assert_true(e < 1e-5);
    free(emb);
    float *lg = tensor(ref, "logits", &n);
    e = rel(swift_vlm_logits(v), lg, n);
    printf("# %s: logits rel %.2e\n", v->vc.model_type, e);
    assert_true(e < 1e-5);
    free(lg);
    float *lr = tensor(ref, "loss", &n);
    double ours_loss = l.sum / (double)l.count;
    printf("# %s: loss %.7f ref %.7f\n", v->vc.model_type, ours_loss, lr[0]);
    assert_true(fabs(ours_loss - lr[0]) <= 1e-5 * fabs(lr[0]));
    free(lr);
}

/* every grad.<name> of the reference against ours; returns how many were checked */
static int check_grads(struct swift_vlm *v, struct swift_safetensors *ref, double tol)
{
    int checked = 0;
    double worst = 0;
    for (size_t i = 0; i < ref->ntensors; i++) {
        const char *nm = ref->tensors[i].name;
        if (strncmp(nm, "grad.", 5))
            continue;
        struct swift_param *p = swift_vlm_param(v, nm + 5);
        if (!p)
            fail_msg("no parameter %s", nm + 5);
        assert_non_null(p->g);
        size_t n;
        float *g = tensor(ref, nm, &n);
        assert_int_equal(n, p->numel);
        double e = rel(p->g, g, n);
        if (e > worst)
            worst = e;
        if (e >= tol)
            fail_msg("%s: gradient off by %.2e of its largest entry", nm + 5, e);
        free(g);
        checked++;
    }
    printf("# %s: %d gradients, worst rel %.2e\n", v->vc.model_type, checked, worst);
    return checked;
}

static void check_kind(const char *kind)
{
    char dir[128], rp[160];
    snprintf(dir, sizeof(dir), FIX "%s", kind);
    snprintf(rp, sizeof(rp), FIX "%s/ref.safetensors", kind);
    struct vin in;
    vin_open(&in);
    struct swift_safetensors ref;
    assert_int_equal(swift_safetensors_open(&ref, rp), 0);
    struct swift_vlm v;
    assert_int_equal(swift_vlm_load(&v, dir, &swift_cpu_ops, 0), 0);
    assert_string_equal(v.vc.model_type, kind);
    check_forward(&v, &in, &ref);
    double loss;
    step(&v, &in, &loss);
    assert_true(check_grads(&v, &ref, 5e-5) >= 30);
    swift_safetensors_close(&ref);
    swift_vlm_free(&v);
    vin_close(&in);
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

/* the gradient of a parameter as a host copy */
static float *grad_of(struct swift_vlm *v, const char *name)
{
    struct swift_param *p = swift_vlm_param(v, name);
    assert_non_null(p);
    if (!p->g)
        return NULL;
    float *g = malloc(p->numel * sizeof(float));
    memcpy(g, p->g, p->numel * sizeof(float));
    return g;
}

/* freezing a group drops its gradients and leaves the others' as they were */
static void test_freeze(void **state)
{
    (void)state;
    static const char *const names[3] = {"visual.blocks.0.attn.qkv.weight",
                                         "visual.merger.mlp.0.weight",
                                         "model.layers.0.mlp.up_proj.weight"};
    struct vin in;
    vin_open(&in);
    struct swift_vlm v;
    assert_int_equal(swift_vlm_load(&v, FIX "qwen2_vl", &swift_cpu_ops, 0), 0);
    double l0, l1;
    step(&v, &in, &l0);
    float *full[3];
    for (int k = 0; k < 3; k++)
        full[k] = grad_of(&v, names[k]);
    swift_vlm_free(&v);
    static const int masks[] = {SWIFT_VLM_VIT,
                                SWIFT_VLM_ALIGNER,
                                SWIFT_VLM_LLM,
                                SWIFT_VLM_VIT | SWIFT_VLM_ALIGNER,
                                SWIFT_VLM_LLM | SWIFT_VLM_ALIGNER};
    for (size_t t = 0; t < sizeof(masks) / sizeof(masks[0]); t++) {
        assert_int_equal(swift_vlm_load(&v, FIX "qwen2_vl", &swift_cpu_ops, masks[t]), 0);
        step(&v, &in, &l1);
        assert_true(l1 == l0);
        for (int k = 0; k < 3; k++) {
            float *g = grad_of(&v, names[k]);
            struct swift_param *p = swift_vlm_param(&v, names[k]);
            if (masks[t] & (1 << k)) {
                assert_null(g);
                continue;
            }
            assert_non_null(g);
            assert_memory_equal(g, full[k], p->numel * sizeof(float));
            free(g);
        }
        swift_vlm_free(&v);
    }
    for (int k = 0; k < 3; k++)
        free(full[k]);
    vin_close(&in);
}

/* the older flat config.json (the text keys at the top, rope_scaling {type: mrope}) of the hub's
 * first Qwen2-VL checkpoints: the same model as the nested layout */
static void test_flat_config(void **state)
{
    (void)state;
    json_t *root = json_load_file(FIX "qwen2_vl/config.json", 0, NULL);
    assert_non_null(root);
    json_t *text = json_incref(json_object_get(root, "text_config"));
    json_object_del(root, "text_config");
    const char *key;
    json_t *val;
    json_object_foreach(text, key, val)
    {
        if (strcmp(key, "model_type") && strcmp(key, "rope_parameters"))
            json_object_set(root, key, val);
    }
    json_decref(text);
    json_object_set_new(root, "rope_theta", json_real(10000.0));
    json_object_set_new(root,
                        "rope_scaling",
                        json_pack("{s:s,s:[i,i,i]}", "type", "mrope", "mrope_section", 2, 3, 3));
    char dir[] = "/tmp/swift-vlm-XXXXXX", path[64], target[4096];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/config.json", dir);
    assert_int_equal(json_dump_file(root, path, JSON_INDENT(2)), 0);
    json_decref(root);
    assert_non_null(realpath(FIX "qwen2_vl/model.safetensors", target));
    char link[64];
    snprintf(link, sizeof(link), "%s/model.safetensors", dir);
    assert_int_equal(symlink(target, link), 0);
    struct vin in;
    vin_open(&in);
    struct swift_safetensors ref;
    assert_int_equal(swift_safetensors_open(&ref, FIX "qwen2_vl/ref.safetensors"), 0);
    struct swift_vlm v;
    assert_int_equal(swift_vlm_load(&v, dir, &swift_cpu_ops, 0), 0);
    assert_int_equal(v.vc.mrope_section[1], 3);
    check_forward(&v, &in, &ref);
    swift_vlm_free(&v);
    swift_safetensors_close(&ref);
    vin_close(&in);
    unlink(link);
    unlink(path);
    rmdir(dir);
}

/* LoRA on the language model with the ViT frozen, the merger trained: plain SGD on the LoRA
 * factors and the merger lowers the loss over 6 steps; the ViT and the base weights keep no
 * gradients */
static void sgd(struct swift_param *p, int n, float lr)
{
    for (int i = 0; i < n; i++)
        for (size_t j = 0; p[i].g && j < p[i].numel; j++)
            p[i].w[j] -= lr * p[i].g[j];
}

static void test_lora_frozen_vit(void **state)
{
    (void)state;
    struct vin in;
    vin_open(&in);
    struct swift_vlm v;
    assert_int_equal(
        swift_vlm_load(&v, FIX "qwen2_vl", &swift_cpu_ops, SWIFT_VLM_VIT | SWIFT_VLM_LLM), 0);
    struct swift_lora_opts lo = {
        .rank = 4, .alpha = 8, .dropout = 0, .targets = "all-linear", .seed = 7};
    assert_int_equal(swift_lora_attach(&v.llm, &lo), 0);
    assert_null(swift_vlm_param(&v, "visual.blocks.0.attn.qkv.weight")->g);
    assert_null(swift_vlm_param(&v, "model.layers.0.self_attn.q_proj.weight")->g);
    assert_non_null(swift_vlm_param(&v, "visual.merger.mlp.0.weight")->g);
    assert_int_equal(swift_vlm_param_group(&v, swift_vlm_param(&v, "visual.merger.ln_q.weight")),
                     SWIFT_VLM_ALIGNER);
    assert_int_equal(swift_vlm_param_group(&v, swift_vlm_param(&v, "visual.blocks.1.norm2.bias")),
                     SWIFT_VLM_VIT);
    assert_int_equal(swift_vlm_param_group(&v, &v.llm.lp[0]), SWIFT_VLM_LLM);
    double first = 0, loss = 0;
    for (int s = 0; s < 6; s++) {
        step(&v, &in, &loss);
        if (s == 0)
            first = loss;
        sgd(v.llm.lp, v.llm.nlp, 0.5f);
        sgd(v.vp, v.nvp, 0.5f);
    }
    printf("# lora + merger, frozen vit: loss %.4f -> %.4f\n", first, loss);
    assert_true(loss < first - 0.05);
    swift_vlm_free(&v);
    vin_close(&in);
}

/* The adapter with the trained aligner beside it (modules_to_save) and the whole model as an HF
 * directory, written and read back bit for bit; a plain adapter reader refuses the vision
 * tensors; a copy of a parameter keeps its group */
static int same(struct swift_param *a, struct swift_param *b)
{
    return a->numel == b->numel && !memcmp(a->w, b->w, a->numel * sizeof(float));
}

static void test_save_load(void **state)
{
    (void)state;
    struct vin in;
    vin_open(&in);
    struct swift_vlm v, w;
    assert_int_equal(
        swift_vlm_load(&v, FIX "qwen2_vl", &swift_cpu_ops, SWIFT_VLM_VIT | SWIFT_VLM_LLM), 0);
    struct swift_lora_opts lo = {
        .rank = 4, .alpha = 8, .dropout = 0, .targets = "all-linear", .seed = 7};
    assert_int_equal(swift_lora_attach(&v.llm, &lo), 0);
    double loss;
    step(&v, &in, &loss);
    sgd(v.llm.lp, v.llm.nlp, 0.5f);
    sgd(v.vp, v.nvp, 0.5f);
    struct swift_param cp = *swift_vlm_param(&v, "visual.merger.mlp.2.bias");
    assert_int_equal(swift_vlm_param_group(&v, &cp), SWIFT_VLM_ALIGNER);
    char dir[] = "/tmp/swift-vlm-XXXXXX";
    assert_non_null(mkdtemp(dir));
    assert_int_equal(swift_vlm_lora_save(&v, &lo, dir, FIX "qwen2_vl"), 0);
    struct swift_adapter ad;
    assert_int_equal(swift_adapter_open(&ad, dir), -1); /* merge/eval: not theirs to load */
    swift_adapter_close(&ad);
    assert_int_equal(swift_adapter_open_full(&ad, dir), 0);
    assert_int_equal((int)ad.nfull, 6); /* the merger: 2 norm, 4 linear tensors */
    swift_adapter_close(&ad);
    assert_int_equal(swift_vlm_load(&w, FIX "qwen2_vl", &swift_cpu_ops, 7), 0);
    struct swift_lora_opts lo2;
    assert_int_equal(swift_vlm_lora_load(&w, dir, &lo2), 0);
    for (int i = 0; i < v.nvp; i++)
        assert_true(same(&v.vp[i], &w.vp[i]));
    assert_int_equal(w.llm.nlp, v.llm.nlp);
    for (int i = 0; i < v.llm.nlp; i++)
        assert_true(same(&v.llm.lp[i], &w.llm.lp[i]));
    swift_vlm_free(&w);
    /* the whole model (the merged adapters aside): the input's keys, reloaded as they were */
    char full[64];
    snprintf(full, sizeof(full), "%s/full", dir);
    assert_int_equal(mkdir(full, 0755), 0);
    assert_int_equal(swift_vlm_save(&v, full, FIX "qwen2_vl"), 0);
    assert_int_equal(swift_vlm_load(&w, full, &swift_cpu_ops, 7), 0);
    for (int i = 0; i < v.nvp; i++)
        assert_true(same(&v.vp[i], &w.vp[i]));
    for (int i = 0; i < v.llm.np; i++)
        assert_true(same(&v.llm.p[i], &w.llm.p[i]));
    swift_vlm_free(&w);
    swift_vlm_free(&v);
    vin_close(&in);
    assert_int_equal(swift_remove_tree(dir), 0);
}

/* the strict CPU table (backend memory unreadable by the host, as a GPU's): the library never
 * touches it directly, and the logits and a gradient are the CPU's bit for bit */
static void test_strict_host(void **state)
{
    (void)state;
    struct vin in;
    vin_open(&in);
    const struct swift_ops *tabs[2] = {&swift_cpu_ops, &swift_cpu_strict_ops};
    float *lg[2], *g[2];
    size_t nl = 0, ng = 0;
    for (int t = 0; t < 2; t++) {
        struct swift_vlm v;
        assert_int_equal(swift_vlm_load(&v, FIX "qwen2_5_vl", tabs[t], 0), 0);
        struct swift_loss l = {0};
        swift_vlm_zero_grad(&v);
        assert_int_equal(swift_vlm_forward(&v, &in.b, &l, 1.0f / (float)trained(&in)), 0);
        nl = (size_t)in.b.B * in.b.T * v.llm.cfg.vocab_size;
        lg[t] = malloc(nl * sizeof(float));
        tabs[t]->download(lg[t], swift_vlm_logits(&v), nl * sizeof(float));
        swift_vlm_backward(&v, &in.b);
        struct swift_param *p = swift_vlm_param(&v, "visual.patch_embed.proj.weight");
        ng = p->numel;
        g[t] = malloc(ng * sizeof(float));
        tabs[t]->download(g[t], p->g, ng * sizeof(float));
        swift_vlm_free(&v);
    }
    assert_memory_equal(lg[0], lg[1], nl * sizeof(float));
    assert_memory_equal(g[0], g[1], ng * sizeof(float));
    for (int t = 0; t < 2; t++) {
        free(lg[t]);
        free(g[t]);
    }
    vin_close(&in);
}

/* pads that do not match the grids, a video grid, pixels that do not match: errors */
static void test_bad_batches(void **state)
{
    (void)state;
    struct vin in;
    vin_open(&in);
    struct swift_vlm v;
    assert_int_equal(swift_vlm_load(&v, FIX "qwen2_5_vl", &swift_cpu_ops, 0), 0);
    struct swift_loss l = {0};
    struct swift_vlm_batch b = in.b;
    b.nimages = 1; /* image 1's pads without its grid */
    b.npatches = 24;
    assert_int_equal(swift_vlm_forward(&v, &b, &l, 0.0f), -1);
    b = in.b;
    b.npatches -= 4;
    assert_int_equal(swift_vlm_forward(&v, &b, &l, 0.0f), -1);
    int32_t grid[6];
    memcpy(grid, in.grid, sizeof(grid));
    grid[0] = 2; /* a video */
    b = in.b;
    b.grid_thw = grid;
    assert_int_equal(swift_vlm_forward(&v, &b, &l, 0.0f), -1);
    memcpy(grid, in.grid, sizeof(grid));
    grid[1] = 3; /* not a multiple of the merge size */
    assert_int_equal(swift_vlm_forward(&v, &b, &l, 0.0f), -1);
    int32_t *tok = malloc((size_t)in.b.B * in.b.T * sizeof(int32_t));
    memcpy(tok, in.tok, (size_t)in.b.B * in.b.T * sizeof(int32_t));
    tok[5] = 3; /* one pad fewer than image 0 needs */
    b = in.b;
    b.tokens = tok;
    assert_int_equal(swift_vlm_forward(&v, &b, &l, 0.0f), -1);
    free(tok);
    assert_int_equal(swift_vlm_forward(&v, &in.b, &l, 0.0f), 0); /* still usable */
    swift_vlm_free(&v);
    vin_close(&in);
    assert_int_equal(swift_vlm_load(&v, "tests/fixtures/model/qwen2", &swift_cpu_ops, 0), -1);
}

/* the fixture's samples [row 1, row 0, row 1]: three rows of T, or one packed row of 3T */
struct trio {
    int32_t tok[3 * 64], tgt[3 * 64], pos[3 * 64];
    struct swift_vlm_batch rows, packed;
};

static void trio_make(struct trio *o, const struct vin *in)
{
    int T = in->b.T;
    assert_int_equal(in->b.B, 2);
    assert_true(T <= 64);
    static const int order[3] = {1, 0, 1};
    for (int k = 0; k < 3; k++)
        for (int t = 0; t < T; t++) {
            o->tok[k * T + t] = in->tok[order[k] * T + t];
            o->tgt[k * T + t] = in->tgt[order[k] * T + t]; /* the last token of each: -1 */
            o->pos[k * T + t] = t;
        }
    o->rows = in->b;
    o->rows.B = 3;
    o->rows.tokens = o->tok;
    o->rows.targets = o->tgt;
    o->packed = o->rows;
    o->packed.B = 1;
    o->packed.T = 3 * T;
    o->packed.pos = o->pos;
}

/* loss, logits (copied) and every gradient (copied, in the order of vp then llm.p) */
struct run_out {
    struct swift_loss l;
    float *logits, *grads;
    size_t nlogits, ngrads;
};

static void run_batch(struct swift_vlm *v, const struct swift_vlm_batch *b, struct run_out *o)
{
    memset(o, 0, sizeof(*o));
    swift_vlm_zero_grad(v);
    assert_int_equal(swift_vlm_forward(v, b, &o->l, 1.0f), 0);
    o->nlogits = (size_t)b->B * b->T * v->llm.cfg.vocab_size;
    o->logits = malloc(o->nlogits * sizeof(float));
    memcpy(o->logits, swift_vlm_logits(v), o->nlogits * sizeof(float));
    swift_vlm_backward(v, b);
    size_t n = v->nvparams;
    for (int i = 0; i < v->llm.np; i++)
        n += v->llm.p[i].numel;
    o->grads = malloc(n * sizeof(float));
    for (int i = 0; i < v->nvp; i++) {
        assert_non_null(v->vp[i].g);
        memcpy(o->grads + o->ngrads, v->vp[i].g, v->vp[i].numel * sizeof(float));
        o->ngrads += v->vp[i].numel;
    }
    for (int i = 0; i < v->llm.np; i++) {
        assert_non_null(v->llm.p[i].g);
        memcpy(o->grads + o->ngrads, v->llm.p[i].g, v->llm.p[i].numel * sizeof(float));
        o->ngrads += v->llm.p[i].numel;
    }
}

static void check_packed(const char *kind)
{
    char dir[128];
    snprintf(dir, sizeof(dir), FIX "%s", kind);
    struct vin in;
    vin_open(&in);
    struct trio tr;
    trio_make(&tr, &in);
    struct swift_vlm v;
    assert_int_equal(swift_vlm_load(&v, dir, &swift_cpu_ops, 0), 0);
    struct run_out a, b;
    run_batch(&v, &tr.rows, &a);
    run_batch(&v, &tr.packed, &b);
    assert_int_equal(a.l.count, b.l.count);
    assert_int_equal(a.l.correct, b.l.correct);
    double el = fabs(a.l.sum - b.l.sum) / a.l.sum, lg = rel(b.logits, a.logits, a.nlogits);
    /* each parameter's gradient against its own largest entry */
    double worst = 0;
    size_t off = 0;
    for (int i = 0; i < v.nvp + v.llm.np; i++) {
        const struct swift_param *p = i < v.nvp ? &v.vp[i] : &v.llm.p[i - v.nvp];
        double e = rel(b.grads + off, a.grads + off, p->numel);
        if (e > 1e-5)
            fail_msg("%s %s: packed gradient off by %.2e", kind, p->name, e);
        worst = fmax(worst, e);
        off += p->numel;
    }
    printf("# %s packed [1,0,1] vs one a row: loss %.7f vs %.7f (rel %.1e), logits rel %.1e, "
           "%d gradients worst rel %.1e\n",
           kind,
           b.l.sum / (double)b.l.count,
           a.l.sum / (double)a.l.count,
           el,
           lg,
           v.nvp + v.llm.np,
           worst);
    assert_true(el < 1e-6);
    assert_true(lg < 1e-5);
    free(a.logits);
    free(a.grads);
    free(b.logits);
    free(b.grads);
    /* the same row without its documents' positions: attention and M-RoPE run across the
     * samples, and the loss is not the samples' */
    struct swift_vlm_batch nopos = tr.packed;
    nopos.pos = NULL;
    struct swift_loss l = {0};
    assert_int_equal(swift_vlm_forward(&v, &nopos, &l, 0.0f), 0);
    assert_true(fabs(l.sum - a.l.sum) > 1e-3 * a.l.sum);
    swift_vlm_free(&v);
    vin_close(&in);
}

static void test_packed_qwen2_vl(void **state)
{
    (void)state;
    check_packed("qwen2_vl");
}

static void test_packed_qwen2_5_vl(void **state)
{
    (void)state;
    check_packed("qwen2_5_vl");
}

/* transformers' packed path (tests/ref/gen_vlm_packed.py: the same [1, 0, 1] row with text
 * positions restarting per sample and each sample's get_rope_index): our M-RoPE positions of the
 * row, its logits, loss and gradients against transformers' directly */
static void check_packed_hf(const char *kind)
{
    char dir[128], rp[160];
    snprintf(dir, sizeof(dir), FIX "%s", kind);
    snprintf(rp, sizeof(rp), FIX "%s/packed.safetensors", kind);
    struct vin in;
    vin_open(&in);
    struct swift_safetensors ref;
    assert_int_equal(swift_safetensors_open(&ref, rp), 0);
    size_t n, np;
    int32_t *tok = tensor(&ref, "input_ids", &n);
    int32_t *lab = tensor(&ref, "labels", &n);
    int32_t *hpos = tensor(&ref, "position_ids", &np); /* (4, 1, N): text, t, h, w */
    assert_int_equal(np, 4 * n);
    int32_t *tgt = malloc(n * sizeof(int32_t)), *pos3 = malloc(3 * n * sizeof(int32_t));
    for (size_t t = 0; t < n; t++)
        tgt[t] = t + 1 < n && lab[t + 1] != -100 ? lab[t + 1] : -1;
    struct swift_vlm_batch b = in.b;
    b.B = 1;
    b.T = (int)n;
    b.tokens = tok;
    b.targets = tgt;
    b.pos = hpos; /* the text positions: 0.. at each sample */
    struct swift_vlm v;
    assert_int_equal(swift_vlm_load(&v, dir, &swift_cpu_ops, 0), 0);
    assert_int_equal(
        swift_vlm_rope_index_docs(&v.vc, tok, hpos, 1, (int)n, b.grid_thw, b.nimages, pos3), 0);
    assert_memory_equal(pos3, hpos + n, 3 * n * sizeof(int32_t));
    long cnt = 0;
    for (size_t t = 0; t < n; t++)
        cnt += tgt[t] >= 0;
    struct swift_loss l = {0}, l2 = {0};
    assert_int_equal(swift_vlm_forward(&v, &b, &l, 0.0f), 0); /* logits kept (no gradient) */
    size_t nl;
    float *lg = tensor(&ref, "logits", &nl);
    double e = rel(swift_vlm_logits(&v), lg, nl);
    float *lr = tensor(&ref, "loss", &nl);
    double ours = l.sum / (double)l.count;
    printf("# %s packed vs transformers' packed: logits rel %.2e, loss %.7f ref %.7f\n",
           kind,
           e,
           ours,
           lr[0]);
    assert_true(e < 1e-5);
    assert_true(fabs(ours - lr[0]) <= 1e-5 * fabs(lr[0]));
    swift_vlm_zero_grad(&v);
    assert_int_equal(swift_vlm_forward(&v, &b, &l2, 1.0f / (float)cnt), 0);
    assert_true(l2.sum == l.sum);
    swift_vlm_backward(&v, &b);
    assert_true(check_grads(&v, &ref, 5e-5) >= 30);
    free(lg);
    free(lr);
    free(tok);
    free(lab);
    free(hpos);
    free(tgt);
    free(pos3);
    swift_vlm_free(&v);
    swift_safetensors_close(&ref);
    vin_close(&in);
}

static void test_packed_hf_qwen2_vl(void **state)
{
    (void)state;
    check_packed_hf("qwen2_vl");
}

static void test_packed_hf_qwen2_5_vl(void **state)
{
    (void)state;
    check_packed_hf("qwen2_5_vl");
}

/* packed positions that do not restart at 0 or count up, an image across a document start */
static void test_packed_bad(void **state)
{
    (void)state;
    struct vin in;
    vin_open(&in);
    struct trio tr;
    trio_make(&tr, &in);
    struct swift_vlm v;
    assert_int_equal(swift_vlm_load(&v, FIX "qwen2_vl", &swift_cpu_ops, 0), 0);
    struct swift_loss l = {0};
    int T = in.b.T;
    tr.pos[T + 3] = 7; /* does not count up */
    assert_int_equal(swift_vlm_forward(&v, &tr.packed, &l, 0.0f), -1);
    tr.pos[T + 3] = 3;
    tr.pos[0] = 1; /* a row must start a document */
    assert_int_equal(swift_vlm_forward(&v, &tr.packed, &l, 0.0f), -1);
    tr.pos[0] = 0;
    int p = T; /* a document starting inside row 0's first image */
    while (tr.tok[p] != v.vc.image_token_id)
        p++;
    for (int t = p + 1; t < 2 * T; t++)
        tr.pos[t] = t - (p + 1);
    assert_int_equal(swift_vlm_forward(&v, &tr.packed, &l, 0.0f), -1);
    for (int t = T; t < 2 * T; t++)
        tr.pos[t] = t - T;
    assert_int_equal(swift_vlm_forward(&v, &tr.packed, &l, 0.0f), 0);
    swift_vlm_free(&v);
    vin_close(&in);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_qwen2_vl),
        cmocka_unit_test(test_qwen2_5_vl),
        cmocka_unit_test(test_flat_config),
        cmocka_unit_test(test_freeze),
        cmocka_unit_test(test_lora_frozen_vit),
        cmocka_unit_test(test_save_load),
        cmocka_unit_test(test_strict_host),
        cmocka_unit_test(test_bad_batches),
        cmocka_unit_test(test_packed_qwen2_vl),
        cmocka_unit_test(test_packed_qwen2_5_vl),
        cmocka_unit_test(test_packed_hf_qwen2_vl),
        cmocka_unit_test(test_packed_hf_qwen2_5_vl),
        cmocka_unit_test(test_packed_bad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
