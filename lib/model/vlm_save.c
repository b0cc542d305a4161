/* vlm_save — a Qwen2-VL / Qwen2.5-VL model's trained tensors written and read back (vlm.h):
 * the PEFT adapter of its language model with the trained vision tensors beside it
 * (modules_to_save), and the whole model as a Hugging Face directory. */
#include "lib/model/vlm.h"
#include "lib/core/alloc.h"
#include "lib/model/adapter.h"
#include "lib/model/lora.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/formats/safetensors.h"
#include "lib/core/banned.h"

/* PEFT's modules_to_save for the trainable vision groups (module names, matched by PEFT as
 * suffixes of transformers' module paths; a ModuleList such as `blocks` cannot be one, so the
 * ViT alone is its patch embedding and each block). Malloc'ed, "" when none trains. */
static char *modules_to_save(const struct swift_vlm *v)
{
    int vit = !(v->frozen & SWIFT_VLM_VIT), al = !(v->frozen & SWIFT_VLM_ALIGNER);
    size_t cap = 32 + (size_t)v->vc.depth * 16, n = 0;
    char *s = swift_xcalloc(cap, 1);
    if (al) {
        snprintf(s, cap, "%s", vit ? "visual" : "merger");
        return s;
    }
    if (vit) {
        n += (size_t)snprintf(s + n, cap - n, "patch_embed");
        for (int l = 0; l < v->vc.depth; l++)
            n += (size_t)snprintf(s + n, cap - n, ",blocks.%d", l);
    }
    return s;
}

/* The on-disk shape of vision parameter p: the patch embedding is transformers' Conv3d weight
 * (embed, channels, temporal, patch, patch); the others as held. Returns ndim. */
static int disk_shape(const struct swift_vlm *v, const struct swift_param *p, int64_t *shape)
{
    if (p->w == v->patch) {
        const struct swift_vlm_config *c = &v->vc;
        int64_t s[5] = {
            c->embed_dim, c->in_channels, c->temporal_patch_size, c->patch_size, c->patch_size};
        memcpy(shape, s, sizeof(s));
        return 5;
    }
    shape[0] = p->shape[0];
    shape[1] = p->ndim > 1 ? p->shape[1] : 0;
    return p->ndim;
}

int swift_vlm_lora_save(const struct swift_vlm *v, const struct swift_lora_opts *lo,
                        const char *dir, const char *base_model)
{
    float *host = swift_xmalloc((v->nvparams ? v->nvparams : 1) * sizeof(float));
    v->ops->download(host, v->vparams, v->nvparams * sizeof(float));
    struct swift_st_entry *e = swift_xcalloc((size_t)v->nvp + 1, sizeof(*e));
    char **names = swift_xcalloc((size_t)v->nvp + 1, sizeof(char *));
    size_t n = 0;
    for (int i = 0; i < v->nvp; i++) {
        const struct swift_param *p = &v->vp[i];
        if (!p->g)
            continue; /* frozen: the base model's */
        /* PEFT's name under transformers 5 (module model.visual), as the adapters' */
        size_t len = strlen(p->name) + 24;
        names[n] = swift_xmalloc(len);
        snprintf(names[n], len, "base_model.model.model.%s", p->name);
        e[n].name = names[n];
        e[n].dtype = SWIFT_DTYPE_F32;
        e[n].ndim = disk_shape(v, p, e[n].shape);
        e[n].data = host + (p->w - v->vparams);
        n++;
    }
    char *ms = modules_to_save(v);
    int rc = swift_lora_save_with(&v->llm, lo, dir, base_model, e, n, *ms ? ms : NULL);
    free(ms);
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    free(e);
    free(host);
    return rc;
}

/* The adapter's full tensors into the vision parameters they name. */
static int load_full(struct swift_vlm *v, const struct swift_adapter *ad)
{
    size_t maxn = 1;
    for (int i = 0; i < v->nvp; i++)
        maxn = v->vp[i].numel > maxn ? v->vp[i].numel : maxn;
    float *host = swift_xmalloc(maxn * sizeof(float));
    int rc = 0;
    for (size_t i = 0; i < ad->nfull && rc == 0; i++) {
        const struct swift_st_tensor *t = ad->full[i];
        struct swift_param *p = swift_vlm_param(v, ad->full_names[i]);
        if (!p || p < v->vp || p >= v->vp + v->nvp)
            rc = swift_error_at(ad->st_path,
                                0,
                                "tensor '%s' is not a vision parameter of the model "
                                "(modules_to_save of the language model are not supported)",
                                t->name);
        else if ((size_t)t->numel != p->numel)
            rc = swift_error_at(ad->st_path,
                                0,
                                "tensor '%s' has %zu elements, expected %zu",
                                t->name,
                                (size_t)t->numel,
                                p->numel);
        else if (swift_st_tensor_to_f32(t, host) < 0)
            rc = -1;
        else
            v->ops->upload(p->w, host, p->numel * sizeof(float));
    }
    free(host);
    return rc;
}

