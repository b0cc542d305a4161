/* model — see model.h. */
#include "lib/model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "lib/core/error.h"
#include "lib/export/gptq_solve.h"
#include "lib/core/fileio.h"
#include "lib/formats/safetensors.h"
#include "lib/core/trace.h"
#include "lib/core/banned.h"

/* ---- config.json ---- */

static int cfg_int(json_t *root, const char *key, int def, int required, int *out, const char *path)
{
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) {
        if (required)
            return swift_error_at(path, 0, "missing key '%s'", key);
        *out = def;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > (1 << 30))
        return swift_error_at(path, 0, "key '%s' must be a non-negative integer", key);
    *out = (int)json_integer_value(v);
    return 0;
}

static int cfg_num(json_t *obj, const char *key, double def, double *out, const char *path)
{
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return 0;
    }
    if (!json_is_number(v))
        return swift_error_at(path, 0, "key '%s' must be a number", key);
    *out = json_number_value(v);
    return 0;
}

static int cfg_bool(json_t *root, const char *key, int def, int *out, const char *path)
{
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return 0;
    }
    if (!json_is_boolean(v))
        return swift_error_at(path, 0, "key '%s' must be true or false", key);
    *out = json_is_true(v);
    return 0;
}

int swift_model_config_parse(struct swift_model_config *c, json_t *root, const char *path)
{
    memset(c, 0, sizeof(*c));
    if (!json_is_object(root))
        return swift_error_at(path, 0, "config is not a JSON object");
    const char *mt = json_string_value(json_object_get(root, "model_type"));
    if (!mt)
        return swift_error_at(path, 0, "missing key 'model_type'");
    if (strcmp(mt, "llama") && strcmp(mt, "mistral") && strcmp(mt, "qwen2") && strcmp(mt, "qwen3"))
        return swift_error_at(
            path, 0, "unsupported model_type '%s' (llama, mistral, qwen2, qwen3)", mt);
    snprintf(c->model_type, sizeof(c->model_type), "%s", mt);
    int is_qwen2 = !strcmp(mt, "qwen2"), is_qwen3 = !strcmp(mt, "qwen3");
    const char *dt = json_string_value(json_object_get(root, "dtype"));
    if (!dt)
        dt = json_string_value(json_object_get(root, "torch_dtype"));
    snprintf(c->dtype, sizeof(c->dtype), "%s", dt ? dt : "float32");
    if (strcmp(c->dtype, "float32") && strcmp(c->dtype, "bfloat16") && strcmp(c->dtype, "float16"))
        return swift_error_at(
            path, 0, "unsupported dtype '%s' (float32, bfloat16, float16)", c->dtype);
    const char *act = json_string_value(json_object_get(root, "hidden_act"));
    if (act && strcmp(act, "silu"))
        return swift_error_at(path, 0, "unsupported hidden_act '%s' (silu)", act);
    if (cfg_int(root, "vocab_size", 0, 1, &c->vocab_size, path) < 0 ||
        cfg_int(root, "hidden_size", 0, 1, &c->hidden_size, path) < 0 ||
        cfg_int(root, "intermediate_size", 0, 1, &c->intermediate_size, path) < 0 ||
        cfg_int(root, "num_hidden_layers", 0, 1, &c->num_layers, path) < 0 ||
        cfg_int(root, "num_attention_heads", 0, 1, &c->num_heads, path) < 0 ||
        cfg_int(root, "max_position_embeddings", 2048, 0, &c->max_position_embeddings, path) < 0)
        return -1;
    if (cfg_int(root, "num_key_value_heads", c->num_heads, 0, &c->num_kv_heads, path) < 0)
        return -1;
    if (c->vocab_size <= 0 || c->hidden_size <= 0 || c->intermediate_size <= 0 ||
        c->num_layers <= 0 || c->num_heads <= 0 || c->num_kv_heads <= 0)
        return swift_error_at(path,
                              0,
                              "vocab_size, hidden_size, intermediate_size, "
                              "num_hidden_layers and the head counts must be positive");
    if (c->num_heads % c->num_kv_heads)
        return swift_error_at(path,
                              0,
                              "num_attention_heads %d is not a multiple of "
                              "num_key_value_heads %d",
                              c->num_heads,
                              c->num_kv_heads);
    json_t *hd = json_object_get(root, "head_dim");
    if (hd && !json_is_null(hd)) {
        if (cfg_int(root, "head_dim", 0, 1, &c->head_dim, path) < 0)
            return -1;
    } else {
        if (c->hidden_size % c->num_heads)
            return swift_error_at(path,
                                  0,
                                  "hidden_size %d is not a multiple of "
                                  "num_attention_heads %d and there is no head_dim",
                                  c->hidden_size,
                                  c->num_heads);
        c->head_dim = c->hidden_size / c->num_heads;
    }
    if (c->head_dim <= 0 || c->head_dim % 2)
        return swift_error_at(path, 0, "head_dim %d must be positive and even", c->head_dim);
    double eps;
    if (cfg_num(root, "rms_norm_eps", is_qwen2 || is_qwen3 ? 1e-6 : 1e-5, &eps, path) < 0)
        return -1;
    c->rms_norm_eps = (float)eps;

    /* RoPE: v4 has rope_theta + rope_scaling; v5 has rope_parameters (and may keep both) */
    json_t *rp = json_object_get(root, "rope_parameters");
    json_t *rs = json_object_get(root, "rope_scaling");
    if (rp && !json_is_null(rp) && !json_is_object(rp))
        return swift_error_at(path, 0, "rope_parameters must be an object");
    if (rs && !json_is_null(rs) && !json_is_object(rs))
        return swift_error_at(path, 0, "rope_scaling must be an object or null");
    double theta;
    if (cfg_num(root, "rope_theta", 10000.0, &theta, path) < 0)
        return -1;
    if (json_is_object(rp) && json_object_get(rp, "rope_theta") &&
        cfg_num(rp, "rope_theta", theta, &theta, path) < 0)
        return -1;
    if (theta <= 0)
        return swift_error_at(path, 0, "rope_theta must be positive");
    c->rope_theta = theta;
    json_t *sc = json_is_object(rs) ? rs : (json_is_object(rp) ? rp : NULL);
    c->rope_type = SWIFT_ROPE_DEFAULT;
    if (sc) {
        const char *rt = json_string_value(json_object_get(sc, "rope_type"));
        if (!rt)
            rt = json_string_value(json_object_get(sc, "type"));
        if (!rt || !strcmp(rt, "default")) {
            c->rope_type = SWIFT_ROPE_DEFAULT;
        } else if (!strcmp(rt, "linear")) {
            c->rope_type = SWIFT_ROPE_LINEAR;
            if (cfg_num(sc, "factor", 1.0, &c->rope_factor, path) < 0)
                return -1;
        } else if (!strcmp(rt, "llama3")) {
            c->rope_type = SWIFT_ROPE_LLAMA3;
            double om;
            if (cfg_num(sc, "factor", 8.0, &c->rope_factor, path) < 0 ||
                cfg_num(sc, "low_freq_factor", 1.0, &c->rope_low_freq_factor, path) < 0 ||
                cfg_num(sc, "high_freq_factor", 4.0, &c->rope_high_freq_factor, path) < 0 ||
                cfg_num(sc, "original_max_position_embeddings", 8192, &om, path) < 0)
                return -1;
            c->rope_original_max = (int)om;
            if (c->rope_high_freq_factor <= c->rope_low_freq_factor)
                return swift_error_at(path,
                                      0,
                                      "llama3 rope scaling needs high_freq_factor > "
                                      "low_freq_factor");
        } else {
            return swift_error_at(
                path, 0, "unsupported rope_type '%s' (default, linear, llama3)", rt);
        }
        if (c->rope_type != SWIFT_ROPE_DEFAULT && c->rope_factor <= 0)
            return swift_error_at(path, 0, "rope scaling factor must be positive");
    }

    int attn_bias = 0;
    if (cfg_bool(root, "attention_bias", 0, &attn_bias, path) < 0 ||
        cfg_bool(root, "mlp_bias", 0, &c->mlp_bias, path) < 0 ||
        cfg_bool(root, "tie_word_embeddings", 0, &c->tie_embeddings, path) < 0)
        return -1;
    /* Qwen2 hard-codes bias on q/k/v (no key); Llama and Qwen3 put attention_bias on q/k/v/o */
    c->qkv_bias = is_qwen2 ? 1 : attn_bias;
    c->o_bias = is_qwen2 ? 0 : attn_bias;
    c->qk_norm = is_qwen3;
    int usw = 0;
    if (cfg_bool(root, "use_sliding_window", 0, &usw, path) < 0)
        return -1;
    if (!strcmp(mt, "mistral") || usw) {
        json_t *sw = json_object_get(root, "sliding_window");
        if (json_is_integer(sw))
            c->sliding_window = (int)json_integer_value(sw);
    }
    /* a GPTQ checkpoint (swift-export --quant, auto-gptq, GPTQModel): dequantized on load */
    json_t *qc = json_object_get(root, "quantization_config");
    if (qc && !json_is_null(qc)) {
        const char *qm = json_string_value(json_object_get(qc, "quant_method"));
        const char *cf = json_string_value(json_object_get(qc, "checkpoint_format"));
        if (!qm || strcmp(qm, "gptq"))
            return swift_error_at(path,
                                  0,
                                  "quantization_config: quant_method '%s' is not supported "
                                  "(gptq is)",
                                  qm ? qm : "?");
        if (cf && strcmp(cf, "gptq") && strcmp(cf, "gptq_v2"))
            return swift_error_at(
                path, 0, "quantization_config: checkpoint_format '%s' is not supported", cf);
        c->gptq = cf && !strcmp(cf, "gptq_v2") ? 2 : 1;
    }
    return 0;
}

