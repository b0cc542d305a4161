/* openai — request bodies of /v1/chat/completions and /v1/completions (see openai.h). */
#include "lib/infer/openai.h"

#include "lib/core/alloc.h"
#include "lib/preprocess/dataset.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

int swift_oai_fail(struct swift_oai_error *er, int status, const char *param, const char *code,
                   const char *fmt, ...)
{
    er->status = status;
    snprintf(er->param, sizeof(er->param), "%s", param ? param : "");
    er->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(er->message, sizeof(er->message), fmt, ap);
    va_end(ap);
    return -1;
}

int swift_oai_abort_error(struct swift_oai_error *er, int engine_failed)
{
    if (engine_failed)
        return swift_oai_fail(er,
                              503,
                              "",
                              NULL,
                              "the inference engine failed while running the request (the "
                              "server's log says why); it was not finished, retry it");
    return swift_oai_fail(
        er, 503, "", NULL, "the request was cancelled: the server is shutting down");
}

json_t *swift_oai_error_json(const struct swift_oai_error *er)
{
    const char *type = er->status == 404   ? "not_found_error"
                       : er->status >= 500 ? "server_error"
                                           : "invalid_request_error";
    json_t *e = json_pack("{s:s,s:s,s:o,s:o}",
                          "message",
                          er->message,
                          "type",
                          type,
                          "param",
                          er->param[0] ? json_string(er->param) : json_null(),
                          "code",
                          er->code ? json_string(er->code) : json_null());
    return json_pack("{s:o}", "error", e);
}

/* ---- typed fields ---- */

static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    default:
        return "null";
    }
}

/* A number field: 1 and *out when present (null counts as absent), 0 when absent, -1 (er). */
static int get_num(json_t *b, const char *key, double lo, double hi, int lo_open, double *out,
                   struct swift_oai_error *er)
{
    json_t *v = json_object_get(b, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_number(v))
        return swift_oai_fail(
            er, 400, key, NULL, "'%s' must be a number, got %s", key, type_name(v));
    double x = json_number_value(v);
    if (!isfinite(x) || x < lo || x > hi || (lo_open && x == lo))
        return swift_oai_fail(er,
                              400,
                              key,
                              NULL,
                              "'%s' must be in %s%g, %g], got %g",
                              key,
                              lo_open ? "(" : "[",
                              lo,
                              hi,
                              x);
    *out = x;
    return 1;
}

static int get_int(json_t *b, const char *key, long long lo, long long hi, long long *out,
                   struct swift_oai_error *er)
{
    json_t *v = json_object_get(b, key);
    if (!v || json_is_null(v))
        return 0;
    if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) &&
        fabs(json_real_value(v)) < 9e15)
        v = NULL; /* 16.0 is accepted as 16 (Python clients send what they computed) */
    long long x;
    if (v && !json_is_integer(v))
        return swift_oai_fail(
            er, 400, key, NULL, "'%s' must be an integer, got %s", key, type_name(v));
    x = v ? (long long)json_integer_value(v) : (long long)json_real_value(json_object_get(b, key));
    if (x < lo || x > hi)
        return swift_oai_fail(
            er, 400, key, NULL, "'%s' must be in [%lld, %lld], got %lld", key, lo, hi, x);
    *out = x;
    return 1;
}

static int get_bool(json_t *b, const char *key, int *out, struct swift_oai_error *er)
{
    json_t *v = json_object_get(b, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_boolean(v))
        return swift_oai_fail(
            er, 400, key, NULL, "'%s' must be a boolean, got %s", key, type_name(v));
    *out = json_is_true(v);
    return 1;
}

/* ---- sampling ---- */

