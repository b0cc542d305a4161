/* checkpoint — checkpoint-N/ of a run directory (docs/formats.md "Run directory"): the weights
 * (full) or the adapter (LoRA), optimizer.safetensors with the AdamW moments (8-bit AdamW: codes
 * and absmax; GaLore: its projected moments and projections; and fp32 master weights of a
 * non-fp32 full fine-tune), trainer_state.json with the data position; written to a temp
 * directory and renamed, pruned to --save-total-limit; read back by --resume. */
#include "lib/train/internal.h"

#include <dirent.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/core/alloc.h"
#include "lib/core/cli.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/core/trace.h"
#include "lib/formats/safetensors.h"
#include "lib/core/banned.h"

/* GaLore's tensors of item it (galore.h): its projected moments and projection; shapes as
 * torch's state (exp_avg: rows x k or k x cols; ortho_matrix: k x cols or rows x k). */
static const char *const galore_pre[3] = {"galore_exp_avg.", "galore_exp_avg_sq.", "galore_proj."};
static void galore_shape(const struct swift_galore_item *it, int j, int64_t *shape)
{
    int proj = j == 2, wide = it->left;
    shape[0] = (proj ? wide : !wide) ? it->rows : it->k;
    shape[1] = (proj ? wide : !wide) ? it->k : it->cols;
}
static float *galore_data(struct swift_galore_item *it, int j)
{
    return j == 0 ? it->m : j == 1 ? it->v : it->P;
}

/* The 8-bit state of --optim adamw_8bit in host memory: codes and absmax of the parameters
 * held in 8 bits, back to back (optim.h); the float32 moments of the others travel as hm, hv.
 * (--optim adamw_8bit and GaLore are not combined: cmd/swift-train.c refuses it.) */
struct host8 {
    uint8_t *q1, *q2;
    float *a1, *a2;
};

static void host8_alloc(struct host8 *h, const struct swift_adamw *o)
{
    h->q1 = swift_xmalloc(o->total8 ? o->total8 : 1);
    h->q2 = swift_xmalloc(o->total8 ? o->total8 : 1);
    h->a1 = swift_xmalloc((o->blocks8 ? o->blocks8 : 1) * sizeof(float));
    h->a2 = swift_xmalloc((o->blocks8 ? o->blocks8 : 1) * sizeof(float));
}

static void host8_free(struct host8 *h)
{
    free(h->q1);
    free(h->q2);
    free(h->a1);
    free(h->a2);
}

/* One optimizer.safetensors entry: PREFIX.NAME, owned name in *owned */
static void entry(struct swift_st_entry *e, char **owned, const char *pre, const char *name,
                  enum swift_dtype dt, int ndim, const int64_t *shape, const void *data)
{
    size_t nl = strlen(pre) + strlen(name) + 1;
    *owned = swift_xmalloc(nl);
    snprintf(*owned, nl, "%s%s", pre, name);
    e->name = *owned;
    e->dtype = dt;
    e->ndim = ndim;
    e->shape[0] = shape[0];
    e->shape[1] = ndim > 1 ? shape[1] : 0;
    e->data = data;
}

/* The entries of parameter p at e (returns how many): GaLore's projected moments when gi >= 0
 * (its projection comes after master.P), else the 8-bit codes and absmax when h holds p, else
 * the float32 moments at hm + *off, hv + *off. */
