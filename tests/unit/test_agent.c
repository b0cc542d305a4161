/* agent templates: ids equal to the official Jinja templates rendered with tools (fixtures from
 * tests/ref/gen_agent.py), loss masks of calls and results, render -> parse round trips for every
 * agent template, malformed calls. */
#include "lib/preprocess/agent.h"
#include "lib/preprocess/dataset.h"
#include "lib/preprocess/template.h"
#include "lib/preprocess/tokenizer.h"

#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static struct swift_tokenizer *load(const char *name)
{
    const char *sh = getenv("SHARED") ? getenv("SHARED") : "../shared";
    char path[1024];
    snprintf(path, sizeof(path), "%s/data/tokenizers/%s", sh, name);
    if (access(path, R_OK) != 0) {
        if (getenv("CI") && !strcmp(getenv("CI"), "true"))
            fail_msg("shared data missing: %s", path);
        return NULL;
    }
    struct swift_tokenizer *tok;
    assert_int_equal(swift_tokenizer_load(&tok, path), 0);
    return tok;
}

static int encode_row(const char *tpl, int agent, struct swift_tokenizer *tok, json_t *row,
                      struct swift_encoded *e, char *err, size_t errlen)
{
    struct swift_tok_state *st = swift_tok_state_new(tok);
    struct swift_conv conv = {0};
    json_t *owned;
    int rc = swift_row_to_conv(row, NULL, NULL, &conv, &owned, err, errlen);
    conv.agent = agent;
    if (rc == 0)
        rc = swift_template_encode(
            swift_template_find(tpl), st, tok, &conv, SWIFT_LOSS_DEFAULT, e, err, errlen);
    json_decref(owned);
    free(conv.msg);
    swift_tok_state_free(st);
    return rc;
}

static void run_fixture(const char *name, const char *tokname)
{
    struct swift_tokenizer *tok = load(tokname);
    if (!tok) {
        skip();
        return;
    }
    char path[256];
    snprintf(path, sizeof(path), "tests/ref/template/%s.jsonl", name);
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    char *line = NULL;
    size_t cap = 0;
    int n = 0, ok = 0, ncalls = 0;
    while (getline(&line, &cap, fp) > 0) {
        json_t *f = json_loads(line, 0, NULL);
        assert_non_null(f);
        const char *tpl = json_string_value(json_object_get(f, "template"));
        int agent = swift_agent_find(json_string_value(json_object_get(f, "agent")));
        assert_true(agent > 0);
        struct swift_encoded e = {0};
        char err[512];
        if (encode_row(tpl, agent, tok, json_object_get(f, "row"), &e, err, sizeof(err)) < 0)
            fail_msg("%s #%d: %s", name, n, err);
        json_t *want = json_object_get(f, "ids");
        int same = e.tok.n == json_array_size(want);
        for (size_t i = 0; same && i < e.tok.n; i++)
            same = (json_int_t)e.tok.ids[i] == json_integer_value(json_array_get(want, i));
        if (same)
            ok++;
        else
            print_message("%s #%d differs:\n want %s\n got  %s\n",
                          name,
                          n,
                          json_string_value(json_object_get(f, "text")),
                          e.text);
        /* the same ids with the format left to the template (its own is the default) */
        struct swift_encoded d = {0};
        assert_int_equal(encode_row(tpl, 0, tok, json_object_get(f, "row"), &d, err, sizeof(err)),
                         0);
        assert_int_equal(d.tok.n, e.tok.n);
        assert_memory_equal(d.tok.ids, e.tok.ids, e.tok.n * sizeof(uint32_t));
        swift_encoded_release(&d);
        json_t *row = json_object_get(f, "row"), *ms = json_object_get(row, "messages"), *m;
        size_t i;
        int calls = 0;
        json_array_foreach(ms ? ms : json_object_get(row, "conversations"), i, m)
        {
            json_t *from = json_object_get(m, "from");
            calls |= json_object_get(m, "tool_calls") ||
                     (from && !strcmp(json_string_value(from), "function_call"));
        }
        ncalls += calls;
        assert_true(e.trained > 0 && e.trained < e.tok.n);
        swift_encoded_release(&e);
        json_decref(f);
        n++;
    }
    print_message("%s vs official Jinja (transformers, tools=...): %d/%d\n", name, ok, n);
    assert_true(n >= 12);
    assert_true(ncalls >= 5);
    assert_int_equal(ok, n);
    free(line);
    fclose(fp);
    swift_tokenizer_free(tok);
}

