/* eval/run_pref — the pref task: preference accuracy and reward margin of a policy against a
 * reference on a pair shard directory (see run.h). A pair sample is two documents,
 * prompt+chosen and prompt+rejected, with mask 1 on the response (docs/formats.md); both rows of
 * a pair go through the model in one batch, and each row's summed log-prob of its response comes
 * from lib/model (swift_model_row_logps), for the policy and for the reference. */
#include "lib/eval/internal.h"
#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/trace.h"
#include "lib/formats/shard.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

enum { S_ACC, S_MARGIN, S_RC, S_RR, S_PC, S_PR, S_RFC, S_RFR, S_N };

struct pref_batch {
    int rows, T, cap;
    int32_t *tok, *tgt, *pos;
    double *pol, *ref; /* (rows) summed log-probs */
    long *cnt;
};

/* Rows 2p and 2p+1 from sample x: tokens, positions, targets (-1 outside the response). */
static void fill_pair(struct pref_batch *pb, int p, const struct swift_sample *x)
{
    int T = pb->T;
    for (int d = 0; d < 2; d++) {
        size_t o = (size_t)(2 * p + d) * T;
        uint32_t start = d ? x->doc_len[0] : 0, L = x->doc_len[d];
        if (L > (uint32_t)T)
            L = (uint32_t)T; /* keep the beginning, as training truncates */
        for (int t = 0; t < T; t++) {
            int in = (uint32_t)t < L;
            pb->tok[o + t] = in ? (int32_t)x->ids[start + t] : 0;
            pb->pos[o + t] = in ? t : t - (int32_t)L;
            pb->tgt[o + t] = in && (uint32_t)t + 1 < L && x->mask[start + t + 1]
                                 ? (int32_t)x->ids[start + t + 1]
                                 : -1;
        }
    }
}

static void batch_grow(struct pref_batch *pb, int rows, int T)
{
    size_t need = (size_t)rows * T;
    if (need > (size_t)pb->cap) {
        free(pb->tok);
        free(pb->tgt);
        free(pb->pos);
        pb->tok = swift_xmalloc(need * sizeof(int32_t));
        pb->tgt = swift_xmalloc(need * sizeof(int32_t));
        pb->pos = swift_xmalloc(need * sizeof(int32_t));
        pb->cap = (int)need;
    }
    free(pb->pol);
    free(pb->cnt);
    pb->pol = swift_xcalloc((size_t)rows * 2, sizeof(double));
    pb->ref = pb->pol + rows;
    pb->cnt = swift_xcalloc((size_t)rows, sizeof(long));
    pb->rows = rows;
    pb->T = T;
}

static void batch_free(struct pref_batch *pb)
{
    free(pb->tok);
    free(pb->tgt);
    free(pb->pos);
    free(pb->pol);
    free(pb->cnt);
}

/* The policy's and the reference's log-probs of the batch's rows (the reference: --ref-model, else
 * the model with its adapters switched off), and the pairs' sums into s. */
static int score_batch(struct swift_eval_runner *r, struct pref_batch *pb, long *bi, double *s)
{
    struct swift_batch b = {
        .B = pb->rows, .T = pb->T, .tokens = pb->tok, .targets = pb->tgt, .pos = pb->pos};
    int64_t t0 = swift_trace_now();
    double w0 = swift_eval_now();
    if (swift_model_row_logps(&r->m, &b, pb->pol, pb->cnt) < 0)
        return -1;
    swift_eval_batch_span("policy", t0, *bi, pb->rows / 2, (long)pb->rows * pb->T);
    t0 = swift_trace_now();
    struct swift_model *rm = r->have_ref ? &r->ref : &r->m;
    rm->lora_off = !r->have_ref;
    int rc = swift_model_row_logps(rm, &b, pb->ref, NULL);
    rm->lora_off = 0;
    if (rc < 0)
        return -1;
    swift_eval_batch_span("reference", t0, (*bi)++, pb->rows / 2, (long)pb->rows * pb->T);
    r->fwd_s += swift_eval_now() - w0;
    r->tokens += 2L * pb->rows * pb->T;
    double beta = r->o->beta;
    for (int p = 0; p < pb->rows / 2; p++) {
        double rc_ = beta * (pb->pol[2 * p] - pb->ref[2 * p]);
        double rr_ = beta * (pb->pol[2 * p + 1] - pb->ref[2 * p + 1]);
        s[S_ACC] += rc_ > rr_;
        s[S_MARGIN] += rc_ - rr_;
        s[S_RC] += rc_;
        s[S_RR] += rr_;
        s[S_PC] += pb->pol[2 * p];
        s[S_PR] += pb->pol[2 * p + 1];
        s[S_RFC] += pb->ref[2 * p];
        s[S_RFR] += pb->ref[2 * p + 1];
    }
    return 0;
}

