/* One engine step (see engine.h): the schedule (running sequences' decode tokens first, then
 * their prompt chunks, then admissions from the queue, preempting the most recently admitted
 * sequence when the pool runs dry), one forward on the paged cache, the n-way fork of prompts
 * just prefilled, sampling and the callbacks. */
#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/trace.h"
#include "lib/infer/internal.h"
#include "lib/model/model.h"

#include <string.h>

#include "lib/core/banned.h"

/* one step's plan: pseq[i] feeds pn[i] tokens */
struct plan {
    int n, tokens, prefill, decode;
};

static int remaining(const struct iseq *s)
{
    return s->r->plen + s->nout - s->kv.len;
}

static int in_plan(const struct swift_engine *e, const struct plan *p, const struct iseq *s)
{
    for (int i = 0; i < p->n; i++)
        if (e->pseq[i] == s)
            return 1;
    return 0;
}

static void plan_add(struct swift_engine *e, struct plan *p, struct iseq *s, int k)
{
    e->pseq[p->n] = s;
    e->pn[p->n++] = k;
    p->tokens += k;
    if (k == 1 && remaining(s) == 1 && s->nout > 0)
        p->decode++;
    else
        p->prefill += k;
}

/* Whether s may be fed in chunks: with chunked prefill on, or to recompute a preempted
 * sequence (prompt and output may exceed one forward even when the prompt alone does not). */
static int chunk_ok(const struct swift_engine *e, const struct iseq *s)
{
    return e->o.chunked_prefill || s->nout > 0;
}

/* The most recently admitted running sequence not in the plan (NULL: none). */
static struct iseq *victim(struct swift_engine *e, const struct plan *p)
{
    struct iseq *v = NULL;
    for (int i = 0; i < e->nrun; i++) {
        struct iseq *s = e->run[i];
        if (s->state == SEQ_RUNNING && !in_plan(e, p, s) && (!v || s->admitted > v->admitted))
            v = s;
    }
    return v;
}

/* Room for k tokens of running s, preempting later sequences (or s itself, the latest) until
 * there is. Returns 1 when s stays, 0 when s itself was preempted. */
static int make_room(struct swift_engine *e, const struct plan *p, struct iseq *s, int k)
{
    while (swift_pkv_reserve(&e->kv, &s->kv, k) < 0) {
        struct iseq *v = victim(e, p);
        if (!v)
            return 0; /* cannot happen: a sequence alone always fits the pool */
        swift_infer_preempt(e, v);
        if (v == s)
            return 0;
    }
    return 1;
}

/* Running sequences: pass 0 their next decode token, pass 1 the next chunk of their prompt. */
static void plan_running(struct swift_engine *e, struct plan *p, int budget)
{
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < e->nrun && p->tokens < budget; i++) {
            struct iseq *s = e->run[i];
            int left = remaining(s);
            if (s->state != SEQ_RUNNING || (pass == 0) != (left == 1) || in_plan(e, p, s))
                continue;
            int k = left < budget - p->tokens ? left : budget - p->tokens;
            if (k < left && !chunk_ok(e, s))
                continue;
            if (make_room(e, p, s, k))
                plan_add(e, p, s, k);
            else
                i = -1; /* the list changed: start over (planned sequences are skipped) */
        }
}

/* s (holding nothing) starts on the cached blocks of its first tokens, leaving at least one
 * token to run (its logits are needed). Returns the tokens found. */
static int prefix_match(struct swift_engine *e, struct iseq *s)
{
    int bs = e->o.block_size, total = s->r->plen + s->nout, found = 0;
    int32_t *tok = e->btok;
    int lim = swift_infer_prefix_limit(e, s);
    if (!e->o.prefix_caching || s->kv.len != 0)
        return 0;
    if (lim > total - 1)
        lim = total - 1;
    while (s->kv.len + bs <= lim) {
        for (int j = 0; j < bs; j++)
            tok[j] = swift_infer_token_at(s, s->kv.len + j);
        int32_t parent = s->kv.nblocks ? s->kv.blocks[s->kv.nblocks - 1] : -1;
        int32_t b = swift_pkv_prefix_find(&e->kv, parent, tok);
        if (b < 0)
            break;
        swift_pkv_share(&e->kv, &s->kv, b);
        found += bs;
    }
    return found;
}

/* s's full blocks not yet offered to the prefix cache, offered. */
static void prefix_register(struct swift_engine *e, struct iseq *s)
{
    int bs = e->o.block_size;
    int32_t *tok = e->btok;
    int lim = swift_infer_prefix_limit(e, s);
    if (!e->o.prefix_caching)
        return;
    if (lim > s->kv.len)
        lim = s->kv.len;
    while ((s->kv.nreg + 1) * bs <= lim) {
        for (int j = 0; j < bs; j++)
            tok[j] = swift_infer_token_at(s, s->kv.nreg * bs + j);
        swift_pkv_prefix_add(&e->kv, &s->kv, tok);
    }
}

