/* export/merge — base + PEFT LoRA adapter → merged Hugging Face model directory.
 *
 * W' = W + scale · B·A for every module in the adapter, with scale = lora_alpha / r
 * (lora_alpha / sqrt(r) with use_rslora), computed in float32 (OpenBLAS sgemm) as peft's
 * merge_and_unload does, then cast to the output dtype with round-to-nearest-even. */
#include "lib/core/error.h"
#include "lib/export/export.h"
#include "lib/export/internal.h"
#include "lib/core/fileio.h"
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

struct lora_pair {
    char *module; /* "model.layers.0.self_attn.q_proj" */
    const struct swift_st_tensor *a, *b;
    int used;
};

struct adapter {
    struct swift_safetensors st;
    json_t *cfg;
    double alpha;
    int rslora;
    struct lora_pair *pairs;
    size_t n;
    char *cfg_path, *st_path;
};

static void adapter_release(struct adapter *ad)
{
    for (size_t i = 0; i < ad->n; i++)
        free(ad->pairs[i].module);
    free(ad->pairs);
    swift_safetensors_close(&ad->st);
    json_decref(ad->cfg);
    free(ad->cfg_path);
    free(ad->st_path);
}

/* "base_model.model.X.lora_A.weight" or "...lora_A.default.weight" → X, which = 'A' | 'B' */
static char *lora_module(const char *name, char *which)
{
    const char *pre = "base_model.model.";
    if (strncmp(name, pre, strlen(pre)))
        return NULL;
    const char *p = name + strlen(pre);
    const char *m = strstr(p, ".lora_A.");
    *which = 'A';
    if (!m) {
        m = strstr(p, ".lora_B.");
        *which = 'B';
    }
    if (!m)
        return NULL;
    const char *rest = m + 8;
    if (strcmp(rest, "weight") && strcmp(rest, "default.weight"))
        return NULL;
    return strndup(p, (size_t)(m - p));
}

static double alpha_for(const struct adapter *ad, const char *module)
{
    json_t *pat = json_object_get(ad->cfg, "alpha_pattern");
    const char *k;
    json_t *v;
    json_object_foreach(pat, k, v)
    {
        size_t lk = strlen(k), lm = strlen(module);
        if (json_is_number(v) && lm >= lk && !strcmp(module + lm - lk, k) &&
            (lm == lk || module[lm - lk - 1] == '.'))
            return json_number_value(v);
    }
    return ad->alpha;
}

