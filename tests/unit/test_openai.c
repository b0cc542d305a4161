/* openai + toolcall: request parsing and its errors, prompts equal to the Jinja templates
 * (tests/ref/gen_infer_prompts.py), stop strings, hermes tool calls, response shapes, SSE and
 * the Batch API's lines. */
#include "lib/infer/image.h"
#include "lib/infer/openai.h"
#include "lib/preprocess/agent.h"
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

static int parse(const char *body, enum swift_oai_kind kind, const char *served,
                 struct swift_oai_request *rq, struct swift_oai_error *er)
{
    return swift_oai_parse_text(body, strlen(body), kind, served, rq, er);
}

static void test_parse_chat(void **state)
{
    (void)state;
    struct swift_oai_request rq;
    struct swift_oai_error er;
    const char *b =
        "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"S\"},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\","
        "\"text\":\"b\"}]},{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c\","
        "\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"x\\\": 1}\"}}]},"
        "{\"role\":\"tool\",\"content\":\"r\"}],\"n\":2,\"max_completion_tokens\":7,"
        "\"temperature\":0.5,\"top_p\":0.9,\"top_k\":-1,\"min_p\":0.1,\"repetition_penalty\":1.1,"
        "\"presence_penalty\":0.5,\"frequency_penalty\":-0.5,\"seed\":-1,\"stop\":[\"X\",\"YY\"],"
        "\"logprobs\":true,\"top_logprobs\":3,\"stream\":true,\"stream_options\":"
        "{\"include_usage\":true},\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]"
        ","
        "\"tool_choice\":\"auto\",\"chat_template_kwargs\":{\"enable_thinking\":false},"
        "\"unknown_field\":1}";
    assert_int_equal(parse(b, SWIFT_OAI_CHAT, "m", &rq, &er), 0);
    assert_string_equal(rq.model, "m");
    assert_int_equal(rq.conv.n, 4);
    assert_int_equal(rq.conv.msg[1].role, SWIFT_ROLE_USER);
    assert_string_equal(rq.conv.msg[1].content, "a\nb");
    assert_int_equal(rq.conv.msg[2].len, 0);
    json_t *args = json_object_get(
        json_object_get(json_array_get(rq.conv.msg[2].tool_calls, 0), "function"), "arguments");
    assert_true(json_is_object(args)); /* the JSON string parsed for the template */
    assert_int_equal(json_integer_value(json_object_get(args, "x")), 1);
    assert_int_equal(rq.conv.msg[3].role, SWIFT_ROLE_TOOL);
    assert_int_equal(rq.sampling.n, 2);
    assert_int_equal(rq.sampling.max_tokens, 7);
    assert_true(rq.sampling.temperature == 0.5 && rq.sampling.top_p == 0.9);
    assert_int_equal(rq.sampling.top_k, 0);
    assert_true(rq.sampling.min_p == 0.1 && rq.sampling.repetition_penalty == 1.1);
    assert_true(rq.sampling.presence_penalty == 0.5 && rq.sampling.frequency_penalty == -0.5);
    assert_true(rq.sampling.seed == UINT64_MAX);
    assert_int_equal(rq.nstop, 2);
    assert_string_equal(rq.stop[1], "YY");
    assert_int_equal(rq.logprobs, 1);
    assert_int_equal(rq.sampling.top_logprobs, 3);
    assert_int_equal(rq.stream, 1);
    assert_int_equal(rq.include_usage, 1);
    assert_int_equal(rq.tools_on, 1);
    assert_int_equal(rq.enable_thinking, 0);
    swift_oai_request_release(&rq);

    /* defaults; tool_choice none keeps the tools out of parsing */
    assert_int_equal(parse("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{"
                           "\"type\":\"function\",\"function\":{\"name\":\"f\"}}],"
                           "\"tool_choice\":\"none\",\"max_tokens\":5.0}",
                           SWIFT_OAI_CHAT,
                           NULL,
                           &rq,
                           &er),
                     0);
    assert_null(rq.model);
    assert_int_equal(rq.sampling.n, 1);
    assert_int_equal(rq.sampling.max_tokens, 5);
    assert_true(rq.sampling.temperature == 0.0); /* greedy when absent (ms-swift infer) */
    assert_int_equal(rq.tools_on, 0);
    assert_int_equal(rq.enable_thinking, 1);
    swift_oai_request_release(&rq);
}

static void test_parse_completion(void **state)
{
    (void)state;
    struct swift_oai_request rq;
    struct swift_oai_error er;
    assert_int_equal(parse("{\"prompt\":\"hello\",\"logprobs\":2,\"stop\":\"\\n\"}",
                           SWIFT_OAI_COMPLETION,
                           NULL,
                           &rq,
                           &er),
                     0);
    assert_string_equal(rq.prompt, "hello");
    assert_int_equal(rq.logprobs, 1);
    assert_int_equal(rq.sampling.top_logprobs, 2);
    assert_int_equal(rq.nstop, 1);
    swift_oai_request_release(&rq);
    assert_int_equal(
        parse("{\"prompt\":[5,6,7],\"max_tokens\":3}", SWIFT_OAI_COMPLETION, NULL, &rq, &er), 0);
    assert_int_equal(rq.nprompt_ids, 3);
    assert_int_equal(rq.prompt_ids[2], 7);
    assert_int_equal(rq.logprobs, 0);
    swift_oai_request_release(&rq);
    assert_int_equal(parse("{\"prompt\":[\"one\"]}", SWIFT_OAI_COMPLETION, NULL, &rq, &er), 0);
    assert_string_equal(rq.prompt, "one");
    swift_oai_request_release(&rq);
}