/* Admissions from the front of the queue while slots, tokens and free blocks allow. */
static void plan_admit(struct swift_engine *e, struct plan *p, int budget)
{
    int slots = swift_infer_slots_used(e);
    while (e->nwait > 0 && p->tokens < budget && p->n < e->o.max_num_seqs) {
        struct iseq *s = e->wait[0];
        if (s->state != SEQ_WAITING) {
            memmove(e->wait, e->wait + 1, (size_t)(e->nwait - 1) * sizeof(*e->wait));
            e->nwait--;
            continue;
        }
        if (slots + s->slots > e->o.max_num_seqs)
            break;
        int found = prefix_match(e, s);
        int left = remaining(s), k = left < budget - p->tokens ? left : budget - p->tokens;
        if ((k < left && !chunk_ok(e, s)) || swift_pkv_reserve(&e->kv, &s->kv, k) < 0) {
            swift_pkv_seq_clear(&e->kv, &s->kv); /* the shared blocks back: it waits */
            break;
        }
        e->st.cached_tokens += found;
        if (!s->r->t_sched) /* the first admission: what the prompt found */
            s->r->cached = found;
        memmove(e->wait, e->wait + 1, (size_t)(e->nwait - 1) * sizeof(*e->wait));
        e->nwait--;
        swift_infer_run_push(e, s);
        slots += s->slots;
        if (!s->r->t_sched)
            s->r->t_sched = swift_trace_now();
        plan_add(e, p, s, k);
    }
}

/* The n-1 other choices of s's request, sharing its prompt's blocks, now running. */
static void fork_choices(struct swift_engine *e, struct iseq *s)
{
    struct ireq *r = s->r;
    s->slots = 1;
    for (int c = 1; c < r->s.n; c++) {
        struct iseq *t = swift_infer_seq_new(e, r, c);
        swift_pkv_fork(&e->kv, &t->kv, &s->kv);
        r->seqs[r->nseqs++] = t;
        swift_infer_run_push(e, t);
    }
}

static int is_in(const int32_t *ids, int n, int32_t t)
{
    for (int i = 0; i < n; i++)
        if (ids[i] == t)
            return 1;
    return 0;
}

/* Sample s's next token from its logits row, report it, end the choice if it is over. */
static void emit(struct swift_engine *e, struct iseq *s, const float *lg)
{
    struct ireq *r = s->r;
    struct swift_pick pk;
    swift_sample_next(&e->sp, lg, &r->s, r->prompt, r->plen, s->out, s->nout, s->rng, &pk);
    if (!r->t_first)
        r->t_first = swift_trace_now();
    enum swift_finish fin = SWIFT_FINISH_NONE;
    if (pk.token < 0) { /* no finite logit: nothing to add */
        fin = SWIFT_FINISH_STOP;
    } else {
        s->out[s->nout++] = pk.token;
        e->st.generated_tokens++;
        if ((!r->s.ignore_eos && is_in(e->eos, e->neos, pk.token)) ||
            is_in(r->stop, r->s.nstop_ids, pk.token))
            fin = SWIFT_FINISH_STOP;
        else if (s->nout >= r->s.max_tokens || r->plen + s->nout >= r->limit)
            fin = SWIFT_FINISH_LENGTH;
    }
    struct swift_engine_event ev = {.req = r->id,
                                    .choice = s->choice,
                                    .token = pk.token,
                                    .logprob = pk.logprob,
                                    .top_ids = pk.top_ids,
                                    .top_logprobs = pk.top_logprobs,
                                    .ntop = pk.ntop,
                                    .finish = fin,
                                    .prompt_tokens = r->plen,
                                    .completion_tokens = s->nout,
                                    .cached_tokens = r->cached};
    if (fin != SWIFT_FINISH_NONE) /* over before the callback: a cancel from it finds it done */
        swift_infer_seq_done(e, s);
    int stop = r->cb ? r->cb(r->ctx, &ev) : 0;
    if (stop && s->state == SEQ_RUNNING) /* not cancelled from the callback meanwhile */
        swift_infer_seq_done(e, s);
}

/* With a vision-language model: the M-RoPE positions of the plan's N tokens (the prompt's, then
 * the cache position + the rope delta) and the image embeddings of the prompt chunks' pads. */
static void vlm_inputs(struct swift_engine *e, const struct plan *p, int N, struct swift_pkv_mm *mm)
{
    size_t H = (size_t)e->m->cfg.hidden_size;
    int n = 0, nemb = 0;
    for (int i = 0; i < p->n; i++) {
        const struct iseq *s = e->pseq[i];
        const struct swift_vlm_prompt *vp = &s->r->vp;
        for (int j = s->kv.len; j < s->kv.len + e->pn[i]; j++, n++) {
            if (j < vp->T) {
                for (int d = 0; d < 3; d++)
                    e->pos3[(size_t)d * N + n] = vp->pos3[(size_t)d * vp->T + j];
                int32_t r = vp->embed_of[j];
                if (r >= 0) {
                    memcpy(e->emb + nemb * H, vp->embeds + r * H, H * sizeof(float));
                    e->emb_at[nemb++] = n;
                }
            } else {
                for (int d = 0; d < 3; d++)
                    e->pos3[(size_t)d * N + n] = j + vp->delta;
            }
        }
    }
    *mm = (struct swift_pkv_mm){
        .pos3 = e->pos3, .embeds = e->emb, .embed_at = e->emb_at, .nemb = nemb};
}

