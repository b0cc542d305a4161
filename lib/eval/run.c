/* swift-eval's runner: model + tokenizer + dataset -> task -> record (see run.h). */
#include "lib/eval/run.h"
#include "lib/core/error.h"
#include "lib/eval/eval.h"
#include "lib/eval/generate.h"
#include "lib/eval/kv.h"
#include "lib/core/fileio.h"
#include "lib/core/jsonl.h"
#include "kernels/ops.h"
#include "lib/eval/prompt.h"
#include "lib/model/lora.h"
#include "lib/model/model.h"
#include "lib/formats/shard.h"
#include "lib/preprocess/tokenizer.h"
#include "lib/core/trace.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

#define MAX_WANT 256 /* logits rows per forward call */

void swift_eval_opts_init(struct swift_eval_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->task = -1;
    o->max_new_tokens = 256;
    o->temperature = 0.0;
    o->top_p = 1.0;
    o->seed = 42;
    o->batch_size = 8;
    o->max_length = 0;
    o->max_drop = 0.01;
}

struct ids {
    int32_t *v;
    int n;
};

struct run {
    const struct swift_eval_opts *o;
    struct swift_model m;
    int have_model;
    struct swift_tokenizer *tok;
    struct swift_tok_state *st;
    struct swift_kv kv;
    int have_kv;
    int V;
    float *logits; /* MAX_WANT x V */
    int32_t eos[8];
    int neos;
    struct swift_eval_prompter *pr;
    /* counters for the record */
    long tokens;  /* tokens run through the model */
    double fwd_s; /* time in forward calls (scoring) */
    struct swift_gen_stats gen;
};

static double now_s(void)
{
    return (double)swift_trace_now() * 1e-9;
}

static int encode(struct run *r, const char *text, struct ids *out)
{
    struct swift_tokens t = {0};
    if (swift_tokenizer_encode(r->st, text, strlen(text), SWIFT_TOK_PARSE_SPECIAL, &t) < 0)
        return -1;
    out->v = malloc((t.n ? t.n : 1) * sizeof(int32_t));
    if (!out->v) {
        swift_tokens_release(&t);
        return swift_error("out of memory");
    }
    for (size_t i = 0; i < t.n; i++)
        out->v[i] = (int32_t)t.ids[i];
    out->n = (int)t.n;
    swift_tokens_release(&t);
    return 0;
}

static void add_eos(struct run *r, long id);

static int to_ids(const uint32_t *u, size_t n, struct ids *out)
{
    out->v = malloc((n ? n : 1) * sizeof(int32_t));
    if (!out->v)
        return swift_error("out of memory");
    for (size_t i = 0; i < n; i++)
        out->v[i] = (int32_t)u[i];
    out->n = (int)n;
    return 0;
}

/* A prompt as the model sees it: plain text, or with --template the user turn followed by the
 * assistant header; the template's end-of-turn id joins the stop ids. */
static int encode_prompt(struct run *r, const char *text, struct ids *out)
{
    const uint32_t *u;
    size_t n;
    long stop;
    if (swift_eval_prompter_encode(r->pr, text, &u, &n, &stop) < 0)
        return -1;
    if (stop >= 0)
        add_eos(r, stop);
    return to_ids(u, n, out);
}

/* ---- feeding sequences through the cache in chunks ---- */

struct feed {
    int row;
    const int32_t *ids;
    int n;
    int want_from;        /* logits wanted for positions >= want_from ... */
    const uint8_t *wantm; /* ... or, when set, where wantm[pos] */
    int tag;
};
typedef void (*logit_fn)(void *ctx, const struct feed *f, int pos, const float *logits);

static int feed_all(struct run *r, const struct feed *f, int nf, logit_fn fn, void *ctx)
{
    struct swift_kv *kv = &r->kv;
    int M = kv->max_tokens;
    int32_t *tok = malloc((size_t)M * sizeof(int32_t));
    int *rowof = malloc((size_t)M * sizeof(int)), *want = malloc(MAX_WANT * sizeof(int));
    int *wf = malloc(MAX_WANT * sizeof(int)), *wp = malloc(MAX_WANT * sizeof(int));
    int rc = 0;
    if (!tok || !rowof || !want || !wf || !wp) {
        rc = swift_error("out of memory");
        goto out;
    }
    int fi = 0, pi = 0;
    while (fi < nf && rc == 0) {
        int N = 0, nw = 0;
        while (fi < nf && N < M && nw < MAX_WANT) {
            const struct feed *x = &f[fi];
            if (pi < x->n) {
                tok[N] = x->ids[pi];
                rowof[N] = x->row;
                if (x->wantm ? x->wantm[pi] != 0 : pi >= x->want_from) {
                    want[nw] = N;
                    wf[nw] = fi;
                    wp[nw++] = pi;
                }
                N++;
                pi++;
            }
            if (pi >= x->n) {
                fi++;
                pi = 0;
            }
        }
        if (N == 0)
            continue;
        double t0 = now_s();
        if (swift_kv_forward(kv, tok, rowof, N, want, nw, r->logits) < 0) {
            rc = -1;
            break;
        }
        r->fwd_s += now_s() - t0;
        r->tokens += N;
        for (int w = 0; w < nw; w++)
            fn(ctx, &f[wf[w]], wp[w], r->logits + (size_t)w * r->V);
    }
out:
    free(tok);
    free(rowof);
    free(want);
    free(wf);
    free(wp);
    return rc;
}

