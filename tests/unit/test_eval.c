/* lib/eval: task readers, prompts, answer extraction, tallies, the record and the gate. */
#include "lib/eval/eval.h"
#include "lib/eval/prompt.h"
#include "lib/core/error.h"
#include "lib/preprocess/tokenizer.h"
#include "lib/core/jsonl.h"

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
static FILE *msgfp;
static void capture(void)
{
    memset(msgbuf, 0, sizeof(msgbuf));
    msgfp = fmemopen(msgbuf, sizeof(msgbuf), "w");
    swift_error_set_stream(msgfp);
}
static const char *captured(void)
{
    fclose(msgfp);
    swift_error_set_stream(NULL);
    return msgbuf;
}

static int read_csv(const char *text, const char *subject, struct swift_eval_set *set)
{
    FILE *fp = fmemopen((void *)text, strlen(text), "r");
    int rc = swift_eval_read_mmlu_stream(fp, "t.csv", subject, set);
    fclose(fp);
    return rc;
}

static int read_jsonl(int task, const char *text, struct swift_eval_set *set)
{
    FILE *fp = fmemopen((void *)text, strlen(text), "r");
    int rc = swift_eval_read_jsonl_stream(task, fp, "t.jsonl", set);
    fclose(fp);
    return rc;
}

static void test_task_names(void **state)
{
    (void)state;
    assert_int_equal(swift_eval_task_parse("mmlu"), SWIFT_EVAL_MMLU);
    assert_int_equal(swift_eval_task_parse("gsm8k"), SWIFT_EVAL_GSM8K);
    assert_int_equal(swift_eval_task_parse("MMLU"), -1);
    assert_int_equal(swift_eval_task_parse("bleu"), -1);
    assert_int_equal(swift_eval_task_parse("pref"), SWIFT_EVAL_PREF);
    assert_string_equal(swift_eval_task_name(SWIFT_EVAL_PREF), "pref");
    assert_false(swift_eval_task_generates(SWIFT_EVAL_PREF));
    assert_string_equal(swift_eval_task_name(SWIFT_EVAL_PPL), "ppl");
    assert_true(swift_eval_task_generates(SWIFT_EVAL_EXACT));
    assert_false(swift_eval_task_generates(SWIFT_EVAL_MC));
}

static void test_csv_quotes_and_header(void **state)
{
    (void)state;
    swift_set_progname("swift-eval");
    struct swift_eval_set set;
    swift_eval_set_init(&set);
    const char *csv = "question,choice0,choice1,choice2,choice3,answer\r\n"
                      "\"Q1, with \"\"quotes\"\"\nand a newline\",a,\"b,c\",d,e,2\r\n"
                      "\n"
                      "Q2,1,2,3,4,D\n"
                      "Q3,x,y,z,w,0";
    assert_int_equal(read_csv(csv, "algebra", &set), 0);
    assert_int_equal(set.n, 3);
    assert_string_equal(set.items[0].question, "Q1, with \"quotes\"\nand a newline");
    assert_string_equal(set.items[0].choices[1], "b,c");
    assert_int_equal(set.items[0].answer, 2);
    assert_int_equal(set.items[0].line, 2);
    assert_string_equal(set.items[0].subject, "algebra");
    assert_int_equal(set.items[1].answer, 3);
    assert_int_equal(set.items[1].line, 5);
    assert_int_equal(set.items[2].answer, 0);
    assert_string_equal(set.items[2].choices[3], "w");
    assert_string_equal(set.items[2].file, "t.csv");
    swift_eval_set_release(&set);
}

static void expect_csv_error(const char *csv, const char *msg)
{
    struct swift_eval_set set;
    swift_eval_set_init(&set);
    capture();
    assert_int_equal(read_csv(csv, "s", &set), -1);
    assert_string_equal(captured(), msg);
    assert_int_equal(set.n, 0);
    swift_eval_set_release(&set);
}

static void test_csv_errors(void **state)
{
    (void)state;
    swift_set_progname("swift-eval");
    expect_csv_error("question,choice0,choice1,choice2,choice3,answer\nQ,a,b,c,d,\n",
                     "swift-eval:t.csv:2: row without an answer\n");
    expect_csv_error("Q,a,b,c,d,1\nQ,a,b,c,d,4\n",
                     "swift-eval:t.csv:2: answer '4' out of range (0-3 or A-D)\n");
    expect_csv_error("Q,a,b,c,d,1\nQ,a,b,c,d,E\n",
                     "swift-eval:t.csv:2: answer 'E' out of range (0-3 or A-D)\n");
    expect_csv_error(
        "Q,a,b,1\n",
        "swift-eval:t.csv:1: expected 6 fields (question, 4 choices, answer), got 4\n");
    expect_csv_error("Q,a,b,c,d,1\n\"Q\nstill open,a,b,c,d,1\n",
                     "swift-eval:t.csv:2: unterminated quoted field\n");
    expect_csv_error("\"Q\"x,a,b,c,d,1\n",
                     "swift-eval:t.csv:1: unexpected 'x' after a closing quote\n");
}

