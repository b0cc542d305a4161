/* dataset — data files to rows, rows to conversations (see dataset.h). */
#include "lib/preprocess/dataset.h"
#include "lib/preprocess/internal.h"

#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/core/jsonl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

#define MAX_WHOLE_FILE ((size_t)4 << 30)
#define MAX_ROW ((size_t)64 << 20)

enum fmt { F_JSONL, F_JSON, F_CSV, F_TEXT };

struct swift_dataset {
    char *path;
    enum fmt fmt;
    struct swift_jsonl jl; /* F_JSONL */
    int jl_open;
    char *data; /* F_JSON, F_CSV, F_TEXT: the whole file */
    size_t len, pos;
    long line;
    json_t *header; /* F_CSV: array of column names */
    int done;
};

void swift_row_release(struct swift_row *row)
{
    free(row->text);
    json_decref(row->obj);
    memset(row, 0, sizeof(*row));
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

static int csv_header(struct swift_dataset *ds);

int swift_dataset_open(struct swift_dataset **out, const char *path, const char *format)
{
    *out = NULL;
    struct swift_dataset *ds = swift_xcalloc(1, sizeof(*ds));
    ds->path = swift_xstrdup(path);
    enum fmt f;
    if (format && strcmp(format, "auto")) {
        if (!strcmp(format, "jsonl"))
            f = F_JSONL;
        else if (!strcmp(format, "json"))
            f = F_JSON;
        else if (!strcmp(format, "csv"))
            f = F_CSV;
        else if (!strcmp(format, "text"))
            f = F_TEXT;
        else {
            swift_dataset_close(ds);
            return swift_error("unknown dataset format '%s' (auto, jsonl, json, csv, text)",
                               format);
        }
    } else if (ends_with(path, ".csv"))
        f = F_CSV;
    else if (ends_with(path, ".txt"))
        f = F_TEXT;
    else if (ends_with(path, ".json"))
        f = F_JSON; /* checked below: not an array -> JSON Lines */
    else
        f = F_JSONL;
    if (f != F_JSONL) {
        if (swift_read_file(path, MAX_WHOLE_FILE, &ds->data, &ds->len) < 0) {
            swift_dataset_close(ds);
            return -1;
        }
        if (f == F_JSON) {
            size_t i = 0;
            while (i < ds->len && strchr(" \t\r\n", ds->data[i]))
                i++;
            if (i < ds->len && ds->data[i] != '[') {
                /* a .json file of one object per line */
                free(ds->data);
                ds->data = NULL;
                f = F_JSONL;
            }
        }
    }
    ds->fmt = f;
    ds->line = 1;
    if (f == F_JSONL) {
        if (swift_jsonl_open(&ds->jl, path, 0) < 0) {
            swift_dataset_close(ds);
            return -1;
        }
        ds->jl_open = 1;
    } else if (f == F_JSON) {
        /* position after '[' */
        while (ds->pos < ds->len && ds->data[ds->pos] != '[') {
            if (ds->data[ds->pos] == '\n')
                ds->line++;
            ds->pos++;
        }
        ds->pos++;
    } else if (f == F_CSV && csv_header(ds) < 0) {
        swift_dataset_close(ds);
        return -1;
    }
    *out = ds;
    return 0;
}

const char *swift_dataset_name(const struct swift_dataset *ds)
{
    return strcmp(ds->path, "-") ? ds->path : "<stdin>";
}

void swift_dataset_close(struct swift_dataset *ds)
{
    if (!ds)
        return;
    if (ds->jl_open)
        swift_jsonl_close(&ds->jl);
    free(ds->data);
    free(ds->path);
    json_decref(ds->header);
    free(ds);
}

/* ---- JSON arrays: find each element's extent without parsing it ---- */
static int json_array_next(struct swift_dataset *ds, struct swift_row *row)
{
    const char *d = ds->data;
    size_t n = ds->len, i = ds->pos;
    for (;;) {
        while (i < n && strchr(" \t\r\n,", d[i])) {
            if (d[i] == '\n')
                ds->line++;
            i++;
        }
        if (i >= n)
            return swift_error_at(ds->path, ds->line, "unterminated JSON array");
        if (d[i] == ']') {
            ds->done = 1;
            ds->pos = i + 1;
            return 0;
        }
        break;
    }
    size_t start = i;
    long start_line = ds->line;
    int depth = 0, in_str = 0;
    for (; i < n; i++) {
        char c = d[i];
        if (c == '\n')
            ds->line++;
        if (in_str) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_str = 0;
            continue;
        }
        if (c == '"')
            in_str = 1;
        else if (c == '{' || c == '[')
            depth++;
        else if (c == '}' || c == ']') {
            if (depth == 0)
                break; /* the array's closing bracket */
            if (--depth == 0) {
                i++;
                break;
            }
        } else if (c == ',' && depth == 0)
            break;
    }
    if (depth != 0 || in_str)
        return swift_error_at(ds->path, start_line, "unterminated JSON value in array");
    size_t len = i - start;
    if (len > MAX_ROW)
        return swift_error_at(ds->path, start_line, "row longer than %zu bytes", MAX_ROW);
    row->text = swift_xmalloc(len + 1);
    memcpy(row->text, d + start, len);
    row->text[len] = 0;
    row->len = len;
    row->obj = NULL;
    row->line = start_line;
    ds->pos = i;
    return 1;
}

