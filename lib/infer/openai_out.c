/* openai — choices as they are generated, and the response bodies (see openai.h). */
#include "lib/infer/openai.h"
#include "lib/preprocess/agent.h"

#include "lib/core/alloc.h"
#include "lib/core/fileio.h"
#include "lib/core/strbuf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

void swift_oai_choice_release(struct swift_oai_choice *c)
{
    free(c->text);
    json_decref(c->lp);
    memset(c, 0, sizeof(*c));
}

long swift_oai_stop_find(const char *text, size_t len, size_t from, const char *const *stop,
                         int nstop)
{
    long best = -1;
    for (int k = 0; k < nstop; k++) {
        size_t sl = strlen(stop[k]);
        if (!sl || sl > len)
            continue;
        /* an occurrence that ends after `from`: it starts at or after from - sl + 1 */
        size_t i = from >= sl ? from - sl + 1 : 0;
        for (; i + sl <= len; i++)
            if (!memcmp(text + i, stop[k], sl)) {
                if (best < 0 || (long)i < best)
                    best = (long)i;
                break;
            }
    }
    return best;
}

/* A token's text as JSON wants it: its bytes, invalid UTF-8 replaced (a byte-level piece of a
 * character), as vLLM's detokenizer shows it. */
static json_t *token_string(const struct swift_tokenizer *tok, int32_t id, int as_id)
{
    if (as_id) {
        char b[32];
        snprintf(b, sizeof(b), "token_id:%d", (int)id);
        return json_string(b);
    }
    char *s = NULL;
    size_t n = 0;
    uint32_t u = (uint32_t)id;
    if (swift_tokenizer_decode(tok, &u, 1, 0, &s, &n) < 0)
        return json_string("");
    json_t *j = json_stringn(s, n);
    free(s);
    return j ? j : json_string("");
}

static json_t *token_bytes(const struct swift_tokenizer *tok, int32_t id)
{
    size_t n = 0;
    const char *b = swift_tokenizer_token_bytes(tok, (uint32_t)id, &n);
    json_t *a = json_array();
    for (size_t i = 0; b && i < n; i++)
        json_array_append_new(a, json_integer((unsigned char)b[i]));
    return a;
}

static json_t *logprob_json(double lp)
{
    return json_real(isfinite(lp) ? lp : -9999.0);
}

/* One entry of the chat shape ({"token","logprob","bytes","top_logprobs"}); the completions
 * response reshapes these. */
static json_t *lp_entry(const struct swift_tokenizer *tok, const struct swift_engine_event *ev,
                        size_t offset, int as_id)
{
    json_t *top = json_array();
    for (int k = 0; k < ev->ntop; k++)
        json_array_append_new(top,
                              json_pack("{s:o,s:o,s:o}",
                                        "token",
                                        token_string(tok, ev->top_ids[k], as_id),
                                        "logprob",
                                        logprob_json(ev->top_logprobs[k]),
                                        "bytes",
                                        token_bytes(tok, ev->top_ids[k])));
    return json_pack("{s:o,s:o,s:o,s:o,s:I}",
                     "token",
                     token_string(tok, ev->token, as_id),
                     "logprob",
                     logprob_json(ev->logprob),
                     "bytes",
                     token_bytes(tok, ev->token),
                     "top_logprobs",
                     top,
                     "offset",
                     (json_int_t)offset);
}

int swift_oai_choice_add(struct swift_oai_choice *c, const struct swift_oai_request *rq,
                         const struct swift_tokenizer *tok, const struct swift_engine_event *ev)
{
    if (ev->finish == SWIFT_FINISH_ABORT || ev->token < 0) {
        c->finish = SWIFT_FINISH_ABORT;
        return 0;
    }
    c->completion_tokens = ev->completion_tokens;
    c->cached_tokens = ev->cached_tokens;
    size_t before = c->len;
    /* the end of a choice by an eos or stop id is not part of its text (vLLM skips special
       tokens too) */
    int ends = ev->finish == SWIFT_FINISH_STOP;
    if (!ends && !swift_tokenizer_is_special(tok, (uint32_t)ev->token)) {
        size_t n = 0;
        const char *b = swift_tokenizer_token_bytes(tok, (uint32_t)ev->token, &n);
        if (b)
            swift_str_append(&c->text, &c->len, &c->cap, b, n);
    }
    if (rq->logprobs) {
        if (!c->lp)
            c->lp = json_array();
        json_array_append_new(c->lp, lp_entry(tok, ev, before, rq->token_ids));
    }
    c->finish = ev->finish;
    if (rq->nstop && c->len > before) {
        long at = swift_oai_stop_find(c->text, c->len, before, rq->stop, rq->nstop);
        if (at >= 0) {
            c->len = (size_t)at;
            c->text[at] = 0;
            c->finish = SWIFT_FINISH_STOP;
            return 1;
        }
    }
    if (!c->text)
        swift_str_append(&c->text, &c->len, &c->cap, "", 0);
    return 0;
}

