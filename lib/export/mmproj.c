/* export/mmproj — a Qwen2-VL / Qwen2.5-VL vision tower and merger as llama.cpp's mmproj GGUF
 * (architecture "clip"), what convert_hf_to_gguf.py --mmproj writes (Qwen2VLVisionModel):
 *
 * - keys: general.architecture "clip", general.type "mmproj", clip.has_vision_encoder,
 *   clip.projector_type "qwen2vl_merger" (Qwen2-VL) or "qwen2.5vl_merger" (Qwen2.5-VL, with
 *   clip.use_silu and clip.vision.n_wa_pattern = fullatt_block_indexes[0] + 1),
 *   clip.vision.{image_size 560, patch_size, embedding_length, feed_forward_length,
 *   projection_dim (the language model's width), block_count, attention.head_count,
 *   attention.layer_norm_epsilon, image_mean, image_std (preprocessor_config.json)};
 * - tensors (gguf-py's tensor_mapping names): the Conv3d patch embedding split over its two
 *   temporal taps into v.patch_embd.weight and v.patch_embd.weight.1 (E, C, P, P each, F16),
 *   every ViT block's fused qkv split into v.blk.N.attn_q/k/v, attn.proj → attn_out,
 *   norm1/norm2 → ln1/ln2, Qwen2-VL's mlp.fc1/fc2 → ffn_up/ffn_down, Qwen2.5-VL's
 *   gate/up/down_proj → ffn_gate/ffn_up/ffn_down, merger.ln_q → v.post_ln, merger.mlp.0/2 →
 *   mm.0/mm.2. Matrices F16 (F32 with --dtype f32), vectors F32. */
#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/export/export.h"
#include "lib/export/internal.h"
#include "lib/formats/quant.h"
#include "lib/formats/safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/core/banned.h"

/* One GGUF tensor: a slice of a safetensors tensor. */
struct mt {
    char name[96];
    const struct swift_st_tensor *src;
    uint32_t n_dims, type;
    uint64_t ne[4];
    int64_t row0; /* first row of src (qkv split) */
    int kt;       /* the patch embedding's temporal tap, or -1 */
};

/* "blocks.N.<rest>" or "merger.<rest>" (after "visual.") → the GGUF name into m->name;
 * qkv: *split set (three tensors). 0, or -1 for an unknown name. */
static int map_name(const char *v, char *out, size_t n, int *split)
{
    static const struct {
        const char *hf, *gguf;
    } blk[] = {{"norm1.", "ln1."},
               {"norm2.", "ln2."},
               {"attn.proj.", "attn_out."},
               {"mlp.fc1.", "ffn_up."},
               {"mlp.fc2.", "ffn_down."},
               {"mlp.gate_proj.", "ffn_gate."},
               {"mlp.up_proj.", "ffn_up."},
               {"mlp.down_proj.", "ffn_down."},
               {"attn.qkv.", "attn_qkv."}},
      top[] = {
          {"merger.ln_q.", "v.post_ln."}, {"merger.mlp.0.", "mm.0."}, {"merger.mlp.2.", "mm.2."}};
    *split = 0;
    for (size_t i = 0; i < sizeof(top) / sizeof(top[0]); i++)
        if (!strncmp(v, top[i].hf, strlen(top[i].hf))) {
            snprintf(out, n, "%s%s", top[i].gguf, v + strlen(top[i].hf));
            return 0;
        }
    char *end;
    if (strncmp(v, "blocks.", 7))
        return -1;
    long b = strtol(v + 7, &end, 10);
    if (end == v + 7 || *end != '.' || b < 0)
        return -1;
    for (size_t i = 0; i < sizeof(blk) / sizeof(blk[0]); i++)
        if (!strncmp(end + 1, blk[i].hf, strlen(blk[i].hf))) {
            snprintf(out, n, "v.blk.%ld.%s%s", b, blk[i].gguf, end + 1 + strlen(blk[i].hf));
            *split = i == sizeof(blk) / sizeof(blk[0]) - 1;
            return 0;
        }
    return -1;
}