/* A cache of at least rows x need tokens. It grows only (in steps of 64 tokens, up to
 * --max-length), so its size follows the longest batch seen, not --max-length. */
static int kv_ensure(struct run *r, int rows, int need)
{
    if (r->have_kv && r->kv.rows >= rows && r->kv.cap >= need)
        return 0;
    int cap = (need + 63) / 64 * 64;
    if (r->have_kv && r->kv.cap > cap)
        cap = r->kv.cap;
    if (cap > r->o->max_length)
        cap = r->o->max_length > need ? r->o->max_length : need;
    if (r->have_kv)
        swift_kv_release(&r->kv);
    r->have_kv = 0;
    long mt = (long)rows * cap;
    if (mt > 8192)
        mt = 8192;
    if (mt < cap)
        mt = cap;
    if (swift_kv_init(&r->kv, &r->m, rows, cap, (int)mt) < 0)
        return -1;
    r->have_kv = 1;
    return 0;
}

static void batch_span(const char *name, int64_t t0, long batch, long items, long tokens)
{
    if (!swift_trace_enabled())
        return;
    struct swift_targ a[3] = {
        SWIFT_TARG_I("batch", batch), SWIFT_TARG_I("items", items), SWIFT_TARG_I("tokens", tokens)};
    int64_t t1 = swift_trace_now();
    swift_trace_span("eval", name, t0, t1, a, 3);
    if (t1 > t0)
        swift_trace_counter("tokens/s", (double)tokens / ((double)(t1 - t0) * 1e-9));
}

/* ---- loss / ppl ---- */

struct loss_acc {
    double sum;
    long count, correct;
    int V;
};

static void loss_cb(void *ctx, const struct feed *f, int pos, const float *logits)
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
    struct ids ids;
    uint8_t *wantm;
};

static int loss_batch(struct run *r, struct doc *d, int nd, struct loss_acc *acc, long *bi)
{
    struct feed *f = calloc((size_t)(nd ? nd : 1), sizeof(*f));
    if (!f)
        return swift_error("out of memory");
    int need = 1;
    for (int i = 0; i < nd; i++)
        if (d[i].ids.n > need)
            need = d[i].ids.n;
    if (kv_ensure(r, r->o->batch_size, need) < 0) {
        free(f);
        return -1;
    }
    swift_kv_reset(&r->kv, -1);
    long toks = 0;
    for (int i = 0; i < nd; i++) {
        f[i] = (struct feed){.row = i, .ids = d[i].ids.v, .n = d[i].ids.n, .wantm = d[i].wantm};
        toks += d[i].ids.n;
    }
    int64_t t0 = swift_trace_now();
    int rc = feed_all(r, f, nd, loss_cb, acc);
    batch_span("forward", t0, (*bi)++, nd, toks);
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
    d->ids.v = malloc((size_t)(n ? n : 1) * sizeof(int32_t));
    d->wantm = calloc((size_t)(n ? n : 1), 1);
    if (!d->ids.v || !d->wantm)
        return swift_error("out of memory");
    d->ids.n = n;
    for (int t = 0; t < n; t++) {
        d->ids.v[t] = (int32_t)ids[t];
        d->wantm[t] = t + 1 < n && (mask ? mask[t + 1] : 1);
    }
    return 0;
}

