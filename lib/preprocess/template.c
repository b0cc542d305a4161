/* template — chat templates to ids + loss mask (see template.h). */
#include "lib/preprocess/template.h"

#include "lib/core/alloc.h"
#include "lib/preprocess/agent.h"
#include "lib/core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "lib/core/banned.h"

enum kind { K_CHATML, K_QWEN3, K_LLAMA3, K_DEFAULT, K_GENERATION };

struct swift_template {
    const char *name;
    enum kind kind;
    const char *default_system;
    int dated; /* llama3_1/_2: the system turn's knowledge and today dates */
};

static const struct swift_template templates[] = {
    {"chatml", K_CHATML, NULL, 0},
    {"qwen", K_CHATML, "You are a helpful assistant.", 0},
    {"qwen2_5",
     K_CHATML,
     "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.",
     0},
    {"qwen3", K_QWEN3, NULL, 0},
    {"llama3", K_LLAMA3, NULL, 0},
    {"llama3_1", K_LLAMA3, NULL, 1},
    {"llama3_2", K_LLAMA3, NULL, 1},
    {"default", K_DEFAULT, "You are a helpful assistant.", 0},
    {"generation", K_GENERATION, NULL, 0},
    /* Qwen2-VL / Qwen2.5-VL: qwen's chatml; "<image>" placeholders become vision tokens before
     * the template runs (lib/preprocess/mm.c), whatever the template */
    {"qwen2_vl", K_CHATML, "You are a helpful assistant.", 0},
    {"qwen2_5_vl", K_CHATML, "You are a helpful assistant.", 0},
};
#define NTEMPLATES (sizeof(templates) / sizeof(templates[0]))

const struct swift_template *swift_template_find(const char *name)
{
    for (size_t i = 0; i < NTEMPLATES; i++)
        if (!strcmp(name, templates[i].name))
            return &templates[i];
    return NULL;
}

const char *swift_template_names(void)
{
    return SWIFT_TEMPLATE_NAMES;
}

const char *swift_template_name(const struct swift_template *t)
{
    return t->name;
}

const char *swift_template_guess(const struct swift_tokenizer *tok)
{
    const char *ct = swift_tokenizer_config_str(tok, "chat_template");
    if (!ct)
        return NULL;
    if (strstr(ct, "<|im_start|>")) {
        if (strstr(ct, "<|vision_start|>"))
            return "qwen2_vl";
        if (strstr(ct, "<think>"))
            return "qwen3";
        if (strstr(ct, "You are Qwen, created by Alibaba Cloud"))
            return "qwen2_5";
        if (strstr(ct, "You are a helpful assistant."))
            return "qwen";
        return "chatml";
    }
    if (strstr(ct, "<|start_header_id|>")) {
        if (strstr(ct, "Cutting Knowledge Date"))
            return strstr(ct, "strftime_now") ? "llama3_2" : "llama3_1";
        return "llama3";
    }
    return NULL;
}

int swift_loss_parse(const char *s)
{
    if (!strcmp(s, "default"))
        return SWIFT_LOSS_DEFAULT;
    if (!strcmp(s, "last_round"))
        return SWIFT_LOSS_LAST_ROUND;
    if (!strcmp(s, "all"))
        return SWIFT_LOSS_ALL;
    return -1;
}

const char *swift_loss_name(int loss)
{
    return loss == SWIFT_LOSS_LAST_ROUND ? "last_round"
           : loss == SWIFT_LOSS_ALL      ? "all"
                                         : "default";
}

void swift_encoded_release(struct swift_encoded *e)
{
    free(e->text);
    free(e->bytemask);
    free(e->mask);
    swift_tokens_release(&e->tok);
    memset(e, 0, sizeof(*e));
}

/* ---- rendering ---- */
struct render {
    struct swift_encoded *e;
    const struct swift_tokenizer *tok;
    int all; /* SWIFT_LOSS_ALL: every byte trained */
    char *err;
    size_t errlen;
    int failed;
};

static int fail(struct render *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct render *r, const char *fmt, ...)
{
    if (!r->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->err, r->errlen, fmt, ap);
        va_end(ap);
    }
    r->failed = 1;
    return -1;
}

