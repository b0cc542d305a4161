/* agent — agent templates: tools, calls and results written per format, completions parsed back
 * into tool calls (see agent.h). */
#include "lib/preprocess/agent.h"

#include "lib/core/alloc.h"
#include "lib/core/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

static const char *const names[] = {NULL, "hermes", "llama3", "react_en", "react_zh", "glm4"};
#define NAGENTS ((int)(sizeof(names) / sizeof(names[0])))

int swift_agent_find(const char *name)
{
    for (int i = 1; i < NAGENTS; i++)
        if (!strcmp(name, names[i]))
            return i;
    return -1;
}

const char *swift_agent_name(int agent)
{
    return agent > 0 && agent < NAGENTS ? names[agent] : "native";
}

int swift_agent_for_template(const char *t)
{
    if (!t)
        return SWIFT_AGENT_NATIVE;
    if (!strcmp(t, "chatml") || !strcmp(t, "qwen") || !strcmp(t, "qwen2_5") || !strcmp(t, "qwen3"))
        return SWIFT_AGENT_HERMES;
    if (!strncmp(t, "llama3", 6))
        return SWIFT_AGENT_LLAMA3;
    return SWIFT_AGENT_NATIVE;
}

/* ---- a growing string (lib/core/strbuf.h) ---- */
/* json.dumps(v, ensure_ascii=False[, indent=indent]) */
static void sb_json(struct swift_strbuf *b, json_t *v, int indent)
{
    char *s = json_dumps(
        v, JSON_ENCODE_ANY | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17) | JSON_INDENT(indent));
    if (s)
        swift_strbuf_adds(b, s);
    free(s);
}

