/* lib/infer's engine and lib/model's paged cache: the paged forward against swift_kv_forward
 * (bit for bit on the CPU), greedy output against transformers' generate (tests/fixtures/eval,
 * tests/ref/gen_eval_fixtures.py: Llama, Qwen2, Qwen3) with requests joining mid-run, small
 * blocks and a pool small enough to preempt, n > 1 on a shared prompt, seeded sampling whatever
 * the batch, top-k 1, the penalties against a hand computation, cancellation and leaks. */
#include "kernels/ops.h"
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
    int events, aborts, prompt_tokens;
    int stop_after; /* > 0: the callback ends choice 0 after this many tokens */
};

static int on_token(void *ctx, const struct swift_engine_event *ev)
{
    struct out *o = ctx;
    o->events++;
    o->prompt_tokens = ev->prompt_tokens;
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

static struct swift_engine *engine(struct swift_model *m, int seqs, int tokens, int bs, int nb)
{
    struct swift_engine_opts o = swift_engine_defaults();
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
    int next = 0, total = 2 * r.P;
    while (next < total || swift_engine_step(e) > 0) {
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
           "%d, peak %d, preemptions %ld, steps %ld)\n",
           arch,
           same,
           same,
           seqs,
           tokens,
           st.blocks_total,
           bs,
           st.blocks_peak,
           st.preemptions,
           st.steps);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paged_forward),
        cmocka_unit_test(test_pkv_blocks),
        cmocka_unit_test(test_greedy),
        cmocka_unit_test(test_n2),
        cmocka_unit_test(test_cancel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
