/* model + lora + optim against transformers/peft: logits, loss, every gradient and the
 * parameters after 3 AdamW steps, on the committed fixtures of tests/ref/gen_model_fixtures.py
 * (tiny random Llama with llama3 RoPE scaling and untied head, Qwen2 with QKV bias, tied head and
 * sharded weights, Qwen3 with QK-norm and explicit head_dim; row 1 of the batch packs two
 * documents). Tolerances (float32, OpenBLAS vs torch): logits and loss 1e-4 absolute, gradients
 * 1e-3 relative to each tensor's largest entry, parameters after 1 AdamW step 1e-5
 * absolute (well-conditioned elements), after 3 steps (continuing from the
 * reference's step-1 parameters) 5e-5, losses 2e-5. */
#include "lib/model/model.h"

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

#include "kernels/ops.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/model/lora.h"
#include "lib/train/optim.h"
#include "lib/formats/safetensors.h"

#define FIX "tests/fixtures/model/"

struct fx {
    struct swift_safetensors st;
    int B, T;
    int32_t *tok, *tgt, *pos;
};

static const float *fget(struct fx *f, const char *name, size_t numel)
{
    const struct swift_st_tensor *t = swift_safetensors_find(&f->st, name);
    if (!t)
        fail_msg("fixture lacks %s", name);
    assert_int_equal(t->numel, numel);
    static float *buf;
    static size_t cap;
    if (numel > cap) {
        buf = realloc(buf, numel * sizeof(float));
        cap = numel;
    }
    assert_int_equal(swift_st_tensor_to_f32(t, buf), 0);
    return buf;
}

static void fx_open(struct fx *f, const char *path)
{
    assert_int_equal(swift_safetensors_open(&f->st, path), 0);
    const struct swift_st_tensor *ids = swift_safetensors_find(&f->st, "input_ids");
    const struct swift_st_tensor *lab = swift_safetensors_find(&f->st, "labels");
    const struct swift_st_tensor *pos = swift_safetensors_find(&f->st, "position_ids");
    assert_non_null(ids);
    assert_int_equal(ids->dtype, SWIFT_DTYPE_I32);
    f->B = (int)ids->shape[0];
    f->T = (int)ids->shape[1];
    int N = f->B * f->T;
    f->tok = malloc(N * sizeof(int32_t));
    f->tgt = malloc(N * sizeof(int32_t));
    f->pos = malloc(N * sizeof(int32_t));
    memcpy(f->tok, ids->data, N * 4);
    memcpy(f->pos, pos->data, N * 4);
    const int32_t *lb = lab->data;
    /* token t predicts token t+1 of the same document when that one is trained */
    for (int b = 0; b < f->B; b++)
        for (int t = 0; t < f->T; t++) {
            int n = b * f->T + t;
            int ok = t + 1 < f->T && f->pos[n + 1] != 0 && lb[n + 1] != -100;
            f->tgt[n] = ok ? lb[n + 1] : -1;
        }
}

static void fx_close(struct fx *f)
{
    swift_safetensors_close(&f->st);
    free(f->tok);
    free(f->tgt);
    free(f->pos);
}

static double max_abs_diff(const float *a, const float *b, size_t n, double *maxref)
{
    double d = 0, r = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]);
        if (e > d || isnan(e))
            d = isnan(e) ? INFINITY : e;
        if (fabs(b[i]) > r)
            r = fabs(b[i]);
    }
    if (maxref)
        *maxref = r;
    return d;
}

