/* trace writer: every emitted line is a valid event of docs/trace-schema.md, nothing is lost
 * across threads, a killed process leaves a readable file; the profiler schedule follows
 * torch.profiler.schedule. */
#include "lib/core/profile.h"
#include "lib/core/trace.h"

#include <jansson.h>
#include <pthread.h>
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

/* The schema of docs/trace-schema.md, checked line by line. Returns NULL or the problem. */
static const char *check_event(json_t *e)
{
    if (!json_is_object(e))
        return "not an object";
    const char *ph = json_string_value(json_object_get(e, "ph"));
    if (!ph || strlen(ph) != 1 || !strchr("MXCisf", ph[0]))
        return "bad ph";
    if (!json_is_string(json_object_get(e, "name")))
        return "no name";
    if (!json_is_integer(json_object_get(e, "pid")) || !json_is_integer(json_object_get(e, "tid")))
        return "pid/tid not integers";
    if (!json_is_number(json_object_get(e, "ts")))
        return "no ts";
    json_t *args = json_object_get(e, "args");
    switch (ph[0]) {
    case 'X': {
        const char *cat = json_string_value(json_object_get(e, "cat"));
        if (!cat || !swift_trace_category_known(cat))
            return "X without a known cat";
        if (!json_is_number(json_object_get(e, "dur")) ||
            json_number_value(json_object_get(e, "dur")) < 0)
            return "X without dur >= 0";
        break;
    }
    case 'C':
        if (!json_is_object(args) || json_object_size(args) == 0)
            return "C without args";
        break;
    case 'i':
        if (!json_string_value(json_object_get(e, "cat")))
            return "i without cat";
        break;
    case 'M':
        if (!json_is_object(args))
            return "M without args";
        if (!strcmp(json_string_value(json_object_get(e, "name")), "swift_meta")) {
            static const char *keys[] = {"schema_version",
                                         "stage",
                                         "version",
                                         "host",
                                         "pid",
                                         "rank",
                                         "world_size",
                                         "device",
                                         "clock",
                                         "clock_offset_us",
                                         "start_ts",
                                         "argv",
                                         NULL};
            for (int i = 0; keys[i]; i++)
                if (!json_object_get(args, keys[i]))
                    return "swift_meta key missing";
        }
        break;
    default:
        break;
    }
    return NULL;
}

struct counts {
    int lines, M, X, C, i, meta;
};

static void read_trace(const char *path, struct counts *c)
{
    memset(c, 0, sizeof(*c));
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, fp)) > 0) {
        json_error_t je;
        json_t *e = json_loadb(line, (size_t)n, 0, &je);
        if (!e)
            fail_msg("line %d is not JSON: %s: %s", c->lines + 1, je.text, line);
        const char *why = check_event(e);
        if (why)
            fail_msg("line %d: %s: %s", c->lines + 1, why, line);
        const char *ph = json_string_value(json_object_get(e, "ph"));
        c->lines++;
        c->M += ph[0] == 'M';
        c->X += ph[0] == 'X';
        c->C += ph[0] == 'C';
        c->i += ph[0] == 'i';
        c->meta += !strcmp(json_string_value(json_object_get(e, "name")), "swift_meta");
        json_decref(e);
    }
    free(line);
    fclose(fp);
}

#define NTHREADS 4
#define PER_THREAD 20000

static void *emit(void *arg)
{
    (void)arg;
    swift_trace_thread_name("worker");
    for (int k = 0; k < PER_THREAD; k++) {
        int64_t t0 = swift_trace_now();
        struct swift_targ a[] = {SWIFT_TARG_I("k", k), SWIFT_TARG_S("s", "a\"b\\c\n")};
        swift_trace_span("compute", "work", t0, t0 + 1500, a, 2);
    }
    return NULL;
}

static void test_threads_lose_nothing(void **state)
{
    (void)state;
    char path[] = "/tmp/swift-trace-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    char *argv[] = {"swift-test", "--flag", "we\"ird", NULL};
    struct swift_trace_config tc = {
        .stage = "test", .path = path, .argc = 3, .argv = argv, .world_size = 1};
    assert_int_equal(swift_trace_open(&tc), 0);
    assert_true(swift_trace_enabled());
    pthread_t th[NTHREADS];
    for (int t = 0; t < NTHREADS; t++)
        pthread_create(&th[t], NULL, emit, NULL);
    for (int t = 0; t < NTHREADS; t++)
        pthread_join(th[t], NULL);
    swift_trace_counter("loss", 2.5);
    swift_trace_counter("nan", 0.0 / 0.0);
    swift_trace_instant("ckpt", "checkpoint", NULL, 0);
    swift_trace_close();
    assert_false(swift_trace_enabled());
    struct counts c;
    read_trace(path, &c);
    assert_int_equal(c.X, NTHREADS * PER_THREAD);
    assert_int_equal(c.C, 2);
    assert_int_equal(c.i, 1);
    assert_int_equal(c.meta, 1);
    assert_int_equal(c.M, 3 + NTHREADS); /* process_name, thread_name main, swift_meta, workers */
    unlink(path);
}