static size_t moment_entries(struct run *r, const struct swift_param *p, int gi,
                             struct swift_st_entry *e, char **names, const float *hm,
                             const float *hv, size_t *off, const struct host8 *h, size_t *off8,
                             size_t *blk)
{
    if (gi >= 0) {
        for (int j = 0; j < 2; j++) {
            int64_t gs[2];
            galore_shape(&r->gal.it[gi], j, gs);
            entry(&e[j],
                  &names[j],
                  galore_pre[j],
                  p->name,
                  SWIFT_DTYPE_F32,
                  p->ndim,
                  gs,
                  galore_data(&r->gal.it[gi], j));
        }
        return 2;
    }
    if (h && swift_adamw_is_8bit(&r->opt, p->numel)) {
        int64_t nb = (int64_t)((p->numel + SWIFT_ADAM8_BLOCK - 1) / SWIFT_ADAM8_BLOCK);
        entry(
            &e[0], &names[0], "state1.", p->name, SWIFT_DTYPE_U8, p->ndim, p->shape, h->q1 + *off8);
        entry(
            &e[1], &names[1], "state2.", p->name, SWIFT_DTYPE_U8, p->ndim, p->shape, h->q2 + *off8);
        entry(&e[2], &names[2], "absmax1.", p->name, SWIFT_DTYPE_F32, 1, &nb, h->a1 + *blk);
        entry(&e[3], &names[3], "absmax2.", p->name, SWIFT_DTYPE_F32, 1, &nb, h->a2 + *blk);
        *off8 += p->numel;
        *blk += (size_t)nb;
        return 4;
    }
    entry(&e[0], &names[0], "exp_avg.", p->name, SWIFT_DTYPE_F32, p->ndim, p->shape, hm + *off);
    entry(&e[1], &names[1], "exp_avg_sq.", p->name, SWIFT_DTYPE_F32, p->ndim, p->shape, hv + *off);
    *off += p->numel;
    return 2;
}

/* hm, hv: the float32 AdamW moments of every trainable parameter AdamW steps in 32 bits (not
 * GaLore's, not 8-bit ones), host memory, back to back; h: the 8-bit ones (NULL unless --optim
 * adamw_8bit). Names: exp_avg.P and exp_avg_sq.P (float32), or state1.P, state2.P (uint8
 * codes, P's shape) with absmax1.P and absmax2.P (float32, one per block of 256) as
 * bitsandbytes' state_dict calls them, or galore_exp_avg.P, galore_exp_avg_sq.P and
 * galore_proj.P; master.P. */
static int save_optimizer(struct run *r, const char *dir, const float *hm, const float *hv,
                          const struct host8 *h)
{
    int full_master = r->o->tuner == SWIFT_TUNER_FULL && strcmp(r->m->cfg.dtype, "float32");
    size_t cap = (size_t)r->ntp * 5;
    struct swift_st_entry *e = swift_xcalloc(cap, sizeof(*e));
    char **names = swift_xcalloc(cap, sizeof(char *));
    size_t total = 0;
    for (int i = 0; i < r->ntp; i++)
        total += r->tp[i].numel;
    /* the fp32 master weights: a host copy (backend memory may be a device's) */
    float *hw = full_master ? swift_xmalloc((total ? total : 1) * sizeof(float)) : NULL;
    if (hw) {
        size_t o = 0;
        for (int i = 0; i < r->ntp; i++) {
            r->m->ops->download(hw + o, r->tp[i].w, r->tp[i].numel * sizeof(float));
            o += r->tp[i].numel;
        }
    }
    size_t off = 0, woff = 0, off8 = 0, blk = 0, k = 0;
    for (int i = 0; i < r->ntp; i++) {
        struct swift_param *p = &r->tp[i];
        int gi = swift_galore_index(&r->gal, p);
        k += moment_entries(r, p, gi, e + k, names + k, hm, hv, &off, h, &off8, &blk);
        if (hw) {
            entry(&e[k],
                  &names[k],
                  "master.",
                  p->name,
                  SWIFT_DTYPE_F32,
                  p->ndim,
                  p->shape,
                  hw + woff);
            k++;
        }
        if (gi >= 0) { /* the projection */
            int64_t gs[2];
            galore_shape(&r->gal.it[gi], 2, gs);
            entry(
                &e[k], &names[k], galore_pre[2], p->name, SWIFT_DTYPE_F32, 2, gs, r->gal.it[gi].P);
            k++;
        }
        woff += p->numel;
    }
    char stepbuf[32], rankbuf[32], gapbuf[32], scalebuf[32];
    snprintf(stepbuf, sizeof(stepbuf), "%ld", r->opt.step);
    snprintf(rankbuf, sizeof(rankbuf), "%d", r->o->galore_rank);
    snprintf(gapbuf, sizeof(gapbuf), "%ld", r->o->galore_gap);
    snprintf(scalebuf, sizeof(scalebuf), "%.17g", r->o->galore_scale);
    int gal = r->gal.n > 0;
    const char *meta[] = {"optimizer",
                          gal ? "galore_adamw"
                          : h ? "adamw_8bit"
                              : "adamw",
                          "step",
                          stepbuf,
                          gal ? "galore_rank"
                          : h ? "blocksize"
                              : NULL,
                          gal ? rankbuf : "256",
                          gal ? "galore_update_proj_gap" : "min_8bit_size",
                          gal ? gapbuf : "4096",
                          gal ? "galore_scale" : NULL,
                          scalebuf,
                          NULL};
    char *path = swift_path_join(dir, "optimizer.safetensors");
    int rc = swift_safetensors_write(path, e, k, meta);
    for (size_t i = 0; i < k; i++)
        free(names[i]);
    free(names);
    free(e);
    free(hw);
    free(path);
    return rc;
}

