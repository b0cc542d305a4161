/* The inference engine (see engine.h): requests, their sequences and the queues; one step's
 * schedule, forward and sampling are in step.c. */
#include "lib/infer/engine.h"
#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/trace.h"
#include "lib/eval/generate.h"
#include "lib/infer/internal.h"
#include "lib/model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

struct swift_engine_opts swift_engine_defaults(void)
{
    return (struct swift_engine_opts){.max_num_seqs = 16,
                                      .max_num_batched_tokens = 512,
                                      .block_size = 16,
                                      .num_blocks = 0,
                                      .max_model_len = 0,
                                      .chunked_prefill = 1,
                                      .prefix_caching = 1};
}

struct swift_sampling swift_sampling_defaults(void)
{
    return (struct swift_sampling){.n = 1,
                                   .max_tokens = 16,
                                   .temperature = 0,
                                   .top_p = 1,
                                   .top_k = 0,
                                   .min_p = 0,
                                   .repetition_penalty = 1,
                                   .presence_penalty = 0,
                                   .frequency_penalty = 0,
                                   .seed = 0};
}

static int check_opts(struct swift_engine_opts *o, const struct swift_model *m)
{
    if (o->max_model_len <= 0)
        o->max_model_len = m->cfg.max_position_embeddings;
    if (o->max_num_seqs < 1 || o->max_num_batched_tokens < 1 || o->block_size < 1 ||
        o->num_blocks < 0 || o->max_model_len < 2)
        return swift_error("engine options out of range: max_num_seqs %d, "
                           "max_num_batched_tokens %d, block_size %d, num_blocks %d, "
                           "max_model_len %d",
                           o->max_num_seqs,
                           o->max_num_batched_tokens,
                           o->block_size,
                           o->num_blocks,
                           o->max_model_len);
    if (o->max_num_batched_tokens < o->max_num_seqs)
        return swift_error("max_num_batched_tokens %d is below max_num_seqs %d (every running "
                           "sequence's next token must fit one forward)",
                           o->max_num_batched_tokens,
                           o->max_num_seqs);
    if (o->num_blocks == 0) {
        long per = ((long)o->max_model_len + o->block_size - 1) / o->block_size;
        long nb = per * o->max_num_seqs;
        o->num_blocks = nb > INT32_MAX / o->block_size ? INT32_MAX / o->block_size : (int)nb;
    }
    return 0;
}

/* The options checked and completed, and the pool, with what went wrong in err (the library's
 * report, "prog: message", captured without the program name). */
static int engine_setup(struct swift_engine *e, struct swift_engine_opts *o, char *err,
                        size_t errlen)
{
    char buf[512] = "";
    FILE *f = fmemopen(buf, sizeof(buf) - 1, "w");
    if (f)
        swift_error_set_stream(f);
    int rc = check_opts(o, e->m);
    if (rc == 0)
        rc = swift_pkv_init(&e->kv, e->m, o->num_blocks, o->block_size, o->max_num_batched_tokens);
    if (f) {
        swift_error_set_stream(NULL);
        fclose(f);
    }
    const char *msg = strstr(buf, ": ") ? strstr(buf, ": ") + 2 : buf;
    snprintf(err, errlen, "%.*s", (int)strcspn(msg, "\n"), msg);
    return rc;
}

