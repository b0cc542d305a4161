/* swift_cpu_strict_ops (kernels/cpu/strict.c): host access to its memory faults, upload and
 * download and the ops work, results are swift_cpu_ops' bit for bit, alloc is zeroed (also
 * after a free), and swift_backend_select picks it under SWIFT_CPU_STRICT_HOST=1. */
#include "kernels/ops.h"

#include <fcntl.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

static const struct swift_ops *S = &swift_cpu_strict_ops;

/* Run fn(p) in a child with stdout and stderr silenced; returns its wait status. The child exits 0
 * only if the access did not fault. */
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

static float frand(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((*s >> 40) / 16777216.0) * 2.0f - 1.0f;
}

/* the same op on both tables, inputs uploaded, outputs downloaded: identical bits */
static void test_ops_bit_identical(void **state)
{
    (void)state;
    uint64_t seed = 7;
    for (int N = 1; N <= 3; N += 2) {
        int In = 33, O = 17;
        size_t ni = (size_t)N * In, nw = (size_t)O * In, no = (size_t)N * O;
        float *x = malloc(ni * 4), *w = malloc(nw * 4), *b = malloc((size_t)O * 4);
        float *o1 = calloc(no, 4), *o2 = calloc(no, 4);
        for (size_t i = 0; i < ni; i++)
            x[i] = frand(&seed);
        for (size_t i = 0; i < nw; i++)
            w[i] = frand(&seed);
        for (int i = 0; i < O; i++)
            b[i] = frand(&seed);
        swift_cpu_ops.matmul_fwd(o1, x, w, b, N, In, O, 0.5f, 0.0f);
        float *dx = S->alloc(ni * 4), *dw = S->alloc(nw * 4), *db = S->alloc((size_t)O * 4),
              *dout = S->alloc(no * 4);
        S->upload(dx, x, ni * 4);
        S->upload(dw, w, nw * 4);
        S->upload(db, b, (size_t)O * 4);
        S->matmul_fwd(dout, dx, dw, db, N, In, O, 0.5f, 0.0f);
        S->download(o2, dout, no * 4);
        assert_memory_equal(o1, o2, no * 4);
        assert_true(S->sumsq(dx, ni) == swift_cpu_ops.sumsq(x, ni));
        S->free(dx);
        S->free(dw);
        S->free(db);
        S->free(dout);
        free(x);
        free(w);
        free(b);
        free(o1);
        free(o2);
    }
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_access_faults),
        cmocka_unit_test(test_zeroed_and_roundtrip),
        cmocka_unit_test(test_ops_bit_identical),
        cmocka_unit_test(test_select),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
