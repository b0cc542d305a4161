/* The rewards of lib/train/reward.h: answer extraction and comparison on real GSM8K rows (and,
 * with $SHARED, on every row of GSM8K's test split), the format regex against ms-swift's pattern
 * as Python's re.match sees it, the soft overlong penalty against TRL's values, weights, and the
 * reward-program protocol with real subprocesses: a Python script, a shell loop, a big batch,
 * one that crashes mid-batch, one that hangs, one that prints garbage — every error names the
 * program and the row, and no process is left behind (waitpid). */
#include "lib/train/reward.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
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

#include "lib/core/error.h"

/* ---------------------------------------------------------------- captured messages */

static char *errbuf;
static size_t errlen;
static FILE *errfp;

static void capture(void)
{
    if (errfp)
        fclose(errfp);
    free(errbuf);
    errbuf = NULL;
    errfp = open_memstream(&errbuf, &errlen);
    swift_error_set_stream(errfp);
}

static const char *captured(void)
{
    fflush(errfp);
    return errbuf ? errbuf : "";
}

static void assert_said(const char *needle)
{
    if (!strstr(captured(), needle))
        fail_msg("message '%s' does not contain '%s'", captured(), needle);
}

static void release(void)
{
    swift_error_set_stream(NULL);
    if (errfp)
        fclose(errfp);
    errfp = NULL;
    free(errbuf);
    errbuf = NULL;
}

/* ---------------------------------------------------------------- answers */

/* GSM8K test rows 0, 146, 489, 611 (openai/grade-school-math, MIT), answers verbatim */
static const char *const gsm_answers[] = {
    "Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day.\nShe makes 9 * 2 = $<<9*2=18>>18 "
    "every day at the farmer\u2019s market.\n#### 18",
    "The first set had 500 pieces, and the second set had 3 times as many as the first set, so "
    "the second set has 500*3=<<500*3=1500>>1500 pieces\nThe third set had one-quarter of the 500 "
    "pieces, so that means it had 500*.25= <<500*.25=125>>125 pieces\nIn total, that means Johnny "
    "picked up 500 + 1500+ 125= <<500+1500+125=2125>>2125 blocks\n#### 2,125",
    "-48 + 21 + (-3) = <<-48+21+(-3)=-30>>-30\n-30/3 = <<-30/3=-10>>-10 degrees\nThe average "
    "highest temperature recorded in Southlandia, Northlandia, and Midlandia is -10 degrees "
    "Fahrenheit.\n#### -10",
    "The research ended up taking 5*10=<<5*10=50>>50 months\nSo he paid for expensive research "
    "for 50-5=<<50-5=45>>45 months\nEach month of research at the cheaper stage cost "
    "100,000/5=$<<100000/5=20000>>20,000\nSo the more expensive research cost "
    "20,000*1.5=$<<20000*1.5=30000>>30,000\nSo that research cost "
    "45*30,000=$<<45*30000=1350000>>1,350,000\nSo the total cost was "
    "1,350,000+100,000=$<<1350000+100000=1450000>>1,450,000\n#### 1,450,000",
};

static void test_extract(void **state)
{
    (void)state;
    char out[SWIFT_REWARD_ANSWER_MAX];
    const char *want[] = {"18", "2,125", "-10", "1,450,000"};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(swift_reward_extract_answer(gsm_answers[i], 1, out, sizeof out), 1);
        assert_string_equal(out, want[i]);
    }
    /* completions: the last \boxed{} wins over numbers, nested braces kept */
    assert_int_equal(swift_reward_extract_answer("so 3 then \\boxed{7} and 9", 0, out, sizeof out),
                     1);
    assert_string_equal(out, "7");
    swift_reward_extract_answer("\\boxed{1} \\boxed{ \\frac{3}{4} }", 0, out, sizeof out);
    assert_string_equal(out, "\\frac{3}{4}");
    swift_reward_extract_answer("The answer is $1,234.50.", 0, out, sizeof out);
    assert_string_equal(out, "1,234.50");
    swift_reward_extract_answer("x = -3, or 5-2", 0, out, sizeof out);
    assert_string_equal(out, "2"); /* "5-2": a minus after a digit is not a sign */
    swift_reward_extract_answer("half is 1/2", 0, out, sizeof out);
    assert_string_equal(out, "1/2");
    /* unclosed \boxed{ is ignored; nothing found: 0 and "" */
    swift_reward_extract_answer("\\boxed{12", 0, out, sizeof out);
    assert_string_equal(out, "12");
    assert_int_equal(swift_reward_extract_answer("no digits", 0, out, sizeof out), 0);
    assert_string_equal(out, "");
    /* a reference without a number is kept whole (string comparison) */
    assert_int_equal(swift_reward_extract_answer("  yes \n", 1, out, sizeof out), 1);
    assert_string_equal(out, "yes");
    /* cut at the buffer */
    char small[4];
    swift_reward_extract_answer("#### 123456", 1, small, sizeof small);
    assert_string_equal(small, "123");
}