static int errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int errf(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* ---- rendering ---- */
static json_t *unwrap(json_t *t)
{
    json_t *f = json_object_get(t, "function");
    return json_is_object(f) ? f : t;
}

static const char *str_or(json_t *o, const char *k1, const char *k2, const char *dflt)
{
    json_t *v = json_object_get(o, k1);
    if (!json_is_string(v) && k2)
        v = json_object_get(o, k2);
    return json_is_string(v) ? json_string_value(v) : dflt;
}

static const char HERMES_HEAD[] =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are "
    "provided with function signatures within <tools></tools> XML tags:\n<tools>";
static const char HERMES_TAIL[] =
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, "
    "\"arguments\": <args-json-object>}\n</tool_call>";
static const char LLAMA3_HEAD[] =
    "Given the following functions, please respond with a JSON for a function call with its "
    "proper arguments that best answers the given prompt.\n\nRespond in the format {\"name\": "
    "function name, \"parameters\": dictionary of argument name and its value}.Do not use "
    "variables.\n\n";
static const char REACT_EN_HEAD[] =
    "Answer the following questions as best you can. You have access to the following tools:\n\n";
static const char REACT_EN_FMT[] =
    "\n\nUse the following format:\n\nQuestion: the input question you must answer\nThought: you "
    "should always think about what to do\nAction: the action to take, should be one of [";
static const char REACT_EN_TAIL[] =
    "]\nAction Input: the input to the action\nObservation: the result of the action\n... (this "
    "Thought/Action/Action Input/Observation can be repeated zero or more times)\nThought: I now "
    "know the final answer\nFinal Answer: the final answer to the original input question\n\n"
    "Begin!\n";
static const char REACT_ZH_HEAD[] = "尽可能地回答以下问题。你可以使用以下工具:\n\n";
static const char REACT_ZH_FMT[] =
    "\n\n请按照以下格式进行:\n\nQuestion: 需要你回答的输入问题\nThought: "
    "你应该总是思考该做什么\nAction: 需要使用的工具，应该是[";
static const char REACT_ZH_TAIL[] =
    "]中的一个\nAction Input: 传入工具的内容\nObservation: 行动的结果\n... "
    "(这个Thought/Action/Action Input/Observation可以重复N次)\nThought: "
    "我现在知道最后的答案\nFinal Answer: 对原始输入问题的最终答案\n\n现在开始！\n";
static const char GLM4_HEAD[] =
    "你是一个名为 GLM-4 的人工智能助手。你是基于智谱AI训练的语言模型 GLM-4 "
    "模型开发的，你的任务是针对用户的问题和要求提供适当的答复和支持。\n\n# 可用工具\n\n";

/* ms-swift's ReAct tool description (BaseAgentTemplate._parse_tool + the react templates). */
static void react_tool(struct swift_strbuf *b, json_t *t, int zh)
{
    const char *name = str_or(t, "name_for_model", "name", "");
    const char *human = str_or(t, "name_for_human", NULL, name);
    const char *desc = str_or(t, "description", "description_for_model", "");
    json_t *params = json_object_get(t, "parameters");
    swift_strbuf_adds(b, name);
    swift_strbuf_adds(b, zh ? ": 调用此工具与 " : ": Call this tool to interact with the ");
    swift_strbuf_adds(b, human);
    swift_strbuf_adds(b, zh ? " API 进行交互。" : " API. What is the ");
    if (zh) {
        swift_strbuf_adds(b, human);
        swift_strbuf_adds(b, " 有什么用？");
    } else {
        swift_strbuf_adds(b, human);
        swift_strbuf_adds(b, " API useful for? ");
    }
    swift_strbuf_adds(b, desc);
    swift_strbuf_adds(b, zh ? " 输入参数：" : " Parameters: ");
    if (json_is_string(params))
        swift_strbuf_adds(b, json_string_value(params));
    else if (params && !json_is_null(params))
        sb_json(b, params, 0);
    else
        swift_strbuf_adds(b, "{}");
    swift_strbuf_adds(
        b, zh ? " 此工具的输入应为JSON对象。" : " Format the arguments as a JSON object.");
}

char *swift_agent_format_tools(int agent, json_t *tools, char *err, size_t errlen)
{
    struct swift_strbuf b = {0};
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t)
    {
        if (!json_is_string(json_object_get(unwrap(t), "name")) &&
            !json_is_string(json_object_get(unwrap(t), "name_for_model"))) {
            free(b.s);
            errf(err, errlen, "tool %zu has no \"name\"", i + 1);
            return NULL;
        }
    }
    int zh = agent == SWIFT_AGENT_REACT_ZH;
    switch (agent) {
    case SWIFT_AGENT_LLAMA3:
        swift_strbuf_adds(&b, LLAMA3_HEAD);
        json_array_foreach(tools, i, t)
        {
            sb_json(&b, t, 4);
            swift_strbuf_adds(&b, "\n\n");
        }
        break;
    case SWIFT_AGENT_REACT_EN:
    case SWIFT_AGENT_REACT_ZH:
        swift_strbuf_adds(&b, zh ? REACT_ZH_HEAD : REACT_EN_HEAD);
        json_array_foreach(tools, i, t)
        {
            if (i)
                swift_strbuf_adds(&b, "\n\n");
            react_tool(&b, unwrap(t), zh);
        }
        swift_strbuf_adds(&b, zh ? REACT_ZH_FMT : REACT_EN_FMT);
        json_array_foreach(tools, i, t)
        {
            if (i)
                swift_strbuf_adds(&b, ",");
            swift_strbuf_adds(&b, str_or(unwrap(t), "name_for_model", "name", ""));
        }
        swift_strbuf_adds(&b, zh ? REACT_ZH_TAIL : REACT_EN_TAIL);
        break;
    case SWIFT_AGENT_GLM4:
        swift_strbuf_adds(&b, GLM4_HEAD);
        json_array_foreach(tools, i, t)
        {
            if (i)
                swift_strbuf_adds(&b, "\n");
            swift_strbuf_adds(&b, "## ");
            swift_strbuf_adds(&b, str_or(unwrap(t), "name_for_model", "name", ""));
            swift_strbuf_adds(&b, "\n\n");
            sb_json(&b, unwrap(t), 4);
            swift_strbuf_adds(&b, "\n在调用上述函数时，请使用 Json 格式表示调用的参数。");
        }
        break;
    default:
        swift_strbuf_adds(&b, HERMES_HEAD);
        json_array_foreach(tools, i, t)
        {
            swift_strbuf_adds(&b, "\n");
            sb_json(&b, t, 0);
        }
        swift_strbuf_adds(&b, HERMES_TAIL);
        break;
    }
    return swift_strbuf_detach(&b);
}