static void test_qwen2_5(void **s)
{
    (void)s;
    run_fixture("agent_qwen2_5", "qwen3");
}
static void test_qwen3(void **s)
{
    (void)s;
    run_fixture("agent_qwen3", "qwen3");
}
static void test_llama3_1(void **s)
{
    (void)s;
    run_fixture("agent_llama3_1", "llama3-instruct");
}
static void test_llama3_2(void **s)
{
    (void)s;
    run_fixture("agent_llama3_2", "llama3-instruct");
}
static void test_llama3_3(void **s)
{
    (void)s;
    run_fixture("agent_llama3_3", "llama3-instruct");
}

static const char CONV[] =
    "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather in Paris?\"},"
    "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"type\":\"function\","
    "\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\": \\\"Paris\\\"}\"}}]},"
    "{\"role\":\"tool\",\"content\":\"SECRET_RESULT 21\"},"
    "{\"role\":\"assistant\",\"content\":\"It is 21 degrees.\"}],"
    "\"tools\":[{\"name\":\"get_weather\",\"description\":\"Weather\",\"parameters\":{}}]}";

/* The trained tokens decoded, in order. */
static char *trained_text(struct swift_tokenizer *tok, const struct swift_encoded *e)
{
    uint32_t *ids = malloc(e->tok.n * sizeof(uint32_t) + 4);
    size_t k = 0;
    for (size_t i = 0; i < e->tok.n; i++)
        if (e->mask[i])
            ids[k++] = e->tok.ids[i];
    char *t;
    assert_int_equal(swift_tokenizer_decode(tok, ids, k, 0, &t, NULL), 0);
    free(ids);
    return t;
}

/* For every template x agent template pairing: the call is trained, the result never, and the
 * tools' prompt never. */
static void test_masks(void **state)
{
    (void)state;
    struct swift_tokenizer *tok = load("qwen3");
    if (!tok) {
        skip();
        return;
    }
    static const char *tpls[] = {"qwen2_5", "qwen3", "llama3_1", "default"};
    json_t *row = json_loads(CONV, 0, NULL);
    assert_non_null(row);
    for (size_t t = 0; t < sizeof(tpls) / sizeof(tpls[0]); t++)
        for (int a = SWIFT_AGENT_HERMES; a <= SWIFT_AGENT_GLM4; a++) {
            struct swift_encoded e = {0};
            char err[256];
            if (encode_row(tpls[t], a, tok, row, &e, err, sizeof(err)) < 0)
                fail_msg("%s + %s: %s", tpls[t], swift_agent_name(a), err);
            char *tr = trained_text(tok, &e);
            if (!strstr(tr, "get_weather") || !strstr(tr, "Paris") || !strstr(tr, "21 degrees") ||
                strstr(tr, "SECRET_RESULT") || strstr(tr, "Weather in Paris"))
                fail_msg("%s + %s trains: %s", tpls[t], swift_agent_name(a), tr);
            assert_non_null(strstr(e.text, "SECRET_RESULT"));
            free(tr);
            swift_encoded_release(&e);
        }
    json_decref(row);
    swift_tokenizer_free(tok);
}

/* render (format_calls) -> parse gives back the same names and arguments, for every agent
 * template, one call and parallel calls, with and without content next to them */
static void test_round_trip(void **state)
{
    (void)state;
    json_t *calls =
        json_loads("[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":"
                   "{\"city\":\"東京\",\"days\":[1,2],\"opts\":{\"unit\":\"c\",\"x\":null}}}},"
                   "{\"name\":\"get_time\",\"arguments\":\"{\\\"tz\\\": \\\"Europe/Paris\\\"}\"},"
                   "{\"function\":{\"name\":\"noop\"}}]",
                   0,
                   NULL);
    assert_non_null(calls);
    for (int a = SWIFT_AGENT_HERMES; a <= SWIFT_AGENT_GLM4; a++)
        for (size_t ncall = 1; ncall <= 3; ncall++)
            for (int withc = 0; withc < 2; withc++) {
                json_t *sub = json_array();
                for (size_t i = 0; i < ncall; i++)
                    json_array_append(sub, json_array_get(calls, i));
                char err[128], why[256];
                const char *c = withc ? "I will look that up." : "";
                char *txt = swift_agent_format_calls(a, c, strlen(c), sub, err, sizeof(err));
                assert_non_null(txt);
                char *content;
                json_t *got;
                int n = swift_agent_parse(a, txt, strlen(txt), 7, &content, &got, why, sizeof(why));
                if (n != (int)ncall)
                    fail_msg("%s: %d of %zu calls back from %s (%s)",
                             swift_agent_name(a),
                             n,
                             ncall,
                             txt,
                             why);
                assert_string_equal(why, "");
                for (size_t i = 0; i < ncall; i++) {
                    json_t *fn = json_object_get(json_array_get(got, i), "function");
                    json_t *want = json_array_get(sub, i);
                    json_t *wf = json_object_get(want, "function");
                    wf = wf ? wf : want;
                    assert_string_equal(json_string_value(json_object_get(fn, "name")),
                                        json_string_value(json_object_get(wf, "name")));
                    json_t *ga =
                        json_loads(json_string_value(json_object_get(fn, "arguments")), 0, NULL);
                    json_t *wa = swift_agent_call_args(want);
                    assert_true(json_equal(ga, wa));
                    json_decref(ga);
                    json_decref(wa);
                    const char *id =
                        json_string_value(json_object_get(json_array_get(got, i), "id"));
                    assert_int_equal(strlen(id), 29);
                }
                if (withc && a != SWIFT_AGENT_LLAMA3)
                    assert_string_equal(content, "I will look that up.");
                else if (!withc)
                    assert_null(content);
                free(content);
                json_decref(got);
                free(txt);
                json_decref(sub);
            }
    json_decref(calls);
}