int swift_model_config_load(struct swift_model_config *c, const char *path)
{
    json_error_t jerr;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return swift_error_at(path, jerr.line, "%s", jerr.text);
    int rc = swift_model_config_parse(c, root, path);
    json_decref(root);
    return rc;
}

/* transformers' _compute_default/linear/llama3_parameters */
void swift_model_inv_freq(const struct swift_model_config *c, float *out)
{
    int D = c->head_dim;
    for (int i = 0; i < D / 2; i++) {
        double f = 1.0 / pow(c->rope_theta, (double)(2 * i) / D);
        if (c->rope_type == SWIFT_ROPE_LINEAR) {
            f /= c->rope_factor;
        } else if (c->rope_type == SWIFT_ROPE_LLAMA3) {
            double old = c->rope_original_max;
            double low_wl = old / c->rope_low_freq_factor, high_wl = old / c->rope_high_freq_factor;
            double wl = 2 * M_PI / f;
            double g = wl > low_wl ? f / c->rope_factor : f;
            if (!(wl < high_wl) && !(wl > low_wl)) {
                double s = (old / wl - c->rope_low_freq_factor) /
                           (c->rope_high_freq_factor - c->rope_low_freq_factor);
                g = (1 - s) * g / c->rope_factor + s * g;
            }
            f = g;
        }
        out[i] = (float)f;
    }
}

/* ---- parameters ---- */

static const char *const lin_names[SWIFT_LIN_COUNT] = {"self_attn.q_proj",
                                                       "self_attn.k_proj",
                                                       "self_attn.v_proj",
                                                       "self_attn.o_proj",
                                                       "mlp.gate_proj",
                                                       "mlp.up_proj",
                                                       "mlp.down_proj"};

struct pspec {
    char name[160];
    int ndim;
    int64_t shape[2];
    float **w, **g;
    int decay;
};

