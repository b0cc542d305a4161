/* eval/toolcall — the toolcall task: held-out tool-calling turns, their prompts with the tools,
 * and the generated calls scored against the reference (see prompt.h). Kept apart from
 * lib/eval/internal.h, as prompt.c is (template.h and model.h do not meet in one file). */
#include "lib/eval/eval.h"
#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/eval/prompt.h"
#include "lib/preprocess/agent.h"
#include "lib/preprocess/dataset.h"
#include "lib/preprocess/template.h"

#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

/* The reference calls of message k: [{"name", "arguments": {...}}] as compact JSON. */
static char *target_of(json_t *calls)
{
    json_t *out = json_array();
    size_t i;
    json_t *tc;
    json_array_foreach(calls, i, tc)
    {
        json_t *f = json_object_get(tc, "function");
        f = json_is_object(f) ? f : tc;
        json_t *args = swift_agent_call_args(f);
        json_array_append_new(out,
                              json_pack("{s:O?,s:o}",
                                        "name",
                                        json_object_get(f, "name"),
                                        "arguments",
                                        args ? args : json_null()));
    }
    char *s = json_dumps(out, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(out);
    return s;
}

/* One row: an item per assistant turn with tool calls (the conversation before it is the
 * prompt). Returns the items added, or -1 (reported). */
static int row_items(json_t *obj, const char *name, long line, struct swift_eval_set *set)
{
    struct swift_conv conv = {0};
    json_t *owned = NULL;
    char err[512];
    int added = 0;
    if (swift_row_to_conv(obj, NULL, NULL, &conv, &owned, err, sizeof(err)) < 0) {
        added = swift_error_at(name, line, "%s", err);
        goto out;
    }
    for (size_t k = 1; k < conv.n; k++) {
        const struct swift_message *m = &conv.msg[k];
        if (m->role != SWIFT_ROLE_ASSISTANT || !m->tool_calls || !json_array_size(m->tool_calls))
            continue;
        struct swift_eval_item *it = swift_eval_set_push(set, name, line);
        if (!it) {
            added = -1;
            goto out;
        }
        it->subject = swift_xstrdup("");
        it->question = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER);
        it->answer = (int)k;
        it->target = target_of(m->tool_calls);
        added++;
    }
out:
    free(conv.msg);
    json_decref(owned);
    return added;
}

int swift_eval_toolcall_read(const char *path, struct swift_eval_set *set)
{
    struct swift_dataset *ds;
    if (swift_dataset_open(&ds, path, NULL) < 0)
        return -1;
    struct swift_row row;
    int k, rc = 0;
    size_t before = set->n;
    while (rc == 0 && (k = swift_dataset_next(ds, &row)) > 0) {
        json_t *obj = NULL;
        char err[512];
        if (swift_row_parse(&row, &obj, err, sizeof(err)) < 0)
            rc = swift_error_at(swift_dataset_name(ds), row.line, "%s", err);
        else if (row_items(obj, swift_dataset_name(ds), row.line, set) < 0)
            rc = -1;
        json_decref(obj);
        swift_row_release(&row);
    }
    if (rc == 0 && k < 0)
        rc = -1;
    if (rc == 0 && set->n == before)
        rc = swift_error("'%s': no assistant turn with tool calls to evaluate", path);
    swift_dataset_close(ds);
    return rc;
}

int swift_eval_toolcall_prompt(struct swift_eval_prompter *p, const char *row, int upto, int agent,
                               const uint32_t **ids, size_t *n, long *stop)
{
    json_t *obj = json_loads(row, 0, NULL);
    struct swift_conv conv = {0};
    json_t *owned = NULL;
    char err[512];
    int rc = swift_row_to_conv(obj, NULL, NULL, &conv, &owned, err, sizeof(err));
    if (rc < 0 || upto <= 0 || (size_t)upto > conv.n)
        rc = swift_error("toolcall item: %s", rc < 0 ? err : "turn out of range");
    if (rc == 0) {
        conv.n = (size_t)upto;
        conv.agent = agent;
        rc = swift_eval_prompter_encode_conv(p, &conv, ids, n, stop);
    }
    free(conv.msg);
    json_decref(owned);
    json_decref(obj);
    return rc;
}

int swift_eval_toolcall_score(int agent, const char *text, size_t len, const char *target,
                              int *name_ok)
{
    char *content;
    json_t *calls;
    int nc = swift_agent_parse(agent, text, len, 0, &content, &calls, NULL, 0);
    free(content);
    json_t *want = json_loads(target, 0, NULL);
    int names = json_is_array(want) && nc == (int)json_array_size(want), args = names;
    for (int i = 0; names && i < nc; i++) {
        json_t *f = json_object_get(json_array_get(calls, (size_t)i), "function");
        json_t *w = json_array_get(want, (size_t)i);
        const char *gn = json_string_value(json_object_get(f, "name"));
        const char *wn = json_string_value(json_object_get(w, "name"));
        names = gn && wn && !strcmp(gn, wn);
        json_t *ga = json_loads(json_string_value(json_object_get(f, "arguments")), 0, NULL);
        args = args && names && json_equal(ga, json_object_get(w, "arguments"));
        json_decref(ga);
    }
    json_decref(calls);
    json_decref(want);
    *name_ok = names;
    return args;
}
