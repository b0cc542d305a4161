/* export/gptq — `--method gptq`: run calibration rows through the model one decoder layer at a
 * time and quantize each linear layer with GPTQ (lib/export/gptq_solve.h) on the Hessian of its
 * inputs, as auto-gptq does it (true sequential):
 *
 *   x = embeddings of every calibration row
 *   for each layer, for each group of linears sharing an input, in order
 *   {q,k,v}, {o}, {gate,up}, {down}:
 *       run the layer on every row (the layer's earlier groups already quantized) and
 *       accumulate H = sum x x^T of the group's input over the rows' real tokens;
 *       quantize each linear of the group with it (its weights replaced by the result)
 *   x = the fully quantized layer's output: the next layer's calibration input
 *
 * For each linear it also reports the relative output error tr(D H D^T)/tr(W H W^T) of GPTQ and,
 * on the same H, of round-to-nearest: the figure that says what calibration bought. */
#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/export/export.h"
#include "lib/export/internal.h"
#include "lib/export/gptq_solve.h"
#include "lib/model/model.h"
#include "lib/core/progress.h"
#include "lib/formats/quant.h"
#include "lib/formats/shard.h"
#include "lib/core/trace.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

static const int subsets[][3] = {{SWIFT_LIN_Q, SWIFT_LIN_K, SWIFT_LIN_V},
                                 {SWIFT_LIN_O, -1, -1},
                                 {SWIFT_LIN_GATE, SWIFT_LIN_UP, -1},
                                 {SWIFT_LIN_DOWN, -1, -1}};

struct calib {
    int n, T;           /* rows, padded length */
    int *len;           /* real tokens per row */
    uint64_t *row;      /* the row's index in the shards */
    int32_t *tok, *pos; /* (n, T) */
};

static void calib_free(struct calib *c)
{
    free(c->len);
    free(c->row);
    free(c->tok);
    free(c->pos);
}

/* Calibration row i as a batch of one (targets are not read by the layer forward). */
static struct swift_batch row_batch(const struct calib *c, int i)
{
    return (struct swift_batch){
        .B = 1, .T = c->T, .tokens = c->tok + (size_t)i * c->T, .pos = c->pos + (size_t)i * c->T};
}

/* Rows evenly spaced over the shards, truncated to seq_len, padded to the longest. */
static int calib_load(struct calib *c, const char *dir, long want, long seq_len)
{
    struct swift_shards *sh = NULL;
    memset(c, 0, sizeof(*c));
    if (swift_shards_open(&sh, dir, 0) < 0)
        return -1;
    uint64_t count = swift_shards_count(sh);
    int rc = -1;
    if (count == 0) {
        swift_error("%s: the calibration shards hold no rows", dir);
        goto out;
    }
    c->n = want < (long)count ? (int)want : (int)count;
    c->len = swift_xcalloc((size_t)c->n, sizeof(int));
    c->row = swift_xcalloc((size_t)c->n, sizeof(uint64_t));
    for (int i = 0; i < c->n; i++) {
        struct swift_sample s;
        c->row[i] = (uint64_t)i * count / (uint64_t)c->n;
        if (swift_shards_get(sh, c->row[i], &s) < 0)
            goto out;
        c->len[i] = s.len < (uint32_t)seq_len ? (int)s.len : (int)seq_len;
        if (c->len[i] > c->T)
            c->T = c->len[i];
    }
    if (c->T == 0) {
        swift_error("%s: the calibration rows are empty", dir);
        goto out;
    }
    c->tok = swift_xcalloc((size_t)c->n * c->T, sizeof(int32_t));
    c->pos = swift_xcalloc((size_t)c->n * c->T, sizeof(int32_t));
    for (int i = 0; i < c->n; i++) {
        struct swift_sample s;
        if (swift_shards_get(sh, c->row[i], &s) < 0)
            goto out;
        int32_t *tok = c->tok + (size_t)i * c->T, *pos = c->pos + (size_t)i * c->T;
        int t = 0;
        /* positions restart at every packed document, as in training */
        for (uint32_t d = 0; d < s.n_docs && t < c->len[i]; d++)
            for (uint32_t k = 0; k < s.doc_len[d] && t < c->len[i]; k++, t++) {
                tok[t] = (int32_t)s.ids[t];
                pos[t] = (int32_t)k;
            }
        for (int k = 0; t < c->T; t++, k++) /* padding: a document of its own, never counted */
            pos[t] = k;
    }
    rc = 0;
out:
    swift_shards_close(sh);
    if (rc < 0)
        calib_free(c);
    return rc;
}

void swift_gptq_results_free(struct swift_gptq_result *r, int n)
{
    for (int i = 0; r && i < n; i++) {
        free(r[i].name);
        free(r[i].codes);
        free(r[i].scales);
    }
    free(r);
}

