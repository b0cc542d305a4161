/* export/quant_hf — round-to-nearest (RTN) weight-only quantization of the decoder's linear
 * layers into the GPTQ checkpoint layout (auto-gptq / transformers "gptq", checkpoint_format
 * "gptq", i.e. zero points stored minus one), symmetric, no act-order:
 *
 *   qweight int32 [in / (32/bits), out]  bits-wide codes of W^T packed along the input dim,
 *                                        element j of a word at bits*j
 *   qzeros  int32 [in / group, out / (32/bits)]  (zero - 1) packed along the output dim
 *   scales  fp16  [in / group, out]
 *   g_idx   int32 [in]                   i / group
 *   W[o][i] ≈ scales[g][o] * (q[i][o] - zero[g][o])
 *
 * The scale/zero rule is GPTQ's Quantizer (sym=True): xmax = max(|min(x,0)|, max(x,0)),
 * xmin = -xmax when min < 0 (else 0); scale = (xmax - xmin) / maxq; zero = (maxq + 1) / 2;
 * q = clamp(round(x / scale) + zero, 0, maxq) with round half to even (torch.round).
 * --method rtn rounds each group to nearest with its fp16 scale (lib/export/gptq_solve.h
 * swift_gptq_rtn);
 * --method gptq takes codes and scales from GPTQ on calibration data (lib/export/gptq.c). */
#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/export/export.h"
#include "lib/export/internal.h"
#include "lib/core/fileio.h"
#include "lib/core/record.h"
#include "lib/export/gptq_solve.h"
#include "lib/model/model_init.h"
#include "lib/formats/quant.h"
#include "lib/formats/safetensors.h"
#include "lib/core/trace.h"

#include <fenv.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/core/banned.h"

static int is_linear(const char *name)
{
    static const char *mods[] = {"self_attn.q_proj.weight",
                                 "self_attn.k_proj.weight",
                                 "self_attn.v_proj.weight",
                                 "self_attn.o_proj.weight",
                                 "mlp.gate_proj.weight",
                                 "mlp.up_proj.weight",
                                 "mlp.down_proj.weight"};
    if (strncmp(name, "model.layers.", 13))
        return 0;
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof(mods) / sizeof(mods[0]); i++) {
        size_t m = strlen(mods[i]);
        if (n > m && !strcmp(name + n - m, mods[i]) && name[n - m - 1] == '.')
            return 1;
    }
    return 0;
}

/* Pack codes (out,in) and group scales (in/group, out) into the GPTQ tensors. */
static void pack_gptq(const uint8_t *codes, const float *scale, int64_t out, int64_t in, int bits,
                      int64_t group, int32_t *qweight, int32_t *qzeros, uint16_t *scales,
                      int32_t *g_idx)
{
    const int pack = 32 / bits;
    const int64_t ng = in / group;
    memset(qweight, 0, (size_t)(in / pack * out) * 4);
    memset(qzeros, 0, (size_t)(ng * (out / pack)) * 4);
    for (int64_t i = 0; i < in; i++)
        g_idx[i] = (int32_t)(i / group);
    for (int64_t k = 0; k < ng * out; k++)
        scales[k] = swift_fp32_to_fp16(scale[k]);
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < out; o++) /* each thread owns column o of qweight */
        for (int64_t i = 0; i < in; i++)
            qweight[(i / pack) * out + o] |=
                (int32_t)((uint32_t)codes[o * in + i] << (bits * (i % pack)));
    /* zeros: (zero - 1) packed along the output dimension */
    const uint32_t zm1 = (uint32_t)((1 << (bits - 1)) - 1);
    for (int64_t g = 0; g < ng; g++)
        for (int64_t o = 0; o < out; o++)
            qzeros[g * (out / pack) + o / pack] |= (int32_t)(zm1 << (bits * (o % pack)));
}