static int loss_rows(struct run *r, struct doc *d, int *nd, struct loss_acc *acc, long *bi,
                     long *samples)
{
    const struct swift_eval_opts *o = r->o;
    struct swift_eval_rows *rows;
    if (swift_eval_rows_open(&rows, r->pr, o->dataset) < 0)
        return -1;
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

static int run_loss(struct run *r, json_t *rec, long *n_out)
{
    const struct swift_eval_opts *o = r->o;
    struct loss_acc acc = {.V = r->V};
    int B = o->batch_size, cap = o->max_length;
    struct doc *d = calloc((size_t)B, sizeof(*d));
    if (!d)
        return swift_error("out of memory");
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
    if (acc.count == 0)
        return swift_error("'%s': no trained tokens to evaluate", o->dataset);
    double loss = acc.sum / (double)acc.count;
    json_t *m = json_object_get(rec, "metrics");
    if (o->task == SWIFT_EVAL_PPL)
        json_object_set_new(m, "ppl", json_real(exp(loss)));
    json_object_set_new(m, "loss", json_real(loss));
    if (o->task != SWIFT_EVAL_PPL)
        json_object_set_new(m, "ppl", json_real(exp(loss)));
    json_object_set_new(m, "token_acc", json_real((double)acc.correct / (double)acc.count));
    json_object_set_new(m, "tokens", json_integer(acc.count));
    *n_out = samples;
    return 0;
}

/* ---- few-shot and prompts ---- */

struct shots {
    struct swift_eval_set dev; /* MMLU: the current subject's dev file */
    char *dev_file;
    const struct swift_eval_item **list;
    int n;
};

static int shots_for(struct run *r, struct shots *s, struct swift_eval_set *set, size_t i)
{
    const struct swift_eval_opts *o = r->o;
    s->n = 0;
    if (o->few_shot <= 0)
        return 0;
    if (!s->list && !(s->list = calloc((size_t)o->few_shot, sizeof(*s->list))))
        return swift_error("out of memory");
    if (o->task == SWIFT_EVAL_MMLU) {
        const struct swift_eval_item *it = &set->items[i];
        if (!s->dev_file || strcmp(s->dev_file, it->file)) {
            swift_eval_set_release(&s->dev);
            swift_eval_set_init(&s->dev);
            free(s->dev_file);
            s->dev_file = strdup(it->file);
            char *dev = swift_eval_mmlu_dev_path(it->file);
            if (!dev)
                return swift_error_at(it->file,
                                      0,
                                      "no dev file for %d-shot prompts (expected "
                                      "../dev/%s_dev.csv)",
                                      o->few_shot,
                                      it->subject);
            int rc = swift_eval_read(SWIFT_EVAL_MMLU, dev, &s->dev);
            free(dev);
            if (rc < 0)
                return -1;
        }
        for (size_t k = 0; k < s->dev.n && s->n < o->few_shot; k++)
            s->list[s->n++] = &s->dev.items[k];
        return 0;
    }
    for (size_t k = 0; k < set->n && s->n < o->few_shot; k++)
        s->list[s->n++] = &set->items[k];
    return 0;
}

static void shots_free(struct shots *s)
{
    swift_eval_set_release(&s->dev);
    free(s->dev_file);
    free(s->list);
}

/* Keep the last `keep` tokens of ids (left truncation of long prompts). */
static void left_truncate(struct ids *x, int keep)
{
    if (keep < 1)
        keep = 1;
    if (x->n <= keep)
        return;
    memmove(x->v, x->v + (x->n - keep), (size_t)keep * sizeof(int32_t));
    x->n = keep;
}

/* ---- multiple choice ---- */

struct mc_item {
    size_t idx;
    struct ids ctx;
    struct ids cont[SWIFT_EVAL_MAX_CHOICES];
    size_t cont_bytes[SWIFT_EVAL_MAX_CHOICES];
    double ll[SWIFT_EVAL_MAX_CHOICES];
    int nc;
};

struct mc_ctx {
    struct mc_item *items;
    int V;
    int choice; /* step 3: the choice being scored */
};

static void mc_first_cb(void *ctx, const struct feed *f, int pos, const float *logits)
{
    struct mc_ctx *c = ctx;
    struct mc_item *it = &c->items[f->tag];
    (void)pos;
    for (int k = 0; k < it->nc; k++)
        it->ll[k] = swift_logprob(logits, c->V, it->cont[k].v[0]);
}

static void mc_rest_cb(void *ctx, const struct feed *f, int pos, const float *logits)
{
    struct mc_ctx *c = ctx;
    struct mc_item *it = &c->items[f->tag];
    it->ll[c->choice] += swift_logprob(logits, c->V, it->cont[c->choice].v[pos + 1]);
}

static void mc_items_free(struct mc_item *it, int n)
{
    for (int i = 0; i < n; i++) {
        free(it[i].ctx.v);
        for (int k = 0; k < it[i].nc; k++)
            free(it[i].cont[k].v);
        memset(&it[i], 0, sizeof(it[i]));
    }
}

static int mc_batch(struct run *r, struct swift_eval_set *set, struct mc_item *items, int n,
                    struct swift_eval_tally *acc, struct swift_eval_tally *accn, long bi)
{
    int64_t t0 = swift_trace_now();
    long tok0 = r->tokens;
    struct mc_ctx c = {.items = items, .V = r->V};
    int need = 1;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < items[i].nc; k++)
            if (items[i].ctx.n + items[i].cont[k].n > need)
                need = items[i].ctx.n + items[i].cont[k].n;
    if (kv_ensure(r, 2 * r->o->batch_size, need) < 0)
        return -1;
    struct feed *f = calloc((size_t)n, sizeof(*f));
    if (!f)
        return swift_error("out of memory");
    swift_kv_reset(&r->kv, -1);
    for (int i = 0; i < n; i++)
        f[i] = (struct feed){.row = 2 * i,
                             .ids = items[i].ctx.v,
                             .n = items[i].ctx.n,
                             .want_from = items[i].ctx.n - 1,
                             .tag = i};
    int rc = feed_all(r, f, n, mc_first_cb, &c);
    int maxc = 0;
    for (int i = 0; i < n; i++)
        if (items[i].nc > maxc)
            maxc = items[i].nc;
    for (int k = 0; rc == 0 && k < maxc; k++) {
        int nf = 0;
        for (int i = 0; i < n; i++) {
            if (k >= items[i].nc || items[i].cont[k].n < 2)
                continue;
            swift_kv_copy_row(&r->kv, 2 * i + 1, 2 * i);
            f[nf++] = (struct feed){
                .row = 2 * i + 1, .ids = items[i].cont[k].v, .n = items[i].cont[k].n - 1, .tag = i};
        }
        c.choice = k;
        if (nf)
            rc = feed_all(r, f, nf, mc_rest_cb, &c);
    }
    free(f);
    if (rc < 0)
        return -1;
    for (int i = 0; i < n && rc == 0; i++) {
        const struct swift_eval_item *it = &set->items[items[i].idx];
        int pick = swift_eval_mc_pick(items[i].ll, items[i].nc);
        rc = swift_eval_tally_add(acc, it->subject, pick == it->answer);
        if (rc == 0 && accn) {
            double norm[SWIFT_EVAL_MAX_CHOICES];
            for (int k = 0; k < items[i].nc; k++)
                norm[k] =
                    items[i].ll[k] / (double)(items[i].cont_bytes[k] ? items[i].cont_bytes[k] : 1);
            rc = swift_eval_tally_add(
                accn, it->subject, swift_eval_mc_pick(norm, items[i].nc) == it->answer);
        }
    }
    batch_span("forward", t0, bi, n, r->tokens - tok0);
    return rc;
}