/* Every parameter in Hugging Face's order, with where its pointers go. */
static int build_specs(struct swift_model *m, struct pspec **out)
{
    const struct swift_model_config *c = &m->cfg;
    int H = c->hidden_size, I = c->intermediate_size, D = c->head_dim;
    int cap = 4 + c->num_layers * 20, n = 0;
    struct pspec *s = calloc((size_t)cap, sizeof(*s));
    if (!s)
        return swift_error("out of memory");
#define ADD(nm, nd, s0, s1, wp, gp, dec)                                                           \
    do {                                                                                           \
        snprintf(s[n].name, sizeof(s[n].name), "%s", nm);                                          \
        s[n].ndim = nd;                                                                            \
        s[n].shape[0] = s0;                                                                        \
        s[n].shape[1] = s1;                                                                        \
        s[n].w = wp;                                                                               \
        s[n].g = gp;                                                                               \
        s[n].decay = dec;                                                                          \
        n++;                                                                                       \
    } while (0)
    ADD("model.embed_tokens.weight", 2, c->vocab_size, H, &m->embed, &m->gembed, 1);
    for (int l = 0; l < c->num_layers; l++) {
        struct swift_layer *L = &m->layers[l];
        char nm[160];
        snprintf(nm, sizeof(nm), "model.layers.%d.input_layernorm.weight", l);
        ADD(nm, 1, H, 0, &L->ln1, &L->gln1, 0);
        int outs[SWIFT_LIN_COUNT] = {
            c->num_heads * D, c->num_kv_heads * D, c->num_kv_heads * D, H, I, I, H};
        int ins[SWIFT_LIN_COUNT] = {H, H, H, c->num_heads * D, H, H, I};
        int bias[SWIFT_LIN_COUNT] = {c->qkv_bias,
                                     c->qkv_bias,
                                     c->qkv_bias,
                                     c->o_bias,
                                     c->mlp_bias,
                                     c->mlp_bias,
                                     c->mlp_bias};
        for (int k = 0; k < SWIFT_LIN_COUNT; k++) {
            struct swift_linear *lin = &L->lin[k];
            lin->in = ins[k];
            lin->out = outs[k];
            if (k == SWIFT_LIN_GATE) {
                snprintf(nm, sizeof(nm), "model.layers.%d.post_attention_layernorm.weight", l);
                ADD(nm, 1, H, 0, &L->ln2, &L->gln2, 0);
            }
            snprintf(nm, sizeof(nm), "model.layers.%d.%s.weight", l, lin_names[k]);
            ADD(nm, 2, outs[k], ins[k], &lin->w, &lin->gw, 1);
            if (bias[k]) {
                snprintf(nm, sizeof(nm), "model.layers.%d.%s.bias", l, lin_names[k]);
                ADD(nm, 1, outs[k], 0, &lin->b, &lin->gb, 0);
            }
            if (k == SWIFT_LIN_O && c->qk_norm) {
                snprintf(nm, sizeof(nm), "model.layers.%d.self_attn.q_norm.weight", l);
                ADD(nm, 1, D, 0, &L->qn, &L->gqn, 0);
                snprintf(nm, sizeof(nm), "model.layers.%d.self_attn.k_norm.weight", l);
                ADD(nm, 1, D, 0, &L->kn, &L->gkn, 0);
            }
        }
    }
    ADD("model.norm.weight", 1, H, 0, &m->norm, &m->gnorm, 0);
    if (!c->tie_embeddings)
        ADD("lm_head.weight", 2, c->vocab_size, H, &m->lm_head, &m->glm_head, 1);
#undef ADD
    *out = s;
    return n;
}

static int alloc_params(struct swift_model *m, int with_grads)
{
    const struct swift_model_config *c = &m->cfg;
    m->layers = calloc((size_t)c->num_layers, sizeof(*m->layers));
    m->inv_freq = calloc((size_t)c->head_dim / 2, sizeof(float));
    if (!m->layers || !m->inv_freq)
        return swift_error("out of memory");
    swift_model_inv_freq(c, m->inv_freq);
    struct pspec *s = NULL;
    int n = build_specs(m, &s);
    if (n < 0)
        return -1;
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += (size_t)s[i].shape[0] * (s[i].ndim == 2 ? (size_t)s[i].shape[1] : 1);
    m->nparams = total;
    m->params = m->ops->alloc(total * sizeof(float));
    m->grads = with_grads ? m->ops->alloc(total * sizeof(float)) : NULL;
    m->p = calloc((size_t)n, sizeof(*m->p));
    if (!m->params || (with_grads && !m->grads) || !m->p) {
        free(s);
        return swift_error("out of memory: %zu parameters", total);
    }
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        struct swift_param *p = &m->p[i];
        p->name = strdup(s[i].name);
        p->ndim = s[i].ndim;
        p->shape[0] = s[i].shape[0];
        p->shape[1] = s[i].shape[1];
        p->numel = (size_t)s[i].shape[0] * (s[i].ndim == 2 ? (size_t)s[i].shape[1] : 1);
        p->w = m->params + off;
        p->g = m->grads ? m->grads + off : NULL;
        p->decay = s[i].decay;
        *s[i].w = p->w;
        *s[i].g = p->g;
        off += p->numel;
        if (!p->name) {
            free(s);
            return swift_error("out of memory");
        }
    }
    m->np = n;
    free(s);
    if (c->tie_embeddings) {
        m->lm_head = m->embed;
        m->glm_head = m->gembed;
    }
    for (int l = 0; l < c->num_layers; l++)
        for (int k = 0; k < SWIFT_LIN_COUNT; k++) {
            char nm[160];
            snprintf(nm, sizeof(nm), "model.layers.%d.%s", l, lin_names[k]);
            m->layers[l].lin[k].name = strdup(nm);
            if (!m->layers[l].lin[k].name)
                return swift_error("out of memory");
        }
    return 0;
}

struct swift_param *swift_model_param(struct swift_model *m, const char *name)
{
    for (int i = 0; i < m->np; i++)
        if (!strcmp(m->p[i].name, name))
            return &m->p[i];
    return NULL;
}

