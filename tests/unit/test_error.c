/* error and cli: message formats, exit codes, option tables, config files. */
#include "lib/core/cli.h"
#include "lib/core/error.h"

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

/* A table of callbacks that log "name=arg;" in parse order. */
struct seen {
    char log[1024];
};
static int log_opt(const struct swift_option *opt, void *data, const char *arg)
{
    struct seen *s = data;
    size_t n = strlen(s->log);
    snprintf(s->log + n, sizeof(s->log) - n, "%s=%s;", opt->name, arg ? arg : "-");
    return 0;
}
static const struct swift_option opts[] = {
    SWIFT_OPT_CALLBACK('o', "output", log_opt, "DIR", "output directory"),
    SWIFT_OPT_CALLBACK(0, "max-length", log_opt, "N", "max length"),
    SWIFT_OPT_CALLBACK(0, "tuner", log_opt, "full|lora", "what to train",
                       .aliases = "train_type,tuner_type"),
    SWIFT_OPT_CALLBACK(0, "packing", log_opt, NULL, "pack samples"),
    SWIFT_OPT_CALLBACK(0, "trace", log_opt, "PATH", "trace"),
    SWIFT_OPT_CALLBACK(0, "profile", log_opt, "SPEC", "profile"),
    SWIFT_OPT_END};
static const struct swift_command cmd = {
    .name = "swift-x", .usage = "[OPTION]... FILE", .summary = "test command", .options = opts};

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
    int rc = swift_cli_parse(&cmd, 9, argv, &s, &argi);
    assert_int_equal(rc, -1);
    assert_string_equal(s.log, "max-length=512;tuner=lora;output=d;packing=-;");
    assert_string_equal(argv[argi], "in.jsonl");
}

static void test_cli_usage_error(void **state)
{
    (void)state;
    char *argv[] = {"swift-x", "--nope", NULL};
    struct seen s = {{0}};
    int argi;
    FILE *fp = capture();
    assert_int_equal(swift_cli_parse(&cmd, 2, argv, &s, &argi), 2);
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
    assert_int_equal(swift_cli_parse(&cmd, 5, argv, &s, &argi), -1);
    /* the command line's --max-length replaces the file's (which no longer runs first) */
    assert_string_equal(s.log,
                        "tuner=lora;packing=-;profile=wait=2,warmup=1,active=4;"
                        "trace=/tmp/prof/;max-length=1024;");
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
    /* a usage error like an unknown flag: exit 2 and the hint (was exit 1, a bad file) */
    assert_int_equal(swift_cli_parse(&cmd, 2, argv, &s, &argi), 2);
    fflush(fp);
    char want[256];
    snprintf(want,
             sizeof(want),
             "swift-x:%s:2: unknown option 'bogus_key'\nTry 'swift-x --help' for more "
             "information.\n",
             path);
    assert_string_equal(msgbuf, want);
    release(fp);
    unlink(path);
}

/* A key another program takes is left out, with one note naming it and its program; flags on
 * the command line replace the file's, repeatable or not. */
static const char *const other_keys[] = {"dataset", "template", "output-dir", NULL};
static const char *const train_keys[] = {"max-length", "lora-rank", "tuner", "train_type", NULL};
static const struct swift_cli_program programs[] = {
    {"swift-pre", other_keys}, {"swift-x", train_keys}, {"swift-eval", other_keys}, {NULL, NULL}};

static void test_cli_yaml_other_stage(void **state)
{
    (void)state;
    char path[] = "/tmp/swift-cli-XXXXXX.yaml";
    int fd = mkstemps(path, 5);
    const char *yaml = "dataset: a.jsonl\nmax_length: 256\ntemplate: chatml\ntorch_dtype: "
                       "bfloat16\noutput_dir: d\ntrace: t1\n";
    assert_int_equal(write(fd, yaml, strlen(yaml)), (int)strlen(yaml));
    close(fd);
    swift_cli_set_programs(programs);
    char *argv[] = {"swift-x", path, "--trace", "t2", "x", NULL};
    struct seen s = {{0}};
    int argi;
    FILE *fp = capture();
    assert_int_equal(swift_cli_parse(&cmd, 5, argv, &s, &argi), -1);
    fflush(fp);
    char want[512];
    snprintf(
        want,
        sizeof(want),
        "swift-x: %s: ignoring keys for other stages: dataset (swift-pre/swift-eval), template "
        "(swift-pre/swift-eval), torch_dtype (swift-train), output_dir (swift-pre/swift-eval)\n",
        path);
    assert_string_equal(msgbuf, want);
    /* the file's --trace gave way to the command line's */
    assert_string_equal(s.log, "max-length=256;trace=t2;");
    assert_string_equal(argv[argi], "x");
    release(fp);
    swift_cli_set_programs(NULL);
    unlink(path);
}