static void check_model(const char *arch, int lora)
{
    char dir[256], ref[256];
    snprintf(dir, sizeof(dir), FIX "%s", arch);
    snprintf(
        ref, sizeof(ref), FIX "%s/%s", arch, lora ? "lora_ref.safetensors" : "ref.safetensors");
    struct swift_model m;
    assert_int_equal(swift_model_load(&m, dir, &swift_cpu_ops, lora), 0);
    if (lora) {
        char ad[300];
        snprintf(ad, sizeof(ad), "%s/adapter", dir);
        struct swift_lora_opts lo;
        assert_int_equal(swift_lora_load(&m, ad, &lo), 0);
        assert_int_equal(lo.rank, 4);
    }
    struct fx f;
    fx_open(&f, ref);
    struct swift_batch b = {.B = f.B, .T = f.T, .tokens = f.tok, .targets = f.tgt, .pos = f.pos};
    int N = f.B * f.T, V = m.cfg.vocab_size;

    /* forward only: logits and loss */
    struct swift_loss l = {0};
    assert_int_equal(swift_model_forward(&m, &b, &l, 0.0f), 0);
    double ref_max;
    double el = max_abs_diff(
        swift_model_logits(&m), fget(&f, "logits", (size_t)N * V), (size_t)N * V, &ref_max);
    double loss = l.sum / l.count;
    double rl = fget(&f, "loss", 1)[0];
    printf("# %s%s: logits max abs err %.3g (max |logit| %.3g), loss %.7f vs %.7f\n",
           arch,
           lora ? " lora" : "",
           el,
           ref_max,
           loss,
           rl);
    assert_true(el < 1e-4);
    assert_true(fabs(loss - rl) < 1e-4);

    /* gradients */
    struct swift_param *ps = lora ? m.lp : m.p;
    int np = lora ? m.nlp : m.np;
    swift_model_zero_grad(&m);
    struct swift_loss l2 = {0};
    assert_int_equal(swift_model_forward(&m, &b, &l2, 1.0f / (float)l.count), 0);
    swift_model_backward(&m, &b);
    double worst = 0;
    const char *worst_name = "";
    for (int i = 0; i < np; i++) {
        char nm[256];
        snprintf(nm, sizeof(nm), "grad.%s", ps[i].name);
        double mr, e = max_abs_diff(ps[i].g, fget(&f, nm, ps[i].numel), ps[i].numel, &mr);
        double rel = e / (mr > 1e-6 ? mr : 1e-6);
        if (rel > worst) {
            worst = rel;
            worst_name = ps[i].name;
        }
    }
    printf("# %s%s: %d gradients, worst relative err %.3g (%s)\n",
           arch,
           lora ? " lora" : "",
           np,
           worst,
           worst_name);
    assert_true(worst < 1e-3);

    /* 3 AdamW steps on the same batch */
    struct swift_adamw opt;
    assert_int_equal(swift_adamw_init(&opt, &swift_cpu_ops, ps, np, 0.9f, 0.95f, 1e-8f, 0.1f), 0);
    const float *rlosses = fget(&f, "losses", 3);
    float want[3] = {rlosses[0], rlosses[1], rlosses[2]};
    for (int s = 0; s < 3; s++) {
        swift_model_zero_grad(&m);
        struct swift_loss ls = {0};
        assert_int_equal(swift_model_forward(&m, &b, &ls, 1.0f / (float)l.count), 0);
        swift_model_backward(&m, &b);
        swift_adamw_step(&opt, 1e-2f, 1.0f);
        double lv = ls.sum / ls.count;
        printf(
            "# %s%s: step %d loss %.7f vs %.7f\n", arch, lora ? " lora" : "", s + 1, lv, want[s]);
        assert_true(fabs(lv - want[s]) < 2e-5);
        if (s == 0) {
            /* Adam's first update is lr*g/(|g|+eps): for an element whose gradient is ~1e-7 the
             * float32 rounding noise of g decides its sign, so ill-conditioned elements
             * (nonzero gradient below 1e-4 of the tensor's largest) are counted, not compared */
            double pw = 0;
            long skipped = 0;
            for (int i = 0; i < np; i++) {
                char nm[256];
                snprintf(nm, sizeof(nm), "grad.%s", ps[i].name);
                float *g0 = malloc(ps[i].numel * sizeof(float));
                memcpy(g0, fget(&f, nm, ps[i].numel), ps[i].numel * sizeof(float));
                double gmax = 0;
                for (size_t j = 0; j < ps[i].numel; j++)
                    gmax = fmax(gmax, fabs(g0[j]));
                snprintf(nm, sizeof(nm), "step1.%s", ps[i].name);
                const float *w1 = fget(&f, nm, ps[i].numel);
                for (size_t j = 0; j < ps[i].numel; j++) {
                    if (g0[j] != 0 && fabs(g0[j]) < 1e-4 * gmax) {
                        skipped++;
                        continue;
                    }
                    pw = fmax(pw, fabs((double)ps[i].w[j] - w1[j]));
                }
                free(g0);
            }
            printf("# %s%s: parameters after 1 AdamW step max abs err %.3g (%ld ill-conditioned "
                   "elements not compared)\n",
                   arch,
                   lora ? " lora" : "",
                   pw,
                   skipped);
            assert_true(pw < 1e-5);
            /* continue from the reference's parameters: a flipped ill-conditioned element
             * would otherwise make the rest of the trajectory drift (its moments are ~1e-8 and
             * do not matter) */
            for (int i = 0; i < np; i++) {
                char nm[256];
                snprintf(nm, sizeof(nm), "step1.%s", ps[i].name);
                memcpy(ps[i].w, fget(&f, nm, ps[i].numel), ps[i].numel * sizeof(float));
            }
        }
    }
    /* after 3 steps (2 from the reference's step-1 parameters), ill-conditioned elements
     * still left out */
    double pw = 0;
    for (int i = 0; i < np; i++) {
        char nm[256];
        snprintf(nm, sizeof(nm), "grad.%s", ps[i].name);
        float *g0 = malloc(ps[i].numel * sizeof(float));
        memcpy(g0, fget(&f, nm, ps[i].numel), ps[i].numel * sizeof(float));
        double gmax = 0;
        for (size_t j = 0; j < ps[i].numel; j++)
            gmax = fmax(gmax, fabs(g0[j]));
        snprintf(nm, sizeof(nm), "step3.%s", ps[i].name);
        const float *w3 = fget(&f, nm, ps[i].numel);
        for (size_t j = 0; j < ps[i].numel; j++)
            if (!(g0[j] != 0 && fabs(g0[j]) < 1e-4 * gmax))
                pw = fmax(pw, fabs((double)ps[i].w[j] - w3[j]));
        free(g0);
    }
    printf(
        "# %s%s: parameters after 3 AdamW steps max abs err %.3g\n", arch, lora ? " lora" : "", pw);
    assert_true(pw < 5e-5);
    swift_adamw_free(&opt);
    fx_close(&f);
    swift_model_free(&m);
}

