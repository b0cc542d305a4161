/* The op tables as lib/ and whole workloads see them; the checks of single ops on every backend
 * are tests/kernels/test_backend_ops.c.
 * - swift_cpu_strict_ops (kernels/cpu/strict.c): host access to its memory faults, upload and
 *   download work, alloc is zeroed (also after a free); swift_backend_select (lib/model/backend.c)
 *   picks it under SWIFT_CPU_STRICT_HOST=1.
 * - cuda against cpu on whole workloads (lib/model, lib/eval): a tiny Qwen2-shaped model forward
 *   and backward (loss relative 1e-4, every gradient tensor 1e-6 + 2e-3 * max |cpu|; matmuls in
 *   exact fp32, attention on the default path, flash), and the key/value-cache forward of a tiny
 *   Qwen3-shaped model (prefill, a forked row, decode steps; logits 1e-5 + 1e-4 * max |cpu|),
 *   and QLoRA (the fixture Llama, NF4 with double quantization, its LoRA adapter: loss and LoRA
 *   gradients as the whole-model case). Without a GPU (or built with CUDA=0) all three are
 *   visible cmocka skips. */
#include "kernels/ops.h"
#include "lib/model/backend.h"

#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/eval/kv.h"
#include "kernels/device.h"
#include "lib/model/lora.h"
#include "lib/model/model.h"

/* ---- the strict CPU table ---- */

/* Run fn(p) in a child with stdout and stderr silenced; returns its wait status. The
 * child exits 0 only if the access did not fault. */
static const struct swift_ops *S = &swift_cpu_strict_ops;
static int in_child(void (*fn)(float *), float *p)
{
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        signal(SIGSEGV, SIG_DFL); /* not cmocka's handler, which would go on with the tests */
        fn(p);
        _exit(0);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return st;
}
static volatile float sink;
static void host_write(float *p)
{
    ((volatile float *)p)[3] = 1.0f;
}
static void host_read(float *p)
{
    sink = ((volatile float *)p)[100];
}
static void via_upload(float *p)
{
    float x[4] = {1, 2, 3, 4}, y[4];
    S->upload(p, x, sizeof(x));
    S->download(y, p, sizeof(y));
    _exit(memcmp(x, y, sizeof(x)) ? 3 : 0);
}
static int faulted(int st)
{
    /* SIGSEGV; under ASan (which keeps its own handler) its report and exit 1 */
    return (WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV) || (WIFEXITED(st) && WEXITSTATUS(st) == 1);
}

static void test_host_access_faults(void **state)
{
    (void)state;
    float *p = S->alloc(1000 * sizeof(float));
    assert_non_null(p);
    assert_true(faulted(in_child(host_write, p)));
    assert_true(faulted(in_child(host_read, p)));
    int st = in_child(via_upload, p);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    /* an interior pointer of another allocation faults as well */
    float *q = S->alloc(10 * sizeof(float));
    assert_true(faulted(in_child(host_write, q)));
    S->free(q);
    S->free(p);
}

static void test_zeroed_and_roundtrip(void **state)
{
    (void)state;
    enum { N = 5000 };
    float *h = malloc(N * sizeof(float)), *z = calloc(N, sizeof(float));
    assert_non_null(h);
    assert_non_null(z);
    for (int i = 0; i < N; i++)
        h[i] = (float)i * 0.5f - 7.0f;
    float *a = S->alloc(N * sizeof(float));
    S->download(h, a, N * sizeof(float));
    assert_memory_equal(h, z, N * sizeof(float));
    for (int i = 0; i < N; i++)
        h[i] = (float)i * 0.5f - 7.0f;
    S->upload(a, h, N * sizeof(float));
    S->free(a);
    /* the same pages handed out again come back zeroed */
    float *b = S->alloc(N * sizeof(float));
    S->download(h, b, N * sizeof(float));
    assert_memory_equal(h, z, N * sizeof(float));
    float *c = S->alloc(0);
    assert_non_null(c);
    assert_true(c != b);
    S->free(c);
    S->free(b);
    S->free(NULL);
    free(h);
    free(z);
}

