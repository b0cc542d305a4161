/* lib/infer's engine and lib/model's paged cache: the paged forward against swift_kv_forward
 * (bit for bit on the CPU), greedy output against transformers' generate (tests/fixtures/eval,
 * tests/ref/gen_eval_fixtures.py: Llama, Qwen2, Qwen3) with requests joining mid-run, small
 * blocks and a pool small enough to preempt, n > 1 on a shared prompt, seeded sampling whatever
 * the batch, top-k 1, the penalties against a hand computation, cancellation and leaks. */
#include "kernels/ops.h"
#include "lib/core/trace.h"
#include "lib/eval/generate.h"
#include "lib/infer/engine.h"
#include "lib/infer/sample.h"
#include "lib/model/backend.h"
#include "lib/model/kv.h"
#include "lib/model/model.h"
#include "lib/model/pkv.h"
#include "lib/formats/safetensors.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#define EOS 256
#define MAXP 8

struct ref {
    struct swift_safetensors st;
    int P, TP, G;
    int32_t prompt[MAXP][64], plen[MAXP], greedy[MAXP][64], glen[MAXP];
};

static const void *tensor(struct ref *r, const char *name, int64_t *d1)
{
    const struct swift_st_tensor *t = swift_safetensors_find(&r->st, name);
    assert_non_null(t);
    if (d1)
        *d1 = t->ndim > 1 ? t->shape[1] : 1;
    return t->data;
}

static void ref_load(struct ref *r, const char *arch)
{
    char path[256];
    snprintf(path, sizeof(path), "tests/fixtures/eval/%s/ref.safetensors", arch);
    assert_int_equal(swift_safetensors_open(&r->st, path), 0);
    int64_t tp, g;
    const struct swift_st_tensor *pl = swift_safetensors_find(&r->st, "prompt_len");
    assert_non_null(pl);
    r->P = (int)pl->shape[0];
    assert_true(r->P <= MAXP);
    const char *pi = tensor(r, "prompt_ids", &tp), *gi = tensor(r, "greedy_ids", &g);
    const char *pn = tensor(r, "prompt_len", NULL), *gn = tensor(r, "greedy_len", NULL);
    assert_true(tp <= 64 && g <= 64);
    r->TP = (int)tp;
    r->G = (int)g;
    for (int p = 0; p < r->P; p++) { /* the mapping may be unaligned */
        memcpy(r->prompt[p], pi + (size_t)p * tp * 4, (size_t)tp * 4);
        memcpy(r->greedy[p], gi + (size_t)p * g * 4, (size_t)g * 4);
        memcpy(&r->plen[p], pn + (size_t)p * 4, 4);
        memcpy(&r->glen[p], gn + (size_t)p * 4, 4);
    }
    swift_safetensors_close(&r->st);
}

static void load_model(struct swift_model *m, const char *arch)
{
    char dir[256];
    snprintf(dir, sizeof(dir), "tests/fixtures/eval/%s", arch);
    struct swift_backend be; /* strict under SWIFT_CPU_STRICT_HOST=1 */
    assert_int_equal(swift_backend_select(&be, "cpu"), 0);
    assert_int_equal(swift_model_load(m, dir, be.ops, 1), 0);
}

/* ---- the paged forward ---- */

/* The same interleaved tokens of three sequences through swift_kv_forward and the paged
 * forward (blocks of 3, a forked sequence writing into a shared partial block): the same bits. */
static void test_paged_forward(void **state)
{
    (void)state;
    const char *archs[] = {"llama", "qwen2", "qwen3"};
    for (int a = 0; a < 3; a++) {
        struct swift_model m;
        load_model(&m, archs[a]);
        int V = m.cfg.vocab_size;
        struct swift_kv kv;
        struct swift_pkv pk;
        assert_int_equal(swift_kv_init(&kv, &m, 4, 64, 32), 0);
        assert_int_equal(swift_pkv_init(&pk, &m, 40, 3, 32), 0);
        struct swift_pkv_seq s[4] = {{0}}, *sp[4] = {&s[0], &s[1], &s[2], &s[3]};
        float *l1 = malloc((size_t)32 * V * 4), *l2 = malloc((size_t)32 * V * 4);
        uint64_t x = 7;
        for (int round = 0; round < 6; round++) {
            int32_t tok[32];
            int rowof[32], want[32], N = 0, add[4] = {round * round + 1, 5 - round, 2, 1};
            if (round == 3) { /* row 3 = a fork of row 0 (a partial block shared) */
                swift_kv_copy_row(&kv, 3, 0);
                swift_pkv_fork(&pk, &s[3], &s[0]);
                assert_true(s[0].len % 3 != 0);
            }
            for (int r = 0; r < (round >= 3 ? 4 : 3); r++) {
                assert_int_equal(swift_pkv_reserve(&pk, &s[r], add[r]), 0);
                for (int j = 0; j < add[r]; j++) {
                    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
                    tok[N] = (int32_t)((x >> 33) % (uint64_t)V);
                    rowof[N] = r;
                    want[N] = N;
                    N++;
                }
            }
            assert_int_equal(swift_kv_forward(&kv, tok, rowof, N, want, N, l1), 0);
            assert_int_equal(swift_pkv_forward(&pk, sp, 4, tok, rowof, N, want, N, l2), 0);
            assert_memory_equal(l1, l2, (size_t)N * V * 4);
        }
        for (int r = 0; r < 4; r++)
            assert_int_equal(s[r].len, kv.len[r]);
        for (int r = 0; r < 4; r++)
            swift_pkv_seq_free(&pk, &s[r]);
        assert_int_equal(swift_pkv_used(&pk), 0);
        printf("# %s: paged forward logits identical to the contiguous cache's\n", archs[a]);
        free(l1);
        free(l2);
        swift_pkv_release(&pk);
        swift_kv_release(&kv);
        swift_model_free(&m);
    }
}

/* Reference counts and copy-on-write: a fork takes no block; the first write into the shared
 * partial block copies it; full blocks stay shared; everything comes back. */