static int parse_stop(json_t *b, struct swift_oai_request *rq, struct swift_oai_error *er)
{
    json_t *v = json_object_get(b, "stop");
    if (!v || json_is_null(v))
        return 0;
    if (json_is_string(v)) {
        if (json_string_length(v) == 0)
            return swift_oai_fail(er, 400, "stop", NULL, "'stop' must not be empty");
        rq->stop[rq->nstop++] = json_string_value(v);
        return 0;
    }
    if (!json_is_array(v))
        return swift_oai_fail(er,
                              400,
                              "stop",
                              NULL,
                              "'stop' must be a string or an array of strings, got %s",
                              type_name(v));
    if (json_array_size(v) > SWIFT_OAI_MAX_STOP)
        return swift_oai_fail(
            er, 400, "stop", NULL, "'stop' has more than %d strings", SWIFT_OAI_MAX_STOP);
    size_t i;
    json_t *s;
    json_array_foreach(v, i, s)
    {
        if (!json_is_string(s) || json_string_length(s) == 0)
            return swift_oai_fail(
                er, 400, "stop", NULL, "'stop[%zu]' must be a non-empty string", i);
        rq->stop[rq->nstop++] = json_string_value(s);
    }
    return 0;
}

static int parse_stop_ids(json_t *b, struct swift_oai_request *rq, struct swift_oai_error *er)
{
    json_t *v = json_object_get(b, "stop_token_ids");
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_array(v) || json_array_size(v) > SWIFT_OAI_MAX_STOP_IDS)
        return swift_oai_fail(er,
                              400,
                              "stop_token_ids",
                              NULL,
                              "'stop_token_ids' must be an array of at most %d token ids",
                              SWIFT_OAI_MAX_STOP_IDS);
    size_t i;
    json_t *s;
    json_array_foreach(v, i, s)
    {
        if (!json_is_integer(s) || json_integer_value(s) < 0 || json_integer_value(s) > INT32_MAX)
            return swift_oai_fail(
                er, 400, "stop_token_ids", NULL, "'stop_token_ids[%zu]' must be a token id", i);
        rq->stop_ids[rq->sampling.nstop_ids++] = (int32_t)json_integer_value(s);
    }
    rq->sampling.stop_ids = rq->stop_ids;
    return 0;
}

static int parse_logprobs(json_t *b, struct swift_oai_request *rq, struct swift_oai_error *er)
{
    long long k = 0;
    if (rq->kind == SWIFT_OAI_COMPLETION) {
        int rc = get_int(b, "logprobs", 0, 20, &k, er);
        if (rc < 0)
            return -1;
        rq->logprobs = rc;
        rq->sampling.top_logprobs = (int)k;
        return 0;
    }
    if (get_bool(b, "logprobs", &rq->logprobs, er) < 0)
        return -1;
    int rc = get_int(b, "top_logprobs", 0, 20, &k, er);
    if (rc < 0)
        return -1;
    if (rc && k > 0 && !rq->logprobs)
        return swift_oai_fail(
            er, 400, "top_logprobs", NULL, "'top_logprobs' needs 'logprobs' set to true");
    rq->sampling.top_logprobs = (int)k;
    return 0;
}

static int parse_stream(json_t *b, struct swift_oai_request *rq, struct swift_oai_error *er)
{
    if (get_bool(b, "stream", &rq->stream, er) < 0)
        return -1;
    json_t *so = json_object_get(b, "stream_options");
    if (!so || json_is_null(so))
        return 0;
    if (!json_is_object(so))
        return swift_oai_fail(er,
                              400,
                              "stream_options",
                              NULL,
                              "'stream_options' must be an object, got %s",
                              type_name(so));
    if (!rq->stream)
        return swift_oai_fail(er,
                              400,
                              "stream_options",
                              NULL,
                              "'stream_options' is only allowed when 'stream' is true");
    return get_bool(so, "include_usage", &rq->include_usage, er) < 0 ? -1 : 0;
}