static int emit(struct render *r, const char *s, size_t n, int mask)
{
    struct swift_encoded *e = r->e;
    if (e->len + n + 1 > e->cap) {
        size_t nc = e->cap ? e->cap : 4096;
        while (nc < e->len + n + 1)
            nc *= 2;
        if (nc > ((size_t)1 << 31))
            return fail(r, "rendered sample larger than 2 GiB");
        e->text = swift_xrealloc(e->text, nc);
        e->bytemask = swift_xrealloc(e->bytemask, nc);
        e->cap = nc;
    }
    memcpy(e->text + e->len, s, n);
    memset(e->bytemask + e->len, r->all ? 1 : mask, n);
    e->len += n;
    e->text[e->len] = 0;
    return 0;
}

static int emits(struct render *r, const char *s, int mask)
{
    return emit(r, s, strlen(s), mask);
}

/* Content is normalized as the tokenizer's normalizer would do it, so offsets stay ours. */
static int emit_content(struct render *r, const char *s, size_t n, int mask)
{
    char *norm;
    size_t nl;
    if (swift_tokenizer_normalize(r->tok, s, n, &norm, &nl) < 0)
        return fail(r, "text is not valid UTF-8");
    int rc = emit(r, norm, nl, mask);
    free(norm);
    return rc;
}

/* tojson as transformers' Jinja environment does: json.dumps(x, ensure_ascii=False) */
static int emit_json(struct render *r, json_t *v, int mask)
{
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    if (!s)
        return fail(r, "cannot serialize JSON");
    int rc = emit_content(r, s, strlen(s), mask);
    free(s);
    return rc;
}

/* Python's str.isspace, for Jinja's trim (str.strip()). */
static int py_space(uint32_t cp)
{
    if ((cp >= 9 && cp <= 13) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0)
        return 1;
    if (cp < 0x100)
        return 0;
    const utf8proc_property_t *p = utf8proc_get_property((utf8proc_int32_t)cp);
    return p->category == UTF8PROC_CATEGORY_ZS || cp == 0x2028 || cp == 0x2029;
}

static void trim(const char **s, size_t *n)
{
    const unsigned char *p = (const unsigned char *)*s;
    size_t a = 0, b = *n;
    while (a < b) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate(p + a, (utf8proc_ssize_t)(b - a), &cp);
        if (k <= 0 || !py_space((uint32_t)cp))
            break;
        a += (size_t)k;
    }
    while (b > a) {
        size_t k = 1;
        while (k < 4 && b - k > a && (p[b - k] & 0xC0) == 0x80)
            k++;
        utf8proc_int32_t cp;
        if (utf8proc_iterate(p + b - k, (utf8proc_ssize_t)k, &cp) <= 0 || !py_space((uint32_t)cp))
            break;
        b -= k;
    }
    *s += a;
    *n = b - a;
}

static int trained(const struct swift_conv *c, size_t i, int loss, size_t last_asst)
{
    if (loss == SWIFT_LOSS_ALL)
        return 1;
    if (c->msg[i].loss >= 0)
        return c->msg[i].loss;
    return loss == SWIFT_LOSS_DEFAULT || i == last_asst;
}

static const char *role_name(enum swift_role r)
{
    static const char *names[] = {"system", "user", "assistant", "tool"};
    return names[r];
}

static int validate(struct render *r, const struct swift_conv *c, size_t *last_asst)
{
    if (c->n == 0)
        return fail(r, "empty conversation");
    *last_asst = (size_t)-1;
    enum swift_role prev = SWIFT_ROLE_SYSTEM;
    for (size_t i = 0; i < c->n; i++) {
        enum swift_role ro = c->msg[i].role;
        if (ro == SWIFT_ROLE_SYSTEM && i > 0)
            return fail(r, "message %zu: a system message must come first", i + 1);
        if (ro == SWIFT_ROLE_USER && prev == SWIFT_ROLE_USER)
            return fail(r, "message %zu: roles out of order (user after user)", i + 1);
        if (ro == SWIFT_ROLE_ASSISTANT && prev == SWIFT_ROLE_SYSTEM)
            return fail(
                r, "message %zu: roles out of order (assistant before any user message)", i + 1);
        if (ro == SWIFT_ROLE_ASSISTANT && prev == SWIFT_ROLE_ASSISTANT)
            return fail(r, "message %zu: roles out of order (assistant after assistant)", i + 1);
        if (ro == SWIFT_ROLE_TOOL && prev != SWIFT_ROLE_ASSISTANT && prev != SWIFT_ROLE_TOOL)
            return fail(
                r, "message %zu: roles out of order (tool after %s)", i + 1, role_name(prev));
        if (ro == SWIFT_ROLE_ASSISTANT)
            *last_asst = i;
        prev = ro;
    }
    if (prev != SWIFT_ROLE_ASSISTANT)
        return fail(
            r, "conversation ends with a %s message, not an assistant one", role_name(prev));
    return 0;
}