/* ---- CSV (RFC 4180) ---- */
/* Parse one record into an array of strings; 0 at the end of data, -1 on error. */
static int csv_record(struct swift_dataset *ds, json_t **fields, long *line)
{
    const char *d = ds->data;
    size_t n = ds->len, i = ds->pos;
    /* skip blank lines */
    while (i < n && (d[i] == '\n' || d[i] == '\r')) {
        if (d[i] == '\n')
            ds->line++;
        i++;
    }
    if (i >= n)
        return 0;
    *line = ds->line;
    json_t *arr = json_array();
    size_t cap = 256, fl = 0;
    char *f = swift_xmalloc(cap);
    if (!arr)
        abort();
    for (;;) {
        fl = 0;
        int quoted = 0;
        if (i < n && d[i] == '"') {
            quoted = 1;
            i++;
        }
        for (;;) {
            if (i >= n) {
                if (quoted) {
                    free(f);
                    json_decref(arr);
                    return swift_error_at(ds->path, *line, "unterminated quoted CSV field");
                }
                break;
            }
            char c = d[i];
            if (quoted) {
                if (c == '"') {
                    if (i + 1 < n && d[i + 1] == '"') {
                        i += 2;
                        c = '"';
                    } else {
                        i++;
                        quoted = 0;
                        continue;
                    }
                } else {
                    if (c == '\n')
                        ds->line++;
                    i++;
                }
            } else {
                if (c == ',' || c == '\n' || c == '\r')
                    break;
                i++;
            }
            if (fl + 2 > cap) {
                cap *= 2;
                if (cap > MAX_ROW) {
                    free(f);
                    json_decref(arr);
                    return swift_error_at(
                        ds->path, *line, "CSV field longer than %zu bytes", MAX_ROW);
                }
                f = swift_xrealloc(f, cap);
            }
            f[fl++] = c;
        }
        json_t *s = json_stringn(f, fl);
        if (!s) {
            free(f);
            json_decref(arr);
            return swift_error_at(ds->path, *line, "CSV field is not valid UTF-8");
        }
        json_array_append_new(arr, s);
        if (i < n && d[i] == ',') {
            i++;
            continue;
        }
        if (i < n && d[i] == '\r')
            i++;
        if (i < n && d[i] == '\n') {
            i++;
            ds->line++;
        }
        break;
    }
    free(f);
    ds->pos = i;
    *fields = arr;
    return 1;
}