static int parse_sampling(json_t *b, struct swift_oai_request *rq, struct swift_oai_error *er)
{
    struct swift_sampling *s = &rq->sampling;
    long long x;
    int rc;
    if ((rc = get_int(b, "n", 1, SWIFT_OAI_MAX_N, &x, er)) < 0)
        return -1;
    if (rc)
        s->n = (int)x;
    if ((rc = get_int(b, "max_completion_tokens", 1, 1 << 30, &x, er)) < 0)
        return -1;
    if (rc || (rc = get_int(b, "max_tokens", 1, 1 << 30, &x, er)) > 0)
        s->max_tokens = (int)x;
    if (rc < 0)
        return -1;
    if (get_num(b, "temperature", 0, 1e6, 0, &s->temperature, er) < 0 ||
        get_num(b, "top_p", 0, 1, 1, &s->top_p, er) < 0 ||
        get_num(b, "min_p", 0, 1, 0, &s->min_p, er) < 0 ||
        get_num(b, "repetition_penalty", 0, 1e6, 1, &s->repetition_penalty, er) < 0 ||
        get_num(b, "presence_penalty", -2, 2, 0, &s->presence_penalty, er) < 0 ||
        get_num(b, "frequency_penalty", -2, 2, 0, &s->frequency_penalty, er) < 0)
        return -1;
    if ((rc = get_int(b, "top_k", -1, 1 << 30, &x, er)) < 0)
        return -1;
    if (rc)
        s->top_k = x < 0 ? 0 : (int)x;
    if ((rc = get_int(b, "seed", INT64_MIN, INT64_MAX, &x, er)) < 0)
        return -1;
    if (rc)
        s->seed = (uint64_t)x;
    if (get_bool(b, "ignore_eos", &s->ignore_eos, er) < 0 ||
        get_bool(b, "return_tokens_as_token_ids", &rq->token_ids, er) < 0)
        return -1;
    if (parse_stop(b, rq, er) < 0 || parse_stop_ids(b, rq, er) < 0 ||
        parse_logprobs(b, rq, er) < 0 || parse_stream(b, rq, er) < 0)
        return -1;
    return 0;
}

/* ---- chat messages ---- */

static int parse_role(const char *r, enum swift_role *out)
{
    static const struct {
        const char *name;
        enum swift_role role;
    } roles[] = {{"system", SWIFT_ROLE_SYSTEM},
                 {"developer", SWIFT_ROLE_SYSTEM},
                 {"user", SWIFT_ROLE_USER},
                 {"assistant", SWIFT_ROLE_ASSISTANT},
                 {"tool", SWIFT_ROLE_TOOL}};
    for (size_t i = 0; i < sizeof(roles) / sizeof(roles[0]); i++)
        if (!strcmp(r, roles[i].name)) {
            *out = roles[i].role;
            return 0;
        }
    return -1;
}

/* An image part's URL: {"image_url": {"url": "..."}} (OpenAI) or {"image_url": "..."}. */
static const char *image_url(json_t *part)
{
    json_t *u = json_object_get(part, "image_url");
    if (json_is_object(u))
        u = json_object_get(u, "url");
    return json_is_string(u) ? json_string_value(u) : NULL;
}

static int add_image(struct swift_oai_request *rq, const char *url, const char *p,
                     struct swift_oai_error *er)
{
    if (rq->nimages >= SWIFT_OAI_MAX_IMAGES)
        return swift_oai_fail(
            er, 400, p, NULL, "more than %d images in one request", SWIFT_OAI_MAX_IMAGES);
    rq->images[rq->nimages++] = url;
    return 0;
}

/* content: a string, null, or an array of parts: text parts joined with "\n" (vLLM), each
 * image_url part becoming SWIFT_OAI_IMAGE_MARK where it stands, its URL in rq->images (the new
 * text kept in rq->owned). */