static const char TOOLS_HEAD[] =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are "
    "provided with function signatures within <tools></tools> XML tags:\n<tools>";
static const char TOOLS_TAIL[] =
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, "
    "\"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n";

static int emit_tools(struct render *r, json_t *tools)
{
    emits(r, TOOLS_HEAD, 0);
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t)
    {
        emits(r, "\n", 0);
        emit_json(r, t, 0);
    }
    return emits(r, TOOLS_TAIL, 0);
}

static int emit_tool_calls(struct render *r, json_t *calls, int qwen3, int has_content, int m)
{
    size_t i;
    json_t *tc;
    json_array_foreach(calls, i, tc)
    {
        json_t *f = json_object_get(tc, "function");
        if (json_is_object(f))
            tc = f;
        json_t *name = json_object_get(tc, "name");
        json_t *args = json_object_get(tc, "arguments");
        if (!json_is_string(name))
            return fail(r, "tool call without a \"name\" string");
        if (!qwen3 || i > 0 || has_content)
            emits(r, "\n", m);
        emits(r, "<tool_call>\n{\"name\": \"", m);
        emit_content(r, json_string_value(name), json_string_length(name), m);
        emits(r, "\", \"arguments\": ", m);
        json_t *decoded = !qwen3 && json_is_string(args) ? swift_agent_call_args(tc) : NULL;
        if (qwen3 && json_is_string(args))
            emit_content(r, json_string_value(args), json_string_length(args), m);
        else if (decoded) /* OpenAI's JSON text: written as that JSON (as vLLM and ms-swift) */
            emit_json(r, decoded, m);
        else if (args)
            emit_json(r, args, m);
        else
            emits(r, "{}", m);
        json_decref(decoded);
        emits(r, "}\n</tool_call>", m);
    }
    return 0;
}

/* str.split('</think>') pieces for Qwen3 reasoning extraction. */
static const char *find_str(const char *s, size_t n, const char *pat)
{
    size_t k = strlen(pat);
    for (size_t i = 0; i + k <= n; i++)
        if (!memcmp(s + i, pat, k))
            return s + i;
    return NULL;
}
static const char *rfind_str(const char *s, size_t n, const char *pat)
{
    size_t k = strlen(pat);
    for (size_t i = n >= k ? n - k + 1 : 0; i-- > 0;)
        if (!memcmp(s + i, pat, k))
            return s + i;
    return NULL;
}

static int is_tool_response(const struct swift_message *m)
{
    static const char a[] = "<tool_response>", b[] = "</tool_response>";
    return m->len >= sizeof(a) - 1 + sizeof(b) - 1 && !memcmp(m->content, a, sizeof(a) - 1) &&
           !memcmp(m->content + m->len - (sizeof(b) - 1), b, sizeof(b) - 1);
}

/* The system turn of ChatML: the system message (or the template's default) and the tools.
 * Returns the index of the first message after it. */
static size_t chatml_system(struct render *r, const struct swift_template *t,
                            const struct swift_conv *c)
{
    int qwen3 = t->kind == K_QWEN3;
    size_t start = 0;
    const char *sys = NULL;
    size_t syslen = 0;
    if (c->msg[0].role == SWIFT_ROLE_SYSTEM) {
        sys = c->msg[0].content;
        syslen = c->msg[0].len;
        start = 1;
    }
    int has_tools = c->tools && json_array_size(c->tools) > 0;
    if (has_tools) {
        emits(r, "<|im_start|>system\n", 0);
        if (qwen3) {
            if (sys) {
                emit_content(r, sys, syslen, 0);
                emits(r, "\n\n", 0);
            }
        } else {
            if (sys)
                emit_content(r, sys, syslen, 0);
            else if (t->default_system)
                emits(r, t->default_system, 0);
            emits(r, "\n\n", 0);
        }
        emit_tools(r, c->tools);
    } else if (sys || t->default_system) {
        emits(r, "<|im_start|>system\n", 0);
        if (sys)
            emit_content(r, sys, syslen, 0);
        else
            emits(r, t->default_system, 0);
        emits(r, "<|im_end|>\n", 0);
    }
    return start;
}

/* A Qwen3 assistant turn: the reasoning between <think> and </think> is kept only after the
 * last user query (and then only when there is some, or on the last turn). */