int swift_model_load(struct swift_model *m, const char *dir, const struct swift_ops *ops,
                     int frozen)
{
    memset(m, 0, sizeof(*m));
    m->ops = ops;
    char *cp = swift_path_join(dir, "config.json");
    if (!cp)
        return swift_error("out of memory");
    int rc = swift_model_config_load(&m->cfg, cp);
    free(cp);
    if (rc < 0)
        return -1;
    if (alloc_params(m, !frozen) < 0) {
        swift_model_free(m);
        return -1;
    }
    struct swift_st_set set;
    if (swift_st_set_open(&set, dir) < 0) {
        swift_model_free(m);
        return -1;
    }
    /* tensors are converted in host memory, then uploaded: backend memory may be a device's */
    size_t maxn = 1;
    for (int i = 0; i < m->np; i++)
        if (m->p[i].numel > maxn)
            maxn = m->p[i].numel;
    float *host = malloc(maxn * sizeof(float));
    if (!host) {
        swift_error("out of memory: %zu floats for loading a tensor", maxn);
        goto fail;
    }
    for (int i = 0; i < m->np; i++) {
        struct swift_param *p = &m->p[i];
        const struct swift_st_tensor *t = swift_st_set_find(&set, p->name);
        if (!t && m->cfg.gptq && p->ndim == 2) {
            if (swift_gptq_dequant_set(
                    &set, p->name, (int)p->shape[0], (int)p->shape[1], m->cfg.gptq == 1, host) < 0)
                goto fail;
            m->ops->upload(p->w, host, p->numel * sizeof(float));
            continue;
        }
        if (!t) {
            swift_error("%s: missing tensor '%s'", dir, p->name);
            goto fail;
        }
        if (swift_st_tensor_check_shape(t, p->ndim, p->shape) < 0 ||
            swift_st_tensor_to_f32(t, host) < 0)
            goto fail;
        m->ops->upload(p->w, host, p->numel * sizeof(float));
    }
    free(host);
    swift_st_set_close(&set);
    return 0;
fail:
    free(host);
    swift_st_set_close(&set);
    swift_model_free(m);
    return -1;
}

static uint64_t rng_next(uint64_t *s)
{
    uint64_t x = (*s += 0x9e3779b97f4a7c15ULL);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static float randn(uint64_t *s)
{
    double u1 = ((double)(rng_next(s) >> 11) + 0.5) / 9007199254740992.0;
    double u2 = (double)(rng_next(s) >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2 * log(u1)) * cos(2 * M_PI * u2));
}

int swift_model_init_random(struct swift_model *m, const struct swift_model_config *c,
                            const struct swift_ops *ops, uint64_t seed)
{
    memset(m, 0, sizeof(*m));
    m->ops = ops;
    m->cfg = *c;
    if (alloc_params(m, 1) < 0) {
        swift_model_free(m);
        return -1;
    }
    uint64_t s = seed;
    size_t maxn = 1;
    for (int i = 0; i < m->np; i++)
        if (m->p[i].numel > maxn)
            maxn = m->p[i].numel;
    float *host = malloc(maxn * sizeof(float)); /* drawn on the host, then uploaded */
    if (!host) {
        swift_model_free(m);
        return swift_error("out of memory: %zu floats for initialising a tensor", maxn);
    }
    for (int i = 0; i < m->np; i++) {
        struct swift_param *p = &m->p[i];
        int is_norm = strstr(p->name, "norm") != NULL;
        for (size_t j = 0; j < p->numel; j++)
            host[j] = is_norm ? 1.0f : (strstr(p->name, "bias") ? 0.0f : 0.02f * randn(&s));
        m->ops->upload(p->w, host, p->numel * sizeof(float));
    }
    free(host);
    return 0;
}

/* ---- activations ---- */

struct layer_acts {
    float *ln1, *rstd1, *qraw, *qrstd, *kraw, *krstd, *q, *k, *v, *probs, *att, *mid, *ln2, *rstd2,
        *gate, *up, *act;
};

struct swift_model_acts {
    float *res; /* (L+1, N, H) */
    struct layer_acts *la;
    float *lnf, *rstdf, *logits;
    float *dres, *dln, *datt, *dq, *dk, *dv, *dqraw, *dkraw, *dgate, *dup, *dact, *dxa, *dtmp;
    void **blocks; /* everything allocated, for free */
    int nblocks, capblocks;
};

static float *act_alloc(struct swift_model *m, size_t n)
{
    struct swift_model_acts *a = m->acts;
    if (a->nblocks == a->capblocks) {
        int nc = a->capblocks ? a->capblocks * 2 : 64;
        void **nb = realloc(a->blocks, (size_t)nc * sizeof(*nb));
        if (!nb)
            return NULL;
        a->blocks = nb;
        a->capblocks = nc;
    }
    float *p = m->ops->alloc((n ? n : 1) * sizeof(float));
    if (p)
        a->blocks[a->nblocks++] = p;
    return p;
}

static void acts_free(struct swift_model *m)
{
    struct swift_model_acts *a = m->acts;
    if (!a)
        return;
    for (int i = 0; i < a->nblocks; i++)
        m->ops->free(a->blocks[i]);
    free(a->blocks);
    free(a->la);
    free(a);
    m->acts = NULL;
    m->capB = m->capT = 0;
    for (int l = 0; m->layers && l < m->cfg.num_layers; l++)
        for (int k = 0; k < SWIFT_LIN_COUNT; k++) {
            struct swift_lora_ad *ad = m->layers[l].lin[k].lora;
            if (ad) {
                ad->xa = ad->xd = NULL;
                ad->mask = NULL;
            }
        }
}