struct swift_engine *swift_engine_new(struct swift_model *m, const struct swift_engine_opts *o,
                                      const int32_t *eos, int neos, char *err, size_t errlen)
{
    struct swift_engine_opts oo = *o;
    struct swift_engine *e = swift_xcalloc(1, sizeof(*e));
    e->m = m;
    e->V = m->cfg.vocab_size;
    if (engine_setup(e, &oo, err, errlen) < 0) {
        free(e);
        return NULL;
    }
    e->o = oo;
    e->neos = neos > 0 ? neos : 0;
    e->eos = swift_xcalloc((size_t)(e->neos ? e->neos : 1), sizeof(int32_t));
    if (e->neos)
        memcpy(e->eos, eos, (size_t)e->neos * sizeof(int32_t));
    swift_sampler_init(&e->sp, e->V);
    size_t T = (size_t)oo.max_num_batched_tokens, S = (size_t)oo.max_num_seqs;
    e->tok = swift_xcalloc(T, sizeof(int32_t));
    e->seqof = swift_xcalloc(T, sizeof(int));
    e->want = swift_xcalloc(S, sizeof(int));
    e->fseq = swift_xcalloc(S, sizeof(*e->fseq));
    e->pseq = swift_xcalloc(S, sizeof(*e->pseq));
    e->wseq = swift_xcalloc(S, sizeof(*e->wseq));
    e->pn = swift_xcalloc(S, sizeof(int));
    e->logits = swift_xcalloc(S * (size_t)e->V, sizeof(float));
    e->btok = swift_xcalloc((size_t)oo.block_size, sizeof(int32_t));
    e->next_id = 1;
    e->st.blocks_total = oo.num_blocks;
    return e;
}

static void seq_free(struct swift_engine *e, struct iseq *s)
{
    swift_pkv_seq_free(&e->kv, &s->kv);
    free(s->out);
    free(s);
}

static void req_free(struct swift_engine *e, struct ireq *r)
{
    for (int i = 0; i < r->nseqs; i++)
        seq_free(e, r->seqs[i]);
    free(r->seqs);
    free(r->prompt);
    free(r->stop);
    swift_vlm_prompt_free(&r->vp);
    free(r);
}

void swift_engine_free(struct swift_engine *e)
{
    if (!e)
        return;
    for (int i = 0; i < e->nreq; i++)
        req_free(e, e->reqs[i]);
    free(e->reqs);
    free(e->run);
    free(e->wait);
    swift_pkv_release(&e->kv);
    swift_sampler_free(&e->sp);
    free(e->eos);
    free(e->tok);
    free(e->seqof);
    free(e->want);
    free(e->fseq);
    free(e->pseq);
    free(e->wseq);
    free(e->pn);
    free(e->logits);
    free(e->btok);
    free(e->pos3);
    free(e->emb);
    free(e->emb_at);
    free(e);
}

void swift_engine_set_vlm(struct swift_engine *e, struct swift_vlm *v)
{
    size_t T = (size_t)e->o.max_num_batched_tokens;
    e->vlm = v;
    free(e->pos3);
    free(e->emb);
    free(e->emb_at);
    e->pos3 = e->emb_at = NULL;
    e->emb = NULL;
    if (!v)
        return;
    e->pos3 = swift_xcalloc(3 * T, sizeof(int32_t));
    e->emb = swift_xcalloc(T * (size_t)e->m->cfg.hidden_size, sizeof(float));
    e->emb_at = swift_xcalloc(T, sizeof(int32_t));
}

int swift_infer_prefix_limit(const struct swift_engine *e, const struct iseq *s)
{
    return e->vlm && s->r->vp.nembeds > 0 ? s->r->vp.first_image : INT32_MAX;
}

/* r's positions and image embeddings (swift_vlm_prompt), the library's report in err. */
static int vlm_prompt(struct swift_engine *e, struct ireq *r, const struct swift_engine_images *im,
                      char *err, size_t errlen)
{
    char buf[512] = "";
    FILE *f = fmemopen(buf, sizeof(buf) - 1, "w");
    if (f)
        swift_error_set_stream(f);
    int rc = swift_vlm_prompt(e->vlm,
                              r->prompt,
                              r->plen,
                              im ? im->pixels : NULL,
                              im ? im->npatches : 0,
                              im ? im->grid_thw : NULL,
                              im ? im->nimages : 0,
                              &r->vp);
    if (f) {
        swift_error_set_stream(NULL);
        fclose(f);
    }
    if (rc < 0) {
        const char *msg = strstr(buf, ": ") ? strstr(buf, ": ") + 2 : buf;
        snprintf(err, errlen, "%.*s", (int)strcspn(msg, "\n"), msg);
    }
    return rc;
}

