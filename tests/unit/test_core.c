/* fileio, jsonl, pool, sha256: atomic outputs, positions in errors, parallel-for, known digests. */
#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/core/jsonl.h"
#include "lib/core/pool.h"
#include "lib/core/sha256.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

static char msgbuf[4096];

static void test_atomic_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/swift-core-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char *path = swift_path_join(dir, "out.json");
    assert_int_equal(swift_atomic_write(path, "old\n", 4), 0);

    struct swift_atomic af;
    assert_int_equal(swift_atomic_open(&af, path), 0);
    fputs("new but abandoned", af.fp);
    swift_atomic_abort(&af);
    char *data;
    size_t len;
    assert_int_equal(swift_read_file(path, 1 << 20, &data, &len), 0);
    assert_string_equal(data, "old\n"); /* the final name never saw the abandoned write */
    free(data);

    assert_int_equal(swift_atomic_open(&af, path), 0);
    fputs("new\n", af.fp);
    assert_int_equal(swift_atomic_commit(&af), 0);
    assert_int_equal(swift_read_file(path, 1 << 20, &data, &len), 0);
    assert_string_equal(data, "new\n");
    free(data);
    /* no temporaries left behind */
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "test $(ls -A %s | wc -l) -eq 1", dir);
    assert_int_equal(system(cmd), 0);
    free(path);
    swift_remove_tree(dir);
}

static void test_atomic_dir(void **state)
{
    (void)state;
    char dir[] = "/tmp/swift-core-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char *final = swift_path_join(dir, "model");
    char *tmp;
    assert_int_equal(swift_atomic_dir_begin(final, &tmp), 0);
    char *f = swift_path_join(tmp, "a.txt");
    assert_int_equal(swift_atomic_write(f, "x", 1), 0);
    free(f);
    assert_false(swift_is_dir(final));
    assert_int_equal(swift_atomic_dir_commit(tmp, final, 0), 0);
    assert_true(swift_is_dir(final));
    /* a second commit without force refuses and leaves the first intact */
    assert_int_equal(swift_atomic_dir_begin(final, &tmp), 0);
    FILE *fp = fmemopen(msgbuf, sizeof(msgbuf), "w");
    swift_error_set_stream(fp);
    assert_int_equal(swift_atomic_dir_commit(tmp, final, 0), -1);
    fclose(fp);
    swift_error_set_stream(NULL);
    assert_non_null(strstr(msgbuf, "exists (use --force to replace it)"));
    swift_atomic_dir_abort(tmp);
    free(final);
    swift_remove_tree(dir);
}

static void test_jsonl_positions(void **state)
{
    (void)state;
    const char *text = "{\"a\":1}\n\n[1,2]\n{\"b\":\n\"x\"\n";
    FILE *in = fmemopen((void *)text, strlen(text), "r");
    struct swift_jsonl r;
    swift_jsonl_init_fp(&r, in, "data.jsonl", 0);
    json_t *v;
    assert_int_equal(swift_jsonl_next(&r, &v), 1);
    assert_int_equal(r.line, 1);
    json_decref(v);
    assert_int_equal(swift_jsonl_next(&r, &v), 1);
    assert_int_equal(r.line, 3);
    json_decref(v);
    FILE *fp = fmemopen(msgbuf, sizeof(msgbuf), "w");
    swift_error_set_stream(fp);
    assert_int_equal(swift_jsonl_next(&r, &v), -1);
    fclose(fp);
    swift_error_set_stream(NULL);
    assert_non_null(strstr(msgbuf, ":data.jsonl:4: "));
    swift_jsonl_close(&r);
    fclose(in);

    /* skip-and-count keeps the first positions */
    in = fmemopen((void *)text, strlen(text), "r");
    swift_jsonl_init_fp(&r, in, "data.jsonl", SWIFT_JSONL_SKIP_INVALID);
    int n = 0;
    while (swift_jsonl_next(&r, &v) > 0) {
        n++;
        json_decref(v);
    }
    assert_int_equal(n, 3); /* {"a":1}, [1,2], "x" */
    assert_int_equal(r.skipped, 1);
    assert_int_equal(r.first_bad[0], 4);
    swift_jsonl_close(&r);
    fclose(in);
}