static int parse_content(struct swift_oai_request *rq, json_t *c, size_t i, struct swift_message *m,
                         struct swift_oai_error *er)
{
    char p[64];
    snprintf(p, sizeof(p), "messages[%zu].content", i);
    if (!c || json_is_null(c)) {
        m->content = "";
        m->len = 0;
        return 0;
    }
    if (json_is_string(c)) {
        m->content = json_string_value(c);
        m->len = json_string_length(c);
        return 0;
    }
    if (!json_is_array(c))
        return swift_oai_fail(er,
                              400,
                              p,
                              NULL,
                              "'%s' must be a string or an array of content parts, got %s",
                              p,
                              type_name(c));
    char *buf = NULL;
    size_t len = 0, mark = strlen(SWIFT_OAI_IMAGE_MARK);
    size_t k;
    int prev_text = 0;
    json_t *part;
    json_array_foreach(c, k, part)
    {
        json_t *type = json_object_get(part, "type"), *text = json_object_get(part, "text");
        const char *ty = json_is_string(type) ? json_string_value(type) : "";
        if (!strcmp(ty, "image_url")) {
            const char *url = image_url(part);
            int rc = url ? add_image(rq, url, p, er)
                         : swift_oai_fail(er,
                                          400,
                                          p,
                                          NULL,
                                          "'%s[%zu]': an image_url part needs \"image_url\": "
                                          "{\"url\": string}",
                                          p,
                                          k);
            if (rc < 0) {
                free(buf);
                return -1;
            }
            buf = swift_xrealloc(buf, len + mark + 1);
            memcpy(buf + len, SWIFT_OAI_IMAGE_MARK, mark);
            len += mark;
            buf[len] = 0;
            prev_text = 0;
            continue;
        }
        if (strcmp(ty, "text") || !json_is_string(text)) {
            free(buf);
            return swift_oai_fail(er,
                                  400,
                                  p,
                                  NULL,
                                  "'%s[%zu]': only {\"type\": \"text\", \"text\": ...} and "
                                  "{\"type\": \"image_url\", \"image_url\": {\"url\": ...}} "
                                  "parts are supported",
                                  p,
                                  k);
        }
        size_t n = json_string_length(text);
        buf = swift_xrealloc(buf, len + n + 2);
        if (prev_text)
            buf[len++] = '\n';
        memcpy(buf + len, json_string_value(text), n);
        len += n;
        buf[len] = 0;
        prev_text = 1;
    }
    json_t *s = json_stringn_nocheck(buf ? buf : "", len);
    free(buf);
    json_array_append_new(rq->owned, s);
    m->content = json_string_value(s);
    m->len = len;
    return 0;
}

/* An assistant's tool_calls as the template reads them: arguments parsed into an object when
 * they are a JSON string (vLLM does the same before rendering). */
static int parse_tool_calls(struct swift_oai_request *rq, json_t *tc, size_t i,
                            struct swift_message *m, struct swift_oai_error *er)
{
    char p[64];
    snprintf(p, sizeof(p), "messages[%zu].tool_calls", i);
    if (!json_is_array(tc))
        return swift_oai_fail(er, 400, p, NULL, "'%s' must be an array", p);
    json_t *out = json_array();
    json_array_append_new(rq->owned, out);
    size_t k;
    json_t *c;
    json_array_foreach(tc, k, c)
    {
        json_t *f = json_object_get(c, "function");
        json_t *name = json_object_get(f, "name"), *args = json_object_get(f, "arguments");
        if (!json_is_object(f) || !json_is_string(name))
            return swift_oai_fail(
                er, 400, p, NULL, "'%s[%zu]' needs a function with a name string", p, k);
        json_t *a = NULL;
        if (json_is_string(args)) {
            a = json_loads(json_string_value(args), JSON_DECODE_ANY, NULL);
            if (!a)
                a = json_incref(args);
        } else if (args && !json_is_null(args)) {
            a = json_incref(args);
        } else {
            a = json_object();
        }
        json_array_append_new(
            out,
            json_pack(
                "{s:s,s:{s:O,s:o}}", "type", "function", "function", "name", name, "arguments", a));
    }
    m->tool_calls = json_array_size(out) ? out : NULL;
    return 0;
}