static void grow(void *arr, int *cap, int need, size_t elem)
{
    void **a = arr;
    if (need <= *cap)
        return;
    int c = *cap ? *cap * 2 : 16;
    while (c < need)
        c *= 2;
    *a = swift_xrealloc(*a, (size_t)c * elem);
    *cap = c;
}

struct iseq *swift_infer_seq_new(struct swift_engine *e, struct ireq *r, int choice)
{
    (void)e;
    struct iseq *s = swift_xcalloc(1, sizeof(*s));
    s->r = r;
    s->choice = choice;
    s->slots = 1;
    s->out = swift_xcalloc((size_t)r->s.max_tokens, sizeof(int32_t));
    swift_rng_seed(s->rng, r->s.seed + (uint64_t)choice);
    return s;
}

void swift_infer_run_push(struct swift_engine *e, struct iseq *s)
{
    grow(&e->run, &e->cap_run, e->nrun + 1, sizeof(*e->run));
    e->run[e->nrun++] = s;
    s->state = SEQ_RUNNING;
    s->admitted = ++e->stamp;
}

int32_t swift_infer_token_at(const struct iseq *s, int i)
{
    return i < s->r->plen ? s->r->prompt[i] : s->out[i - s->r->plen];
}

int swift_infer_slots_used(const struct swift_engine *e)
{
    int n = 0;
    for (int i = 0; i < e->nrun; i++)
        if (e->run[i]->state == SEQ_RUNNING)
            n += e->run[i]->slots;
    return n;
}

static int bad_sampling(const struct swift_engine *e, const struct swift_sampling *s, int len,
                        char *err, size_t errlen)
{
    const char *what = NULL;
    if (s->n < 1 || s->n > e->o.max_num_seqs)
        what = "n";
    else if (s->max_tokens < 1)
        what = "max_tokens";
    else if (!(s->temperature >= 0) || !isfinite(s->temperature))
        what = "temperature";
    else if (!(s->top_p > 0 && s->top_p <= 1))
        what = "top_p";
    else if (s->top_k < 0)
        what = "top_k";
    else if (!(s->min_p >= 0 && s->min_p <= 1))
        what = "min_p";
    else if (!(s->repetition_penalty > 0) || !isfinite(s->repetition_penalty))
        what = "repetition_penalty";
    else if (!(fabs(s->presence_penalty) <= 2))
        what = "presence_penalty";
    else if (!(fabs(s->frequency_penalty) <= 2))
        what = "frequency_penalty";
    else if (s->top_logprobs < 0 || s->top_logprobs > 20)
        what = "top_logprobs";
    else if (s->nstop_ids < 0 || (s->nstop_ids > 0 && !s->stop_ids))
        what = "stop_ids";
    if (what) {
        snprintf(err, errlen, "sampling value out of range: %s", what);
        return 1;
    }
    (void)len;
    return 0;
}

/* The most tokens (prompt + completion) a sequence may hold: max_model_len, and the pool (a
 * sequence alone always fits, so preemption always ends). */
static int seq_limit(const struct swift_engine *e)
{
    long pool = (long)e->o.num_blocks * e->o.block_size + 1; /* the last token is not cached */
    return pool < e->o.max_model_len ? (int)pool : e->o.max_model_len;
}

int64_t swift_engine_add(struct swift_engine *e, const int32_t *prompt, int len,
                         const struct swift_sampling *s, swift_engine_cb cb, void *ctx, char *err,
                         size_t errlen)
{
    return swift_engine_add_images(e, prompt, len, NULL, s, cb, ctx, err, errlen);
}

