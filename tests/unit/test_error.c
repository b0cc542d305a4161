/* error and cli: message formats, exit codes, option tables, config files. */
#include "lib/core/cli.h"
#include "lib/core/error.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static char msgbuf[8192];
static FILE *capture(void)
{
    memset(msgbuf, 0, sizeof(msgbuf));
    FILE *fp = fmemopen(msgbuf, sizeof(msgbuf), "w");
    swift_error_set_stream(fp);
    return fp;
}
static void release(FILE *fp)
{
    fclose(fp);
    swift_error_set_stream(NULL);
}

static void test_error_formats(void **state)
{
    (void)state;
    swift_set_progname("/usr/bin/swift-x");
    FILE *fp = capture();
    assert_int_equal(swift_error("cannot open '%s'", "f"), -1);
    assert_int_equal(swift_error_at("data.jsonl", 17, "expected object, got %s", "array"), -1);
    assert_int_equal(swift_usage("missing operand"), 2);
    fflush(fp);
    assert_string_equal(msgbuf,
                        "swift-x: cannot open 'f'\n"
                        "swift-x:data.jsonl:17: expected object, got array\n"
                        "swift-x: missing operand\n"
                        "Try 'swift-x --help' for more information.\n");
    release(fp);
}

enum { K_MAXLEN = SWIFT_OPT_BASE, K_TUNER, K_FLAG };
static const struct swift_option opts[] = {
    {"output", 'o', SWIFT_ARG_REQUIRED, "DIR", "output directory", NULL},
    {"max-length", K_MAXLEN, SWIFT_ARG_REQUIRED, "N", "max length", NULL},
    {"tuner", K_TUNER, SWIFT_ARG_REQUIRED, "full|lora", "what to train", "train_type,tuner_type"},
    {"packing", K_FLAG, SWIFT_ARG_NONE, NULL, "pack samples", NULL},
    SWIFT_TRACE_OPTIONS,
    {0}};
static const struct swift_command cmd = {
    "swift-x", "[OPTION]... FILE", "test command", opts, NULL, NULL};

struct seen {
    char log[1024];
};
static int on_opt(void *ctx, int key, const char *arg)
{
    struct seen *s = ctx;
    size_t n = strlen(s->log);
    snprintf(s->log + n, sizeof(s->log) - n, "%d=%s;", key, arg ? arg : "-");
    return 0;
}

static void test_cli_aliases(void **state)
{
    (void)state;
    char *argv[] = {"swift-x",
                    "--max_length",
                    "512",
                    "--train_type",
                    "lora",
                    "-o",
                    "d",
                    "--packing",
                    "in.jsonl",
                    NULL};
    struct seen s = {{0}};
    int argi = 0;
    int rc = swift_cli_parse(&cmd, 9, argv, on_opt, &s, &argi);
    assert_int_equal(rc, -1);
    char want[256];
    snprintf(want, sizeof(want), "%d=512;%d=lora;%d=d;%d=-;", K_MAXLEN, K_TUNER, 'o', K_FLAG);
    assert_string_equal(s.log, want);
    assert_string_equal(argv[argi], "in.jsonl");
}

static void test_cli_usage_error(void **state)
{
    (void)state;
    char *argv[] = {"swift-x", "--nope", NULL};
    struct seen s = {{0}};
    int argi;
    FILE *fp = capture();
    assert_int_equal(swift_cli_parse(&cmd, 2, argv, on_opt, &s, &argi), 2);
    fflush(fp);
    assert_non_null(strstr(msgbuf, "unrecognized option '--nope'"));
    release(fp);
}

static void test_cli_yaml_config(void **state)
{
    (void)state;
    char path[] = "/tmp/swift-cli-XXXXXX.yaml";
    int fd = mkstemps(path, 5);
    assert_true(fd >= 0);
    const char *yaml = "max_length: 256\n"
                       "tuner_type: lora\n"
                       "packing: true\n"
                       "profiler:\n"
                       "  enabled: true\n"
                       "  wait_steps: 2\n"
                       "  warmup_steps: 1\n"
                       "  active_steps: 4\n"
                       "  output_dir: /tmp/prof\n";
    assert_int_equal(write(fd, yaml, strlen(yaml)), (int)strlen(yaml));
    close(fd);
    char *argv[] = {"swift-x", path, "--max-length", "1024", "x", NULL};
    struct seen s = {{0}};
    int argi;
    assert_int_equal(swift_cli_parse(&cmd, 5, argv, on_opt, &s, &argi), -1);
    char want[512];
    snprintf(want,
             sizeof(want),
             "%d=256;%d=lora;%d=-;%d=wait=2,warmup=1,active=4;%d=/tmp/prof/;%d=1024;",
             K_MAXLEN,
             K_TUNER,
             K_FLAG,
             SWIFT_OPT_PROFILE,
             SWIFT_OPT_TRACE,
             K_MAXLEN);
    assert_string_equal(s.log, want);
    assert_int_equal(argi, 4);
    assert_string_equal(argv[argi], "x");
    unlink(path);
}

static void test_cli_yaml_unknown_key(void **state)
{
    (void)state;
    char path[] = "/tmp/swift-cli-XXXXXX.yaml";
    int fd = mkstemps(path, 5);
    const char *yaml = "max_length: 256\nbogus_key: 1\n";
    assert_int_equal(write(fd, yaml, strlen(yaml)), (int)strlen(yaml));
    close(fd);
    char *argv[] = {"swift-x", path, NULL};
    struct seen s = {{0}};
    int argi;
    FILE *fp = capture();
    assert_int_equal(swift_cli_parse(&cmd, 2, argv, on_opt, &s, &argi), 1);
    fflush(fp);
    char want[256];
    snprintf(want, sizeof(want), "swift-x:%s:2: unknown option 'bogus_key'\n", path);
    assert_string_equal(msgbuf, want);
    release(fp);
    unlink(path);
}

static void test_parse_numbers(void **state)
{
    (void)state;
    long v;
    assert_int_equal(swift_parse_long("42", 0, 100, &v), 0);
    assert_int_equal(v, 42);
    assert_int_equal(swift_parse_long("abc", 0, 100, &v), -1);
    assert_int_equal(swift_parse_long("4x", 0, 100, &v), -1);
    assert_int_equal(swift_parse_long("101", 0, 100, &v), -1);
    assert_int_equal(swift_parse_long("", 0, 100, &v), -1);
    double d;
    assert_int_equal(swift_parse_double("1e-4", &d), 0);
    assert_true(d == 1e-4);
    assert_int_equal(swift_parse_double("nan", &d), -1);
    unsigned long long sz;
    assert_int_equal(swift_parse_size("5GB", &sz), 0);
    assert_true(sz == 5ULL << 30);
    assert_int_equal(swift_parse_size("10M", &sz), 0);
    assert_true(sz == 10ULL << 20);
    assert_int_equal(swift_parse_size("1.5KiB", &sz), 0);
    assert_true(sz == 1536);
    assert_int_equal(swift_parse_size("12Q", &sz), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_formats),
        cmocka_unit_test(test_cli_aliases),
        cmocka_unit_test(test_cli_usage_error),
        cmocka_unit_test(test_cli_yaml_config),
        cmocka_unit_test(test_cli_yaml_unknown_key),
        cmocka_unit_test(test_parse_numbers),
    };
    return cmocka_run_group_tests_name("error+cli", tests, NULL, NULL);
}
