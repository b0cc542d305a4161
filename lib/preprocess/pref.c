/* pref — preference pairs and KTO rows to conversations (see dataset.h, "Preference rows"). */
#include "lib/preprocess/dataset.h"
#include "lib/preprocess/internal.h"

#include "lib/core/alloc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

const char *swift_row_kind_name(int kind)
{
    return kind == SWIFT_KIND_PAIRS     ? "pairs"
           : kind == SWIFT_KIND_KTO     ? "kto"
           : kind == SWIFT_KIND_PROMPTS ? "prompts"
                                        : "sft";
}

static const char *const pair_keys[] = {
    "chosen", "rejected", "rejected_response", "rejected_messages", NULL};

int swift_row_kind(json_t *obj)
{
    if (json_is_boolean(json_object_get(obj, "label")))
        return SWIFT_KIND_KTO;
    for (int i = 0; pair_keys[i]; i++)
        if (json_object_get(obj, pair_keys[i]))
            return SWIFT_KIND_PAIRS;
    return SWIFT_KIND_SFT;
}

/* swift_row_to_conv on a row whose renames are done; what conv borrows from goes to holder. */
static int to_conv(json_t *row, const char *system, json_t *holder, struct swift_conv *conv,
                   char *err, size_t errlen)
{
    json_t *o = NULL;
    int rc = swift_row_to_conv(row, NULL, system, conv, &o, err, errlen);
    json_array_append_new(holder, o);
    return rc;
}

/* A shallow copy of row r without the pair keys and the response fields that would compete with
 * what the caller sets (kept in holder). */
static json_t *strip(json_t *r, json_t *holder, int lists)
{
    static const char *const list_keys[] = {"messages", "conversations", "conversation", NULL};
    static const char *const resp_keys[] = {
        "response", "answer", "output", "completion", "solution", "target", NULL};
    json_t *c = json_copy(r);
    json_array_append_new(holder, c);
    for (int i = 0; pair_keys[i]; i++)
        json_object_del(c, pair_keys[i]);
    json_object_del(c, "label");
    for (int i = 0; lists && list_keys[i]; i++)
        json_object_del(c, list_keys[i]);
    for (int i = 0; !lists && resp_keys[i]; i++)
        json_object_del(c, resp_keys[i]);
    return c;
}

/* A response as messages: a string is one assistant message, an object one message, an array
 * itself. A new reference, or NULL when it is none of these. */
static json_t *as_msgs(json_t *v)
{
    if (json_is_string(v))
        return json_pack("[{s:s,s:O}]", "role", "assistant", "content", v);
    if (json_is_object(v))
        return json_pack("[O]", v);
    if (json_is_array(v))
        return json_incref(v);
    return NULL;
}

/* A response's text: a string, a message's "content" / "value", or a list of one message. */
static json_t *resp_text(json_t *v)
{
    if (json_is_array(v) && json_array_size(v) == 1)
        v = json_array_get(v, 0);
    if (json_is_object(v)) {
        json_t *t = json_object_get(v, "content");
        v = t ? t : json_object_get(v, "value");
    }
    return json_is_string(v) ? v : NULL;
}

static int same_msg(const struct swift_message *a, const struct swift_message *b)
{
    if (a->role != b->role || a->len != b->len || memcmp(a->content, b->content, a->len))
        return 0;
    if (!a->tool_calls || !b->tool_calls)
        return !a->tool_calls && !b->tool_calls;
    return json_equal(a->tool_calls, b->tool_calls);
}

/* Chosen and rejected share all messages but the last, an assistant turn in both. */
static int check_shared(const struct swift_conv *c, const struct swift_conv *j, char *err,
                        size_t errlen)
{
    if (c->is_text || j->is_text)
        return swift_row_errf(
            err, errlen, "a preference pair needs a prompt, not a plain \"text\"");
    if (c->msg[c->n - 1].role != SWIFT_ROLE_ASSISTANT)
        return swift_row_errf(err, errlen, "the chosen response is not an assistant message");
    if (j->msg[j->n - 1].role != SWIFT_ROLE_ASSISTANT)
        return swift_row_errf(err, errlen, "the rejected response is not an assistant message");
    if (c->n != j->n)
        return swift_row_errf(
            err,
            errlen,
            "chosen and rejected do not share the prompt (%zu and %zu messages before "
            "the response)",
            c->n - 1,
            j->n - 1);
    for (size_t i = 0; i + 1 < c->n; i++)
        if (!same_msg(&c->msg[i], &j->msg[i]))
            return swift_row_errf(
                err,
                errlen,
                "chosen and rejected do not share the prompt (message %zu differs)",
                i + 1);
    return 0;
}

/* rejected = chosen with the last (assistant) message's content replaced by text. */
static int replace_last(const struct swift_conv *c, json_t *text, struct swift_conv *j, char *err,
                        size_t errlen)
{
    if (!json_is_string(text))
        return swift_row_errf(err, errlen, "\"rejected_response\" must be a string");
    if (c->is_text || c->msg[c->n - 1].role != SWIFT_ROLE_ASSISTANT)
        return swift_row_errf(err,
                              errlen,
                              "\"rejected_response\" needs a conversation ending with the chosen "
                              "assistant response");
    if (j->cap < c->n) {
        j->msg = swift_xrealloc(j->msg, c->n * sizeof(*j->msg));
        j->cap = c->n;
    }
    memcpy(j->msg, c->msg, c->n * sizeof(*c->msg));
    j->n = c->n;
    j->tools = c->tools;
    j->is_text = 0;
    struct swift_message *m = &j->msg[j->n - 1];
    m->content = json_string_value(text);
    m->len = json_string_length(text);
    m->tool_calls = NULL;
    return 0;
}