int64_t swift_engine_add_images(struct swift_engine *e, const int32_t *prompt, int len,
                                const struct swift_engine_images *im,
                                const struct swift_sampling *s, swift_engine_cb cb, void *ctx,
                                char *err, size_t errlen)
{
    if (im && im->nimages > 0 && !e->vlm) {
        snprintf(err, errlen, "the model takes no images (not a vision-language model)");
        return -1;
    }
    if (len < 1 || !prompt) {
        snprintf(err, errlen, "empty prompt");
        return -1;
    }
    if (bad_sampling(e, s, len, err, errlen))
        return -1;
    for (int i = 0; i < len; i++)
        if (prompt[i] < 0 || prompt[i] >= e->V) {
            snprintf(err,
                     errlen,
                     "prompt token %d (id %d) is outside the vocabulary (%d)",
                     i,
                     prompt[i],
                     e->V);
            return -1;
        }
    int limit = seq_limit(e);
    if (len >= limit) {
        snprintf(err,
                 errlen,
                 "prompt of %d tokens leaves no room for a completion (at most %d tokens%s)",
                 len,
                 limit - 1,
                 limit < e->o.max_model_len ? ", the cache's pool" : "");
        return -1;
    }
    if (!e->o.chunked_prefill && len > e->o.max_num_batched_tokens) {
        snprintf(err,
                 errlen,
                 "prompt of %d tokens does not fit one forward of %d tokens (chunked prefill is "
                 "off)",
                 len,
                 e->o.max_num_batched_tokens);
        return -1;
    }
    struct ireq *r = swift_xcalloc(1, sizeof(*r));
    r->id = e->next_id++;
    r->prompt = swift_xcalloc((size_t)len, sizeof(int32_t));
    memcpy(r->prompt, prompt, (size_t)len * sizeof(int32_t));
    r->plen = len;
    r->s = *s;
    r->stop = swift_xcalloc((size_t)(s->nstop_ids > 0 ? s->nstop_ids : 1), sizeof(int32_t));
    if (s->nstop_ids > 0)
        memcpy(r->stop, s->stop_ids, (size_t)s->nstop_ids * sizeof(int32_t));
    r->s.stop_ids = r->stop;
    r->cb = cb;
    r->ctx = ctx;
    r->limit = limit;
    if (e->vlm && vlm_prompt(e, r, im, err, errlen) < 0) {
        free(r->prompt);
        free(r->stop);
        free(r);
        return -1;
    }
    r->seqs = swift_xcalloc((size_t)s->n, sizeof(*r->seqs));
    r->seqs[0] = swift_infer_seq_new(e, r, 0);
    r->seqs[0]->slots = s->n;
    r->nseqs = 1;
    r->live = s->n;
    r->t_add = swift_trace_now();
    grow(&e->reqs, &e->cap_req, e->nreq + 1, sizeof(*e->reqs));
    e->reqs[e->nreq++] = r;
    grow(&e->wait, &e->cap_wait, e->nwait + 1, sizeof(*e->wait));
    e->wait[e->nwait++] = r->seqs[0];
    return r->id;
}

/* Drop finished sequences from the queues and free the requests with no choice left. */
static void compact(struct swift_engine *e)
{
    int n = 0;
    for (int i = 0; i < e->nrun; i++)
        if (e->run[i]->state == SEQ_RUNNING)
            e->run[n++] = e->run[i];
    e->nrun = n;
    n = 0;
    for (int i = 0; i < e->nwait; i++)
        if (e->wait[i]->state == SEQ_WAITING)
            e->wait[n++] = e->wait[i];
    e->nwait = n;
    n = 0;
    for (int i = 0; i < e->nreq; i++)
        if (e->reqs[i]->live > 0)
            e->reqs[n++] = e->reqs[i];
        else
            req_free(e, e->reqs[i]);
    e->nreq = n;
}

void swift_infer_compact(struct swift_engine *e)
{
    compact(e);
}