/* One tensor of the file into dst, its shape checked. */
static int read_tensor(const struct swift_safetensors *st, const char *path, const char *pre,
                       const char *name, int ndim, const int64_t *shape, float *dst, int optional)
{
    char nm[300];
    snprintf(nm, sizeof(nm), "%s%s", pre, name);
    const struct swift_st_tensor *t = swift_safetensors_find(st, nm);
    if (!t)
        return optional ? 1 : swift_error_at(path, 0, "missing tensor '%s'", nm);
    if (swift_st_tensor_check_shape(t, ndim, shape) < 0 || swift_st_tensor_to_f32(t, dst) < 0)
        return -1;
    return 0;
}

/* Tensor PREFIX.NAME of the file, or NULL after an error naming it */
static const struct swift_st_tensor *need(const struct swift_safetensors *st, const char *path,
                                          const char *pre, const char *name)
{
    char nm[300];
    snprintf(nm, sizeof(nm), "%s%s", pre, name);
    const struct swift_st_tensor *t = swift_safetensors_find(st, nm);
    if (!t)
        swift_error_at(path, 0, "missing tensor '%s'", nm);
    return t;
}

/* state1/state2 and absmax1/absmax2 of an 8-bit parameter into h at off8, blk */
static int read_8bit(const struct swift_safetensors *st, const char *path,
                     const struct swift_param *p, struct host8 *h, size_t off8, size_t blk)
{
    int64_t nb = (int64_t)((p->numel + SWIFT_ADAM8_BLOCK - 1) / SWIFT_ADAM8_BLOCK);
    for (int j = 0; j < 2; j++) {
        const struct swift_st_tensor *q = need(st, path, j ? "state2." : "state1.", p->name);
        const struct swift_st_tensor *a = need(st, path, j ? "absmax2." : "absmax1.", p->name);
        if (!q || !a || swift_st_tensor_check_shape(q, p->ndim, p->shape) < 0 ||
            swift_st_tensor_check_shape(a, 1, &nb) < 0 ||
            swift_st_tensor_to_f32(a, (j ? h->a2 : h->a1) + blk) < 0)
            return -1;
        if (q->dtype != SWIFT_DTYPE_U8)
            return swift_error_at(
                path, 0, "'%s' is %s, not U8", q->name, swift_dtype_name(q->dtype));
        memcpy((j ? h->q2 : h->q1) + off8, q->data, p->numel);
    }
    return 0;
}

/* The moments of parameter p (GaLore's into its item gi when gi >= 0; 8-bit ones into h; the
 * others into hm + *off, hv + *off) */
static int read_moments(struct run *r, const struct swift_safetensors *st, const char *path,
                        const struct swift_param *p, int gi, float *hm, float *hv, size_t *off,
                        struct host8 *h, size_t *off8, size_t *blk)
{
    int rc = 0;
    if (gi >= 0) {
        for (int j = 0; j < 2 && rc == 0; j++) {
            int64_t gs[2];
            galore_shape(&r->gal.it[gi], j, gs);
            rc = read_tensor(
                st, path, galore_pre[j], p->name, 2, gs, galore_data(&r->gal.it[gi], j), 0);
        }
    } else if (h && swift_adamw_is_8bit(&r->opt, p->numel)) {
        rc = read_8bit(st, path, p, h, *off8, *blk);
        *off8 += p->numel;
        *blk += (p->numel + SWIFT_ADAM8_BLOCK - 1) / SWIFT_ADAM8_BLOCK;
    } else {
        for (int j = 0; j < 2 && rc == 0; j++)
            rc = read_tensor(st,
                             path,
                             j ? "exp_avg_sq." : "exp_avg.",
                             p->name,
                             p->ndim,
                             p->shape,
                             (j ? hv : hm) + *off,
                             0);
        *off += p->numel;
    }
    return rc;
}