static void test_numbers(void **state)
{
    (void)state;
    double v;
    const struct {
        const char *s;
        double v;
    } ok[] = {{"1000", 1000},
              {"1,000", 1000},
              {"1000.0", 1000},
              {"$1,000", 1000},
              {" -10 ", -10},
              {"-$5", -5},
              {"$-5", -5},
              {"3/4", 0.75},
              {"\\frac{3}{4}", 0.75},
              {"\\dfrac{1}{8}", 0.125},
              {"50%", 50},
              {"7.", 7},
              {".5", 0.5},
              {"1,450,000", 1450000}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        if (!swift_reward_parse_number(ok[i].s, &v))
            fail_msg("'%s' did not parse", ok[i].s);
        if (fabs(v - ok[i].v) > 1e-12)
            fail_msg("'%s' -> %g, want %g", ok[i].s, v, ok[i].v);
    }
    const char *bad[] = {"", "abc", "1/0", "3 apples", "1e400", "\\frac{1}{0}", "--1", "1,2,"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (swift_reward_parse_number(bad[i], &v))
            fail_msg("'%s' parsed as %g", bad[i], v);
}

static void test_accuracy(void **state)
{
    (void)state;
    /* the real rows, answered in different spellings */
    assert_true(swift_reward_accuracy("She makes \\boxed{18} dollars.", gsm_answers[0]) == 1);
    assert_true(swift_reward_accuracy("so $18.00", gsm_answers[0]) == 1);
    assert_true(swift_reward_accuracy("so 9 eggs, 19 dollars", gsm_answers[0]) == 0);
    assert_true(swift_reward_accuracy("In total 2125 blocks.", gsm_answers[1]) == 1);
    assert_true(swift_reward_accuracy("\\boxed{2,125}", gsm_answers[1]) == 1);
    assert_true(swift_reward_accuracy("\\boxed{2125.0}", gsm_answers[1]) == 1);
    assert_true(swift_reward_accuracy("The average is -10 degrees", gsm_answers[2]) == 1);
    assert_true(swift_reward_accuracy("The average is 10 degrees", gsm_answers[2]) == 0);
    assert_true(swift_reward_accuracy("$1,450,000", gsm_answers[3]) == 1);
    assert_true(swift_reward_accuracy("$1,450,001", gsm_answers[3]) == 0);
    /* the gold solution itself (its last number is the answer) */
    for (int i = 0; i < 4; i++)
        assert_true(swift_reward_accuracy(gsm_answers[i], gsm_answers[i]) == 1);
    /* the boxed answer wins over a later number */
    assert_true(swift_reward_accuracy("\\boxed{18} (checked 3 times)", gsm_answers[0]) == 1);
    /* fractions, a boxed reference, a text reference, nothing */
    assert_true(swift_reward_accuracy("\\boxed{\\frac{1}{2}}", "#### 0.5") == 1);
    assert_true(swift_reward_accuracy("\\boxed{0.333333}", "\\boxed{\\frac{1}{3}}") == 1);
    assert_true(swift_reward_accuracy("\\boxed{0.3333}", "\\boxed{\\frac{1}{3}}") == 0);
    assert_true(swift_reward_accuracy("it is 1/2", "\\boxed{\\frac{1}{2}}") == 1);
    assert_true(swift_reward_accuracy("\\boxed{x + 1}", "\\boxed{x+1}") == 1);
    assert_true(swift_reward_accuracy("\\boxed{x + 2}", "\\boxed{x+1}") == 0);
    assert_true(swift_reward_accuracy("no answer", "#### 3") == 0);
    assert_true(swift_reward_accuracy("", "") == 0);
}

/* Every GSM8K test row: its own number, as a boxed integer, scores 1; one more scores 0. */
static void test_gsm8k_all(void **state)
{
    (void)state;
    const char *sh = getenv("SHARED") ? getenv("SHARED") : "../shared";
    char path[4096];
    snprintf(path, sizeof path, "%s/data/datasets/gsm8k/test.jsonl", sh);
    FILE *fp = fopen(path, "r");
    if (!fp) {
        if (getenv("CI") && !strcmp(getenv("CI"), "true"))
            fail_msg("missing shared data: %s", path);
        fprintf(stderr, "# skip: no %s\n", path);
        skip();
    }
    char *line = NULL;
    size_t cap = 0;
    long rows = 0;
    while (getline(&line, &cap, fp) > 0) {
        json_t *o = json_loads(line, 0, NULL);
        assert_non_null(o);
        const char *ans = json_string_value(json_object_get(o, "answer"));
        assert_non_null(ans);
        char a[SWIFT_REWARD_ANSWER_MAX], c[SWIFT_REWARD_ANSWER_MAX + 32];
        double v;
        assert_int_equal(swift_reward_extract_answer(ans, 1, a, sizeof a), 1);
        if (!swift_reward_parse_number(a, &v))
            fail_msg("row %ld: answer '%s' is not a number", rows + 1, a);
        snprintf(c, sizeof c, "so \\boxed{%.0f}", v);
        if (swift_reward_accuracy(c, ans) != 1)
            fail_msg("row %ld: '%s' against '%s'", rows + 1, c, a);
        snprintf(c, sizeof c, "so \\boxed{%.0f}", v + 1);
        assert_true(swift_reward_accuracy(c, ans) == 0);
        json_decref(o);
        rows++;
    }
    free(line);
    fclose(fp);
    assert_int_equal(rows, 1319);
}

/* ---------------------------------------------------------------- the set: built-ins */

static struct swift_reward_set *new_set(double timeout_s)
{
    struct swift_reward_config cfg = SWIFT_REWARD_CONFIG_INIT;
    cfg.max_completion_length = 100;
    cfg.cache_length = 20;
    cfg.timeout_s = timeout_s;
    struct swift_reward_set *rs = swift_reward_set_new(&cfg);
    assert_non_null(rs);
    return rs;
}

/* ms-swift's Format pattern with re.match(p, s, re.DOTALL | re.MULTILINE), Python 3:
 * True, False (trailing newline), False, False (anchored at the start, not at a line),
 * True. */
static void test_format(void **state)
{
    (void)state;
    struct swift_reward_set *rs = new_set(5);
    assert_int_equal(swift_reward_add(rs, "format", 1), 0);
    const char *c[] = {"<think>a</think><answer>b</answer>",
                       "<think>a\n</think>\n<answer>b</answer>\n",
                       "<think>a</think><answer>b</answer> x",
                       "x\n<think>a</think><answer>b</answer>",
                       "<think>a</think>\n\n<answer>\n5\n</answer>"};
    const double want[] = {1, 0, 0, 0, 1};
    struct swift_reward_row rows[5];
    double total[5];
    for (int i = 0; i < 5; i++)
        rows[i] = (struct swift_reward_row){.completion = c[i], .completion_tokens = 1};
    assert_int_equal(swift_reward_score(rs, rows, 5, total, NULL), 0);
    for (int i = 0; i < 5; i++)
        if (total[i] != want[i])
            fail_msg("'%s': %g, want %g", c[i], total[i], want[i]);
    swift_reward_set_free(rs);

    /* a pattern of one's own; a bad one is reported with its offset */
    struct swift_reward_config cfg = SWIFT_REWARD_CONFIG_INIT;
    cfg.format_pattern = "^\\d+$";
    rs = swift_reward_set_new(&cfg);
    assert_int_equal(swift_reward_add(rs, "format", 1), 0);
    rows[0].completion = "123";
    rows[1].completion = "12a";
    assert_int_equal(swift_reward_score(rs, rows, 2, total, NULL), 0);
    assert_true(total[0] == 1 && total[1] == 0);
    swift_reward_set_free(rs);
    capture();
    cfg.format_pattern = "(<think>";
    assert_null(swift_reward_set_new(&cfg));
    assert_said("format pattern '(<think>': at offset 8:");
    release();
}

/* TRL 1.16 get_soft_overlong_punishment(100, 20) on lengths 0 80 81 90 99 100 101 500:
 * [0.0, 0.0, -0.05, -0.5, -0.95, -1.0, -1.0, -1.0]; (4096, 1024) on 3072 3073 3584 4096 4097:
 * [0.0, -0.0009765625, -0.5, -1.0, -1.0]. */
static void test_length(void **state)
{
    (void)state;
    const long n1[] = {0, 80, 81, 90, 99, 100, 101, 500};
    const double w1[] = {0.0, 0.0, -0.05, -0.5, -0.95, -1.0, -1.0, -1.0};
    for (int i = 0; i < 8; i++)
        assert_true(fabs(swift_reward_soft_overlong(n1[i], 100, 20) - w1[i]) < 1e-15);
    const long n2[] = {3072, 3073, 3584, 4096, 4097};
    const double w2[] = {0.0, -0.0009765625, -0.5, -1.0, -1.0};
    for (int i = 0; i < 5; i++)
        assert_true(swift_reward_soft_overlong(n2[i], 4096, 1024) == w2[i]);
    assert_true(swift_reward_soft_overlong(100, 100, 0) == 0);
    assert_true(swift_reward_soft_overlong(101, 100, 0) == -1);

    /* in a set: from the rows' token counts; a row without one is an error naming it */
    struct swift_reward_set *rs = new_set(5);
    assert_int_equal(swift_reward_add(rs, "length", 1), 0);
    struct swift_reward_row rows[2] = {
        {.completion = "a", .completion_tokens = 90},
        {.completion = "b", .completion_tokens = -1, .where = "d:2"}};
    double total[2];
    assert_int_equal(swift_reward_score(rs, rows, 1, total, NULL), 0);
    assert_true(total[0] == -0.5);
    capture();
    assert_int_equal(swift_reward_score(rs, rows, 2, total, NULL), -1);
    assert_said("length reward: row 1 (d:2): no completion length");
    release();
    swift_reward_set_free(rs);

    /* the config is checked */
    struct swift_reward_config cfg = SWIFT_REWARD_CONFIG_INIT;
    cfg.cache_length = 1000;
    capture();
    assert_null(swift_reward_set_new(&cfg));
    assert_said("cache length (1000) <= max completion length (512)");
    release();
}

/* accuracy + format + length with weights: totals, per-function scores, names */
static void test_weights(void **state)
{
    (void)state;
    struct swift_reward_set *rs = new_set(5);
    assert_int_equal(swift_reward_add(rs, "accuracy", 1), 0);
    assert_int_equal(swift_reward_add(rs, "format", 1), 0);
    assert_int_equal(swift_reward_add(rs, "length", 1), 0);
    capture();
    assert_int_equal(swift_reward_add(rs, "bleu", 1), -1);
    assert_said("unknown reward function 'bleu' (accuracy, format, length)");
    assert_int_equal(swift_reward_set_weights(rs, "1,0.5"), -1);
    assert_said("2 weights for 3 reward functions");
    assert_int_equal(swift_reward_set_weights(rs, "1,x,2"), -1);
    assert_said("not a list of numbers");
    assert_int_equal(swift_reward_set_weights(rs, "1,1,1,1"), -1);
    assert_said("more weights than reward functions (3)");
    release();
    assert_int_equal(swift_reward_set_weights(rs, "1, 0.5 ,2"), 0);
    assert_int_equal(swift_reward_count(rs), 3);
    assert_string_equal(swift_reward_name(rs, 0), "accuracy");
    assert_string_equal(swift_reward_name(rs, 2), "length");
    assert_true(swift_reward_weight(rs, 1) == 0.5);

    json_t *x = json_pack("{s:s}", "answer", gsm_answers[0]);
    json_t *y = json_pack("{s:s}", "solution", "#### 7"); /* TRL's column name */
    struct swift_reward_row rows[2] = {{.completion = "<think>9*2</think><answer>18</answer>",
                                        .completion_tokens = 90,
                                        .extra = x},
                                       {.completion = "8", .completion_tokens = 10, .extra = y}};
    double total[2], per[6];
    assert_int_equal(swift_reward_score(rs, rows, 2, total, per), 0);
    /* row 0: accuracy 1, format 1, length -0.5 -> 1 + 0.5 - 1 */
    assert_true(per[0] == 1 && per[2] == 1 && per[4] == -0.5);
    assert_true(total[0] == 0.5);
    assert_true(per[1] == 0 && per[3] == 0 && per[5] == 0 && total[1] == 0);

    /* a row without the reference column is an error naming the row */
    rows[1].extra = NULL;
    rows[1].where = "gsm.jsonl:2";
    capture();
    assert_int_equal(swift_reward_score(rs, rows, 2, total, per), -1);
    assert_said("accuracy reward: row 1 (gsm.jsonl:2): no 'answer' column");
    release();
    json_decref(x);
    json_decref(y);
    swift_reward_set_free(rs);
}

/* ---------------------------------------------------------------- the set: programs */

static char tmpdir[64];

static int setup_dir(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/swift-reward-XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown_dir(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

/* A script file in the temp dir; its path into out. */
static void script(const char *name, const char *text, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s", tmpdir, name);
    FILE *fp = fopen(out, "w");
    assert_non_null(fp);
    fputs(text, fp);
    assert_int_equal(fclose(fp), 0);
}

/* Free the set and check that its program was reaped: no child of that pid is left. */
static void free_and_check_reaped(struct swift_reward_set *rs, pid_t pid)
{
    swift_reward_set_free(rs);
    if (pid > 0) {
        int st;
        errno = 0;
        assert_int_equal(waitpid(pid, &st, WNOHANG), -1);
        assert_int_equal(errno, ECHILD);
    }
}

static const char py_judge[] =
    "import json, sys\n"
    "for line in sys.stdin:\n"
    "    row = json.loads(line)\n"
    "    ok = row['answer'] in row['completion'] and row['prompt'] == 'q'\n"
    "    print(1.0 if ok else 0.0, flush=True)\n";

/* The 5-line Python judge and a shell loop: the extra columns reach the program; two batches. */
static void test_cmd_protocol(void **state)
{
    (void)state;
    char py[256], cmd[512];
    script("judge.py", py_judge, py, sizeof py);
    snprintf(cmd, sizeof cmd, "python3 %s", py);
    struct swift_reward_set *rs = new_set(30);
    assert_int_equal(swift_reward_add_cmd(rs, cmd, 2), 0);
    /* a shell loop: 1 when the completion starts with "yes", else 0.25 */
    assert_int_equal(swift_reward_add_cmd(rs,
                                          "while read -r line; do case \"$line\" in "
                                          "*'\"completion\":\"yes'*) echo 1;; *) echo 0.25;; "
                                          "esac; done",
                                          1),
                     0);
    assert_string_equal(swift_reward_name(rs, 0), "cmd");
    assert_string_equal(swift_reward_name(rs, 1), "cmd2");
    pid_t p0 = swift_reward_pid(rs, 0), p1 = swift_reward_pid(rs, 1);
    assert_true(p0 > 0 && p1 > 0);
    json_t *x = json_pack("{s:s, s:i}", "answer", "42", "id", 7);
    /* row 3: invalid UTF-8 (a completion cut inside a character) reaches it as U+FFFD */
    struct swift_reward_row rows[4] = {{.prompt = "q", .completion = "yes 42", .extra = x},
                                       {.prompt = "q", .completion = "no 41", .extra = x},
                                       {.prompt = "p", .completion = "\"quoted\" 42\n", .extra = x},
                                       {.prompt = "q", .completion = "\xe2\x82 42", .extra = x}};
    double total[4], per[8];
    for (int batch = 0; batch < 2; batch++) {
        assert_int_equal(swift_reward_score(rs, rows, 4, total, per), 0);
        assert_true(per[0] == 1 && per[1] == 0 && per[2] == 0 && per[3] == 1);
        assert_true(per[4] == 1 && per[5] == 0.25 && per[6] == 0.25 && per[7] == 0.25);
        assert_true(total[0] == 3 && total[1] == 0.25 && total[2] == 0.25 && total[3] == 2.25);
    }
    json_decref(x);
    swift_reward_set_free(rs);
    free_and_check_reaped(NULL, p0);
    free_and_check_reaped(NULL, p1);
}

/* A batch far bigger than a pipe (4000 rows, ~2 MB): writes and reads interleave, no deadlock. */
static void test_cmd_big_batch(void **state)
{
    (void)state;
    enum { N = 4000 };
    char text[512];
    memset(text, 'a', sizeof text - 1);
    text[sizeof text - 1] = 0;
    struct swift_reward_set *rs = new_set(30);
    assert_int_equal(swift_reward_add_cmd(rs,
                                          "python3 -c 'import sys\n"
                                          "for i, l in enumerate(sys.stdin): print(i % 7)'",
                                          1),
                     0);
    pid_t pid = swift_reward_pid(rs, 0);
    struct swift_reward_row *rows = calloc(N, sizeof *rows);
    double *total = malloc(N * sizeof *total);
    for (int r = 0; r < N; r++)
        rows[r] = (struct swift_reward_row){.prompt = text, .completion = text};
    assert_int_equal(swift_reward_score(rs, rows, N, total, NULL), 0);
    for (int r = 0; r < N; r++)
        if (total[r] != r % 7)
            fail_msg("row %d: %g", r, total[r]);
    free(rows);
    free(total);
    free_and_check_reaped(rs, pid);
}

/* Crashes on the second row of a batch: the error names the program, row 1 and the status. */
static void test_cmd_crash(void **state)
{
    (void)state;
    const char *prog = "python3 -c 'import sys\n"
                       "for i, l in enumerate(sys.stdin):\n"
                       "    if i == 1: sys.exit(3)\n"
                       "    print(0.5, flush=True)'";
    struct swift_reward_set *rs = new_set(30);
    assert_int_equal(swift_reward_add_cmd(rs, prog, 1), 0);
    pid_t pid = swift_reward_pid(rs, 0);
    struct swift_reward_row rows[3] = {{.completion = "a", .where = "data.jsonl:1"},
                                       {.completion = "b", .where = "data.jsonl:2"},
                                       {.completion = "c", .where = "data.jsonl:3"}};
    double total[3];
    capture();
    assert_int_equal(swift_reward_score(rs, rows, 3, total, NULL), -1);
    assert_said("reward program 'python3 -c");
    assert_said("row 1 (data.jsonl:2): exited with status 3");
    /* reaped already; later batches fail clearly instead of scoring */
    errno = 0;
    assert_int_equal(waitpid(pid, NULL, WNOHANG), -1);
    assert_int_equal(swift_reward_pid(rs, 0), 0);
    assert_int_equal(swift_reward_score(rs, rows, 1, total, NULL), -1);
    assert_said("has stopped after an earlier error");
    release();
    free_and_check_reaped(rs, pid);

    /* exits between two batches: the next batch says so, with the status */
    rs = new_set(30);
    assert_int_equal(swift_reward_add_cmd(rs, "read -r l; echo 1", 1), 0);
    pid = swift_reward_pid(rs, 0);
    assert_int_equal(swift_reward_score(rs, rows, 1, total, NULL), 0);
    assert_true(total[0] == 1);
    capture();
    assert_int_equal(swift_reward_score(rs, rows, 1, total, NULL), -1);
    assert_said("row 0 (data.jsonl:1): exited with status 0");
    release();
    free_and_check_reaped(rs, pid);

    /* killed by a signal; a command that is not there (the shell's 127) */
    rs = new_set(30);
    assert_int_equal(swift_reward_add_cmd(rs, "read -r l; kill -9 $$", 1), 0);
    pid = swift_reward_pid(rs, 0);
    capture();
    assert_int_equal(swift_reward_score(rs, rows, 3, total, NULL), -1);
    assert_said("row 0 (data.jsonl:1): was killed by signal 9");
    release();
    free_and_check_reaped(rs, pid);
    rs = new_set(30);
    assert_int_equal(swift_reward_add_cmd(rs, "/nonexistent/judge", 1), 0);
    pid = swift_reward_pid(rs, 0);
    capture();
    assert_int_equal(swift_reward_score(rs, rows, 3, total, NULL), -1);
    assert_said(
        "reward program '/nonexistent/judge': row 0 (data.jsonl:1): exited with status 127");
    release();
    free_and_check_reaped(rs, pid);
}

/* Reads a line and then sleeps: the timeout names the row; the free stops it (SIGTERM). */
static void test_cmd_hang(void **state)
{
    (void)state;
    struct swift_reward_set *rs = new_set(0.5);
    assert_int_equal(swift_reward_add_cmd(rs, "read -r l; echo 1; exec sleep 60", 1), 0);
    pid_t pid = swift_reward_pid(rs, 0);
    struct swift_reward_row rows[2] = {{.completion = "a"}, {.completion = "b", .where = "x:9"}};
    double total[2];
    capture();
    assert_int_equal(swift_reward_score(rs, rows, 2, total, NULL), -1);
    assert_said("reward program 'read -r l; echo 1; exec sleep 60': row 1 (x:9): no reply within "
                "0.5 s");
    release();
    free_and_check_reaped(rs, pid);

    /* one that ignores SIGTERM and EOF is killed; the free reaps it all the same */
    rs = new_set(30);
    assert_int_equal(swift_reward_add_cmd(rs, "trap '' TERM; while :; do sleep 0.05; done", 1), 0);
    pid = swift_reward_pid(rs, 0);
    free_and_check_reaped(rs, pid);
}

/* Garbage and protocol slips: not a number, more lines than rows, a NaN. */
static void test_cmd_garbage(void **state)
{
    (void)state;
    const char *progs[] = {"while read -r l; do echo hello; done",
                           "read -r l; read -r l; printf '1\\n2\\n3\\n'",
                           "while read -r l; do echo nan; done",
                           "while read -r l; do echo '1 2'; done"};
    const char *said[] = {"row 0 (-): wrote 'hello', not a number",
                          "row 1 (-): wrote more lines than rows",
                          "row 0 (-): wrote 'nan', not a number",
                          "row 0 (-): wrote '1 2', not a number"};
    for (int i = 0; i < 4; i++) {
        struct swift_reward_set *rs = new_set(30);
        assert_int_equal(swift_reward_add_cmd(rs, progs[i], 1), 0);
        pid_t pid = swift_reward_pid(rs, 0);
        struct swift_reward_row rows[2] = {{.completion = "a"}, {.completion = "b"}};
        double total[2];
        capture();
        assert_int_equal(swift_reward_score(rs, rows, 2, total, NULL), -1);
        assert_said(said[i]);
        release();
        free_and_check_reaped(rs, pid);
    }
}

static void test_reply_parser(void **state)
{
    (void)state;
    double v;
    assert_int_equal(swift_reward_parse_reply(" 0.5\r", 5, &v), 1);
    assert_true(v == 0.5);
    assert_int_equal(swift_reward_parse_reply("-1e-3", 5, &v), 1);
    assert_true(v == -1e-3);
    assert_int_equal(swift_reward_parse_reply("2xyz", 1, &v), 1); /* only len bytes are read */
    assert_true(v == 2);
    const char *bad[] = {"", " ", "inf", "-nan", "1e999", "0x", "1,5", "1.0 ok"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(swift_reward_parse_reply(bad[i], strlen(bad[i]), &v), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_extract),
        cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_accuracy),
        cmocka_unit_test(test_gsm8k_all),
        cmocka_unit_test(test_format),
        cmocka_unit_test(test_length),
        cmocka_unit_test(test_weights),
        cmocka_unit_test(test_reply_parser),
        cmocka_unit_test(test_cmd_protocol),
        cmocka_unit_test(test_cmd_big_batch),
        cmocka_unit_test(test_cmd_crash),
        cmocka_unit_test(test_cmd_hang),
        cmocka_unit_test(test_cmd_garbage),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