static int run_mc(struct run *r, struct swift_eval_set *setp, json_t *rec, long *n_out)
{
    const struct swift_eval_opts *o = r->o;
    struct swift_eval_set set = *setp;
    size_t first = o->task == SWIFT_EVAL_MMLU ? 0 : (size_t)o->few_shot;
    size_t last = set.n;
    if (o->limit > 0 && first + (size_t)o->limit < last)
        last = first + (size_t)o->limit;
    if (first >= last)
        return swift_error("'%s': no items to evaluate", o->dataset);
    int B = o->batch_size, cap = o->max_length;
    struct swift_eval_tally acc, accn;
    swift_eval_tally_init(&acc);
    swift_eval_tally_init(&accn);
    struct shots sh = {0};
    struct mc_item *items = calloc((size_t)B, sizeof(*items));
    int rc = items ? 0 : swift_error("out of memory");
    int n = 0;
    long bi = 0;
    for (size_t i = first; i < last && rc == 0; i++) {
        const struct swift_eval_item *it = &set.items[i];
        if ((rc = shots_for(r, &sh, &set, i)) < 0)
            break;
        char *prompt = swift_eval_prompt(o->task, it, sh.list, sh.n);
        if (!prompt) {
            rc = -1;
            break;
        }
        struct mc_item *m = &items[n];
        m->idx = i;
        rc = encode_prompt(r, prompt, &m->ctx);
        free(prompt);
        int maxcont = 1;
        for (int k = 0; rc == 0 && k < it->nchoices; k++) {
            char *c = swift_eval_continuation(o->task, it, k);
            if (!c) {
                rc = swift_error("out of memory");
                break;
            }
            /* an assistant reply starts without the space that follows "Answer:" */
            const char *cc =
                strcmp(swift_eval_prompter_name(r->pr), "none") && c[0] == ' ' ? c + 1 : c;
            m->cont_bytes[k] = strlen(cc);
            rc = encode(r, cc, &m->cont[k]);
            free(c);
            m->nc = k + 1;
            if (rc == 0 && m->cont[k].n == 0)
                rc = swift_error_at(it->file, it->line, "choice %d encodes to no tokens", k);
            if (rc == 0 && m->cont[k].n > maxcont)
                maxcont = m->cont[k].n;
        }
        if (rc < 0) {
            n++;
            break;
        }
        if (maxcont >= cap)
            rc = swift_error_at(it->file, it->line, "a choice is longer than --max-length %d", cap);
        else if (m->ctx.n == 0)
            rc = swift_error_at(it->file, it->line, "empty prompt");
        else
            left_truncate(&m->ctx, cap - maxcont);
        n++;
        if (rc == 0 && n == B) {
            rc = mc_batch(r, &set, items, n, &acc, o->task == SWIFT_EVAL_MC ? &accn : NULL, bi++);
            mc_items_free(items, n);
            n = 0;
        }
    }
    if (rc == 0 && n > 0)
        rc = mc_batch(r, &set, items, n, &acc, o->task == SWIFT_EVAL_MC ? &accn : NULL, bi++);
    if (items)
        mc_items_free(items, n);
    free(items);
    shots_free(&sh);
    if (rc == 0) {
        json_t *mt = json_object_get(rec, "metrics");
        json_object_set_new(mt, "accuracy", json_real(swift_eval_tally_micro(&acc)));
        if (acc.n > 1 || (acc.n == 1 && acc.rows[0].subject[0]))
            json_object_set_new(mt, "accuracy_macro", json_real(swift_eval_tally_macro(&acc)));
        if (o->task == SWIFT_EVAL_MC)
            json_object_set_new(mt, "accuracy_norm", json_real(swift_eval_tally_micro(&accn)));
        swift_eval_record_add_tally(rec, &acc);
        *n_out = acc.total;
    }
    swift_eval_tally_release(&acc);
    swift_eval_tally_release(&accn);
    return rc;
}