/* Every invalid field: its status, param and a message naming it. */
static void test_parse_errors(void **state)
{
    (void)state;
    static const struct {
        int kind;
        const char *body;
        int status;
        const char *param;
        const char *msg;
    } cases[] = {
        {SWIFT_OAI_CHAT, "{\"messages\": [", 400, "", "malformed JSON"},
        {SWIFT_OAI_CHAT, "[1]", 400, "", "must be a JSON object"},
        {SWIFT_OAI_CHAT, "{}", 400, "messages", "'messages' is required"},
        {SWIFT_OAI_CHAT, "{\"messages\":[]}", 400, "messages", "non-empty array"},
        {SWIFT_OAI_CHAT, "{\"messages\":[1]}", 400, "messages[0]", "must be an object"},
        {SWIFT_OAI_CHAT,
         "{\"messages\":[{\"role\":\"bot\",\"content\":\"x\"}]}",
         400,
         "messages[0]",
         "role"},
        {SWIFT_OAI_CHAT,
         "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}",
         400,
         "messages[0].content",
         "an image_url part needs"},
        {SWIFT_OAI_CHAT,
         "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_audio\"}]}]}",
         400,
         "messages[0].content",
         "only {\"type\": \"text\""},
        {SWIFT_OAI_CHAT,
         "{\"messages\":[{\"role\":\"user\",\"content\":5}]}",
         400,
         "messages[0].content",
         "got an integer"},
        {SWIFT_OAI_CHAT,
         "{\"model\":\"gpt-4\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
         404,
         "model",
         "The model `gpt-4` does not exist."},
        {SWIFT_OAI_CHAT, "{\"model\":3}", 400, "model", "'model' must be a string"},
        {SWIFT_OAI_CHAT, "{\"n\":0}", 400, "n", "'n' must be in [1, 64], got 0"},
        {SWIFT_OAI_CHAT, "{\"n\":\"2\"}", 400, "n", "'n' must be an integer, got a string"},
        {SWIFT_OAI_CHAT, "{\"max_tokens\":0}", 400, "max_tokens", "'max_tokens' must be in"},
        {SWIFT_OAI_CHAT, "{\"max_completion_tokens\":-3}", 400, "max_completion_tokens", "must"},
        {SWIFT_OAI_CHAT, "{\"temperature\":\"hot\"}", 400, "temperature", "must be a number"},
        {SWIFT_OAI_CHAT, "{\"temperature\":-1}", 400, "temperature", "must be in"},
        {SWIFT_OAI_CHAT, "{\"top_p\":0}", 400, "top_p", "'top_p' must be in (0, 1], got 0"},
        {SWIFT_OAI_CHAT, "{\"top_p\":1.5}", 400, "top_p", "must be in"},
        {SWIFT_OAI_CHAT, "{\"top_k\":-2}", 400, "top_k", "must be in"},
        {SWIFT_OAI_CHAT, "{\"min_p\":2}", 400, "min_p", "must be in"},
        {SWIFT_OAI_CHAT, "{\"repetition_penalty\":0}", 400, "repetition_penalty", "must be in"},
        {SWIFT_OAI_CHAT, "{\"presence_penalty\":3}", 400, "presence_penalty", "must be in"},
        {SWIFT_OAI_CHAT, "{\"frequency_penalty\":-3}", 400, "frequency_penalty", "must be in"},
        {SWIFT_OAI_CHAT, "{\"seed\":1.5}", 400, "seed", "must be an integer"},
        {SWIFT_OAI_CHAT, "{\"stop\":5}", 400, "stop", "a string or an array"},
        {SWIFT_OAI_CHAT, "{\"stop\":\"\"}", 400, "stop", "must not be empty"},
        {SWIFT_OAI_CHAT, "{\"stop\":[\"a\",2]}", 400, "stop", "'stop[1]'"},
        {SWIFT_OAI_CHAT,
         "{\"stop\":[\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\",\"10\",\"11\",\"12\","
         "\"13\",\"14\",\"15\",\"16\",\"17\"]}",
         400,
         "stop",
         "more than 16"},
        {SWIFT_OAI_CHAT, "{\"logprobs\":1}", 400, "logprobs", "must be a boolean"},
        {SWIFT_OAI_CHAT, "{\"top_logprobs\":2}", 400, "top_logprobs", "needs 'logprobs'"},
        {SWIFT_OAI_CHAT, "{\"logprobs\":true,\"top_logprobs\":21}", 400, "top_logprobs", "in"},
        {SWIFT_OAI_CHAT, "{\"stream\":\"yes\"}", 400, "stream", "must be a boolean"},
        {SWIFT_OAI_CHAT,
         "{\"stream_options\":{\"include_usage\":true}}",
         400,
         "stream_options",
         "only allowed when 'stream' is true"},
        {SWIFT_OAI_CHAT,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":{}}",
         400,
         "tools",
         "must be an array"},
        {SWIFT_OAI_CHAT,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":"
         "\"function\"}]}",
         400,
         "tools",
         "'tools[0]'"},
        {SWIFT_OAI_CHAT,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":\"required\"}",
         400,
         "tool_choice",
         "\"auto\" or \"none\""},
        {SWIFT_OAI_CHAT,
         "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{}}]}]}",
         400,
         "messages[0].tool_calls",
         "name string"},
        {SWIFT_OAI_CHAT,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"chat_template_kwargs\":{"
         "\"enable_thinking\":\"no\"}}",
         400,
         "chat_template_kwargs.enable_thinking",
         "must be a boolean"},
        {SWIFT_OAI_CHAT, "{\"stop_token_ids\":[-1]}", 400, "stop_token_ids", "token id"},
        {SWIFT_OAI_COMPLETION, "{}", 400, "prompt", "'prompt' is required"},
        {SWIFT_OAI_COMPLETION, "{\"prompt\":\"\"}", 400, "prompt", "must not be empty"},
        {SWIFT_OAI_COMPLETION, "{\"prompt\":[]}", 400, "prompt", "non-empty string or array"},
        {SWIFT_OAI_COMPLETION, "{\"prompt\":[\"a\",\"b\"]}", 400, "prompt", "one prompt"},
        {SWIFT_OAI_COMPLETION, "{\"prompt\":[1,-2]}", 400, "prompt", "'prompt[1]'"},
        {SWIFT_OAI_COMPLETION, "{\"prompt\":\"x\",\"logprobs\":true}", 400, "logprobs", "integer"},
        {SWIFT_OAI_COMPLETION, "{\"prompt\":\"x\",\"logprobs\":21}", 400, "logprobs", "in"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct swift_oai_request rq;
        struct swift_oai_error er;
        int rc = parse(cases[i].body, (enum swift_oai_kind)cases[i].kind, "m", &rq, &er);
        if (rc != -1 || er.status != cases[i].status || strcmp(er.param, cases[i].param) ||
            !strstr(er.message, cases[i].msg))
            fail_msg("case %zu %s: rc %d status %d param '%s' message '%s'",
                     i,
                     cases[i].body,
                     rc,
                     er.status,
                     er.param,
                     er.message);
        json_t *j = swift_oai_error_json(&er);
        json_t *e = json_object_get(j, "error");
        assert_string_equal(json_string_value(json_object_get(e, "message")), er.message);
        assert_string_equal(json_string_value(json_object_get(e, "type")),
                            er.status == 404 ? "not_found_error" : "invalid_request_error");
        if (er.param[0])
            assert_string_equal(json_string_value(json_object_get(e, "param")), er.param);
        else
            assert_true(json_is_null(json_object_get(e, "param")));
        if (er.status == 404)
            assert_string_equal(json_string_value(json_object_get(e, "code")), "model_not_found");
        else
            assert_true(json_is_null(json_object_get(e, "code")));
        json_decref(j);
    }
}

static struct swift_tokenizer *load_shared(const char *name)
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

/* The request's prompt ids equal apply_chat_template(add_generation_prompt=True). */
static void prompt_fixture(const char *tpl, const char *tokname)
{
    struct swift_tokenizer *tok = load_shared(tokname);
    if (!tok) {
        skip();
        return;
    }
    struct swift_tok_state *st = swift_tok_state_new(tok);
    char path[256];
    snprintf(path, sizeof(path), "tests/ref/template/prompt_%s.jsonl", tpl);
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    char line[1 << 16];
    int n = 0;
    while (fgets(line, sizeof(line), fp)) {
        json_t *ref = json_loads(line, 0, NULL);
        assert_non_null(ref);
        struct swift_oai_request rq;
        struct swift_oai_error er;
        assert_int_equal(
            swift_oai_parse(json_object_get(ref, "request"), SWIFT_OAI_CHAT, NULL, &rq, &er), 0);
        struct swift_encoded e = {0};
        if (swift_oai_render_chat(&rq, swift_template_find(tpl), st, tok, &e, &er) < 0)
            fail_msg("%s line %d: %s", tpl, n + 1, er.message);
        const char *text = json_string_value(json_object_get(ref, "text"));
        if (e.len != strlen(text) || memcmp(e.text, text, e.len))
            fail_msg("%s line %d: text\n%s\nexpected\n%s", tpl, n + 1, e.text, text);
        json_t *ids = json_object_get(ref, "ids");
        assert_int_equal(e.tok.n, json_array_size(ids));
        for (size_t i = 0; i < e.tok.n; i++)
            assert_int_equal(e.tok.ids[i], json_integer_value(json_array_get(ids, i)));
        swift_encoded_release(&e);
        swift_oai_request_release(&rq);
        json_decref(ref);
        n++;
    }
    fclose(fp);
    assert_true(n >= 6);
    swift_tok_state_free(st);
    swift_tokenizer_free(tok);
}

static void test_prompt_qwen3(void **state)
{
    (void)state;
    prompt_fixture("qwen3", "qwen3");
}
static void test_prompt_qwen2_5(void **state)
{
    (void)state;
    prompt_fixture("qwen2_5", "qwen3");
}
static void test_prompt_llama3(void **state)
{
    (void)state;
    prompt_fixture("llama3", "llama3-instruct");
}

/* ms-swift rows: ShareGPT conversations, tools as a JSON string (plain definitions wrapped), the
 * final assistant turn dropped as the label, sampling fields beside them. */
static void test_parse_row(void **state)
{
    (void)state;
    struct swift_oai_request rq;
    struct swift_oai_error er;
    json_t *row = json_loads(
        "{\"conversations\":[{\"from\":\"human\",\"value\":\"Weather?\"},{\"from\":"
        "\"function_call\",\"value\":\"{\\\"name\\\": \\\"w\\\", \\\"arguments\\\": {}}\"},"
        "{\"from\":\"observation\",\"value\":\"sunny\"},{\"from\":\"gpt\",\"value\":"
        "\"label\"}],\"tools\":\"[{\\\"name\\\": \\\"w\\\"}]\",\"max_tokens\":9,\"custom_id\":"
        "\"x\"}",
        0,
        NULL);
    assert_non_null(row);
    assert_int_equal(swift_oai_parse_row(row, NULL, &rq, &er), 0);
    assert_int_equal(rq.conv.n, 3); /* user, assistant tool call, tool; the label dropped */
    assert_int_equal(rq.conv.msg[1].role, SWIFT_ROLE_ASSISTANT);
    assert_non_null(rq.conv.msg[1].tool_calls);
    assert_int_equal(rq.conv.msg[2].role, SWIFT_ROLE_TOOL);
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(rq.conv.tools, 0), "type")), "function");
    assert_int_equal(rq.tools_on, 1);
    assert_int_equal(rq.sampling.max_tokens, 9);
    swift_oai_request_release(&rq);
    json_decref(row);

    row = json_loads("{\"messages\":[{\"role\":\"robot\",\"content\":\"x\"}]}", 0, NULL);
    assert_int_equal(swift_oai_parse_row(row, NULL, &rq, &er), -1);
    assert_int_equal(er.status, 400);
    assert_string_equal(er.param, "messages");
    assert_non_null(strstr(er.message, "unknown role 'robot'"));
    json_decref(row);
    row = json_loads("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_p\":0}", 0, NULL);
    assert_int_equal(swift_oai_parse_row(row, NULL, &rq, &er), -1);
    assert_string_equal(er.param, "top_p");
    json_decref(row);
}