static void test_pkv_blocks(void **state)
{
    (void)state;
    struct swift_model m;
    load_model(&m, "llama");
    struct swift_pkv pk;
    assert_int_equal(swift_pkv_init(&pk, &m, 6, 4, 16), 0);
    struct swift_pkv_seq a = {0}, b = {0};
    assert_int_equal(swift_pkv_need(&pk, &a, 6), 2);
    assert_int_equal(swift_pkv_reserve(&pk, &a, 6), 0);
    a.len = 6; /* as if a forward had run */
    assert_int_equal(swift_pkv_used(&pk), 2);
    swift_pkv_fork(&pk, &b, &a);
    assert_int_equal(swift_pkv_used(&pk), 2);
    assert_int_equal(b.blocks[0], a.blocks[0]);
    assert_int_equal(swift_pkv_need(&pk, &b, 1), 1); /* the copy of the shared partial block */
    assert_int_equal(swift_pkv_reserve(&pk, &b, 1), 0);
    assert_int_equal(b.blocks[0], a.blocks[0]);
    assert_int_not_equal(b.blocks[1], a.blocks[1]);
    assert_int_equal(swift_pkv_need(&pk, &a, 1), 0); /* a's partial block is its own now */
    assert_int_equal(swift_pkv_used(&pk), 3);
    assert_int_equal(swift_pkv_reserve(&pk, &a, 100), -1); /* too big: nothing changed */
    assert_int_equal(swift_pkv_used(&pk), 3);
    swift_pkv_seq_free(&pk, &a);
    assert_int_equal(swift_pkv_used(&pk), 2); /* b still holds the shared full block */
    swift_pkv_seq_free(&pk, &b);
    assert_int_equal(swift_pkv_used(&pk), 0);
    assert_int_equal(pk.peak, 3);
    swift_pkv_release(&pk);
    swift_model_free(&m);
}

/* ---- the engine ---- */

#define MAXOUT 64
struct out {
    int32_t tok[4][MAXOUT];
    float lp[4][MAXOUT];
    int n[4];
    enum swift_finish fin[4];
    int events, aborts, prompt_tokens, cached;
    int stop_after; /* > 0: the callback ends choice 0 after this many tokens */
};

static int on_token(void *ctx, const struct swift_engine_event *ev)
{
    struct out *o = ctx;
    o->events++;
    o->prompt_tokens = ev->prompt_tokens;
    o->cached = ev->cached_tokens;
    assert_true(ev->choice >= 0 && ev->choice < 4);
    assert_int_equal(o->fin[ev->choice], SWIFT_FINISH_NONE); /* nothing after the end */
    if (ev->token < 0) {
        assert_int_equal(ev->finish, SWIFT_FINISH_ABORT);
        o->aborts++;
        o->fin[ev->choice] = ev->finish;
        return 0;
    }
    int c = ev->choice;
    assert_true(o->n[c] < MAXOUT);
    o->lp[c][o->n[c]] = ev->logprob;
    o->tok[c][o->n[c]++] = ev->token;
    assert_int_equal(ev->completion_tokens, o->n[c]);
    o->fin[c] = ev->finish;
    if (o->stop_after > 0 && c == 0 && o->n[c] == o->stop_after) {
        o->fin[c] = SWIFT_FINISH_STOP;
        return 1;
    }
    return 0;
}

static int unchunked; /* engine(): chunked prefill off */

static struct swift_engine *engine(struct swift_model *m, int seqs, int tokens, int bs, int nb)
{
    struct swift_engine_opts o = swift_engine_defaults();
    o.chunked_prefill = !unchunked;
    o.max_num_seqs = seqs;
    o.max_num_batched_tokens = tokens;
    o.block_size = bs;
    o.num_blocks = nb;
    char err[256] = "";
    int32_t eos = EOS;
    struct swift_engine *e = swift_engine_new(m, &o, &eos, 1, err, sizeof(err));
    if (!e)
        fail_msg("engine: %s", err);
    return e;
}

static int64_t add(struct swift_engine *e, const int32_t *p, int n, const struct swift_sampling *s,
                   struct out *o)
{
    char err[256] = "";
    int64_t id = swift_engine_add(e, p, n, s, on_token, o, err, sizeof(err));
    if (id < 0)
        fail_msg("add: %s", err);
    return id;
}

static void run_all(struct swift_engine *e)
{
    int rc, guard = 0;
    while ((rc = swift_engine_step(e)) > 0)
        assert_true(++guard < 10000);
    assert_int_equal(rc, 0);
}

/* Greedy against transformers' generate: the prompts join one per step (twice each: the
 * second copy joins later), blocks of bs tokens, a pool of nb blocks. */
static void check_greedy(const char *arch, int seqs, int tokens, int bs, int nb, long *preempt)
{
    struct ref r;
    ref_load(&r, arch);
    struct swift_model m;
    load_model(&m, arch);
    struct swift_engine *e = engine(&m, seqs, tokens, bs, nb);
    struct swift_sampling s = swift_sampling_defaults();
    s.max_tokens = r.G;
    struct out o[2 * MAXP];
    memset(o, 0, sizeof(o));
    int next = 0, total = 2 * r.P, guard = 0;
    while (next < total || swift_engine_step(e) > 0) {
        assert_true(++guard < 10000);
        if (next < total) { /* one more request, then a step */
            int p = next % r.P;
            add(e, r.prompt[p], r.plen[p], &s, &o[next]);
            next++;
            assert_true(swift_engine_step(e) >= 0);
        }
    }
    int same = 0;
    for (int i = 0; i < total; i++) {
        int p = i % r.P;
        assert_int_equal(o[i].n[0], r.glen[p]);
        assert_memory_equal(o[i].tok[0], r.greedy[p], (size_t)r.glen[p] * 4);
        same += o[i].n[0];
        assert_int_equal(o[i].fin[0],
                         r.greedy[p][r.glen[p] - 1] == EOS ? SWIFT_FINISH_STOP
                                                           : SWIFT_FINISH_LENGTH);
    }
    struct swift_engine_stats st;
    swift_engine_stats(e, &st);
    assert_int_equal(st.blocks_used, 0);
    assert_int_equal(st.running + st.waiting, 0);
    printf("# %s: %d/%d tokens equal to transformers' generate (seqs %d, tokens %d, blocks %d x "
           "%d, peak %d, preemptions %ld, steps %ld, cached %ld)\n",
           arch,
           same,
           same,
           seqs,
           tokens,
           st.blocks_total,
           bs,
           st.blocks_peak,
           st.preemptions,
           st.steps,
           st.cached_tokens);
    if (preempt)
        *preempt = st.preemptions;
    swift_engine_free(e);
    swift_model_free(&m);
}