static int csv_header(struct swift_dataset *ds)
{
    long line;
    int rc = csv_record(ds, &ds->header, &line);
    if (rc == 0)
        return swift_error_at(ds->path, 1, "empty CSV file (no header)");
    return rc < 0 ? -1 : 0;
}

static int csv_next(struct swift_dataset *ds, struct swift_row *row)
{
    json_t *fields;
    long line;
    size_t pos0 = ds->pos;
    int rc = csv_record(ds, &fields, &line);
    if (rc <= 0)
        return rc;
    if (json_array_size(fields) != json_array_size(ds->header)) {
        size_t got = json_array_size(fields);
        json_decref(fields);
        return swift_error_at(ds->path,
                              line,
                              "CSV row has %zu fields, the header %zu",
                              got,
                              json_array_size(ds->header));
    }
    json_t *obj = json_object();
    for (size_t k = 0; k < json_array_size(fields); k++)
        json_object_set(
            obj, json_string_value(json_array_get(ds->header, k)), json_array_get(fields, k));
    json_decref(fields);
    memset(row, 0, sizeof(*row));
    row->obj = obj;
    row->line = line;
    row->len = ds->pos - pos0; /* bytes read, for throughput figures */
    return 1;
}

int swift_dataset_next(struct swift_dataset *ds, struct swift_row *row)
{
    memset(row, 0, sizeof(*row));
    if (ds->done)
        return 0;
    switch (ds->fmt) {
    case F_JSONL: {
        char *line;
        long n = swift_jsonl_next_line(&ds->jl, &line);
        if (n == -2)
            return 0;
        if (n < 0)
            return -1;
        row->text = swift_xmalloc((size_t)n + 1);
        memcpy(row->text, line, (size_t)n + 1);
        row->len = (size_t)n;
        row->line = ds->jl.line;
        return 1;
    }
    case F_JSON:
        return json_array_next(ds, row);
    case F_CSV:
        return csv_next(ds, row);
    case F_TEXT: {
        ds->done = 1;
        json_t *s = json_stringn(ds->data, ds->len);
        if (!s)
            return swift_error_at(ds->path, 0, "text is not valid UTF-8");
        row->obj = json_pack("{s:o}", "text", s);
        row->line = 1;
        return 1;
    }
    }
    return 0;
}

/* ---- rows to conversations ---- */
int swift_row_errf(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

int swift_row_parse(struct swift_row *row, json_t **obj, char *err, size_t errlen)
{
    if (row->obj) {
        *obj = json_incref(row->obj);
        return 0;
    }
    json_error_t je;
    json_t *v = json_loadb(row->text, row->len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!v)
        return swift_row_errf(err, errlen, "invalid JSON: %s (column %d)", je.text, je.column);
    if (!json_is_object(v)) {
        const char *k = json_is_array(v) ? "array" : json_is_string(v) ? "string" : "scalar";
        json_decref(v);
        return swift_row_errf(err, errlen, "expected an object, got %s", k);
    }
    *obj = v;
    return 0;
}

int swift_columns_parse(struct swift_columns *c, const char *spec)
{
    memset(c, 0, sizeof(*c));
    if (!spec || !*spec)
        return 0;
    const char *p = spec;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        const char *colon = memchr(p, ':', n);
        if (!colon || colon == p || colon + 1 == p + n) {
            swift_columns_release(c);
            return swift_error("--columns: expected SRC:DST[,SRC:DST...], got '%.*s'", (int)n, p);
        }
        c->src = swift_xrealloc(c->src, (size_t)(c->n + 1) * sizeof(char *));
        c->dst = swift_xrealloc(c->dst, (size_t)(c->n + 1) * sizeof(char *));
        c->src[c->n] = swift_xstrndup(p, (size_t)(colon - p));
        c->dst[c->n] = swift_xstrndup(colon + 1, (size_t)(p + n - colon - 1));
        c->n++;
        p += n;
        if (*p == ',')
            p++;
    }
    return 0;
}

