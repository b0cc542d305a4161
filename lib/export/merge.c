/* export/merge — base + PEFT LoRA adapter → merged Hugging Face model directory.
 *
 * W' = W + scale · B·A for every module in the adapter (read by lib/model/adapter.h), with
 * scale = lora_alpha / r (lora_alpha / sqrt(r) with use_rslora: swift_lora_scale), computed in
 * float32 (OpenBLAS sgemm) as peft's merge_and_unload does, then cast to the output dtype with
 * round-to-nearest-even. DoRA adapters (use_dora): W' = m / ||W + scale·B·A||_row ·
 * (W + scale·B·A), the row norm in double. */
#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/export/export.h"
#include "lib/export/internal.h"
#include "lib/core/fileio.h"
#include "lib/core/record.h"
#include "lib/model/adapter.h"
#include "lib/model/model_init.h"
#include "lib/formats/quant.h"
#include "lib/formats/safetensors.h"
#include "lib/core/trace.h"

#include <cblas.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/core/banned.h"

static int parse_dtype(const char *s, enum swift_dtype *dt)
{
    if (!strcmp(s, "bf16") || !strcmp(s, "bfloat16"))
        *dt = SWIFT_DTYPE_BF16;
    else if (!strcmp(s, "fp16") || !strcmp(s, "f16") || !strcmp(s, "float16"))
        *dt = SWIFT_DTYPE_F16;
    else if (!strcmp(s, "fp32") || !strcmp(s, "f32") || !strcmp(s, "float32"))
        *dt = SWIFT_DTYPE_F32;
    else
        return -1;
    return 0;
}

static const char *torch_name(enum swift_dtype dt)
{
    return dt == SWIFT_DTYPE_BF16 ? "bfloat16" : dt == SWIFT_DTYPE_F16 ? "float16" : "float32";
}

