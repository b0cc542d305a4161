/* server_engine — swift-infer --serve's engine thread, its queue and the model (see server.h). */
#include "lib/infer/server_int.h"

#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/trace.h"
#include "lib/preprocess/template.h"
#include "lib/preprocess/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

int srv_load(struct srv *s)
{
    return swift_infer_load(&s->im, &s->o->infer);
}

void srv_release(struct srv *s)
{
    swift_infer_release(&s->im);
    free(s->act);
    free(s->cancel_list);
}

/* ---- a request's prompt (the connection's thread) ---- */

static int chat_ids(struct srv *s, struct sreq *r)
{
    if (!s->im.tpl)
        return swift_oai_fail(&r->er,
                              400,
                              "messages",
                              NULL,
                              "the model's tokenizer has no chat template swift-infer knows; "
                              "start it with --template NAME (%s)",
                              SWIFT_TEMPLATE_NAMES);
    struct swift_encoded e = {0};
    r->rq.conv.agent = s->im.agent;
    int rc = swift_oai_render_chat(&r->rq, s->im.tpl, s->im.st, s->im.tok, &e, &r->er);
    if (rc == 0) {
        r->nids = (int)e.tok.n;
        r->ids = swift_xmalloc((e.tok.n ? e.tok.n : 1) * sizeof(int32_t));
        for (size_t i = 0; i < e.tok.n; i++)
            r->ids[i] = (int32_t)e.tok.ids[i];
    }
    swift_encoded_release(&e);
    return rc;
}

int srv_prepare(struct srv *s, struct sreq *r)
{
    pthread_mutex_lock(&s->tok_mu);
    int rc = r->rq.kind == SWIFT_OAI_CHAT
                 ? chat_ids(s, r)
                 : swift_oai_prompt_ids(&r->rq, s->im.st, s->im.tok, &r->ids, &r->nids, &r->er);
    pthread_mutex_unlock(&s->tok_mu);
    if (rc < 0)
        return -1;
    /* the images decoded here, on the connection's thread, not the engine's; paths as given */
    if (swift_infer_images(&s->im, &r->rq, NULL, &r->ids, &r->nids, &r->px, &r->er) < 0)
        return -1;
    struct swift_sampling *sp = &r->sampling;
    *sp = r->rq.sampling;
    int n = r->nids, L = s->im.max_len;
    if (n >= L)
        return swift_oai_fail(&r->er,
                              400,
                              r->rq.kind == SWIFT_OAI_CHAT ? "messages" : "prompt",
                              NULL,
                              "This model's maximum context length is %d tokens. However, your "
                              "request has %d input tokens. Please reduce the length of the "
                              "input.",
                              L,
                              n);
    if (sp->max_tokens > L - n)
        return swift_oai_fail(&r->er,
                              400,
                              "max_tokens",
                              NULL,
                              "'max_tokens' is too large: %d. This model's maximum context "
                              "length is %d tokens and your request has %d input tokens (%d > "
                              "%d - %d).",
                              sp->max_tokens,
                              L,
                              n,
                              sp->max_tokens,
                              L,
                              n);
    if (sp->max_tokens == 0)
        sp->max_tokens = L - n;
    r->n = sp->n;
    r->nleft = sp->n;
    r->ch = swift_xcalloc((size_t)sp->n, sizeof(*r->ch));
    return 0;
}

/* ---- references ---- */

static void sreq_free(struct sreq *r)
{
    if (r->ch) {
        for (int c = 0; c < r->n; c++)
            swift_oai_choice_release(&r->ch[c]);
        free(r->ch);
    }
    if (r->rq.body)
        swift_oai_request_release(&r->rq);
    pthread_cond_destroy(&r->cv);
    free(r->ids);
    swift_infer_pixels_release(&r->px);
    free(r->first_sent);
    free(r->fin_sent);
    free(r->out);
    free(r);
}

