/* lib/eval/kv and generate against transformers (tests/fixtures/eval,
 * tests/ref/gen_eval_fixtures.py): log-probs at every position, continuation log-likelihoods,
 * greedy generation token for token; plus cache invariants (chunked prefill, forked rows, batching)
 * and seeded sampling. */
#include "kernels/ops.h"
#include "lib/model/backend.h"
#include "lib/core/error.h"
#include "lib/eval/generate.h"
#include "lib/eval/kv.h"
#include "lib/model/lora.h"
#include "lib/model/model.h"
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

/* Stated tolerances (float32 vs transformers' float32 eager attention, log-probs in double). */
#define TOL_LOGPROB 5e-5
#define TOL_CONT 1e-4

struct ref {
    struct swift_safetensors st;
    int P, TP, TS, V, G;
    int32_t *prompt_ids, *prompt_len, *seq_ids, *seq_len, *greedy_ids, *greedy_len;
    float *logprobs;
    double *cont;
};

static const void *tensor(struct ref *r, const char *name, int64_t *d0, int64_t *d1)
{
    const struct swift_st_tensor *t = swift_safetensors_find(&r->st, name);
    assert_non_null(t);
    if (d0)
        *d0 = t->shape[0];
    if (d1)
        *d1 = t->ndim > 1 ? t->shape[1] : 1;
    return t->data;
}

static void *copy_of(const void *p, size_t n)
{
    void *q = malloc(n);
    memcpy(q, p, n); /* the mapping may be unaligned */
    return q;
}

static void ref_load(struct ref *r, const char *arch)
{
    char path[256];
    snprintf(path, sizeof(path), "tests/fixtures/eval/%s/ref.safetensors", arch);
    assert_int_equal(swift_safetensors_open(&r->st, path), 0);
    int64_t a, b;
    const void *p = tensor(r, "prompt_ids", &a, &b);
    r->P = (int)a;
    r->TP = (int)b;
    r->prompt_ids = copy_of(p, (size_t)a * b * 4);
    r->prompt_len = copy_of(tensor(r, "prompt_len", NULL, NULL), (size_t)r->P * 4);
    p = tensor(r, "seq_ids", &a, &b);
    r->TS = (int)b;
    r->seq_ids = copy_of(p, (size_t)a * b * 4);
    r->seq_len = copy_of(tensor(r, "seq_len", NULL, NULL), (size_t)r->P * 4);
    const struct swift_st_tensor *lp = swift_safetensors_find(&r->st, "logprobs");
    r->V = (int)lp->shape[2];
    r->logprobs = copy_of(lp->data, lp->numel * 4);
    r->cont = copy_of(tensor(r, "cont_loglik", NULL, NULL), (size_t)r->P * 8);
    p = tensor(r, "greedy_ids", &a, &b);
    r->G = (int)b;
    r->greedy_ids = copy_of(p, (size_t)a * b * 4);
    r->greedy_len = copy_of(tensor(r, "greedy_len", NULL, NULL), (size_t)r->P * 4);
}

static void ref_free(struct ref *r)
{
    free(r->prompt_ids);
    free(r->prompt_len);
    free(r->seq_ids);
    free(r->seq_len);
    free(r->greedy_ids);
    free(r->greedy_len);
    free(r->logprobs);
    free(r->cont);
    swift_safetensors_close(&r->st);
}

static void load_model(struct swift_model *m, const char *arch)
{
    char dir[256];
    snprintf(dir, sizeof(dir), "tests/fixtures/eval/%s", arch);
    /* the cpu table, or the strict one under SWIFT_CPU_STRICT_HOST=1 (tests/cli/strict-host.bats
     * runs this file that way: no host access to the cache) */
    struct swift_backend be;
    assert_int_equal(swift_backend_select(&be, "cpu"), 0);
    assert_int_equal(swift_model_load(m, dir, be.ops, 1), 0);
}