/*
 * A hand-verified MMLU scoring case: two subjects, five questions, log-likelihoods of
 * " A".." D" fed to the scorer. By hand:
 *   algebra   q1 answer 1, ll argmax 1 -> right; q2 answer 2, argmax 0 -> wrong;
 *             q3 answer 3, argmax 3 (-1.25 > -1.5) -> right: 2/3
 *   astronomy q4 answer 0, ll tie between 0 and 2 -> first index 0 -> right;
 *             q5 answer 1, argmax 2 -> wrong: 1/2
 *   micro = 3/5 = 0.6, macro = (2/3 + 1/2) / 2 = 0.583333...
 */
static void test_mmlu_hand_verified(void **state)
{
    (void)state;
    struct swift_eval_set set;
    swift_eval_set_init(&set);
    assert_int_equal(read_csv("q1,a,b,c,d,1\nq2,a,b,c,d,2\nq3,a,b,c,d,3\n", "algebra", &set), 0);
    assert_int_equal(read_csv("q4,a,b,c,d,A\nq5,a,b,c,d,B\n", "astronomy", &set), 0);
    assert_int_equal(set.n, 5);
    const double ll[5][4] = {
        {-3.0, -0.5, -2.0, -4.0},
        {-0.1, -1.0, -0.2, -3.0},
        {-1.5, -2.5, -9.0, -1.25},
        {-0.7, -1.2, -0.7, -3.0},
        {-2.0, -1.9, -1.0, -5.0},
    };
    struct swift_eval_tally t;
    swift_eval_tally_init(&t);
    for (size_t i = 0; i < set.n; i++) {
        int pick = swift_eval_mc_pick(ll[i], 4);
        assert_int_equal(
            swift_eval_tally_add(&t, set.items[i].subject, pick == set.items[i].answer), 0);
    }
    assert_int_equal(t.n, 2);
    assert_int_equal(t.rows[0].correct, 2);
    assert_int_equal(t.rows[0].n, 3);
    assert_int_equal(t.rows[1].correct, 1);
    assert_int_equal(t.rows[1].n, 2);
    assert_true(fabs(swift_eval_tally_micro(&t) - 0.6) < 1e-12);
    assert_true(fabs(swift_eval_tally_macro(&t) - (2.0 / 3.0 + 0.5) / 2.0) < 1e-12);

    json_t *rec = swift_eval_record_new("m", NULL, SWIFT_EVAL_MMLU, "d", (long)set.n);
    json_object_set_new(
        json_object_get(rec, "metrics"), "accuracy", json_real(swift_eval_tally_micro(&t)));
    swift_eval_record_add_tally(rec, &t);
    char *s = json_dumps(rec, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    assert_string_equal(s,
                        "{\"schema_version\":1,\"model\":\"m\",\"adapters\":null,\"task\":\"mmlu\","
                        "\"dataset\":\"d\",\"n\":5,\"metrics\":{\"accuracy\":0.6},"
                        "\"subjects\":{\"algebra\":{\"n\":3,\"correct\":2,\"accuracy\":"
                        "0.6666666667},\"astronomy\":{\"n\":2,\"correct\":1,\"accuracy\":0.5}}}");
    free(s);
    json_decref(rec);
    swift_eval_tally_release(&t);
    swift_eval_set_release(&set);
}

static void test_mc_pick(void **state)
{
    (void)state;
    const double a[] = {-1, -1, -2};
    assert_int_equal(swift_eval_mc_pick(a, 3), 0);
    const double b[] = {-1, NAN};
    assert_int_equal(swift_eval_mc_pick(b, 2), -1);
    assert_int_equal(swift_eval_mc_pick(a, 0), -1);
}

static void test_prompts(void **state)
{
    (void)state;
    struct swift_eval_set set;
    swift_eval_set_init(&set);
    assert_int_equal(read_csv("1+1?,1,2,3,4,1\n2+2?,2,4,6,8,1\n", "elementary_mathematics", &set),
                     0);
    const struct swift_eval_item *shots[1] = {&set.items[0]};
    char *p = swift_eval_prompt(SWIFT_EVAL_MMLU, &set.items[1], shots, 1);
    assert_string_equal(p,
                        "The following are multiple choice questions (with answers) about "
                        "elementary mathematics.\n\n"
                        "1+1?\nA. 1\nB. 2\nC. 3\nD. 4\nAnswer: B\n\n"
                        "2+2?\nA. 2\nB. 4\nC. 6\nD. 8\nAnswer:");
    free(p);
    char *c = swift_eval_continuation(SWIFT_EVAL_MMLU, &set.items[1], 3);
    assert_string_equal(c, " D");
    free(c);
    c = swift_eval_continuation(SWIFT_EVAL_MC, &set.items[1], 3);
    assert_string_equal(c, " 8");
    free(c);
    assert_null(swift_eval_continuation(SWIFT_EVAL_MC, &set.items[1], 4));
    p = swift_eval_prompt(SWIFT_EVAL_MC, &set.items[1], shots, 1);
    assert_string_equal(p, "Question: 1+1?\nAnswer: 2\n\nQuestion: 2+2?\nAnswer:");
    free(p);
    swift_eval_set_release(&set);
}

static void test_jsonl_mc(void **state)
{
    (void)state;
    swift_set_progname("swift-eval");
    struct swift_eval_set set;
    swift_eval_set_init(&set);
    assert_int_equal(
        read_jsonl(SWIFT_EVAL_MC,
                   "{\"question\":\"q\",\"choices\":[\"x\",\"y\",\"z\"],\"answer\":2}\n"
                   "\n"
                   "{\"question\":\"q\",\"choices\":[\"x\",\"y\"],\"answer\":\"B\","
                   "\"subject\":\"s\"}\n"
                   "{\"question\":\"q\",\"choices\":[\"x\",\"yes\"],\"answer\":\"yes\"}\n",
                   &set),
        0);
    assert_int_equal(set.n, 3);
    assert_int_equal(set.items[0].answer, 2);
    assert_int_equal(set.items[0].nchoices, 3);
    assert_int_equal(set.items[1].answer, 1);
    assert_string_equal(set.items[1].subject, "s");
    assert_int_equal(set.items[1].line, 3);
    assert_int_equal(set.items[2].answer, 1);
    swift_eval_set_release(&set);

    static const struct {
        const char *in, *msg;
    } bad[] = {
        {"{\"question\":\"q\",\"choices\":[\"x\",\"y\"]}\n",
         "swift-eval:t.jsonl:1: row without an answer\n"},
        {"{\"question\":\"q\",\"choices\":[\"x\",\"y\"],\"answer\":0}\n"
         "{\"question\":\"q\",\"choices\":[\"x\",\"y\"],\"answer\":2}\n",
         "swift-eval:t.jsonl:2: answer 2 out of range (2 choices)\n"},
        {"{\"question\":\"q\",\"choices\":[\"x\",\"y\"],\"answer\":\"w\"}\n",
         "swift-eval:t.jsonl:1: answer \"w\" out of range (2 choices)\n"},
        {"{\"question\":\"q\",\"choices\":[\"x\"],\"answer\":0}\n",
         "swift-eval:t.jsonl:1: 'choices' must be an array of 2 to 26 strings\n"},
        {"{\"choices\":[\"x\",\"y\"],\"answer\":0}\n",
         "swift-eval:t.jsonl:1: missing string 'question'\n"},
        {"[1]\n", "swift-eval:t.jsonl:1: expected an object\n"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        swift_eval_set_init(&set);
        capture();
        assert_int_equal(read_jsonl(SWIFT_EVAL_MC, bad[i].in, &set), -1);
        assert_string_equal(captured(), bad[i].msg);
        assert_int_equal(set.n, 0);
        swift_eval_set_release(&set);
    }
}

static void test_jsonl_gsm8k_exact(void **state)
{
    (void)state;
    struct swift_eval_set set;
    swift_eval_set_init(&set);
    assert_int_equal(
        read_jsonl(SWIFT_EVAL_GSM8K,
                   "{\"question\":\"How many?\",\"answer\":\"3 + 4 = <<3+4=7>>7\\n#### 1,007\"}\n",
                   &set),
        0);
    assert_string_equal(set.items[0].target, "1007");
    assert_string_equal(set.items[0].reference, "3 + 4 = <<3+4=7>>7\n#### 1,007");
    swift_eval_set_release(&set);
    swift_eval_set_init(&set);
    assert_int_equal(read_jsonl(SWIFT_EVAL_EXACT,
                                "{\"prompt\":\"capital of France\",\"answer\":\"Paris\"}\n"
                                "{\"question\":\"2+2\",\"answer\":4}\n",
                                &set),
                     0);
    assert_string_equal(set.items[0].target, "Paris");
    assert_string_equal(set.items[1].target, "4");
    swift_eval_set_release(&set);
    swift_eval_set_init(&set);
    assert_int_equal(
        read_jsonl(SWIFT_EVAL_EXACT,
                   "{\"messages\":[{\"role\":\"system\",\"content\":\"s\"},{\"role\":\"user\","
                   "\"content\":\"a?\"},{\"role\":\"assistant\",\"content\":\"x\"},{\"role\":"
                   "\"user\",\"content\":\"What is 13 + 19?\"},{\"role\":\"assistant\",\"content\":"
                   "\"32\"}],\"task\":\"add\"}\n"
                   "{\"query\":\"q\",\"response\":\"r\",\"category\":\"c\"}\n",
                   &set),
        0);
    assert_string_equal(set.items[0].question, "What is 13 + 19?");
    assert_string_equal(set.items[0].target, "32");
    assert_string_equal(set.items[0].subject, "add");
    assert_string_equal(set.items[1].question, "q");
    assert_string_equal(set.items[1].target, "r");
    assert_string_equal(set.items[1].subject, "c");
    swift_eval_set_release(&set);
    swift_eval_set_init(&set);
    capture();
    assert_int_equal(
        read_jsonl(SWIFT_EVAL_GSM8K, "{\"question\":\"q\",\"answer\":\"no number\"}\n", &set), -1);
    assert_string_equal(captured(), "swift-eval:t.jsonl:1: answer has no number\n");
    swift_eval_set_release(&set);
}

static void test_extract_number(void **state)
{
    (void)state;
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"She makes 9 * 2 = $18 a day.\n#### 18", "18"},
        {"#### 1,234", "1234"},
        {"the answer is 18.0", "18"},
        {"#### 18.50 dollars", "18.5"},
        {"first 3 then 4 and finally 12.", "12"},
        {"It costs $1,000,000.", "1000000"},
        {"#### -5", "-5"},
        {"#### -0", "0"},
        {"a 1 #### 2 #### 3 and 4", "3"},
        {"007 agents", "7"},
        {"0.5 of it", "0.5"},
        {"x is 3, 4", "4"},
    };
    char out[64];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(swift_eval_extract_number(cases[i].text, out, sizeof(out)), 1);
        assert_string_equal(out, cases[i].want);
    }
    assert_int_equal(swift_eval_extract_number("no digits here", out, sizeof(out)), 0);
    assert_string_equal(out, "");
    assert_int_equal(swift_eval_extract_number("####", out, sizeof(out)), 0);
}