static void test_llama(void **s)
{
    (void)s;
    check_model("llama", 0);
}
static void test_qwen2(void **s)
{
    (void)s;
    check_model("qwen2", 0);
}
static void test_qwen3(void **s)
{
    (void)s;
    check_model("qwen3", 0);
}
static void test_llama_lora(void **s)
{
    (void)s;
    check_model("llama", 1);
}
static void test_qwen2_lora(void **s)
{
    (void)s;
    check_model("qwen2", 1);
}
static void test_qwen3_lora(void **s)
{
    (void)s;
    check_model("qwen3", 1);
}

/* What swift-train wrote (tests/fixtures/ours), loaded by peft / transformers in
 * tests/ref/check_our_outputs.py: their logits must be ours. */
static void check_ours(const char *arch, const char *ours, int lora)
{
    char dir[256], ref[256], fx[256];
    snprintf(dir, sizeof(dir), FIX "%s", arch);
    snprintf(ref, sizeof(ref), "tests/fixtures/ours/%s/ref_logits.safetensors", ours);
    snprintf(fx, sizeof(fx), FIX "%s/ref.safetensors", arch);
    char od[256];
    snprintf(od, sizeof(od), "tests/fixtures/ours/%s", ours);
    struct swift_model m;
    if (lora) {
        assert_int_equal(swift_model_load(&m, dir, &swift_cpu_ops, 1), 0);
        struct swift_lora_opts lo;
        assert_int_equal(swift_lora_load(&m, od, &lo), 0);
    } else {
        assert_int_equal(swift_model_load(&m, od, &swift_cpu_ops, 1), 0);
    }
    struct fx f;
    fx_open(&f, fx);
    int T = f.T, V = m.cfg.vocab_size;
    int32_t pos[64], tgt[64];
    for (int t = 0; t < T; t++) {
        pos[t] = t;
        tgt[t] = -1;
    }
    struct swift_batch b = {.B = 1, .T = T, .tokens = f.tok, .targets = tgt, .pos = pos};
    struct swift_loss l = {0};
    assert_int_equal(swift_model_forward(&m, &b, &l, 0.0f), 0);
    struct fx r;
    assert_int_equal(swift_safetensors_open(&r.st, ref), 0);
    double mr, e = max_abs_diff(
                   swift_model_logits(&m), fget(&r, "logits", (size_t)T * V), (size_t)T * V, &mr);
    printf("# %s loaded by %s: logits max abs err %.3g (max |logit| %.3g)\n",
           ours,
           lora ? "peft" : "transformers",
           e,
           mr);
    assert_true(e < 1e-4);
    swift_safetensors_close(&r.st);
    fx_close(&f);
    swift_model_free(&m);
}
static void test_ours_lora(void **s)
{
    (void)s;
    check_ours("llama", "lora-llama", 1);
}
static void test_ours_full(void **s)
{
    (void)s;
    check_ours("qwen3", "full-qwen3", 0);
}