static int write_json(const char *path, json_t *j)
{
    return swift_json_write_file(
        path, j, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One merge or conversion: the inputs and the tensors to write. */
struct merge_job {
    const struct swift_export_opts *o;
    struct swift_adapter ad;
    struct swift_st_set set;
    struct swift_hparams hp;
    enum swift_dtype odt;
    struct swift_st_entry *entries;
    void **owned; /* per entry: converted data we allocated, or NULL */
    size_t ne, total, merged, replaced;
    uint64_t bytes;
    char *full_used; /* per ad.full entry: applied */
};

/* The output dtype: --dtype, else the config's torch_dtype/dtype, else bf16. */
static int pick_dtype(struct merge_job *j)
{
    const char *want = j->o->dtype;
    if (!want) {
        want = json_string_value(json_object_get(j->hp.config, "torch_dtype"));
        if (!want)
            want = json_string_value(json_object_get(j->hp.config, "dtype"));
        if (!want)
            want = "bf16";
    }
    if (parse_dtype(want, &j->odt) < 0)
        return swift_error("unknown --dtype '%s' for a Hugging Face directory (bf16, fp16, fp32)",
                           want);
    return 0;
}

/* name as compared between base and adapter: a VL model's in the hub's layout, so that an
 * adapter saved against either key layout (model.layers.* or model.language_model.layers.*)
 * finds its base tensors in a checkpoint of either */
static void match_name(const struct merge_job *j, const char *name, char *out, size_t n)
{
    if (j->hp.vl)
        swift_vl_canonical_name(name, out, n);
    else
        snprintf(out, n, "%s", name);
}

/* The adapter's pair for base tensor "X.weight", or NULL. */
static struct swift_adapter_pair *pair_of(const struct merge_job *j, const char *name)
{
    struct swift_adapter_pair *lp = NULL;
    char base[512], mod[512];
    match_name(j, name, base, sizeof(base));
    size_t nl = strlen(base);
    if (nl > 7 && !strcmp(base + nl - 7, ".weight"))
        for (size_t k = 0; k < j->ad.n; k++) {
            match_name(j, j->ad.pairs[k].module, mod, sizeof(mod));
            if (strlen(mod) == nl - 7 && !strncmp(mod, base, nl - 7))
                lp = &j->ad.pairs[k];
        }
    return lp;
}

/* The adapter's full tensor (modules_to_save) replacing base tensor t, or NULL; *err set when
 * it does not fit */
static const struct swift_st_tensor *full_of(struct merge_job *j, const struct swift_st_tensor *t,
                                             int *err)
{
    char base[512], full[512];
    match_name(j, t->name, base, sizeof(base));
    for (size_t k = 0; k < j->ad.nfull; k++) {
        match_name(j, j->ad.full_names[k], full, sizeof(full));
        if (strcmp(full, base))
            continue;
        const struct swift_st_tensor *f = j->ad.full[k];
        int same = f->ndim == t->ndim && f->numel == t->numel;
        for (int d = 0; same && d < t->ndim; d++)
            same = f->shape[d] == t->shape[d];
        if (!same) {
            *err = swift_error("adapter/base mismatch: %s: '%s' (modules_to_save) has %llu "
                               "elements in %d dimensions, base '%s' %llu in %d",
                               j->ad.st_path,
                               f->name,
                               (unsigned long long)f->numel,
                               f->ndim,
                               t->name,
                               (unsigned long long)t->numel,
                               t->ndim);
            return NULL;
        }
        j->full_used[k] = 1;
        return f;
    }
    return NULL;
}

/* DoRA (PEFT's DoraLinearVariant.merge): w = W + scale*B@A already; each row times
 * m / ||row||_2 (the norm of the unmerged W + scale*B@A, as PEFT's forward computes it) */
static int dora_rescale(const struct merge_job *j, const struct swift_st_tensor *t,
                        const struct swift_adapter_pair *lp, float *w)
{
    int64_t out_f = t->shape[0], in_f = t->shape[1];
    if (lp->m->shape[0] != out_f)
        return swift_error("adapter/base mismatch: %s: lora_magnitude_vector [%lld] does not fit "
                           "base '%s' [%lld,%lld]",
                           j->ad.st_path,
                           (long long)lp->m->shape[0],
                           t->name,
                           (long long)out_f,
                           (long long)in_f);
    float *mag = swift_xmalloc((size_t)out_f * sizeof(float) + 1);
    if (swift_st_tensor_to_f32(lp->m, mag) < 0) {
        free(mag);
        return -1;
    }
    for (int64_t o = 0; o < out_f; o++) {
        float *row = w + o * in_f;
        double ss = 0;
        for (int64_t i = 0; i < in_f; i++)
            ss += (double)row[i] * row[i];
        float f = mag[o] / (float)sqrt(ss);
        for (int64_t i = 0; i < in_f; i++)
            row[i] *= f;
    }
    free(mag);
    return 0;
}

/* w (t's float32 copy) += scale * B @ A */
static int merge_pair(struct merge_job *j, const struct swift_st_tensor *t,
                      struct swift_adapter_pair *lp, float *w)
{
    int64_t out_f = t->shape[0], in_f = t->ndim == 2 ? t->shape[1] : 0;
    int64_t r = lp->a->shape[0];
    if (t->ndim != 2 || lp->a->shape[1] != in_f || lp->b->shape[0] != out_f)
        return swift_error("adapter/base mismatch: %s: lora_A [%lld,%lld] and lora_B "
                           "[%lld,%lld] do not fit base '%s' [%lld,%lld]",
                           j->ad.st_path,
                           (long long)lp->a->shape[0],
                           (long long)lp->a->shape[1],
                           (long long)lp->b->shape[0],
                           (long long)lp->b->shape[1],
                           t->name,
                           (long long)out_f,
                           (long long)in_f);
    float *A = swift_xmalloc(lp->a->numel * sizeof(float) + 1);
    float *B = swift_xmalloc(lp->b->numel * sizeof(float) + 1);
    if (swift_st_tensor_to_f32(lp->a, A) < 0 || swift_st_tensor_to_f32(lp->b, B) < 0) {
        free(A);
        free(B);
        return -1;
    }
    float scale =
        swift_lora_scale(swift_adapter_alpha(&j->ad, lp->module), (int)r, j->ad.cfg.use_rslora);
    /* W[out,in] += scale * B[out,r] @ A[r,in] */
    cblas_sgemm(CblasRowMajor,
                CblasNoTrans,
                CblasNoTrans,
                (int)out_f,
                (int)in_f,
                (int)r,
                scale,
                B,
                (int)r,
                A,
                (int)in_f,
                1.0f,
                w,
                (int)in_f);
    free(A);
    free(B);
    if (lp->m && dora_rescale(j, t, lp, w) < 0)
        return -1;
    lp->used = 1;
    j->merged++;
    return 0;
}

/* Base tensor t into the next entry: passed through from the mapping, or read as float32,
 * merged with its adapter pair and cast to the output dtype. */
static int add_tensor(struct merge_job *j, const struct swift_st_tensor *base)
{
    struct swift_st_entry *e = &j->entries[j->ne];
    e->name = base->name;
    e->ndim = base->ndim;
    memcpy(e->shape, base->shape, sizeof(e->shape));
    struct swift_adapter_pair *lp = pair_of(j, base->name);
    int err = 0;
    /* a tensor trained in full beside the adapters replaces the base's (its data, base's name) */
    const struct swift_st_tensor *t = full_of(j, base, &err);
    if (err)
        return -1;
    if (t && lp)
        return swift_error("%s: '%s' has both LoRA weights and a modules_to_save tensor",
                           j->ad.st_path,
                           base->name);
    j->replaced += t != NULL;
    t = t ? t : base;
    int floating =
        t->dtype == SWIFT_DTYPE_F32 || t->dtype == SWIFT_DTYPE_F16 || t->dtype == SWIFT_DTYPE_BF16;
    int q4 = floating && t == base && t->ndim == 2 && swift_export_qlora_applies(j->o, t->name);
    if (!floating || (!lp && !q4 && t->dtype == j->odt)) {
        e->dtype = t->dtype; /* pass through from the mapping */
        e->data = t->data;
        j->bytes += t->end - t->begin;
        j->ne++;
        return 0;
    }
    int64_t ts0 = swift_trace_now();
    float *w = swift_xmalloc(t->numel * sizeof(float) + 1);
    j->owned[j->ne] = w;
    if (swift_st_tensor_to_f32(t, w) < 0)
        return -1;
    int64_t ts1 = swift_trace_now();
    if (swift_trace_enabled()) {
        struct swift_targ a[] = {SWIFT_TARG_S("tensor", base->name),
                                 SWIFT_TARG_I("bytes", t->end - t->begin)};
        swift_trace_span("export", "read", ts0, ts1, a, 2);
    }
    if (q4 && swift_export_qlora_round_trip(j->o, t->name, w, t->shape[0], t->shape[1]) < 0)
        return -1;
    if (lp && merge_pair(j, t, lp, w) < 0)
        return -1;
    e->dtype = j->odt;
    if (j->odt == SWIFT_DTYPE_F32) {
        e->data = w;
    } else {
        uint16_t *h = swift_xmalloc(t->numel * 2 + 1);
        for (uint64_t k = 0; k < t->numel; k++)
            h[k] = j->odt == SWIFT_DTYPE_BF16 ? swift_fp32_to_bf16(w[k]) : swift_fp32_to_fp16(w[k]);
        free(w);
        j->owned[j->ne] = h;
        e->data = h;
    }
    j->bytes += t->numel * (uint64_t)(j->odt == SWIFT_DTYPE_F32 ? 4 : 2);
    if (swift_trace_enabled()) {
        struct swift_targ a[] = {SWIFT_TARG_S("tensor", base->name),
                                 SWIFT_TARG_I("lora", lp != NULL),
                                 SWIFT_TARG_I("bytes", t->numel * 4)};
        swift_trace_span("export", lp ? "merge" : "convert", ts1, swift_trace_now(), a, 3);
    }
    j->ne++;
    return 0;
}

/* Every tensor of the base into entries; every adapter module must have found its base. */
static int convert_all(struct merge_job *j)
{
    for (size_t f = 0; f < j->set.nfiles; f++)
        j->total += j->set.files[f].ntensors;
    j->entries = swift_xcalloc(j->total + 1, sizeof(*j->entries));
    j->full_used = swift_xcalloc(j->ad.nfull + 1, 1);
    j->owned = swift_xcalloc(j->total + 1, sizeof(*j->owned));
    for (size_t f = 0; f < j->set.nfiles; f++)
        for (size_t i = 0; i < j->set.files[f].ntensors; i++)
            if (add_tensor(j, &j->set.files[f].tensors[i]) < 0)
                return -1;
    for (size_t k = 0; k < j->ad.n; k++)
        if (!j->ad.pairs[k].used)
            return swift_error("adapter/base mismatch: %s has LoRA weights for '%s', which the "
                               "base model in '%s' does not have (%s.weight)",
                               j->ad.st_path,
                               j->ad.pairs[k].module,
                               j->o->model_dir,
                               j->ad.pairs[k].module);
    for (size_t k = 0; k < j->ad.nfull; k++)
        if (!j->full_used[k])
            return swift_error("adapter/base mismatch: %s has a modules_to_save tensor '%s', "
                               "which the base model in '%s' does not have",
                               j->ad.st_path,
                               j->ad.full[k]->name,
                               j->o->model_dir);
    return 0;
}

/* config.json with the output dtype (both spellings, as transformers 4 and 5 read), the side
 * files, and a generation_config.json when the base has none. */
static int write_side_files(const struct merge_job *j, const char *out_dir)
{
    json_t *cfg = json_deep_copy(j->hp.config);
    if (json_object_get(cfg, "dtype"))
        json_object_set_new(cfg, "dtype", json_string(torch_name(j->odt)));
    json_object_set_new(cfg, "torch_dtype", json_string(torch_name(j->odt)));
    static const char *const subs[] = {"text_config", "vision_config"}; /* a VL model's */
    static const char *const keys[] = {"dtype", "torch_dtype"};
    for (int s = 0; s < 2; s++)
        for (int k = 0; k < 2; k++) {
            json_t *sub = json_object_get(cfg, subs[s]);
            if (json_is_object(sub) && json_object_get(sub, keys[k]))
                json_object_set_new(sub, keys[k], json_string(torch_name(j->odt)));
        }
    char *p = swift_path_join(out_dir, "config.json");
    int wrc = write_json(p, cfg);
    free(p);
    json_decref(cfg);
    if (wrc < 0 || swift_model_copy_side_files(j->o->model_dir, out_dir) < 0)
        return -1;
    char *gp = swift_path_join(out_dir, "generation_config.json");
    int rc = 0;
    if (access(gp, F_OK)) {
        json_t *g = json_object();
        if (j->hp.bos_id >= 0)
            json_object_set_new(g, "bos_token_id", json_integer(j->hp.bos_id));
        json_t *eos = json_object_get(j->hp.config, "eos_token_id");
        if (eos)
            json_object_set(g, "eos_token_id", eos);
        json_object_set_new(g, "_from_model_config", json_true());
        rc = write_json(gp, g);
        json_decref(g);
    }
    free(gp);
    return rc;
}

/* The merged directory: sharded safetensors, then the side files. */
static int write_dir(const struct merge_job *j, const char *out_dir)
{
    if (swift_mkdirs(out_dir, 0755) < 0)
        return -1;
    int64_t tw = swift_trace_now();
    uint64_t shard = j->o->max_shard_size ? j->o->max_shard_size : (uint64_t)5 << 30;
    if (swift_safetensors_write_sharded(out_dir, j->entries, j->ne, shard) < 0)
        return -1;
    if (swift_trace_enabled()) {
        struct swift_targ a[] = {SWIFT_TARG_I("tensors", j->ne), SWIFT_TARG_I("bytes", j->bytes)};
        swift_trace_span("export", "write", tw, swift_trace_now(), a, 2);
    }
    return write_side_files(j, out_dir);
}

static void print_summary(const struct merge_job *j, double t0)
{
    json_t *r = json_pack("{s:i,s:s,s:s,s:s,s:I,s:I,s:I,s:f}",
                          "version",
                          1,
                          "format",
                          "hf",
                          "output",
                          j->o->output,
                          "dtype",
                          torch_name(j->odt),
                          "tensors",
                          (json_int_t)j->ne,
                          "merged",
                          (json_int_t)j->merged,
                          "bytes",
                          (json_int_t)j->bytes,
                          "seconds",
                          now_s() - t0);
    if (j->replaced) /* modules_to_save tensors of the adapter written in place of the base's */
        json_object_set_new(r, "replaced", json_integer((json_int_t)j->replaced));
    swift_export_summary(r);
}

/* A reward model's adapter (its score head in modules_to_save) does not merge into a causal LM. */
static int no_score(const struct swift_adapter *ad)
{
    if (!ad->score)
        return 1;
    swift_error_at(ad->st_path,
                   0,
                   "holds a reward model's score head (modules_to_save): merging "
                   "it is not supported");
    return 0;
}

int swift_export_merge(const struct swift_export_opts *o, const char *out_dir)
{
    if (o->quant)
        return swift_export_quant(o, out_dir);
    struct merge_job j;
    memset(&j, 0, sizeof(j));
    j.o = o;
    double t0 = now_s();
    if (swift_hparams_load(&j.hp, o->model_dir) < 0)
        return -1;
    json_t *qm =
        json_object_get(json_object_get(j.hp.config, "quantization_config"), "quant_method");
    if (json_is_string(qm) && !strcmp(json_string_value(qm), "bitsandbytes")) {
        swift_hparams_release(&j.hp);
        return swift_error("%s/config.json: saved by bitsandbytes (4-bit or int8 linears): "
                           "export from the float model (with --merge-lora DIR --qlora "
                           "nf4|fp4|int8 for an adapter trained on it)",
                           o->model_dir);
    }
    /* Without --merge-lora this is a plain conversion: dtype, shards, side files. */
    int rc = -1;
    if ((!o->merge_lora ||
         (swift_adapter_open_full(&j.ad, o->merge_lora) == 0 && no_score(&j.ad))) &&
        swift_st_set_open(&j.set, o->model_dir) == 0 && pick_dtype(&j) == 0 &&
        convert_all(&j) == 0 && write_dir(&j, out_dir) == 0) {
        if (strcmp(o->to ? o->to : "hf", "gguf"))
            print_summary(&j, t0);
        rc = 0;
    }
    if (j.owned)
        for (size_t i = 0; i < j.total; i++)
            free(j.owned[i]);
    free(j.owned);
    free(j.entries);
    free(j.full_used);
    swift_st_set_close(&j.set);
    swift_adapter_close(&j.ad);
    swift_hparams_release(&j.hp);
    return rc;
}