json_t *swift_agent_call_args(json_t *call)
{
    json_t *f = unwrap(call);
    json_t *a = json_object_get(f, "arguments");
    if (!a)
        a = json_object_get(f, "parameters");
    if (!a || json_is_null(a))
        return json_object();
    if (json_is_string(a))
        return json_loadb(json_string_value(a), json_string_length(a), JSON_DECODE_ANY, NULL);
    return json_incref(a);
}

char *swift_agent_format_calls(int agent, const char *content, size_t clen, json_t *calls,
                               char *err, size_t errlen)
{
    struct swift_strbuf b = {0};
    swift_strbuf_add(&b, content ? content : "", content ? clen : 0);
    int react = agent == SWIFT_AGENT_REACT_EN || agent == SWIFT_AGENT_REACT_ZH;
    if (react && b.len && b.s[b.len - 1] != '\n')
        swift_strbuf_adds(&b, "\n");
    size_t i;
    json_t *tc;
    json_array_foreach(calls, i, tc)
    {
        json_t *name = json_object_get(unwrap(tc), "name");
        json_t *args = swift_agent_call_args(tc);
        if (!json_is_string(name) || !args) {
            json_decref(args);
            free(b.s);
            errf(err,
                 errlen,
                 "tool call %zu: %s",
                 i + 1,
                 !json_is_string(name) ? "no \"name\" string" : "arguments are not JSON");
            return NULL;
        }
        const char *n = json_string_value(name);
        if (agent == SWIFT_AGENT_LLAMA3) {
            if (b.len)
                swift_strbuf_adds(&b, "\n");
            swift_strbuf_adds(&b, "{\"name\": \"");
            swift_strbuf_adds(&b, n);
            swift_strbuf_adds(&b, "\", \"parameters\": ");
            sb_json(&b, args, 0);
            swift_strbuf_adds(&b, "}");
        } else if (react) {
            swift_strbuf_adds(&b, "Action: ");
            swift_strbuf_adds(&b, n);
            swift_strbuf_adds(&b, "\nAction Input: ");
            sb_json(&b, args, 0);
            swift_strbuf_adds(&b, "\n");
        } else if (agent == SWIFT_AGENT_GLM4) {
            if (b.len)
                swift_strbuf_adds(&b, i ? "<|assistant|>" : "\n");
            swift_strbuf_adds(&b, n);
            swift_strbuf_adds(&b, "\n");
            sb_json(&b, args, 0);
        } else {
            if (b.len)
                swift_strbuf_adds(&b, "\n");
            swift_strbuf_adds(&b, "<tool_call>\n{\"name\": \"");
            swift_strbuf_adds(&b, n);
            swift_strbuf_adds(&b, "\", \"arguments\": ");
            sb_json(&b, args, 0);
            swift_strbuf_adds(&b, "}\n</tool_call>");
        }
        json_decref(args);
    }
    if (react)
        swift_strbuf_adds(&b, "Observation:");
    return swift_strbuf_detach(&b);
}

char *swift_agent_format_response(int agent, const char *content, size_t len)
{
    struct swift_strbuf b = {0};
    if (agent == SWIFT_AGENT_HERMES)
        swift_strbuf_adds(&b, "<tool_response>\n");
    swift_strbuf_add(&b, content, len);
    if (agent == SWIFT_AGENT_HERMES)
        swift_strbuf_adds(&b, "\n</tool_response>");
    return swift_strbuf_detach(&b);
}

/* ---- parsing ---- */
struct parse {
    const char *text;
    size_t len;
    uint64_t rng;
    json_t *calls;
    struct swift_strbuf rest; /* the content: the text outside the calls */
    char *why;
    size_t whylen;
    int ncall; /* call-like spans seen, good or not (numbering for why) */
    int noted;
};