static int quantize_linear(struct swift_linear *L, const float *H, int bits, int group,
                           const struct swift_export_opts *o, struct swift_gptq_result *r)
{
    size_t nw = (size_t)L->out * L->in, nh = (size_t)L->in * L->in;
    float *orig = swift_xmalloc(nw * sizeof(float)), *rtn = swift_xmalloc(nw * sizeof(float));
    float *Hc = swift_xmalloc(nh * sizeof(float));
    uint8_t *rcodes = swift_xmalloc(nw);
    float *rscales = swift_xmalloc((size_t)(L->in / group) * L->out * sizeof(float));
    r->codes = swift_xmalloc(nw);
    r->scales = swift_xmalloc((size_t)(L->in / group) * L->out * sizeof(float));
    r->name = swift_asprintf("%s.weight", L->name);
    int rc = -1;
    r->out = L->out;
    r->in = L->in;
    memcpy(orig, L->w, nw * sizeof(float));
    memcpy(rtn, L->w, nw * sizeof(float));
    memcpy(Hc, H, nh * sizeof(float));
    int64_t t0 = swift_trace_now();
    struct swift_gptq_params p = {
        .bits = bits, .group = group, .block = 128, .damp = (float)o->damp};
    struct swift_gptq_stats st;
    if (swift_gptq_quantize(L->w, Hc, L->out, L->in, &p, r->codes, r->scales, &st, r->name) < 0)
        goto out;
    r->loss = st.loss;
    r->dead = st.dead_columns;
    r->out_err = swift_gptq_output_error(orig, L->w, H, L->out, L->in);
    swift_gptq_rtn(rtn, L->out, L->in, bits, group, 1, rcodes, rscales);
    r->rtn_out_err = swift_gptq_output_error(orig, rtn, H, L->out, L->in);
    /* weight RMSE of what a loader sees: codes with the fp16 scales */
    const int zero = 1 << (bits - 1);
    double e = 0, ss = 0;
    for (int oo = 0; oo < L->out; oo++)
        for (int i = 0; i < L->in; i++) {
            size_t k = (size_t)oo * L->in + i;
            float s = swift_fp16_to_fp32(
                swift_fp32_to_fp16(r->scales[(size_t)(i / group) * L->out + oo]));
            double d = (double)s * (r->codes[k] - zero) - orig[k];
            e += d * d;
            ss += (double)orig[k] * orig[k];
        }
    r->rmse = sqrt(e / (double)nw);
    r->rel_rmse = r->rmse / (sqrt(ss / (double)nw) + 1e-30);
    if (swift_trace_enabled()) {
        struct swift_targ a[] = {SWIFT_TARG_S("tensor", r->name),
                                 SWIFT_TARG_I("bytes", (int64_t)(nw * 4)),
                                 SWIFT_TARG_S("method", "gptq"),
                                 SWIFT_TARG_D("out_err", r->out_err),
                                 SWIFT_TARG_D("rtn_out_err", r->rtn_out_err)};
        swift_trace_span("export", "quantize", t0, swift_trace_now(), a, 5);
    }
    rc = 0;
out:
    free(orig);
    free(rtn);
    free(Hc);
    free(rcodes);
    free(rscales);
    return rc;
}

/* The calibration pass: every row's hidden state at the current layer's input, and H scratch. */
struct pass {
    struct swift_model *m;
    const struct calib *c;
    float *x;     /* (n, T, hidden) */
    float *H;     /* (maxin, maxin) */
    size_t rowsz; /* T * hidden */
    long tokens;  /* real tokens over the rows */
};

/* x = the embeddings of every calibration row (its ids checked against the vocabulary). */
static int pass_embed(struct pass *p, const char *calib_dir)
{
    const struct calib *c = p->c;
    const int V = p->m->cfg.vocab_size;
    for (int i = 0; i < c->n; i++) {
        struct swift_batch b = row_batch(c, i);
        for (int t = 0; t < c->len[i]; t++)
            if (b.tokens[t] >= V)
                return swift_error("%s: calibration row %llu, token %d: id %d is outside the "
                                   "model's vocabulary (%d); were the shards made with its "
                                   "tokenizer?",
                                   calib_dir,
                                   (unsigned long long)c->row[i],
                                   t,
                                   b.tokens[t],
                                   V);
        if (swift_model_embed(p->m, &b, p->x + (size_t)i * p->rowsz) < 0)
            return -1;
        p->tokens += c->len[i];
    }
    return 0;
}

/* GPTQ of layer l's linears, group by group (subsets), each on the Hessian of its input with the
 * layer's earlier groups already quantized; then x = the quantized layer's output. Results go
 * to res[*nres...] (*nres counts a failed one too, so that it is freed). Returns 0 or -1. */