static void test_stop_find(void **state)
{
    (void)state;
    const char *stop[] = {"bc", "xyz", "c"};
    assert_int_equal(swift_oai_stop_find("abcd", 4, 0, stop, 3), 1);
    assert_int_equal(swift_oai_stop_find("abcd", 4, 2, stop, 3), 1);  /* "bc" ends at 3 > 2 */
    assert_int_equal(swift_oai_stop_find("abcd", 4, 3, stop, 3), -1); /* all end by 3 */
    assert_int_equal(swift_oai_stop_find("aaxyz", 5, 4, stop, 2), 2);
    assert_int_equal(swift_oai_stop_find("aaxy", 4, 0, stop + 1, 1), -1);
}

static void test_toolcall_hermes(void **state)
{
    (void)state;
    char *content;
    json_t *calls;
    const char *t = "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                    "{\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", "
                    "\"arguments\": {}}\n</tool_call>";
    assert_int_equal(
        swift_agent_parse(SWIFT_AGENT_HERMES, t, strlen(t), 1, &content, &calls, NULL, 0), 2);
    assert_string_equal(content, "Let me check.");
    json_t *c0 = json_array_get(calls, 0);
    const char *id = json_string_value(json_object_get(c0, "id"));
    assert_int_equal(strlen(id), 29);
    assert_memory_equal(id, "call_", 5);
    assert_string_equal(json_string_value(json_object_get(c0, "type")), "function");
    json_t *f = json_object_get(c0, "function");
    assert_string_equal(json_string_value(json_object_get(f, "name")), "get_weather");
    assert_string_equal(json_string_value(json_object_get(f, "arguments")), "{\"city\":\"Paris\"}");
    assert_string_not_equal(id, json_string_value(json_object_get(json_array_get(calls, 1), "id")));
    free(content);
    json_decref(calls);

    /* only calls: content NULL; an unterminated last block with whole JSON counts */
    t = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1, 2]}}";
    assert_int_equal(
        swift_agent_parse(SWIFT_AGENT_HERMES, t, strlen(t), 1, &content, &calls, NULL, 0), 1);
    assert_null(content);
    json_decref(calls);

    /* malformed blocks stay in the content */
    t = "x <tool_call>{\"name\": }</tool_call> y <tool_call>{\"arguments\": {}}</tool_call>";
    assert_int_equal(
        swift_agent_parse(SWIFT_AGENT_HERMES, t, strlen(t), 1, &content, &calls, NULL, 0), 0);
    assert_null(calls);
    assert_string_equal(content, t);
    free(content);
    t = "a <tool_call>bad</tool_call> <tool_call>{\"name\": \"g\"}</tool_call>";
    assert_int_equal(
        swift_agent_parse(SWIFT_AGENT_HERMES, t, strlen(t), 2, &content, &calls, NULL, 0), 1);
    assert_string_equal(content, "a <tool_call>bad</tool_call>");
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_array_get(calls, 0), "function"), "arguments")),
                        "{}");
    free(content);
    json_decref(calls);
    assert_int_equal(swift_agent_parse(SWIFT_AGENT_HERMES, "", 0, 1, &content, &calls, NULL, 0), 0);
    assert_null(content);
}