static void test_greedy(void **state)
{
    (void)state;
    long pre = 0;
    check_greedy("llama", 8, 64, 4, 0, NULL);
    check_greedy("qwen2", 4, 16, 4, 0, NULL);
    check_greedy("qwen3", 8, 8, 4, 0, NULL); /* chunks of at most 8 tokens */
    check_greedy("llama", 4, 7, 2, 0, NULL); /* chunks across prompt boundaries */
    /* a pool of 12 blocks of 4 (48 tokens) for 8 prompts of up to 23 + G tokens: preemption */
    check_greedy("llama", 8, 32, 4, 12, &pre);
    assert_true(pre > 0);
    check_greedy("qwen3", 8, 32, 4, 12, &pre);
    assert_true(pre > 0);
}

/* Chunked prefill off: each prompt in one forward; a preempted sequence's recompute (prompt and
 * output, more than one forward holds) is chunked all the same, or it would wait forever. */
static void test_greedy_unchunked(void **state)
{
    (void)state;
    long pre = 0;
    unchunked = 1;
    check_greedy("llama", 8, 24, 4, 12, &pre);
    assert_true(pre > 0);
    unchunked = 0;
}

/* Prefix caching: a request that starts with another's prompt while that one runs shares its
 * full blocks (all but the last token's) and generates the same; one that shares only the first
 * block takes that block; with caching off nothing is shared. */
static void test_prefix(void **state)
{
    (void)state;
    struct ref r;
    ref_load(&r, "llama");
    struct swift_model m;
    load_model(&m, "llama");
    int p = 3, L = r.plen[p];
    assert_int_equal(L, 23);
    for (int on = 0; on < 2; on++) {
        struct swift_engine_opts o = swift_engine_defaults();
        o.max_num_seqs = 4;
        o.max_num_batched_tokens = 64;
        o.block_size = 4;
        o.prefix_caching = on;
        char err[256];
        int32_t eos = EOS;
        struct swift_engine *e = swift_engine_new(&m, &o, &eos, 1, err, sizeof(err));
        assert_non_null(e);
        struct swift_sampling s = swift_sampling_defaults();
        s.max_tokens = r.G;
        struct out a, b, c;
        memset(&a, 0, sizeof(a));
        memset(&b, 0, sizeof(b));
        memset(&c, 0, sizeof(c));
        add(e, r.prompt[p], L, &s, &a);
        assert_true(swift_engine_step(e) > 0);
        add(e, r.prompt[p], L, &s, &b); /* 22 tokens before the last: 5 blocks of 4 */
        int32_t other[10];
        memcpy(other, r.prompt[p], 6 * sizeof(int32_t));
        for (int i = 6; i < 10; i++)
            other[i] = 65 + i;
        add(e, other, 10, &s, &c); /* only the first block in common */
        run_all(e);
        assert_memory_equal(a.tok[0], r.greedy[p], (size_t)r.glen[p] * 4);
        assert_int_equal(b.n[0], r.glen[p]);
        assert_memory_equal(b.tok[0], r.greedy[p], (size_t)r.glen[p] * 4);
        struct swift_engine_stats st;
        swift_engine_stats(e, &st);
        assert_int_equal(st.cached_tokens, on ? 20 + 4 : 0);
        assert_int_equal(st.prefill_tokens, on ? L + 3 + 6 : 2 * L + 10);
        assert_int_equal(st.blocks_used, 0);
        assert_int_equal(a.cached, 0);
        assert_int_equal(b.cached, on ? 20 : 0);
        assert_int_equal(c.cached, on ? 4 : 0);
        swift_engine_free(e);
    }
    swift_model_free(&m);
}

/* The prefix cache outlives its holders: a request that ends leaves its full blocks cached, the
 * same prompt later finds them (20 of 23 tokens) and generates the same; a request that needs
 * the pool evicts them (the chains from their ends) and the prompt after it is still right. */
static void test_prefix_kept(void **state)
{
    (void)state;
    struct ref r;
    ref_load(&r, "llama");
    struct swift_model m;
    load_model(&m, "llama");
    int p = 3, q = -1, L = r.plen[p];
    assert_int_equal(L, 23);
    for (int i = 0; i < r.P; i++) /* the longest other prompt */
        if (i != p && (q < 0 || r.plen[i] > r.plen[q]))
            q = i;
    int longest = r.plen[q] > L ? r.plen[q] : L;
    int nb = (longest + r.G + 3) / 4 + 1; /* the longer request alone, and one block more */
    struct swift_engine *e = engine(&m, 4, 64, 4, nb);
    struct swift_sampling s = swift_sampling_defaults();
    s.max_tokens = r.G;
    struct swift_engine_stats st;
    struct out o[4];
    memset(o, 0, sizeof(o));
    const int order[4] = {p, p, q, p};
    for (int k = 0; k < 4; k++) {
        int pr = order[k];
        add(e, r.prompt[pr], r.plen[pr], &s, &o[k]);
        run_all(e);
        assert_int_equal(o[k].n[0], r.glen[pr]);
        assert_memory_equal(o[k].tok[0], r.greedy[pr], (size_t)r.glen[pr] * 4);
        swift_engine_stats(e, &st);
        assert_int_equal(st.blocks_used, 0);
        assert_true(st.blocks_cached > 0 && st.blocks_cached <= nb);
    }
    assert_int_equal(o[0].cached, 0);
    assert_int_equal(o[1].cached, 20); /* 22 tokens before the last: 5 blocks of 4 */
    /* the other request took the free blocks and evicted the cached chain's end, not its start */
    assert_int_equal(o[3].cached, 16);
    swift_engine_free(e);
    swift_model_free(&m);
}

