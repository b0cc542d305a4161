/* fileio, jsonl, pool, sha256, strbuf, progress: atomic outputs, positions in errors, parallel-for,
 * known digests, the progress line's rate limit on an injected clock. */
#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/core/jsonl.h"
#include "lib/core/pool.h"
#include "lib/core/progress.h"
#include "lib/core/sha256.h"
#include "lib/core/strbuf.h"

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

/* strbuf: NUL-terminated after each add, bytes with NULs kept, "" from an empty detach; the
 * three-field form grows a string inside another struct. */
static void test_strbuf(void **state)
{
    (void)state;
    struct swift_strbuf b = {0};
    char *e = swift_strbuf_detach(&b);
    assert_string_equal(e, "");
    free(e);
    for (int i = 0; i < 1000; i++)
        swift_strbuf_adds(&b, "ab");
    swift_strbuf_add(&b, "c\0d", 3);
    assert_int_equal(b.len, 2003);
    assert_true(b.cap > b.len);
    assert_int_equal(b.s[b.len], 0);
    assert_memory_equal(b.s + 1996, "ababc\0d", 8);
    char *s = swift_strbuf_detach(&b);
    assert_null(b.s);
    assert_int_equal(b.len, 0);
    assert_int_equal(s[1], 'b');
    free(s);
    swift_strbuf_adds(&b, "x");
    swift_strbuf_release(&b);
    assert_null(b.s);
    struct {
        int other;
        char *text;
        size_t len, cap;
    } c = {7, NULL, 0, 0};
    swift_str_append(&c.text, &c.len, &c.cap, "", 0);
    assert_string_equal(c.text, "");
    swift_str_append(&c.text, &c.len, &c.cap, "hello", 5);
    swift_str_append(&c.text, &c.len, &c.cap, ", world", 7);
    assert_string_equal(c.text, "hello, world");
    assert_int_equal(c.len, 12);
    free(c.text);
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

/* ---- progress: a clock the test moves, the line into a memory stream ---- */

static int64_t fake_ns;
static int64_t fake_clock(void)
{
    return fake_ns;
}

static size_t count_of(const char *s, const char *what)
{
    size_t n = 0, k = strlen(what);
    for (const char *p = strstr(s, what); p; p = strstr(p + k, what))
        n++;
    return n;
}

/* A forced line on a memory stream with the fake clock at 0. */
static void progress_on_memory(struct swift_progress *p, char **buf, size_t *len)
{
    p->fp = open_memstream(buf, len);
    assert_non_null(p->fp);
    fake_ns = 0;
    p->clock = fake_clock;
    p->t_start = 0;
}

static void test_progress_rate_limit(void **state)
{
    (void)state;
    unsetenv("TERM");
    char *buf = NULL;
    size_t len = 0;
    struct swift_progress p;
    swift_progress_start(&p, "eval exact", 300, "items", SWIFT_PROGRESS_ON);
    progress_on_memory(&p, &buf, &len);
    /* 3 s of updates every 10 ms: lines at 0, 0.5, ..., 3.0 s and no others */
    for (int i = 0; i <= 300; i++) {
        fake_ns = (int64_t)i * 10000000;
        swift_progress_update(&p, (uint64_t)i);
    }
    assert_int_equal(p.draws, 7);
    swift_progress_stop(&p);
    fclose(p.fp);
    assert_int_equal(count_of(buf, "\r"), 8); /* 7 redraws and the final line */
    assert_int_equal(count_of(buf, "\033[K"), 8);
    assert_non_null(strstr(buf, "\reval exact: 0/300 items (0%)"));
    assert_non_null(strstr(buf, "\reval exact: 150/300 items (50%), 100 items/s, ETA 0:02\033[K"));
    assert_non_null(strstr(buf, "\reval exact: 300/300 items (100%), 100 items/s, done.\033[K\n"));
    assert_int_equal(count_of(buf, "\n"), 1); /* one line, ended once */
    free(buf);
}

static void test_progress_clear_holds_the_next_line(void **state)
{
    (void)state;
    unsetenv("TERM");
    char *buf = NULL;
    size_t len = 0;
    struct swift_progress p;
    swift_progress_init(&p, SWIFT_PROGRESS_ON);
    progress_on_memory(&p, &buf, &len);
    assert_true(swift_progress_due(&p));
    swift_progress_show(&p, "train: step %d/%d", 3, 10);
    fake_ns = 100000000;
    swift_progress_clear(&p); /* a record goes to stdout (maybe `| jq` to this terminal) */
    fake_ns = 400000000;
    assert_false(swift_progress_due(&p)); /* 0.3 s after the clear */
    fake_ns = 600000000;
    assert_true(swift_progress_due(&p));
    swift_progress_show(&p, "train: step %d/%d", 4, 10);
    swift_progress_end(&p);
    swift_progress_end(&p); /* a second end writes nothing */
    fclose(p.fp);
    assert_string_equal(buf, "\rtrain: step 3/10\033[K\r\033[K\rtrain: step 4/10\033[K\n");
    free(buf);
}

static void test_progress_off_and_wanted(void **state)
{
    (void)state;
    assert_int_equal(swift_progress_wanted(SWIFT_PROGRESS_ON), 1);
    assert_int_equal(swift_progress_wanted(SWIFT_PROGRESS_OFF), 0);
    assert_int_equal(swift_progress_wanted(SWIFT_PROGRESS_AUTO), isatty(2));
    char *buf = NULL;
    size_t len = 0;
    struct swift_progress p;
    swift_progress_start(&p, "gptq", 4, "layers", SWIFT_PROGRESS_OFF);
    progress_on_memory(&p, &buf, &len);
    for (int i = 1; i <= 4; i++) {
        fake_ns = (int64_t)i * 1000000000;
        swift_progress_update(&p, (uint64_t)i);
    }
    assert_false(swift_progress_due(&p));
    swift_progress_show(&p, "x");
    swift_progress_clear(&p);
    swift_progress_stop(&p);
    fclose(p.fp);
    assert_int_equal(len, 0); /* not one byte: logs and pipes stay as they are */
    free(buf);
}

static void test_progress_dumb_terminal_pads(void **state)
{
    (void)state;
    setenv("TERM", "dumb", 1);
    char *buf = NULL;
    size_t len = 0;
    struct swift_progress p;
    swift_progress_init(&p, SWIFT_PROGRESS_ON);
    progress_on_memory(&p, &buf, &len);
    swift_progress_show(&p, "abcdef");
    swift_progress_show(&p, "xy");
    swift_progress_clear(&p);
    swift_progress_end(&p);
    fclose(p.fp);
    unsetenv("TERM");
    assert_string_equal(buf, "\rabcdef\rxy    \r      \r");
    assert_null(strchr(buf, '\033'));
    free(buf);
}

static void test_progress_message_clears_the_line(void **state)
{
    (void)state;
    unsetenv("TERM");
    char *buf = NULL;
    size_t len = 0;
    struct swift_progress p;
    swift_progress_init(&p, SWIFT_PROGRESS_ON);
    progress_on_memory(&p, &buf, &len);
    swift_error_set_stream(p.fp);
    swift_set_progname("swift-test");
    swift_progress_show(&p, "train: step 1/2");
    swift_warn("slow step");
    swift_error_set_stream(NULL);
    swift_progress_end(&p); /* nothing on the screen: no newline */
    fclose(p.fp);
    assert_string_equal(buf, "\rtrain: step 1/2\033[K\r\033[Kswift-test: warning: slow step\n");
    free(buf);
}

static void test_progress_cut_to_the_terminal_at_a_field(void **state)
{
    (void)state;
    unsetenv("TERM");
    char *buf = NULL;
    size_t len = 0;
    struct swift_progress p;
    swift_progress_init(&p, SWIFT_PROGRESS_ON);
    progress_on_memory(&p, &buf, &len);
    p.cols = 30;
    swift_progress_show(&p, "train: step 3/10, ETA 0:02, loss 1.25"); /* 37 columns */
    p.cols = 12;
    swift_progress_show(&p, "abcdefghijklmnop"); /* no field boundary: cut at 11 */
    p.cols = 80;
    swift_progress_show(&p, "short, line");
    swift_progress_end(&p);
    fclose(p.fp);
    assert_string_equal(buf,
                        "\rtrain: step 3/10, ETA 0:02\033[K\rabcdefghijk\033[K"
                        "\rshort, line\033[K\n");
    free(buf);
}

static void test_progress_hms(void **state)
{
    (void)state;
    char b[24];
    swift_progress_hms(b, sizeof(b), 0);
    assert_string_equal(b, "0:00");
    swift_progress_hms(b, sizeof(b), 75.4);
    assert_string_equal(b, "1:15");
    swift_progress_hms(b, sizeof(b), 3 * 3600 + 62);
    assert_string_equal(b, "3:01:02");
    swift_progress_hms(b, sizeof(b), -5);
    assert_string_equal(b, "0:00");
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
        cmocka_unit_test(test_strbuf),
        cmocka_unit_test(test_progress_rate_limit),
        cmocka_unit_test(test_progress_clear_holds_the_next_line),
        cmocka_unit_test(test_progress_off_and_wanted),
        cmocka_unit_test(test_progress_dumb_terminal_pads),
        cmocka_unit_test(test_progress_message_clears_the_line),
        cmocka_unit_test(test_progress_cut_to_the_terminal_at_a_field),
        cmocka_unit_test(test_progress_hms),
    };
    return cmocka_run_group_tests_name("core", tests, NULL, NULL);
}