static void qwen3_assistant(struct render *r, const struct swift_message *m, int think, int last,
                            int tm, int calls)
{
    const char *content = m->content, *reason = "";
    size_t clen = m->len, rlen = 0;
    const char *endthink = find_str(m->content, m->len, "</think>");
    if (endthink) {
        const char *lastend = rfind_str(m->content, m->len, "</think>");
        content = lastend + 8;
        clen = m->len - (size_t)(content - m->content);
        while (clen && *content == '\n')
            content++, clen--;
        /* split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') */
        size_t n0 = (size_t)(endthink - m->content);
        while (n0 && m->content[n0 - 1] == '\n')
            n0--;
        const char *th = rfind_str(m->content, n0, "<think>");
        reason = th ? th + 7 : m->content;
        rlen = n0 - (size_t)(reason - m->content);
        while (rlen && *reason == '\n')
            reason++, rlen--;
    }
    emits(r, "<|im_start|>assistant\n", 0);
    if (think && (last || rlen)) {
        /* reasoning.strip('\n') + content.lstrip('\n') */
        while (rlen && reason[rlen - 1] == '\n')
            rlen--;
        emits(r, "<think>\n", tm);
        emit_content(r, reason, rlen, tm);
        emits(r, "\n</think>\n\n", tm);
        while (clen && *content == '\n')
            content++, clen--;
    }
    emit_content(r, content, clen, tm);
    if (calls)
        emit_tool_calls(r, m->tool_calls, 1, clen > 0, tm);
}

static void render_chatml(struct render *r, const struct swift_template *t,
                          const struct swift_conv *c, int loss, size_t last_asst)
{
    int qwen3 = t->kind == K_QWEN3;
    size_t start = chatml_system(r, t, c);
    size_t last_query = c->n - 1;
    for (size_t i = c->n; i-- > 0;)
        if (c->msg[i].role == SWIFT_ROLE_USER && !is_tool_response(&c->msg[i])) {
            last_query = i;
            break;
        }
    for (size_t i = start; i < c->n; i++) {
        const struct swift_message *m = &c->msg[i];
        int last = i + 1 == c->n;
        if (m->role == SWIFT_ROLE_USER) {
            emits(r, "<|im_start|>user\n", 0);
            emit_content(r, m->content, m->len, 0);
            emits(r, "<|im_end|>\n", 0);
        } else if (m->role == SWIFT_ROLE_TOOL) {
            if (i == 0 || c->msg[i - 1].role != SWIFT_ROLE_TOOL)
                emits(r, "<|im_start|>user", 0);
            emits(r, "\n<tool_response>\n", 0);
            emit_content(r, m->content, m->len, 0);
            emits(r, "\n</tool_response>", 0);
            if (last || c->msg[i + 1].role != SWIFT_ROLE_TOOL)
                emits(r, "<|im_end|>\n", 0);
        } else if (m->role == SWIFT_ROLE_ASSISTANT) {
            int tm = trained(c, i, loss, last_asst);
            int calls = m->tool_calls && json_array_size(m->tool_calls) > 0;
            if (qwen3) {
                qwen3_assistant(r, m, i > last_query, last, tm, calls);
            } else if (!calls) {
                emits(r, "<|im_start|>assistant\n", 0);
                emit_content(r, m->content, m->len, tm);
            } else {
                emits(r, "<|im_start|>assistant", 0);
                if (m->len) {
                    emits(r, "\n", tm);
                    emit_content(r, m->content, m->len, tm);
                }
                emit_tool_calls(r, m->tool_calls, 0, 1, tm);
            }
            emits(r, "<|im_end|>", tm);
            emits(r, "\n", last ? 0 : tm);
            if (last && !r->failed) /* never trained, even with SWIFT_LOSS_ALL */
                r->e->bytemask[r->e->len - 1] = 0;
        }
    }
}

static void llama3_turn(struct render *r, const char *role, const char *s, size_t n, int m)
{
    emits(r, "<|start_header_id|>", 0);
    emits(r, role, 0);
    emits(r, "<|end_header_id|>\n\n", 0);
    trim(&s, &n);
    emit_content(r, s, n, m);
    emits(r, "<|eot_id|>", m);
}

/* Llama 3.1's call: {"name": "NAME", "parameters": ARGS} (several, one per line: the official
 * template refuses more than one) */