static int parse_messages(json_t *b, struct swift_oai_request *rq, struct swift_oai_error *er)
{
    json_t *ms = json_object_get(b, "messages");
    if (!ms)
        return swift_oai_fail(er, 400, "messages", NULL, "'messages' is required");
    if (!json_is_array(ms) || json_array_size(ms) == 0)
        return swift_oai_fail(er, 400, "messages", NULL, "'messages' must be a non-empty array");
    size_t n = json_array_size(ms);
    rq->conv.msg = swift_xcalloc(n, sizeof(*rq->conv.msg));
    rq->conv.cap = n;
    size_t i;
    json_t *mj;
    json_array_foreach(ms, i, mj)
    {
        char p[64];
        snprintf(p, sizeof(p), "messages[%zu]", i);
        if (!json_is_object(mj))
            return swift_oai_fail(er, 400, p, NULL, "'%s' must be an object", p);
        json_t *role = json_object_get(mj, "role");
        struct swift_message *m = &rq->conv.msg[i];
        m->loss = -1;
        if (!json_is_string(role) || parse_role(json_string_value(role), &m->role) < 0)
            return swift_oai_fail(er,
                                  400,
                                  p,
                                  NULL,
                                  "'%s.role' must be one of system, developer, user, assistant, "
                                  "tool",
                                  p);
        if (parse_content(rq, json_object_get(mj, "content"), i, m, er) < 0)
            return -1;
        json_t *tc = json_object_get(mj, "tool_calls");
        if (tc && !json_is_null(tc) && m->role == SWIFT_ROLE_ASSISTANT &&
            parse_tool_calls(rq, tc, i, m, er) < 0)
            return -1;
        rq->conv.n = i + 1;
    }
    return 0;
}

static int parse_tools(json_t *b, struct swift_oai_request *rq, struct swift_oai_error *er)
{
    json_t *t = json_object_get(b, "tools");
    if (t && !json_is_null(t)) {
        if (!json_is_array(t))
            return swift_oai_fail(er, 400, "tools", NULL, "'tools' must be an array");
        size_t i;
        json_t *x;
        json_array_foreach(t, i, x)
        {
            json_t *f = json_object_get(x, "function");
            if (!json_is_object(f) || !json_is_string(json_object_get(f, "name")))
                return swift_oai_fail(er,
                                      400,
                                      "tools",
                                      NULL,
                                      "'tools[%zu]' must be {\"type\": \"function\", "
                                      "\"function\": {\"name\": ...}}",
                                      i);
        }
        rq->conv.tools = json_array_size(t) ? t : NULL;
    }
    return 0;
}

/* tool_choice and chat_template_kwargs (after the tools are in rq->conv.tools). */
static int parse_choice(json_t *b, struct swift_oai_request *rq, struct swift_oai_error *er)
{
    json_t *tc = json_object_get(b, "tool_choice");
    int none = 0;
    if (tc && !json_is_null(tc)) {
        const char *s = json_string_value(tc);
        if (!s || (strcmp(s, "auto") && strcmp(s, "none")))
            return swift_oai_fail(er,
                                  400,
                                  "tool_choice",
                                  NULL,
                                  "'tool_choice' must be \"auto\" or \"none\" (\"required\" and "
                                  "named functions are not supported)");
        none = !strcmp(s, "none");
    }
    rq->tools_on = rq->conv.tools && !none;
    json_t *kw = json_object_get(b, "chat_template_kwargs");
    if (kw && !json_is_null(kw)) {
        if (!json_is_object(kw))
            return swift_oai_fail(
                er, 400, "chat_template_kwargs", NULL, "'chat_template_kwargs' must be an object");
        if (get_bool(kw, "enable_thinking", &rq->enable_thinking, er) < 0) {
            snprintf(er->param, sizeof(er->param), "chat_template_kwargs.enable_thinking");
            return -1;
        }
    }
    return 0;
}

/* ---- completions prompt ---- */

