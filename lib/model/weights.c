/* model weights — parameters by name, load (safetensors, GPTQ), random init, save, free
 * (see model.h). */
#include "lib/model/model.h"
#include "lib/core/mem.h"
#include "lib/core/alloc.h"
#include "lib/model/internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/export/gptq_solve.h"
#include "lib/formats/gguf.h"
#include "lib/formats/safetensors.h"
#include "lib/core/banned.h"

const char *const swift_lin_names[SWIFT_LIN_COUNT] = {"self_attn.q_proj",
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
    struct pspec *s = swift_xcalloc((size_t)cap, sizeof(*s));
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
            snprintf(nm, sizeof(nm), "model.layers.%d.%s.weight", l, swift_lin_names[k]);
            ADD(nm, 2, outs[k], ins[k], &lin->w, &lin->gw, 1);
            if (bias[k]) {
                snprintf(nm, sizeof(nm), "model.layers.%d.%s.bias", l, swift_lin_names[k]);
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
    if (c->score)
        ADD("score.weight", 2, 1, H, &m->score, &m->gscore, 1);
#undef ADD
    *out = s;
    return n;
}

static int alloc_params(struct swift_model *m, int with_grads)
{
    const struct swift_model_config *c = &m->cfg;
    m->layers = swift_xcalloc((size_t)c->num_layers, sizeof(*m->layers));
    m->inv_freq = swift_xcalloc((size_t)c->head_dim / 2, sizeof(float));
    swift_model_inv_freq(c, m->inv_freq);
    struct pspec *s = NULL;
    int n = build_specs(m, &s);
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += (size_t)s[i].shape[0] * (s[i].ndim == 2 ? (size_t)s[i].shape[1] : 1);
    m->nparams = total;
    m->params = swift_mem_alloc(m->ops->alloc, SWIFT_MEM_PARAMS, total * sizeof(float));
    m->grads =
        with_grads ? swift_mem_alloc(m->ops->alloc, SWIFT_MEM_GRADS, total * sizeof(float)) : NULL;
    m->p = swift_xcalloc((size_t)n, sizeof(*m->p));
    if (!m->params || (with_grads && !m->grads)) { /* backend memory */
        free(s);
        return swift_error("out of memory: %zu parameters", total);
    }
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        struct swift_param *p = &m->p[i];
        p->name = swift_xstrdup(s[i].name);
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
            snprintf(nm, sizeof(nm), "model.layers.%d.%s", l, swift_lin_names[k]);
            m->layers[l].lin[k].name = swift_xstrdup(nm);
        }
    return 0;
}

int swift_model_alloc(struct swift_model *m, int with_grads)
{
    return alloc_params(m, with_grads);
}

struct swift_param *swift_model_param(struct swift_model *m, const char *name)
{
    for (int i = 0; i < m->np; i++)
        if (!strcmp(m->p[i].name, name))
            return &m->p[i];
    return NULL;
}

static float randn(uint64_t *s);

/* The decoder linear whose weight is w, or NULL. */
static struct swift_linear *linear_of(struct swift_model *m, const float *w)
{
    for (int l = 0; l < m->cfg.num_layers; l++)
        for (int k = 0; k < SWIFT_LIN_COUNT; k++)
            if (m->layers[l].lin[k].w == w)
                return &m->layers[l].lin[k];
    return NULL;
}

/* A GGUF file (gguf_load.c): config from its metadata, the tensors dequantized. */
static int load_gguf(struct swift_model *m, const char *path, int frozen, int score)
{
    if (score)
        return swift_error("%s: a GGUF file has no reward head", path);
    struct swift_gguf *g;
    if (swift_gguf_open(path, &g) < 0)
        return -1;
    if (swift_model_gguf_config(&m->cfg, g, path) < 0) {
        swift_gguf_free(g);
        return -1;
    }
    int rc = alloc_params(m, !frozen);
    if (rc == 0)
        rc = swift_model_gguf_weights(m, g, path);
    swift_gguf_free(g);
    if (rc < 0)
        swift_model_free(m);
    return rc;
}

