/* eval/run_remote — gsm8k and exact through an OpenAI-compatible server (--eval-url, see run.h):
 * the prompts of run_gen.c, one request per item (several in flight), the answers scored as
 * run_gen.c scores its own. */
#include "lib/eval/internal.h"
#include "lib/eval/remote.h"
#include "lib/core/alloc.h"
#include "lib/core/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

/* The request body of item i (prompt built as run_gen.c builds it). NULL after an error. */
static char *remote_body(struct swift_eval_runner *r, int chat, struct swift_eval_set *set,
                         struct swift_eval_shots *sh, size_t i)
{
    const struct swift_eval_opts *o = r->o;
    if (swift_eval_shots_for(r, sh, set, i) < 0)
        return NULL;
    char *prompt = chat && sh->n == 0 ? swift_xstrdup(set->items[i].question)
                                      : swift_eval_prompt(o->task, &set->items[i], sh->list, sh->n);
    if (!prompt)
        return NULL;
    json_t *b = json_object();
    if (o->model)
        json_object_set_new(b, "model", json_string(o->model));
    if (chat)
        json_object_set_new(
            b, "messages", json_pack("[{s:s,s:s}]", "role", "user", "content", prompt));
    else
        json_object_set_new(b, "prompt", json_string(prompt));
    free(prompt);
    json_object_set_new(b, "max_tokens", json_integer(o->max_new_tokens));
    json_object_set_new(b, "temperature", json_real(o->temperature));
    json_object_set_new(b, "top_p", json_real(o->top_p));
    uint64_t seed = o->seed ^ (0x9e3779b97f4a7c15ULL * i); /* run_gen.c's per-item seed */
    json_object_set_new(b, "seed", json_integer((json_int_t)(int64_t)seed));
    json_t *stop = json_array();
    for (int k = 0; swift_eval_stop_words[k]; k++)
        json_array_append_new(stop, json_string(swift_eval_stop_words[k]));
    json_object_set_new(b, "stop", stop);
    char *s = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    if (!s)
        abort();
    return s;
}

struct remote_ctx {
    struct swift_eval_runner *r;
    size_t first;
    char **answers; /* per item from first */
    size_t done;
};

static int remote_done(void *ctx, size_t k, struct swift_eval_answer *a)
{
    struct remote_ctx *c = ctx;
    c->answers[k] = a->text;
    a->text = NULL;
    swift_eval_gen_cut(c->answers[k]);
    if (a->prompt_tokens > 0)
        c->r->gen.prefill_tokens += a->prompt_tokens;
    if (a->completion_tokens > 0)
        c->r->gen.decode_tokens += a->completion_tokens;
    swift_progress_update(&c->r->prog, ++c->done);
    return 0;
}

int swift_eval_run_remote(struct swift_eval_runner *r, struct swift_eval_set *set, json_t *rec,
                          long *n_out)
{
    const struct swift_eval_opts *o = r->o;
    size_t first = (size_t)o->few_shot, last = set->n;
    if (o->limit > 0 && first + (size_t)o->limit < last)
        last = first + (size_t)o->limit;
    if (first >= last)
        return swift_error("'%s': no items to evaluate", o->dataset);
    int chat = o->template_name && strcmp(o->template_name, "none") != 0;
    struct swift_eval_remote rm;
    if (swift_eval_remote_init(&rm, o->eval_url, chat, o->api_key, o->batch_size) < 0)
        return -1;
    size_t n = last - first;
    char **bodies = swift_xcalloc(n, sizeof(*bodies));
    char **labels = swift_xcalloc(n, sizeof(*labels));
    struct remote_ctx c = {.r = r, .first = first, .answers = swift_xcalloc(n, sizeof(char *))};
    struct swift_eval_shots sh = {0};
    int rc = 0;
    for (size_t k = 0; k < n && rc == 0; k++) {
        const struct swift_eval_item *it = &set->items[first + k];
        size_t cap = strlen(it->file) + 32;
        labels[k] = swift_xmalloc(cap);
        snprintf(labels[k], cap, "%s:%ld", it->file, it->line);
        if (!(bodies[k] = remote_body(r, rm.chat, set, &sh, first + k)))
            rc = -1;
    }
    swift_eval_shots_free(&sh);
    r->prog.total = n;
    double t0 = swift_eval_now();
    if (rc == 0)
        rc = swift_eval_remote_post_all(
            &rm, bodies, (const char *const *)labels, n, remote_done, &c);
    r->gen.decode_s = swift_eval_now() - t0; /* the wall time: the server's split is unknown */
    struct swift_eval_tally acc;
    swift_eval_tally_init(&acc);
    for (size_t k = 0; k < n && rc == 0; k++) {
        const struct swift_eval_item *it = &set->items[first + k];
        int ok = swift_eval_gen_correct(r, o->task, c.answers[k], it->target);
        swift_eval_prediction(r, it, c.answers[k], ok);
        rc = swift_eval_tally_add(&acc, it->subject, ok);
    }
    if (rc == 0) {
        json_t *mt = json_object_get(rec, "metrics");
        json_object_set_new(mt, "accuracy", json_real(swift_eval_tally_micro(&acc)));
        if (acc.n > 1)
            json_object_set_new(mt, "accuracy_macro", json_real(swift_eval_tally_macro(&acc)));
        swift_eval_record_add_tally(rec, &acc);
        *n_out = acc.total;
        r->tokens += r->gen.prefill_tokens + r->gen.decode_tokens;
    }
    swift_eval_tally_release(&acc);
    for (size_t k = 0; k < n; k++) {
        free(bodies[k]);
        free(labels[k]);
        free(c.answers[k]);
    }
    free(bodies);
    free(labels);
    free(c.answers);
    swift_eval_remote_release(&rm);
    return rc;
}