static void llama3_calls(struct render *r, json_t *calls, int tm)
{
    emits(r, "<|start_header_id|>assistant<|end_header_id|>\n\n", 0);
    size_t k;
    json_t *tc;
    json_array_foreach(calls, k, tc)
    {
        json_t *f = json_object_get(tc, "function");
        f = json_is_object(f) ? f : tc;
        json_t *name = json_object_get(f, "name");
        json_t *args = swift_agent_call_args(f);
        if (!json_is_string(name)) {
            json_decref(args);
            fail(r, "tool call without a \"name\" string");
            return;
        }
        if (k)
            emits(r, "\n", tm);
        emits(r, "{\"name\": \"", tm);
        emit_content(r, json_string_value(name), json_string_length(name), tm);
        emits(r, "\", \"parameters\": ", tm);
        /* a string that is not JSON is written as a JSON string, as tojson does */
        emit_json(r, args ? args : json_object_get(f, "arguments"), tm);
        emits(r, "}", tm);
        json_decref(args);
    }
    emits(r, "<|eot_id|>", tm);
}

/* Llama 3 / 3.1 / 3.2 (the official Jinja): tools in the first user message, calls as JSON,
 * results in the ipython role (as tojson of the text). */
static void render_llama3(struct render *r, const struct swift_template *t,
                          const struct swift_conv *c, int loss, size_t last_asst)
{
    emits(r, "<|begin_of_text|>", 0);
    int has_tools = c->tools && json_array_size(c->tools) > 0;
    size_t start = 0;
    if (c->msg[0].role == SWIFT_ROLE_SYSTEM || has_tools || t->dated) {
        emits(r, "<|start_header_id|>system<|end_header_id|>\n\n", 0);
        const char *s = "";
        size_t n = 0;
        if (c->msg[0].role == SWIFT_ROLE_SYSTEM) {
            s = c->msg[0].content;
            n = c->msg[0].len;
            start = 1;
        }
        if (has_tools)
            emits(r, "Environment: ipython\n", 0);
        if (t->dated)
            emits(r, "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n", 0);
        trim(&s, &n);
        emit_content(r, s, n, 0);
        emits(r, "<|eot_id|>", 0);
    }
    if (has_tools && start < c->n) {
        char err[128];
        char *tt = swift_agent_format_tools(SWIFT_AGENT_LLAMA3, c->tools, err, sizeof(err));
        if (!tt) {
            fail(r, "%s", err);
            return;
        }
        const char *s = c->msg[start].content;
        size_t n = c->msg[start].len;
        trim(&s, &n);
        emits(r, "<|start_header_id|>user<|end_header_id|>\n\n", 0);
        emit_content(r, tt, strlen(tt), 0);
        free(tt);
        emit_content(r, s, n, 0);
        emits(r, "<|eot_id|>", 0);
        start++;
    }
    for (size_t i = start; i < c->n && !r->failed; i++) {
        const struct swift_message *m = &c->msg[i];
        int tm = m->role == SWIFT_ROLE_ASSISTANT ? trained(c, i, loss, last_asst) : 0;
        if (m->role == SWIFT_ROLE_ASSISTANT && m->tool_calls && json_array_size(m->tool_calls)) {
            llama3_calls(r, m->tool_calls, tm); /* the content is not written (official) */
        } else if (m->role == SWIFT_ROLE_TOOL) {
            emits(r, "<|start_header_id|>ipython<|end_header_id|>\n\n", 0);
            json_t *js = json_stringn(m->content, m->len);
            if (!js) {
                fail(r, "text is not valid UTF-8");
                return;
            }
            emit_json(r, js, 0);
            json_decref(js);
            emits(r, "<|eot_id|>", 0);
        } else {
            llama3_turn(r, role_name(m->role), m->content, m->len, tm);
        }
    }
}

static const char *eos_text(const struct swift_tokenizer *tok)
{
    const char *eos = swift_tokenizer_config_str(tok, "eos_token");
    if (eos && swift_tokenizer_token_id(tok, eos) >= 0)
        return eos;
    if (swift_tokenizer_token_id(tok, "<|endoftext|>") >= 0)
        return "<|endoftext|>";
    return NULL;
}

static const char *bos_text(const struct swift_tokenizer *tok)
{
    const char *bos = swift_tokenizer_config_str(tok, "bos_token");
    if (!bos || swift_tokenizer_token_id(tok, bos) < 0)
        return NULL;
    /* Llama 3 always starts with <|begin_of_text|>; others only with add_bos_token */
    if (!strcmp(bos, "<|begin_of_text|>"))
        return bos;
    return NULL;
}