/* The byte-level tokenizer of the tiny eval models: ids 0..255 are bytes, 256 <|endoftext|>. */
static struct swift_tokenizer *byte_tok(void)
{
    struct swift_tokenizer *tok;
    assert_int_equal(swift_tokenizer_load(&tok, "tests/fixtures/eval/qwen2"), 0);
    return tok;
}

static void feed(struct swift_oai_choice *c, struct swift_oai_request *rq,
                 struct swift_tokenizer *tok, const char *s, int eos_at_end, int *stopped)
{
    int n = (int)strlen(s);
    *stopped = 0;
    for (int i = 0; i <= n; i++) {
        if (i == n && !eos_at_end)
            break;
        int32_t top[2] = {i < n ? (unsigned char)s[i] : 256, 65};
        float toplp[2] = {-0.25f, -2.0f};
        struct swift_engine_event ev = {.req = 1,
                                        .token = top[0],
                                        .logprob = -0.25f,
                                        .top_ids = top,
                                        .top_logprobs = toplp,
                                        .ntop = 2,
                                        .finish = i == n ? SWIFT_FINISH_STOP : SWIFT_FINISH_NONE,
                                        .prompt_tokens = 3,
                                        .completion_tokens = i + 1};
        if (swift_oai_choice_add(c, rq, tok, &ev)) {
            *stopped = 1;
            return;
        }
    }
}