static void test_select(void **state)
{
    (void)state;
    struct swift_backend be;
    setenv("SWIFT_CPU_STRICT_HOST", "1", 1);
    assert_int_equal(swift_backend_select(&be, "cpu"), 0);
    assert_ptr_equal(be.ops, &swift_cpu_strict_ops);
    assert_string_equal(be.name, "cpu");
    setenv("SWIFT_CPU_STRICT_HOST", "0", 1);
    assert_int_equal(swift_backend_select(&be, "cpu"), 0);
    assert_ptr_equal(be.ops, &swift_cpu_ops);
    unsetenv("SWIFT_CPU_STRICT_HOST");
}

/* ---- cuda against cpu on whole workloads ---- */

static const struct swift_ops *C = &swift_cpu_ops;
static const struct swift_ops *G; /* NULL: no GPU, the cases skip */

#define NEED_GPU()                                                                                 \
    do {                                                                                           \
        if (!G) {                                                                                  \
            skip();                                                                                \
            return;                                                                                \
        }                                                                                          \
    } while (0)

/* a device tensor against the CPU's: max |err| <= atol + rtol * max |ref| */
static void check(const char *what, const float *dev, const float *ref, size_t n, double atol,
                  double rtol)
{
    float *h = malloc((n ? n : 1) * sizeof(float));
    assert_non_null(h);
    G->download(h, dev, n * sizeof(float));
    double maxref = 0, maxerr = 0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (fabs(ref[i]) > maxref)
            maxref = fabs(ref[i]);
        double e = fabs((double)h[i] - ref[i]);
        if (!(e <= maxerr)) { /* NaN counts */
            maxerr = isnan(e) ? INFINITY : e;
            at = i;
        }
    }
    double bound = atol + rtol * maxref, got = h[at];
    free(h);
    printf("# %-28s n=%-8zu max|err| %.3g (bound %.3g, max|ref| %.3g)\n",
           what,
           n,
           maxerr,
           bound,
           maxref);
    if (!(maxerr <= bound))
        fail_msg("%s: element %zu: cuda %.9g cpu %.9g", what, at, got, (double)ref[at]);
}

/* the shape both whole-model cases use: hidden 64, 2 layers, GQA 4/2, head_dim 16, vocab 211 */
static struct swift_model_config tiny_config(const char *model_type)
{
    struct swift_model_config c;
    memset(&c, 0, sizeof(c));
    snprintf(c.model_type, sizeof(c.model_type), "%s", model_type);
    snprintf(c.dtype, sizeof(c.dtype), "float32");
    c.vocab_size = 211;
    c.hidden_size = 64;
    c.intermediate_size = 160;
    c.num_layers = 2;
    c.num_heads = 4;
    c.num_kv_heads = 2;
    c.head_dim = 16;
    c.max_position_embeddings = 128;
    c.rms_norm_eps = 1e-6f;
    c.rope_theta = 10000;
    return c;
}