/* Typed entries store into the struct the table describes. */
struct typed {
    int flag, count, mode, level;
    long big;
    uint64_t size64;
    unsigned long long size;
    double ratio, any;
    const char *path, *fmt;
    int cb_value;
};
#define T(m) SWIFT_FIELD(struct typed, m)
static int lookup_level(const char *s)
{
    return !strcmp(s, "low") ? 1 : !strcmp(s, "high") ? 2 : -1;
}
static int take_value(const struct swift_option *opt, void *data, const char *arg)
{
    *(int *)swift_option_field(opt, data) = opt->value + (arg ? (int)strlen(arg) : 0);
    return 0;
}
static const struct swift_option typed_opts[] = {
    SWIFT_OPT_FLAG('f', "flag", T(flag), "a flag"),
    SWIFT_OPT_SET(0, "no-flag", T(flag), 7, "set 7"),
    SWIFT_OPT_INT('n', "count", T(count), 1, 10, "N", "a count", .aliases = "num"),
    SWIFT_OPT_INT(0, "big", T(big), 0, 1L << 40, "N", "a long"),
    SWIFT_OPT_SIZE(0, "size64", T(size64), 1024, "SIZE", "a uint64_t size"),
    SWIFT_OPT_SIZE(0, "size", T(size), 1, "SIZE", "a size", .error = "--size: bad size '{arg}'"),
    SWIFT_OPT_DOUBLE(0, "ratio", T(ratio), 0, 1, "R", "in [0, 1)", .flags = SWIFT_OPT_OPEN_MAX,
                     .range_error = "--ratio must be below {max}"),
    SWIFT_OPT_NUMBER(0, "any", T(any), "X", "any number"),
    SWIFT_OPT_PATH(0, "path", T(path), "FILE", "a path"),
    SWIFT_OPT_STRING(0, "fmt", T(fmt), "gguf|hf", "a word",
                     .choices = SWIFT_CHOICES({"gguf", 0}, {"hf", 0}),
                     .error = "--fmt must be gguf or hf, not '{arg}'"),
    SWIFT_OPT_ENUM(0, "mode", T(mode), SWIFT_CHOICES({"a", 10}, {"b", 20}), "a|b", "a mode"),
    SWIFT_OPT_LOOKUP(0, "level", T(level), lookup_level, "low|high", "a level"),
    SWIFT_OPT_CALLBACK(0, "cb", take_value, "S", "a callback", T(cb_value), .value = 100),
    SWIFT_OPT_IGNORE(0, "ignored", "X", "accepted, dropped"),
    SWIFT_OPT_END};
static const struct swift_command typed_cmd = {.name = "swift-t",
                                               .options = typed_opts,
                                               .int_error = "--{name}: {arg} not in {min}..{max}",
                                               .number_error = "--{name}: '{arg}' is not a number"};

static void test_cli_typed_store(void **state)
{
    (void)state;
    char *argv[] = {"swift-t",  "-f",    "--num",  "3",         "--big=1099511627776",
                    "--size64", "2K",    "--size", "1.5KiB",    "--ratio",
                    "0.25",     "--any", "-inf",   "--path",    "p",
                    "--fmt",    "hf",    "--mode", "b",         "--level",
                    "high",     "--cb",  "abc",    "--ignored", "x",
                    "pos",      NULL};
    int argc = (int)(sizeof(argv) / sizeof(argv[0])) - 1;
    struct typed t = {0};
    int argi;
    assert_int_equal(swift_cli_parse(&typed_cmd, argc, argv, &t, &argi), -1);
    assert_int_equal(t.flag, 1);
    assert_int_equal(t.count, 3);
    assert_true(t.big == 1L << 40);
    assert_true(t.size64 == 2048);
    assert_true(t.size == 1536);
    assert_true(t.ratio == 0.25);
    assert_true(isinf(t.any) && t.any < 0);
    assert_string_equal(t.path, "p");
    assert_string_equal(t.fmt, "hf");
    assert_int_equal(t.mode, 20);
    assert_int_equal(t.level, 2);
    assert_int_equal(t.cb_value, 103);
    assert_int_equal(argi, argc - 1);
    assert_string_equal(argv[argi], "pos");
    char *argv2[] = {"swift-t", "--no_flag", "-n10", NULL};
    assert_int_equal(swift_cli_parse(&typed_cmd, 3, argv2, &t, &argi), -1);
    assert_int_equal(t.flag, 7);
    assert_int_equal(t.count, 10);
}