/* The rendered conversation's last assistant turn (what a model would generate) parses back
 * to the row's calls, for the native pairings. */
static void test_round_trip_rendered(void **state)
{
    (void)state;
    struct swift_tokenizer *tok = load("llama3-instruct");
    if (!tok) {
        skip();
        return;
    }
    static const struct {
        const char *tpl, *open, *close;
        int agent;
    } cases[] = {
        {"llama3_1", "assistant<|end_header_id|>\n\n", "<|eot_id|>", SWIFT_AGENT_LLAMA3},
        {"llama3", "assistant<|end_header_id|>\n\n", "<|eot_id|>", SWIFT_AGENT_REACT_EN},
        {"qwen2_5", "<|im_start|>assistant\n", "<|im_end|>", SWIFT_AGENT_HERMES},
        {"qwen3", "<|im_start|>assistant\n", "<|im_end|>", SWIFT_AGENT_GLM4},
    };
    json_t *row = json_loads(CONV, 0, NULL);
    /* end on the call */
    json_array_remove(json_object_get(row, "messages"), 3);
    json_array_remove(json_object_get(row, "messages"), 2);
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        struct swift_encoded e = {0};
        char err[256];
        assert_int_equal(encode_row(cases[k].tpl, cases[k].agent, tok, row, &e, err, sizeof(err)),
                         0);
        const char *s = strstr(e.text, cases[k].open);
        const char *last = s;
        while (s) {
            last = s;
            s = strstr(s + 1, cases[k].open);
        }
        assert_non_null(last);
        last += strlen(cases[k].open);
        const char *end = strstr(last, cases[k].close);
        assert_non_null(end);
        char *content;
        json_t *calls;
        assert_int_equal(
            swift_agent_parse(
                cases[k].agent, last, (size_t)(end - last), 1, &content, &calls, NULL, 0),
            1);
        json_t *fn = json_object_get(json_array_get(calls, 0), "function");
        assert_string_equal(json_string_value(json_object_get(fn, "name")), "get_weather");
        assert_string_equal(json_string_value(json_object_get(fn, "arguments")),
                            "{\"city\":\"Paris\"}");
        free(content);
        json_decref(calls);
        swift_encoded_release(&e);
    }
    json_decref(row);
    swift_tokenizer_free(tok);
}

static void expect_bad(int agent, const char *text, int ncalls, const char *why_prefix)
{
    char *content, why[256];
    json_t *calls;
    int n = swift_agent_parse(agent, text, strlen(text), 1, &content, &calls, why, sizeof(why));
    if (n != ncalls || strncmp(why, why_prefix, strlen(why_prefix)))
        fail_msg("%s on %s: %d calls, why '%s' (want %d, '%s')",
                 swift_agent_name(agent),
                 text,
                 n,
                 why,
                 ncalls,
                 why_prefix);
    assert_non_null(content); /* the malformed call stays in the content */
    free(content);
    json_decref(calls);
}