static void test_choice_and_responses(void **state)
{
    (void)state;
    struct swift_tokenizer *tok = byte_tok();
    struct swift_oai_request rq;
    struct swift_oai_error er;
    assert_int_equal(parse("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":2,"
                           "\"stop\":[\"END\",\"ZZ\"],\"logprobs\":true,\"top_logprobs\":2}",
                           SWIFT_OAI_CHAT,
                           NULL,
                           &rq,
                           &er),
                     0);
    struct swift_oai_choice ch[2] = {0};
    int stopped;
    feed(&ch[0], &rq, tok, "hello ENDmore", 0, &stopped);
    assert_int_equal(stopped, 1);
    assert_string_equal(ch[0].text, "hello ");
    assert_int_equal(ch[0].finish, SWIFT_FINISH_STOP);
    assert_int_equal(ch[0].completion_tokens, 9);
    feed(&ch[1], &rq, tok, "hi", 1, &stopped); /* eos: not in the text, counted */
    assert_int_equal(stopped, 0);
    assert_string_equal(ch[1].text, "hi");
    assert_int_equal(ch[1].completion_tokens, 3);
    json_t *r = swift_oai_chat_response(&rq, "chatcmpl-1", 7, "tiny", ch, 2, 3, 1);
    assert_string_equal(json_string_value(json_object_get(r, "object")), "chat.completion");
    json_t *c0 = json_array_get(json_object_get(r, "choices"), 0);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(c0, "message"), "content")), "hello ");
    assert_string_equal(json_string_value(json_object_get(c0, "finish_reason")), "stop");
    json_t *lp = json_object_get(json_object_get(c0, "logprobs"), "content");
    assert_int_equal(json_array_size(lp), 9);
    json_t *e0 = json_array_get(lp, 0);
    assert_string_equal(json_string_value(json_object_get(e0, "token")), "h");
    assert_true(json_real_value(json_object_get(e0, "logprob")) == -0.25);
    assert_int_equal(json_integer_value(json_array_get(json_object_get(e0, "bytes"), 0)), 'h');
    assert_int_equal(json_array_size(json_object_get(e0, "top_logprobs")), 2);
    assert_null(json_object_get(e0, "offset"));
    json_t *u = json_object_get(r, "usage");
    assert_int_equal(json_integer_value(json_object_get(u, "prompt_tokens")), 3);
    assert_int_equal(json_integer_value(json_object_get(u, "completion_tokens")), 12);
    assert_int_equal(json_integer_value(json_object_get(u, "total_tokens")), 15);
    json_decref(r);
    for (int i = 0; i < 2; i++)
        swift_oai_choice_release(&ch[i]);
    swift_oai_request_release(&rq);

    /* completions: text and the legacy logprobs shape, finish "length" */
    assert_int_equal(
        parse("{\"prompt\":\"p\",\"logprobs\":1}", SWIFT_OAI_COMPLETION, NULL, &rq, &er), 0);
    struct swift_oai_choice c = {0};
    feed(&c, &rq, tok, "ab", 0, &stopped);
    c.finish = SWIFT_FINISH_LENGTH;
    r = swift_oai_completion_response(&rq, "cmpl-1", 7, "tiny", &c, 1, 1);
    c0 = json_array_get(json_object_get(r, "choices"), 0);
    assert_string_equal(json_string_value(json_object_get(c0, "text")), "ab");
    assert_string_equal(json_string_value(json_object_get(c0, "finish_reason")), "length");
    lp = json_object_get(c0, "logprobs");
    assert_string_equal(json_string_value(json_array_get(json_object_get(lp, "tokens"), 1)), "b");
    assert_int_equal(json_integer_value(json_array_get(json_object_get(lp, "text_offset"), 1)), 1);
    assert_true(json_is_object(json_array_get(json_object_get(lp, "top_logprobs"), 0)));
    assert_string_equal(json_string_value(json_object_get(r, "object")), "text_completion");
    json_decref(r);
    swift_oai_choice_release(&c);
    swift_oai_request_release(&rq);

    /* tools: a hermes block becomes tool_calls, finish_reason "tool_calls" */
    assert_int_equal(parse("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{"
                           "\"type\":\"function\",\"function\":{\"name\":\"f\"}}]}",
                           SWIFT_OAI_CHAT,
                           NULL,
                           &rq,
                           &er),
                     0);
    memset(&c, 0, sizeof(c));
    feed(&c,
         &rq,
         tok,
         "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"k\": 1}}\n</tool_call>",
         1,
         &stopped);
    r = swift_oai_chat_response(&rq, "chatcmpl-2", 7, "tiny", &c, 1, 1, 5);
    c0 = json_array_get(json_object_get(r, "choices"), 0);
    json_t *msg = json_object_get(c0, "message");
    assert_true(json_is_null(json_object_get(msg, "content")));
    assert_string_equal(json_string_value(json_object_get(c0, "finish_reason")), "tool_calls");
    json_t *fn = json_object_get(json_array_get(json_object_get(msg, "tool_calls"), 0), "function");
    assert_string_equal(json_string_value(json_object_get(fn, "arguments")), "{\"k\":1}");
    json_decref(r);
    swift_oai_choice_release(&c);
    swift_oai_request_release(&rq);

    /* --agent-template llama3 (the conversation's agent): Llama 3.1's JSON call is parsed */
    assert_int_equal(parse("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{"
                           "\"type\":\"function\",\"function\":{\"name\":\"f\"}}]}",
                           SWIFT_OAI_CHAT,
                           NULL,
                           &rq,
                           &er),
                     0);
    rq.conv.agent = SWIFT_AGENT_LLAMA3;
    memset(&c, 0, sizeof(c));
    feed(&c, &rq, tok, "{\"name\": \"f\", \"parameters\": {\"k\": 2}}", 1, &stopped);
    r = swift_oai_chat_response(&rq, "chatcmpl-3", 7, "tiny", &c, 1, 1, 5);
    c0 = json_array_get(json_object_get(r, "choices"), 0);
    msg = json_object_get(c0, "message");
    assert_string_equal(json_string_value(json_object_get(c0, "finish_reason")), "tool_calls");
    fn = json_object_get(json_array_get(json_object_get(msg, "tool_calls"), 0), "function");
    assert_string_equal(json_string_value(json_object_get(fn, "name")), "f");
    assert_string_equal(json_string_value(json_object_get(fn, "arguments")), "{\"k\":2}");
    json_decref(r);
    swift_oai_choice_release(&c);
    swift_oai_request_release(&rq);
    swift_tokenizer_free(tok);
}