/* The GGUF tensors of the set's visual.* tensors, into *out (caller frees); their count. */
static long plan(const struct swift_st_set *set, const struct swift_hparams *hp, int f32,
                 struct mt **out)
{
    size_t total = 0, n = 0;
    for (size_t f = 0; f < set->nfiles; f++)
        total += set->files[f].ntensors;
    struct mt *m = *out = swift_xcalloc(3 * total + 2, sizeof(*m));
    const struct swift_vlm_config *vc = &hp->vc;
    for (size_t f = 0; f < set->nfiles; f++)
        for (size_t i = 0; i < set->files[f].ntensors; i++) {
            const struct swift_st_tensor *t = &set->files[f].tensors[i];
            char hf[512], g[96];
            int split;
            swift_vl_canonical_name(t->name, hf, sizeof(hf));
            if (strncmp(hf, "visual.", 7))
                continue;
            if (!strcmp(hf, "visual.patch_embed.proj.weight")) {
                if (vc->temporal_patch_size != 2 ||
                    t->numel != (uint64_t)vc->embed_dim * vc->patch_dim)
                    return swift_error("%s: '%s': llama.cpp's mmproj takes a patch embedding of "
                                       "two temporal taps (temporal_patch_size 2)",
                                       t->path,
                                       t->name);
                for (int k = 0; k < 2; k++) {
                    struct mt *e = &m[n++];
                    snprintf(e->name, sizeof(e->name), "v.patch_embd.weight%s", k ? ".1" : "");
                    e->src = t;
                    e->kt = k;
                    e->n_dims = 4;
                    e->ne[0] = e->ne[1] = (uint64_t)vc->patch_size;
                    e->ne[2] = (uint64_t)vc->in_channels;
                    e->ne[3] = (uint64_t)vc->embed_dim;
                    e->type = SWIFT_GGML_F16; /* as the converter's tensor_force_quant */
                }
                continue;
            }
            if (map_name(hf + 7, g, sizeof(g), &split) < 0)
                return swift_error("%s: tensor '%s' has no mmproj name", t->path, t->name);
            if (t->ndim < 1 || t->ndim > 2 || (split && t->shape[0] % 3))
                return swift_error("%s: tensor '%s' has an unexpected shape", t->path, t->name);
            int64_t rows = split ? t->shape[0] / 3 : t->shape[0];
            for (int k = 0; k < (split ? 3 : 1); k++) {
                struct mt *e = &m[n++];
                if (split) { /* v.blk.N.attn_qkv.X → attn_q / attn_k / attn_v */
                    const char *sfx = strstr(g, "attn_qkv.") + 9;
                    snprintf(e->name,
                             sizeof(e->name),
                             "%.*sattn_%c.%s",
                             (int)(strstr(g, "attn_qkv.") - g),
                             g,
                             "qkv"[k],
                             sfx);
                } else {
                    snprintf(e->name, sizeof(e->name), "%s", g);
                }
                e->src = t;
                e->kt = -1;
                e->row0 = k * rows;
                e->n_dims = (uint32_t)t->ndim;
                e->ne[0] = (uint64_t)(t->ndim == 2 ? t->shape[1] : rows);
                e->ne[1] = t->ndim == 2 ? (uint64_t)rows : 1;
                e->ne[2] = e->ne[3] = 1;
                e->type = t->ndim == 2 && !f32 ? SWIFT_GGML_F16 : SWIFT_GGML_F32;
            }
        }
    return (long)n;
}

/* image_mean / image_std of preprocessor_config.json (the Qwen2-VL processor's when absent) */
static int image_stats(const char *dir, float mean[3], float std[3])
{
    static const float m0[3] = {0.48145466f, 0.4578275f, 0.40821073f};
    static const float s0[3] = {0.26862954f, 0.26130258f, 0.27577711f};
    memcpy(mean, m0, sizeof(m0));
    memcpy(std, s0, sizeof(s0));
    char *p = swift_path_join(dir, "preprocessor_config.json");
    struct stat st;
    if (stat(p, &st) < 0) {
        free(p);
        return 0;
    }
    json_t *j = swift_json_load(p);
    int rc = j ? 0 : -1;
    for (int w = 0; rc == 0 && w < 2; w++) {
        json_t *a = json_object_get(j, w ? "image_std" : "image_mean");
        if (!a)
            continue;
        if (!json_is_array(a) || json_array_size(a) != 3)
            rc = swift_error_at(
                p, 0, "'%s' must be a list of 3 numbers", w ? "image_std" : "image_mean");
        for (size_t i = 0; rc == 0 && i < 3; i++)
            (w ? std : mean)[i] = (float)json_number_value(json_array_get(a, i));
    }
    json_decref(j);
    free(p);
    return rc;
}