static int pass_layer(struct pass *p, int l, int bits, int group, const struct swift_export_opts *o,
                      struct swift_gptq_result *res, int *nres)
{
    struct swift_model *m = p->m;
    const struct calib *c = p->c;
    for (int s = 0; s < 4; s++) {
        const int k0 = subsets[s][0];
        const int in = m->layers[l].lin[k0].in;
        memset(p->H, 0, (size_t)in * in * sizeof(float));
        int64_t ct0 = swift_trace_now();
        for (int i = 0; i < c->n; i++) {
            struct swift_batch b = row_batch(c, i);
            const float *inp[SWIFT_LIN_COUNT];
            float *xi = p->x + (size_t)i * p->rowsz;
            swift_model_layer_forward(m, l, &b, xi, NULL, inp);
            swift_gptq_hessian_add(p->H, inp[k0], c->len[i], in);
        }
        if (swift_trace_enabled()) {
            struct swift_targ a[] = {SWIFT_TARG_I("layer", l),
                                     SWIFT_TARG_S("input", m->layers[l].lin[k0].name),
                                     SWIFT_TARG_I("tokens", p->tokens)};
            swift_trace_span("export", "calibrate", ct0, swift_trace_now(), a, 3);
        }
        for (int j = 0; j < 3 && subsets[s][j] >= 0; j++) {
            struct swift_linear *lin = &m->layers[l].lin[subsets[s][j]];
            int rc = quantize_linear(lin, p->H, bits, group, o, &res[*nres]);
            (*nres)++;
            if (rc < 0)
                return -1;
        }
    }
    /* the quantized layer's output is the next layer's input */
    for (int i = 0; i < c->n; i++) {
        struct swift_batch b = row_batch(c, i);
        const float *inp[SWIFT_LIN_COUNT];
        float *xi = p->x + (size_t)i * p->rowsz;
        swift_model_layer_forward(m, l, &b, xi, xi, inp);
    }
    return 0;
}

/* Every linear's in_features must be a multiple of the group size. */
static int check_groups(const struct swift_model *m, const char *model_dir, int group)
{
    for (int l = 0; l < m->cfg.num_layers; l++)
        for (int k = 0; k < SWIFT_LIN_COUNT; k++) {
            const struct swift_linear *lin = &m->layers[l].lin[k];
            if (lin->in % group)
                return swift_error(
                    "%s: '%s' [%d,%d]: in_features is not a multiple of --group-size %d",
                    model_dir,
                    lin->name,
                    lin->out,
                    lin->in,
                    group);
        }
    return 0;
}

int swift_export_gptq(const struct swift_export_opts *o, int bits, int group,
                      struct swift_gptq_result **out, int *nout)
{
    struct swift_model m;
    struct calib c;
    struct swift_gptq_result *res = NULL;
    struct pass p = {.m = &m, .c = &c};
    int nres = 0, rc = -1;
    *out = NULL;
    *nout = 0;
    if (calib_load(&c,
                   o->calib,
                   o->calib_samples > 0 ? o->calib_samples : 128,
                   o->calib_seq_len > 0 ? o->calib_seq_len : 512) < 0)
        return -1;
    if (swift_model_load(&m, o->model_dir, &swift_cpu_ops, 1) < 0) {
        calib_free(&c);
        return -1;
    }
    const struct swift_model_config *cfg = &m.cfg;
    const int L = cfg->num_layers, Hd = cfg->hidden_size;
    int maxin = Hd > cfg->intermediate_size ? Hd : cfg->intermediate_size;
    if (cfg->num_heads * cfg->head_dim > maxin)
        maxin = cfg->num_heads * cfg->head_dim;
    if (check_groups(&m, o->model_dir, group) < 0)
        goto out;
    m.act_ckpt = 1;
    if (swift_model_reserve(&m, 1, c.T) < 0)
        goto out;
    p.rowsz = (size_t)c.T * Hd;
    p.x = swift_xmalloc((size_t)c.n * p.rowsz * sizeof(float));
    p.H = swift_xmalloc((size_t)maxin * maxin * sizeof(float));
    res = swift_xcalloc((size_t)L * SWIFT_LIN_COUNT, sizeof(*res));
    if (pass_embed(&p, o->calib) < 0)
        goto out;
    struct swift_progress pr;
    swift_progress_start(&pr, "gptq", (uint64_t)L, "layers", 0);
    for (int l = 0; l < L; l++) {
        int64_t lt0 = swift_trace_now();
        if (pass_layer(&p, l, bits, group, o, res, &nres) < 0) {
            swift_progress_stop(&pr);
            goto out;
        }
        if (swift_trace_enabled()) {
            struct swift_targ a[] = {SWIFT_TARG_I("layer", l), SWIFT_TARG_I("rows", c.n)};
            swift_trace_span("export", "gptq_layer", lt0, swift_trace_now(), a, 2);
        }
        swift_progress_update(&pr, (uint64_t)l + 1);
    }
    swift_progress_stop(&pr);
    *out = res;
    *nout = nres;
    res = NULL;
    rc = 0;
out:
    swift_gptq_results_free(res, nres);
    free(p.x);
    free(p.H);
    swift_model_free(&m);
    calib_free(&c);
    return rc;
}