/* Samples [i0, i1) of s as one batch (T: the longest document, at most cap). */
static int run_range(struct swift_eval_runner *r, struct swift_shards *sh, uint64_t i0, uint64_t i1,
                     int cap, struct pref_batch *pb, long *bi, double *s)
{
    int P = (int)(i1 - i0), T = 1;
    for (uint64_t i = i0; i < i1; i++) {
        struct swift_sample x;
        if (swift_shards_get(sh, i, &x) < 0)
            return -1;
        if (x.n_docs != 2)
            return swift_error("%s: sample %llu is not a pair (%u documents, a pair has two: "
                               "prompt+chosen, prompt+rejected)",
                               r->o->dataset,
                               (unsigned long long)i,
                               x.n_docs);
        for (int d = 0; d < 2; d++)
            if ((int)x.doc_len[d] > T)
                T = (int)x.doc_len[d];
    }
    if (T > cap)
        T = cap;
    batch_grow(pb, 2 * P, T);
    for (uint64_t i = i0; i < i1; i++) {
        struct swift_sample x;
        if (swift_shards_get(sh, i, &x) < 0)
            return -1;
        fill_pair(pb, (int)(i - i0), &x);
    }
    for (int row = 0; row < 2 * P; row++) {
        long n = 0;
        for (int t = 0; t < T; t++)
            n += pb->tgt[(size_t)row * T + t] >= 0;
        if (!n)
            return swift_error("%s: sample %llu has no response tokens in its %s document",
                               r->o->dataset,
                               (unsigned long long)(i0 + (uint64_t)(row / 2)),
                               row % 2 ? "rejected" : "chosen");
    }
    return score_batch(r, pb, bi, s);
}

int swift_eval_run_pref(struct swift_eval_runner *r, json_t *rec, long *n_out)
{
    const struct swift_eval_opts *o = r->o;
    struct swift_shards *sh;
    if (swift_shards_open(&sh, o->dataset, 0) < 0)
        return -1;
    uint64_t ns = swift_shards_count(sh);
    if (o->limit > 0 && (uint64_t)o->limit < ns)
        ns = (uint64_t)o->limit;
    r->prog.total = ns;
    int cap = o->max_length;
    uint64_t maxlen = swift_shards_index(sh)->max_length;
    if (maxlen && maxlen < (uint64_t)cap)
        cap = (int)maxlen;
    /* --batch-size counts sequences: a batch holds half as many pairs (at least one) */
    uint64_t per = o->batch_size >= 2 ? (uint64_t)o->batch_size / 2 : 1;
    struct pref_batch pb = {0};
    double s[S_N] = {0};
    long bi = 0;
    int rc = 0;
    for (uint64_t i = 0; i < ns && rc == 0; i += per) {
        uint64_t i1 = i + per < ns ? i + per : ns;
        rc = run_range(r, sh, i, i1, cap, &pb, &bi, s);
        swift_progress_update(&r->prog, i1);
    }
    batch_free(&pb);
    swift_shards_close(sh);
    if (rc < 0)
        return -1;
    if (ns == 0)
        return swift_error("'%s': no pairs to evaluate", o->dataset);
    double n = (double)ns;
    json_t *m = json_object_get(rec, "metrics");
    json_object_set_new(m, "accuracy", json_real(s[S_ACC] / n));
    json_object_set_new(m, "margin", json_real(s[S_MARGIN] / n));
    json_object_set_new(m, "rewards/chosen", json_real(s[S_RC] / n));
    json_object_set_new(m, "rewards/rejected", json_real(s[S_RR] / n));
    json_object_set_new(m, "logps/chosen", json_real(s[S_PC] / n));
    json_object_set_new(m, "logps/rejected", json_real(s[S_PR] / n));
    json_object_set_new(m, "ref_logps/chosen", json_real(s[S_RFC] / n));
    json_object_set_new(m, "ref_logps/rejected", json_real(s[S_RFR] / n));
    json_object_set_new(m, "pairs", json_integer((json_int_t)ns));
    *n_out = (long)ns;
    return 0;
}