void swift_columns_release(struct swift_columns *c)
{
    for (int i = 0; i < c->n; i++) {
        free(c->src[i]);
        free(c->dst[i]);
    }
    free(c->src);
    free(c->dst);
    memset(c, 0, sizeof(*c));
}

/* Append one message; -1 past the ceiling of 2^20 messages (a hostile row). */
static int push_msg(struct swift_conv *conv, enum swift_role role, const char *s, size_t n,
                    json_t *tool_calls, int loss)
{
    if (conv->n >= conv->cap) {
        size_t nc = conv->cap ? 2 * conv->cap : 16;
        if (nc > 1 << 20)
            return -1;
        conv->msg = swift_xrealloc(conv->msg, nc * sizeof(*conv->msg));
        conv->cap = nc;
    }
    conv->msg[conv->n++] = (struct swift_message){role, s, n, tool_calls, loss};
    return 0;
}

static json_t *first_key(json_t *obj, const char *const *keys, const char **which)
{
    for (int i = 0; keys[i]; i++) {
        json_t *v = json_object_get(obj, keys[i]);
        if (v && !json_is_null(v)) {
            if (which)
                *which = keys[i];
            return v;
        }
    }
    return NULL;
}

static int role_of(const char *s, enum swift_role *r, int *is_call)
{
    *is_call = 0;
    if (!strcmp(s, "user") || !strcmp(s, "human"))
        *r = SWIFT_ROLE_USER;
    else if (!strcmp(s, "assistant") || !strcmp(s, "gpt") || !strcmp(s, "bot") ||
             !strcmp(s, "model"))
        *r = SWIFT_ROLE_ASSISTANT;
    else if (!strcmp(s, "system"))
        *r = SWIFT_ROLE_SYSTEM;
    else if (!strcmp(s, "tool") || !strcmp(s, "observation") || !strcmp(s, "function") ||
             !strcmp(s, "tool_response") || !strcmp(s, "ipython"))
        *r = SWIFT_ROLE_TOOL;
    else if (!strcmp(s, "function_call") || !strcmp(s, "tool_call")) {
        *r = SWIFT_ROLE_ASSISTANT;
        *is_call = 1;
    } else
        return -1;
    return 0;
}

/* A string field or an error naming it. */
static int get_text(json_t *v, const char *what, const char **s, size_t *n, char *err,
                    size_t errlen)
{
    if (!json_is_string(v))
        return swift_row_errf(err, errlen, "%s must be a string", what);
    *s = json_string_value(v);
    *n = json_string_length(v);
    return 0;
}