int swift_model_reserve(struct swift_model *m, int B, int T)
{
    if (m->acts && B <= m->capB && T == m->capT)
        return 0;
    acts_free(m);
    const struct swift_model_config *c = &m->cfg;
    size_t N = (size_t)B * T, H = (size_t)c->hidden_size, I = (size_t)c->intermediate_size;
    size_t QD = (size_t)c->num_heads * c->head_dim, KD = (size_t)c->num_kv_heads * c->head_dim;
    size_t V = (size_t)c->vocab_size, L = (size_t)c->num_layers;
    m->acts = calloc(1, sizeof(*m->acts));
    if (!m->acts)
        return swift_error("out of memory");
    struct swift_model_acts *a = m->acts;
    a->la = calloc(L, sizeof(*a->la));
    if (!a->la)
        goto oom;
#define A(ptr, n)                                                                                  \
    do {                                                                                           \
        if (!((ptr) = act_alloc(m, (n))))                                                          \
            goto oom;                                                                              \
    } while (0)
    A(a->res, (L + 1) * N * H);
    /* with activation checkpointing one set of layer activations is reused by every layer:
     * backward recomputes a layer's forward from its saved input res[l] */
    size_t nla = m->act_ckpt ? 1 : L;
    for (size_t l = 0; l < L; l++) {
        struct layer_acts *la = &a->la[l];
        if (l >= nla)
            goto lora_bufs;
        A(la->ln1, N * H);
        A(la->rstd1, N);
        if (c->qk_norm) {
            A(la->qraw, N * QD);
            A(la->qrstd, N * c->num_heads);
            A(la->kraw, N * KD);
            A(la->krstd, N * c->num_kv_heads);
        }
        A(la->q, N * QD);
        A(la->k, N * KD);
        A(la->v, N * KD);
        A(la->probs, (size_t)B * c->num_heads * T * T);
        A(la->att, N * QD);
        A(la->mid, N * H);
        A(la->ln2, N * H);
        A(la->rstd2, N);
        A(la->gate, N * I);
        A(la->up, N * I);
        A(la->act, N * I);
    lora_bufs:
        for (int k = 0; k < SWIFT_LIN_COUNT; k++) {
            struct swift_linear *lin = &m->layers[l].lin[k];
            if (!lin->lora)
                continue;
            A(lin->lora->xa, N * m->lora_rank);
            if (m->lora_dropout > 0) {
                A(lin->lora->xd, N * lin->in);
                float *mk;
                A(mk, (N * lin->in + 3) / 4);
                lin->lora->mask = (uint8_t *)mk;
            }
        }
    }
    size_t maxin = I > QD ? I : QD;
    if (H > maxin)
        maxin = H;
    A(a->lnf, N * H);
    A(a->rstdf, N);
    A(a->logits, N * V);
    A(a->dres, N * H);
    A(a->dln, N * H);
    A(a->datt, N * QD);
    A(a->dq, N * QD);
    A(a->dk, N * KD);
    A(a->dv, N * KD);
    A(a->dqraw, N * QD);
    A(a->dkraw, N * KD);
    A(a->dgate, N * I);
    A(a->dup, N * I);
    A(a->dact, N * I);
    A(a->dxa, N * (m->lora_rank > 0 ? (size_t)m->lora_rank : 1));
    A(a->dtmp, N * maxin);
#undef A
    m->capB = B;
    m->capT = T;
    return 0;
oom:
    acts_free(m);
    return swift_error("out of memory for activations of %d x %d tokens", B, T);
}

void swift_model_zero_grad(struct swift_model *m)
{
    if (m->grads)
        m->ops->zero(m->grads, m->nparams);
    if (m->lora_grads)
        m->ops->zero(m->lora_grads, m->nlora);
}

const float *swift_model_logits(const struct swift_model *m)
{
    return m->acts ? m->acts->logits : NULL;
}

/* ---- forward / backward ---- */

/* --profile: one span per op with shapes and FLOPs while the trace detail flag is on */
#define OP_BEGIN() int64_t op_t0 = swift_trace_detail() ? swift_trace_now() : 0
#define OP_END(name, flops, shape)                                                                 \
    do {                                                                                           \
        if (op_t0) {                                                                               \
            struct swift_targ op_a[2] = {SWIFT_TARG_S("shape", shape),                             \
                                         SWIFT_TARG_D("flops", flops)};                            \
            swift_trace_span("compute", name, op_t0, swift_trace_now(), op_a, 2);                  \
        }                                                                                          \
    } while (0)

static uint64_t lin_seed(const struct swift_model *m, int l, int k)
{
    uint64_t s = m->dropout_seed ^ ((uint64_t)(l + 1) * 0x9e3779b97f4a7c15ULL) ^
                 ((uint64_t)(k + 1) * 0xc2b2ae3d27d4eb4fULL);
    return rng_next(&s);
}

static void lin_fwd(struct swift_model *m, int l, int k, float *out, const float *x, int N,
                    float beta)
{
    int drop = m->lora_dropout > 0 && m->training;
    const struct swift_ops *ops = m->ops;
    struct swift_linear *L = &m->layers[l].lin[k];
    OP_BEGIN();
    ops->matmul_fwd(out, x, L->w, L->b, N, L->in, L->out, 1.0f, beta);
    struct swift_lora_ad *ad = L->lora;
    if (ad) {
        const float *xin = x;
        if (drop) {
            ops->dropout_fwd(
                ad->xd, ad->mask, x, (size_t)N * L->in, m->lora_dropout, lin_seed(m, l, k));
            xin = ad->xd;
        }
        ops->matmul_fwd(ad->xa, xin, ad->A, NULL, N, L->in, m->lora_rank, 1.0f, 0.0f);
        ops->matmul_fwd(out, ad->xa, ad->B, NULL, N, m->lora_rank, L->out, m->lora_scale, 1.0f);
    }
    if (op_t0) {
        char sh[96];
        snprintf(sh, sizeof(sh), "[%d,%d]x[%d,%d]^T", N, L->in, L->out, L->in);
        OP_END(lin_names[k], swift_matmul_flops(N, L->in, L->out), sh);
    }
}

