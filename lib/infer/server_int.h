/* server_int — what server.c (HTTP side) and server_engine.c (engine thread) share. */
#ifndef SWIFT_INFER_SERVER_INT_H
#define SWIFT_INFER_SERVER_INT_H

#include "lib/infer/engine.h"
#include "lib/infer/image.h"
#include "lib/infer/openai.h"
#include "lib/infer/server.h"
#include "lib/model/model.h"

#include <pthread.h>
#include <stdint.h>

struct srv;

/* One completion request between its connection and the engine. Fields below `mu` are read and
 * written under srv.mu once the request is queued. */
struct sreq {
    struct srv *s;
    struct swift_oai_request rq;
    int32_t *ids; /* the prompt; freed once added */
    int nids;
    struct swift_infer_pixels px;   /* its images (lib/infer/image.h); freed once added */
    struct swift_sampling sampling; /* max_tokens filled */
    char id[64];                    /* chatcmpl-… / cmpl-… */
    long created;
    uint64_t call_seed;
    int fd;     /* the connection's socket, to notice the client leave */
    int64_t t0; /* trace clock at arrival */
    /* mu */
    pthread_cond_t cv;
    struct swift_oai_choice *ch;
    int n, nleft;
    int refs;      /* the connection's and the engine's */
    int in_engine; /* added, choices going */
    int cancel;    /* the connection asked to cancel */
    int failed;    /* er holds why (not added, or stopped) */
    struct swift_oai_error er;
    int aborted;
    int engine_failed; /* aborted because a step of the engine failed (a 503 server_error) */
    int64_t eng_id;
    int act;           /* index in srv.act while in_engine */
    struct sreq *next; /* in a queue */
    /* streaming (the connection's thread, under mu) */
    char *first_sent, *fin_sent;
    char *out;
    size_t outlen, outpos, outcap;
    int ended; /* [DONE] (or the error event) appended */
};

struct srv {
    const struct swift_serve_opts *o;
    const char *api_key;
    const char *model_name;
    struct swift_infer_model im; /* the model, tokenizer, template, engine (load.c) */
    pthread_mutex_t tok_mu;      /* im.st */
    long created;
    pthread_t thread;
    int thread_started;
    /* mu */
    pthread_mutex_t mu;
    pthread_cond_t work;
    struct sreq *addq, *addq_tail; /* linked by next */
    struct sreq **cancel_list;     /* each holds a reference */
    int ncancel, cancel_cap;
    int stopping, engine_gone, up;
    int failing; /* fail_all is cancelling after a failed engine step */
    /* engine thread only */
    struct sreq **act;
    int nact, act_cap;
};

/* server_engine.c */
int srv_load(struct srv *s);
void srv_release(struct srv *s);
int srv_engine_start(struct srv *s);
void srv_engine_stop(struct srv *s); /* cancel all, join */
/* Prompt ids and max_tokens of a parsed request (HTTP thread); 0, or -1 with r->er. */
int srv_prepare(struct srv *s, struct sreq *r);
/* Queue r (refs becomes 2); -1 with r->er (503) when stopping. */
int srv_submit(struct srv *s, struct sreq *r);
/* The connection lets go of r: cancels it when unfinished. Takes mu. */
void srv_sreq_release(struct sreq *r);
int srv_sreq_done(const struct sreq *r); /* under mu */

#endif