static int conv_messages(json_t *arr, const char *rk, const char *ck, json_t *holder,
                         struct swift_conv *conv, char *err, size_t errlen)
{
    size_t i;
    json_t *m;
    json_array_foreach(arr, i, m)
    {
        if (!json_is_object(m))
            return swift_row_errf(err, errlen, "message %zu: expected an object", i + 1);
        json_t *role = json_object_get(m, rk);
        json_t *content = json_object_get(m, ck);
        if (!role && !content) { /* the other key style */
            role = json_object_get(m, !strcmp(rk, "role") ? "from" : "role");
            content = json_object_get(m, !strcmp(ck, "content") ? "value" : "content");
        }
        if (!json_is_string(role))
            return swift_row_errf(err, errlen, "message %zu: missing \"%s\"", i + 1, rk);
        enum swift_role r;
        int is_call;
        if (role_of(json_string_value(role), &r, &is_call) < 0)
            return swift_row_errf(
                err, errlen, "message %zu: unknown role '%s'", i + 1, json_string_value(role));
        json_t *calls = json_object_get(m, "tool_calls");
        if (calls && !json_is_null(calls) && !json_is_array(calls))
            return swift_row_errf(
                err, errlen, "message %zu: \"tool_calls\" must be an array", i + 1);
        if (json_is_null(calls))
            calls = NULL;
        const char *s = "";
        size_t n = 0;
        if (content && !json_is_null(content)) {
            if (get_text(content, "content", &s, &n, err, errlen) < 0)
                return swift_row_errf(
                    err, errlen, "message %zu: \"%s\" must be a string", i + 1, ck);
        } else if (!calls)
            return swift_row_errf(err, errlen, "message %zu: missing \"%s\"", i + 1, ck);
        if (is_call) {
            /* ShareGPT function_call: {"name", "arguments"} JSON */
            json_t *call = json_loadb(s, n, 0, NULL);
            if (json_is_object(call) && json_is_string(json_object_get(call, "name"))) {
                json_t *arr1 = json_array();
                json_array_append_new(arr1, call);
                json_array_append_new(holder, arr1);
                calls = arr1;
                s = "";
                n = 0;
            } else
                json_decref(call);
        }
        json_t *lv = json_object_get(m, "loss");
        int loss = json_is_true(lv) ? 1 : json_is_false(lv) ? 0 : -1;
        /* a function_call right after an assistant turn joins it (ms-swift does the same) */
        if (is_call && conv->n && conv->msg[conv->n - 1].role == SWIFT_ROLE_ASSISTANT &&
            !conv->msg[conv->n - 1].tool_calls) {
            conv->msg[conv->n - 1].tool_calls = calls;
            if (!calls) {
                json_t *joined = json_sprintf("%s\n%s", conv->msg[conv->n - 1].content, s);
                json_array_append_new(holder, joined);
                conv->msg[conv->n - 1].content = json_string_value(joined);
                conv->msg[conv->n - 1].len = json_string_length(joined);
            }
            continue;
        }
        if (push_msg(conv, r, s, n, calls, loss) < 0)
            return swift_row_errf(err, errlen, "too many messages");
    }
    return 0;
}

json_t *swift_row_rename(json_t *obj, const struct swift_columns *cols, json_t *holder)
{
    if (!cols || !cols->n) {
        json_array_append(holder, obj);
        return obj;
    }
    json_t *copy = json_object();
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v)
    {
        const char *nk = k;
        for (int i = 0; i < cols->n; i++)
            if (!strcmp(k, cols->src[i]))
                nk = cols->dst[i];
        json_object_set(copy, nk, v);
    }
    json_array_append_new(holder, copy);
    return copy;
}

/* The row's "tools" (an array, or a string holding one) into conv->tools. */
static int row_tools(json_t *obj, json_t *holder, struct swift_conv *conv, char *err, size_t errlen)
{
    json_t *tools = json_object_get(obj, "tools");
    if (json_is_string(tools)) {
        if (json_string_length(tools) == 0)
            tools = NULL;
        else {
            json_t *parsed = json_loads(json_string_value(tools), 0, NULL);
            if (!json_is_array(parsed)) {
                json_decref(parsed);
                return swift_row_errf(err, errlen, "\"tools\" is not a JSON array");
            }
            json_array_append_new(holder, parsed);
            tools = parsed;
        }
    } else if (tools && !json_is_null(tools) && !json_is_array(tools))
        return swift_row_errf(err, errlen, "\"tools\" must be an array");
    if (json_is_array(tools) && json_array_size(tools)) {
        /* ms-swift's hermes agent template wraps plain definitions as OpenAI tools */
        json_t *wrapped = json_array();
        size_t i;
        json_t *t;
        json_array_foreach(tools, i, t)
        {
            if (json_is_object(t) && !json_object_get(t, "function") && json_object_get(t, "name"))
                json_array_append_new(wrapped,
                                      json_pack("{s:s,s:O}", "type", "function", "function", t));
            else
                json_array_append(wrapped, t);
        }
        json_array_append_new(holder, wrapped);
        conv->tools = wrapped;
    }
    return 0;
}

/* A "messages" or "conversations" list; the system prompt is --system (replacing a system
 * message of the list), else a system message in the list, else the row's (sys_s). */
