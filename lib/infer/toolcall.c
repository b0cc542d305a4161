/* toolcall — tool calls in generated text (see toolcall.h). */
#include "lib/infer/toolcall.h"

#include "lib/core/alloc.h"

#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

static const char *find(const char *s, size_t n, const char *pat)
{
    size_t k = strlen(pat);
    for (size_t i = 0; i + k <= n; i++)
        if (!memcmp(s + i, pat, k))
            return s + i;
    return NULL;
}

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static json_t *call_json(json_t *obj, uint64_t *rng)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    char id[5 + 24 + 1] = "call_";
    for (int i = 0; i < 24; i++)
        id[5 + i] = abc[splitmix(rng) % (sizeof(abc) - 1)];
    id[29] = 0;
    json_t *args = json_object_get(obj, "arguments");
    if (!args)
        args = json_object_get(obj, "parameters");
    char *a = json_is_string(args) ? NULL
              : args ? json_dumps(args, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER)
                     : NULL;
    json_t *fn = json_pack("{s:O,s:s}",
                           "name",
                           json_object_get(obj, "name"),
                           "arguments",
                           json_is_string(args) ? json_string_value(args)
                           : a                  ? a
                                                : "{}");
    free(a);
    return json_pack("{s:s,s:s,s:o}", "id", id, "type", "function", "function", fn);
}

/* The JSON of one block's body, when it is a call. */
static json_t *block_call(const char *s, size_t n)
{
    json_error_t je;
    json_t *v = json_loadb(s, n, JSON_DECODE_ANY, &je);
    if (!json_is_object(v) || !json_is_string(json_object_get(v, "name"))) {
        json_decref(v);
        return NULL;
    }
    return v;
}

static void append(char **out, size_t *len, size_t *cap, const char *s, size_t n)
{
    if (*len + n + 1 > *cap) {
        *cap = (*len + n + 1) * 2;
        *out = swift_xrealloc(*out, *cap);
    }
    memcpy(*out + *len, s, n);
    *len += n;
    (*out)[*len] = 0;
}

static char *trimmed(const char *s, size_t n)
{
    while (n && (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r'))
        s++, n--;
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\n' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        n--;
    if (!n)
        return NULL;
    char *r = swift_xmalloc(n + 1);
    memcpy(r, s, n);
    r[n] = 0;
    return r;
}

int swift_toolcall_hermes(const char *text, size_t len, uint64_t seed, char **content,
                          json_t **calls)
{
    static const char open[] = "<tool_call>", close[] = "</tool_call>";
    const size_t no = sizeof(open) - 1, nc = sizeof(close) - 1;
    char *rest = NULL;
    size_t rlen = 0, rcap = 0;
    json_t *arr = NULL;
    uint64_t rng = seed;
    size_t pos = 0;
    while (pos < len) {
        const char *b = find(text + pos, len - pos, open);
        if (!b) {
            append(&rest, &rlen, &rcap, text + pos, len - pos);
            break;
        }
        size_t bo = (size_t)(b - text);
        append(&rest, &rlen, &rcap, text + pos, bo - pos);
        const char *body = b + no;
        size_t left = len - (bo + no);
        const char *e = find(body, left, close);
        size_t blen = e ? (size_t)(e - body) : left;
        size_t end = e ? (size_t)(e - text) + nc : len;
        json_t *v = block_call(body, blen);
        if (v) {
            if (!arr)
                arr = json_array();
            json_array_append_new(arr, call_json(v, &rng));
            json_decref(v);
        } else {
            append(&rest, &rlen, &rcap, text + bo, end - bo);
        }
        pos = end;
    }
    if (arr) {
        *content = trimmed(rest ? rest : "", rlen);
    } else if (len) {
        *content = swift_xmalloc(len + 1);
        memcpy(*content, text, len);
        (*content)[len] = 0;
    } else {
        *content = NULL;
    }
    free(rest);
    *calls = arr;
    return arr ? (int)json_array_size(arr) : 0;
}

int swift_toolcall_parse(enum swift_toolcall_format f, const char *text, size_t len, uint64_t seed,
                         char **content, json_t **calls)
{
    switch (f) {
    case SWIFT_TOOLCALL_HERMES:
        break;
    }
    return swift_toolcall_hermes(text, len, seed, content, calls);
}