/* ---- generation ---- */

static const char *const stop_words[] = {"\n\n", "Question:", NULL};

struct gen_ctx {
    struct run *r;
};

static int gen_stop_cb(void *ctx, int i, const int32_t *out, int n)
{
    struct gen_ctx *g = ctx;
    (void)i;
    /* decoding the tail is enough: a stop word spans a few tokens at most */
    int from = n > 16 ? n - 16 : 0;
    uint32_t u[16];
    for (int k = from; k < n; k++)
        u[k - from] = (uint32_t)out[k];
    char *text;
    size_t len;
    if (swift_tokenizer_decode(g->r->tok, u, (size_t)(n - from), 0, &text, &len) < 0)
        return 1;
    int stop = 0;
    for (int k = 0; stop_words[k]; k++)
        if (strstr(text, stop_words[k]))
            stop = 1;
    free(text);
    return stop;
}

/* The answer text: decoded, special tokens left out, cut at the first stop word. */
static char *gen_answer(struct run *r, const int32_t *out, int n)
{
    uint32_t *u = malloc((size_t)(n ? n : 1) * sizeof(uint32_t));
    if (!u)
        return NULL;
    for (int k = 0; k < n; k++)
        u[k] = (uint32_t)out[k];
    char *text = NULL;
    size_t len;
    int rc = swift_tokenizer_decode(r->tok, u, (size_t)n, SWIFT_TOK_SKIP_SPECIAL, &text, &len);
    free(u);
    if (rc < 0)
        return NULL;
    for (int k = 0; stop_words[k]; k++) {
        char *p = strstr(text, stop_words[k]);
        if (p)
            *p = 0;
    }
    return text;
}