static void test_exact_match(void **state)
{
    (void)state;
    assert_true(swift_eval_exact_match("  Paris\n", "Paris"));
    assert_true(swift_eval_exact_match("New   York", " New York "));
    assert_false(swift_eval_exact_match("paris", "Paris"));
    assert_false(swift_eval_exact_match("Paris.", "Paris"));
}

static char *tmpfile_with(const char *text)
{
    char *path = strdup("/tmp/test_eval_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

static json_t *record_with(const char *task, double acc, double loss)
{
    json_t *rec = swift_eval_record_new("m", NULL, swift_eval_task_parse(task), "d", 10);
    json_object_set_new(json_object_get(rec, "metrics"), "accuracy", json_real(acc));
    if (loss >= 0)
        json_object_set_new(json_object_get(rec, "metrics"), "loss", json_real(loss));
    return rec;
}

static void test_gate(void **state)
{
    (void)state;
    swift_set_progname("swift-eval");
    json_t *base = record_with("mmlu", 0.50, 2.0);
    char path[] = "/tmp/test_eval_base_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    assert_int_equal(swift_eval_record_write(base, path), 0);
    json_decref(base);

    json_t *same = record_with("mmlu", 0.495, 2.01); /* within 0.01 abs / 1% rel */
    capture();
    assert_int_equal(swift_eval_gate(same, path, 0.01, 0), 0);
    assert_string_equal(captured(), "");
    json_decref(same);

    json_t *worse = record_with("mmlu", 0.48, 2.03);
    capture();
    assert_int_equal(swift_eval_gate(worse, path, 0.01, 0), 2);
    assert_string_equal(
        captured(),
        "swift-eval: regression: accuracy 0.48 vs baseline 0.5, delta -0.02 (max drop 0.01)\n"
        "swift-eval: regression: loss 2.03 vs baseline 2, delta +0.03 (max drop 0.01 "
        "relative)\n");
    /* the comparison is in the record */
    json_t *b = json_object_get(worse, "baseline");
    assert_string_equal(json_string_value(json_object_get(b, "file")), path);
    assert_int_equal(json_integer_value(json_object_get(b, "regressions")), 2);
    json_t *ba = json_object_get(json_object_get(b, "metrics"), "accuracy");
    assert_true(json_real_value(json_object_get(ba, "baseline")) == 0.5);
    assert_true(fabs(json_real_value(json_object_get(ba, "delta")) + 0.02) < 1e-12);
    assert_true(json_is_true(json_object_get(ba, "regression")));
    json_decref(worse);

    json_t *better = record_with("mmlu", 0.9, 1.0);
    capture();
    assert_int_equal(swift_eval_gate(better, path, 0.01, 1), 0); /* verbose: the passing lines */
    assert_string_equal(captured(),
                        "swift-eval: ok: accuracy 0.9 vs baseline 0.5, delta +0.4\n"
                        "swift-eval: ok: loss 1 vs baseline 2, delta -1\n");
    assert_true(json_is_false(json_object_get(
        json_object_get(json_object_get(json_object_get(better, "baseline"), "metrics"), "loss"),
        "regression")));
    json_decref(better);

    /* counts are not gated: fewer tokens on the same data is no regression */
    json_t *fewer = record_with("mmlu", 0.5, 2.0);
    json_object_set_new(json_object_get(fewer, "metrics"), "tokens", json_integer(776));
    char *tpath = tmpfile_with("{\"task\":\"mmlu\",\"dataset\":\"d\",\"metrics\":"
                               "{\"accuracy\":0.5,\"loss\":2.0,\"tokens\":6057}}\n");
    capture();
    assert_int_equal(swift_eval_gate(fewer, tpath, 0.01, 0), 0);
    assert_string_equal(captured(), "");
    assert_null(
        json_object_get(json_object_get(json_object_get(fewer, "baseline"), "metrics"), "tokens"));
    assert_int_equal(swift_eval_metric_direction("tokens"), 0);
    assert_int_equal(swift_eval_metric_direction("token_acc"), 1);
    assert_int_equal(swift_eval_metric_direction("margin"), 1); /* pref: gated upwards */
    assert_int_equal(swift_eval_metric_direction("rewards/chosen"), 0);
    assert_int_equal(swift_eval_metric_direction("logps/chosen"), 0);
    assert_int_equal(swift_eval_metric_direction("accuracy_norm"), 1);
    assert_int_equal(swift_eval_metric_direction("ppl"), -1);
    assert_int_equal(swift_eval_metric_direction("eval_loss"), -1);
    unlink(tpath);
    free(tpath);
    json_decref(fewer);

    /* another dataset is refused, never compared */
    json_t *elsewhere = swift_eval_record_new("m", NULL, SWIFT_EVAL_MMLU, "other", 10);
    json_object_set_new(json_object_get(elsewhere, "metrics"), "accuracy", json_real(0.1));
    capture();
    assert_int_equal(swift_eval_gate(elsewhere, path, 0.01, 0), -1);
    char want1[512];
    snprintf(want1,
             sizeof(want1),
             "swift-eval:%s:1: baseline is for dataset 'd', not 'other' (compare runs on the same "
             "data)\n",
             path);
    assert_string_equal(captured(), want1);
    capture();
    assert_int_equal(swift_eval_baseline_check(path, "mmlu", "other"), -1);
    assert_string_equal(captured(), want1);
    assert_int_equal(swift_eval_baseline_check(path, "mmlu", "d"), 0);
    assert_null(json_object_get(elsewhere, "baseline"));
    json_decref(elsewhere);

    json_t *other = record_with("gsm8k", 0.9, -1);
    capture();
    assert_int_equal(swift_eval_gate(other, path, 0.01, 0), -1);
    char want[512];
    snprintf(
        want, sizeof(want), "swift-eval:%s:1: baseline is for task 'mmlu', not 'gsm8k'\n", path);
    assert_string_equal(captured(), want);
    json_decref(other);
    unlink(path);

    char *bad = tmpfile_with("{\"task\":\"mmlu\"}\n");
    json_t *r = record_with("mmlu", 0.5, -1);
    capture();
    assert_int_equal(swift_eval_gate(r, bad, 0.01, 0), -1);
    snprintf(want,
             sizeof(want),
             "swift-eval:%s:1: not a swift-eval record (no 'metrics' object)\n",
             bad);
    assert_string_equal(captured(), want);
    unlink(bad);
    free(bad);
    bad = tmpfile_with("{\"task\":\"mmlu\",\"dataset\":\"d\",\"metrics\":{\"f1\":0.3}}\n");
    capture();
    assert_int_equal(swift_eval_gate(r, bad, 0.01, 0), -1);
    snprintf(want, sizeof(want), "swift-eval:%s:1: no metric in common with this run\n", bad);
    assert_string_equal(captured(), want);
    unlink(bad);
    free(bad);
    /* several records, none for this dataset */
    bad = tmpfile_with("{\"task\":\"mmlu\",\"dataset\":\"a\",\"metrics\":{\"accuracy\":1}}\n"
                       "{\"task\":\"gsm8k\",\"dataset\":\"d\",\"metrics\":{\"accuracy\":1}}\n");
    capture();
    assert_int_equal(swift_eval_gate(r, bad, 0.01, 0), -1);
    snprintf(want,
             sizeof(want),
             "swift-eval:%s: no baseline record for task 'mmlu' on dataset 'd' among its 2 "
             "records\n",
             bad);
    assert_string_equal(captured(), want);
    unlink(bad);
    free(bad);
    json_decref(r);
}

static void test_real_mmlu_dev(void **state)
{
    (void)state;
    const char *shared = getenv("SHARED");
    char path[4096];
    snprintf(path, sizeof(path), "%s/data/datasets/mmlu", shared ? shared : "../shared");
    if (access(path, R_OK) != 0) {
        if (getenv("CI") && !strcmp(getenv("CI"), "true"))
            fail_msg("shared data missing: %s", path);
        skip();
    }
    struct swift_eval_set set;
    swift_eval_set_init(&set);
    assert_int_equal(swift_eval_read(SWIFT_EVAL_MMLU, path, &set), 0);
    assert_int_equal(set.n, 14042);
    assert_string_equal(set.items[0].subject, "abstract_algebra");
    char *dev = swift_eval_mmlu_dev_path(set.items[0].file);
    assert_non_null(dev);
    assert_non_null(strstr(dev, "/dev/abstract_algebra_dev.csv"));
    struct swift_eval_set ds;
    swift_eval_set_init(&ds);
    assert_int_equal(swift_eval_read(SWIFT_EVAL_MMLU, dev, &ds), 0);
    assert_int_equal(ds.n, 5);
    assert_int_equal(ds.items[0].answer, 1);
    assert_string_equal(ds.items[1].choices[0], "True, True");
    free(dev);
    swift_eval_set_release(&ds);
    swift_eval_set_release(&set);
}

/* --template: the user turn + assistant header, and the end-of-turn id as the stop token
 * (byte-level fixture tokenizer: ids are bytes, 257 <|im_start|>, 258 <|im_end|>). */
static void test_prompter(void **state)
{
    (void)state;
    struct swift_tokenizer *tok;
    assert_int_equal(swift_tokenizer_load(&tok, "tests/fixtures/eval/llama"), 0);
    struct swift_eval_prompter *p = swift_eval_prompter_new(tok, "chatml");
    assert_non_null(p);
    assert_string_equal(swift_eval_prompter_name(p), "chatml");
    const uint32_t *ids;
    size_t n;
    long stop;
    assert_int_equal(swift_eval_prompter_encode(p, "hi", &ids, &n, &stop), 0);
    const char *want = "\x01user\nhi\x02\n\x01"
                       "assistant\n";
    assert_int_equal(n, strlen(want));
    for (size_t i = 0; i < n; i++)
        assert_int_equal(ids[i], want[i] == 1 ? 257u : want[i] == 2 ? 258u : (uint8_t)want[i]);
    assert_int_equal(stop, 258);
    swift_eval_prompter_free(p);
    p = swift_eval_prompter_new(tok, NULL);
    assert_int_equal(swift_eval_prompter_encode(p, "hi", &ids, &n, &stop), 0);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], 'h');
    assert_int_equal(stop, -1);
    swift_eval_prompter_free(p);
    capture();
    assert_null(swift_eval_prompter_new(tok, "nope"));
    assert_non_null(strstr(captured(), "unknown template 'nope'"));
    assert_true(swift_eval_template_known("none"));
    assert_true(swift_eval_template_known("qwen3"));
    assert_false(swift_eval_template_known("nope"));
    swift_tokenizer_free(tok);
}