/* a tiny Qwen2-shaped model (qkv bias, GQA, tied embeddings) on both backends */
static void test_model(void **state)
{
    (void)state;
    NEED_GPU();
    struct swift_model_config c = tiny_config("qwen2");
    c.qkv_bias = 1;
    c.tie_embeddings = 1;
    struct swift_model mc, mg;
    assert_int_equal(swift_model_init_random(&mc, &c, C, 5), 0);
    assert_int_equal(swift_model_init_random(&mg, &c, G, 5), 0);
    int B = 2, T = 32;
    assert_int_equal(swift_model_reserve(&mc, B, T), 0);
    assert_int_equal(swift_model_reserve(&mg, B, T), 0);
    int32_t tok[64], tgt[64], pos[64];
    for (int i = 0; i < B * T; i++) {
        tok[i] = (i * 31 + 7) % c.vocab_size;
        tgt[i] = i % 5 == 0 ? -1 : (i * 17 + 3) % c.vocab_size;
        pos[i] = i % T < 20 ? i % T : i % T - 20; /* two documents in each row */
    }
    struct swift_batch b = {.B = B, .T = T, .tokens = tok, .targets = tgt, .pos = pos};
    swift_model_zero_grad(&mc);
    swift_model_zero_grad(&mg);
    struct swift_loss lc = {0}, lg = {0};
    assert_int_equal(swift_model_forward(&mc, &b, &lc, 1.0f / 51), 0);
    assert_int_equal(swift_model_forward(&mg, &b, &lg, 1.0f / 51), 0);
    printf("# model loss cpu %.9g cuda %.9g over %ld tokens\n", lc.sum, lg.sum, lc.count);
    assert_int_equal(lc.count, lg.count);
    assert_true(fabs(lc.sum - lg.sum) <= 1e-4 * fabs(lc.sum));
    swift_model_backward(&mc, &b);
    swift_model_backward(&mg, &b);
    G->sync();
    for (int i = 0; i < mc.np; i++) {
        assert_string_equal(mc.p[i].name, mg.p[i].name);
        check(mc.p[i].name, mg.p[i].g, mc.p[i].g, mc.p[i].numel, 1e-6, 2e-3);
    }
    swift_model_free(&mc);
    swift_model_free(&mg);
}

/* The whole key/value-cache forward (lib/eval/kv.h) on a random model: prefill of three rows,
 * a forked row (swift_kv_copy_row) and decode steps; logits of both backends compared. */
static void test_kv_model(void **state)
{
    (void)state;
    NEED_GPU();
    struct swift_model_config c = tiny_config("qwen3");
    c.qk_norm = 1;
    struct swift_model mc, mg;
    assert_int_equal(swift_model_init_random(&mc, &c, C, 9), 0);
    assert_int_equal(swift_model_init_random(&mg, &c, G, 9), 0);
    struct swift_kv kc, kg;
    assert_int_equal(swift_kv_init(&kc, &mc, 4, 40, 24), 0);
    assert_int_equal(swift_kv_init(&kg, &mg, 4, 40, 24), 0);
    int V = c.vocab_size;
    float *lc = malloc((size_t)24 * V * sizeof(float)),
          *lg = malloc((size_t)24 * V * sizeof(float));
    assert_non_null(lc);
    assert_non_null(lg);
    int32_t tok[24];
    int rowof[24], want[24];
    for (int i = 0; i < 21; i++) {
        tok[i] = (i * 31 + 7) % V;
        rowof[i] = i < 10 ? 0 : i < 16 ? 1 : 2;
        want[i] = i;
    }
    assert_int_equal(swift_kv_forward(&kc, tok, rowof, 21, want, 21, lc), 0);
    assert_int_equal(swift_kv_forward(&kg, tok, rowof, 21, want, 21, lg), 0);
    double maxref = 0, maxerr = 0;
    for (size_t i = 0; i < (size_t)21 * V; i++) {
        maxref = fmax(maxref, fabs(lc[i]));
        maxerr = fmax(maxerr, fabs((double)lc[i] - lg[i]));
    }
    swift_kv_copy_row(&kc, 3, 1);
    swift_kv_copy_row(&kg, 3, 1);
    for (int step = 0; step < 6; step++) {
        for (int i = 0; i < 4; i++) {
            tok[i] = (step * 17 + i * 5 + 1) % V;
            rowof[i] = i;
            want[i] = 3 - i; /* logits out of token order */
        }
        assert_int_equal(swift_kv_forward(&kc, tok, rowof, 4, want, 4, lc), 0);
        assert_int_equal(swift_kv_forward(&kg, tok, rowof, 4, want, 4, lg), 0);
        for (size_t i = 0; i < (size_t)4 * V; i++) {
            maxref = fmax(maxref, fabs(lc[i]));
            maxerr = fmax(maxerr, fabs((double)lc[i] - lg[i]));
        }
    }
    printf("# kv forward logits: max|err| %.3g (bound %.3g, max|ref| %.3g)\n",
           maxerr,
           1e-5 + 1e-4 * maxref,
           maxref);
    assert_true(maxerr <= 1e-5 + 1e-4 * maxref);
    free(lc);
    free(lg);
    swift_kv_release(&kc);
    swift_kv_release(&kg);
    swift_model_free(&mc);
    swift_model_free(&mg);
}