/* transformers 4 layout: rope_theta + rope_scaling, torch_dtype; and config errors */
static void test_config_layouts(void **s)
{
    (void)s;
    const char *v4 = "{\"model_type\":\"llama\",\"vocab_size\":128256,\"hidden_size\":4096,"
                     "\"intermediate_size\":14336,\"num_hidden_layers\":32,"
                     "\"num_attention_heads\":32,\"num_key_value_heads\":8,"
                     "\"max_position_embeddings\":131072,\"rms_norm_eps\":1e-05,"
                     "\"rope_theta\":500000.0,\"rope_scaling\":{\"factor\":8.0,"
                     "\"low_freq_factor\":1.0,\"high_freq_factor\":4.0,"
                     "\"original_max_position_embeddings\":8192,\"rope_type\":\"llama3\"},"
                     "\"tie_word_embeddings\":false,\"torch_dtype\":\"bfloat16\"}";
    json_error_t je;
    json_t *j = json_loads(v4, 0, &je);
    struct swift_model_config c;
    assert_int_equal(swift_model_config_parse(&c, j, "v4.json"), 0);
    assert_int_equal(c.head_dim, 128);
    assert_int_equal(c.num_kv_heads, 8);
    assert_int_equal(c.rope_type, SWIFT_ROPE_LLAMA3);
    assert_true(c.rope_theta == 500000.0 && c.rope_factor == 8.0);
    assert_string_equal(c.dtype, "bfloat16");
    json_decref(j);
    /* qwen2: q/k/v bias without a key; default eps 1e-6 */
    j = json_loads("{\"model_type\":\"qwen2\",\"vocab_size\":10,\"hidden_size\":8,"
                   "\"intermediate_size\":16,\"num_hidden_layers\":1,"
                   "\"num_attention_heads\":2,\"dtype\":\"float16\"}",
                   0,
                   &je);
    assert_int_equal(swift_model_config_parse(&c, j, "q.json"), 0);
    assert_true(c.qkv_bias && !c.o_bias && !c.qk_norm && c.num_kv_heads == 2);
    assert_true(c.rms_norm_eps == 1e-6f);
    assert_string_equal(c.dtype, "float16");
    json_decref(j);
    const char *bad[][2] = {
        {"{\"model_type\":\"gpt2\"}", "unsupported model_type 'gpt2'"},
        {"{\"model_type\":\"llama\",\"vocab_size\":10,\"hidden_size\":8,\"intermediate_size\":16,"
         "\"num_hidden_layers\":1,\"num_attention_heads\":2,\"rope_scaling\":{\"rope_type\":"
         "\"yarn\"}}",
         "unsupported rope_type 'yarn'"},
        {"{\"model_type\":\"llama\",\"vocab_size\":10,\"hidden_size\":8,\"intermediate_size\":16,"
         "\"num_hidden_layers\":1,\"num_attention_heads\":3}",
         "hidden_size 8 is not a multiple"},
        {"{\"model_type\":\"llama\",\"vocab_size\":10,\"hidden_size\":8,\"intermediate_size\":16,"
         "\"num_hidden_layers\":1,\"num_attention_heads\":2,\"hidden_act\":\"gelu\"}",
         "unsupported hidden_act 'gelu'"},
        {"{\"model_type\":\"llama\",\"hidden_size\":8}", "missing key 'vocab_size'"},
        {"{\"model_type\":\"llama\",\"vocab_size\":10,\"hidden_size\":8,\"intermediate_size\":16,"
         "\"num_hidden_layers\":1073741824,\"num_attention_heads\":2}",
         "num_hidden_layers 1073741824 is above the limit of 4096"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char buf[1024] = {0};
        FILE *fp = fmemopen(buf, sizeof(buf), "w");
        swift_error_set_stream(fp);
        j = json_loads(bad[i][0], 0, &je);
        assert_non_null(j);
        assert_int_equal(swift_model_config_parse(&c, j, "c.json"), -1);
        json_decref(j);
        fclose(fp);
        swift_error_set_stream(NULL);
        if (!strstr(buf, bad[i][1]))
            fail_msg("got '%s', expected '%s'", buf, bad[i][1]);
    }
}

/* activation checkpointing recomputes each layer in backward: the same gradients, bit for bit
 * (full fine-tuning of Qwen3, and LoRA with dropout on Llama) */
static void grads_of(const char *arch, int lora, int ckpt, float **out, size_t *n)
{
    char dir[256];
    snprintf(dir, sizeof(dir), FIX "%s", arch);
    struct swift_model m;
    assert_int_equal(swift_model_load(&m, dir, &swift_cpu_ops, lora), 0);
    m.act_ckpt = ckpt;
    if (lora) {
        struct swift_lora_opts lo = {
            .rank = 4, .alpha = 8, .dropout = 0.2f, .targets = "all-linear", .seed = 3};
        assert_int_equal(swift_lora_attach(&m, &lo), 0);
        for (size_t i = 0; i < m.nlora; i++) /* B = 0 at init: make it count */
            m.lora_params[i] += 0.01f * (float)((i * 7919) % 13);
    }
    struct fx f;
    char ref[256];
    snprintf(ref, sizeof(ref), FIX "%s/ref.safetensors", arch);
    fx_open(&f, ref);
    struct swift_batch b = {.B = f.B, .T = f.T, .tokens = f.tok, .targets = f.tgt, .pos = f.pos};
    m.dropout_seed = 99;
    swift_model_zero_grad(&m);
    struct swift_loss l = {0};
    assert_int_equal(swift_model_forward(&m, &b, &l, 0.01f), 0);
    swift_model_backward(&m, &b);
    *n = lora ? m.nlora : m.nparams;
    *out = malloc(*n * sizeof(float));
    memcpy(*out, lora ? m.lora_grads : m.grads, *n * sizeof(float));
    fx_close(&f);
    swift_model_free(&m);
}
static void test_act_ckpt(void **s)
{
    (void)s;
    for (int lora = 0; lora < 2; lora++) {
        const char *arch = lora ? "llama" : "qwen3";
        float *g0, *g1;
        size_t n0, n1;
        grads_of(arch, lora, 0, &g0, &n0);
        grads_of(arch, lora, 1, &g1, &n1);
        assert_int_equal(n0, n1);
        assert_memory_equal(g0, g1, n0 * sizeof(float));
        double s0 = 0;
        for (size_t i = 0; i < n0; i++)
            s0 += fabs(g0[i]);
        assert_true(s0 > 0);
        free(g0);
        free(g1);
    }
}

/* swift_model_row_logps (swift-eval --task pref): per row, minus the token NLL of the row's trained
 * targets, adding up to the forward's loss over the batch; with adapters that are not zero,
 * lora_off gives the base model's numbers (the reference), lora on others */
static void test_row_logps(void **s)
{
    (void)s;
    struct swift_model m;
    assert_int_equal(swift_model_load(&m, FIX "llama", &swift_cpu_ops, 1), 0);
    struct fx f;
    fx_open(&f, FIX "llama/ref.safetensors");
    struct swift_batch b = {.B = f.B, .T = f.T, .tokens = f.tok, .targets = f.tgt, .pos = f.pos};
    struct swift_loss l = {0};
    assert_int_equal(swift_model_forward(&m, &b, &l, 0.0f), 0);
    double *lp = calloc((size_t)f.B * 3, sizeof(double));
    long *cnt = calloc((size_t)f.B, sizeof(long));
    assert_int_equal(swift_model_row_logps(&m, &b, lp, cnt), 0);
    double sum = 0;
    long n = 0;
    for (int r = 0; r < f.B; r++) {
        long k = 0;
        for (int t = 0; t < f.T; t++)
            k += f.tgt[r * f.T + t] >= 0;
        assert_int_equal(cnt[r], k);
        assert_true(k == 0 || lp[r] < 0);
        sum += lp[r];
        n += cnt[r];
    }
    assert_int_equal(n, l.count);
    assert_true(fabs(sum + l.sum) <= 1e-6 * fabs(l.sum));
    struct swift_lora_opts lo = {
        .rank = 4, .alpha = 8, .dropout = 0.2f, .targets = "all-linear", .seed = 3};
    assert_int_equal(swift_lora_attach(&m, &lo), 0);
    for (size_t i = 0; i < m.nlora; i++)
        m.lora_params[i] += 0.01f * (float)((i * 7919) % 13);
    m.lora_off = 1;
    assert_int_equal(swift_model_row_logps(&m, &b, lp + f.B, NULL), 0);
    m.lora_off = 0;
    assert_int_equal(swift_model_row_logps(&m, &b, lp + 2 * f.B, NULL), 0);
    for (int r = 0; r < f.B; r++) {
        assert_true(fabs(lp[f.B + r] - lp[r]) <= 1e-9 * fabs(lp[r]));
        assert_true(cnt[r] == 0 || fabs(lp[2 * f.B + r] - lp[r]) > 1e-4);
    }
    free(lp);
    free(cnt);
    fx_close(&f);
    swift_model_free(&m);
}

/* AdamW's learning-rate groups: group 0 takes the step's lr (the same update as without
 * groups), another its own group_lr (0: the parameter stays as it was) */
static void test_adamw_groups(void **state)
{
    (void)state;
    float w1[4] = {1, -2, 3, -4}, w2[4] = {1, -2, 3, -4}, w3[3] = {0.5f, 0.25f, -1};
    float g1[4] = {0.1f, 0.2f, -0.3f, 0.4f}, g2[4] = {0.1f, 0.2f, -0.3f, 0.4f};
    float g3[3] = {1, 2, 3}, w3_0[3];
    memcpy(w3_0, w3, sizeof(w3));
    struct swift_param a[2] = {{.name = "a", .w = w1, .g = g1, .ndim = 1, .numel = 4, .decay = 1},
                               {.name = "b", .w = w3, .g = g3, .ndim = 1, .numel = 3, .decay = 1}};
    struct swift_param b[1] = {{.name = "a", .w = w2, .g = g2, .ndim = 1, .numel = 4, .decay = 1}};
    a[0].shape[0] = b[0].shape[0] = 4;
    a[1].shape[0] = 3;
    struct swift_adamw oa, ob;
    assert_int_equal(swift_adamw_init(&oa, &swift_cpu_ops, a, 2, 0.9f, 0.95f, 1e-8f, 0.1f), 0);
    assert_int_equal(swift_adamw_init(&ob, &swift_cpu_ops, b, 1, 0.9f, 0.95f, 1e-8f, 0.1f), 0);
    swift_adamw_set_groups(&oa, (int[]){0, 1});
    for (int s = 0; s < 3; s++) {
        oa.group_lr[1] = 0.0f;
        swift_adamw_step(&oa, 1e-2f, 0.5f);
        swift_adamw_step(&ob, 1e-2f, 0.5f);
    }
    assert_memory_equal(w1, w2, sizeof(w1));
    assert_memory_equal(w3, w3_0, sizeof(w3));
    oa.group_lr[1] = 1e-2f; /* its moments were kept: now it moves */
    swift_adamw_step(&oa, 1e-2f, 1.0f);
    assert_true(w3[0] != w3_0[0]);
    swift_adamw_free(&oa);
    swift_adamw_free(&ob);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama),
        cmocka_unit_test(test_qwen2),
        cmocka_unit_test(test_qwen3),
        cmocka_unit_test(test_llama_lora),
        cmocka_unit_test(test_qwen2_lora),
        cmocka_unit_test(test_qwen3_lora),
        cmocka_unit_test(test_ours_lora),
        cmocka_unit_test(test_ours_full),
        cmocka_unit_test(test_config_layouts),
        cmocka_unit_test(test_act_ckpt),
        cmocka_unit_test(test_row_logps),
        cmocka_unit_test(test_adamw_groups),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