/* The ids of a plain text row as the loss path renders it (swift_eval_rows_next on
 * {"text": text}), into out (room for max); returns the count. */
static size_t loss_path_ids(struct swift_eval_prompter *p, const char *text, uint32_t *out,
                            size_t max)
{
    json_t *row = json_pack("{s:s}", "text", text);
    char *line = json_dumps(row, 0);
    json_decref(row);
    char path[] = "/tmp/test_eval_rows_XXXXXX.jsonl";
    int fd = mkstemps(path, 6);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, line, strlen(line)), (ssize_t)strlen(line));
    close(fd);
    free(line);
    struct swift_eval_rows *rows;
    assert_int_equal(swift_eval_rows_open(&rows, p, path), 0);
    const uint32_t *ids;
    const uint8_t *mask;
    size_t n;
    assert_int_equal(swift_eval_rows_next(rows, &ids, &mask, &n), 1);
    assert_true(n <= max);
    memcpy(out, ids, n * sizeof(uint32_t));
    swift_eval_rows_close(rows);
    unlink(path);
    return n;
}

/* --template none: a generation prompt has the ids the loss path gives the same text (less the
 * closing eos), Llama-3's <|begin_of_text|> first, as swift-preprocess --encode and HF's
 * tokenizer(text) with add_special_tokens=True for Llama-3 Instruct. */