/* Read the moments of every trainable parameter AdamW steps into host hm, hv (those held in
 * 32 bits, back to back) and h (8-bit ones; NULL unless --optim adamw_8bit), GaLore's state
 * into its items; master weights, when the file has them, are uploaded into the parameters.
 * The file's optimizer must be the run's (8-bit or not). */
static int read_optimizer(struct run *r, const char *dir, float *hm, float *hv, struct host8 *h)
{
    char *path = swift_path_join(dir, "optimizer.safetensors");
    struct swift_safetensors st;
    if (!path || swift_safetensors_open(&st, path) < 0) {
        free(path);
        return -1;
    }
    const char *kind = swift_safetensors_meta(&st, "optimizer");
    int file8 = kind && !strcmp(kind, "adamw_8bit");
    if (file8 != (h != NULL)) {
        int rc = swift_error_at(path,
                                0,
                                "the checkpoint's optimizer state is %s's: resume with --optim %s",
                                file8 ? "adamw_8bit" : "adamw_torch",
                                file8 ? "adamw_8bit" : "adamw_torch");
        swift_safetensors_close(&st);
        free(path);
        return rc;
    }
    size_t maxn = 1;
    for (int i = 0; i < r->ntp; i++)
        if (r->tp[i].numel > maxn)
            maxn = r->tp[i].numel;
    float *hw = swift_xmalloc(maxn * sizeof(float));
    int rc = 0;
    size_t off = 0, off8 = 0, blk = 0;
    for (int i = 0; i < r->ntp && rc == 0; i++) {
        struct swift_param *p = &r->tp[i];
        int gi = swift_galore_index(&r->gal, p);
        rc = read_moments(r, &st, path, p, gi, hm, hv, &off, h, &off8, &blk);
        if (rc == 0) {
            rc = read_tensor(&st, path, "master.", p->name, p->ndim, p->shape, hw, 1);
            if (rc == 0)
                r->m->ops->upload(p->w, hw, p->numel * sizeof(float));
            rc = rc > 0 ? 0 : rc;
        }
        if (gi >= 0 && rc == 0) {
            int64_t gs[2];
            galore_shape(&r->gal.it[gi], 2, gs);
            rc = read_tensor(&st, path, galore_pre[2], p->name, 2, gs, r->gal.it[gi].P, 0);
        }
    }
    free(hw);
    const char *s = swift_safetensors_meta(&st, "step");
    long v;
    if (rc == 0 && (!s || swift_parse_long(s, 0, LONG_MAX, &v) < 0))
        rc = swift_error_at(path, 0, "missing or bad __metadata__ step");
    else if (rc == 0)
        r->opt.step = r->gal.step = v;
    swift_safetensors_close(&st);
    free(path);
    return rc;
}

static const char *const tok_files[] = {"tokenizer.json",
                                        "tokenizer_config.json",
                                        "generation_config.json",
                                        "special_tokens_map.json",
                                        "vocab.json",
                                        "merges.txt",
                                        "added_tokens.json",
                                        /* a vision-language model's processor */
                                        "preprocessor_config.json",
                                        "video_preprocessor_config.json",
                                        "chat_template.json",
                                        "chat_template.jinja",
                                        NULL};

static int cmp_ckpt(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return x < y ? -1 : x > y;
}

/* steps of the checkpoint-N directories in dir, ascending; returns the count */
static int list_ckpts(const char *dir, long *out, int cap)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < cap) {
        char *end;
        if (strncmp(de->d_name, "checkpoint-", 11))
            continue;
        long v = strtol(de->d_name + 11, &end, 10);
        if (*end || end == de->d_name + 11)
            continue;
        out[n++] = v;
    }
    closedir(d);
    qsort(out, (size_t)n, sizeof(long), cmp_ckpt);
    return n;
}