static void lin_bwd(struct swift_model *m, int l, int k, float *dx, float dx_beta,
                    const float *dout, const float *x, int N)
{
    const struct swift_ops *ops = m->ops;
    struct swift_linear *L = &m->layers[l].lin[k];
    OP_BEGIN();
    ops->matmul_bwd(dx, L->gw, L->gb, dout, x, L->w, N, L->in, L->out, 1.0f, dx_beta);
    struct swift_lora_ad *ad = L->lora;
    if (ad) {
        float *dxa = m->acts->dxa;
        int r = m->lora_rank;
        ops->matmul_bwd(dxa, ad->gB, NULL, dout, ad->xa, ad->B, N, r, L->out, m->lora_scale, 0.0f);
        if (m->lora_dropout > 0 && m->training) {
            float *tmp = m->acts->dtmp;
            ops->matmul_bwd(tmp, ad->gA, NULL, dxa, ad->xd, ad->A, N, L->in, r, 1.0f, 0.0f);
            ops->dropout_bwd(dx, tmp, ad->mask, (size_t)N * L->in, m->lora_dropout);
        } else {
            ops->matmul_bwd(dx, ad->gA, NULL, dxa, x, ad->A, N, L->in, r, 1.0f, 1.0f);
        }
    }
    if (op_t0) {
        char sh[96], nm[64];
        snprintf(sh, sizeof(sh), "[%d,%d]x[%d,%d]", N, L->out, L->out, L->in);
        snprintf(nm, sizeof(nm), "%s.backward", lin_names[k]);
        OP_END(nm, swift_matmul_flops(N, L->in, L->out) * (L->gw ? 2 : 1), sh);
    }
}

/* One decoder layer: res[l] -> res[l+1], activations into la. */
static void layer_fwd(struct swift_model *m, int l, const struct swift_batch *b,
                      struct layer_acts *la)
{
    const struct swift_model_config *c = &m->cfg;
    const struct swift_ops *ops = m->ops;
    struct swift_model_acts *a = m->acts;
    int B = b->B, T = b->T, N = B * T, H = c->hidden_size, I = c->intermediate_size;
    int NH = c->num_heads, NKV = c->num_kv_heads, D = c->head_dim;
    {
        struct swift_layer *Ly = &m->layers[l];
        float *res = a->res + (size_t)l * N * H, *next = res + (size_t)N * H;
        int64_t lt0 = swift_trace_detail() ? swift_trace_now() : 0;
        ops->rmsnorm_fwd(la->ln1, la->rstd1, res, Ly->ln1, N, H, c->rms_norm_eps);
        lin_fwd(m, l, SWIFT_LIN_Q, c->qk_norm ? la->qraw : la->q, la->ln1, N, 0.0f);
        lin_fwd(m, l, SWIFT_LIN_K, c->qk_norm ? la->kraw : la->k, la->ln1, N, 0.0f);
        lin_fwd(m, l, SWIFT_LIN_V, la->v, la->ln1, N, 0.0f);
        if (c->qk_norm) {
            ops->rmsnorm_fwd(la->q, la->qrstd, la->qraw, Ly->qn, N * NH, D, c->rms_norm_eps);
            ops->rmsnorm_fwd(la->k, la->krstd, la->kraw, Ly->kn, N * NKV, D, c->rms_norm_eps);
        }
        ops->rope_fwd(la->q, b->pos, m->inv_freq, N, NH, D);
        ops->rope_fwd(la->k, b->pos, m->inv_freq, N, NKV, D);
        {
            OP_BEGIN();
            ops->attention_fwd(la->att, la->probs, la->q, la->k, la->v, b->pos, B, T, NH, NKV, D);
            char sh[96];
            snprintf(sh, sizeof(sh), "B=%d T=%d NH=%d NKV=%d D=%d", B, T, NH, NKV, D);
            OP_END("attention", 2.0 * B * NH * (double)T * T * D, sh);
        }
        ops->copy(la->mid, res, (size_t)N * H);
        lin_fwd(m, l, SWIFT_LIN_O, la->mid, la->att, N, 1.0f);
        ops->rmsnorm_fwd(la->ln2, la->rstd2, la->mid, Ly->ln2, N, H, c->rms_norm_eps);
        lin_fwd(m, l, SWIFT_LIN_GATE, la->gate, la->ln2, N, 0.0f);
        lin_fwd(m, l, SWIFT_LIN_UP, la->up, la->ln2, N, 0.0f);
        ops->swiglu_fwd(la->act, la->gate, la->up, (size_t)N * I);
        ops->copy(next, la->mid, (size_t)N * H);
        lin_fwd(m, l, SWIFT_LIN_DOWN, next, la->act, N, 1.0f);
        if (lt0) {
            char nm[32];
            snprintf(nm, sizeof(nm), "layer.%d.forward", l);
            struct swift_targ la_[1] = {SWIFT_TARG_I("layer", l)};
            swift_trace_span("compute", nm, lt0, swift_trace_now(), la_, 1);
        }
    }
}