static void test_prompter_plain_start_token(void **state)
{
    (void)state;
    const char *shared = getenv("SHARED");
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s/data/tokenizers", shared ? shared : "../shared");
    if (access(dir, R_OK) != 0) {
        if (getenv("CI") && !strcmp(getenv("CI"), "true"))
            fail_msg("shared data missing: %s", dir);
        skip();
    }
    static const char *const names[] = {"llama3-instruct", "llama3", "qwen3", "gpt2"};
    const char *text = "Question: What is 2+2?\nAnswer:";
    for (size_t k = 0; k < 4; k++) {
        char path[4200];
        snprintf(path, sizeof(path), "%s/%s", dir, names[k]);
        struct swift_tokenizer *tok;
        assert_int_equal(swift_tokenizer_load(&tok, path), 0);
        struct swift_eval_prompter *p = swift_eval_prompter_new(tok, "none");
        assert_non_null(p);
        uint32_t loss[256];
        size_t nl = loss_path_ids(p, text, loss, 256);
        const uint32_t *ids;
        size_t n;
        long stop;
        assert_int_equal(swift_eval_prompter_encode(p, text, &ids, &n, &stop), 0);
        assert_int_equal(stop, -1);
        /* the loss path's ids end with the eos the prompt leaves open */
        assert_int_equal(n + 1, nl);
        for (size_t i = 0; i < n; i++)
            assert_int_equal(ids[i], loss[i]);
        int llama = !strncmp(names[k], "llama3", 6);
        assert_int_equal(ids[0] == 128000, llama);
        if (k == 0) {
            /* swift-preprocess --encode, HF's tokenizer(text): the same ids */
            struct swift_tok_state *st = swift_tok_state_new(tok);
            struct swift_tokens t = {0};
            assert_int_equal(
                swift_tokenizer_encode(
                    st, text, strlen(text), SWIFT_TOK_PARSE_SPECIAL | SWIFT_TOK_ADD_SPECIAL, &t),
                0);
            assert_int_equal(t.n, n);
            for (size_t i = 0; i < n; i++)
                assert_int_equal(t.ids[i], ids[i]);
            swift_tokens_release(&t);
            swift_tok_state_free(st);
        }
        swift_eval_prompter_free(p);
        swift_tokenizer_free(tok);
    }
}