/* The forward of the plan and what follows it. Returns 0 or -1 (reported). */
static int run_plan(struct swift_engine *e, const struct plan *p)
{
    int N = 0, nw = 0;
    for (int i = 0; i < p->n; i++) {
        struct iseq *s = e->pseq[i];
        int from = s->kv.len, k = e->pn[i];
        for (int j = 0; j < k; j++) {
            e->tok[N] = swift_infer_token_at(s, from + j);
            e->seqof[N++] = i;
        }
        e->fseq[i] = &s->kv;
        if (from + k == s->r->plen + s->nout) { /* its last token: logits for the next */
            e->want[nw] = N - 1;
            e->wseq[nw++] = s;
        }
    }
    struct swift_pkv_mm mm;
    if (e->vlm)
        vlm_inputs(e, p, N, &mm);
    int64_t t0 = swift_trace_now();
    int rc = swift_pkv_forward_mm(
        &e->kv, e->fseq, p->n, e->tok, e->seqof, N, e->want, nw, e->logits, e->vlm ? &mm : NULL);
    e->st.forward_s += (double)(swift_trace_now() - t0) * 1e-9;
    if (rc < 0)
        return -1;
    e->st.prefill_tokens += p->prefill;
    e->st.decode_tokens += p->decode;
    for (int i = 0; i < p->n; i++)
        prefix_register(e, e->pseq[i]);
    for (int w = 0; w < nw; w++) {
        struct iseq *s = e->wseq[w];
        if (s->state != SEQ_RUNNING)
            continue;
        const float *lg = e->logits + (size_t)w * e->V;
        struct ireq *r = s->r;
        if (s->choice == 0 && r->nseqs < r->s.n) {
            fork_choices(e, s);
            for (int c = 0; c < r->s.n; c++)
                if (r->seqs[c]->state == SEQ_RUNNING)
                    emit(e, r->seqs[c], lg);
        } else {
            emit(e, s, lg);
        }
    }
    return 0;
}

/* engine_step's args (docs/trace-schema.md): the step's batch, then the queue, the preemptions
 * so far and the engine's settings, so that swift-trace-analyze can set them against the limits. */
static void step_trace(const struct swift_engine *e, const struct plan *p, int64_t t0)
{
    if (!swift_trace_enabled())
        return;
    int used = swift_pkv_used(&e->kv), waiting = 0;
    for (int i = 0; i < e->nwait; i++)
        waiting += e->wait[i]->state == SEQ_WAITING;
    struct swift_targ a[13] = {SWIFT_TARG_I("step", e->st.steps),
                               SWIFT_TARG_I("seqs", p->n),
                               SWIFT_TARG_I("tokens", p->tokens),
                               SWIFT_TARG_I("prefill_tokens", p->prefill),
                               SWIFT_TARG_I("decode_tokens", p->decode),
                               SWIFT_TARG_I("blocks_used", used),
                               SWIFT_TARG_I("waiting", waiting),
                               SWIFT_TARG_I("preemptions", e->st.preemptions),
                               SWIFT_TARG_I("max_num_seqs", e->o.max_num_seqs),
                               SWIFT_TARG_I("max_num_batched_tokens", e->o.max_num_batched_tokens),
                               SWIFT_TARG_I("num_blocks", e->o.num_blocks),
                               SWIFT_TARG_I("max_model_len", e->o.max_model_len),
                               SWIFT_TARG_I("chunked_prefill", e->o.chunked_prefill)};
    swift_trace_span("infer", "engine_step", t0, swift_trace_now(), a, 13);
    swift_trace_counter("kv_blocks_used", used);
    struct swift_targ pc[2] = {SWIFT_TARG_I("cached_blocks", swift_pkv_cached(&e->kv)),
                               SWIFT_TARG_I("hit_tokens", e->st.cached_tokens)};
    swift_trace_counters("kv_prefix_cache", pc, 2);
}

int swift_engine_step(struct swift_engine *e)
{
    swift_infer_compact(e);
    if (e->nreq == 0)
        return 0;
    int64_t t0 = swift_trace_now();
    struct plan p = {0};
    int budget = e->o.max_num_batched_tokens;
    e->in_step = 1;
    plan_running(e, &p, budget);
    plan_admit(e, &p, budget);
    int rc = p.n > 0 ? run_plan(e, &p) : 0;
    e->in_step = 0;
    e->st.steps++;
    step_trace(e, &p, t0);
    swift_infer_compact(e);
    return rc < 0 ? -1 : e->nreq;
}