static int run_gen(struct run *r, struct swift_eval_set *setp, json_t *rec, long *n_out)
{
    const struct swift_eval_opts *o = r->o;
    struct swift_eval_set set = *setp;
    size_t first = (size_t)o->few_shot, last = set.n;
    if (o->limit > 0 && first + (size_t)o->limit < last)
        last = first + (size_t)o->limit;
    if (first >= last)
        return swift_error("'%s': no items to evaluate", o->dataset);
    int B = o->batch_size, cap = o->max_length;
    if (o->max_new_tokens >= cap) {
        return swift_error("--max-new-tokens %d leaves no room for a prompt in --max-length %d",
                           o->max_new_tokens,
                           cap);
    }
    struct swift_eval_tally acc;
    swift_eval_tally_init(&acc);
    struct shots sh = {0};
    struct swift_gen_seq *seqs = calloc((size_t)B, sizeof(*seqs));
    struct ids *pr = calloc((size_t)B, sizeof(*pr));
    size_t *idx = calloc((size_t)B, sizeof(*idx));
    int rc = seqs && pr && idx ? 0 : swift_error("out of memory");
    struct swift_gen_opts go = {.max_new = o->max_new_tokens,
                                .temperature = o->temperature,
                                .top_p = o->top_p,
                                .stop_ids = r->eos,
                                .nstop = r->neos};
    struct gen_ctx gc = {.r = r};
    long bi = 0;
    size_t i = first;
    while (rc == 0 && i < last) {
        int n = 0;
        for (; i < last && n < B && rc == 0; i++) {
            if ((rc = shots_for(r, &sh, &set, i)) < 0)
                break;
            /* A chat model answers the question as its user turn (as it was fine-tuned);
             * the "Question: ... Answer:" frame is for base models and few-shot prompts. */
            int chat = strcmp(swift_eval_prompter_name(r->pr), "none") != 0;
            char *prompt = chat && sh.n == 0
                               ? strdup(set.items[i].question)
                               : swift_eval_prompt(o->task, &set.items[i], sh.list, sh.n);
            if (!prompt) {
                rc = -1;
                break;
            }
            rc = encode_prompt(r, prompt, &pr[n]);
            free(prompt);
            if (rc == 0 && pr[n].n == 0)
                rc = swift_error_at(set.items[i].file, set.items[i].line, "empty prompt");
            if (rc == 0)
                left_truncate(&pr[n], cap - o->max_new_tokens);
            seqs[n] = (struct swift_gen_seq){.prompt = pr[n].v,
                                             .prompt_len = pr[n].n,
                                             .seed = o->seed ^ (0x9e3779b97f4a7c15ULL * i)};
            idx[n++] = i;
        }
        int need = 1;
        for (int k = 0; k < n; k++)
            if (pr[k].n + o->max_new_tokens > need)
                need = pr[k].n + o->max_new_tokens;
        if (rc == 0 && n > 0)
            rc = kv_ensure(r, B, need);
        if (rc == 0 && n > 0) {
            go.nstop = r->neos; /* the template's end marker joined the stop ids */
            int64_t t0 = swift_trace_now();
            long p0 = r->gen.prefill_tokens + r->gen.decode_tokens;
            rc = swift_generate(&r->kv, seqs, n, &go, gen_stop_cb, &gc, &r->gen);
            batch_span("generate", t0, bi++, n, r->gen.prefill_tokens + r->gen.decode_tokens - p0);
            for (int k = 0; rc == 0 && k < n; k++) {
                const struct swift_eval_item *it = &set.items[idx[k]];
                char *ans = gen_answer(r, seqs[k].out, seqs[k].n_out);
                if (!ans) {
                    rc = -1;
                    break;
                }
                int ok;
                if (o->task == SWIFT_EVAL_GSM8K) {
                    char num[128];
                    ok = swift_eval_extract_number(ans, num, sizeof(num)) &&
                         !strcmp(num, it->target);
                } else {
                    ok = swift_eval_exact_match(ans, it->target);
                }
                free(ans);
                rc = swift_eval_tally_add(&acc, it->subject, ok);
            }
            for (int k = 0; k < n; k++)
                free(seqs[k].out);
        }
        for (int k = 0; k < n; k++) {
            free(pr[k].v);
            pr[k] = (struct ids){0};
            seqs[k].out = NULL;
        }
    }
    free(seqs);
    free(pr);
    free(idx);
    shots_free(&sh);
    if (rc == 0) {
        json_t *mt = json_object_get(rec, "metrics");
        json_object_set_new(mt, "accuracy", json_real(swift_eval_tally_micro(&acc)));
        if (acc.n > 1)
            json_object_set_new(mt, "accuracy_macro", json_real(swift_eval_tally_macro(&acc)));
        swift_eval_record_add_tally(rec, &acc);
        *n_out = acc.total;
        r->tokens += r->gen.prefill_tokens + r->gen.decode_tokens;
    }
    swift_eval_tally_release(&acc);
    return rc;
}

/* ---- setup ---- */

static void add_eos(struct run *r, long id)
{
    if (id < 0 || id >= r->V || r->neos >= 8)
        return;
    for (int k = 0; k < r->neos; k++)
        if (r->eos[k] == id)
            return;
    r->eos[r->neos++] = (int32_t)id;
}