size_t swift_oai_choice_delta(struct swift_oai_choice *c, const struct swift_oai_request *rq,
                              const char **out)
{
    size_t end = c->len;
    if (c->finish == SWIFT_FINISH_NONE) {
        /* hold back a tail that may still become a stop string */
        for (int k = 0; k < rq->nstop; k++) {
            size_t sl = strlen(rq->stop[k]);
            for (size_t m = sl - 1; m > 0; m--)
                if (m <= c->len && c->len - m >= c->emitted &&
                    !memcmp(c->text + c->len - m, rq->stop[k], m)) {
                    if (c->len - m < end)
                        end = c->len - m;
                    break;
                }
        }
        /* and an incomplete UTF-8 character */
        size_t k = 0;
        while (k < 4 && k < end && ((unsigned char)c->text[end - 1 - k] & 0xC0) == 0x80)
            k++;
        if (k < end) {
            unsigned char lead = (unsigned char)c->text[end - 1 - k];
            size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
            if (need > k + 1)
                end -= k + 1;
        }
    }
    if (end < c->emitted)
        end = c->emitted;
    *out = c->text ? c->text + c->emitted : "";
    size_t n = end - c->emitted;
    c->emitted = end;
    return n;
}

uint64_t swift_oai_call_seed(uint64_t seed, int i)
{
    uint64_t z = (uint64_t)i * 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return seed ^ z ^ (z >> 31);
}

const char *swift_oai_finish_name(enum swift_finish f, int tool_calls)
{
    switch (f) {
    case SWIFT_FINISH_STOP:
        return tool_calls ? "tool_calls" : "stop";
    case SWIFT_FINISH_LENGTH:
        return tool_calls ? "tool_calls" : "length";
    case SWIFT_FINISH_ABORT:
        return "abort";
    default:
        return NULL;
    }
}

json_t *swift_oai_usage(const struct swift_oai_choice *ch, int n, int prompt_tokens)
{
    long c = 0;
    int cached = 0;
    for (int i = 0; i < n; i++) {
        c += ch[i].completion_tokens;
        if (ch[i].cached_tokens > cached)
            cached = ch[i].cached_tokens;
    }
    return json_pack("{s:i,s:I,s:I,s:{s:i}}",
                     "prompt_tokens",
                     prompt_tokens,
                     "completion_tokens",
                     (json_int_t)c,
                     "total_tokens",
                     (json_int_t)(prompt_tokens + c),
                     "prompt_tokens_details",
                     "cached_tokens",
                     cached);
}

/* The length of the UTF-8 character at s, or minus the length of the maximal ill-formed subpart
 * there (Unicode's "substitution of maximal subparts": a lead byte and the continuation bytes
 * that were still possible after it; at least one byte). */
static int utf8_step(const unsigned char *s, size_t n)
{
    unsigned b0 = s[0], lo = 0x80, hi = 0xBF;
    int len;
    if (b0 < 0x80)
        return b0 ? 1 : -1;
    if (b0 >= 0xC2 && b0 <= 0xDF)
        len = 2;
    else if (b0 >= 0xE0 && b0 <= 0xEF) {
        len = 3;
        lo = b0 == 0xE0 ? 0xA0 : 0x80;
        hi = b0 == 0xED ? 0x9F : 0xBF;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        len = 4;
        lo = b0 == 0xF0 ? 0x90 : 0x80;
        hi = b0 == 0xF4 ? 0x8F : 0xBF;
    } else
        return -1;
    for (int k = 1; k < len; k++) {
        if ((size_t)k >= n)
            return -k;
        unsigned b = s[k];
        if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF))
            return -k;
    }
    return len;
}

/* Generated bytes as a JSON string: each maximal ill-formed subsequence becomes one U+FFFD, as
 * the tokenizer's decode (Rust's from_utf8_lossy, Python's errors="replace") does, so the text
 * equals a decode of the same ids (byte-level tokens may split characters, and a choice may end
 * inside one); in such a text a NUL byte becomes U+FFFD too. */
