/* export/hparams — config.json fields the GGUF converter writes, and HF → GGUF tensor names. */
#include "lib/error.h"
#include "lib/export/internal.h"
#include "lib/fileio.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/banned.h"

json_t *swift_json_load(const char *path)
{
    json_error_t e;
    json_t *j = json_load_file(path, JSON_REJECT_DUPLICATES, &e);
    if (!j) {
        if (e.line <= 0)
            swift_error("cannot read '%s': %s", path, e.text);
        else
            swift_error_at(path, e.line, "%s", e.text);
    }
    return j;
}

static int get_int(json_t *cfg, const char *path, const char *key, int64_t *out, int required)
{
    json_t *v = json_object_get(cfg, key);
    if (!v || json_is_null(v)) {
        if (required)
            return swift_error("%s: missing \"%s\"", path, key);
        return 1;
    }
    if (!json_is_integer(v) || json_integer_value(v) <= 0)
        return swift_error("%s: \"%s\" must be a positive integer", path, key);
    *out = json_integer_value(v);
    return 0;
}

static int get_num(json_t *cfg, const char *path, const char *key, double *out)
{
    json_t *v = json_object_get(cfg, key);
    if (!v || json_is_null(v))
        return 1;
    if (!json_is_number(v))
        return swift_error("%s: \"%s\" must be a number", path, key);
    *out = json_number_value(v);
    return 0;
}

static int64_t first_id(json_t *v)
{
    if (json_is_integer(v))
        return json_integer_value(v);
    if (json_is_array(v) && json_array_size(v) && json_is_integer(json_array_get(v, 0)))
        return json_integer_value(json_array_get(v, 0));
    return -1;
}

void swift_hparams_release(struct swift_hparams *hp)
{
    json_decref(hp->config);
    hp->config = NULL;
}

int swift_hparams_load(struct swift_hparams *hp, const char *model_dir)
{
    memset(hp, 0, sizeof(*hp));
    char *path = swift_path_join(model_dir, "config.json");
    json_t *cfg = swift_json_load(path);
    int rc = -1;
    if (!cfg)
        goto out;
    hp->config = cfg;
    if (!json_is_object(cfg)) {
        swift_error("%s: expected a JSON object", path);
        goto out;
    }
    const char *mt = json_string_value(json_object_get(cfg, "model_type"));
    const char *a0 = json_string_value(json_array_get(json_object_get(cfg, "architectures"), 0));
    if (!mt && a0) {
        if (!strcmp(a0, "LlamaForCausalLM") || !strcmp(a0, "MistralForCausalLM"))
            mt = "llama";
        else if (!strcmp(a0, "Qwen2ForCausalLM"))
            mt = "qwen2";
        else if (!strcmp(a0, "Qwen3ForCausalLM"))
            mt = "qwen3";
    }
    if (!mt) {
        swift_error("%s: no \"model_type\" or known \"architectures\"", path);
        goto out;
    }
    if (!strcmp(mt, "mistral"))
        mt = "llama"; /* same graph in llama.cpp */
    if (strcmp(mt, "llama") && strcmp(mt, "qwen2") && strcmp(mt, "qwen3")) {
        swift_error("%s: unsupported architecture '%s' (supported: llama, qwen2, qwen3)", path, mt);
        goto out;
    }
    snprintf(hp->arch, sizeof(hp->arch), "%s", mt);
    if (get_int(cfg, path, "vocab_size", &hp->vocab_size, 1) < 0 ||
        get_int(cfg, path, "hidden_size", &hp->hidden, 1) < 0 ||
        get_int(cfg, path, "intermediate_size", &hp->ffn, 1) < 0 ||
        get_int(cfg, path, "num_hidden_layers", &hp->layers, 1) < 0 ||
        get_int(cfg, path, "num_attention_heads", &hp->heads, 1) < 0)
        goto out;
    hp->kv_heads = hp->heads;
    if (get_int(cfg, path, "num_key_value_heads", &hp->kv_heads, 0) < 0)
        goto out;
    if (hp->hidden % hp->heads && !json_object_get(cfg, "head_dim")) {
        swift_error("%s: hidden_size %lld is not a multiple of num_attention_heads %lld",
                    path,
                    (long long)hp->hidden,
                    (long long)hp->heads);
        goto out;
    }
    hp->head_dim = hp->hidden / hp->heads;
    int r = get_int(cfg, path, "head_dim", &hp->head_dim, 0);
    if (r < 0)
        goto out;
    hp->has_head_dim = r == 0;
    if (hp->heads % hp->kv_heads) {
        swift_error("%s: num_attention_heads %lld is not a multiple of num_key_value_heads %lld",
                    path,
                    (long long)hp->heads,
                    (long long)hp->kv_heads);
        goto out;
    }
    hp->ctx = 2048;
    if (get_int(cfg, path, "max_position_embeddings", &hp->ctx, 0) < 0)
        goto out;
    hp->rms_eps = !strcmp(mt, "llama") ? 1e-6 : 1e-6;
    if (get_num(cfg, path, "rms_norm_eps", &hp->rms_eps) < 0)
        goto out;
    hp->rope_theta = 10000.0;
    if (get_num(cfg, path, "rope_theta", &hp->rope_theta) < 0)
        goto out;
    /* transformers 5: rope_parameters {rope_theta, rope_type, factor, ...}; v4: rope_scaling */
    json_t *rp = json_object_get(cfg, "rope_parameters");
    if (json_is_object(rp) && get_num(rp, path, "rope_theta", &hp->rope_theta) < 0)
        goto out;
    json_t *rs = json_object_get(cfg, "rope_scaling");
    if (!json_is_object(rs))
        rs = rp;
    if (json_is_object(rs)) {
        const char *t = json_string_value(json_object_get(rs, "rope_type"));
        if (!t)
            t = json_string_value(json_object_get(rs, "type"));
        if (t && strcmp(t, "default")) {
            if (strcmp(t, "linear") && strcmp(t, "llama3") && strcmp(t, "yarn")) {
                swift_error(
                    "%s: unsupported rope scaling type '%s' (linear, llama3, yarn)", path, t);
                goto out;
            }
            snprintf(hp->rope_type, sizeof(hp->rope_type), "%s", t);
            hp->rope_factor = 1.0;
            hp->rope_low_freq = 1.0;
            hp->rope_high_freq = 4.0;
            hp->rope_orig_ctx = 8192;
            if (get_num(rs, path, "factor", &hp->rope_factor) < 0 ||
                get_num(rs, path, "low_freq_factor", &hp->rope_low_freq) < 0 ||
                get_num(rs, path, "high_freq_factor", &hp->rope_high_freq) < 0 ||
                get_num(rs, path, "original_max_position_embeddings", &hp->rope_orig_ctx) < 0)
                goto out;
        }
    }
    json_t *tie = json_object_get(cfg, "tie_word_embeddings");
    hp->tie_embeddings = tie ? json_is_true(tie) : strcmp(mt, "llama") != 0;
    hp->bos_id = first_id(json_object_get(cfg, "bos_token_id"));
    hp->eos_id = first_id(json_object_get(cfg, "eos_token_id"));
    rc = 0;
out:
    free(path);
    if (rc < 0)
        swift_hparams_release(hp);
    return rc;
}