/* eos ids: generation_config.json and config.json (an int or a list), tokenizer's eos_token. */
static void find_eos(struct run *r)
{
    static const char *const files[] = {"generation_config.json", "config.json"};
    for (int f = 0; f < 2; f++) {
        char *p = swift_path_join(r->o->model, files[f]);
        json_t *j = p ? json_load_file(p, 0, NULL) : NULL;
        free(p);
        json_t *e = json_object_get(j, "eos_token_id");
        if (json_is_integer(e))
            add_eos(r, (long)json_integer_value(e));
        for (size_t k = 0; json_is_array(e) && k < json_array_size(e); k++)
            add_eos(r, (long)json_integer_value(json_array_get(e, k)));
        json_decref(j);
    }
    const char *eos = swift_tokenizer_config_str(r->tok, "eos_token");
    if (eos)
        add_eos(r, swift_tokenizer_token_id(r->tok, eos));
}

/* Run the task on one dataset (o->dataset) and build its record. */
static int eval_one(struct run *r, struct swift_eval_set *set, double load_s, json_t **out)
{
    const struct swift_eval_opts *o = r->o;
    r->tokens = 0;
    r->fwd_s = 0;
    memset(&r->gen, 0, sizeof(r->gen));
    long n = 0;
    json_t *rec = swift_eval_record_new(o->model, o->adapters, o->task, o->dataset, 0);
    if (!rec)
        return swift_error("out of memory");
    double t1 = now_s();
    int trc;
    if (o->task == SWIFT_EVAL_LOSS || o->task == SWIFT_EVAL_PPL)
        trc = run_loss(r, rec, &n);
    else if (o->task == SWIFT_EVAL_MC || o->task == SWIFT_EVAL_MMLU)
        trc = run_mc(r, set, rec, &n);
    else
        trc = run_gen(r, set, rec, &n);
    if (trc < 0) {
        json_decref(rec);
        return -1;
    }
    double t2 = now_s();

    json_object_set_new(rec, "n", json_integer(n));
    json_t *cfg = json_object();
    json_object_set_new(cfg, "few_shot", json_integer(o->few_shot));
    json_object_set_new(cfg, "limit", json_integer(o->limit));
    json_object_set_new(cfg, "batch_size", json_integer(o->batch_size));
    json_object_set_new(cfg, "max_length", json_integer(o->max_length));
    json_object_set_new(cfg, "merge_adapters", json_boolean(o->merge_adapters));
    json_object_set_new(cfg, "template", json_string(swift_eval_prompter_name(r->pr)));
    if (swift_eval_task_generates(o->task)) {
        json_object_set_new(cfg, "max_new_tokens", json_integer(o->max_new_tokens));
        json_object_set_new(cfg, "temperature", json_real(o->temperature));
        json_object_set_new(cfg, "top_p", json_real(o->top_p));
        json_object_set_new(cfg, "seed", json_integer((json_int_t)o->seed));
    }
    json_object_set_new(rec, "config", cfg);
    json_object_set_new(rec, "time_s", json_real(t2 - t1 + load_s));
    json_object_set_new(rec, "load_s", json_real(load_s));
    json_object_set_new(rec, "tokens", json_integer(r->tokens));
    json_object_set_new(
        rec, "tokens_per_s", json_real(t2 > t1 ? (double)r->tokens / (t2 - t1) : 0.0));
    if (swift_eval_task_generates(o->task)) {
        const struct swift_gen_stats *g = &r->gen;
        json_object_set_new(rec, "prefill_tokens", json_integer(g->prefill_tokens));
        json_object_set_new(rec, "decode_tokens", json_integer(g->decode_tokens));
        json_object_set_new(
            rec,
            "prefill_tokens_per_s",
            json_real(g->prefill_s > 0 ? (double)g->prefill_tokens / g->prefill_s : 0.0));
        json_object_set_new(
            rec,
            "decode_tokens_per_s",
            json_real(g->decode_s > 0 ? (double)g->decode_tokens / g->decode_s : 0.0));
    }
    *out = rec;
    return 0;
}

/* Write every record (one line each) to path atomically. */
static int write_records(json_t *recs, const char *path)
{
    struct swift_atomic af;
    if (swift_atomic_open(&af, path) < 0)
        return -1;
    for (size_t i = 0; i < json_array_size(recs); i++)
        if (swift_json_print_line(af.fp, json_array_get(recs, i)) < 0) {
            swift_atomic_abort(&af);
            return swift_error_errno("cannot write '%s'", path);
        }
    return swift_atomic_commit(&af);
}