/* All sequences in one call (every position's logits), compared with transformers. */
static void check_logprobs(const char *arch)
{
    struct ref r;
    ref_load(&r, arch);
    struct swift_model m;
    load_model(&m, arch);
    int V = m.cfg.vocab_size;
    assert_int_equal(V, r.V);
    int N = 0;
    for (int p = 0; p < r.P; p++)
        N += r.seq_len[p];
    struct swift_kv kv;
    assert_int_equal(swift_kv_init(&kv, &m, r.P, 64, N), 0);
    int32_t *tok = malloc((size_t)N * 4);
    int *rowof = malloc((size_t)N * sizeof(int)), *want = malloc((size_t)N * sizeof(int));
    /* interleave the rows to check that tokens of different rows may be mixed in one call */
    int n = 0;
    int *at = calloc((size_t)r.P, sizeof(int));
    while (n < N)
        for (int p = 0; p < r.P; p++)
            if (at[p] < r.seq_len[p]) {
                tok[n] = r.seq_ids[p * r.TS + at[p]++];
                rowof[n] = p;
                want[n] = n;
                n++;
            }
    float *lg = malloc((size_t)N * V * sizeof(float));
    assert_int_equal(swift_kv_forward(&kv, tok, rowof, N, want, N, lg), 0);
    double maxerr = 0, maxcont = 0;
    memset(at, 0, (size_t)r.P * sizeof(int));
    double *cont = calloc((size_t)r.P, sizeof(double));
    for (int i = 0; i < N; i++) {
        int p = rowof[i], t = at[p]++;
        const float *want_lp = r.logprobs + ((size_t)p * r.TS + t) * V;
        for (int v = 0; v < V; v++) {
            double e = fabs(swift_logprob(lg + (size_t)i * V, V, v) - want_lp[v]);
            if (e > maxerr)
                maxerr = e;
        }
        if (t + 1 >= r.prompt_len[p] && t + 1 < r.seq_len[p])
            cont[p] += swift_logprob(lg + (size_t)i * V, V, r.seq_ids[p * r.TS + t + 1]);
    }
    for (int p = 0; p < r.P; p++)
        if (fabs(cont[p] - r.cont[p]) > maxcont)
            maxcont = fabs(cont[p] - r.cont[p]);
    printf("# %s: max |log-prob error| %.3g (tol %g), max |continuation log-lik error| %.3g "
           "(tol %g)\n",
           arch,
           maxerr,
           TOL_LOGPROB,
           maxcont,
           TOL_CONT);
    assert_true(maxerr < TOL_LOGPROB);
    assert_true(maxcont < TOL_CONT);

    /* the same through one-token decode steps after a 1-token prefill: identical log-probs
     * within float noise of the batched call */
    swift_kv_reset(&kv, -1);
    int p = r.P - 1;
    double maxstep = 0;
    for (int t = 0; t < r.seq_len[p]; t++) {
        int row = 0, w = 0;
        assert_int_equal(swift_kv_forward(&kv, &r.seq_ids[p * r.TS + t], &row, 1, &w, 1, lg), 0);
        const float *want_lp = r.logprobs + ((size_t)p * r.TS + t) * V;
        for (int v = 0; v < V; v++) {
            double e = fabs(swift_logprob(lg, V, v) - want_lp[v]);
            if (e > maxstep)
                maxstep = e;
        }
    }
    assert_true(maxstep < TOL_LOGPROB);

    /* a forked row continues exactly as the original */
    swift_kv_reset(&kv, -1);
    int lp = r.prompt_len[p], w0 = lp - 1;
    int *rows0 = calloc((size_t)lp, sizeof(int));
    assert_int_equal(swift_kv_forward(&kv, &r.seq_ids[p * r.TS], rows0, lp, &w0, 1, lg), 0);
    swift_kv_copy_row(&kv, 2, 0);
    assert_int_equal(kv.len[2], lp);
    int row2 = 2, wz = 0;
    assert_int_equal(swift_kv_forward(&kv, &r.seq_ids[p * r.TS + lp], &row2, 1, &wz, 1, lg), 0);
    const float *want_lp = r.logprobs + ((size_t)p * r.TS + lp) * V;
    for (int v = 0; v < V; v++)
        assert_true(fabs(swift_logprob(lg, V, v) - want_lp[v]) < TOL_LOGPROB);
    free(rows0);

    /* errors leave the cache unchanged */
    swift_set_progname("test");
    FILE *devnull = fopen("/dev/null", "w");
    swift_error_set_stream(devnull);
    int bad = V, r0 = 0;
    int before = kv.len[0];
    assert_int_equal(swift_kv_forward(&kv, &bad, &r0, 1, NULL, 0, NULL), -1);
    assert_int_equal(kv.len[0], before);
    int rbad = r.P + 5;
    assert_int_equal(swift_kv_forward(&kv, tok, &rbad, 1, NULL, 0, NULL), -1);
    swift_error_set_stream(NULL);
    fclose(devnull);

    free(cont);
    free(at);
    free(lg);
    free(tok);
    free(rowof);
    free(want);
    swift_kv_release(&kv);
    swift_model_free(&m);
    ref_free(&r);
}