static json_t *text_json(const char *s, size_t n)
{
    json_t *j = json_stringn(s ? s : "", s ? n : 0);
    if (j)
        return j;
    char *buf = swift_xmalloc(3 * n + 1);
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        int k = utf8_step((const unsigned char *)s + i, n - i);
        if (k > 0) {
            memcpy(buf + o, s + i, (size_t)k);
            o += (size_t)k;
            i += (size_t)k;
        } else {
            memcpy(buf + o, "\xef\xbf\xbd", 3);
            o += 3;
            i += (size_t)-k;
        }
    }
    j = json_stringn(buf, o);
    free(buf);
    return j ? j : json_string("");
}

/* Chat logprobs: {"content": [...]} without the offsets. */
static json_t *chat_logprobs(json_t *lp)
{
    json_t *content = json_array();
    size_t i;
    json_t *e;
    json_array_foreach(lp, i, e)
    {
        json_t *c = json_deep_copy(e);
        json_object_del(c, "offset");
        json_array_append_new(content, c);
    }
    return json_pack("{s:o}", "content", content);
}

json_t *swift_oai_chat_response(const struct swift_oai_request *rq, const char *id, long created,
                                const char *model, struct swift_oai_choice *ch, int n,
                                int prompt_tokens, uint64_t call_seed)
{
    json_t *choices = json_array();
    for (int i = 0; i < n; i++) {
        struct swift_oai_choice *c = &ch[i];
        json_t *msg = json_pack("{s:s}", "role", "assistant");
        int ncalls = 0;
        if (rq->tools_on && c->len) {
            char *content;
            json_t *calls;
            ncalls = swift_agent_parse(rq->conv.agent,
                                       c->text,
                                       c->len,
                                       swift_oai_call_seed(call_seed, i),
                                       &content,
                                       &calls,
                                       NULL,
                                       0);
            json_object_set_new(
                msg, "content", content ? text_json(content, strlen(content)) : json_null());
            if (calls)
                json_object_set_new(msg, "tool_calls", calls);
            free(content);
        } else {
            json_object_set_new(msg, "content", text_json(c->text, c->len));
        }
        const char *fin = swift_oai_finish_name(c->finish, ncalls > 0);
        json_array_append_new(choices,
                              json_pack("{s:i,s:o,s:o,s:o}",
                                        "index",
                                        i,
                                        "message",
                                        msg,
                                        "logprobs",
                                        rq->logprobs && c->lp ? chat_logprobs(c->lp) : json_null(),
                                        "finish_reason",
                                        fin ? json_string(fin) : json_null()));
    }
    return json_pack("{s:s,s:s,s:I,s:s,s:o,s:o}",
                     "id",
                     id,
                     "object",
                     "chat.completion",
                     "created",
                     (json_int_t)created,
                     "model",
                     model,
                     "choices",
                     choices,
                     "usage",
                     swift_oai_usage(ch, n, prompt_tokens));
}

/* Completions logprobs: {"tokens", "token_logprobs", "top_logprobs": [{token: logprob}],
 * "text_offset"} (OpenAI's legacy shape). */
static json_t *completion_logprobs(json_t *lp)
{
    json_t *toks = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    size_t i;
    json_t *e;
    json_array_foreach(lp, i, e)
    {
        json_array_append(toks, json_object_get(e, "token"));
        json_array_append(lps, json_object_get(e, "logprob"));
        json_array_append(offs, json_object_get(e, "offset"));
        json_t *top = json_object();
        size_t k;
        json_t *t;
        json_array_foreach(json_object_get(e, "top_logprobs"), k, t)
        {
            const char *s = json_string_value(json_object_get(t, "token"));
            if (!json_object_get(top, s ? s : ""))
                json_object_set(top, s ? s : "", json_object_get(t, "logprob"));
        }
        json_array_append_new(tops, top);
    }
    return json_pack("{s:o,s:o,s:o,s:o}",
                     "tokens",
                     toks,
                     "token_logprobs",
                     lps,
                     "top_logprobs",
                     tops,
                     "text_offset",
                     offs);
}