/* toolcall: items from a glaive-style file (one per assistant turn with calls), the prompt is the
 * conversation before the turn with its tools, and the score compares parsed calls. */
static void test_toolcall(void **state)
{
    (void)state;
    assert_int_equal(swift_eval_task_parse("toolcall"), SWIFT_EVAL_TOOLCALL);
    assert_true(swift_eval_task_generates(SWIFT_EVAL_TOOLCALL));
    char path[] = "/tmp/test_eval_toolcallXXXXXX.json";
    int fd = mkstemps(path, 5);
    assert_true(fd >= 0);
    FILE *fp = fdopen(fd, "w");
    fputs("[{\"conversations\": [{\"from\": \"human\", \"value\": \"Weather?\"}, "
          "{\"from\": \"function_call\", \"value\": \"{\\\"name\\\": \\\"w\\\", "
          "\\\"arguments\\\": {\\\"city\\\": \\\"Paris\\\"}}\"}, {\"from\": \"observation\", "
          "\"value\": \"21\"}, {\"from\": \"gpt\", \"value\": \"21.\"}], \"tools\": "
          "\"[{\\\"name\\\": \\\"w\\\", \\\"description\\\": \\\"weather\\\"}]\"},\n"
          " {\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", "
          "\"content\": \"Hello\"}]}]\n",
          fp);
    fclose(fp);
    struct swift_eval_set set;
    swift_eval_set_init(&set);
    assert_int_equal(swift_eval_read(SWIFT_EVAL_TOOLCALL, path, &set), 0);
    assert_int_equal(set.n, 1);
    assert_int_equal(set.items[0].answer, 1);
    assert_string_equal(set.items[0].target,
                        "[{\"name\":\"w\",\"arguments\":{\"city\":\"Paris\"}}]");
    struct swift_tokenizer *tok;
    assert_int_equal(swift_tokenizer_load(&tok, "tests/fixtures/eval/llama"), 0);
    struct swift_eval_prompter *p = swift_eval_prompter_new(tok, "chatml");
    const uint32_t *ids;
    size_t n;
    long stop;
    assert_int_equal(swift_eval_toolcall_prompt(p, set.items[0].question, 1, 1, &ids, &n, &stop),
                     0);
    assert_int_equal(stop, 258);
    char *text = malloc(n + 1);
    for (size_t i = 0; i < n; i++)
        text[i] = ids[i] < 256 ? (char)ids[i] : '#';
    text[n] = 0;
    /* the tools in the system turn, the user's question, the assistant header; no call */
    assert_non_null(
        strstr(text, "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"w\""));
    assert_non_null(strstr(text, "user\nWeather?#\n#assistant\n"));
    assert_null(strstr(text, "Paris"));
    free(text);
    swift_eval_prompter_free(p);
    swift_tokenizer_free(tok);

    const char *t = set.items[0].target;
    int names;
    const char *good =
        "<tool_call>\n{\"name\": \"w\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
    assert_int_equal(swift_eval_toolcall_score(1, good, strlen(good), t, &names), 1);
    assert_int_equal(names, 1);
    const char *args =
        "<tool_call>{\"name\": \"w\", \"arguments\": {\"city\": \"Rome\"}}</tool_call>";
    assert_int_equal(swift_eval_toolcall_score(1, args, strlen(args), t, &names), 0);
    assert_int_equal(names, 1);
    const char *name =
        "<tool_call>{\"name\": \"v\", \"arguments\": {\"city\": \"Paris\"}}</tool_call>";
    assert_int_equal(swift_eval_toolcall_score(1, name, strlen(name), t, &names), 0);
    assert_int_equal(names, 0);
    const char *two =
        "<tool_call>{\"name\": \"w\", \"arguments\": {\"city\": \"Paris\"}}</tool_call>"
        "<tool_call>{\"name\": \"w\", \"arguments\": {}}</tool_call>";
    assert_int_equal(swift_eval_toolcall_score(1, two, strlen(two), t, &names), 0);
    assert_int_equal(names, 0);
    const char *llama = "{\"name\": \"w\", \"parameters\": {\"city\": \"Paris\"}}";
    assert_int_equal(swift_eval_toolcall_score(2, llama, strlen(llama), t, &names), 1);
    assert_int_equal(swift_eval_toolcall_score(1, "Paris", 5, t, &names), 0);
    swift_eval_set_release(&set);
    unlink(path);

    /* a file without any call turn is an error */
    fp = fopen(path, "w");
    fputs("{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": "
          "\"assistant\", \"content\": \"Hello\"}]}\n",
          fp);
    fclose(fp);
    swift_eval_set_init(&set);
    capture();
    assert_int_equal(swift_eval_read(SWIFT_EVAL_TOOLCALL, path, &set), -1);
    assert_non_null(strstr(captured(), "no assistant turn with tool calls"));
    swift_eval_set_release(&set);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_task_names),
        cmocka_unit_test(test_csv_quotes_and_header),
        cmocka_unit_test(test_csv_errors),
        cmocka_unit_test(test_mmlu_hand_verified),
        cmocka_unit_test(test_mc_pick),
        cmocka_unit_test(test_prompts),
        cmocka_unit_test(test_jsonl_mc),
        cmocka_unit_test(test_jsonl_gsm8k_exact),
        cmocka_unit_test(test_extract_number),
        cmocka_unit_test(test_exact_match),
        cmocka_unit_test(test_gate),
        cmocka_unit_test(test_real_mmlu_dev),
        cmocka_unit_test(test_prompter),
        cmocka_unit_test(test_prompter_plain_start_token),
        cmocka_unit_test(test_toolcall),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