int swift_model_forward(struct swift_model *m, const struct swift_batch *b, struct swift_loss *loss,
                        float dscale)
{
    const struct swift_model_config *c = &m->cfg;
    const struct swift_ops *ops = m->ops;
    int B = b->B, T = b->T, N = B * T, H = c->hidden_size, V = c->vocab_size;
    if (swift_model_reserve(m, B, T) < 0)
        return -1;
    for (int n = 0; n < N; n++) {
        if (b->tokens[n] < 0 || b->tokens[n] >= V)
            return swift_error(
                "token id %d at position %d is outside the vocabulary (%d)", b->tokens[n], n, V);
        if (b->targets[n] >= V)
            return swift_error("target id %d is outside the vocabulary (%d)", b->targets[n], V);
        if (b->pos[n] < 0 || b->pos[n] > n % T)
            return swift_error("position %d of token %d runs before its row", b->pos[n], n);
    }
    struct swift_model_acts *a = m->acts;
    m->training = dscale != 0.0f; /* dropout only when a backward pass follows */
    ops->embed_fwd(a->res, b->tokens, m->embed, N, H);
    for (int l = 0; l < c->num_layers; l++)
        layer_fwd(m, l, b, &a->la[m->act_ckpt ? 0 : l]);
    float *last = a->res + (size_t)c->num_layers * N * H;
    ops->rmsnorm_fwd(a->lnf, a->rstdf, last, m->norm, N, H, c->rms_norm_eps);
    {
        OP_BEGIN();
        ops->matmul_fwd(a->logits, a->lnf, m->lm_head, NULL, N, H, V, 1.0f, 0.0f);
        char sh[96];
        snprintf(sh, sizeof(sh), "[%d,%d]x[%d,%d]^T", N, H, V, H);
        OP_END("lm_head", swift_matmul_flops(N, H, V), sh);
    }
    OP_BEGIN();
    ops->cross_entropy(dscale != 0.0f ? a->logits : NULL,
                       &loss->sum,
                       &loss->count,
                       &loss->correct,
                       a->logits,
                       b->targets,
                       N,
                       V,
                       dscale);
    OP_END("cross_entropy", 3.0 * N * V, "");
    return 0;
}

void swift_model_layer_forward(struct swift_model *m, int l, const struct swift_batch *b,
                               const float *x, float *y, const float *in[SWIFT_LIN_COUNT])
{
    size_t NH = (size_t)b->B * b->T * m->cfg.hidden_size;
    struct swift_model_acts *a = m->acts;
    struct layer_acts *la = &a->la[m->act_ckpt ? 0 : l];
    float *res = a->res + (size_t)l * NH;
    m->training = 0;
    m->ops->copy(res, x, NH);
    layer_fwd(m, l, b, la);
    if (y)
        m->ops->copy(y, res + NH, NH);
    in[SWIFT_LIN_Q] = in[SWIFT_LIN_K] = in[SWIFT_LIN_V] = la->ln1;
    in[SWIFT_LIN_O] = la->att;
    in[SWIFT_LIN_GATE] = in[SWIFT_LIN_UP] = la->ln2;
    in[SWIFT_LIN_DOWN] = la->act;
}

int swift_model_embed(struct swift_model *m, const struct swift_batch *b, float *x)
{
    int N = b->B * b->T, V = m->cfg.vocab_size;
    for (int n = 0; n < N; n++)
        if (b->tokens[n] < 0 || b->tokens[n] >= V)
            return swift_error(
                "token id %d at position %d is outside the vocabulary (%d)", b->tokens[n], n, V);
    m->ops->embed_fwd(x, b->tokens, m->embed, N, m->cfg.hidden_size);
    return 0;
}

void swift_model_backward(struct swift_model *m, const struct swift_batch *b)
{
    const struct swift_model_config *c = &m->cfg;
    const struct swift_ops *ops = m->ops;
    int B = b->B, T = b->T, N = B * T, H = c->hidden_size, I = c->intermediate_size;
    int NH = c->num_heads, NKV = c->num_kv_heads, D = c->head_dim, V = c->vocab_size;
    struct swift_model_acts *a = m->acts;
    float *last = a->res + (size_t)c->num_layers * N * H;
    {
        OP_BEGIN();
        ops->matmul_bwd(
            a->dln, m->glm_head, NULL, a->logits, a->lnf, m->lm_head, N, H, V, 1.0f, 0.0f);
        OP_END("lm_head.backward", swift_matmul_flops(N, H, V) * (m->glm_head ? 2 : 1), "");
    }
    ops->zero(a->dres, (size_t)N * H);
    ops->rmsnorm_bwd(a->dres, m->gnorm, a->dln, last, m->norm, a->rstdf, N, H);
    for (int l = c->num_layers - 1; l >= 0; l--) {
        struct swift_layer *Ly = &m->layers[l];
        struct layer_acts *la = &a->la[m->act_ckpt ? 0 : l];
        float *res = a->res + (size_t)l * N * H;
        if (m->act_ckpt) /* recompute this layer's activations (same dropout masks) */
            layer_fwd(m, l, b, la);
        int64_t lt0 = swift_trace_detail() ? swift_trace_now() : 0;
        /* MLP: dres is d(next) = d(mid) + path through down/up/gate */
        lin_bwd(m, l, SWIFT_LIN_DOWN, a->dact, 0.0f, a->dres, la->act, N);
        ops->swiglu_bwd(a->dgate, a->dup, a->dact, la->gate, la->up, (size_t)N * I);
        lin_bwd(m, l, SWIFT_LIN_GATE, a->dln, 0.0f, a->dgate, la->ln2, N);
        lin_bwd(m, l, SWIFT_LIN_UP, a->dln, 1.0f, a->dup, la->ln2, N);
        ops->rmsnorm_bwd(a->dres, Ly->gln2, a->dln, la->mid, Ly->ln2, la->rstd2, N, H);
        /* attention: dres is now d(mid) */
        lin_bwd(m, l, SWIFT_LIN_O, a->datt, 0.0f, a->dres, la->att, N);
        {
            OP_BEGIN();
            ops->attention_bwd(a->dq,
                               a->dk,
                               a->dv,
                               a->datt,
                               la->probs,
                               la->q,
                               la->k,
                               la->v,
                               b->pos,
                               B,
                               T,
                               NH,
                               NKV,
                               D);
            OP_END("attention.backward", 4.0 * B * NH * (double)T * T * D, "");
        }
        ops->rope_bwd(a->dq, b->pos, m->inv_freq, N, NH, D);
        ops->rope_bwd(a->dk, b->pos, m->inv_freq, N, NKV, D);
        float *dqp = a->dq, *dkp = a->dk;
        if (c->qk_norm) {
            ops->zero(a->dqraw, (size_t)N * NH * D);
            ops->zero(a->dkraw, (size_t)N * NKV * D);
            ops->rmsnorm_bwd(a->dqraw, Ly->gqn, a->dq, la->qraw, Ly->qn, la->qrstd, N * NH, D);
            ops->rmsnorm_bwd(a->dkraw, Ly->gkn, a->dk, la->kraw, Ly->kn, la->krstd, N * NKV, D);
            dqp = a->dqraw;
            dkp = a->dkraw;
        }
        lin_bwd(m, l, SWIFT_LIN_Q, a->dln, 0.0f, dqp, la->ln1, N);
        lin_bwd(m, l, SWIFT_LIN_K, a->dln, 1.0f, dkp, la->ln1, N);
        lin_bwd(m, l, SWIFT_LIN_V, a->dln, 1.0f, a->dv, la->ln1, N);
        ops->rmsnorm_bwd(a->dres, Ly->gln1, a->dln, res, Ly->ln1, la->rstd1, N, H);
        if (lt0) {
            char nm[32];
            snprintf(nm, sizeof(nm), "layer.%d.backward", l);
            struct swift_targ la_[1] = {SWIFT_TARG_I("layer", l)};
            swift_trace_span("compute", nm, lt0, swift_trace_now(), la_, 1);
        }
    }
    if (m->gembed)
        ops->embed_bwd(m->gembed, a->dres, b->tokens, N, H);
}