/* QLoRA on both backends: the fixture Llama with its LoRA adapter, base linears quantized to
 * NF4 with double quantization (swift_model_quantize4, so the CUDA table's matmul4 ops run
 * inside the model); loss relative 1e-4, LoRA gradients 1e-6 + 2e-3 * max |cpu| */
static void test_qlora_model(void **state)
{
    (void)state;
    NEED_GPU();
    const char *dir = "tests/fixtures/model/llama";
    struct swift_model mc, mg;
    struct swift_lora_opts lo;
    assert_int_equal(swift_model_load(&mc, dir, C, 1), 0);
    assert_int_equal(swift_model_load(&mg, dir, G, 1), 0);
    assert_int_equal(swift_lora_load(&mc, "tests/fixtures/model/llama/adapter", &lo), 0);
    assert_int_equal(swift_lora_load(&mg, "tests/fixtures/model/llama/adapter", &lo), 0);
    assert_int_equal(swift_model_quantize4(&mc, SWIFT_Q4_NF4, 1), 0);
    assert_int_equal(swift_model_quantize4(&mg, SWIFT_Q4_NF4, 1), 0);
    int B = 2, T = 8, N = B * T;
    int32_t tok[16], tgt[16], pos[16];
    for (int n = 0; n < N; n++) {
        tok[n] = (n * 37 + 11) % mc.cfg.vocab_size;
        pos[n] = n % T;
    }
    for (int n = 0; n < N; n++)
        tgt[n] = n % T == T - 1 ? -1 : tok[n + 1];
    struct swift_batch b = {.B = B, .T = T, .tokens = tok, .targets = tgt, .pos = pos};
    struct swift_loss lc = {0}, lg = {0};
    swift_model_zero_grad(&mc);
    swift_model_zero_grad(&mg);
    assert_int_equal(swift_model_forward(&mc, &b, &lc, 1.0f / 14), 0);
    assert_int_equal(swift_model_forward(&mg, &b, &lg, 1.0f / 14), 0);
    printf("# qlora loss cpu %.9g cuda %.9g over %ld tokens\n", lc.sum, lg.sum, lc.count);
    assert_int_equal(lc.count, lg.count);
    assert_true(fabs(lc.sum - lg.sum) <= 1e-4 * fabs(lc.sum));
    swift_model_backward(&mc, &b);
    swift_model_backward(&mg, &b);
    G->sync();
    assert_int_equal(mc.nlora, mg.nlora);
    check("qlora LoRA gradients", mg.lora_grads, mc.lora_grads, mc.nlora, 1e-6, 2e-3);
    swift_model_free(&mc);
    swift_model_free(&mg);
}

static int group_setup(void **state)
{
    (void)state;
    struct swift_device_info info[4];
    char why[256];
    int n = swift_device_query(info, 4, why, sizeof(why));
    if (n <= 0) {
        printf("# no GPU: %s (the cuda cases skip)\n", why);
        return 0;
    }
#ifdef SWIFT_HAVE_CUDA
    if (swift_cuda_init(0) == 0) {
        swift_cuda_set_math(SWIFT_CUDA_MATH_FP32);
        swift_cuda_set_attention(SWIFT_CUDA_ATTN_AUTO); /* the default path, whatever the env */
        G = &swift_cuda_ops;
        printf("# GPU: %s (cc %d.%d)\n", info[0].name, info[0].cc_major, info[0].cc_minor);
    }
#endif
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_access_faults),
        cmocka_unit_test(test_zeroed_and_roundtrip),
        cmocka_unit_test(test_select),
        cmocka_unit_test(test_model),
        cmocka_unit_test(test_kv_model),
        cmocka_unit_test(test_qlora_model),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