static void test_jsonl_line_ceiling(void **state)
{
    (void)state;
    char *text = malloc(10000);
    memset(text, 'x', 9999);
    text[9999] = 0;
    FILE *in = fmemopen(text, strlen(text), "r");
    struct swift_jsonl r;
    swift_jsonl_init_fp(&r, in, "big.jsonl", 0);
    r.max_line = 1000;
    json_t *v;
    FILE *fp = fmemopen(msgbuf, sizeof(msgbuf), "w");
    swift_error_set_stream(fp);
    assert_int_equal(swift_jsonl_next(&r, &v), -1);
    fclose(fp);
    swift_error_set_stream(NULL);
    assert_non_null(strstr(msgbuf, "big.jsonl:1: line longer than 1000 bytes"));
    swift_jsonl_close(&r);
    fclose(in);
    free(text);
}

static atomic_long hits[1000];
static void count_one(void *ctx, long i, int worker)
{
    (void)ctx;
    (void)worker;
    atomic_fetch_add(&hits[i], 1);
}

static void test_pool_covers_each_index_once(void **state)
{
    (void)state;
    for (int threads = 1; threads <= 4; threads++) {
        memset(hits, 0, sizeof(hits));
        struct swift_pool *p = swift_pool_new(threads);
        assert_int_equal(swift_pool_size(p), threads);
        for (int rep = 0; rep < 3; rep++)
            swift_pool_for(p, 1000, 0, count_one, NULL);
        swift_pool_free(p);
        for (int i = 0; i < 1000; i++)
            assert_int_equal(hits[i], 3);
    }
}

static void test_sha256_vectors(void **state)
{
    (void)state;
    char hex[65];
    swift_sha256_hex("", 0, hex); /* FIPS 180-2 vectors */
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    swift_sha256_hex("abc", 3, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    struct swift_sha256 s;
    swift_sha256_init(&s);
    const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    swift_sha256_update(&s, m, 10);
    swift_sha256_update(&s, m + 10, strlen(m) - 10);
    swift_sha256_final(&s, hex);
    assert_string_equal(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

static void test_alloc_grow_and_dup(void **state)
{
    (void)state;
    int *v = NULL;
    size_t cap = 0;
    for (int i = 0; i < 1000; i++) {
        swift_xgrow((void **)&v, &cap, (size_t)i + 1, sizeof(*v));
        v[i] = i;
    }
    assert_true(cap >= 1000);
    assert_int_equal(v[999], 999);
    free(v);
    char *d = swift_xstrndup("abcdef", 3);
    assert_string_equal(d, "abc");
    free(d);
    d = swift_xstrdup("");
    assert_string_equal(d, "");
    free(d);
    void *z = swift_xcalloc(0, 8); /* a unique pointer, never NULL */
    assert_non_null(z);
    free(z);
}

/* Out of memory exits 1 with the size in the message, in a child so the test goes on. */
static void test_alloc_out_of_memory_exits_1(void **state)
{
    (void)state;
#if defined(__SANITIZE_ADDRESS__)
    skip(); /* ASan aborts on an impossible allocation before malloc can return NULL */
#else
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fd[1], 2);
        swift_set_progname("swift-test");
        volatile size_t n = SIZE_MAX / 2;
        void *p = swift_xmalloc(n);
        free(p);
        _exit(0);
    }
    close(fd[1]);
    char buf[256] = {0};
    ssize_t got = read(fd[0], buf, sizeof(buf) - 1);
    close(fd[0]);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 1);
    assert_true(got > 0);
    assert_non_null(strstr(buf, "swift-test: out of memory ("));
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_atomic_file),
        cmocka_unit_test(test_atomic_dir),
        cmocka_unit_test(test_jsonl_positions),
        cmocka_unit_test(test_jsonl_line_ceiling),
        cmocka_unit_test(test_pool_covers_each_index_once),
        cmocka_unit_test(test_sha256_vectors),
        cmocka_unit_test(test_alloc_grow_and_dup),
        cmocka_unit_test(test_alloc_out_of_memory_exits_1),
    };
    return cmocka_run_group_tests_name("core", tests, NULL, NULL);
}