static int write_json_file(const char *dir, const char *name, json_t *j)
{
    char *p = swift_path_join(dir, name);
    int rc = swift_json_write_file(p, j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    free(p);
    return rc;
}

/* The output being assembled: safetensors entries and the buffers and names they point to. */
struct qout {
    struct swift_st_entry *e;
    void **owned; /* data buffers, freed at the end */
    char **names; /* entry names allocated here (cap slots) */
    size_t n, nown, cap;
    json_t *layers; /* one row per quantized linear */
    double sum_rel; /* sum of the rows' rel_rmse */
    size_t nq;
};

/* How every linear is quantized. */
struct qparams {
    int bits, pack, gptq;
    int64_t group;
    const struct swift_gptq_result *gr; /* --method gptq: the results, by weight name */
    int ngr;
};

static int qout_init(struct qout *q, const struct swift_st_set *set)
{
    for (size_t f = 0; f < set->nfiles; f++)
        q->cap += set->files[f].ntensors * 5;
    q->e = swift_xcalloc(q->cap + 1, sizeof(*q->e));
    q->owned = swift_xcalloc(q->cap + 1, sizeof(*q->owned));
    q->names = swift_xcalloc(q->cap + 1, sizeof(*q->names));
    return 0;
}

static void qout_release(struct qout *q)
{
    for (size_t i = 0; i < q->nown; i++)
        free(q->owned[i]);
    if (q->names)
        for (size_t i = 0; i < q->cap; i++)
            free(q->names[i]);
    free(q->names);
    free(q->owned);
    free(q->e);
    json_decref(q->layers);
}

/* Everything but the linears: fp16, as GPTQ checkpoints store it. */
static int add_f16(struct qout *q, const struct swift_st_tensor *t, const float *w)
{
    uint16_t *h = swift_xmalloc(t->numel * 2 + 2);
    q->owned[q->nown++] = h;
    for (uint64_t k = 0; k < t->numel; k++)
        h[k] = swift_fp32_to_fp16(w[k]);
    q->e[q->n] = (struct swift_st_entry){
        .name = t->name, .dtype = SWIFT_DTYPE_F16, .ndim = t->ndim, .data = h};
    memcpy(q->e[q->n].shape, t->shape, sizeof(q->e[q->n].shape));
    q->n++;
    return 0;
}

/* --method gptq: pack the driver's codes and scales for t into buf (qweight, qzeros, scales,
 * g_idx) and give its summary row. */
static int gptq_row(const struct qparams *p, const struct swift_st_tensor *t, void *const buf[4],
                    json_t **row, double *rel)
{
    int64_t out_f = t->shape[0], in_f = t->shape[1];
    const struct swift_gptq_result *r = NULL;
    for (int k = 0; k < p->ngr && !r; k++)
        if (!strcmp(p->gr[k].name, t->name))
            r = &p->gr[k];
    if (!r || r->out != out_f || r->in != in_f)
        return swift_error(
            "%s: '%s' is not a linear layer of the model's config", t->path, t->name);
    pack_gptq(r->codes, r->scales, out_f, in_f, p->bits, p->group, buf[0], buf[1], buf[2], buf[3]);
    *rel = r->rel_rmse;
    *row = json_pack("{s:s,s:f,s:f,s:f,s:f,s:f,s:i}",
                     "tensor",
                     t->name,
                     "rmse",
                     r->rmse,
                     "rel_rmse",
                     r->rel_rmse,
                     "out_err",
                     r->out_err,
                     "rtn_out_err",
                     r->rtn_out_err,
                     "gptq_loss",
                     r->loss,
                     "dead_inputs",
                     r->dead);
    return 0;
}

/* --method rtn: round w (t's float32 values) to nearest, pack into buf and give the row. */
static int rtn_row(const struct qparams *p, const struct swift_st_tensor *t, const float *w,
                   void *const buf[4], json_t **row, double *rel)
{
    int64_t out_f = t->shape[0], in_f = t->shape[1], ng = in_f / p->group;
    uint8_t *codes = swift_xmalloc((size_t)t->numel);
    float *gs = swift_xmalloc((size_t)(ng * out_f) * sizeof(float));
    float *deq = swift_xmalloc((size_t)t->numel * sizeof(float));
    memcpy(deq, w, (size_t)t->numel * sizeof(float));
    swift_gptq_rtn(deq, (int)out_f, (int)in_f, p->bits, (int)p->group, 1, codes, gs);
    pack_gptq(codes, gs, out_f, in_f, p->bits, p->group, buf[0], buf[1], buf[2], buf[3]);
    double err = 0, ss = 0;
    for (uint64_t k = 0; k < t->numel; k++) {
        double d = (double)deq[k] - w[k];
        err += d * d;
        ss += (double)w[k] * w[k];
    }
    free(codes);
    free(gs);
    free(deq);
    double rmse = sqrt(err / (double)t->numel);
    *rel = rmse / (sqrt(ss / (double)t->numel) + 1e-30);
    *row = json_pack("{s:s,s:f,s:f}", "tensor", t->name, "rmse", rmse, "rel_rmse", *rel);
    return 0;
}

/* NAME.{qweight,qzeros,scales,g_idx} for the linear NAME.weight, pointing at buf. */
static int add_packed(struct qout *q, const struct swift_st_tensor *t, void *const buf[4], int pack,
                      int64_t group)
{
    int64_t out_f = t->shape[0], in_f = t->shape[1], ng = in_f / group;
    size_t base_len = strlen(t->name) - 7; /* without "weight" */
    const char *suffix[] = {"qweight", "qzeros", "scales", "g_idx"};
    enum swift_dtype dts[] = {SWIFT_DTYPE_I32, SWIFT_DTYPE_I32, SWIFT_DTYPE_F16, SWIFT_DTYPE_I32};
    int64_t shapes[][2] = {{in_f / pack, out_f}, {ng, out_f / pack}, {ng, out_f}, {in_f, 0}};
    for (int s = 0; s < 4; s++) {
        size_t len = base_len + strlen(suffix[s]) + 2;
        char *nm = swift_xmalloc(len);
        snprintf(nm, len, "%.*s.%s", (int)base_len, t->name, suffix[s]);
        q->names[q->n] = nm;
        q->e[q->n] = (struct swift_st_entry){
            .name = nm, .dtype = dts[s], .ndim = s == 3 ? 1 : 2, .data = buf[s]};
        q->e[q->n].shape[0] = shapes[s][0];
        q->e[q->n].shape[1] = shapes[s][1];
        q->n++;
    }
    return 0;
}

/* One decoder linear: check its shape, quantize it (w: its float32 values, NULL under GPTQ),
 * add its row and its four packed tensors. ts1: when quantizing began (trace). */
static int add_linear(struct qout *q, const struct qparams *p, const struct swift_st_tensor *t,
                      const float *w, int64_t ts1)
{
    int64_t out_f = t->shape[0], in_f = t->shape[1];
    const int pack = p->pack;
    if (in_f % p->group || in_f % pack || out_f % pack)
        return swift_error("%s: '%s' [%lld,%lld]: in_features must be a multiple of "
                           "--group-size %lld and of %d, out_features of %d",
                           t->path,
                           t->name,
                           (long long)out_f,
                           (long long)in_f,
                           (long long)p->group,
                           pack,
                           pack);
    int64_t ng = in_f / p->group;
    void *buf[4] = {swift_xmalloc((size_t)(in_f / pack * out_f) * 4),
                    swift_xmalloc((size_t)(ng * (out_f / pack)) * 4),
                    swift_xmalloc((size_t)(ng * out_f) * 2),
                    swift_xmalloc((size_t)in_f * 4)};
    for (int s = 0; s < 4; s++)
        q->owned[q->nown++] = buf[s];
    json_t *row = NULL;
    double rel = 0;
    if ((p->gptq ? gptq_row(p, t, buf, &row, &rel) : rtn_row(p, t, w, buf, &row, &rel)) < 0)
        return -1;
    q->sum_rel += rel;
    q->nq++;
    json_array_append_new(q->layers, row);
    if (swift_trace_enabled()) {
        struct swift_targ a[] = {SWIFT_TARG_S("tensor", t->name),
                                 SWIFT_TARG_I("bytes", t->numel * 4),
                                 SWIFT_TARG_D("rel_rmse", rel)};
        swift_trace_span("export", "quantize", ts1, swift_trace_now(), a, 3);
    }
    return add_packed(q, t, buf, pack, p->group);
}

/* One tensor of the model: read it as float32 (not GPTQ's linears: the driver has them) and
 * add it, quantized when it is a decoder linear. */
static int add_tensor(struct qout *q, const struct qparams *p, const struct swift_st_tensor *t)
{
    if (t->dtype != SWIFT_DTYPE_F32 && t->dtype != SWIFT_DTYPE_F16 && t->dtype != SWIFT_DTYPE_BF16)
        return swift_error("%s: tensor '%s' has dtype %s (F32, F16 or BF16 expected)",
                           t->path,
                           t->name,
                           swift_dtype_name(t->dtype));
    int64_t ts0 = swift_trace_now();
    const int linear = is_linear(t->name);
    float *w = NULL; /* freed once converted */
    if (!(p->gptq && linear)) {
        w = swift_xmalloc(t->numel * 4 + 4);
        if (swift_st_tensor_to_f32(t, w) < 0) {
            free(w);
            return -1;
        }
    }
    int64_t ts1 = swift_trace_now();
    if (w && swift_trace_enabled()) {
        struct swift_targ a[] = {SWIFT_TARG_S("tensor", t->name),
                                 SWIFT_TARG_I("bytes", t->end - t->begin)};
        swift_trace_span("export", "read", ts0, ts1, a, 2);
    }
    int rc = linear ? add_linear(q, p, t, w, ts1) : add_f16(q, t, w);
    free(w);
    return rc;
}

/* config.json (the model's, with quantization_config and float16) and quantize_config.json. */
static int write_configs(const struct swift_export_opts *o, const struct qparams *p,
                         const struct swift_hparams *hp, const char *out_dir)
{
    json_t *qc = json_pack("{s:i,s:I,s:f,s:b,s:b,s:b,s:b,s:s,s:s,s:s}",
                           "bits",
                           p->bits,
                           "group_size",
                           (json_int_t)p->group,
                           "damp_percent",
                           p->gptq ? o->damp : 0.01,
                           "desc_act",
                           0,
                           "static_groups",
                           0,
                           "sym",
                           1,
                           "true_sequential",
                           1,
                           "model_file_base_name",
                           "model",
                           "quant_method",
                           "gptq",
                           "checkpoint_format",
                           "gptq");
    json_t *cfg = json_deep_copy(hp->config);
    json_object_set(cfg, "quantization_config", qc);
    json_object_set_new(cfg, "torch_dtype", json_string("float16"));
    if (json_object_get(cfg, "dtype"))
        json_object_set_new(cfg, "dtype", json_string("float16"));
    int wrc = write_json_file(out_dir, "config.json", cfg) < 0 ||
              write_json_file(out_dir, "quantize_config.json", qc) < 0;
    json_decref(cfg);
    json_decref(qc);
    return wrc ? -1 : 0;
}

/* The HF directory: the safetensors shards, the configs, the tokenizer and side files. */
static int write_dir(const struct swift_export_opts *o, const struct qparams *p,
                     const struct swift_hparams *hp, const struct qout *q, const char *out_dir)
{
    if (swift_mkdirs(out_dir, 0755) < 0)
        return -1;
    int64_t tw = swift_trace_now();
    uint64_t shard = o->max_shard_size ? o->max_shard_size : (uint64_t)5 << 30;
    if (swift_safetensors_write_sharded(out_dir, q->e, q->n, shard) < 0)
        return -1;
    if (swift_trace_enabled()) {
        struct swift_targ a[] = {SWIFT_TARG_I("tensors", q->n)};
        swift_trace_span("export", "write", tw, swift_trace_now(), a, 1);
    }
    if (write_configs(o, p, hp, out_dir) < 0)
        return -1;
    return swift_model_copy_side_files(o->model_dir, out_dir);
}

static json_t *summary(const struct swift_export_opts *o, const struct qparams *p,
                       const struct qout *q)
{
    return json_pack("{s:i,s:s,s:s,s:s,s:i,s:I,s:s,s:I,s:f,s:o}",
                     "version",
                     1,
                     "format",
                     "gptq",
                     "output",
                     o->output,
                     "method",
                     p->gptq ? "gptq" : "rtn",
                     "bits",
                     p->bits,
                     "group_size",
                     (json_int_t)p->group,
                     "layout",
                     "gptq",
                     "quantized",
                     (json_int_t)q->nq,
                     "mean_rel_rmse",
                     q->nq ? q->sum_rel / (double)q->nq : 0.0,
                     "layers",
                     json_incref(q->layers));
}

int swift_export_quant(const struct swift_export_opts *o, const char *out_dir)
{
    struct qparams p = {.bits = !strcmp(o->quant, "int8") ? 8 : 4,
                        .group = o->group_size > 0 ? o->group_size : 128,
                        .gptq = o->method && !strcmp(o->method, "gptq")};
    p.pack = 32 / p.bits;
    struct swift_gptq_result *gr = NULL;
    int ngr = 0;
    struct swift_hparams hp;
    if (swift_hparams_load(&hp, o->model_dir) < 0)
        return -1;
    struct swift_st_set set = {0};
    struct qout q = {.layers = json_array()};
    int rc = -1;
    if (p.gptq && swift_export_gptq(o, p.bits, (int)p.group, &gr, &ngr) < 0)
        goto out;
    p.gr = gr;
    p.ngr = ngr;
    if (swift_st_set_open(&set, o->model_dir) < 0 || qout_init(&q, &set) < 0)
        goto out;
    for (size_t f = 0; f < set.nfiles; f++)
        for (size_t i = 0; i < set.files[f].ntensors; i++)
            if (add_tensor(&q, &p, &set.files[f].tensors[i]) < 0)
                goto out;
    if (write_dir(o, &p, &hp, &q, out_dir) < 0)
        goto out;
    swift_export_summary(summary(o, &p, &q));
    rc = 0;
out:
    qout_release(&q);
    swift_st_set_close(&set);
    swift_hparams_release(&hp);
    swift_gptq_results_free(gr, ngr);
    return rc;
}