static int from_messages(json_t *msgs, json_t *convs, const char *system, const char *sys_s,
                         size_t sys_n, json_t *holder, struct swift_conv *conv, char *err,
                         size_t errlen)
{
    json_t *arr = msgs ? msgs : convs;
    if (!json_is_array(arr))
        return swift_row_errf(
            err, errlen, "\"%s\" must be an array", msgs ? "messages" : "conversations");
    if (conv_messages(
            arr, msgs ? "role" : "from", msgs ? "content" : "value", holder, conv, err, errlen) < 0)
        return -1;
    if (conv->n && conv->msg[0].role == SWIFT_ROLE_SYSTEM) {
        if (system) {
            conv->msg[0].content = system;
            conv->msg[0].len = strlen(system);
        }
    } else if (sys_s) {
        if (push_msg(conv, SWIFT_ROLE_SYSTEM, sys_s, sys_n, NULL, -1) < 0)
            return swift_row_errf(err, errlen, "too many messages");
        struct swift_message m = conv->msg[conv->n - 1];
        memmove(&conv->msg[1], &conv->msg[0], (conv->n - 1) * sizeof(m));
        conv->msg[0] = m;
    }
    if (conv->n == 0 || (conv->n == 1 && conv->msg[0].role == SWIFT_ROLE_SYSTEM))
        return swift_row_errf(err, errlen, "empty conversation");
    return 0;
}

/* The query of an alpaca row: instruction + "\n" + input, or whichever of the two is set. */
static int alpaca_query(json_t *inst, json_t *input, json_t *holder, const char **qs, size_t *qn,
                        char *err, size_t errlen)
{
    const char *a = "", *b = "";
    size_t an = 0, bn = 0;
    if (inst && !json_is_null(inst) && get_text(inst, "\"instruction\"", &a, &an, err, errlen) < 0)
        return -1;
    if (input && !json_is_null(input) && get_text(input, "\"input\"", &b, &bn, err, errlen) < 0)
        return -1;
    if (an && bn) {
        json_t *joined = json_sprintf("%s\n%s", a, b);
        if (!joined) /* embedded NUL: concatenate by hand */
            return swift_row_errf(err, errlen, "instruction/input contain NUL characters");
        json_array_append_new(holder, joined);
        *qs = json_string_value(joined);
        *qn = json_string_length(joined);
    } else {
        *qs = an ? a : b;
        *qn = an ? an : bn;
    }
    return 0;
}

/* A "history" list of [query, response] pairs as user and assistant turns. */
static int push_history(json_t *hist, struct swift_conv *conv, char *err, size_t errlen)
{
    if (!hist || json_is_null(hist))
        return 0;
    if (!json_is_array(hist))
        return swift_row_errf(err, errlen, "\"history\" must be an array of [query, response]");
    size_t i;
    json_t *h;
    json_array_foreach(hist, i, h)
    {
        json_t *hq = json_array_get(h, 0), *hr = json_array_get(h, 1);
        if (!json_is_array(h) || json_array_size(h) != 2 || !json_is_string(hq) ||
            !json_is_string(hr))
            return swift_row_errf(
                err, errlen, "history[%zu]: expected [query, response] strings", i);
        push_msg(conv, SWIFT_ROLE_USER, json_string_value(hq), json_string_length(hq), NULL, -1);
        push_msg(
            conv, SWIFT_ROLE_ASSISTANT, json_string_value(hr), json_string_length(hr), NULL, -1);
    }
    return 0;
}

static const char *const q_keys[] = {"query", "prompt", "question", "problem", NULL};

int swift_row_query(json_t *obj, json_t *holder, const char **qs, size_t *qn, const char *used[3],
                    char *err, size_t errlen)
{
    json_t *inst = json_object_get(obj, "instruction");
    json_t *input = json_object_get(obj, "input");
    const char *qk = NULL;
    json_t *q = first_key(obj, q_keys, &qk);
    int k = 0;
    used[0] = NULL;
    if (!inst && !q && !input)
        return 0;
    if (inst || (input && !q)) {
        if (alpaca_query(inst, input, holder, qs, qn, err, errlen) < 0)
            return -1;
        if (inst)
            used[k++] = "instruction";
        if (input)
            used[k++] = "input";
    } else {
        if (get_text(q, qk, qs, qn, err, errlen) < 0)
            return -1;
        used[k++] = qk;
    }
    used[k] = NULL;
    return 1;
}