static int load(struct swift_model *m, const char *dir, const struct swift_ops *ops, int frozen,
                int score, uint64_t seed)
{
    memset(m, 0, sizeof(*m));
    m->ops = ops;
    if (swift_model_is_gguf(dir))
        return load_gguf(m, dir, frozen, score);
    char *cp = swift_path_join(dir, "config.json");
    int rc = swift_model_config_load(&m->cfg, cp);
    free(cp);
    if (rc < 0)
        return -1;
    m->cfg.score |= score;
    if (m->cfg.bnb_bits && !frozen)
        return swift_error("%s: saved in bitsandbytes' %d-bit layout: its base is frozen (train "
                           "LoRA on it: --tuner lora)",
                           dir,
                           m->cfg.bnb_bits);
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
    float *host = swift_xmalloc(maxn * sizeof(float));
    for (int i = 0; i < m->np; i++) {
        struct swift_param *p = &m->p[i];
        struct swift_linear *lin = m->cfg.bnb_bits && p->ndim == 2 ? linear_of(m, p->w) : NULL;
        if (lin) { /* bitsandbytes: loaded as stored (bnb.c) */
            if (swift_model_bnb_linear(m, lin, p->name, &set) < 0)
                goto fail;
            continue;
        }
        const struct swift_st_tensor *t = swift_st_set_find(&set, p->name);
        if (!t && m->cfg.gptq && p->ndim == 2) {
            if (swift_gptq_dequant_set(
                    &set, p->name, (int)p->shape[0], (int)p->shape[1], m->cfg.gptq == 1, host) < 0)
                goto fail;
            m->ops->upload(p->w, host, p->numel * sizeof(float));
            continue;
        }
        if (!t && score && p->w == m->score) { /* a new head: transformers' normal_ init */
            for (size_t j = 0; j < p->numel; j++)
                host[j] = (float)m->cfg.initializer_range * randn(&seed);
            m->ops->upload(p->w, host, p->numel * sizeof(float));
            continue;
        }
        if (!t && m->cfg.score && p->w == m->lm_head) { /* a saved reward model: unused */
            m->ops->zero(p->w, p->numel);
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
    if (m->cfg.bnb_bits && swift_model_q_drop_float(m) < 0) {
        swift_model_free(m);
        return -1;
    }
    return 0;
fail:
    free(host);
    swift_st_set_close(&set);
    swift_model_free(m);
    return -1;
}

int swift_model_load(struct swift_model *m, const char *dir, const struct swift_ops *ops,
                     int frozen)
{
    return load(m, dir, ops, frozen, 0, 0);
}

int swift_model_load_score(struct swift_model *m, const char *dir, const struct swift_ops *ops,
                           int frozen, uint64_t seed)
{
    return load(m, dir, ops, frozen, 1, seed);
}

static float randn(uint64_t *s)
{
    double u1 = ((double)(swift_splitmix64(s) >> 11) + 0.5) / 9007199254740992.0;
    double u2 = (double)(swift_splitmix64(s) >> 11) / 9007199254740992.0;
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
    float *host = swift_xmalloc(maxn * sizeof(float)); /* drawn on the host, then uploaded */
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

/* ---- save ---- */

/* The saved config: dequantized weights have no quantization_config; a reward model is
 * transformers' <Arch>ForSequenceClassification with one label and the padding token its score
 * skips (AutoModelForSequenceClassification reads the last token that is not pad_token_id). */
static void edit_config(const struct swift_model_config *c, json_t *root)
{
    if (c->gptq)
        json_object_del(root, "quantization_config");
    if (!c->score)
        return;
    const char *a0 = json_string_value(json_array_get(json_object_get(root, "architectures"), 0));
    char arch[128] = "LlamaForSequenceClassification";
    if (a0) {
        const char *cut = strstr(a0, "For");
        int n = cut ? (int)(cut - a0) : (int)strlen(a0);
        snprintf(arch, sizeof(arch), "%.*sForSequenceClassification", n, a0);
    }
    json_object_set_new(root, "architectures", json_pack("[s]", arch));
    json_object_set_new(root, "id2label", json_pack("{s:s}", "0", "LABEL_0"));
    json_object_set_new(root, "label2id", json_pack("{s:i}", "LABEL_0", 0));
    json_object_set_new(root, "num_labels", json_integer(1));
    if (c->pad_token_id >= 0)
        json_object_set_new(root, "pad_token_id", json_integer(c->pad_token_id));
}

int swift_model_save(const struct swift_model *m, const char *dir, const char *src_config)
{
    int dt = !strcmp(m->cfg.dtype, "bfloat16")  ? SWIFT_DTYPE_BF16
             : !strcmp(m->cfg.dtype, "float16") ? SWIFT_DTYPE_F16
                                                : SWIFT_DTYPE_F32;
    struct swift_st_entry *e = swift_xcalloc((size_t)m->np, sizeof(*e));
    /* a host copy of the parameters (backend memory may be a device's) */
    float *host = swift_xmalloc((m->nparams ? m->nparams : 1) * sizeof(float));
    uint16_t *half = NULL;
    m->ops->download(host, m->params, m->nparams * sizeof(float));
    if (dt != SWIFT_DTYPE_F32) {
        half = swift_xmalloc((m->nparams ? m->nparams : 1) * sizeof(uint16_t));
        for (size_t i = 0; i < m->nparams; i++)
            half[i] =
                dt == SWIFT_DTYPE_BF16 ? swift_f32_to_bf16(host[i]) : swift_f32_to_f16(host[i]);
    }
    size_t ne = 0;
    for (int i = 0; i < m->np; i++) {
        if (m->cfg.score && m->p[i].w == m->lm_head && !m->cfg.tie_embeddings)
            continue; /* a reward model has no lm_head (transformers' layout) */
        size_t k = ne++;
        e[k].name = m->p[i].name;
        e[k].dtype = (enum swift_dtype)dt;
        e[k].ndim = m->p[i].ndim;
        e[k].shape[0] = m->p[i].shape[0];
        e[k].shape[1] = m->p[i].shape[1];
        size_t off = (size_t)(m->p[i].w - m->params);
        e[k].data = half ? (const void *)(half + off) : (const void *)(host + off);
    }
    char *path = swift_path_join(dir, "model.safetensors");
    int rc = swift_safetensors_write(path, e, ne, NULL);
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
        if (m->cfg.gptq || m->cfg.score) {
            json_t *root = json_loadb(txt, len, 0, NULL);
            free(txt);
            txt = NULL;
            if (root) {
                edit_config(&m->cfg, root);
                txt = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
                json_decref(root);
            }
            if (!txt)
                return swift_error("%s: cannot rewrite the config", src_config);
            len = strlen(txt);
        }
        char *out = swift_path_join(dir, "config.json");
        rc = swift_atomic_write(out, txt, len);
        free(out);
        free(txt);
    }
    return rc;
}

void swift_model_free(struct swift_model *m)
{
    if (!m)
        return;
    swift_model_acts_free(m);
    swift_lora_dora_free(m);
    swift_model_q4_free(m);
    if (m->ops) {
        if (m->params)
            swift_mem_free(m->ops->free, m->params);
        if (m->grads)
            swift_mem_free(m->ops->free, m->grads);
        if (m->lora_params)
            swift_mem_free(m->ops->free, m->lora_params);
        if (m->lora_grads)
            swift_mem_free(m->ops->free, m->lora_grads);
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