/* n = 2 greedy on one prompt: the prompt is prefilled once, both choices are transformers'. */
static void test_n2(void **state)
{
    (void)state;
    struct ref r;
    ref_load(&r, "llama");
    struct swift_model m;
    load_model(&m, "llama");
    struct swift_engine *e = engine(&m, 4, 64, 4, 0);
    struct swift_sampling s = swift_sampling_defaults();
    s.max_tokens = r.G;
    s.n = 2;
    struct out o;
    memset(&o, 0, sizeof(o));
    int p = r.P - 1; /* the longest prompt: whole blocks shared, a partial one copied */
    add(e, r.prompt[p], r.plen[p], &s, &o);
    run_all(e);
    for (int c = 0; c < 2; c++) {
        assert_int_equal(o.n[c], r.glen[p]);
        assert_memory_equal(o.tok[c], r.greedy[p], (size_t)r.glen[p] * 4);
    }
    struct swift_engine_stats st;
    swift_engine_stats(e, &st);
    assert_int_equal(st.prefill_tokens, r.plen[p]);
    assert_int_equal(st.decode_tokens, 2 * (r.glen[p] - 1));
    assert_int_equal(st.blocks_used, 0);
    assert_int_equal(o.prompt_tokens, r.plen[p]);
    swift_engine_free(e);
    swift_model_free(&m);
}

/* Cancel a running and a queued request: one abort event per choice, blocks back. */
static void test_cancel(void **state)
{
    (void)state;
    struct ref r;
    ref_load(&r, "llama");
    struct swift_model m;
    load_model(&m, "llama");
    struct swift_engine *e = engine(&m, 1, 64, 4, 0);
    struct swift_sampling s = swift_sampling_defaults();
    s.max_tokens = 40;
    s.ignore_eos = 1;
    struct out a, b;
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    int64_t ia = add(e, r.prompt[3], r.plen[3], &s, &a);
    s.n = 1;
    int64_t ib = add(e, r.prompt[2], r.plen[2], &s, &b);
    assert_true(ia >= 1 && ib > ia);
    for (int i = 0; i < 3; i++)
        assert_int_equal(swift_engine_step(e), 2);
    struct swift_engine_stats st;
    swift_engine_stats(e, &st);
    assert_true(st.blocks_used > 0);
    assert_int_equal(st.running, 1);
    assert_int_equal(st.waiting, 1);
    assert_int_equal(swift_engine_cancel(e, ia), 0);
    assert_int_equal(a.aborts, 1);
    assert_int_equal(a.fin[0], SWIFT_FINISH_ABORT);
    assert_int_equal(a.n[0], 3);
    swift_engine_stats(e, &st);
    assert_int_equal(st.blocks_used, 0);
    assert_int_equal(swift_engine_cancel(e, ia), -1); /* gone */
    assert_int_equal(swift_engine_cancel(e, ib), 0);  /* queued */
    assert_int_equal(b.aborts, 1);
    assert_int_equal(b.n[0], 0);
    assert_int_equal(swift_engine_step(e), 0);
    swift_engine_stats(e, &st);
    assert_int_equal(st.blocks_used, 0);
    swift_engine_free(e);
    swift_model_free(&m);
}

/* A callback that cancels another request, then its own, and queues a new one. */
struct reentry {
    struct swift_engine *e;
    int64_t other, self, added;
    struct out mine, *other_out, *added_out;
    const int32_t *prompt;
};
static int reentrant(void *ctx, const struct swift_engine_event *ev)
{
    struct reentry *x = ctx;
    on_token(&x->mine, ev);
    if (ev->token >= 0 && x->mine.n[0] == 2) {
        assert_int_equal(swift_engine_cancel(x->e, x->other), 0);
        assert_int_equal(x->other_out->aborts, 1);
        char err[128];
        struct swift_sampling s = swift_sampling_defaults();
        s.max_tokens = 3;
        x->added = swift_engine_add(x->e, x->prompt, 4, &s, on_token, x->added_out, err, 128);
        assert_true(x->added > 0);
    }
    if (ev->token >= 0 && x->mine.n[0] == 4)
        assert_int_equal(swift_engine_cancel(x->e, x->self), 0);
    return 0;
}

static void test_cancel_in_callback(void **state)
{
    (void)state;
    struct ref r;
    ref_load(&r, "llama");
    struct swift_model m;
    load_model(&m, "llama");
    struct swift_engine *e = engine(&m, 4, 64, 4, 0);
    struct swift_sampling s = swift_sampling_defaults();
    s.max_tokens = 20;
    s.ignore_eos = 1;
    struct out other, added;
    memset(&other, 0, sizeof(other));
    memset(&added, 0, sizeof(added));
    struct reentry x = {.e = e, .other_out = &other, .added_out = &added, .prompt = r.prompt[3]};
    memset(&x.mine, 0, sizeof(x.mine));
    char err[128];
    x.self = swift_engine_add(e, r.prompt[3], r.plen[3], &s, reentrant, &x, err, 128);
    x.other = add(e, r.prompt[2], r.plen[2], &s, &other);
    run_all(e);
    assert_int_equal(x.mine.n[0], 4);
    assert_int_equal(x.mine.aborts, 1);
    assert_int_equal(x.mine.fin[0], SWIFT_FINISH_ABORT);
    assert_int_equal(other.aborts, 1);
    assert_true(other.n[0] >= 1 && other.n[0] <= 2);
    assert_int_equal(added.n[0], 3);
    assert_int_equal(added.fin[0], SWIFT_FINISH_LENGTH);
    struct swift_engine_stats st;
    swift_engine_stats(e, &st);
    assert_int_equal(st.blocks_used, 0);
    swift_engine_free(e);
    swift_model_free(&m);
}