/* Every call id of a response differs, also across 25 choices of two calls each: the per-choice
 * seeds once were the seed plus i times splitmix's increment, so choice 24's first id was choice
 * 0's second. Choice 0 keeps the request's seed (its ids unchanged). */
static void test_call_ids(void **state)
{
    (void)state;
    const char *t = "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\n"
                    "<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call>";
    char ids[50][32];
    assert_true(swift_oai_call_seed(5, 0) == 5);
    for (int i = 0; i < 25; i++) {
        char *content;
        json_t *calls;
        assert_int_equal(swift_agent_parse(SWIFT_AGENT_HERMES,
                                           t,
                                           strlen(t),
                                           swift_oai_call_seed(5, i),
                                           &content,
                                           &calls,
                                           NULL,
                                           0),
                         2);
        for (int k = 0; k < 2; k++)
            snprintf(ids[2 * i + k],
                     sizeof(ids[0]),
                     "%s",
                     json_string_value(json_object_get(json_array_get(calls, (size_t)k), "id")));
        free(content);
        json_decref(calls);
    }
    for (int a = 0; a < 50; a++)
        for (int b = a + 1; b < 50; b++)
            assert_string_not_equal(ids[a] + 5, ids[b] + 5);
}

static void test_stream(void **state)
{
    (void)state;
    struct swift_tokenizer *tok = byte_tok();
    struct swift_oai_request rq;
    struct swift_oai_error er;
    assert_int_equal(parse("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":true,"
                           "\"stream_options\":{\"include_usage\":true},\"stop\":\"STOP\"}",
                           SWIFT_OAI_CHAT,
                           NULL,
                           &rq,
                           &er),
                     0);
    struct swift_oai_choice c = {0};
    int stopped;
    const char *out;
    feed(&c, &rq, tok, "ab ST", 0, &stopped);
    size_t n = swift_oai_choice_delta(&c, &rq, &out);
    assert_int_equal(n, 3); /* "ST" held back: it may become "STOP" */
    assert_memory_equal(out, "ab ", 3);
    feed(&c, &rq, tok, "x\xc3", 0, &stopped); /* half a character held back */
    n = swift_oai_choice_delta(&c, &rq, &out);
    assert_int_equal(n, 3);
    assert_memory_equal(out, "STx", 3);
    feed(&c, &rq, tok, "\xa9STOP", 0, &stopped);
    assert_int_equal(stopped, 1);
    n = swift_oai_choice_delta(&c, &rq, &out);
    assert_int_equal(n, 2);
    assert_memory_equal(out, "\xc3\xa9", 2);
    assert_int_equal(swift_oai_choice_delta(&c, &rq, &out), 0);

    json_t *k = swift_oai_chunk(&rq, "chatcmpl-3", 9, "tiny", 0, 1, "ab", 2, NULL);
    size_t len;
    char *s = swift_oai_sse(k, &len);
    assert_string_equal(s,
                        "data: {\"id\":\"chatcmpl-3\",\"object\":\"chat.completion.chunk\","
                        "\"created\":9,\"model\":\"tiny\",\"choices\":[{\"index\":0,\"delta\":{"
                        "\"role\":\"assistant\",\"content\":\"ab\"},\"logprobs\":null,"
                        "\"finish_reason\":null}],\"usage\":null}\n\n");
    assert_int_equal(len, strlen(s));
    free(s);
    json_decref(k);
    k = swift_oai_chunk(&rq, "chatcmpl-3", 9, "tiny", 0, 0, "", 0, "stop");
    assert_int_equal(json_object_size(json_object_get(
                         json_array_get(json_object_get(k, "choices"), 0), "delta")),
                     0);
    json_decref(k);
    k = swift_oai_usage_chunk(&rq, "chatcmpl-3", 9, "tiny", &c, 1, 4);
    assert_int_equal(json_array_size(json_object_get(k, "choices")), 0);
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(k, "usage"), "prompt_tokens")), 4);
    json_decref(k);
    assert_string_equal(SWIFT_OAI_SSE_DONE, "data: [DONE]\n\n");
    swift_oai_choice_release(&c);
    swift_oai_request_release(&rq);
    swift_tokenizer_free(tok);
}