static void test_malformed(void **state)
{
    (void)state;
    expect_bad(SWIFT_AGENT_HERMES,
               "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n"
               "{\"name\": \"b\", \"arguments\": {\"x\": }\n</tool_call>",
               1,
               "call 2 at byte 56: not JSON");
    expect_bad(SWIFT_AGENT_HERMES,
               "<tool_call>{\"arguments\": {}}</tool_call>",
               0,
               "call 1 at byte 0: no \"name\" string");
    expect_bad(SWIFT_AGENT_HERMES,
               "<tool_call>{\"name\": \"f\", \"arguments\": 3}</tool_call>",
               0,
               "call 1 at byte 0: arguments are not a JSON object");
    expect_bad(
        SWIFT_AGENT_LLAMA3, "{\"name\": \"f\", \"parameters\": {", 0, "call 1 at byte 0: not JSON");
    expect_bad(SWIFT_AGENT_LLAMA3, "  {\"parameters\": {}}", 0, "call 1 at byte 2: no \"name\"");
    expect_bad(SWIFT_AGENT_REACT_EN,
               "Thought: x\nAction: f\nAction Input: not json\nObservation:",
               0,
               "call 1 at byte 11: Action Input is not a JSON object");
    expect_bad(SWIFT_AGENT_REACT_EN,
               "Action: f\nThought: hmm",
               0,
               "call 1 at byte 0: an Action without an Action Input");
    expect_bad(
        SWIFT_AGENT_GLM4, "f\n{\"a\": ", 0, "call 1 at byte 0: arguments are not a JSON object");
    /* plain answers are not malformed */
    expect_bad(SWIFT_AGENT_LLAMA3, "The answer is 4.", 0, "");
    expect_bad(SWIFT_AGENT_REACT_ZH, "Final Answer: 4", 0, "");
    expect_bad(SWIFT_AGENT_GLM4, "Hello there.\nHow are you?", 0, "");
}

/* Whitespace around the JSON and keywords; <|python_tag|>; ';'-separated Llama calls. */
static void test_whitespace(void **state)
{
    (void)state;
    static const struct {
        int agent;
        const char *text;
        int n;
        const char *content;
    } cases[] = {
        {SWIFT_AGENT_HERMES,
         "<tool_call>  {\"name\":\"f\",\"arguments\":{\"a\":1}}  </tool_call>",
         1,
         NULL},
        {SWIFT_AGENT_LLAMA3,
         "\n <|python_tag|> {\"name\": \"f\", \"parameters\": {\"a\": 1}} ",
         1,
         NULL},
        {SWIFT_AGENT_LLAMA3,
         "{\"name\": \"f\", \"parameters\": {\"a\": 1}}; {\"name\": \"g\", \"arguments\": {\"a\": "
         "1}}",
         2,
         NULL},
        {SWIFT_AGENT_REACT_EN,
         "Thought: look\r\nAction:   f  \r\nAction Input:\n  {\"a\": 1}  \n\nObservation:",
         1,
         "Thought: look"},
        {SWIFT_AGENT_GLM4, "\n f \n {\"a\": 1}\n<|observation|>", 1, NULL},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        char *content, why[256];
        json_t *calls;
        int n = swift_agent_parse(cases[k].agent,
                                  cases[k].text,
                                  strlen(cases[k].text),
                                  1,
                                  &content,
                                  &calls,
                                  why,
                                  sizeof(why));
        if (n != cases[k].n)
            fail_msg("case %zu: %d calls (%s)", k, n, why);
        json_t *fn = json_object_get(json_array_get(calls, 0), "function");
        assert_string_equal(json_string_value(json_object_get(fn, "name")), "f");
        assert_string_equal(json_string_value(json_object_get(fn, "arguments")), "{\"a\":1}");
        if (cases[k].content)
            assert_string_equal(content, cases[k].content);
        else
            assert_null(content);
        free(content);
        json_decref(calls);
    }
}

static void test_names(void **state)
{
    (void)state;
    assert_int_equal(swift_agent_find("hermes"), SWIFT_AGENT_HERMES);
    assert_int_equal(swift_agent_find("react_zh"), SWIFT_AGENT_REACT_ZH);
    assert_int_equal(swift_agent_find("qwen"), -1);
    assert_int_equal(swift_agent_for_template("qwen3"), SWIFT_AGENT_HERMES);
    assert_int_equal(swift_agent_for_template("llama3_2"), SWIFT_AGENT_LLAMA3);
    assert_int_equal(swift_agent_for_template("default"), SWIFT_AGENT_NATIVE);
    assert_string_equal(swift_agent_name(SWIFT_AGENT_GLM4), "glm4");
    assert_non_null(swift_template_find("llama3_1"));
    assert_non_null(swift_template_find("llama3_2"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_qwen2_5),
        cmocka_unit_test(test_qwen3),
        cmocka_unit_test(test_llama3_1),
        cmocka_unit_test(test_llama3_2),
        cmocka_unit_test(test_llama3_3),
        cmocka_unit_test(test_masks),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_round_trip_rendered),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_whitespace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