static int parse_prompt(json_t *b, struct swift_oai_request *rq, struct swift_oai_error *er)
{
    json_t *p = json_object_get(b, "prompt");
    if (!p)
        return swift_oai_fail(er, 400, "prompt", NULL, "'prompt' is required");
    if (json_is_array(p) && json_array_size(p) == 1 && json_is_string(json_array_get(p, 0)))
        p = json_array_get(p, 0);
    if (json_is_string(p)) {
        rq->prompt = json_string_value(p);
        rq->prompt_len = json_string_length(p);
        if (!rq->prompt_len)
            return swift_oai_fail(er, 400, "prompt", NULL, "'prompt' must not be empty");
        return 0;
    }
    size_t n = json_is_array(p) ? json_array_size(p) : 0;
    if (!n || n > (1u << 24) || !json_is_integer(json_array_get(p, 0)))
        return swift_oai_fail(er,
                              400,
                              "prompt",
                              NULL,
                              "'prompt' must be a non-empty string or array of token ids (one "
                              "prompt per request)");
    rq->prompt_ids = swift_xmalloc(n * sizeof(int32_t));
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_array_get(p, i);
        if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > INT32_MAX)
            return swift_oai_fail(
                er, 400, "prompt", NULL, "'prompt[%zu]' must be a token id (an integer >= 0)", i);
        rq->prompt_ids[i] = (int32_t)json_integer_value(x);
    }
    rq->nprompt_ids = (int)n;
    return 0;
}

/* ---- the request ---- */

static int parse_body(json_t *body, enum swift_oai_kind kind, const char *served,
                      struct swift_oai_request *rq, struct swift_oai_error *er)
{
    json_t *model = json_object_get(body, "model");
    if (model && !json_is_null(model)) {
        if (!json_is_string(model))
            return swift_oai_fail(er, 400, "model", NULL, "'model' must be a string");
        rq->model = json_string_value(model);
        if (served && strcmp(rq->model, served))
            return swift_oai_fail(
                er, 404, "model", "model_not_found", "The model `%s` does not exist.", rq->model);
    }
    if (parse_sampling(body, rq, er) < 0)
        return -1;
    if (kind == SWIFT_OAI_COMPLETION)
        return parse_prompt(body, rq, er);
    if (parse_messages(body, rq, er) < 0 || parse_tools(body, rq, er) < 0 ||
        parse_choice(body, rq, er) < 0)
        return -1;
    return 0;
}

/* The request fields both entry points start with. */
static void request_init(struct swift_oai_request *rq, json_t *body, enum swift_oai_kind kind)
{
    rq->kind = kind;
    rq->body = json_incref(body);
    rq->owned = json_array();
    rq->enable_thinking = 1;
    /* swift_sampling_defaults() but max_tokens 0 (not given); spelled out so this layer needs no
       engine to link (the fuzz target, the unit tests) */
    rq->sampling = (struct swift_sampling){.n = 1, .top_p = 1.0, .repetition_penalty = 1.0};
}

static size_t count_marks(const char *s, size_t n)
{
    size_t k = 0;
    for (const char *q = s; (q = memmem(q, n - (size_t)(q - s), "<image>", 7)); q += 7)
        k++;
    return k;
}

/* Message m's content with each "<image>" replaced by SWIFT_OAI_IMAGE_MARK (or, prepend > 0, that
 * many marks before it), kept in rq->owned. */
static void mark_images(struct swift_oai_request *rq, struct swift_message *m, size_t prepend)
{
    size_t mark = strlen(SWIFT_OAI_IMAGE_MARK),
           k = prepend ? prepend : count_marks(m->content, m->len);
    char *out = swift_xmalloc(m->len + k * mark + 1), *o = out;
    for (size_t i = 0; i < prepend; i++, o += mark)
        memcpy(o, SWIFT_OAI_IMAGE_MARK, mark);
    const char *q = m->content, *end = m->content + m->len;
    while (q < end) {
        const char *h = prepend ? NULL : memmem(q, (size_t)(end - q), "<image>", 7);
        size_t n = (size_t)((h ? h : end) - q);
        memcpy(o, q, n);
        o += n;
        if (!h)
            break;
        memcpy(o, SWIFT_OAI_IMAGE_MARK, mark);
        o += mark;
        q = h + 7;
    }
    json_t *s = json_stringn_nocheck(out, (size_t)(o - out));
    free(out);
    json_array_append_new(rq->owned, s);
    m->content = json_string_value(s);
    m->len = json_string_length(s);
}