static void render_default(struct render *r, const struct swift_template *t,
                           const struct swift_conv *c, int loss, size_t last_asst)
{
    const char *bos = bos_text(r->tok), *eos = eos_text(r->tok);
    if (bos)
        emits(r, bos, 0);
    size_t start = 0;
    if (c->msg[0].role == SWIFT_ROLE_SYSTEM) {
        start = 1;
        if (c->msg[0].len) {
            emit_content(r, c->msg[0].content, c->msg[0].len, 0);
            emits(r, "\n\n", 0);
        }
    } else {
        emits(r, t->default_system, 0);
        emits(r, "\n\n", 0);
    }
    for (size_t i = start; i < c->n; i++) {
        const struct swift_message *m = &c->msg[i];
        if (m->role == SWIFT_ROLE_TOOL || m->tool_calls) {
            fail(r, "template default does not support tool calls (use qwen2_5 or qwen3)");
            return;
        }
        if (m->role == SWIFT_ROLE_USER) {
            emits(r, "### Human:\n", 0);
            emit_content(r, m->content, m->len, 0);
            emits(r, "\n\n### Assistant:\n", 0);
        } else {
            int tm = trained(c, i, loss, last_asst);
            emit_content(r, m->content, m->len, tm);
            if (i + 1 < c->n)
                emits(r, "\n\n", tm);
            else if (eos)
                emits(r, eos, tm);
        }
    }
}

static const char *hold(json_t *holder, json_t *js, size_t *len)
{
    json_array_append_new(holder, js);
    *len = json_string_length(js);
    return json_string_value(js);
}

/* Conversation c with its tools, calls and results written as text by agent template a (any
 * pairing but the template's own, as ms-swift does it): a plain conversation in *out whose
 * strings live in holder. */
static int agent_plain(struct render *r, const struct swift_template *t, int a,
                       const struct swift_conv *c, struct swift_conv *out, json_t *holder)
{
    char err[160];
    *out = *c;
    out->tools = NULL;
    out->msg = swift_xmalloc((c->n + 1) * sizeof(*out->msg));
    out->n = out->cap = 0;
    size_t i = 0;
    if (c->tools && json_array_size(c->tools)) {
        char *tt = swift_agent_format_tools(a, c->tools, err, sizeof(err));
        if (!tt)
            return fail(r, "%s", err);
        const char *sys = t->default_system;
        size_t sl = sys ? strlen(sys) : 0;
        if (c->n && c->msg[0].role == SWIFT_ROLE_SYSTEM)
            sys = c->msg[0].content, sl = c->msg[0].len, i = 1;
        json_t *js = sl ? json_sprintf("%.*s\n\n%s", (int)sl, sys, tt) : json_string(tt);
        free(tt);
        if (!js)
            return fail(r, "text is not valid UTF-8");
        struct swift_message *m = &out->msg[out->n++];
        *m = (struct swift_message){SWIFT_ROLE_SYSTEM, NULL, 0, NULL, -1};
        m->content = hold(holder, js, &m->len);
    }
    for (; i < c->n; i++) {
        const struct swift_message *m = &c->msg[i];
        struct swift_message *o = &out->msg[out->n];
        char *txt = NULL;
        if (m->role == SWIFT_ROLE_ASSISTANT && m->tool_calls && json_array_size(m->tool_calls)) {
            txt = swift_agent_format_calls(a, m->content, m->len, m->tool_calls, err, sizeof(err));
            if (!txt)
                return fail(r, "message %zu: %s", i + 1, err);
        } else if (m->role == SWIFT_ROLE_TOOL) {
            txt = swift_agent_format_response(a, m->content, m->len);
            if (i && c->msg[i - 1].role == SWIFT_ROLE_TOOL) { /* results of one turn: one turn */
                o = &out->msg[out->n - 1];
                json_t *js = json_sprintf("%.*s\n%s", (int)o->len, o->content, txt);
                free(txt);
                if (!js)
                    return fail(r, "message %zu: text is not valid UTF-8", i + 1);
                o->content = hold(holder, js, &o->len);
                continue;
            }
        }
        *o = *m;
        o->tool_calls = NULL;
        if (m->role == SWIFT_ROLE_TOOL)
            o->role = SWIFT_ROLE_USER;
        if (txt) {
            json_t *js = json_string(txt);
            free(txt);
            if (!js)
                return fail(r, "message %zu: text is not valid UTF-8", i + 1);
            o->content = hold(holder, js, &o->len);
        }
        out->n++;
    }
    return 0;
}