/* A random workload against each request run alone: 24 requests built from two shared
 * "system prompts" and random tails, joining at random steps, n 1..3, greedy and seeded
 * sampling, on a pool small enough to preempt, prefix caching on; three are cancelled midway
 * (what they got is a prefix of what they get alone). */
#define NR 24
struct job {
    int32_t prompt[48];
    int len, at, cancel_at;
    struct swift_sampling s;
    struct out o;
    int64_t id;
};

static void test_stress(void **state)
{
    (void)state;
    struct swift_model m;
    load_model(&m, "qwen3");
    int V = m.cfg.vocab_size;
    static struct job jobs[NR];
    memset(jobs, 0, sizeof(jobs));
    uint64_t x = 99;
#define RND(n) ((int)((x = x * 6364136223846793005ULL + 1442695040888963407ULL) >> 33) % (n))
    int32_t sys[2][20];
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 20; i++)
            sys[k][i] = RND(V - 4);
    for (int j = 0; j < NR; j++) {
        struct job *b = &jobs[j];
        int pre = RND(3); /* none, the first or the second system prompt */
        int plen = pre ? 9 + RND(12) : 0;
        for (int i = 0; i < plen; i++)
            b->prompt[b->len++] = sys[pre - 1][i];
        for (int i = 0, t = 1 + RND(20); i < t; i++)
            b->prompt[b->len++] = RND(V - 4);
        b->at = RND(30);
        b->s = swift_sampling_defaults();
        b->s.max_tokens = 1 + RND(20);
        b->s.n = 1 + RND(3);
        b->s.ignore_eos = RND(2);
        if (RND(2)) {
            b->s.temperature = 0.8;
            b->s.top_k = 40;
            b->s.seed = (uint64_t)j;
        }
        b->cancel_at = j % 8 == 3 ? 1 + RND(4) : 0;
    }
    struct swift_engine *e = engine(&m, 6, 16, 4, 18);
    int left = NR, step = 0, guard = 0;
    while (left > 0 || swift_engine_step(e) > 0) {
        assert_true(++guard < 20000);
        for (int j = 0; j < NR; j++)
            if (jobs[j].at == step && !jobs[j].id) {
                jobs[j].id = add(e, jobs[j].prompt, jobs[j].len, &jobs[j].s, &jobs[j].o);
                left--;
            }
        for (int j = 0; j < NR; j++)
            if (jobs[j].cancel_at && jobs[j].id && jobs[j].o.n[0] >= jobs[j].cancel_at &&
                jobs[j].o.fin[0] == SWIFT_FINISH_NONE) {
                assert_int_equal(swift_engine_cancel(e, jobs[j].id), 0);
                jobs[j].cancel_at = 0;
            }
        assert_true(swift_engine_step(e) >= 0);
        step++;
    }
    struct swift_engine_stats st;
    swift_engine_stats(e, &st);
    assert_int_equal(st.blocks_used, 0);
    printf("# stress: %ld steps, %ld preemptions, %ld cached tokens, peak %d of %d blocks\n",
           st.steps,
           st.preemptions,
           st.cached_tokens,
           st.blocks_peak,
           st.blocks_total);
    assert_true(st.preemptions > 0 && st.cached_tokens > 0);
    swift_engine_free(e);
    int aborted = 0;
    for (int j = 0; j < NR; j++) { /* alone, in a roomy engine */
        struct job *b = &jobs[j];
        struct out alone;
        memset(&alone, 0, sizeof(alone));
        e = engine(&m, 4, 64, 16, 0);
        add(e, b->prompt, b->len, &b->s, &alone);
        run_all(e);
        swift_engine_free(e);
        for (int c = 0; c < b->s.n; c++) {
            if (b->o.fin[c] == SWIFT_FINISH_ABORT) {
                aborted++;
                assert_true(b->o.n[c] <= alone.n[c]);
            } else {
                assert_int_equal(b->o.n[c], alone.n[c]);
                assert_int_equal(b->o.fin[c], alone.fin[c]);
            }
            assert_memory_equal(b->o.tok[c], alone.tok[c], (size_t)b->o.n[c] * 4);
        }
    }
    assert_true(aborted > 0);
    swift_model_free(&m);
#undef RND
}

/* A sampled request's tokens and log-probs (seeded) alone, then with others joining mid-run on
 * a pool that preempts: the same; choice 1 of seed 42 is choice 0 of seed 43. */
static void sampled(const char *arch, int busy, int n, uint64_t seed, struct out *res)
{
    struct ref r;
    ref_load(&r, arch);
    struct swift_model m;
    load_model(&m, arch);
    struct swift_engine *e = engine(&m, 8, 32, 4, busy ? 14 : 0);
    struct swift_sampling s = swift_sampling_defaults();
    s.max_tokens = 30;
    s.ignore_eos = 1;
    s.temperature = 0.9;
    s.top_p = 0.95;
    s.top_k = 100;
    s.min_p = 0.01;
    s.seed = seed;
    s.n = n;
    struct out other[6];
    memset(other, 0, sizeof(other));
    memset(res, 0, sizeof(*res));
    struct swift_sampling so = s;
    so.n = 1;
    for (int i = 0; busy && i < 3; i++) { /* three before */
        so.seed = 100 + (uint64_t)i;
        add(e, r.prompt[i % r.P], r.plen[i % r.P], &so, &other[i]);
        swift_engine_step(e);
    }
    add(e, r.prompt[r.P - 1], r.plen[r.P - 1], &s, res);
    for (int i = 3; busy && i < 6; i++) { /* three after */
        swift_engine_step(e);
        so.seed = 100 + (uint64_t)i;
        add(e, r.prompt[i % r.P], r.plen[i % r.P], &so, &other[i]);
    }
    run_all(e);
    struct swift_engine_stats st;
    swift_engine_stats(e, &st);
    assert_int_equal(st.blocks_used, 0);
    if (busy)
        assert_true(st.preemptions > 0);
    swift_engine_free(e);
    swift_model_free(&m);
}

