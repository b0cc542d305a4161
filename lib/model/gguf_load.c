/* model gguf_load — a GGUF model (what swift-export writes: llama, qwen2, qwen3) into our fp32
 * weights: the config from the metadata, every tensor dequantized at load (lib/formats/quant.c),
 * llama's q/k rows permuted back from llama.cpp's rope layout (see model.h). */
#include "lib/model/model.h"
#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/formats/gguf.h"
#include "lib/formats/quant.h"
#include "lib/model/internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/core/banned.h"

int swift_model_is_gguf(const char *path)
{
    if (!path || swift_is_dir(path))
        return 0;
    size_t n = strlen(path);
    if (n > 5 && !strcmp(path + n - 5, ".gguf"))
        return 1;
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return 0;
    char magic[4] = {0};
    size_t got = fread(magic, 1, 4, fp);
    fclose(fp);
    return got == 4 && !memcmp(magic, "GGUF", 4);
}

/* An integer key ARCH.suffix (required unless def >= 0). */
static int arch_int(const struct swift_gguf *g, const char *path, const char *arch,
                    const char *suffix, int64_t def, int64_t *out)
{
    char k[128];
    snprintf(k, sizeof(k), "%s.%s", arch, suffix);
    const struct swift_gguf_value *v = swift_gguf_get(g, k);
    if (!v) {
        if (def < 0)
            return swift_error("%s: no metadata key %s", path, k);
        *out = def;
        return 0;
    }
    if (swift_gguf_value_int(v, out) < 0 || *out < 0 || *out > (1 << 30))
        return swift_error("%s: metadata %s is not a valid integer", path, k);
    return 0;
}

static int arch_float(const struct swift_gguf *g, const char *path, const char *arch,
                      const char *suffix, double def, double *out)
{
    char k[128];
    snprintf(k, sizeof(k), "%s.%s", arch, suffix);
    const struct swift_gguf_value *v = swift_gguf_get(g, k);
    if (!v) {
        *out = def;
        return 0;
    }
    if (v->type != SWIFT_GGUF_F32 && v->type != SWIFT_GGUF_F64)
        return swift_error("%s: metadata %s is not a float", path, k);
    *out = v->v.f;
    return 0;
}

static int has_tensor(const struct swift_gguf *g, const char *name)
{
    return swift_gguf_find_tensor(g, name) >= 0;
}

/* Rope scaling keys: linear is ours, yarn is not (llama 3's factors come as rope_freqs). */
static int rope_config(const struct swift_gguf *g, const char *path, const char *arch,
                       struct swift_model_config *c)
{
    char k[128];
    snprintf(k, sizeof(k), "%s.rope.scaling.type", arch);
    const struct swift_gguf_value *v = swift_gguf_get(g, k);
    if (!v || v->type != SWIFT_GGUF_STRING || !strcmp(v->v.str.s, "none"))
        return 0;
    if (strcmp(v->v.str.s, "linear"))
        return swift_error("%s: rope scaling '%s' is not supported (linear, or llama 3's "
                           "rope_freqs)",
                           path,
                           v->v.str.s);
    c->rope_type = SWIFT_ROPE_LINEAR;
    return arch_float(g, path, arch, "rope.scaling.factor", 1.0, &c->rope_factor);
}