/* Rows of fields: alpaca (instruction/input/output), query/response with history, or text. */
static int from_fields(json_t *obj, const char *sys_s, size_t sys_n, json_t *holder,
                       struct swift_conv *conv, char *err, size_t errlen)
{
    static const char *const r_keys[] = {
        "response", "answer", "output", "completion", "solution", "target", NULL};
    json_t *inst = json_object_get(obj, "instruction");
    json_t *input = json_object_get(obj, "input");
    json_t *q = first_key(obj, q_keys, NULL);
    json_t *resp = first_key(obj, r_keys, NULL);
    json_t *text = json_object_get(obj, "text");
    if (!inst && !q && !resp && !input) {
        if (text && !json_is_null(text)) {
            if (get_text(text, "\"text\"", &conv->text, &conv->text_len, err, errlen) < 0)
                return -1;
            conv->is_text = 1;
            return 0;
        }
        return swift_row_errf(err,
                              errlen,
                              "no known fields (expected messages, conversations, "
                              "instruction/output, query/response or text)");
    }
    if (!resp)
        return swift_row_errf(
            err, errlen, "missing response (\"output\", \"response\" or \"answer\")");
    const char *qs = "", *rs = "", *used[3];
    size_t qn = 0, rn = 0;
    if (get_text(resp, "the response", &rs, &rn, err, errlen) < 0)
        return -1;
    int k = swift_row_query(obj, holder, &qs, &qn, used, err, errlen);
    if (k < 0)
        return -1;
    if (k == 0)
        return swift_row_errf(
            err, errlen, "missing the query (\"query\", \"instruction\" or \"question\")");
    if (sys_s && push_msg(conv, SWIFT_ROLE_SYSTEM, sys_s, sys_n, NULL, -1) < 0)
        return swift_row_errf(err, errlen, "too many messages");
    if (push_history(json_object_get(obj, "history"), conv, err, errlen) < 0)
        return -1;
    if (push_msg(conv, SWIFT_ROLE_USER, qs, qn, NULL, -1) < 0 ||
        push_msg(conv, SWIFT_ROLE_ASSISTANT, rs, rn, NULL, -1) < 0)
        return swift_row_errf(err, errlen, "too many messages");
    return 0;
}

int swift_row_to_conv(json_t *obj, const struct swift_columns *cols, const char *system,
                      struct swift_conv *conv, json_t **owned, char *err, size_t errlen)
{
    conv->n = 0;
    conv->tools = NULL;
    conv->is_text = 0;
    conv->text = NULL;
    conv->text_len = 0;
    json_t *holder = json_array();
    *owned = holder;
    obj = swift_row_rename(obj, cols, holder);
    static const char *const sys_keys[] = {"system", "system_prompt", NULL};
    json_t *sys = first_key(obj, sys_keys, NULL);
    const char *sys_s = NULL;
    size_t sys_n = 0;
    if (sys && get_text(sys, "\"system\"", &sys_s, &sys_n, err, errlen) < 0)
        return -1;
    if (row_tools(obj, holder, conv, err, errlen) < 0)
        return -1;
    json_t *msgs = json_object_get(obj, "messages");
    static const char *const conv_keys[] = {"conversations", "conversation", NULL};
    json_t *convs = msgs ? NULL : first_key(obj, conv_keys, NULL);
    if (system) {
        sys_s = system;
        sys_n = strlen(system);
    }
    if (msgs || convs)
        return from_messages(msgs, convs, system, sys_s, sys_n, holder, conv, err, errlen);
    return from_fields(obj, sys_s, sys_n, holder, conv, err, errlen);
}