/* The weights (full: with the tokenizer and processor files, so the checkpoint is a complete
 * HF model directory) or the adapter (a vision-language model's: with its trained vision
 * tensors) into dir. */
static int save_weights(struct run *r, const char *dir)
{
    const struct swift_train_opts *o = r->o;
    if (o->tuner == SWIFT_TUNER_LORA)
        return r->vlm ? train_vl_save(r, dir) : swift_lora_save(r->m, &r->lo, dir, o->model);
    int rc = r->vlm ? train_vl_save(r, dir) : swift_model_save(r->m, dir, r->config_path);
    for (int i = 0; rc == 0 && tok_files[i]; i++) {
        char *src = swift_path_join(o->model, tok_files[i]);
        if (access(src, R_OK) == 0) {
            char *dst = swift_path_join(dir, tok_files[i]);
            rc = swift_copy_file(src, dst);
            free(dst);
        }
        free(src);
    }
    return rc;
}

/* dir/trainer_state.json: the data position and what a resume must match */
static int save_state(struct run *r, const char *dir, long step)
{
    const struct swift_train_opts *o = r->o;
    json_t *st = json_pack("{s:i,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:s,s:s}",
                           "version",
                           1,
                           "global_step",
                           (json_int_t)step,
                           "max_steps",
                           (json_int_t)r->max_steps,
                           "micro_batches_done",
                           (json_int_t)(step * o->grad_accum * r->dist.world),
                           "batch_size",
                           (json_int_t)o->batch_size,
                           "grad_accum",
                           (json_int_t)o->grad_accum,
                           "seed",
                           (json_int_t)o->seed,
                           "adam_step",
                           (json_int_t)r->opt.step,
                           "tuner",
                           o->tuner == SWIFT_TUNER_LORA ? "lora" : "full",
                           "rng",
                           "stateless: data order from (seed, epoch), dropout from (seed, "
                           "step, micro-batch, layer)");
    if (!st)
        abort();
    json_object_set_new(st, "world_size", json_integer(r->dist.world));
    json_object_set_new(st, "objective", json_string(o->rlhf ? o->rlhf : "sft"));
    char *txt = json_dumps(st, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(st);
    if (!txt)
        abort();
    char *p = swift_path_join(dir, "trainer_state.json");
    int rc = swift_atomic_write(p, txt, strlen(txt));
    free(txt);
    free(p);
    return rc;
}

/* --save-total-limit: remove the oldest checkpoints beyond it */
static void prune_checkpoints(const struct swift_train_opts *o)
{
    if (o->save_total_limit <= 0)
        return;
    long steps[4096];
    int n = list_ckpts(o->output_dir, steps, 4096);
    for (int i = 0; i + o->save_total_limit < n; i++) {
        char nm[64];
        snprintf(nm, sizeof(nm), "checkpoint-%ld", steps[i]);
        char *p = swift_path_join(o->output_dir, nm);
        if (p)
            swift_remove_tree(p);
        free(p);
    }
}

static int write_checkpoint(struct run *r, long step, const float *hm, const float *hv,
                            const struct host8 *h)
{
    const struct swift_train_opts *o = r->o;
    int64_t t0 = swift_trace_now();
    char name[64];
    snprintf(name, sizeof(name), "checkpoint-%ld", step);
    char *final = swift_path_join(o->output_dir, name), *tmp = NULL;
    if (swift_atomic_dir_begin(final, &tmp) < 0) {
        free(final);
        return -1;
    }
    int rc = save_weights(r, tmp);
    if (rc == 0)
        rc = save_optimizer(r, tmp, hm, hv, h);
    if (rc == 0)
        rc = save_state(r, tmp, step);
    if (rc == 0)
        rc = swift_atomic_dir_commit(tmp, final, 1);
    else
        swift_atomic_dir_abort(tmp);
    swift_trace_span("ckpt",
                     "checkpoint",
                     t0,
                     swift_trace_now(),
                     (struct swift_targ[]){SWIFT_TARG_I("step", step)},
                     1);
    if (rc == 0) {
        swift_trace_instant(
            "ckpt", "checkpoint_written", (struct swift_targ[]){SWIFT_TARG_S("path", final)}, 1);
        prune_checkpoints(o);
    }
    free(final);
    return rc;
}

/* Every rank calls this; rank 0 writes. The optimizer state is first copied to host memory
 * (backend memory may be a device's); under ZeRO-1 it is gathered to rank 0. All ranks return
 * -1 when the write failed on rank 0. */
int train_save_checkpoint(struct run *r, long step)
{
    struct swift_dist *d = &r->dist;
    int zero = d->shard != NULL, rc = 0;
    size_t n32 = r->opt.total - r->opt.total8; /* float32 moments (all of them but 8-bit ones) */
    size_t part = n32 ? n32 : 1;
    float *pm = swift_xmalloc(part * sizeof(float)), *pv = swift_xmalloc(part * sizeof(float));
    float *fm = NULL, *fv = NULL;
    r->m->ops->download(pm, r->opt.m, n32 * sizeof(float));
    r->m->ops->download(pv, r->opt.v, n32 * sizeof(float));
    struct host8 h8 = {0}; /* --optim adamw_8bit: no ZeRO-1 (a usage error), rank 0 has it all */
    if (r->opt.bits == 8 && d->rank == 0) {
        host8_alloc(&h8, &r->opt);
        r->m->ops->download(h8.q1, r->opt.qm, r->opt.total8);
        r->m->ops->download(h8.q2, r->opt.qv, r->opt.total8);
        r->m->ops->download(h8.a1, r->opt.am, r->opt.blocks8 * sizeof(float));
        r->m->ops->download(h8.a2, r->opt.av, r->opt.blocks8 * sizeof(float));
    }
    if (zero) {
        if (d->rank == 0) {
            fm = swift_xmalloc((d->total ? d->total : 1) * sizeof(float));
            fv = swift_xmalloc((d->total ? d->total : 1) * sizeof(float));
        }
        if (swift_dist_shard_gather(d, pm, fm, step) < 0 ||
            swift_dist_shard_gather(d, pv, fv, step) < 0) {
            free(fm);
            free(fv);
            free(pm);
            free(pv);
            return -1;
        }
    }
    if (d->rank == 0)
        rc = write_checkpoint(
            r, step, zero ? fm : pm, zero ? fv : pv, r->opt.bits == 8 ? &h8 : NULL);
    host8_free(&h8);
    free(fm);
    free(fv);
    free(pm);
    free(pv);
    int bad = rc < 0;
    if (swift_dist_checkin(d, "checkpoint", step, &bad, NULL, 0) < 0)
        return -1;
    if (bad && rc == 0)
        swift_error("rank %d: rank 0 failed to write checkpoint-%ld", d->rank, step);
    return bad ? -1 : 0;
}

/* The file holds the whole state: read it into host memory, upload this rank's range (all of
 * it without ZeRO-1). */
int train_load_optimizer(struct run *r, const char *dir)
{
    struct swift_dist *d = &r->dist;
    size_t total = 0;
    for (int i = 0; i < r->ntp; i++)
        if (swift_galore_index(&r->gal, &r->tp[i]) < 0) /* GaLore's: its own tensors */
            total += r->tp[i].numel;
    size_t lo = d->shard ? d->lo : 0, hi = d->shard ? d->hi : total;
    float *fm = swift_xmalloc((total ? total : 1) * sizeof(float)),
          *fv = swift_xmalloc((total ? total : 1) * sizeof(float));
    struct host8 h8 = {0};
    if (r->opt.bits == 8) {
        host8_alloc(&h8, &r->opt);
        hi = total - r->opt.total8; /* the float32 moments of the small parameters */
    }
    int rc = read_optimizer(r, dir, fm, fv, r->opt.bits == 8 ? &h8 : NULL);
    if (rc == 0) {
        r->m->ops->upload(r->opt.m, fm + lo, (hi - lo) * sizeof(float));
        r->m->ops->upload(r->opt.v, fv + lo, (hi - lo) * sizeof(float));
    }
    if (rc == 0 && r->opt.bits == 8) {
        r->m->ops->upload(r->opt.qm, h8.q1, r->opt.total8);
        r->m->ops->upload(r->opt.qv, h8.q2, r->opt.total8);
        r->m->ops->upload(r->opt.am, h8.a1, r->opt.blocks8 * sizeof(float));
        r->m->ops->upload(r->opt.av, h8.a2, r->opt.blocks8 * sizeof(float));
    }
    host8_free(&h8);
    free(fm);
    free(fv);
    return rc;
}

/* A run killed while checkpointing leaves ".checkpoint-N.tmp-PID" behind: never a
 * checkpoint, so remove it (only when that process is gone). */
void train_remove_stale_tmp(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *t = strstr(de->d_name, ".tmp-");
        if (strncmp(de->d_name, ".checkpoint-", 12) || !t)
            continue;
        char *end;
        long pid = strtol(t + 5, &end, 10);
        if ((*end && *end != '-') || pid <= 0 ||
            (kill((pid_t)pid, 0) == 0 && pid != (long)getpid()))
            continue;
        char *p = swift_path_join(dir, de->d_name);
        swift_remove_tree(p);
        free(p);
    }
    closedir(d);
}