static void check_greedy(const char *arch, int max_tokens)
{
    struct ref r;
    ref_load(&r, arch);
    struct swift_model m;
    load_model(&m, arch);
    struct swift_kv kv;
    assert_int_equal(swift_kv_init(&kv, &m, r.P, 64, max_tokens), 0);
    struct swift_gen_seq *s = calloc((size_t)r.P, sizeof(*s));
    for (int p = 0; p < r.P; p++) {
        s[p].prompt = &r.prompt_ids[p * r.TP];
        s[p].prompt_len = r.prompt_len[p];
        s[p].seed = 1;
    }
    int32_t eos = 256;
    struct swift_gen_opts o = {
        .max_new = r.G, .temperature = 0, .top_p = 1, .stop_ids = &eos, .nstop = 1};
    struct swift_gen_stats st = {0};
    assert_int_equal(swift_generate(&kv, s, r.P, &o, NULL, NULL, &st), 0);
    int same = 0, total = 0;
    for (int p = 0; p < r.P; p++) {
        assert_int_equal(s[p].n_out, r.greedy_len[p]);
        for (int t = 0; t < s[p].n_out; t++) {
            same += s[p].out[t] == r.greedy_ids[p * r.G + t];
            total++;
        }
        assert_memory_equal(s[p].out, &r.greedy_ids[p * r.G], (size_t)s[p].n_out * 4);
        free(s[p].out);
    }
    printf("# %s: greedy generation %d/%d tokens equal to transformers' generate (max_tokens %d)\n",
           arch,
           same,
           total,
           max_tokens);
    assert_int_equal(st.prefill_tokens, 1 + 5 + 12 + 23);
    free(s);
    swift_kv_release(&kv);
    swift_model_free(&m);
    ref_free(&r);
}

static void test_llama_logprobs(void **state)
{
    (void)state;
    check_logprobs("llama");
}
static void test_qwen2_logprobs(void **state)
{
    (void)state;
    check_logprobs("qwen2");
}
static void test_qwen3_logprobs(void **state)
{
    (void)state;
    check_logprobs("qwen3");
}
static void test_greedy(void **state)
{
    (void)state;
    check_greedy("llama", 256);
    check_greedy("llama", 7); /* prefill in chunks of 7 tokens across prompt boundaries */
    check_greedy("qwen2", 256);
    check_greedy("qwen3", 3);
}

/* Sampling: the same seed gives the same tokens whatever the batch; top-p 0 is greedy. */
/* LoRA adapters (peft's layout) on the fly and merged, against the PeftModel's log-probs. */
static void test_lora(void **state)
{
    (void)state;
    struct ref r;
    ref_load(&r, "llama");
    const struct swift_st_tensor *t = swift_safetensors_find(&r.st, "lora_logprobs");
    assert_non_null(t);
    float *want_lp = copy_of(t->data, t->numel * 4);
    for (int merged = 0; merged < 2; merged++) {
        struct swift_model m;
        load_model(&m, "llama");
        struct swift_lora_opts lo;
        assert_int_equal(swift_lora_load(&m, "tests/fixtures/eval/llama/adapter", &lo), 0);
        m.lora_dropout = 0;
        if (merged)
            assert_int_equal(swift_kv_merge_adapters(&m), 0);
        int V = m.cfg.vocab_size;
        struct swift_kv kv;
        assert_int_equal(swift_kv_init(&kv, &m, 1, 64, 64), 0);
        float *lg = malloc((size_t)r.TS * V * sizeof(float));
        double maxerr = 0, maxbase = 0;
        for (int p = 0; p < r.P; p++) {
            int n = r.seq_len[p], rows[64] = {0}, want[64];
            for (int i = 0; i < n; i++)
                want[i] = i;
            swift_kv_reset(&kv, -1);
            assert_int_equal(swift_kv_forward(&kv, &r.seq_ids[p * r.TS], rows, n, want, n, lg), 0);
            for (int i = 0; i < n; i++)
                for (int v = 0; v < V; v++) {
                    double lp = swift_logprob(lg + (size_t)i * V, V, v);
                    double e = fabs(lp - want_lp[((size_t)p * r.TS + i) * V + v]);
                    double eb = fabs(lp - r.logprobs[((size_t)p * r.TS + i) * V + v]);
                    if (e > maxerr)
                        maxerr = e;
                    if (eb > maxbase)
                        maxbase = eb;
                }
        }
        printf("# llama + LoRA (%s): max |log-prob error| %.3g vs peft (tol %g); the adapter moves "
               "log-probs by up to %.3g\n",
               merged ? "merged" : "on the fly",
               maxerr,
               TOL_LOGPROB,
               maxbase);
        assert_true(maxerr < TOL_LOGPROB);
        assert_true(maxbase > 100 * TOL_LOGPROB); /* the check can fail: the adapter matters */
        free(lg);
        swift_kv_release(&kv);
        swift_model_free(&m);
    }
    free(want_lp);
    ref_free(&r);
}

