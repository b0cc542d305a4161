/* eval/run_loss — the loss and ppl tasks: token-level cross-entropy over the trained tokens of
 * a shard directory or of raw rows rendered as training renders them (see run.h). */
#include "lib/eval/internal.h"
#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/formats/shard.h"
#include "lib/core/trace.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

struct loss_acc {
    double sum;
    long count, correct;
    int V;
};

static void loss_cb(void *ctx, const struct swift_eval_feed *f, int pos, const float *logits)
{
    struct loss_acc *a = ctx;
    int target = f->ids[pos + 1];
    a->sum -= swift_logprob(logits, a->V, target);
    int best = 0;
    for (int v = 1; v < a->V; v++)
        if (logits[v] > logits[best])
            best = v;
    a->correct += best == target;
    a->count++;
}

/* One document of a loss dataset: ids and wantm (wantm[t] = 1 when ids[t+1] is trained). */
struct doc {
    struct swift_eval_ids ids;
    uint8_t *wantm;
};

static int loss_batch(struct swift_eval_runner *r, struct doc *d, int nd, struct loss_acc *acc,
                      long *bi)
{
    struct swift_eval_feed *f = swift_xcalloc((size_t)(nd ? nd : 1), sizeof(*f));
    int need = 1;
    for (int i = 0; i < nd; i++)
        if (d[i].ids.n > need)
            need = d[i].ids.n;
    if (swift_eval_kv_ensure(r, r->o->batch_size, need) < 0) {
        free(f);
        return -1;
    }
    swift_kv_reset(&r->kv, -1);
    long toks = 0;
    for (int i = 0; i < nd; i++) {
        f[i] = (struct swift_eval_feed){
            .row = i, .ids = d[i].ids.v, .n = d[i].ids.n, .wantm = d[i].wantm};
        toks += d[i].ids.n;
    }
    int64_t t0 = swift_trace_now();
    int rc = swift_eval_feed_all(r, f, nd, loss_cb, acc);
    swift_eval_batch_span("forward", t0, (*bi)++, nd, toks);
    free(f);
    return rc;
}

static void docs_free(struct doc *d, int n)
{
    for (int i = 0; i < n; i++) {
        free(d[i].ids.v);
        free(d[i].wantm);
        d[i] = (struct doc){0};
    }
}

/* Append a document (copying ids and the trained flags of its targets). */
static int doc_make(struct doc *d, const uint32_t *ids, const uint8_t *mask, int n, int maxlen)
{
    if (n > maxlen)
        n = maxlen; /* keep the beginning, as training truncates */
    d->ids.v = swift_xmalloc((size_t)(n ? n : 1) * sizeof(int32_t));
    d->wantm = swift_xcalloc((size_t)(n ? n : 1), 1);
    d->ids.n = n;
    for (int t = 0; t < n; t++) {
        d->ids.v[t] = (int32_t)ids[t];
        d->wantm[t] = t + 1 < n && (mask ? mask[t + 1] : 1);
    }
    return 0;
}

static int loss_rows(struct swift_eval_runner *r, struct doc *d, int *nd, struct loss_acc *acc,
                     long *bi, long *samples)
{
    const struct swift_eval_opts *o = r->o;
    struct swift_eval_rows *rows;
    if (swift_eval_rows_open(&rows, r->pr, o->dataset) < 0)
        return -1;
    r->prog.total = o->limit > 0 ? (uint64_t)o->limit : 0; /* rows are read as they come */
    int rc = 0, k;
    const uint32_t *ids;
    const uint8_t *mask;
    size_t n;
    while (rc == 0 && (o->limit <= 0 || *samples < o->limit) &&
           (k = swift_eval_rows_next(rows, &ids, &mask, &n)) != 0) {
        if (k < 0) {
            rc = -1;
            break;
        }
        (*samples)++;
        swift_progress_update(&r->prog, (uint64_t)*samples);
        rc = doc_make(&d[(*nd)++], ids, mask, (int)n, o->max_length);
        if (rc == 0 && *nd == o->batch_size) {
            rc = loss_batch(r, d, *nd, acc, bi);
            docs_free(d, *nd);
            *nd = 0;
        }
    }
    swift_eval_rows_close(rows);
    return rc;
}

int swift_eval_run_loss(struct swift_eval_runner *r, json_t *rec, long *n_out)
{
    const struct swift_eval_opts *o = r->o;
    struct loss_acc acc = {.V = r->V};
    int B = o->batch_size, cap = o->max_length;
    struct doc *d = swift_xcalloc((size_t)B, sizeof(*d));
    int nd = 0, rc = 0;
    long samples = 0, bi = 0;
    char *index = swift_path_join(o->dataset, "index.json");
    int shards = index && swift_is_dir(o->dataset);
    free(index);
    if (shards) {
        struct swift_shards *s;
        if (swift_shards_open(&s, o->dataset, 0) < 0) {
            free(d);
            return -1;
        }
        uint64_t ns = swift_shards_count(s);
        if (o->limit > 0 && (uint64_t)o->limit < ns)
            ns = (uint64_t)o->limit;
        r->prog.total = ns;
        uint64_t maxlen = swift_shards_index(s)->max_length;
        if (maxlen && maxlen < (uint64_t)cap)
            cap = (int)maxlen;
        {
            for (uint64_t i = 0; i < ns && rc == 0; i++) {
                struct swift_sample x;
                if ((rc = swift_shards_get(s, i, &x)) < 0)
                    break;
                uint32_t off = 0;
                for (uint32_t k = 0; k < x.n_docs && rc == 0; k++) {
                    rc = doc_make(&d[nd++], x.ids + off, x.mask + off, (int)x.doc_len[k], cap);
                    off += x.doc_len[k];
                    if (rc == 0 && nd == B) {
                        rc = loss_batch(r, d, nd, &acc, &bi);
                        docs_free(d, nd);
                        nd = 0;
                    }
                }
                samples++;
                swift_progress_update(&r->prog, (uint64_t)samples);
            }
        }
        swift_shards_close(s);
    } else {
        /* raw rows (JSONL, JSON, CSV, text) through swift-preprocess's dataset and template
         * code: the same ids and loss mask training would see */
        rc = loss_rows(r, d, &nd, &acc, &bi, &samples);
    }
    if (rc == 0 && nd > 0)
        rc = loss_batch(r, d, nd, &acc, &bi);
    docs_free(d, nd);
    free(d);
    if (rc < 0)
        return -1;
    if (swift_eval_loss_metrics(r, rec, acc.sum, acc.count, acc.correct) < 0)
        return -1;
    *n_out = samples;
    return 0;
}

int swift_eval_loss_metrics(const struct swift_eval_runner *r, json_t *rec, double sum, long count,
                            long correct)
{
    const struct swift_eval_opts *o = r->o;
    if (count == 0)
        return swift_error("'%s': no trained tokens to evaluate", o->dataset);
    double loss = sum / (double)count;
    json_t *m = json_object_get(rec, "metrics");
    if (o->task == SWIFT_EVAL_PPL)
        json_object_set_new(m, "ppl", json_real(exp(loss)));
    json_object_set_new(m, "loss", json_real(loss));
    if (o->task != SWIFT_EVAL_PPL)
        json_object_set_new(m, "ppl", json_real(exp(loss)));
    json_object_set_new(m, "token_acc", json_real((double)correct / (double)count));
    json_object_set_new(m, "tokens", json_integer(count));
    return 0;
}