/* ms-swift's "images" (paths, or {"path": ...}) with "<image>" placeholders in the messages;
 * none at all puts every image before the first user message, as ms-swift and swift-preprocess
 * do. The paths are relative to the data file (rq->images_rel). */
static int parse_row_images(json_t *row, struct swift_oai_request *rq, struct swift_oai_error *er)
{
    json_t *list = json_object_get(row, "images");
    if (!list || json_is_null(list))
        return 0;
    if (!json_is_array(list)) {
        json_t *one = json_array();
        json_array_append(one, list);
        json_array_append_new(rq->owned, one);
        list = one;
    }
    size_t n = json_array_size(list), have = 0, first_user = rq->conv.n;
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(list, i);
        if (json_is_object(v))
            v = json_object_get(v, "path");
        if (!json_is_string(v))
            return swift_oai_fail(er, 400, "images", NULL, "images[%zu] is not a path", i);
        if (add_image(rq, json_string_value(v), "images", er) < 0)
            return -1;
    }
    rq->images_rel = 1;
    for (size_t m = 0; m < rq->conv.n; m++) {
        have += count_marks(rq->conv.msg[m].content, rq->conv.msg[m].len);
        if (first_user == rq->conv.n && rq->conv.msg[m].role == SWIFT_ROLE_USER)
            first_user = m;
    }
    if (have == 0 && n > 0 && first_user < rq->conv.n) {
        mark_images(rq, &rq->conv.msg[first_user], n);
        return 0;
    }
    if (have != n)
        return swift_oai_fail(er,
                              400,
                              "images",
                              NULL,
                              "%zu <image> placeholders for %zu images in \"images\"",
                              have,
                              n);
    for (size_t m = 0; m < rq->conv.n && n; m++)
        if (count_marks(rq->conv.msg[m].content, rq->conv.msg[m].len))
            mark_images(rq, &rq->conv.msg[m], 0);
    return 0;
}

int swift_oai_parse_row(json_t *row, const char *served, struct swift_oai_request *rq,
                        struct swift_oai_error *er)
{
    memset(rq, 0, sizeof(*rq));
    memset(er, 0, sizeof(*er));
    if (!json_is_object(row))
        return swift_oai_fail(er, 400, NULL, NULL, "a row must be a JSON object");
    request_init(rq, row, SWIFT_OAI_CHAT);
    json_t *model = json_object_get(row, "model");
    if (json_is_string(model) && served && strcmp(json_string_value(model), served)) {
        swift_oai_fail(er,
                       404,
                       "model",
                       "model_not_found",
                       "The model `%s` does not exist.",
                       json_string_value(model));
        swift_oai_request_release(rq);
        return -1;
    }
    rq->model = json_string_value(model);
    char err[256];
    json_t *owned = NULL;
    int rc = parse_sampling(row, rq, er);
    if (rc == 0 && swift_row_to_conv(row, NULL, NULL, &rq->conv, &owned, err, sizeof(err)) < 0)
        rc = swift_oai_fail(er, 400, "messages", NULL, "%s", err);
    if (owned)
        json_array_append_new(rq->owned, owned);
    /* a final assistant turn is the row's label, not part of the prompt */
    if (rc == 0 && rq->conv.n > 1 && rq->conv.msg[rq->conv.n - 1].role == SWIFT_ROLE_ASSISTANT)
        rq->conv.n--;
    if (rc == 0 && rq->conv.n == 0)
        rc = swift_oai_fail(er, 400, "messages", NULL, "the row has no messages");
    if (rc == 0)
        rc = parse_row_images(row, rq, er);
    if (rc == 0)
        rc = parse_choice(row, rq, er);
    if (rc < 0) {
        swift_oai_request_release(rq);
        return -1;
    }
    return 0;
}