int swift_vlm_lora_load(struct swift_vlm *v, const char *dir, struct swift_lora_opts *lo)
{
    struct swift_adapter ad;
    int rc = swift_adapter_open_full(&ad, dir);
    if (rc == 0)
        rc = swift_lora_load_adapter(&v->llm, &ad, lo);
    if (rc == 0)
        rc = load_full(v, &ad);
    swift_adapter_close(&ad);
    return rc < 0 ? -1 : 0;
}

/* The parameter of input tensor t as t's dtype at out (t->numel elements). */
static int to_disk(const struct swift_st_tensor *t, const float *w, void *out, const char *path)
{
    if (t->dtype == SWIFT_DTYPE_F32) {
        memcpy(out, w, (size_t)t->numel * sizeof(float));
        return 0;
    }
    if (t->dtype != SWIFT_DTYPE_BF16 && t->dtype != SWIFT_DTYPE_F16)
        return swift_error_at(path,
                              0,
                              "tensor '%s' is %s: only F32, BF16 and F16 are written back",
                              t->name,
                              swift_dtype_name(t->dtype));
    uint16_t *h = out;
    for (uint64_t i = 0; i < t->numel; i++)
        h[i] = t->dtype == SWIFT_DTYPE_BF16 ? swift_f32_to_bf16(w[i]) : swift_f32_to_f16(w[i]);
    return 0;
}

/* Every tensor of the input set, in file order, with its parameter's values. */
static int save_tensors(struct swift_vlm *v, const struct swift_st_set *set, const char *path)
{
    size_t n = 0, bytes = 0, maxn = 1;
    for (size_t f = 0; f < set->nfiles; f++)
        for (size_t i = 0; i < set->files[f].ntensors; i++, n++) {
            const struct swift_st_tensor *t = &set->files[f].tensors[i];
            bytes += (size_t)t->numel * (t->dtype == SWIFT_DTYPE_F32 ? 4 : 2);
            maxn = t->numel > maxn ? t->numel : maxn;
        }
    struct swift_st_entry *e = swift_xcalloc(n + 1, sizeof(*e));
    char *data = swift_xmalloc(bytes ? bytes : 1);
    float *host = swift_xmalloc(maxn * sizeof(float));
    int rc = 0;
    size_t k = 0, off = 0;
    for (size_t f = 0; f < set->nfiles && rc == 0; f++)
        for (size_t i = 0; i < set->files[f].ntensors && rc == 0; i++, k++) {
            const struct swift_st_tensor *t = &set->files[f].tensors[i];
            struct swift_param *p = swift_vlm_param(v, t->name);
            if (!p && !strcmp(t->name, "lm_head.weight") && v->llm.cfg.tie_embeddings)
                p = swift_vlm_param(v, "model.embed_tokens.weight"); /* tied, yet stored */
            if (!p || p->numel != (size_t)t->numel) {
                rc = swift_error_at(
                    set->dir, 0, "tensor '%s' is no parameter of the model", t->name);
                break;
            }
            v->ops->download(host, p->w, p->numel * sizeof(float));
            rc = to_disk(t, host, data + off, set->dir);
            e[k] = (struct swift_st_entry){.name = t->name, .dtype = t->dtype, .ndim = t->ndim};
            memcpy(e[k].shape, t->shape, sizeof(e[k].shape));
            e[k].data = data + off;
            off += (size_t)t->numel * (t->dtype == SWIFT_DTYPE_F32 ? 4 : 2);
        }
    if (rc == 0)
        rc = swift_safetensors_write(path, e, n, NULL);
    free(host);
    free(data);
    free(e);
    return rc;
}

int swift_vlm_save(struct swift_vlm *v, const char *dir, const char *src_dir)
{
    struct swift_st_set set;
    if (swift_st_set_open(&set, src_dir) < 0)
        return -1;
    char *path = swift_path_join(dir, "model.safetensors");
    int rc = save_tensors(v, &set, path);
    swift_st_set_close(&set);
    free(path);
    char *src = swift_path_join(src_dir, "config.json"), *dst = swift_path_join(dir, "config.json");
    if (rc == 0)
        rc = swift_copy_file(src, dst);
    free(src);
    free(dst);
    return rc;
}