json_t *swift_oai_completion_response(const struct swift_oai_request *rq, const char *id,
                                      long created, const char *model, struct swift_oai_choice *ch,
                                      int n, int prompt_tokens)
{
    json_t *choices = json_array();
    for (int i = 0; i < n; i++) {
        const char *fin = swift_oai_finish_name(ch[i].finish, 0);
        json_array_append_new(
            choices,
            json_pack("{s:i,s:o,s:o,s:o}",
                      "index",
                      i,
                      "text",
                      text_json(ch[i].text, ch[i].len),
                      "logprobs",
                      rq->logprobs && ch[i].lp ? completion_logprobs(ch[i].lp) : json_null(),
                      "finish_reason",
                      fin ? json_string(fin) : json_null()));
    }
    return json_pack("{s:s,s:s,s:I,s:s,s:o,s:o}",
                     "id",
                     id,
                     "object",
                     "text_completion",
                     "created",
                     (json_int_t)created,
                     "model",
                     model,
                     "choices",
                     choices,
                     "usage",
                     swift_oai_usage(ch, n, prompt_tokens));
}

/* ---- streaming ---- */

json_t *swift_oai_chunk(const struct swift_oai_request *rq, const char *id, long created,
                        const char *model, int index, int first, const char *text, size_t len,
                        const char *finish)
{
    json_t *choice;
    int chat = rq->kind == SWIFT_OAI_CHAT;
    if (chat) {
        json_t *delta = json_object();
        if (first)
            json_object_set_new(delta, "role", json_string("assistant"));
        if (len || first)
            json_object_set_new(delta, "content", text_json(text, len));
        choice = json_pack("{s:i,s:o,s:n,s:o}",
                           "index",
                           index,
                           "delta",
                           delta,
                           "logprobs",
                           "finish_reason",
                           finish ? json_string(finish) : json_null());
    } else {
        choice = json_pack("{s:i,s:o,s:n,s:o}",
                           "index",
                           index,
                           "text",
                           text_json(text, len),
                           "logprobs",
                           "finish_reason",
                           finish ? json_string(finish) : json_null());
    }
    json_t *c = json_pack("{s:s,s:s,s:I,s:s,s:[o]}",
                          "id",
                          id,
                          "object",
                          chat ? "chat.completion.chunk" : "text_completion",
                          "created",
                          (json_int_t)created,
                          "model",
                          model,
                          "choices",
                          choice);
    if (rq->include_usage)
        json_object_set_new(c, "usage", json_null());
    return c;
}

json_t *swift_oai_choice_lp_delta(struct swift_oai_choice *c, const struct swift_oai_request *rq)
{
    size_t n = json_array_size(c->lp);
    if (!rq->logprobs || c->lp_emitted >= n)
        return NULL;
    json_t *part = json_array();
    for (size_t i = c->lp_emitted; i < n; i++)
        json_array_append(part, json_array_get(c->lp, i));
    c->lp_emitted = n;
    json_t *lp = rq->kind == SWIFT_OAI_CHAT ? chat_logprobs(part) : completion_logprobs(part);
    json_decref(part);
    return lp;
}

json_t *swift_oai_usage_chunk(const struct swift_oai_request *rq, const char *id, long created,
                              const char *model, const struct swift_oai_choice *ch, int n,
                              int prompt_tokens)
{
    return json_pack("{s:s,s:s,s:I,s:s,s:[],s:o}",
                     "id",
                     id,
                     "object",
                     rq->kind == SWIFT_OAI_CHAT ? "chat.completion.chunk" : "text_completion",
                     "created",
                     (json_int_t)created,
                     "model",
                     model,
                     "choices",
                     "usage",
                     swift_oai_usage(ch, n, prompt_tokens));
}

char *swift_oai_sse(const json_t *chunk, size_t *len)
{
    char *j = json_dumps(chunk, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);
    char *s = swift_asprintf("data: %s\n\n", j ? j : "{}");
    free(j);
    *len = strlen(s);
    return s;
}

/* ---- the Batch API ---- */

json_t *swift_oai_batch_line(const char *id, const char *custom_id, int status,
                             const char *request_id, json_t *body)
{
    return json_pack("{s:s,s:o,s:{s:i,s:s,s:o},s:n}",
                     "id",
                     id,
                     "custom_id",
                     custom_id ? json_string(custom_id) : json_null(),
                     "response",
                     "status_code",
                     status,
                     "request_id",
                     request_id,
                     "body",
                     body ? body : json_null(),
                     "error");
}

json_t *swift_oai_batch_error_line(const char *id, const char *custom_id, const char *code,
                                   const char *message)
{
    return json_pack("{s:s,s:o,s:n,s:{s:s,s:s}}",
                     "id",
                     id,
                     "custom_id",
                     custom_id ? json_string(custom_id) : json_null(),
                     "response",
                     "error",
                     "code",
                     code,
                     "message",
                     message);
}