int swift_model_gguf_config(struct swift_model_config *c, const struct swift_gguf *g,
                            const char *path)
{
    memset(c, 0, sizeof(*c));
    const struct swift_gguf_value *a = swift_gguf_get(g, "general.architecture");
    if (!a || a->type != SWIFT_GGUF_STRING)
        return swift_error("%s: no general.architecture", path);
    const char *arch = a->v.str.s;
    if (strcmp(arch, "llama") && strcmp(arch, "qwen2") && strcmp(arch, "qwen3"))
        return swift_error(
            "%s: architecture '%s' is not supported (llama, qwen2, qwen3)", path, arch);
    snprintf(c->model_type, sizeof(c->model_type), "%s", arch);
    snprintf(c->dtype, sizeof(c->dtype), "float32");
    int64_t layers, hidden, ffn, heads, kv, hd, ctx;
    double eps, theta;
    if (arch_int(g, path, arch, "block_count", -1, &layers) < 0 ||
        arch_int(g, path, arch, "embedding_length", -1, &hidden) < 0 ||
        arch_int(g, path, arch, "feed_forward_length", -1, &ffn) < 0 ||
        arch_int(g, path, arch, "attention.head_count", -1, &heads) < 0 ||
        arch_int(g, path, arch, "attention.head_count_kv", heads, &kv) < 0 ||
        arch_int(g, path, arch, "context_length", 2048, &ctx) < 0 ||
        arch_float(g, path, arch, "attention.layer_norm_rms_epsilon", 1e-6, &eps) < 0 ||
        arch_float(g, path, arch, "rope.freq_base", 10000.0, &theta) < 0)
        return -1;
    if (heads < 1 || kv < 1 || heads % kv || layers < 1 || hidden < 1 || ffn < 1)
        return swift_error("%s: inconsistent metadata (%lld layers, %lld heads, %lld kv heads)",
                           path,
                           (long long)layers,
                           (long long)heads,
                           (long long)kv);
    if (arch_int(g, path, arch, "attention.key_length", hidden / heads, &hd) < 0)
        return -1;
    if (hd < 2 || hd % 2)
        return swift_error("%s: head dimension %lld is not even", path, (long long)hd);
    long te = swift_gguf_find_tensor(g, "token_embd.weight");
    if (te < 0)
        return swift_error("%s: no tensor token_embd.weight", path);
    c->vocab_size = (int)g->tensors[te].ne[1];
    c->hidden_size = (int)hidden;
    c->intermediate_size = (int)ffn;
    c->num_layers = (int)layers;
    c->num_heads = (int)heads;
    c->num_kv_heads = (int)kv;
    c->head_dim = (int)hd;
    c->max_position_embeddings = (int)ctx;
    c->rms_norm_eps = (float)eps;
    c->rope_theta = theta;
    c->rope_factor = 1.0;
    c->qkv_bias = has_tensor(g, "blk.0.attn_q.bias");
    c->o_bias = has_tensor(g, "blk.0.attn_output.bias");
    c->mlp_bias = has_tensor(g, "blk.0.ffn_up.bias");
    c->qk_norm = has_tensor(g, "blk.0.attn_q_norm.weight");
    c->tie_embeddings = !has_tensor(g, "output.weight");
    c->pad_token_id = -1;
    c->initializer_range = 0.02;
    int64_t pad;
    const struct swift_gguf_value *pv = swift_gguf_get(g, "tokenizer.ggml.padding_token_id");
    if (pv && swift_gguf_value_int(pv, &pad) == 0)
        c->pad_token_id = (int)pad;
    return rope_config(g, path, arch, c);
}

/* Our parameter name → the GGUF tensor name (to_gguf.c's mapping, inverted). */
static int gguf_name(const char *hf, char *out, size_t outlen)
{
    static const char *const map[][2] = {{"input_layernorm.", "attn_norm."},
                                         {"self_attn.q_proj.", "attn_q."},
                                         {"self_attn.k_proj.", "attn_k."},
                                         {"self_attn.v_proj.", "attn_v."},
                                         {"self_attn.o_proj.", "attn_output."},
                                         {"self_attn.q_norm.", "attn_q_norm."},
                                         {"self_attn.k_norm.", "attn_k_norm."},
                                         {"post_attention_layernorm.", "ffn_norm."},
                                         {"mlp.gate_proj.", "ffn_gate."},
                                         {"mlp.up_proj.", "ffn_up."},
                                         {"mlp.down_proj.", "ffn_down."}};
    if (!strcmp(hf, "model.embed_tokens.weight"))
        return snprintf(out, outlen, "token_embd.weight"), 0;
    if (!strcmp(hf, "model.norm.weight"))
        return snprintf(out, outlen, "output_norm.weight"), 0;
    if (!strcmp(hf, "lm_head.weight"))
        return snprintf(out, outlen, "output.weight"), 0;
    int layer, used = 0;
    if (sscanf(hf, "model.layers.%d.%n", &layer, &used) != 1 || !used)
        return -1;
    const char *rest = hf + used;
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
        size_t n = strlen(map[i][0]);
        if (!strncmp(rest, map[i][0], n)) {
            snprintf(out, outlen, "blk.%d.%s%s", layer, map[i][1], rest + n);
            return 0;
        }
    }
    return -1;
}

/* llama.cpp's NORM rope layout (adjacent pairs) back to HF's rotate_half (halves): the inverse
 * of to_gguf.c's permute_rows. */