int swift_oai_parse(json_t *body, enum swift_oai_kind kind, const char *served,
                    struct swift_oai_request *rq, struct swift_oai_error *er)
{
    memset(rq, 0, sizeof(*rq));
    memset(er, 0, sizeof(*er));
    if (!json_is_object(body))
        return swift_oai_fail(er,
                              400,
                              NULL,
                              NULL,
                              "the request body must be a JSON object, got %s",
                              body ? type_name(body) : "nothing");
    request_init(rq, body, kind);
    if (parse_body(body, kind, served, rq, er) < 0) {
        swift_oai_request_release(rq);
        return -1;
    }
    return 0;
}

int swift_oai_parse_text(const char *text, size_t len, enum swift_oai_kind kind, const char *served,
                         struct swift_oai_request *rq, struct swift_oai_error *er)
{
    json_error_t je;
    json_t *body = json_loadb(text, len, 0, &je);
    if (!body) {
        memset(rq, 0, sizeof(*rq));
        memset(er, 0, sizeof(*er));
        return swift_oai_fail(er,
                              400,
                              NULL,
                              NULL,
                              "malformed JSON in the request body: %s (line %d, column %d)",
                              je.text,
                              je.line,
                              je.column);
    }
    int rc = swift_oai_parse(body, kind, served, rq, er);
    json_decref(body);
    return rc;
}

void swift_oai_request_release(struct swift_oai_request *rq)
{
    free(rq->conv.msg);
    free(rq->prompt_ids);
    json_decref(rq->owned);
    json_decref(rq->body);
    memset(rq, 0, sizeof(*rq));
}

/* ---- prompts ---- */

int swift_oai_render_chat(struct swift_oai_request *rq, const struct swift_template *t,
                          struct swift_tok_state *st, const struct swift_tokenizer *tok,
                          struct swift_encoded *e, struct swift_oai_error *er)
{
    char err[256];
    rq->conv.no_thinking = !rq->enable_thinking;
    if (swift_template_encode_prompt(t, st, tok, &rq->conv, e, err, sizeof(err)) < 0)
        return swift_oai_fail(er, 400, "messages", NULL, "%s", err);
    return 0;
}

int swift_oai_prompt_ids(const struct swift_oai_request *rq, struct swift_tok_state *st,
                         const struct swift_tokenizer *tok, int32_t **ids, int *n,
                         struct swift_oai_error *er)
{
    uint32_t V = swift_tokenizer_vocab_size(tok);
    *ids = NULL;
    *n = 0;
    if (rq->prompt_ids) {
        for (int i = 0; i < rq->nprompt_ids; i++)
            if ((uint32_t)rq->prompt_ids[i] >= V)
                return swift_oai_fail(er,
                                      400,
                                      "prompt",
                                      NULL,
                                      "'prompt[%d]': token id %d is outside the vocabulary (%u)",
                                      i,
                                      rq->prompt_ids[i],
                                      V);
        *ids = swift_xmalloc((size_t)rq->nprompt_ids * sizeof(int32_t));
        memcpy(*ids, rq->prompt_ids, (size_t)rq->nprompt_ids * sizeof(int32_t));
        *n = rq->nprompt_ids;
        return 0;
    }
    struct swift_tokens t = {0};
    if (swift_tokenizer_encode(
            st, rq->prompt, rq->prompt_len, SWIFT_TOK_PARSE_SPECIAL | SWIFT_TOK_ADD_SPECIAL, &t) <
        0) {
        swift_tokens_release(&t);
        return swift_oai_fail(er, 400, "prompt", NULL, "cannot tokenize 'prompt'");
    }
    if (t.n == 0 || t.n > INT32_MAX) {
        swift_tokens_release(&t);
        return swift_oai_fail(er, 400, "prompt", NULL, "'prompt' has no tokens");
    }
    *ids = swift_xmalloc(t.n * sizeof(int32_t));
    for (size_t i = 0; i < t.n; i++)
        (*ids)[i] = (int32_t)t.ids[i];
    *n = (int)t.n;
    swift_tokens_release(&t);
    return 0;
}