int swift_gguf_tensor_name(const char *hf, char *out, size_t outlen)
{
    static const struct {
        const char *hf, *gguf;
    } top[] = {{"model.embed_tokens.", "token_embd."},
               {"model.norm.", "output_norm."},
               {"lm_head.", "output."}},
      layer[] = {
          {"input_layernorm.", "attn_norm."},
          {"self_attn.q_proj.", "attn_q."},
          {"self_attn.k_proj.", "attn_k."},
          {"self_attn.v_proj.", "attn_v."},
          {"self_attn.o_proj.", "attn_output."},
          {"self_attn.q_norm.", "attn_q_norm."},
          {"self_attn.k_norm.", "attn_k_norm."},
          {"post_attention_layernorm.", "ffn_norm."},
          {"mlp.gate_proj.", "ffn_gate."},
          {"mlp.up_proj.", "ffn_up."},
          {"mlp.down_proj.", "ffn_down."},
      };
    const char *suffixes[] = {"weight", "bias"};
    for (size_t i = 0; i < sizeof(top) / sizeof(top[0]); i++) {
        size_t n = strlen(top[i].hf);
        if (!strncmp(hf, top[i].hf, n))
            for (int s = 0; s < 2; s++)
                if (!strcmp(hf + n, suffixes[s])) {
                    snprintf(out, outlen, "%s%s", top[i].gguf, suffixes[s]);
                    return 0;
                }
    }
    if (strncmp(hf, "model.layers.", 13))
        return -1;
    const char *p = hf + 13;
    char *end;
    long idx = strtol(p, &end, 10);
    if (end == p || *end != '.' || idx < 0 || idx > 100000)
        return -1;
    p = end + 1;
    if (!strcmp(p, "self_attn.rotary_emb.inv_freq"))
        return 1;
    for (size_t i = 0; i < sizeof(layer) / sizeof(layer[0]); i++) {
        size_t n = strlen(layer[i].hf);
        if (!strncmp(p, layer[i].hf, n))
            for (int s = 0; s < 2; s++)
                if (!strcmp(p + n, suffixes[s])) {
                    snprintf(out, outlen, "blk.%ld.%s%s", idx, layer[i].gguf, suffixes[s]);
                    return 0;
                }
    }
    return -1;
}