static void test_seeded(void **state)
{
    (void)state;
    const char *archs[] = {"llama", "qwen3"};
    for (int a = 0; a < 2; a++) {
        struct out alone, busy, two, next;
        sampled(archs[a], 0, 1, 42, &alone);
        sampled(archs[a], 1, 1, 42, &busy);
        assert_int_equal(alone.n[0], 30);
        assert_int_equal(busy.n[0], 30);
        assert_memory_equal(alone.tok[0], busy.tok[0], 30 * 4);
        /* log-probs: a token's logits come from forwards of other sizes in a busy engine (and
         * from a prefill chunk after a preemption); OpenBLAS's sgemm may round differently */
        for (int t = 0; t < 30; t++)
            assert_true(fabsf(alone.lp[0][t] - busy.lp[0][t]) < 1e-5f);
        sampled(archs[a], 1, 2, 42, &two);
        sampled(archs[a], 0, 1, 43, &next);
        assert_memory_equal(two.tok[0], alone.tok[0], 30 * 4);
        assert_memory_equal(two.tok[1], next.tok[0], 30 * 4);
        assert_memory_not_equal(alone.tok[0], next.tok[0], 30 * 4);
    }
}

/* top_k 1 at temperature 1 is greedy; the chosen token's log-prob is the best alternative's. */
static void test_top_k1(void **state)
{
    (void)state;
    struct ref r;
    ref_load(&r, "qwen2");
    struct swift_model m;
    load_model(&m, "qwen2");
    struct swift_engine *e = engine(&m, 8, 64, 4, 0);
    struct swift_sampling s = swift_sampling_defaults();
    s.max_tokens = r.G;
    s.temperature = 1.0;
    s.top_k = 1;
    s.seed = 5;
    s.top_logprobs = 3;
    struct out o[MAXP];
    memset(o, 0, sizeof(o));
    for (int p = 0; p < r.P; p++)
        add(e, r.prompt[p], r.plen[p], &s, &o[p]);
    run_all(e);
    for (int p = 0; p < r.P; p++) {
        assert_int_equal(o[p].n[0], r.glen[p]);
        assert_memory_equal(o[p].tok[0], r.greedy[p], (size_t)r.glen[p] * 4);
        for (int t = 0; t < o[p].n[0]; t++)
            assert_true(o[p].lp[0][t] <= 0 && o[p].lp[0][t] > -30);
    }
    swift_engine_free(e);
    swift_model_free(&m);
}

static int32_t g_top[3];
static float g_toplp[3], g_lp;
static int g_ntop;
static int first_event(void *ctx, const struct swift_engine_event *ev)
{
    (void)ctx;
    g_ntop = ev->ntop;
    for (int i = 0; i < ev->ntop && i < 3; i++) {
        g_top[i] = ev->top_ids[i];
        g_toplp[i] = ev->top_logprobs[i];
    }
    g_lp = ev->logprob;
    return 1; /* end it here */
}

/* logprob and top_logprobs against the cache's logits of the prompt's last token. */
static void test_logprobs(void **state)
{
    (void)state;
    struct ref r;
    ref_load(&r, "llama");
    struct swift_model m;
    load_model(&m, "llama");
    int V = m.cfg.vocab_size, p = 2;
    struct swift_kv kv;
    assert_int_equal(swift_kv_init(&kv, &m, 1, 64, 64), 0);
    int rowof[64] = {0}, want = r.plen[p] - 1;
    float *lg = malloc((size_t)V * 4);
    assert_int_equal(swift_kv_forward(&kv, r.prompt[p], rowof, r.plen[p], &want, 1, lg), 0);
    double mx = lg[0], sum = 0;
    for (int v = 0; v < V; v++)
        mx = lg[v] > mx ? lg[v] : mx;
    for (int v = 0; v < V; v++)
        sum += exp(lg[v] - mx);
    struct swift_engine *e = engine(&m, 2, 64, 4, 0);
    struct swift_sampling s = swift_sampling_defaults();
    s.top_logprobs = 3;
    char err[128];
    assert_true(swift_engine_add(e, r.prompt[p], r.plen[p], &s, first_event, NULL, err, 128) > 0);
    run_all(e);
    assert_int_equal(g_ntop, 3);
    assert_int_equal(g_top[0], r.greedy[p][0]);
    for (int i = 0; i < 3; i++) {
        double want_lp = lg[g_top[i]] - mx - log(sum);
        assert_true(fabs(g_toplp[i] - want_lp) < 1e-5);
        if (i > 0)
            assert_true(lg[g_top[i]] <= lg[g_top[i - 1]]);
    }
    assert_true(g_lp == g_toplp[0]);
    free(lg);
    swift_kv_release(&kv);
    swift_engine_free(e);
    swift_model_free(&m);
}

/* The penalties on a hand-computed case: HF's repetition penalty over prompt and output (each
 * seen token once), OpenAI's presence and frequency over the output. */
static void test_penalties(void **state)
{
    (void)state;
    struct swift_sampler sp;
    swift_sampler_init(&sp, 5);
    struct swift_sampling s = swift_sampling_defaults();
    s.repetition_penalty = 2.0;
    s.presence_penalty = 0.5;
    s.frequency_penalty = 0.25;
    double x[5] = {2, -1, 0.5, 3, -2};
    int32_t prompt[3] = {0, 1, 0}, out[3] = {1, 3, 3};
    swift_sample_penalize(&sp, x, &s, prompt, 3, out, 3);
    /* 0: 2/2; 1: -1*2 - (0.25*1 + 0.5); 2: unseen; 3: 3/2 - (0.25*2 + 0.5); 4: unseen */
    double want[5] = {1.0, -2.75, 0.5, 0.5, -2};
    for (int i = 0; i < 5; i++)
        assert_true(fabs(x[i] - want[i]) < 1e-12);
    /* the scratch is clean again: the same call gives the same */
    double y[5] = {2, -1, 0.5, 3, -2};
    swift_sample_penalize(&sp, y, &s, prompt, 3, out, 3);
    assert_memory_equal(x, y, sizeof(x));
    /* greedy follows the penalized logits: token 3 (3.0) loses to token 0 (2/2 = 1 > 0.5) */
    float lg[5] = {2, -1, 0.5f, 3, -2};
    struct swift_pick pk;
    uint64_t rng[4] = {1, 2, 3, 4};
    swift_sample_next(&sp, lg, &s, prompt, 3, out, 3, rng, &pk);
    assert_int_equal(pk.token, 0);
    s.repetition_penalty = 1;
    s.presence_penalty = s.frequency_penalty = 0;
    swift_sample_next(&sp, lg, &s, prompt, 3, out, 3, rng, &pk);
    assert_int_equal(pk.token, 3);
    swift_sampler_free(&sp);
}