double swift_model_flops_per_token(const struct swift_model *m, int T)
{
    const struct swift_model_config *c = &m->cfg;
    double lin = 0;
    for (int k = 0; k < SWIFT_LIN_COUNT; k++)
        lin += (double)m->layers[0].lin[k].in * m->layers[0].lin[k].out;
    lin = lin * c->num_layers + (double)c->vocab_size * c->hidden_size;
    /* forward 2 per weight, backward 2 for the input gradient and 2 for the weight gradient */
    double per = (m->grads ? 6.0 : 4.0) * lin;
    /* causal attention: QK^T and PV, on average T/2 keys, forward + 2x backward */
    per += 6.0 * c->num_layers * (double)c->num_heads * c->head_dim * T;
    return per;
}

/* ---- save ---- */

int swift_model_save(const struct swift_model *m, const char *dir, const char *src_config)
{
    int dt = !strcmp(m->cfg.dtype, "bfloat16")  ? SWIFT_DTYPE_BF16
             : !strcmp(m->cfg.dtype, "float16") ? SWIFT_DTYPE_F16
                                                : SWIFT_DTYPE_F32;
    struct swift_st_entry *e = calloc((size_t)m->np, sizeof(*e));
    /* a host copy of the parameters (backend memory may be a device's) */
    float *host = malloc((m->nparams ? m->nparams : 1) * sizeof(float));
    uint16_t *half = NULL;
    if (!e || !host) {
        free(e);
        free(host);
        return swift_error("out of memory: %zu parameters to save", m->nparams);
    }
    m->ops->download(host, m->params, m->nparams * sizeof(float));
    if (dt != SWIFT_DTYPE_F32) {
        half = malloc((m->nparams ? m->nparams : 1) * sizeof(uint16_t));
        if (!half) {
            free(e);
            free(host);
            return swift_error("out of memory");
        }
        for (size_t i = 0; i < m->nparams; i++)
            half[i] =
                dt == SWIFT_DTYPE_BF16 ? swift_f32_to_bf16(host[i]) : swift_f32_to_f16(host[i]);
    }
    for (int i = 0; i < m->np; i++) {
        e[i].name = m->p[i].name;
        e[i].dtype = (enum swift_dtype)dt;
        e[i].ndim = m->p[i].ndim;
        e[i].shape[0] = m->p[i].shape[0];
        e[i].shape[1] = m->p[i].shape[1];
        size_t off = (size_t)(m->p[i].w - m->params);
        e[i].data = half ? (const void *)(half + off) : (const void *)(host + off);
    }
    char *path = swift_path_join(dir, "model.safetensors");
    int rc = path ? swift_safetensors_write(path, e, (size_t)m->np, NULL) : -1;
    free(path);
    free(half);
    free(host);
    free(e);
    if (rc < 0)
        return -1;
    if (src_config) {
        char *txt;
        size_t len;
        if (swift_read_file(src_config, 16 << 20, &txt, &len) < 0)
            return -1;
        if (m->cfg.gptq) { /* the weights written are dequantized: no quantization_config */
            json_t *root = json_loadb(txt, len, 0, NULL);
            free(txt);
            txt = NULL;
            if (root) {
                json_object_del(root, "quantization_config");
                txt = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
                json_decref(root);
            }
            if (!txt)
                return swift_error("%s: cannot rewrite the config", src_config);
            len = strlen(txt);
        }
        char *out = swift_path_join(dir, "config.json");
        rc = out ? swift_atomic_write(out, txt, len) : -1;
        free(out);
        free(txt);
    }
    return rc;
}

void swift_model_free(struct swift_model *m)
{
    if (!m)
        return;
    acts_free(m);
    if (m->ops) {
        if (m->params)
            m->ops->free(m->params);
        if (m->grads)
            m->ops->free(m->grads);
        if (m->lora_params)
            m->ops->free(m->lora_params);
        if (m->lora_grads)
            m->ops->free(m->lora_grads);
    }
    for (int i = 0; i < m->np; i++)
        free(m->p[i].name);
    free(m->p);
    for (int i = 0; i < m->nlp; i++)
        free(m->lp[i].name);
    free(m->lp);
    for (int l = 0; m->layers && l < m->cfg.num_layers; l++)
        for (int k = 0; k < SWIFT_LIN_COUNT; k++) {
            free((char *)m->layers[l].lin[k].name);
            free(m->layers[l].lin[k].lora);
        }
    free(m->layers);
    free(m->inv_freq);
    memset(m, 0, sizeof(*m));
}