static void test_sampling(void **state)
{
    (void)state;
    struct swift_model m;
    load_model(&m, "llama");
    struct swift_kv kv;
    assert_int_equal(swift_kv_init(&kv, &m, 3, 64, 64), 0);
    int32_t prompt[4] = {72, 105, 33, 10};
    struct swift_gen_seq s[3] = {
        {.prompt = prompt, .prompt_len = 4, .seed = 7},
        {.prompt = prompt, .prompt_len = 2, .seed = 8},
        {.prompt = prompt, .prompt_len = 4, .seed = 9},
    };
    struct swift_gen_opts o = {.max_new = 16, .temperature = 1.0, .top_p = 0.9};
    assert_int_equal(swift_generate(&kv, s, 3, &o, NULL, NULL, NULL), 0);
    struct swift_gen_seq one = {.prompt = prompt, .prompt_len = 4, .seed = 7};
    assert_int_equal(swift_generate(&kv, &one, 1, &o, NULL, NULL, NULL), 0);
    assert_int_equal(one.n_out, 16);
    assert_memory_equal(one.out, s[0].out, 16 * 4);
    assert_memory_not_equal(s[0].out, s[2].out, 16 * 4); /* another seed */
    free(one.out);
    for (int i = 0; i < 3; i++)
        free(s[i].out);

    struct swift_gen_seq g = {.prompt = prompt, .prompt_len = 4, .seed = 1};
    struct swift_gen_seq t0 = {.prompt = prompt, .prompt_len = 4, .seed = 2};
    struct swift_gen_opts greedy = {.max_new = 8, .temperature = 0};
    struct swift_gen_opts nucleus0 = {.max_new = 8, .temperature = 0.7, .top_p = 1e-9};
    assert_int_equal(swift_generate(&kv, &g, 1, &greedy, NULL, NULL, NULL), 0);
    assert_int_equal(swift_generate(&kv, &t0, 1, &nucleus0, NULL, NULL, NULL), 0);
    assert_memory_equal(g.out, t0.out, 8 * 4);
    free(g.out);
    free(t0.out);
    swift_kv_release(&kv);
    swift_model_free(&m);

    /* swift_sample on hand-made logits: the distribution over many draws */
    float lg[3] = {0.0f, logf(3.0f), -INFINITY};
    uint64_t rng[4];
    swift_rng_seed(rng, 42);
    int cnt[3] = {0};
    for (int i = 0; i < 20000; i++)
        cnt[swift_sample(lg, 3, 1.0, 1.0, rng)]++;
    assert_int_equal(cnt[2], 0);
    assert_true(fabs(cnt[1] / 20000.0 - 0.75) < 0.02);
    cnt[0] = cnt[1] = 0;
    for (int i = 0; i < 1000; i++)
        cnt[swift_sample(lg, 3, 1.0, 0.7, rng)]++; /* nucleus: only the 0.75 token */
    assert_int_equal(cnt[1], 1000);
}

/* Sequences sharing a prompt (GRPO's group): one prefill, the row copied; the same completions
 * as prefilling each, with a G-th of the prefill tokens; a bad share is refused. */
static void test_shared_prompt(void **state)
{
    (void)state;
    struct swift_model m;
    load_model(&m, "llama");
    struct swift_kv kv;
    assert_int_equal(swift_kv_init(&kv, &m, 4, 64, 64), 0);
    int32_t p0[5] = {72, 105, 33, 10, 65}, p1[3] = {66, 67, 10};
    struct swift_gen_opts o = {.max_new = 12, .temperature = 1.0, .top_p = 1.0};
    struct swift_gen_seq a[4] = {{.prompt = p0, .prompt_len = 5, .seed = 1},
                                 {.prompt = p0, .prompt_len = 5, .seed = 2},
                                 {.prompt = p1, .prompt_len = 3, .seed = 3},
                                 {.prompt = p1, .prompt_len = 3, .seed = 4}};
    struct swift_gen_seq b[4];
    memcpy(b, a, sizeof(a));
    b[1].share = 1;
    b[3].share = 3;
    struct swift_gen_stats sa = {0}, sb = {0};
    assert_int_equal(swift_generate(&kv, a, 4, &o, NULL, NULL, &sa), 0);
    assert_int_equal(swift_generate(&kv, b, 4, &o, NULL, NULL, &sb), 0);
    assert_int_equal(sa.prefill_tokens, 16);
    assert_int_equal(sb.prefill_tokens, 8);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(a[i].n_out, b[i].n_out);
        assert_memory_equal(a[i].out, b[i].out, (size_t)a[i].n_out * 4);
        free(a[i].out);
        free(b[i].out);
    }
    b[1].share = 3; /* a later sequence */
    b[3].share = 0;
    assert_int_equal(swift_generate(&kv, b, 4, &o, NULL, NULL, NULL), -1);
    swift_kv_release(&kv);
    swift_model_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama_logprobs),
        cmocka_unit_test(test_qwen2_logprobs),
        cmocka_unit_test(test_qwen3_logprobs),
        cmocka_unit_test(test_greedy),
        cmocka_unit_test(test_lora),
        cmocka_unit_test(test_sampling),
        cmocka_unit_test(test_shared_prompt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