static int set_keys(struct swift_gguf_writer *w, const struct swift_hparams *hp, const char *dir,
                    const char *name, int f32)
{
    const struct swift_vlm_config *vc = &hp->vc;
    json_t *vis = json_object_get(hp->config, "vision_config");
    /* feed_forward_length as the converter writes it: Qwen2-VL's vision_config.hidden_size (its
     * Qwen2VLVisionModel renames it intermediate_size), Qwen2.5-VL's intermediate_size */
    json_t *ff = json_object_get(vis, vc->v25 ? "intermediate_size" : "hidden_size");
    float mean[3], std[3];
    if (image_stats(dir, mean, std) < 0)
        return -1;
    if (swift_gguf_set_str(w, "general.architecture", "clip") < 0 ||
        swift_gguf_set_str(w, "general.type", "mmproj") < 0 ||
        swift_gguf_set_str(w, "general.name", name) < 0 ||
        swift_gguf_set_u32(w, "general.file_type", f32 ? 0 : 1) < 0 ||
        swift_gguf_set_bool(w, "clip.has_vision_encoder", 1) < 0 ||
        swift_gguf_set_u32(w, "clip.vision.projection_dim", (uint32_t)hp->hidden) < 0 ||
        swift_gguf_set_u32(w, "clip.vision.image_size", 560) < 0 ||
        swift_gguf_set_u32(w, "clip.vision.patch_size", (uint32_t)vc->patch_size) < 0 ||
        swift_gguf_set_u32(w, "clip.vision.embedding_length", (uint32_t)vc->embed_dim) < 0 ||
        swift_gguf_set_u32(w,
                           "clip.vision.feed_forward_length",
                           (uint32_t)(json_is_integer(ff) ? json_integer_value(ff) : vc->mlp_dim)) <
            0 ||
        swift_gguf_set_u32(w, "clip.vision.block_count", (uint32_t)vc->depth) < 0 ||
        swift_gguf_set_u32(w, "clip.vision.attention.head_count", (uint32_t)vc->num_heads) < 0 ||
        swift_gguf_set_arr_f32(w, "clip.vision.image_mean", mean, 3) < 0 ||
        swift_gguf_set_arr_f32(w, "clip.vision.image_std", std, 3) < 0 ||
        swift_gguf_set_str(
            w, "clip.projector_type", vc->v25 ? "qwen2.5vl_merger" : "qwen2vl_merger") < 0)
        return -1;
    if (vc->v25) {
        int pat = vc->nfullatt ? vc->fullatt[0] + 1 : 0;
        for (int i = 1; i < vc->nfullatt; i++)
            if (vc->fullatt[i] - vc->fullatt[i - 1] != pat)
                return swift_error("%s/config.json: fullatt_block_indexes are not evenly spaced "
                                   "(llama.cpp's n_wa_pattern cannot say them)",
                                   dir);
        if (!pat)
            return swift_error("%s/config.json: Qwen2.5-VL without fullatt_block_indexes", dir);
        if (swift_gguf_set_bool(w, "clip.use_silu", 1) < 0 ||
            swift_gguf_set_u32(w, "clip.vision.n_wa_pattern", (uint32_t)pat) < 0)
            return -1;
        if (vc->window_size != 112) /* clip.cpp's window is fixed (every released Qwen2.5-VL's) */
            swift_warn("%s/config.json: window_size %d: llama.cpp's qwen2.5vl_merger attends in "
                       "112-pixel windows, so its vision outputs will differ from this model's",
                       dir,
                       vc->window_size);
    }
    /* the converter's global_config.get("rms_norm_eps", 1e-6): config.json's top level */
    json_t *eps = json_object_get(hp->config, "rms_norm_eps");
    return swift_gguf_set_f32(w,
                              "clip.vision.attention.layer_norm_epsilon",
                              json_is_number(eps) ? (float)json_number_value(eps) : 1e-6f);
}

