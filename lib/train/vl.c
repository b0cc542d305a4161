/* vl — swift-train on a Qwen2-VL / Qwen2.5-VL model (lib/model/vlm.h) and image shards
 * (docs/multimodal.md "Training"): the model loaded with its frozen groups, LoRA on the
 * language model (or all of it), the vision groups' parameters and learning rates, what a
 * checkpoint holds, the loader's pixels (the image cache expanded on the prefetch threads), and
 * the step's forward and backward with "vision" and "llm" spans. */
#include "lib/train/internal.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/core/trace.h"
#include "lib/formats/pixels.h"
#include "lib/model/vlm.h"
#include "lib/core/banned.h"

int train_vl_detect(const char *model_dir)
{
    char *path = swift_path_join(model_dir, "config.json");
    json_t *root = json_load_file(path, 0, NULL);
    free(path);
    const char *mt = root ? json_string_value(json_object_get(root, "model_type")) : NULL;
    int vl = mt && (!strcmp(mt, "qwen2_vl") || !strcmp(mt, "qwen2_5_vl"));
    json_decref(root);
    return vl;
}

int train_vl_load(struct run *r, const char *wdir)
{
    const struct swift_train_opts *o = r->o;
    if (o->rlhf)
        return swift_error("%s: --rlhf %s on a vision-language model is not supported yet (SFT "
                           "only)",
                           o->model,
                           o->rlhf);
    if (o->quant_bits || o->galore_rank > 0 || o->use_galore || o->lora_dora)
        return swift_error("%s: --quant-bits, GaLore and DoRA on a vision-language model are "
                           "not supported yet",
                           o->model);
    r->vlm = swift_xcalloc(1, sizeof(*r->vlm));
    /* LoRA: the language model's base is frozen, its adapters train; the vision groups train
     * in full unless frozen (ms-swift's freeze_vit, freeze_aligner) */
    int frozen = (o->freeze_vit ? SWIFT_VLM_VIT : 0) | (o->freeze_aligner ? SWIFT_VLM_ALIGNER : 0) |
                 (o->tuner == SWIFT_TUNER_LORA || o->freeze_llm ? SWIFT_VLM_LLM : 0);
    if (swift_vlm_load(r->vlm, wdir, r->be.ops, frozen) < 0)
        return -1;
    r->m = &r->vlm->llm;
    r->m->act_ckpt = o->gradient_checkpointing;
    return 0;
}

int train_vl_params(struct run *r)
{
    const struct swift_vlm *v = r->vlm;
    int lora = r->o->tuner == SWIFT_TUNER_LORA;
    const struct swift_param *lp = lora ? r->m->lp : r->m->p;
    int nl = lora ? r->m->nlp : r->o->freeze_llm ? 0 : r->m->np, n = 0;
    r->vl_tp = swift_xcalloc((size_t)(nl + v->nvp + 1), sizeof(*r->vl_tp));
    for (int i = 0; i < nl; i++)
        r->vl_tp[n++] = lp[i];
    for (int i = 0; i < v->nvp; i++)
        if (v->vp[i].g) /* a trainable group's */
            r->vl_tp[n++] = v->vp[i];
    r->tp = r->vl_tp;
    r->ntp = n;
    return 0;
}

/* AdamW's learning-rate groups: 0 the language model, 1 the ViT, 2 the aligner */
static int lr_group(const struct swift_vlm *v, const struct swift_param *p)
{
    int g = swift_vlm_param_group(v, p);
    return g == SWIFT_VLM_VIT ? 1 : g == SWIFT_VLM_ALIGNER ? 2 : 0;
}

void train_vl_groups(struct run *r)
{
    int *g = swift_xcalloc((size_t)(r->opt.nparams + 1), sizeof(int));
    for (int i = 0; i < r->opt.nparams; i++)
        g[i] = lr_group(r->vlm, &r->opt.params[i]);
    swift_adamw_set_groups(&r->opt, g);
    free(g);
}

void train_vl_lr(struct run *r, long step)
{
    const struct swift_train_opts *o = r->o;
    double base[2] = {o->vit_lr >= 0 ? o->vit_lr : r->lr,
                      o->aligner_lr >= 0 ? o->aligner_lr : r->lr};
    for (int k = 0; k < 2; k++) /* the schedule scales every group alike (LambdaLR) */
        r->opt.group_lr[1 + k] = (float)swift_lr_at(
            (enum swift_sched)o->lr_scheduler, base[k], step, r->warmup, r->max_steps);
}