static void unref(struct sreq *r) /* under mu */
{
    if (--r->refs == 0)
        sreq_free(r);
}

int srv_sreq_done(const struct sreq *r)
{
    return r->failed || (r->nleft == 0 && !r->in_engine);
}

int srv_submit(struct srv *s, struct sreq *r)
{
    pthread_mutex_lock(&s->mu);
    if (s->stopping) {
        pthread_mutex_unlock(&s->mu);
        return swift_oai_fail(&r->er, 503, NULL, NULL, "the server is shutting down");
    }
    r->refs = 2;
    r->next = NULL;
    if (s->addq_tail)
        s->addq_tail->next = r;
    else
        s->addq = r;
    s->addq_tail = r;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

void srv_sreq_release(struct sreq *r)
{
    struct srv *s = r->s;
    pthread_mutex_lock(&s->mu);
    if (r->refs == 2 && !srv_sreq_done(r) && !r->cancel && !s->engine_gone) {
        r->cancel = 1;
        if (s->ncancel == s->cancel_cap) {
            s->cancel_cap = s->cancel_cap ? 2 * s->cancel_cap : 16;
            s->cancel_list = swift_xrealloc(s->cancel_list, s->cancel_cap * sizeof(*r));
        }
        s->cancel_list[s->ncancel++] = r;
        r->refs++;
        pthread_cond_signal(&s->work);
    }
    unref(r);
    pthread_mutex_unlock(&s->mu);
}

/* ---- the engine thread ---- */

static void act_remove(struct srv *s, struct sreq *r)
{
    int i = r->act;
    s->act[i] = s->act[--s->nact];
    s->act[i]->act = i;
}

static int on_token(void *ctx, const struct swift_engine_event *ev)
{
    struct sreq *r = ctx;
    struct srv *s = r->s;
    if (ev->choice < 0 || ev->choice >= r->n)
        return 0;
    pthread_mutex_lock(&s->mu);
    struct swift_oai_choice *c = &r->ch[ev->choice];
    int stop = 1;
    if (c->finish == SWIFT_FINISH_NONE) {
        stop = swift_oai_choice_add(c, &r->rq, s->im.tok, ev);
        if (ev->finish == SWIFT_FINISH_ABORT) {
            r->aborted = 1;
            r->engine_failed |= s->failing;
        }
        if ((stop || ev->finish != SWIFT_FINISH_NONE) && --r->nleft == 0) {
            r->in_engine = 0;
            act_remove(s, r);
            pthread_cond_broadcast(&r->cv);
            unref(r);
            pthread_mutex_unlock(&s->mu);
            return stop;
        }
        pthread_cond_broadcast(&r->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return stop;
}

/* Add one queued request to the engine (mu not held). */
static void engine_add(struct srv *s, struct sreq *r, int stopping)
{
    char err[256] = "";
    int64_t id = -1;
    pthread_mutex_lock(&s->mu);
    int skip = r->cancel || stopping;
    if (!skip) { /* in the active list before a callback can fire */
        r->in_engine = 1;
        if (s->nact == s->act_cap) {
            s->act_cap = s->act_cap ? 2 * s->act_cap : 64;
            s->act = swift_xrealloc(s->act, s->act_cap * sizeof(*s->act));
        }
        r->act = s->nact;
        s->act[s->nact++] = r;
    }
    pthread_mutex_unlock(&s->mu);
    if (!skip) {
        struct swift_engine_images ei = {.pixels = r->px.pixels,
                                         .npatches = r->px.npatches,
                                         .grid_thw = r->px.grid,
                                         .nimages = r->px.nimages};
        id = swift_engine_add_images(
            s->im.eng, r->ids, r->nids, &ei, &r->sampling, on_token, r, err, sizeof(err));
    }
    pthread_mutex_lock(&s->mu);
    free(r->ids);
    r->ids = NULL;
    swift_infer_pixels_release(&r->px);
    if (id < 0) {
        if (!skip) {
            r->in_engine = 0;
            act_remove(s, r);
        }
        r->failed = 1;
        if (stopping)
            swift_oai_fail(&r->er, 503, NULL, NULL, "the server is shutting down");
        else
            swift_oai_fail(&r->er, 400, NULL, NULL, "%s", err[0] ? err : "cancelled");
        pthread_cond_broadcast(&r->cv);
        unref(r);
    } else {
        r->eng_id = id;
        pthread_cond_broadcast(&r->cv);
    }
    pthread_mutex_unlock(&s->mu);
}

/* Take the queues (under mu), then add and cancel without it: callbacks take mu. */
static void drain(struct srv *s, int stopping)
{
    struct sreq *q = s->addq;
    s->addq = s->addq_tail = NULL;
    int nc = s->ncancel;
    struct sreq **cl = NULL;
    if (nc) {
        cl = swift_xmalloc((size_t)nc * sizeof(*cl));
        memcpy(cl, s->cancel_list, (size_t)nc * sizeof(*cl));
        s->ncancel = 0;
    }
    pthread_mutex_unlock(&s->mu);
    while (q) {
        struct sreq *next = q->next;
        engine_add(s, q, stopping);
        q = next;
    }
    for (int i = 0; i < nc; i++) {
        pthread_mutex_lock(&s->mu);
        int live = cl[i]->in_engine;
        int64_t id = cl[i]->eng_id;
        pthread_mutex_unlock(&s->mu);
        if (live)
            swift_engine_cancel(s->im.eng, id);
        pthread_mutex_lock(&s->mu);
        unref(cl[i]);
        pthread_mutex_unlock(&s->mu);
    }
    free(cl);
    if (stopping) {
        for (;;) {
            pthread_mutex_lock(&s->mu);
            int64_t id = s->nact ? s->act[s->nact - 1]->eng_id : 0;
            pthread_mutex_unlock(&s->mu);
            if (!id || swift_engine_cancel(s->im.eng, id) < 0)
                break;
        }
    }
    pthread_mutex_lock(&s->mu);
}

/* A backend error (a step's forward failed, reported on stderr): every request in flight is
 * cancelled and answered 503 with a server_error (srv_engine_error); the engine takes new
 * requests after it. */
static void fail_all(struct srv *s)
{
    pthread_mutex_lock(&s->mu);
    s->failing = 1;
    int64_t id = s->nact ? s->act[s->nact - 1]->eng_id : 0;
    pthread_mutex_unlock(&s->mu);
    while (id && swift_engine_cancel(s->im.eng, id) == 0) {
        pthread_mutex_lock(&s->mu);
        id = s->nact ? s->act[s->nact - 1]->eng_id : 0;
        pthread_mutex_unlock(&s->mu);
    }
    pthread_mutex_lock(&s->mu);
    s->failing = 0;
    pthread_mutex_unlock(&s->mu);
}

static void *engine_main(void *arg)
{
    struct srv *s = arg;
    swift_trace_thread_name("engine");
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->addq && !s->ncancel && !s->nact && !s->stopping)
            pthread_cond_wait(&s->work, &s->mu);
        int stopping = s->stopping;
        drain(s, stopping);
        if (stopping && !s->nact && !s->addq)
            break;
        if (!s->nact)
            continue;
        pthread_mutex_unlock(&s->mu);
        int rc = swift_engine_step(s->im.eng);
        if (rc < 0)
            fail_all(s);
        pthread_mutex_lock(&s->mu);
    }
    s->engine_gone = 1;
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int srv_engine_start(struct srv *s)
{
    if (pthread_create(&s->thread, NULL, engine_main, s) != 0)
        return swift_error("cannot start the engine thread");
    s->thread_started = 1;
    return 0;
}

void srv_engine_stop(struct srv *s)
{
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->mu);
    if (s->thread_started)
        pthread_join(s->thread, NULL);
    s->thread_started = 0;
}