static int adapter_load(struct adapter *ad, const char *dir)
{
    memset(ad, 0, sizeof(*ad));
    ad->cfg_path = swift_path_join(dir, "adapter_config.json");
    ad->st_path = swift_path_join(dir, "adapter_model.safetensors");
    if (!(ad->cfg = swift_json_load(ad->cfg_path)))
        return -1;
    const char *pt = json_string_value(json_object_get(ad->cfg, "peft_type"));
    if (pt && strcmp(pt, "LORA"))
        return swift_error("%s: peft_type '%s' is not LORA", ad->cfg_path, pt);
    json_t *alpha = json_object_get(ad->cfg, "lora_alpha");
    if (!json_is_number(alpha))
        return swift_error("%s: missing \"lora_alpha\"", ad->cfg_path);
    ad->alpha = json_number_value(alpha);
    ad->rslora = json_is_true(json_object_get(ad->cfg, "use_rslora"));
    if (json_is_true(json_object_get(ad->cfg, "fan_in_fan_out")))
        return swift_error("%s: fan_in_fan_out adapters (GPT-2 Conv1D) are not supported",
                           ad->cfg_path);
    if (json_is_true(json_object_get(ad->cfg, "use_dora")))
        return swift_error("%s: DoRA adapters are not supported", ad->cfg_path);
    const char *bias = json_string_value(json_object_get(ad->cfg, "bias"));
    if (bias && strcmp(bias, "none"))
        return swift_error(
            "%s: bias '%s' adapters are not supported (only \"none\")", ad->cfg_path, bias);
    if (swift_safetensors_open(&ad->st, ad->st_path) < 0)
        return -1;
    ad->pairs = calloc(ad->st.ntensors + 1, sizeof(*ad->pairs));
    if (!ad->pairs)
        return swift_error("out of memory");
    for (size_t i = 0; i < ad->st.ntensors; i++) {
        const struct swift_st_tensor *t = &ad->st.tensors[i];
        char which;
        char *mod = lora_module(t->name, &which);
        if (!mod)
            return swift_error("%s: tensor '%s' is not a LoRA A/B weight (modules_to_save and "
                               "other adapter types are not supported)",
                               ad->st_path,
                               t->name);
        size_t j;
        for (j = 0; j < ad->n && strcmp(ad->pairs[j].module, mod); j++)
            ;
        if (j == ad->n) {
            ad->pairs[ad->n++].module = mod;
        } else {
            free(mod);
        }
        if (t->ndim != 2)
            return swift_error("%s: '%s' is not a matrix", ad->st_path, t->name);
        if (which == 'A')
            ad->pairs[j].a = t;
        else
            ad->pairs[j].b = t;
    }
    for (size_t j = 0; j < ad->n; j++) {
        struct lora_pair *p = &ad->pairs[j];
        if (!p->a || !p->b)
            return swift_error("%s: module '%s' has lora_%c but no lora_%c",
                               ad->st_path,
                               p->module,
                               p->a ? 'A' : 'B',
                               p->a ? 'B' : 'A');
        if (p->a->shape[0] != p->b->shape[1])
            return swift_error("%s: '%s': lora_A has rank %lld, lora_B %lld",
                               ad->st_path,
                               p->module,
                               (long long)p->a->shape[0],
                               (long long)p->b->shape[1]);
    }
    return 0;
}

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
    char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    if (!s)
        return swift_error("out of memory");
    size_t n = strlen(s);
    char *t = realloc(s, n + 2);
    if (!t) {
        free(s);
        return swift_error("out of memory");
    }
    t[n] = '\n';
    t[n + 1] = 0;
    int rc = swift_atomic_write(path, t, n + 1);
    free(t);
    return rc;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int swift_export_merge(const struct swift_export_opts *o, const char *out_dir)
{
    struct adapter ad;
    struct swift_st_set set = {0};
    struct swift_hparams hp;
    struct swift_st_entry *entries = NULL;
    void **owned = NULL;
    size_t ne = 0, total = 0;
    int rc = -1;
    double t0 = now_s();
    memset(&ad, 0, sizeof(ad));
    if (o->quant)
        return swift_export_quant(o, out_dir);
    if (swift_hparams_load(&hp, o->model_dir) < 0)
        return -1;
    /* Without --merge-lora this is a plain conversion: dtype, shards, side files. */
    if (o->merge_lora && adapter_load(&ad, o->merge_lora) < 0)
        goto out;
    if (swift_st_set_open(&set, o->model_dir) < 0)
        goto out;
    enum swift_dtype odt = SWIFT_DTYPE_BF16;
    const char *want = o->dtype;
    if (!want) {
        want = json_string_value(json_object_get(hp.config, "torch_dtype"));
        if (!want)
            want = json_string_value(json_object_get(hp.config, "dtype"));
        if (!want)
            want = "bf16";
    }
    if (parse_dtype(want, &odt) < 0) {
        swift_error("unknown --dtype '%s' for a Hugging Face directory (bf16, fp16, fp32)", want);
        goto out;
    }
    for (size_t f = 0; f < set.nfiles; f++)
        total += set.files[f].ntensors;
    entries = calloc(total + 1, sizeof(*entries));
    owned = calloc(total + 1, sizeof(*owned));
    if (!entries || !owned) {
        swift_error("out of memory");
        goto out;
    }
    uint64_t bytes = 0;
    size_t merged = 0;
    for (size_t f = 0; f < set.nfiles; f++) {
        for (size_t i = 0; i < set.files[f].ntensors; i++) {
            const struct swift_st_tensor *t = &set.files[f].tensors[i];
            struct swift_st_entry *e = &entries[ne];
            e->name = t->name;
            e->ndim = t->ndim;
            memcpy(e->shape, t->shape, sizeof(e->shape));
            /* the module of "X.weight" */
            struct lora_pair *lp = NULL;
            size_t nl = strlen(t->name);
            if (nl > 7 && !strcmp(t->name + nl - 7, ".weight"))
                for (size_t j = 0; j < ad.n; j++)
                    if (strlen(ad.pairs[j].module) == nl - 7 &&
                        !strncmp(ad.pairs[j].module, t->name, nl - 7))
                        lp = &ad.pairs[j];
            int floating = t->dtype == SWIFT_DTYPE_F32 || t->dtype == SWIFT_DTYPE_F16 ||
                           t->dtype == SWIFT_DTYPE_BF16;
            if (!floating || (!lp && t->dtype == odt)) {
                e->dtype = t->dtype; /* pass through from the mapping */
                e->data = t->data;
                bytes += t->end - t->begin;
                ne++;
                continue;
            }
            int64_t ts0 = swift_trace_now();
            float *w = malloc(t->numel * sizeof(float) + 1);
            if (!w) {
                swift_error("out of memory");
                goto out;
            }
            owned[ne] = w;
            if (swift_st_tensor_to_f32(t, w) < 0)
                goto out;
            int64_t ts1 = swift_trace_now();
            if (swift_trace_enabled()) {
                struct swift_targ a[] = {SWIFT_TARG_S("tensor", t->name),
                                         SWIFT_TARG_I("bytes", t->end - t->begin)};
                swift_trace_span("export", "read", ts0, ts1, a, 2);
            }
            if (lp) {
                int64_t out_f = t->shape[0], in_f = t->ndim == 2 ? t->shape[1] : 0;
                int64_t r = lp->a->shape[0];
                if (t->ndim != 2 || lp->a->shape[1] != in_f || lp->b->shape[0] != out_f) {
                    swift_error("adapter/base mismatch: %s: lora_A [%lld,%lld] and lora_B "
                                "[%lld,%lld] do not fit base '%s' [%lld,%lld]",
                                ad.st_path,
                                (long long)lp->a->shape[0],
                                (long long)lp->a->shape[1],
                                (long long)lp->b->shape[0],
                                (long long)lp->b->shape[1],
                                t->name,
                                (long long)out_f,
                                (long long)in_f);
                    goto out;
                }
                float *A = malloc(lp->a->numel * sizeof(float) + 1);
                float *B = malloc(lp->b->numel * sizeof(float) + 1);
                if (!A || !B || swift_st_tensor_to_f32(lp->a, A) < 0 ||
                    swift_st_tensor_to_f32(lp->b, B) < 0) {
                    free(A);
                    free(B);
                    if (!A || !B)
                        swift_error("out of memory");
                    goto out;
                }
                double alpha = alpha_for(&ad, lp->module);
                float scale = (float)(ad.rslora ? alpha / sqrt((double)r) : alpha / (double)r);
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
                lp->used = 1;
                merged++;
            }
            e->dtype = odt;
            if (odt == SWIFT_DTYPE_F32) {
                e->data = w;
            } else {
                uint16_t *h = malloc(t->numel * 2 + 1);
                if (!h) {
                    swift_error("out of memory");
                    goto out;
                }
                for (uint64_t k = 0; k < t->numel; k++)
                    h[k] = odt == SWIFT_DTYPE_BF16 ? swift_fp32_to_bf16(w[k])
                                                   : swift_fp32_to_fp16(w[k]);
                free(w);
                owned[ne] = h;
                e->data = h;
            }
            bytes += t->numel * (uint64_t)(odt == SWIFT_DTYPE_F32 ? 4 : 2);
            if (swift_trace_enabled()) {
                struct swift_targ a[] = {SWIFT_TARG_S("tensor", t->name),
                                         SWIFT_TARG_I("lora", lp != NULL),
                                         SWIFT_TARG_I("bytes", t->numel * 4)};
                swift_trace_span("export", lp ? "merge" : "convert", ts1, swift_trace_now(), a, 3);
            }
            ne++;
        }
    }
    for (size_t j = 0; j < ad.n; j++)
        if (!ad.pairs[j].used) {
            swift_error("adapter/base mismatch: %s has LoRA weights for '%s', which the base "
                        "model in '%s' does not have (%s.weight)",
                        ad.st_path,
                        ad.pairs[j].module,
                        o->model_dir,
                        ad.pairs[j].module);
            goto out;
        }
    if (swift_mkdirs(out_dir, 0755) < 0)
        goto out;
    int64_t tw = swift_trace_now();
    uint64_t shard = o->max_shard_size ? o->max_shard_size : (uint64_t)5 << 30;
    if (swift_safetensors_write_sharded(out_dir, entries, ne, shard) < 0)
        goto out;
    if (swift_trace_enabled()) {
        struct swift_targ a[] = {SWIFT_TARG_I("tensors", ne), SWIFT_TARG_I("bytes", bytes)};
        swift_trace_span("export", "write", tw, swift_trace_now(), a, 2);
    }
    /* config.json with the output dtype (both spellings, as transformers 4 and 5 read) */
    json_t *cfg = json_deep_copy(hp.config);
    if (json_object_get(cfg, "dtype"))
        json_object_set_new(cfg, "dtype", json_string(torch_name(odt)));
    json_object_set_new(cfg, "torch_dtype", json_string(torch_name(odt)));
    char *p = swift_path_join(out_dir, "config.json");
    int wrc = write_json(p, cfg);
    free(p);
    json_decref(cfg);
    if (wrc < 0)
        goto out;
    if (swift_model_copy_side_files(o->model_dir, out_dir) < 0)
        goto out;
    char *gp = swift_path_join(out_dir, "generation_config.json");
    if (access(gp, F_OK)) {
        json_t *g = json_object();
        if (hp.bos_id >= 0)
            json_object_set_new(g, "bos_token_id", json_integer(hp.bos_id));
        json_t *eos = json_object_get(hp.config, "eos_token_id");
        if (eos)
            json_object_set(g, "eos_token_id", eos);
        json_object_set_new(g, "_from_model_config", json_true());
        int grc = write_json(gp, g);
        json_decref(g);
        if (grc < 0) {
            free(gp);
            goto out;
        }
    }
    free(gp);
    if (strcmp(o->to ? o->to : "hf", "gguf")) {
        json_t *j = json_pack("{s:i,s:s,s:s,s:s,s:I,s:I,s:I,s:f}",
                              "version",
                              1,
                              "format",
                              "hf",
                              "output",
                              o->output,
                              "dtype",
                              torch_name(odt),
                              "tensors",
                              (json_int_t)ne,
                              "merged",
                              (json_int_t)merged,
                              "bytes",
                              (json_int_t)bytes,
                              "seconds",
                              now_s() - t0);
        if (j) {
            json_dumpf(j, stdout, JSON_COMPACT | JSON_REAL_PRECISION(6));
            fputc('\n', stdout);
            json_decref(j);
        }
    }
    rc = 0;
out:
    if (owned)
        for (size_t i = 0; i < total; i++)
            free(owned[i]);
    free(owned);
    free(entries);
    swift_st_set_close(&set);
    adapter_release(&ad);
    swift_hparams_release(&hp);
    return rc;
}
