/* model config — config.json parsing and RoPE frequencies (see model.h). */
#include "lib/model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/core/banned.h"

#define MAX_LAYERS 4096 /* the largest models have a few hundred */

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

/* RoPE: v4 has rope_theta + rope_scaling; v5 has rope_parameters (and may keep both) */
static int parse_rope(struct swift_model_config *c, json_t *root, const char *path)
{
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
    return 0;
}

/* A model saved by transformers with bitsandbytes (load_in_4bit / load_in_8bit): its linears
 * are loaded as they are stored (lib/model/bnb.c). 0 or -1 (reported). */
static int parse_bnb(struct swift_model_config *c, json_t *qc, const char *path)
{
    int b4 = json_is_true(json_object_get(qc, "load_in_4bit"));
    int b8 = json_is_true(json_object_get(qc, "load_in_8bit"));
    if (b4 == b8)
        return swift_error_at(path,
                              0,
                              "quantization_config: bitsandbytes needs load_in_4bit or "
                              "load_in_8bit true (not %s)",
                              b4 ? "both" : "neither");
    c->bnb_bits = b4 ? 4 : 8;
    if (b8)
        return 0;
    const char *t = json_string_value(json_object_get(qc, "bnb_4bit_quant_type"));
    if (!t || (strcmp(t, "nf4") && strcmp(t, "fp4")))
        return swift_error_at(path,
                              0,
                              "quantization_config: bnb_4bit_quant_type '%s' is not nf4 or fp4",
                              t ? t : "?");
    const char *st = json_string_value(json_object_get(qc, "bnb_4bit_quant_storage"));
    if (st && strcmp(st, "uint8"))
        return swift_error_at(
            path,
            0,
            "quantization_config: bnb_4bit_quant_storage '%s' is not supported (uint8 is)",
            st);
    c->bnb_type = strcmp(t, "fp4") ? SWIFT_Q4_NF4 : SWIFT_Q4_FP4;
    c->bnb_dq = json_is_true(json_object_get(qc, "bnb_4bit_use_double_quant"));
    return 0;
}

/* a GPTQ checkpoint (swift-export --quant, auto-gptq, GPTQModel): dequantized on load; a
 * bitsandbytes one: parse_bnb */
static int parse_gptq(struct swift_model_config *c, json_t *root, const char *path)
{
    json_t *qc = json_object_get(root, "quantization_config");
    if (qc && !json_is_null(qc)) {
        const char *qm = json_string_value(json_object_get(qc, "quant_method"));
        const char *cf = json_string_value(json_object_get(qc, "checkpoint_format"));
        if (qm && !strcmp(qm, "bitsandbytes"))
            return parse_bnb(c, qc, path);
        if (!qm || strcmp(qm, "gptq"))
            return swift_error_at(path,
                                  0,
                                  "quantization_config: quant_method '%s' is not supported "
                                  "(gptq and bitsandbytes are)",
                                  qm ? qm : "?");
        if (cf && strcmp(cf, "gptq") && strcmp(cf, "gptq_v2"))
            return swift_error_at(
                path, 0, "quantization_config: checkpoint_format '%s' is not supported", cf);
        c->gptq = cf && !strcmp(cf, "gptq_v2") ? 2 : 1;
    }
    return 0;
}

/* A reward model's head and the token it reads: architectures "...ForSequenceClassification"
 * (num_labels 1), pad_token_id or else the (first) eos_token_id, initializer_range. */
static void parse_score(struct swift_model_config *c, json_t *root)
{
    json_t *ar = json_object_get(root, "architectures");
    const char *a0 = json_string_value(json_array_get(ar, 0));
    const char *suf = "ForSequenceClassification";
    c->score = a0 && strlen(a0) > strlen(suf) && !strcmp(a0 + strlen(a0) - strlen(suf), suf);
    json_t *pad = json_object_get(root, "pad_token_id");
    if (!json_is_integer(pad)) {
        pad = json_object_get(root, "eos_token_id");
        if (json_is_array(pad))
            pad = json_array_get(pad, 0);
    }
    c->pad_token_id = json_is_integer(pad) ? (int)json_integer_value(pad) : -1;
    json_t *ir = json_object_get(root, "initializer_range");
    c->initializer_range = json_is_number(ir) ? json_number_value(ir) : 0.02;
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
    if (c->num_layers > MAX_LAYERS) /* checked before the per-layer tables are allocated */
        return swift_error_at(
            path, 0, "num_hidden_layers %d is above the limit of %d", c->num_layers, MAX_LAYERS);
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

    if (parse_rope(c, root, path) < 0)
        return -1;

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
    parse_score(c, root);
    return parse_gptq(c, root, path);
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

int swift_model_eos_ids(const char *model_dir, long *ids, int cap)
{
    static const char *const files[] = {"generation_config.json", "config.json"};
    int n = 0;
    for (int f = 0; f < 2; f++) {
        char *p = swift_path_join(model_dir, files[f]);
        json_t *j = json_load_file(p, 0, NULL);
        free(p);
        json_t *e = json_object_get(j, "eos_token_id");
        size_t m = json_is_array(e) ? json_array_size(e) : json_is_integer(e) ? 1 : 0;
        for (size_t k = 0; k < m && n < cap; k++) {
            json_t *v = json_is_array(e) ? json_array_get(e, k) : e;
            if (json_is_integer(v))
                ids[n++] = (long)json_integer_value(v);
        }
        json_decref(j);
    }
    return n;
}