int train_vl_save(struct run *r, const char *dir)
{
    if (r->o->tuner == SWIFT_TUNER_LORA)
        return swift_vlm_lora_save(r->vlm, &r->lo, dir, r->o->model);
    return swift_vlm_save(r->vlm, dir, r->o->model);
}

void train_vl_free(struct run *r)
{
    if (!r->vlm)
        return;
    swift_vlm_free(r->vlm);
    free(r->vlm);
    free(r->vl_tp);
    r->vl_tp = NULL;
    r->vlm = NULL;
    r->m = &r->own;
}

/* One image of the cache, appended to u's pixels and grids. */
static int add_image(struct train_ubatch *u, const char *dir, const char *hex)
{
    struct swift_pixels px;
    unsigned char *buf = NULL;
    if (swift_pixels_load(&px, &buf, dir, hex) < 0)
        return -1;
    size_t np = (size_t)swift_pixels_patches(&px), pd = (size_t)swift_pixels_patch_dim(&px);
    size_t need = ((size_t)u->npatches + np) * pd;
    if (need > u->pix_cap) {
        u->pix_cap = need * 2;
        u->pix = swift_xrealloc(u->pix, u->pix_cap * sizeof(float));
    }
    if (u->nimages + 1 > u->grid_cap) {
        u->grid_cap = 2 * (u->nimages + 1);
        u->grid = swift_xrealloc(u->grid, (size_t)u->grid_cap * 3 * sizeof(int32_t));
    }
    swift_pixels_expand(&px, u->pix + (size_t)u->npatches * pd);
    u->grid[u->nimages * 3] = (int32_t)px.grid_t;
    u->grid[u->nimages * 3 + 1] = (int32_t)px.grid_h;
    u->grid[u->nimages * 3 + 2] = (int32_t)px.grid_w;
    u->nimages++;
    u->npatches += (int)np;
    free(buf);
    return 0;
}

int train_vl_pixels(struct train_ubatch *u, const char *dir, int nsamples, long delay_ms)
{
    int64_t t0 = swift_trace_now();
    u->npatches = u->nimages = 0;
    u->pix_err = 0;
    for (int i = 0; i < nsamples && !u->pix_err; i++) {
        const struct swift_sample *x = &u->xs[i];
        if (!x->meta || !x->meta_len)
            continue;
        json_t *root = json_loadb(x->meta, x->meta_len, 0, NULL);
        json_t *imgs = json_object_get(root, "images");
        size_t k;
        json_t *h;
        json_array_foreach(imgs, k, h)
        {
            const char *hex = json_string_value(h);
            if (!hex || add_image(u, dir, hex) < 0) {
                if (!hex)
                    swift_error("%s: a sample's metadata names no image cache file", dir);
                u->pix_err = 1;
                break;
            }
        }
        json_decref(root);
    }
    if (delay_ms > 0) {
        struct timespec ts = {delay_ms / 1000, (delay_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    swift_trace_span("data",
                     "image_load",
                     t0,
                     swift_trace_now(),
                     (struct swift_targ[]){SWIFT_TARG_I("images", u->nimages),
                                           SWIFT_TARG_I("patches", u->npatches)},
                     2);
    return u->pix_err ? -1 : 0;
}

int train_vl_forward(struct run *r, const struct train_ubatch *u, int B, float scale,
                     struct swift_objective_sums *s, int backward)
{
    if (u->pix_err)
        return -1;
    struct swift_vlm_batch b = {.B = B,
                                .T = r->T,
                                .tokens = u->tok,
                                .targets = u->tgt,
                                .pixels = u->pix,
                                .npatches = u->npatches,
                                .grid_thw = u->grid,
                                .nimages = u->nimages,
                                .pos = u->pos}; /* packed rows: per-document positions */
    if (swift_vlm_forward(r->vlm, &b, &s->loss, scale) < 0)
        return -1;
    if (backward)
        swift_vlm_backward(r->vlm, &b);
    return 0;
}