/* ms-swift: a row + "rejected_response", or "messages" + "rejected_messages". */
static int swift_pair(json_t *r, const char *system, json_t *holder, struct swift_conv *c,
                      struct swift_conv *j, char *err, size_t errlen)
{
    json_t *rr = json_object_get(r, "rejected_response");
    json_t *rm = json_object_get(r, "rejected_messages");
    if (to_conv(r, system, holder, c, err, errlen) < 0)
        return -1;
    if (rr)
        return replace_last(c, rr, j, err, errlen);
    if (!json_is_array(rm))
        return swift_row_errf(err, errlen, "\"rejected_messages\" must be an array of messages");
    json_t *cp = strip(r, holder, 1);
    json_object_set(cp, "messages", rm);
    if (to_conv(cp, system, holder, j, err, errlen) < 0)
        return -1;
    return check_shared(c, j, err, errlen);
}

/* The prompt of a chosen/rejected row as a message list (and the key it came from), or NULL. */
static json_t *list_prompt(json_t *r, const char **key)
{
    static const char *const keys[] = {"messages", "conversations", "conversation", NULL};
    json_t *p = json_object_get(r, "prompt");
    if (json_is_array(p)) {
        *key = "messages";
        return p;
    }
    for (int i = 0; keys[i]; i++)
        if (json_is_array(p = json_object_get(r, keys[i]))) {
            *key = keys[i];
            return p;
        }
    return NULL;
}

/* One side of a chosen/rejected row as a conversation. */
static int side(json_t *r, json_t *resp, const char *which, const char *system, json_t *holder,
                struct swift_conv *conv, char *err, size_t errlen)
{
    const char *key = NULL;
    json_t *prompt = list_prompt(r, &key);
    json_t *other = json_object_get(r, !strcmp(which, "chosen") ? "rejected" : "chosen");
    json_t *cp;
    if (prompt || (json_is_array(resp) && json_is_array(other))) {
        json_t *msgs = as_msgs(resp);
        if (!msgs)
            return swift_row_errf(
                err, errlen, "\"%s\" must be a string, a message or a list of messages", which);
        json_t *all = json_array();
        if (prompt)
            json_array_extend(all, prompt);
        json_array_extend(all, msgs);
        json_decref(msgs);
        cp = strip(r, holder, 1);
        json_object_del(cp, "prompt");
        json_object_set_new(cp, prompt ? key : "messages", all);
    } else {
        static const char *const q_keys[] = {
            "instruction", "input", "query", "prompt", "question", "problem", NULL};
        int has_q = 0;
        for (int i = 0; q_keys[i]; i++)
            has_q |= json_is_string(json_object_get(r, q_keys[i]));
        if (!has_q)
            return swift_row_errf(
                err,
                errlen,
                "missing the prompt (\"prompt\", \"conversations\", \"messages\", "
                "\"instruction\" or \"query\")");
        json_t *text = resp_text(resp);
        if (!text)
            return swift_row_errf(err, errlen, "\"%s\" must be a string or a message", which);
        cp = strip(r, holder, 0);
        json_object_set(cp, "response", text);
    }
    return to_conv(cp, system, holder, conv, err, errlen);
}

int swift_row_to_pref(json_t *obj, const struct swift_columns *cols, const char *system, int kind,
                      struct swift_conv *chosen, struct swift_conv *rejected, int *label,
                      json_t **owned, char *err, size_t errlen)
{
    chosen->n = rejected->n = 0;
    *label = 0;
    json_t *holder = json_array();
    *owned = holder;
    json_t *r = swift_row_rename(obj, cols, holder);
    if (kind == SWIFT_KIND_KTO) {
        json_t *l = json_object_get(r, "label");
        if (!l)
            return swift_row_errf(err, errlen, "missing \"label\" (KTO rows need true or false)");
        /* a CSV cell is a string: "true" / "false" (with --kind kto) */
        const char *ls = json_string_value(l);
        if (ls && (!strcmp(ls, "true") || !strcmp(ls, "false")))
            *label = ls[0] == 't';
        else if (json_is_boolean(l))
            *label = json_is_true(l);
        else
            return swift_row_errf(err, errlen, "\"label\" must be true or false");
        if (to_conv(r, system, holder, chosen, err, errlen) < 0)
            return -1;
        if (chosen->is_text)
            return swift_row_errf(
                err, errlen, "a KTO row needs a prompt and a completion, not a \"text\"");
        return 0;
    }
    if (json_object_get(r, "rejected_response") || json_object_get(r, "rejected_messages"))
        return swift_pair(r, system, holder, chosen, rejected, err, errlen);
    json_t *c = json_object_get(r, "chosen"), *j = json_object_get(r, "rejected");
    if (!c && !j)
        return swift_row_errf(
            err,
            errlen,
            "missing \"chosen\" and \"rejected\" (or \"rejected_response\"): not a "
            "preference pair");
    if (!c)
        return swift_row_errf(err, errlen, "missing \"chosen\"");
    if (!j)
        return swift_row_errf(err, errlen, "missing \"rejected\"");
    if (side(r, c, "chosen", system, holder, chosen, err, errlen) < 0 ||
        side(r, j, "rejected", system, holder, rejected, err, errlen) < 0)
        return -1;
    return check_shared(chosen, rejected, err, errlen);
}