/* Resolve --resume: a checkpoint dir, or "latest" in the output dir. Returns malloc'ed path,
 * NULL with *err set on failure, NULL without err when there is nothing to resume. */
char *train_resolve_resume(const struct swift_train_opts *o, int *err)
{
    *err = 0;
    if (!o->resume)
        return NULL;
    if (strcmp(o->resume, "latest"))
        return swift_xstrdup(o->resume);
    long steps[4096];
    int n = list_ckpts(o->output_dir, steps, 4096);
    if (!n) {
        swift_warn("--resume latest: no checkpoint in '%s', starting from scratch", o->output_dir);
        return NULL;
    }
    char nm[64];
    snprintf(nm, sizeof(nm), "checkpoint-%ld", steps[n - 1]);
    return swift_path_join(o->output_dir, nm);
}

int train_read_state(const char *ckpt, long *step, const struct swift_train_opts *o, int world)
{
    char *p = swift_path_join(ckpt, "trainer_state.json");
    json_error_t jerr;
    json_t *st = json_load_file(p, 0, &jerr);
    int rc = 0;
    if (!st) {
        rc = swift_error_at(p, jerr.line, "%s", jerr.text);
    } else {
        json_t *gs = json_object_get(st, "global_step");
        const char *tu = json_string_value(json_object_get(st, "tuner"));
        const char *obj = json_string_value(json_object_get(st, "objective"));
        if (!json_is_integer(gs))
            rc = swift_error_at(p, 0, "missing global_step");
        else if (!tu || strcmp(tu, o->tuner == SWIFT_TUNER_LORA ? "lora" : "full"))
            rc = swift_error_at(p, 0, "checkpoint was trained with --tuner %s", tu ? tu : "?");
        else if (strcmp(obj ? obj : "sft", o->rlhf ? o->rlhf : "sft"))
            rc = swift_error_at(p,
                                0,
                                "checkpoint was trained with %s%s, not %s%s",
                                obj && strcmp(obj, "sft") ? "--rlhf " : "",
                                obj && strcmp(obj, "sft") ? obj : "SFT",
                                o->rlhf ? "--rlhf " : "",
                                o->rlhf ? o->rlhf : "SFT");
        else if (json_integer_value(json_object_get(st, "batch_size")) != o->batch_size ||
                 json_integer_value(json_object_get(st, "grad_accum")) *
                         (json_is_integer(json_object_get(st, "world_size"))
                              ? json_integer_value(json_object_get(st, "world_size"))
                              : 1) !=
                     (json_int_t)o->grad_accum * world ||
                 json_integer_value(json_object_get(st, "seed")) != o->seed)
            rc = swift_error_at(p,
                                0,
                                "batch size, global batch (ranks x gradient accumulation) "
                                "and seed must be those of the checkpointed run to resume "
                                "exactly");
        else
            *step = (long)json_integer_value(gs);
    }
    json_decref(st);
    free(p);
    return rc;
}