static void bad(struct parse *p, size_t at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void bad(struct parse *p, size_t at, const char *fmt, ...)
{
    if (p->noted || !p->why || !p->whylen)
        return;
    p->noted = 1;
    int k = snprintf(p->why, p->whylen, "call %d at byte %zu: ", p->ncall, at);
    if (k < 0 || (size_t)k >= p->whylen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->why + k, p->whylen - (size_t)k, fmt, ap);
    va_end(ap);
}

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* One OpenAI tool call; args is a JSON object (or a string already holding JSON text). Returns 0,
 * or -1 (noted as malformed at byte at) when the name is not valid UTF-8. */
static int add_call(struct parse *p, const char *name, size_t nlen, json_t *args, size_t at)
{
    for (size_t i = 0; i < nlen; i++)
        if ((unsigned char)name[i] < 0x20) {
            bad(p, at, "the name has a control character");
            return -1;
        }
    json_t *js = nlen ? json_stringn(name, nlen) : NULL;
    if (!js) {
        bad(p, at, nlen ? "the name is not valid UTF-8" : "the name is empty");
        return -1;
    }
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    char id[5 + 24 + 1] = "call_";
    for (int i = 0; i < 24; i++)
        id[5 + i] = abc[splitmix(&p->rng) % (sizeof(abc) - 1)];
    id[29] = 0;
    json_t *dec = json_is_string(args)
                      ? json_loadb(json_string_value(args), json_string_length(args), 0, NULL)
                      : NULL;
    if (json_is_object(dec))
        args = dec;
    char *a = json_is_string(args) ? NULL
              : args ? json_dumps(args, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER)
                     : NULL;
    json_t *fn = json_pack("{s:o,s:s}",
                           "name",
                           js,
                           "arguments",
                           json_is_string(args) ? json_string_value(args)
                           : a                  ? a
                                                : "{}");
    free(a);
    json_decref(dec);
    if (!p->calls)
        p->calls = json_array();
    json_array_append_new(p->calls,
                          json_pack("{s:s,s:s,s:o}", "id", id, "type", "function", "function", fn));
    return 0;
}

/* A {"name", "arguments"|"parameters"} object at text[at..at+n) becomes a call; 0, or -1 (noted
 * as malformed) */
static int object_call(struct parse *p, const char *s, size_t n, size_t at)
{
    json_error_t je;
    json_t *v = json_loadb(s, n, JSON_DECODE_ANY, &je);
    if (!v) {
        bad(p, at, "not JSON (%s)", je.text);
        return -1;
    }
    json_t *name = json_object_get(v, "name");
    json_t *args = json_object_get(v, "arguments");
    if (!args)
        args = json_object_get(v, "parameters");
    int rc = -1;
    if (!json_is_object(v))
        bad(p, at, "not a JSON object");
    else if (!json_is_string(name))
        bad(p, at, "no \"name\" string");
    else if (args && !json_is_null(args) && !json_is_object(args) && !json_is_string(args))
        bad(p, at, "arguments are not a JSON object");
    else
        rc = add_call(p,
                      json_string_value(name),
                      json_string_length(name),
                      json_is_null(args) ? NULL : args,
                      at);
    json_decref(v);
    return rc;
}

static const char *find(const char *s, size_t n, const char *pat)
{
    size_t k = strlen(pat);
    for (size_t i = 0; i + k <= n; i++)
        if (!memcmp(s + i, pat, k))
            return s + i;
    return NULL;
}

static int space(char c)
{
    return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

static void parse_hermes(struct parse *p)
{
    static const char open[] = "<tool_call>", close[] = "</tool_call>";
    const size_t no = sizeof(open) - 1, nc = sizeof(close) - 1;
    const char *text = p->text;
    size_t len = p->len, pos = 0;
    while (pos < len) {
        const char *b = find(text + pos, len - pos, open);
        if (!b) {
            swift_strbuf_add(&p->rest, text + pos, len - pos);
            break;
        }
        size_t bo = (size_t)(b - text);
        swift_strbuf_add(&p->rest, text + pos, bo - pos);
        const char *body = b + no;
        size_t left = len - (bo + no);
        const char *e = find(body, left, close);
        size_t blen = e ? (size_t)(e - body) : left;
        size_t end = e ? (size_t)(e - text) + nc : len;
        p->ncall++;
        if (object_call(p, body, blen, bo) < 0)
            swift_strbuf_add(&p->rest, text + bo, end - bo);
        pos = end;
    }
}

/* Llama 3.1: the completion is one JSON call (or several, one per line or split by ';'),
 * optionally after <|python_tag|>; text that does not start with '{' is a plain answer. */
static void parse_llama3(struct parse *p)
{
    static const char tag[] = "<|python_tag|>";
    const char *t = p->text;
    size_t n = p->len, i = 0;
    while (i < n && space(t[i]))
        i++;
    size_t start = i;
    if (n - i >= sizeof(tag) - 1 && !memcmp(t + i, tag, sizeof(tag) - 1))
        i += sizeof(tag) - 1;
    while (i < n && space(t[i]))
        i++;
    if (i >= n || t[i] != '{') { /* content first: the calls start on a later line */
        const char *nl = t + i;
        i = n;
        while ((nl = find(nl, n - (size_t)(nl - t), "\n")) != NULL) {
            size_t j = (size_t)(++nl - t);
            while (j < n && space(t[j]))
                j++;
            if (n - j >= sizeof(tag) - 1 && !memcmp(t + j, tag, sizeof(tag) - 1))
                j += sizeof(tag) - 1;
            while (j < n && space(t[j]))
                j++;
            if (j < n && t[j] == '{') {
                i = j;
                break;
            }
        }
        if (i >= n) {
            swift_strbuf_add(&p->rest, t, n);
            return;
        }
        swift_strbuf_add(&p->rest, t, (size_t)(nl - t));
    }
    while (i < n && t[i] == '{') {
        json_error_t je;
        p->ncall++;
        json_t *v = json_loadb(t + i, n - i, JSON_DISABLE_EOF_CHECK, &je);
        if (!v) {
            bad(p, i, "not JSON (%s)", je.text);
            break;
        }
        size_t used = (size_t)je.position;
        json_decref(v);
        if (used == 0 || object_call(p, t + i, used, i) < 0)
            break;
        i += used;
        while (i < n && (space(t[i]) || t[i] == ';'))
            i++;
        start = i;
    }
    swift_strbuf_add(&p->rest, t + start, n - start);
}

/* The end of a line starting at s (exclusive). */
static size_t line_end(const char *t, size_t n, size_t s)
{
    while (s < n && t[s] != '\n')
        s++;
    return s;
}

/* ReAct: "Action: NAME" then "Action Input: JSON" up to "Observation:", the next "Action:" or
 * the end. */
static void parse_react(struct parse *p)
{
    static const char ka[] = "Action:", ki[] = "Action Input:", ko[] = "Observation:";
    const char *t = p->text;
    size_t n = p->len, pos = 0;
    while (pos < n) {
        const char *a = find(t + pos, n - pos, ka);
        if (!a) {
            swift_strbuf_add(&p->rest, t + pos, n - pos);
            break;
        }
        size_t ao = (size_t)(a - t);
        swift_strbuf_add(&p->rest, t + pos, ao - pos);
        p->ncall++;
        size_t ns = ao + sizeof(ka) - 1, ne = line_end(t, n, ns);
        while (ns < ne && space(t[ns]))
            ns++;
        size_t nend = ne;
        while (nend > ns && space(t[nend - 1]))
            nend--;
        const char *in = find(t + ne, n - ne, ki);
        const char *na = find(t + ne, n - ne, ka);
        if (!in || (na && na < in) || nend == ns) {
            bad(p,
                ao,
                nend == ns ? "an Action without a name" : "an Action without an Action Input");
            swift_strbuf_add(&p->rest, t + ao, ne - ao);
            pos = ne;
            continue;
        }
        size_t is = (size_t)(in - t) + sizeof(ki) - 1;
        const char *o = find(t + is, n - is, ko);
        const char *nx = find(t + is, n - is, ka);
        size_t ie = o ? (size_t)(o - t) : n;
        if (nx && (size_t)(nx - t) < ie)
            ie = (size_t)(nx - t);
        size_t end = o && (size_t)(o - t) == ie ? ie + sizeof(ko) - 1 : ie;
        json_error_t je;
        json_t *args = json_loadb(t + is, ie - is, 0, &je);
        if (!json_is_object(args)) {
            bad(p, ao, "Action Input is not a JSON object");
            swift_strbuf_add(&p->rest, t + ao, end - ao);
        } else if (add_call(p, t + ns, nend - ns, args, ao) < 0)
            swift_strbuf_add(&p->rest, t + ao, end - ao);
        json_decref(args);
        pos = end;
    }
}

/* In t[a..e): the first line that starts (after blanks) with '{' and follows a non-blank line
 * without '{' (the name); 1 with the name line's start *ns and the JSON's start *js. */
static int glm4_find(const char *t, size_t a, size_t e, size_t *ns, size_t *js)
{
    size_t ps = a, pe = a; /* the previous non-blank line */
    int have = 0;
    for (size_t ls = a; ls < e;) {
        size_t le = line_end(t, e, ls), j = ls;
        while (j < le && space(t[j]))
            j++;
        if (j < le && t[j] == '{' && have && !find(t + ps, pe - ps, "{")) {
            *ns = ps;
            *js = j;
            return 1;
        }
        if (j < le)
            ps = ls, pe = le, have = 1;
        ls = le + 1;
    }
    return 0;
}

/* GLM-4: pieces split by <|assistant|>, each "NAME\n{JSON}" (an <|observation|> dropped). */
static void parse_glm4(struct parse *p)
{
    static const char sep[] = "<|assistant|>", obs[] = "<|observation|>";
    const char *t = p->text;
    size_t n = p->len, pos = 0;
    for (;;) {
        const char *s = find(t + pos, n - pos, sep);
        size_t pe = s ? (size_t)(s - t) : n;
        const char *ob = find(t + pos, pe - pos, obs);
        size_t ce = ob ? (size_t)(ob - t) : pe, ns, js;
        if (glm4_find(t, pos, ce, &ns, &js)) {
            p->ncall++;
            size_t a = ns, ne = line_end(t, ce, ns);
            while (a < ne && space(t[a]))
                a++;
            while (ne > a && space(t[ne - 1]))
                ne--;
            json_t *args = json_loadb(t + js, ce - js, 0, NULL);
            if (!json_is_object(args)) {
                bad(p, ns, "arguments are not a JSON object");
                swift_strbuf_add(&p->rest, t + pos, pe - pos);
            } else if (add_call(p, t + a, ne - a, args, ns) < 0) {
                swift_strbuf_add(&p->rest, t + pos, pe - pos);
            } else {
                swift_strbuf_add(&p->rest, t + pos, ns - pos);
            }
            json_decref(args);
        } else
            swift_strbuf_add(&p->rest, t + pos, pe - pos);
        if (!s)
            break;
        pos = pe + sizeof(sep) - 1;
    }
}

static char *trimmed(const char *s, size_t n)
{
    while (n && space(*s))
        s++, n--;
    while (n && space(s[n - 1]))
        n--;
    if (!n)
        return NULL;
    char *r = swift_xmalloc(n + 1);
    memcpy(r, s, n);
    r[n] = 0;
    return r;
}

int swift_agent_parse(int agent, const char *text, size_t len, uint64_t seed, char **content,
                      json_t **calls, char *why, size_t whylen)
{
    struct parse p = {text, len, seed, NULL, {0}, why, whylen, 0, 0};
    if (why && whylen)
        why[0] = 0;
    switch (agent) {
    case SWIFT_AGENT_LLAMA3:
        parse_llama3(&p);
        break;
    case SWIFT_AGENT_REACT_EN:
    case SWIFT_AGENT_REACT_ZH:
        parse_react(&p);
        break;
    case SWIFT_AGENT_GLM4:
        parse_glm4(&p);
        break;
    default:
        parse_hermes(&p);
        break;
    }
    if (p.calls) {
        *content = trimmed(p.rest.s ? p.rest.s : "", p.rest.len);
    } else if (len) {
        *content = swift_xmalloc(len + 1);
        memcpy(*content, text, len);
        (*content)[len] = 0;
    } else {
        *content = NULL;
    }
    free(p.rest.s);
    *calls = p.calls;
    return p.calls ? (int)json_array_size(p.calls) : 0;
}