int swift_eval_run(const struct swift_eval_opts *opts)
{
    struct swift_eval_opts oo = *opts;
    const struct swift_eval_opts *o = &oo;
    struct run r = {.o = o};
    int rc = -1, nd = o->ndatasets > 0 ? o->ndatasets : 1;
    const char *const one[1] = {o->dataset};
    const char *const *ds = o->ndatasets > 0 ? o->datasets : one;
    json_t *recs = json_array();
    double t0 = now_s();
    /* the datasets first: a bad row should not wait for a large model to load */
    struct swift_eval_set *sets = calloc((size_t)nd, sizeof(*sets));
    if (!sets || !recs) {
        swift_error("out of memory");
        goto out;
    }
    int scored = o->task == SWIFT_EVAL_LOSS || o->task == SWIFT_EVAL_PPL;
    for (int i = 0; i < nd; i++) {
        swift_eval_set_init(&sets[i]);
        if (!scored && swift_eval_read(o->task, ds[i], &sets[i]) < 0)
            goto out;
    }
    struct swift_backend be;
    int brc = swift_backend_select(&be, o->device && strcmp(o->device, "auto") ? o->device : "cpu");
    if (brc) {
        rc = brc > 0 ? -2 : -1;
        goto out;
    }
    if (swift_model_load(&r.m, o->model, be.ops, 1) < 0)
        goto out;
    r.have_model = 1;
    r.V = r.m.cfg.vocab_size;
    if (o->adapters) {
        struct swift_lora_opts lo;
        if (swift_lora_load(&r.m, o->adapters, &lo) < 0)
            goto out;
        r.m.lora_dropout = 0.0f; /* evaluation */
        if (o->merge_adapters && swift_kv_merge_adapters(&r.m) < 0)
            goto out;
    }
    if (swift_tokenizer_load(&r.tok, o->model) < 0)
        goto out;
    if (swift_tokenizer_vocab_size(r.tok) > (uint32_t)r.V) {
        swift_error("tokenizer has %u ids, the model's vocabulary only %d",
                    swift_tokenizer_vocab_size(r.tok),
                    r.V);
        goto out;
    }
    if (!(r.st = swift_tok_state_new(r.tok)))
        goto out;
    if (!(r.logits = malloc((size_t)MAX_WANT * r.V * sizeof(float)))) {
        swift_error("out of memory");
        goto out;
    }
    find_eos(&r);
    if (!(r.pr = swift_eval_prompter_new(r.tok, o->template_name)))
        goto out;
    if (o->max_length <= 0) {
        int mp = r.m.cfg.max_position_embeddings;
        oo.max_length = mp > 0 && mp < 4096 ? mp : 4096;
    } else if (o->max_length > r.m.cfg.max_position_embeddings &&
               r.m.cfg.max_position_embeddings > 0) {
        swift_warn("--max-length %d is beyond the model's max_position_embeddings %d",
                   o->max_length,
                   r.m.cfg.max_position_embeddings);
    }
    double load_s = now_s() - t0;

    int regressions = 0;
    for (int i = 0; i < nd; i++) {
        json_t *rec = NULL;
        oo.dataset = ds[i];
        if (eval_one(&r, &sets[i], i == 0 ? load_s : 0.0, &rec) < 0)
            goto out;
        json_array_append_new(recs, rec);
        if (swift_json_print_line(stdout, rec) < 0 || fflush(stdout) != 0) {
            swift_error_errno("write error on standard output");
            goto out;
        }
        if (!o->quiet)
            swift_eval_record_table(rec, stderr);
        if (o->baseline) {
            int g = swift_eval_gate(rec, o->baseline, o->max_drop);
            if (g < 0)
                goto out;
            regressions += g;
        }
    }
    if (o->output && write_records(recs, o->output) < 0)
        goto out;
    rc = regressions ? -1 : 0;
out:
    for (int i = 0; sets && i < nd; i++)
        swift_eval_set_release(&sets[i]);
    free(sets);
    json_decref(recs);
    free(r.logits);
    swift_eval_prompter_free(r.pr);
    if (r.have_kv)
        swift_kv_release(&r.kv);
    if (r.st)
        swift_tok_state_free(r.st);
    if (r.tok)
        swift_tokenizer_free(r.tok);
    if (r.have_model)
        swift_model_free(&r.m);
    return rc == -2 ? 2 : rc < 0 ? 1 : 0; /* -2: usage (--device) */
}