/* The filters on known distributions: which ids a draw can give and how often. */
static void draws(struct swift_sampler *sp, const float *lg, const struct swift_sampling *s,
                  int *hist, int n)
{
    uint64_t rng[4];
    swift_rng_seed(rng, 11);
    memset(hist, 0, (size_t)sp->V * sizeof(int));
    for (int i = 0; i < n; i++) {
        struct swift_pick pk;
        swift_sample_next(sp, lg, s, NULL, 0, NULL, 0, rng, &pk);
        assert_true(pk.token >= 0 && pk.token < sp->V);
        hist[pk.token]++;
    }
}

static void test_filters(void **state)
{
    (void)state;
    struct swift_sampler sp;
    swift_sampler_init(&sp, 6);
    float lg[6] = {3, 2, 1, 0, -1, -2}; /* softmax .636 .234 .086 .032 .012 .004 */
    int h[1000], n = 4000;
    struct swift_sampling s = swift_sampling_defaults();
    s.temperature = 1.0;
    draws(&sp, lg, &s, h, n);
    assert_true(h[2] > 0 && h[3] > 0);
    s.top_k = 2;
    draws(&sp, lg, &s, h, n);
    assert_int_equal(h[0] + h[1], n);
    assert_true(fabs(h[0] / (double)n - exp(1) / (exp(1) + 1)) < 0.03);
    s.top_k = 0;
    s.top_p = 0.8; /* .636 < .8 <= .870: ids 0 and 1 */
    draws(&sp, lg, &s, h, n);
    assert_int_equal(h[0] + h[1], n);
    assert_true(h[1] > 0);
    s.top_p = 1;
    s.min_p = 0.1; /* p / p0: 1, .37, .14, .05: ids 0, 1, 2 */
    draws(&sp, lg, &s, h, n);
    assert_int_equal(h[0] + h[1] + h[2], n);
    assert_true(h[2] > 0);
    s.min_p = 0;
    s.temperature = 0.25; /* sharper: id 0 at e^4 / (e^4 + e^0 + ...) */
    draws(&sp, lg, &s, h, n);
    assert_true(h[0] > 0.97 * n);
    float tie[6] = {1, 5, 5, 0, -3, 5};
    s.temperature = 1;
    s.top_k = 1; /* ties to the lowest id, as greedy */
    draws(&sp, tie, &s, h, 50);
    assert_int_equal(h[1], 50);
    swift_sampler_free(&sp);
    /* a larger vocabulary: top_k 10 draws among the 10 best only (quickselect) */
    swift_sampler_init(&sp, 1000);
    float *big = malloc(1000 * sizeof(float));
    uint64_t x = 3;
    for (int v = 0; v < 1000; v++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        big[v] = (float)((x >> 40) % 1000) / 100.0f; /* ties among them */
    }
    float sorted[1000];
    memcpy(sorted, big, sizeof(sorted));
    for (int i = 0; i < 10; i++) /* the 10th largest value */
        for (int j = i + 1; j < 1000; j++)
            if (sorted[j] > sorted[i]) {
                float t = sorted[i];
                sorted[i] = sorted[j];
                sorted[j] = t;
            }
    s = swift_sampling_defaults();
    s.temperature = 5.0;
    s.top_k = 10;
    draws(&sp, big, &s, h, 3000);
    int kinds = 0, total = 0;
    for (int v = 0; v < 1000; v++)
        if (h[v]) {
            assert_true(big[v] >= sorted[9]);
            kinds++;
            total += h[v];
        }
    assert_int_equal(total, 3000);
    assert_true(kinds <= 10 && kinds >= 8);
    free(big);
    swift_sampler_free(&sp);
}

/* What the engine refuses, with a message. */
static void test_refusals(void **state)
{
    (void)state;
    struct swift_model m;
    load_model(&m, "llama");
    struct swift_engine_opts o = swift_engine_defaults();
    o.max_num_seqs = 8;
    o.max_num_batched_tokens = 4;
    char err[256] = "";
    assert_null(swift_engine_new(&m, &o, NULL, 0, err, sizeof(err)));
    assert_non_null(strstr(err, "max_num_batched_tokens 4 is below max_num_seqs 8"));
    o = swift_engine_defaults();
    o.block_size = 0;
    assert_null(swift_engine_new(&m, &o, NULL, 0, err, sizeof(err)));
    assert_non_null(strstr(err, "out of range"));
    o = swift_engine_defaults();
    assert_int_equal(o.max_model_len, 0);
    o.num_blocks = 2;
    o.block_size = 4; /* 8 tokens + the last: prompts of 8 tokens at most */
    struct swift_engine *e = swift_engine_new(&m, &o, NULL, 0, err, sizeof(err));
    assert_non_null(e);
    int32_t p[200] = {0};
    struct swift_sampling s = swift_sampling_defaults();
    struct out x;
    memset(&x, 0, sizeof(x));
    assert_int_equal(swift_engine_add(e, p, 9, &s, on_token, &x, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "the cache's pool"));
    assert_true(swift_engine_add(e, p, 8, &s, on_token, &x, err, sizeof(err)) > 0);
    s.top_p = 0;
    assert_int_equal(swift_engine_add(e, p, 8, &s, on_token, &x, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "top_p"));
    s = swift_sampling_defaults();
    p[3] = m.cfg.vocab_size;
    assert_int_equal(swift_engine_add(e, p, 8, &s, on_token, &x, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "outside the vocabulary"));
    p[3] = 0;
    run_all(e); /* the accepted one: one token, then the pool's limit */
    assert_int_equal(x.n[0], 1);
    assert_int_equal(x.fin[0], SWIFT_FINISH_LENGTH);
    swift_engine_free(e);
    o = swift_engine_defaults();
    o.max_model_len = 0; /* the config's max_position_embeddings (128) */
    o.chunked_prefill = 0;
    o.max_num_batched_tokens = 16;
    e = swift_engine_new(&m, &o, NULL, 0, err, sizeof(err));
    assert_int_equal(swift_engine_add(e, p, 17, &s, on_token, &x, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "chunked prefill is off"));
    int32_t q[128] = {0};
    assert_int_equal(swift_engine_add(e, q, 128, &s, on_token, &x, err, sizeof(err)), -1);
    swift_engine_free(e);
    swift_model_free(&m);
}