static void unpermute_rows(const float *src, float *dst, int64_t rows, int64_t cols, int64_t nh)
{
    int64_t half = rows / nh / 2;
    for (int64_t h = 0; h < nh; h++)
        for (int64_t i = 0; i < half; i++)
            for (int64_t j = 0; j < 2; j++) {
                int64_t from = h * 2 * half + i * 2 + j, to = h * 2 * half + j * half + i;
                memcpy(dst + to * cols, src + from * cols, (size_t)cols * sizeof(float));
            }
}

/* One tensor of the file into host (numel floats) after the checks; tmp as large. */
static int read_one(const struct swift_model *m, const struct swift_gguf *g, const char *path,
                    const struct swift_param *p, float *host, float *tmp)
{
    char name[SWIFT_GGUF_MAX_NAME + 32];
    if (gguf_name(p->name, name, sizeof(name)) < 0)
        return swift_error("%s: no GGUF name for parameter %s", path, p->name);
    long ti = swift_gguf_find_tensor(g, name);
    if (ti < 0)
        return swift_error("%s: no tensor %s (for %s)", path, name, p->name);
    const struct swift_gguf_tensor *t = &g->tensors[ti];
    size_t at = (size_t)(g->data_offset + t->offset);
    uint64_t rows = p->ndim == 2 ? (uint64_t)p->shape[0] : 1;
    uint64_t cols = p->ndim == 2 ? (uint64_t)p->shape[1] : (uint64_t)p->shape[0];
    if (t->ne[0] != cols || t->ne[1] * t->ne[2] * t->ne[3] != rows)
        return swift_error("%s:@%zu: tensor %s has shape [%llu, %llu], expected [%llu, %llu]",
                           path,
                           at,
                           name,
                           (unsigned long long)t->ne[0],
                           (unsigned long long)t->ne[1],
                           (unsigned long long)cols,
                           (unsigned long long)rows);
    if (!swift_quant_supported(t->type))
        return swift_error("%s:@%zu: tensor %s has type %s, which has no CPU kernel here "
                           "(F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q4_K, Q6_K)",
                           path,
                           at,
                           name,
                           swift_ggml_type_name(t->type));
    if (swift_dequantize(t->type, t->data, host, (int64_t)p->numel) < 0)
        return swift_error("%s:@%zu: tensor %s could not be decoded", path, at, name);
    int64_t nh = 0;
    if (!strcmp(m->cfg.model_type, "llama") && strstr(name, ".attn_q."))
        nh = m->cfg.num_heads;
    else if (!strcmp(m->cfg.model_type, "llama") && strstr(name, ".attn_k."))
        nh = m->cfg.num_kv_heads;
    if (nh && rows % (uint64_t)(2 * nh) == 0) {
        unpermute_rows(host, tmp, (int64_t)rows, (int64_t)cols, nh);
        memcpy(host, tmp, p->numel * sizeof(float));
    }
    return 0;
}

int swift_model_gguf_weights(struct swift_model *m, const struct swift_gguf *g, const char *path)
{
    size_t maxn = 1;
    for (int i = 0; i < m->np; i++)
        if (m->p[i].numel > maxn)
            maxn = m->p[i].numel;
    float *host = swift_xmalloc(maxn * sizeof(float));
    float *tmp = swift_xmalloc(maxn * sizeof(float));
    int rc = 0;
    for (int i = 0; i < m->np && rc == 0; i++) {
        struct swift_param *p = &m->p[i];
        rc = read_one(m, g, path, p, host, tmp);
        if (rc == 0)
            m->ops->upload(p->w, host, p->numel * sizeof(float));
    }
    /* llama 3 rope scaling: convert_hf_to_gguf.py's rope_freqs divide the base frequencies */
    long rf = swift_gguf_find_tensor(g, "rope_freqs.weight");
    if (rc == 0 && rf >= 0) {
        const struct swift_gguf_tensor *t = &g->tensors[rf];
        int half = m->cfg.head_dim / 2;
        if (t->type != SWIFT_GGML_F32 || t->ne[0] != (uint64_t)half)
            rc = swift_error("%s:@%llu: rope_freqs.weight is not %d F32 values",
                             path,
                             (unsigned long long)(g->data_offset + t->offset),
                             half);
        for (int j = 0; rc == 0 && j < half; j++) {
            float f;
            memcpy(&f, (const uint8_t *)t->data + 4 * j, 4);
            double base = pow(m->cfg.rope_theta, -(double)(2 * j) / (double)m->cfg.head_dim);
            m->inv_freq[j] = (float)(base / f);
        }
    }
    free(host);
    free(tmp);
    return rc;
}