static void test_directory_naming(void **state)
{
    (void)state;
    char dir[] = "/tmp/swift-tracedir-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char withslash[64];
    snprintf(withslash, sizeof(withslash), "%s/sub/", dir);
    struct swift_trace_config tc = {
        .stage = "train", .path = withslash, .rank = 3, .world_size = 4};
    assert_int_equal(swift_trace_open(&tc), 0);
    const char *p = swift_trace_path();
    assert_non_null(strstr(p, "/sub/train-"));
    char suffix[64];
    snprintf(suffix, sizeof(suffix), "-%d-r3.trace.jsonl", (int)getpid());
    assert_string_equal(p + strlen(p) - strlen(suffix), suffix);
    char copy[4096];
    snprintf(copy, sizeof(copy), "%s", p);
    swift_trace_close();
    struct counts c;
    read_trace(copy, &c);
    assert_int_equal(c.meta, 1);
    unlink(copy);
    char sub[80];
    snprintf(sub, sizeof(sub), "%s/sub", dir);
    rmdir(sub);
    rmdir(dir);
}

static void test_off_is_free(void **state)
{
    (void)state;
    unsetenv("SWIFT_TRACE");
    struct swift_trace_config tc = {.stage = "test"};
    assert_int_equal(swift_trace_open(&tc), 0);
    assert_false(swift_trace_enabled());
    swift_trace_span("compute", "x", 0, 1, NULL, 0); /* must not crash or write */
    assert_null(swift_trace_path());
}

static void test_killed_process_leaves_readable_file(void **state)
{
    (void)state;
    char path[] = "/tmp/swift-trace-kill-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    pid_t pid = fork();
    if (pid == 0) {
        struct swift_trace_config tc = {.stage = "test", .path = path, .world_size = 1};
        swift_trace_open(&tc);
        for (int k = 0; k < 100; k++)
            swift_trace_span("compute", "before-kill", 0, 1000, NULL, 0);
        kill(getpid(), SIGTERM);
        pause();
        _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    assert_true(WIFSIGNALED(st));
    assert_int_equal(WTERMSIG(st), SIGTERM);
    struct counts c;
    read_trace(path, &c);
    assert_int_equal(c.X, 100);
    unlink(path);
}

/* torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=1, skip_first=1). */
static void test_profile_schedule(void **state)
{
    (void)state;
    struct swift_profile p;
    char err[128];
    assert_int_equal(
        swift_profile_parse("wait=1,warmup=1,active=2,repeat=1,skip_first=1", &p, err, sizeof(err)),
        0);
    const enum swift_profile_action want[] = {SWIFT_PROF_NONE,
                                              SWIFT_PROF_NONE,
                                              SWIFT_PROF_WARMUP,
                                              SWIFT_PROF_RECORD,
                                              SWIFT_PROF_RECORD_AND_SAVE,
                                              SWIFT_PROF_NONE,
                                              SWIFT_PROF_NONE};
    for (long s = 0; s < 7; s++)
        assert_int_equal(swift_profile_action(&p, s), want[s]);
    /* repeat=0 cycles forever */
    assert_int_equal(swift_profile_parse("wait=0,warmup=0,active=1", &p, err, sizeof(err)), 0);
    for (long s = 0; s < 5; s++)
        assert_int_equal(swift_profile_action(&p, s), SWIFT_PROF_RECORD_AND_SAVE);
    assert_int_equal(swift_profile_parse("wait=1,active=0", &p, err, sizeof(err)), -1);
    assert_int_equal(swift_profile_parse("wait=x", &p, err, sizeof(err)), -1);
    assert_int_equal(swift_profile_parse("bogus=1", &p, err, sizeof(err)), -1);
    assert_string_equal(err, "unknown profile key 'bogus'");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads_lose_nothing),
        cmocka_unit_test(test_directory_naming),
        cmocka_unit_test(test_off_is_free),
        cmocka_unit_test(test_killed_process_leaves_readable_file),
        cmocka_unit_test(test_profile_schedule),
    };
    return cmocka_run_group_tests_name("trace", tests, NULL, NULL);
}