static int has_agent_parts(const struct swift_conv *c)
{
    if (c->tools && json_array_size(c->tools))
        return 1;
    for (size_t i = 0; i < c->n; i++)
        if (c->msg[i].role == SWIFT_ROLE_TOOL ||
            (c->msg[i].tool_calls && json_array_size(c->msg[i].tool_calls)))
            return 1;
    return 0;
}

/* A conversation under a chat template; tools etc. written by c->agent (template.h). */
static void render_conv(struct render *r, const struct swift_template *t,
                        const struct swift_conv *c, int loss)
{
    int native = swift_agent_for_template(t->name);
    int a = c->agent ? c->agent : native;
    struct swift_conv pc = {0};
    json_t *holder = NULL;
    if (a != native && has_agent_parts(c)) {
        holder = json_array();
        if (agent_plain(r, t, a, c, &pc, holder) == 0)
            c = &pc;
    }
    size_t last_asst = 0;
    if (!r->failed && validate(r, c, &last_asst) == 0) {
        if (t->kind == K_CHATML || t->kind == K_QWEN3)
            render_chatml(r, t, c, loss, last_asst);
        else if (t->kind == K_LLAMA3)
            render_llama3(r, t, c, loss, last_asst);
        else
            render_default(r, t, c, loss, last_asst);
    }
    free(pc.msg);
    json_decref(holder);
}

int swift_template_encode(const struct swift_template *t, struct swift_tok_state *st,
                          const struct swift_tokenizer *tok, const struct swift_conv *c, int loss,
                          struct swift_encoded *e, char *err, size_t errlen)
{
    struct render r = {e, tok, loss == SWIFT_LOSS_ALL, err, errlen, 0};
    e->len = 0;
    e->tok.n = 0;
    e->tok.want_offsets = 1;
    e->trained = 0;
    if (t->kind == K_GENERATION) {
        const char *text = c->is_text ? c->text : NULL;
        size_t n = c->text_len;
        if (!c->is_text) {
            /* a conversation under the generation template: its messages' text, joined */
            r.all = 1;
            for (size_t i = 0; i < c->n; i++) {
                if (i)
                    emits(&r, "\n", 1);
                emit_content(&r, c->msg[i].content, c->msg[i].len, 1);
            }
        } else {
            const char *bos = bos_text(tok);
            if (bos)
                emits(&r, bos, 1);
            emit_content(&r, text, n, 1);
        }
        const char *eos = eos_text(tok);
        if (eos && !(c->is_text && c->open_end))
            emits(&r, eos, 1);
    } else {
        if (c->is_text)
            return fail(&r, "a plain \"text\" sample needs --template generation");
        render_conv(&r, t, c, loss);
    }
    if (r.failed)
        return -1;
    if (swift_tokenizer_encode(
            st, e->text, e->len, SWIFT_TOK_PARSE_SPECIAL | SWIFT_TOK_NO_NORMALIZE, &e->tok) < 0)
        return fail(&r, "cannot tokenize the rendered sample");
    if (e->tok.n > e->maskcap) {
        size_t nc = e->tok.n + e->tok.n / 2 + 64;
        e->mask = swift_xrealloc(e->mask, nc);
        e->maskcap = nc;
    }
    uint64_t tr = 0;
    for (size_t i = 0; i < e->tok.n; i++) {
        uint32_t o = e->tok.offsets[i];
        uint8_t m = o < e->len ? e->bytemask[o] : 0;
        e->mask[i] = m;
        tr += m;
    }
    e->trained = tr;
    return 0;
}

/* Tokens that end before the first trained byte (where the final turn's response begins). */
static size_t prompt_tokens(const struct swift_encoded *e)
{
    size_t b = 0, k = 0;
    while (b < e->len && !e->bytemask[b])
        b++;
    while (k < e->tok.n && (k + 1 < e->tok.n ? e->tok.offsets[k + 1] : e->len) <= b)
        k++;
    return k;
}

static void mask_prompt(struct swift_encoded *e, size_t p)
{
    for (size_t i = 0; i < p && i < e->tok.n; i++) {
        e->trained -= e->mask[i];
        e->mask[i] = 0;
    }
}