/* return_tokens_as_token_ids spells logprobs tokens "token_id:N"; bytes that are no UTF-8
 * character come out as U+FFFD, never as invalid JSON. */
static void test_token_ids_and_bad_utf8(void **state)
{
    (void)state;
    struct swift_tokenizer *tok = byte_tok();
    struct swift_oai_request rq;
    struct swift_oai_error er;
    assert_int_equal(parse("{\"prompt\":\"p\",\"logprobs\":0,\"return_tokens_as_token_ids\":true}",
                           SWIFT_OAI_COMPLETION,
                           NULL,
                           &rq,
                           &er),
                     0);
    struct swift_oai_choice c = {0};
    int stopped;
    feed(&c, &rq, tok, "a\xff\xc3", 0, &stopped);
    c.finish = SWIFT_FINISH_LENGTH;
    json_t *r = swift_oai_completion_response(&rq, "cmpl-1", 7, "tiny", &c, 1, 1);
    json_t *c0 = json_array_get(json_object_get(r, "choices"), 0);
    assert_string_equal(json_string_value(json_object_get(c0, "text")),
                        "a\xef\xbf\xbd\xef\xbf\xbd");
    json_t *toks = json_object_get(json_object_get(c0, "logprobs"), "tokens");
    assert_string_equal(json_string_value(json_array_get(toks, 0)), "token_id:97");
    assert_string_equal(json_string_value(json_array_get(toks, 1)), "token_id:255");
    json_decref(r);
    swift_oai_choice_release(&c);
    /* one U+FFFD per maximal ill-formed subpart, as the tokenizer's decode of the same ids (a
     * cut 3-byte character, then a cut 4-byte one at the end): a served answer equals swift-eval's
     */
    struct swift_oai_choice d = {0};
    const char *bytes = "\xe4\xbd"
                        "b\xf0\x9f\x98";
    feed(&d, &rq, tok, bytes, 0, &stopped);
    d.finish = SWIFT_FINISH_LENGTH;
    r = swift_oai_completion_response(&rq, "cmpl-2", 7, "tiny", &d, 1, 1);
    c0 = json_array_get(json_object_get(r, "choices"), 0);
    assert_string_equal(json_string_value(json_object_get(c0, "text")),
                        "\xef\xbf\xbd"
                        "b\xef\xbf\xbd");
    uint32_t ids[6]; /* feed's ids: the byte values */
    for (int k = 0; k < 6; k++)
        ids[k] = (unsigned char)bytes[k];
    char *text;
    size_t len;
    assert_int_equal(swift_tokenizer_decode(tok, ids, 6, 0, &text, &len), 0);
    assert_string_equal(text, json_string_value(json_object_get(c0, "text")));
    free(text);
    json_decref(r);
    swift_oai_choice_release(&d);
    swift_oai_request_release(&rq);
    swift_tokenizer_free(tok);
}

/* Server errors are OpenAI's "server_error"; a request cut short by a failed engine step (a
 * backend error) or by the shutdown is a 503 that says which. */
static void test_server_errors(void **state)
{
    (void)state;
    struct swift_oai_error er;
    for (int failed = 0; failed < 2; failed++) {
        assert_int_equal(swift_oai_abort_error(&er, failed), -1);
        assert_int_equal(er.status, 503);
        json_t *j = swift_oai_error_json(&er);
        json_t *e = json_object_get(j, "error");
        assert_string_equal(json_string_value(json_object_get(e, "type")), "server_error");
        assert_non_null(strstr(json_string_value(json_object_get(e, "message")),
                               failed ? "the inference engine failed" : "shutting down"));
        assert_true(json_is_null(json_object_get(e, "param")));
        json_decref(j);
    }
    swift_oai_fail(&er, 500, "", NULL, "x");
    json_t *j = swift_oai_error_json(&er);
    assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "type")),
                        "server_error");
    json_decref(j);
}

