/* prompts — GRPO prompt rows to conversations and metadata (see dataset.h, "Prompt rows"). */
#include "lib/preprocess/dataset.h"
#include "lib/preprocess/internal.h"

#include "lib/core/alloc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

/* Columns that make the conversation (never copied to the metadata; the query's are added). */
static const char *const conv_keys[] = {"messages",
                                        "conversations",
                                        "conversation",
                                        "prompt",
                                        "system",
                                        "system_prompt",
                                        "tools",
                                        "history",
                                        NULL};

static int is_listed(const char *k, const char *const *keys)
{
    for (int i = 0; keys[i]; i++)
        if (!strcmp(k, keys[i]))
            return 1;
    return 0;
}

/* A message object {"role": role, "content": s}. */
static json_t *msg(const char *role, const char *s, size_t n)
{
    json_t *m = json_object();
    json_object_set_new(m, "role", json_string(role));
    json_object_set_new(m, "content", json_stringn(s, n));
    return m;
}

/* The history [[q, r], ...] of a field row as user/assistant messages appended to arr. */
static int history(json_t *r, json_t *arr, char *err, size_t errlen)
{
    json_t *h = json_object_get(r, "history"), *p;
    size_t i;
    if (!h || json_is_null(h))
        return 0;
    if (!json_is_array(h))
        return swift_row_errf(err, errlen, "\"history\" must be an array of [query, response]");
    json_array_foreach(h, i, p)
    {
        json_t *q = json_array_get(p, 0), *a = json_array_get(p, 1);
        if (!json_is_array(p) || json_array_size(p) != 2 || !json_is_string(q) ||
            !json_is_string(a))
            return swift_row_errf(
                err, errlen, "history[%zu]: expected [query, response] strings", i);
        json_array_append_new(arr, msg("user", json_string_value(q), json_string_length(q)));
        json_array_append_new(arr, msg("assistant", json_string_value(a), json_string_length(a)));
    }
    return 0;
}

/* The row as one with a "messages" list: itself when it has messages or conversations, else a
 * copy (in holder) whose "messages" come from "prompt" or the query columns (whose names go to
 * used[]). Returns the row or NULL with err set. */
static json_t *as_messages(json_t *r, json_t *holder, const char *used[3], char *err, size_t errlen)
{
    used[0] = NULL;
    if (json_object_get(r, "messages") || json_object_get(r, "conversations") ||
        json_object_get(r, "conversation"))
        return r;
    json_t *p = json_object_get(r, "prompt"), *msgs;
    if (p && !json_is_null(p)) {
        if (json_is_string(p)) {
            msgs = json_array();
            json_array_append_new(msgs, msg("user", json_string_value(p), json_string_length(p)));
        } else if (json_is_array(p))
            msgs = json_incref(p);
        else {
            swift_row_errf(err, errlen, "\"prompt\" must be a string or a list of messages");
            return NULL;
        }
    } else {
        const char *qs;
        size_t qn;
        int k = swift_row_query(r, holder, &qs, &qn, used, err, errlen);
        if (k <= 0) {
            if (k == 0)
                swift_row_errf(
                    err,
                    errlen,
                    "missing the prompt (\"messages\", \"prompt\", \"query\", \"question\", "
                    "\"problem\" or \"instruction\")");
            return NULL;
        }
        msgs = json_array();
        if (history(r, msgs, err, errlen) < 0) {
            json_decref(msgs);
            return NULL;
        }
        json_array_append_new(msgs, msg("user", qs, qn));
    }
    json_t *cp = json_copy(r);
    json_array_append_new(holder, cp);
    json_object_set_new(cp, "messages", msgs);
    return cp;
}

/* {"prompt": text, the row's columns but the conversation's} as compact JSON text. */
static char *meta_json(json_t *r, const char *text, size_t n, const char *const *used, size_t *len)
{
    json_t *m = json_object();
    json_object_set_new(m, "prompt", json_stringn(text, n));
    const char *k;
    json_t *v;
    json_object_foreach(r, k, v)
    {
        if (!is_listed(k, conv_keys) && !is_listed(k, used))
            json_object_set(m, k, v);
    }
    char *s = json_dumps(m, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    json_decref(m);
    if (!s)
        abort(); /* out of memory */
    *len = strlen(s);
    return s;
}

int swift_row_to_prompt(json_t *obj, const struct swift_columns *cols, const char *system,
                        struct swift_conv *conv, char **meta, size_t *meta_len, json_t **owned,
                        char *err, size_t errlen)
{
    *meta = NULL;
    *meta_len = 0;
    conv->n = 0;
    json_t *holder = json_array();
    *owned = holder;
    json_t *r = swift_row_rename(obj, cols, holder);
    const char *used[3];
    json_t *m = as_messages(r, holder, used, err, errlen);
    if (!m)
        return -1;
    json_t *o = NULL;
    int rc = swift_row_to_conv(m, NULL, system, conv, &o, err, errlen);
    json_array_append_new(holder, o);
    if (rc < 0)
        return -1;
    const struct swift_message *last = &conv->msg[conv->n - 1];
    if (last->role != SWIFT_ROLE_USER) {
        static const char *const names[] = {"system", "user", "assistant", "tool"};
        return swift_row_errf(
            err,
            errlen,
            "the conversation ends with a%s %s message; a prompt must end with a user "
            "turn (the model writes the reply)",
            last->role == SWIFT_ROLE_ASSISTANT ? "n" : "",
            names[last->role]);
    }
    *meta = meta_json(r, last->content, last->len, used, meta_len);
    return 0;
}