/* The request's spans (queued, prefill, decode) once its last choice ended. */
static void req_trace(const struct ireq *r)
{
    if (!swift_trace_enabled())
        return;
    int64_t now = swift_trace_now();
    int64_t sched = r->t_sched ? r->t_sched : now, first = r->t_first ? r->t_first : now;
    int comp = 0;
    for (int i = 0; i < r->nseqs; i++)
        comp += r->seqs[i]->nout;
    struct swift_targ a[4] = {SWIFT_TARG_I("req", r->id),
                              SWIFT_TARG_I("prompt_tokens", r->plen),
                              SWIFT_TARG_I("cached_tokens", r->cached),
                              SWIFT_TARG_I("completion_tokens", comp)};
    struct swift_targ d[3] = {a[0], a[1], a[3]};
    swift_trace_span("infer", "request_queued", r->t_add, sched, a, 1);
    swift_trace_span("infer", "request_prefill", sched, first, a, 3);
    swift_trace_span("infer", "request_decode", first, now, d, 3);
}

void swift_infer_seq_done(struct swift_engine *e, struct iseq *s)
{
    swift_pkv_seq_clear(&e->kv, &s->kv);
    s->state = SEQ_DONE;
    if (--s->r->live == 0)
        req_trace(s->r);
}

void swift_infer_preempt(struct swift_engine *e, struct iseq *s)
{
    swift_pkv_seq_clear(&e->kv, &s->kv);
    s->state = SEQ_WAITING;
    for (int i = 0; i < e->nrun; i++)
        if (e->run[i] == s) {
            memmove(e->run + i, e->run + i + 1, (size_t)(e->nrun - i - 1) * sizeof(*e->run));
            e->nrun--;
            break;
        }
    grow(&e->wait, &e->cap_wait, e->nwait + 1, sizeof(*e->wait));
    memmove(e->wait + 1, e->wait, (size_t)e->nwait * sizeof(*e->wait));
    e->wait[0] = s;
    e->nwait++;
    e->st.preemptions++;
}

int swift_engine_cancel(struct swift_engine *e, int64_t req)
{
    struct ireq *r = NULL;
    for (int i = 0; i < e->nreq && !r; i++)
        if (e->reqs[i]->id == req && e->reqs[i]->live > 0)
            r = e->reqs[i];
    if (!r)
        return -1;
    for (int c = 0; c < r->s.n; c++) {
        struct iseq *s = c < r->nseqs ? r->seqs[c] : NULL;
        if (s && s->state == SEQ_DONE)
            continue;
        if (s) { /* choices not forked yet have no sequence of their own */
            swift_pkv_seq_clear(&e->kv, &s->kv);
            s->state = SEQ_DONE;
        }
        struct swift_engine_event ev = {.req = r->id,
                                        .choice = c,
                                        .token = -1,
                                        .logprob = 0,
                                        .finish = SWIFT_FINISH_ABORT,
                                        .prompt_tokens = r->plen,
                                        .completion_tokens = s ? s->nout : 0,
                                        .cached_tokens = r->cached};
        if (r->cb)
            r->cb(r->ctx, &ev);
        if (--r->live == 0)
            req_trace(r);
    }
    if (!e->in_step)
        compact(e);
    return 0;
}

void swift_engine_stats(const struct swift_engine *e, struct swift_engine_stats *st)
{
    *st = e->st;
    st->running = st->waiting = 0;
    for (int i = 0; i < e->nrun; i++)
        st->running += e->run[i]->state == SEQ_RUNNING;
    for (int i = 0; i < e->nwait; i++)
        st->waiting += e->wait[i]->state == SEQ_WAITING;
    st->blocks_used = swift_pkv_used(&e->kv);
    st->blocks_total = e->kv.num_blocks;
    st->blocks_peak = e->kv.peak;
    st->blocks_cached = swift_pkv_cached(&e->kv);
}