/* Finish reasons: a stop id, max_tokens, the callback's stop, an eos unless ignore_eos. */
static void test_finish(void **state)
{
    (void)state;
    struct ref r;
    ref_load(&r, "llama");
    struct swift_model m;
    load_model(&m, "llama");
    struct swift_engine *e = engine(&m, 8, 64, 4, 0);
    int p = 3;
    struct swift_sampling s = swift_sampling_defaults();
    struct out o[4];
    memset(o, 0, sizeof(o));
    int32_t stop = r.greedy[p][4];
    int at = 0;
    while (r.greedy[p][at] != stop)
        at++;
    s.max_tokens = r.G;
    s.stop_ids = &stop;
    s.nstop_ids = 1;
    add(e, r.prompt[p], r.plen[p], &s, &o[0]);
    s.nstop_ids = 0;
    s.max_tokens = 3;
    add(e, r.prompt[p], r.plen[p], &s, &o[1]);
    s.max_tokens = r.G;
    o[2].stop_after = 2;
    add(e, r.prompt[p], r.plen[p], &s, &o[2]);
    run_all(e);
    assert_int_equal(o[0].n[0], at + 1);
    assert_int_equal(o[0].fin[0], SWIFT_FINISH_STOP);
    assert_int_equal(o[1].n[0], 3);
    assert_int_equal(o[1].fin[0], SWIFT_FINISH_LENGTH);
    assert_int_equal(o[2].n[0], 2);
    assert_int_equal(o[2].events, 2);
    char err[256];
    s.n = 0; /* refused */
    assert_int_equal(swift_engine_add(e, r.prompt[p], r.plen[p], &s, on_token, &o[3], err, 256),
                     -1);
    assert_non_null(strstr(err, "n"));
    s.n = 1;
    assert_int_equal(swift_engine_add(e, r.prompt[p], 0, &s, on_token, &o[3], err, 256), -1);
    swift_engine_free(e);
    swift_model_free(&m);
}

/* Traces: a span per step with its batch, the KV blocks counter, a request's three spans. */
static void test_trace(void **state)
{
    (void)state;
    char path[] = "/tmp/test_infer_trace_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    struct swift_trace_config tc = {.stage = "infer", .path = path, .world_size = 1};
    assert_int_equal(swift_trace_open(&tc), 0);
    struct ref r;
    ref_load(&r, "llama");
    struct swift_model m;
    load_model(&m, "llama");
    struct swift_engine *e = engine(&m, 4, 64, 4, 0);
    struct swift_sampling s = swift_sampling_defaults();
    s.max_tokens = 5;
    s.ignore_eos = 1;
    struct out o[2];
    memset(o, 0, sizeof(o));
    add(e, r.prompt[1], r.plen[1], &s, &o[0]);
    add(e, r.prompt[2], r.plen[2], &s, &o[1]);
    run_all(e);
    swift_engine_free(e);
    swift_model_free(&m);
    swift_trace_close();
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[4096];
    int steps = 0, counters = 0, queued = 0, prefill = 0, decode = 0;
    while (fgets(line, sizeof(line), f)) {
        if (strstr(line, "\"engine_step\"")) {
            steps++;
            assert_non_null(strstr(line, "\"cat\":\"infer\""));
            assert_non_null(strstr(line, "\"blocks_used\""));
            assert_non_null(strstr(line, "\"prefill_tokens\""));
            if (steps == 1) /* both prompts in the first forward */
                assert_non_null(strstr(line, "\"tokens\":17"));
        }
        counters += strstr(line, "\"kv_blocks_used\"") != NULL;
        queued += strstr(line, "\"request_queued\"") != NULL;
        prefill += strstr(line, "\"request_prefill\"") != NULL;
        if (strstr(line, "\"request_decode\"")) {
            decode++;
            assert_non_null(strstr(line, "\"completion_tokens\":5"));
        }
    }
    fclose(f);
    unlink(path);
    assert_int_equal(steps, 5);
    assert_int_equal(counters, 5);
    assert_int_equal(queued, 2);
    assert_int_equal(prefill, 2);
    assert_int_equal(decode, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paged_forward),
        cmocka_unit_test(test_pkv_blocks),
        cmocka_unit_test(test_greedy),
        cmocka_unit_test(test_greedy_unchunked),
        cmocka_unit_test(test_prefix),
        cmocka_unit_test(test_prefix_kept),
        cmocka_unit_test(test_n2),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_cancel_in_callback),
        cmocka_unit_test(test_stress),
        cmocka_unit_test(test_seeded),
        cmocka_unit_test(test_top_k1),
        cmocka_unit_test(test_logprobs),
        cmocka_unit_test(test_penalties),
        cmocka_unit_test(test_filters),
        cmocka_unit_test(test_finish),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_trace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