/* e's floats (its slice of src) into x */
static int slice(const struct mt *e, const float *all, float *x)
{
    uint64_t cnt = e->ne[0] * e->ne[1] * e->ne[2] * e->ne[3];
    if (e->kt < 0) {
        uint64_t row = e->n_dims == 2 ? e->ne[0] : 1; /* floats per row of src */
        memcpy(x, all + (uint64_t)e->row0 * row, cnt * sizeof(float));
        return 0;
    }
    /* (E, C, 2, P, P) → tap kt: (E, C, P, P) */
    uint64_t pp = e->ne[0] * e->ne[1], ec = e->ne[2] * e->ne[3];
    for (uint64_t i = 0; i < ec; i++)
        memcpy(x + i * pp, all + (i * 2 + (uint64_t)e->kt) * pp, pp * sizeof(float));
    return 0;
}

static int write_all(struct swift_gguf_writer *w, const char *path, const struct mt *m, long n)
{
    if (swift_gguf_writer_begin(w, path) < 0)
        return -1;
    int rc = 0;
    float *all = NULL, *x = NULL;
    void *q = NULL;
    for (long i = 0; i < n && rc == 0; i++) {
        const struct mt *e = &m[i];
        uint64_t cnt = e->ne[0] * e->ne[1] * e->ne[2] * e->ne[3];
        all = swift_xrealloc(all, e->src->numel * sizeof(float) + 4);
        x = swift_xrealloc(x, cnt * sizeof(float) + 4);
        rc = swift_st_tensor_to_f32(e->src, all);
        if (rc == 0)
            rc = slice(e, all, x);
        size_t nbytes = swift_ggml_row_size(e->type, (int64_t)e->ne[0]) * (cnt / e->ne[0]);
        if (rc == 0 && e->type != SWIFT_GGML_F32) {
            q = swift_xrealloc(q, nbytes + 4);
            rc = swift_quantize(e->type, x, q, (int64_t)(cnt / e->ne[0]), (int64_t)e->ne[0]);
        }
        if (rc == 0)
            rc = swift_gguf_writer_write_data(w, e->type == SWIFT_GGML_F32 ? (void *)x : q, nbytes);
    }
    free(all);
    free(x);
    free(q);
    if (rc < 0) {
        swift_gguf_writer_abort(w);
        return -1;
    }
    return swift_gguf_writer_commit(w);
}

int swift_export_mmproj(const struct swift_export_opts *o, const char *model_dir)
{
    struct swift_hparams hp;
    if (swift_hparams_load(&hp, model_dir) < 0)
        return -1;
    struct swift_st_set set = {0};
    struct swift_gguf_writer w;
    swift_gguf_writer_init(&w);
    struct mt *m = NULL;
    int f32 = o->dtype && !strcmp(o->dtype, "f32"), rc = -1;
    long n = 0;
    if (!hp.vl) {
        swift_error("--mmproj: '%s' is not a vision-language model (qwen2_vl, qwen2_5_vl)",
                    o->model_dir);
        goto out;
    }
    if (swift_st_set_open(&set, model_dir) < 0 ||
        set_keys(&w, &hp, model_dir, o->name ? o->name : "mmproj", f32) < 0 ||
        (n = plan(&set, &hp, f32, &m)) < 0)
        goto out;
    for (long i = 0; i < n; i++)
        if (swift_gguf_add_tensor(&w, m[i].name, m[i].n_dims, m[i].ne, m[i].type) < 0)
            goto out;
    if (write_all(&w, o->mmproj, m, n) < 0)
        goto out;
    json_t *r = json_pack("{s:i,s:s,s:s,s:s,s:s,s:I}",
                          "version",
                          1,
                          "format",
                          "mmproj",
                          "output",
                          o->mmproj,
                          "arch",
                          "clip",
                          "projector_type",
                          hp.vc.v25 ? "qwen2.5vl_merger" : "qwen2vl_merger",
                          "tensors",
                          (json_int_t)n);
    swift_export_summary(r);
    rc = 0;
out:
    swift_gguf_writer_release(&w);
    swift_st_set_close(&set);
    swift_hparams_release(&hp);
    free(m);
    return rc;
}