int swift_template_encode_pair(const struct swift_template *t, struct swift_tok_state *st,
                               const struct swift_tokenizer *tok, struct swift_conv *chosen,
                               struct swift_conv *rejected, struct swift_encoded *e0,
                               struct swift_encoded *e1, size_t *prompt, char *err, size_t errlen)
{
    struct render r = {e0, tok, 0, err, errlen, 0};
    if (t->kind == K_GENERATION)
        return fail(&r, "preference data needs a chat template, not generation");
    for (size_t i = 0; i < chosen->n; i++)
        chosen->msg[i].loss = -1;
    for (size_t i = 0; rejected && i < rejected->n; i++)
        rejected->msg[i].loss = -1;
    if (swift_template_encode(t, st, tok, chosen, SWIFT_LOSS_LAST_ROUND, e0, err, errlen) < 0)
        return -1;
    size_t p = prompt_tokens(e0);
    if (rejected) {
        if (swift_template_encode(t, st, tok, rejected, SWIFT_LOSS_LAST_ROUND, e1, err, errlen) < 0)
            return -1;
        size_t p1 = prompt_tokens(e1), q = 0;
        while (q < e0->tok.n && q < e1->tok.n && e0->tok.ids[q] == e1->tok.ids[q])
            q++;
        p = p1 < p ? p1 : p;
        p = q < p ? q : p;
        mask_prompt(e1, p);
    }
    mask_prompt(e0, p);
    if (e0->trained == 0)
        return fail(&r,
                    rejected ? "the chosen response has no token to train"
                             : "the completion has no token to train");
    if (rejected && e1->trained == 0)
        return fail(&r, "the rejected response has no token to train");
    *prompt = p;
    return 0;
}

int swift_template_encode_prompt(const struct swift_template *t, struct swift_tok_state *st,
                                 const struct swift_tokenizer *tok, const struct swift_conv *c,
                                 struct swift_encoded *e, char *err, size_t errlen)
{
    struct render r = {e, tok, 0, err, errlen, 0};
    enum swift_role lastr = c->n ? c->msg[c->n - 1].role : SWIFT_ROLE_SYSTEM;
    if (c->is_text || c->n == 0 ||
        (lastr != SWIFT_ROLE_USER && (lastr != SWIFT_ROLE_TOOL || t->kind == K_GENERATION)))
        return fail(&r, "a prompt must end with a user message");
    int rc;
    if (t->kind == K_GENERATION) {
        /* no chat template: the user's text itself, opened as swift-eval opens a plain prompt */
        if (c->n != 1)
            return fail(&r,
                        "the generation template takes one user message (no system or "
                        "earlier turns); use a chat template");
        struct swift_conv tc = {
            .is_text = 1, .text = c->msg[0].content, .text_len = c->msg[0].len, .open_end = 1};
        rc = swift_template_encode(t, st, tok, &tc, SWIFT_LOSS_DEFAULT, e, err, errlen);
    } else {
        /* the conversation plus an empty assistant turn: the prompt is what precedes the turn's
         * first trained byte (its header: HF's add_generation_prompt) */
        struct swift_message *m = swift_xmalloc((c->n + 1) * sizeof(*m));
        memcpy(m, c->msg, c->n * sizeof(*m));
        for (size_t i = 0; i < c->n; i++)
            m[i].loss = 0;
        m[c->n] = (struct swift_message){SWIFT_ROLE_ASSISTANT, "", 0, NULL, 1};
        struct swift_conv ac = *c;
        ac.msg = m;
        ac.n = ac.cap = c->n + 1;
        rc = swift_template_encode(t, st, tok, &ac, SWIFT_LOSS_LAST_ROUND, e, err, errlen);
        free(m);
        if (rc == 0) {
            size_t b = 0;
            while (b < e->len && !e->bytemask[b])
                b++;
            e->len = b;
            e->text[b] = 0;
            if (t->kind == K_QWEN3 && c->no_thinking) /* Qwen3 Jinja, enable_thinking=False */
                emits(&r, "<think>\n\n</think>\n\n", 0);
            b = e->len;
            e->tok.n = 0;
            if (swift_tokenizer_encode(
                    st, e->text, b, SWIFT_TOK_PARSE_SPECIAL | SWIFT_TOK_NO_NORMALIZE, &e->tok) < 0)
                return fail(&r, "cannot tokenize the rendered prompt");
            if (e->tok.n > e->maskcap) {
                e->mask = swift_xrealloc(e->mask, e->tok.n);
                e->maskcap = e->tok.n;
            }
        }
    }
    if (rc < 0)
        return -1;
    if (e->tok.n)
        memset(e->mask, 0, e->tok.n);
    if (e->len)
        memset(e->bytemask, 0, e->len);
    e->trained = 0;
    return 0;
}
