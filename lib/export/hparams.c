/* export/hparams — config.json fields the GGUF converter writes, and HF → GGUF tensor names. */
#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/export/internal.h"
#include "lib/core/fileio.h"
#include "lib/model/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

/* jansson rejects integers beyond int64 ("too big integer"); HF files have some, e.g.
 * Llama 3's model_max_length 1000000000000000019884624838656. Outside strings, an integer
 * literal of more than 18 digits gets ".0" appended so that it parses as a real. */
static char *widen_big_ints(const char *s, size_t len, size_t *outlen)
{
    char *o = swift_xmalloc(len + len / 19 * 2 + 1);
    size_t w = 0;
    int in_str = 0;
    for (size_t i = 0; i < len;) {
        char c = s[i];
        if (in_str) {
            o[w++] = c;
            if (c == '\\' && i + 1 < len)
                o[w++] = s[++i];
            else if (c == '"')
                in_str = 0;
            i++;
            continue;
        }
        if (c == '"') {
            in_str = 1;
            o[w++] = s[i++];
            continue;
        }
        if (c >= '0' && c <= '9' && (i == 0 || !(s[i - 1] >= '0' && s[i - 1] <= '9'))) {
            size_t j = i;
            while (j < len && s[j] >= '0' && s[j] <= '9')
                j++;
            memcpy(o + w, s + i, j - i);
            w += j - i;
            int is_int = j >= len || (s[j] != '.' && s[j] != 'e' && s[j] != 'E');
            if (j - i > 18 && is_int) {
                o[w++] = '.';
                o[w++] = '0';
            }
            i = j;
            continue;
        }
        o[w++] = s[i++];
    }
    o[w] = 0;
    *outlen = w;
    return o;
}

json_t *swift_json_load(const char *path)
{
    char *text = NULL;
    size_t len = 0, wlen = 0;
    if (swift_read_file(path, (size_t)1 << 30, &text, &len) < 0)
        return NULL;
    char *wide = widen_big_ints(text, len, &wlen);
    free(text);
    json_error_t e;
    json_t *j = json_loadb(wide, wlen, JSON_REJECT_DUPLICATES, &e);
    free(wide);
    if (!j)
        swift_error_at(path, e.line, "%s", e.text);
    return j;
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

/* config.json through lib/model's parser (the one swift-train uses), plus what only the
 * converter needs: whether head_dim is explicit, bos/eos ids, the raw JSON. */
int swift_hparams_load(struct swift_hparams *hp, const char *model_dir)
{
    memset(hp, 0, sizeof(*hp));
    char *path = swift_path_join(model_dir, "config.json");
    int rc = -1;
    struct swift_model_config mc;
    hp->config = swift_json_load(path);
    if (!hp->config)
        goto out;
    const char *mt = json_string_value(json_object_get(hp->config, "model_type"));
    hp->vl = mt && (!strcmp(mt, "qwen2_vl") || !strcmp(mt, "qwen2_5_vl"));
    if (hp->vl ? swift_vlm_config_parse(&hp->vc, &mc, hp->config, path) < 0
               : swift_model_config_parse(&mc, hp->config, path) < 0)
        goto out;
    snprintf(hp->arch,
             sizeof(hp->arch),
             "%s",
             hp->vl                             ? "qwen2vl"
             : strcmp(mc.model_type, "mistral") ? mc.model_type
                                                : "llama");
    hp->vocab_size = mc.vocab_size;
    hp->hidden = mc.hidden_size;
    hp->ffn = mc.intermediate_size;
    hp->layers = mc.num_layers;
    hp->heads = mc.num_heads;
    hp->kv_heads = mc.num_kv_heads;
    hp->head_dim = mc.head_dim;
    json_t *text = json_object_get(hp->config, "text_config");
    if (!hp->vl || !json_is_object(text))
        text = hp->config; /* a VL config's text keys: text_config, or at the top (older) */
    json_t *hd = json_object_get(text, "head_dim");
    hp->has_head_dim = hd && !json_is_null(hd);
    hp->ctx = mc.max_position_embeddings;
    hp->rms_eps = mc.rms_norm_eps;
    hp->rope_theta = mc.rope_theta;
    if (mc.rope_type == SWIFT_ROPE_LINEAR)
        snprintf(hp->rope_type, sizeof(hp->rope_type), "linear");
    else if (mc.rope_type == SWIFT_ROPE_LLAMA3)
        snprintf(hp->rope_type, sizeof(hp->rope_type), "llama3");
    hp->rope_factor = mc.rope_factor;
    hp->rope_low_freq = mc.rope_low_freq_factor;
    hp->rope_high_freq = mc.rope_high_freq_factor;
    hp->rope_orig_ctx = mc.rope_original_max;
    hp->tie_embeddings = mc.tie_embeddings;
    hp->bos_id = first_id(json_object_get(hp->config, "bos_token_id"));
    hp->eos_id = first_id(json_object_get(hp->config, "eos_token_id"));
    if (hp->bos_id < 0)
        hp->bos_id = first_id(json_object_get(text, "bos_token_id"));
    if (hp->eos_id < 0)
        hp->eos_id = first_id(json_object_get(text, "eos_token_id"));
    rc = 0;
out:
    free(path);
    if (rc < 0)
        swift_hparams_release(hp);
    return rc;
}

void swift_vl_canonical_name(const char *name, char *out, size_t outlen)
{
    if (!strncmp(name, "model.language_model.", 21))
        snprintf(out, outlen, "model.%s", name + 21);
    else if (!strncmp(name, "model.visual.", 13))
        snprintf(out, outlen, "%s", name + 6);
    else
        snprintf(out, outlen, "%s", name);
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
