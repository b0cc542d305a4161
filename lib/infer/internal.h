/* What the engine's files share (lib/infer/engine.c: requests and the scheduler; step.c: one
 * step's forward, sampling and events). Not part of the interface (engine.h). */
#ifndef SWIFT_INFER_INTERNAL_H
#define SWIFT_INFER_INTERNAL_H

#include "lib/infer/engine.h"
#include "lib/infer/sample.h"
#include "lib/model/pkv.h"
#include "lib/model/vlm.h"

#include <stdint.h>

enum { SEQ_WAITING, SEQ_RUNNING, SEQ_DONE };

struct ireq;

/* One choice of a request: prompt ++ out, the first kv.len of them in the cache. */
struct iseq {
    struct ireq *r;
    int choice;
    int slots; /* sequence slots it takes: n until its request forks, then 1 */
    int state;
    long admitted; /* admission stamp: preemption takes the largest */
    struct swift_pkv_seq kv;
    int32_t *out; /* (max_tokens) generated */
    int nout;
    uint64_t rng[4];
};

struct ireq {
    int64_t id;
    int32_t *prompt;
    int plen;
    struct swift_sampling s; /* stop_ids points to the copy below */
    int32_t *stop;
    swift_engine_cb cb;
    void *ctx;
    struct iseq **seqs; /* n; only [0] until the prompt is prefilled (forked) */
    int nseqs, live;    /* choices created; choices not finished */
    int limit;          /* prompt + completion tokens at most (max_model_len, the pool) */
    int cached;         /* prompt tokens found in the prefix cache at the first admission */
    int64_t t_add, t_sched, t_first; /* ns: queued, first scheduled, first token (0: not yet) */
    struct swift_vlm_prompt vp;      /* with a vision-language model: positions, image embeds */
};

struct swift_engine {
    struct swift_model *m;
    struct swift_engine_opts o;
    int32_t *eos;
    int neos, V;
    struct swift_pkv kv;
    struct swift_sampler sp;
    struct iseq **run, **wait; /* running in admission order; waiting, front first */
    int nrun, nwait, cap_run, cap_wait;
    struct ireq **reqs; /* live requests */
    int nreq, cap_req;
    int64_t next_id;
    long stamp;
    int in_step;
    /* one step's forward: per token, its sequence's index in fseq; per wanted row its sequence */
    int32_t *tok;
    int *seqof, *want;
    struct swift_pkv_seq **fseq;
    struct iseq **pseq, **wseq;
    int *pn; /* tokens of pseq[i] in this step */
    float *logits;
    int32_t *btok;         /* (block_size) one block's tokens, for the prefix cache */
    struct swift_vlm *vlm; /* NULL: a text model */
    int32_t *pos3;         /* (3, max_num_batched_tokens) with vlm: the step's M-RoPE positions */
    float *emb;            /* (max_num_batched_tokens, hidden): the step's image embeddings */
    int32_t *emb_at;       /* (max_num_batched_tokens) the tokens they replace */
    struct swift_engine_stats st;
};

/* helpers of engine.c used by step.c */
int swift_infer_slots_used(const struct swift_engine *e);
void swift_infer_preempt(struct swift_engine *e, struct iseq *s);
void swift_infer_seq_done(struct swift_engine *e, struct iseq *s);
int32_t swift_infer_token_at(const struct iseq *s, int i); /* prompt ++ out */
void swift_infer_run_push(struct swift_engine *e, struct iseq *s);
struct iseq *swift_infer_seq_new(struct swift_engine *e, struct ireq *r, int choice);
void swift_infer_compact(struct swift_engine *e); /* drop what ended */
/* Tokens of s's request at the start of its cache that the prefix cache may hold: all, or those
 * before its first image pad. */
int swift_infer_prefix_limit(const struct swift_engine *e, const struct iseq *s);

#endif