static void test_batch_lines(void **state)
{
    (void)state;
    json_t *l = swift_oai_batch_line("batch_req_1", "a", 200, "req_1", json_object());
    char *s = json_dumps(l, JSON_COMPACT | JSON_PRESERVE_ORDER);
    assert_string_equal(s,
                        "{\"id\":\"batch_req_1\",\"custom_id\":\"a\",\"response\":{\"status_code\":"
                        "200,\"request_id\":\"req_1\",\"body\":{}},\"error\":null}");
    free(s);
    json_decref(l);
    l = swift_oai_batch_error_line("batch_req_2", NULL, "invalid_json", "line 3: bad");
    s = json_dumps(l, JSON_COMPACT | JSON_PRESERVE_ORDER);
    assert_string_equal(s,
                        "{\"id\":\"batch_req_2\",\"custom_id\":null,\"response\":null,\"error\":{"
                        "\"code\":\"invalid_json\",\"message\":\"line 3: bad\"}}");
    free(s);
    json_decref(l);
}

/* image_url parts and ms-swift rows' images: each image's mark where it stands, its URL in
 * order; the data: URL decoder (lib/infer/image.h) */
static void test_images(void **state)
{
    (void)state;
    struct swift_oai_request rq;
    struct swift_oai_error er;
    const char *body = "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":"
                       "\"a\"},{\"type\":\"text\",\"text\":\"b\"},{\"type\":\"image_url\","
                       "\"image_url\":{\"url\":\"x.png\"}},{\"type\":\"text\",\"text\":\"c\"},"
                       "{\"type\":\"image_url\",\"image_url\":\"data:image/png;base64,AA\"}]}]}";
    assert_int_equal(swift_oai_parse_text(body, strlen(body), SWIFT_OAI_CHAT, NULL, &rq, &er), 0);
    assert_int_equal(rq.nimages, 2);
    assert_string_equal(rq.images[0], "x.png");
    assert_string_equal(rq.images[1], "data:image/png;base64,AA");
    assert_false(rq.images_rel);
    assert_string_equal(rq.conv.msg[0].content,
                        "a\nb" SWIFT_OAI_IMAGE_MARK "c" SWIFT_OAI_IMAGE_MARK);
    swift_oai_request_release(&rq);
    /* rows: placeholders, or none (every image before the first user message) */
    const char *rows[] = {
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x<image>y\"}],\"images\":[\"p.jpg\"]}",
        "{\"messages\":[{\"role\":\"system\",\"content\":\"s\"},{\"role\":\"user\",\"content\":"
        "\"q\"}],\"images\":[{\"path\":\"p.jpg\"},\"r.jpg\"]}"};
    const char *want[] = {"x" SWIFT_OAI_IMAGE_MARK "y",
                          SWIFT_OAI_IMAGE_MARK SWIFT_OAI_IMAGE_MARK "q"};
    for (int i = 0; i < 2; i++) {
        json_t *row = json_loads(rows[i], 0, NULL);
        assert_int_equal(swift_oai_parse_row(row, NULL, &rq, &er), 0);
        json_decref(row);
        assert_true(rq.images_rel);
        assert_int_equal(rq.nimages, i + 1);
        assert_string_equal(rq.images[0], "p.jpg");
        assert_string_equal(rq.conv.msg[rq.conv.n - 1].content, want[i]);
        swift_oai_request_release(&rq);
    }
    json_t *row = json_loads("{\"messages\":[{\"role\":\"user\",\"content\":\"<image><image>\"}],"
                             "\"images\":[\"p.jpg\"]}",
                             0,
                             NULL);
    assert_int_equal(swift_oai_parse_row(row, NULL, &rq, &er), -1);
    json_decref(row);
    assert_int_equal(er.status, 400);
    assert_non_null(strstr(er.message, "2 <image> placeholders for 1 images"));
    /* data: URLs */
    static const struct {
        const char *url, *bytes;
    } ok[] = {{"data:image/png;base64,aGVsbG8=", "hello"},
              {"data:image/jpeg;base64,aGVsbG8", "hello"},
              {"data:;base64,aG Vs\nbG8h", "hello!"},
              {"data:image/webp;name=x;base64,", ""}};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        unsigned char *d;
        size_t n;
        char err[128];
        assert_int_equal(
            swift_infer_data_url(ok[i].url, strlen(ok[i].url), &d, &n, err, sizeof(err)), 0);
        assert_int_equal(n, strlen(ok[i].bytes));
        assert_memory_equal(d, ok[i].bytes, n);
        free(d);
    }
    static const char *const bad[] = {"data:image/png,abc",
                                      "data:text/plain;base64,aGk=",
                                      "data:image/png;base64,a=b",
                                      "data:image/png;base64,a",
                                      "data:image/png;base64,aGk===",
                                      "data:image/png;base64",
                                      "file:///x"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        unsigned char *d = (unsigned char *)"";
        size_t n = 1;
        char err[128] = "";
        assert_int_equal(swift_infer_data_url(bad[i], strlen(bad[i]), &d, &n, err, sizeof(err)),
                         -1);
        assert_null(d);
        assert_true(err[0] != 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_chat),
        cmocka_unit_test(test_parse_completion),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_prompt_qwen3),
        cmocka_unit_test(test_prompt_qwen2_5),
        cmocka_unit_test(test_prompt_llama3),
        cmocka_unit_test(test_parse_row),
        cmocka_unit_test(test_stop_find),
        cmocka_unit_test(test_toolcall_hermes),
        cmocka_unit_test(test_choice_and_responses),
        cmocka_unit_test(test_call_ids),
        cmocka_unit_test(test_stream),
        cmocka_unit_test(test_token_ids_and_bad_utf8),
        cmocka_unit_test(test_server_errors),
        cmocka_unit_test(test_batch_lines),
        cmocka_unit_test(test_images),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