/* Bad values: exit 2 and the table's words. */
static void test_cli_typed_errors(void **state)
{
    (void)state;
    static const struct {
        const char *opt, *arg, *msg;
    } cases[] = {
        {"--count", "11", "--count: 11 not in 1..10"},
        {"--count", "x", "--count: x not in 1..10"},
        {"--big", "-1", "--big: -1 not in 0..1099511627776"},
        {"--big", "99999999999999999999", "--big: 99999999999999999999 not in 0..1099511627776"},
        {"--size64", "1023", "invalid argument '1023' for '--size64'"},
        {"--size", "0", "--size: bad size '0'"},
        {"--size", "12Q", "--size: bad size '12Q'"},
        {"--ratio", "1", "--ratio must be below 1"},
        {"--ratio", "-0.5", "--ratio must be below 1"},
        {"--ratio", "nan", "--ratio: 'nan' is not a number"},
        {"--any", "1e", "--any: '1e' is not a number"},
        {"--fmt", "gg", "--fmt must be gguf or hf, not 'gg'"},
        {"--mode", "c", "invalid argument 'c' for '--mode'"},
        {"--level", "mid", "invalid argument 'mid' for '--level'"},
    };
    swift_set_progname("swift-t");
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *argv[] = {"swift-t", (char *)cases[i].opt, (char *)cases[i].arg, NULL};
        struct typed t = {0};
        int argi;
        FILE *fp = capture();
        assert_int_equal(swift_cli_parse(&typed_cmd, 3, argv, &t, &argi), 2);
        fflush(fp);
        char want[256];
        snprintf(want,
                 sizeof(want),
                 "swift-t: %s\nTry 'swift-t --help' for more information.\n",
                 cases[i].msg);
        assert_string_equal(msgbuf, want);
        release(fp);
    }
}

/* An entry whose type does not fit its field is a bug, reported before anything is parsed. */
struct wrong {
    double d;
};
static const struct swift_option wrong_opts[] = {
    SWIFT_OPT_INT(0, "n", SWIFT_FIELD(struct wrong, d), 0, 1, "N", "an int into a double"),
    SWIFT_OPT_END};
static const struct swift_command wrong_cmd = {.name = "swift-w", .options = wrong_opts};

static void test_cli_table_mismatch(void **state)
{
    (void)state;
    char *argv[] = {"swift-w", "--help", NULL};
    struct wrong w = {0};
    int argi;
    swift_set_progname("swift-w");
    FILE *fp = capture();
    assert_int_equal(swift_cli_parse(&wrong_cmd, 2, argv, &w, &argi), 1);
    fflush(fp);
    assert_string_equal(msgbuf, "swift-w: option table entry --n does not fit its field\n");
    release(fp);
}

/* A config file fills the typed fields as the same options on the command line would. */
static void test_cli_typed_config(void **state)
{
    (void)state;
    char path[] = "/tmp/swift-cli-XXXXXX.json";
    int fd = mkstemps(path, 5);
    assert_true(fd >= 0);
    const char *json = "{\"num\": 4, \"flag\": false, \"mode\": \"a\", \"ratio\": 0.5, "
                       "\"fmt\": \"gguf\", \"size\": \"1M\"}";
    assert_int_equal(write(fd, json, strlen(json)), (int)strlen(json));
    close(fd);
    char *argv[] = {"swift-t", path, "--num", "5", NULL};
    struct typed t = {0};
    int argi;
    assert_int_equal(swift_cli_parse(&typed_cmd, 4, argv, &t, &argi), -1);
    assert_int_equal(argi, 4);
    assert_int_equal(t.count, 5);
    assert_int_equal(t.flag, 0);
    assert_int_equal(t.mode, 10);
    assert_true(t.ratio == 0.5);
    assert_string_equal(t.fmt, "gguf");
    assert_true(t.size == 1u << 20);
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
        cmocka_unit_test(test_cli_yaml_other_stage),
        cmocka_unit_test(test_cli_typed_store),
        cmocka_unit_test(test_cli_typed_errors),
        cmocka_unit_test(test_cli_table_mismatch),
        cmocka_unit_test(test_cli_typed_config),
        cmocka_unit_test(test_parse_numbers),
    };
    return cmocka_run_group_tests_name("error+cli", tests, NULL, NULL);
}
