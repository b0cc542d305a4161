/* eval/run_mc — the mc and mmlu tasks: each choice's continuation scored on a fork of the
 * prompt's key/value cache; the most likely choice wins (see run.h). */
#include "lib/eval/internal.h"
#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/trace.h"

#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

struct mc_item {
    size_t idx;
    struct swift_eval_ids ctx;
    struct swift_eval_ids cont[SWIFT_EVAL_MAX_CHOICES];
    size_t cont_bytes[SWIFT_EVAL_MAX_CHOICES];
    double ll[SWIFT_EVAL_MAX_CHOICES];
    int nc;
};

struct mc_ctx {
    struct mc_item *items;
    int V;
    int choice; /* step 3: the choice being scored */
};

static void mc_first_cb(void *ctx, const struct swift_eval_feed *f, int pos, const float *logits)
{
    struct mc_ctx *c = ctx;
    struct mc_item *it = &c->items[f->tag];
    (void)pos;
    for (int k = 0; k < it->nc; k++)
        it->ll[k] = swift_logprob(logits, c->V, it->cont[k].v[0]);
}

static void mc_rest_cb(void *ctx, const struct swift_eval_feed *f, int pos, const float *logits)
{
    struct mc_ctx *c = ctx;
    struct mc_item *it = &c->items[f->tag];
    it->ll[c->choice] += swift_logprob(logits, c->V, it->cont[c->choice].v[pos + 1]);
}

static void mc_items_free(struct mc_item *it, int n)
{
    for (int i = 0; i < n; i++) {
        free(it[i].ctx.v);
        for (int k = 0; k < it[i].nc; k++)
            free(it[i].cont[k].v);
        memset(&it[i], 0, sizeof(it[i]));
    }
}

static int mc_batch(struct swift_eval_runner *r, struct swift_eval_set *set, struct mc_item *items,
                    int n, struct swift_eval_tally *acc, struct swift_eval_tally *accn, long bi)
{
    int64_t t0 = swift_trace_now();
    long tok0 = r->tokens;
    struct mc_ctx c = {.items = items, .V = r->V};
    int need = 1;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < items[i].nc; k++)
            if (items[i].ctx.n + items[i].cont[k].n > need)
                need = items[i].ctx.n + items[i].cont[k].n;
    if (swift_eval_kv_ensure(r, 2 * r->o->batch_size, need) < 0)
        return -1;
    struct swift_eval_feed *f = swift_xcalloc((size_t)n, sizeof(*f));
    swift_kv_reset(&r->kv, -1);
    for (int i = 0; i < n; i++)
        f[i] = (struct swift_eval_feed){.row = 2 * i,
                                        .ids = items[i].ctx.v,
                                        .n = items[i].ctx.n,
                                        .want_from = items[i].ctx.n - 1,
                                        .tag = i};
    int rc = swift_eval_feed_all(r, f, n, mc_first_cb, &c);
    int maxc = 0;
    for (int i = 0; i < n; i++)
        if (items[i].nc > maxc)
            maxc = items[i].nc;
    for (int k = 0; rc == 0 && k < maxc; k++) {
        int nf = 0;
        for (int i = 0; i < n; i++) {
            if (k >= items[i].nc || items[i].cont[k].n < 2)
                continue;
            swift_kv_copy_row(&r->kv, 2 * i + 1, 2 * i);
            f[nf++] = (struct swift_eval_feed){
                .row = 2 * i + 1, .ids = items[i].cont[k].v, .n = items[i].cont[k].n - 1, .tag = i};
        }
        c.choice = k;
        if (nf)
            rc = swift_eval_feed_all(r, f, nf, mc_rest_cb, &c);
    }
    free(f);
    if (rc < 0)
        return -1;
    for (int i = 0; i < n && rc == 0; i++) {
        const struct swift_eval_item *it = &set->items[items[i].idx];
        int pick = swift_eval_mc_pick(items[i].ll, items[i].nc);
        rc = swift_eval_tally_add(acc, it->subject, pick == it->answer);
        if (rc == 0 && accn) {
            double norm[SWIFT_EVAL_MAX_CHOICES];
            for (int k = 0; k < items[i].nc; k++)
                norm[k] =
                    items[i].ll[k] / (double)(items[i].cont_bytes[k] ? items[i].cont_bytes[k] : 1);
            rc = swift_eval_tally_add(
                accn, it->subject, swift_eval_mc_pick(norm, items[i].nc) == it->answer);
        }
    }
    swift_eval_batch_span("forward", t0, bi, n, r->tokens - tok0);
    return rc;
}

int swift_eval_run_mc(struct swift_eval_runner *r, struct swift_eval_set *setp, json_t *rec,
                      long *n_out)
{
    const struct swift_eval_opts *o = r->o;
    struct swift_eval_set set = *setp;
    size_t first = o->task == SWIFT_EVAL_MMLU ? 0 : (size_t)o->few_shot;
    size_t last = set.n;
    if (o->limit > 0 && first + (size_t)o->limit < last)
        last = first + (size_t)o->limit;
    if (first >= last)
        return swift_error("'%s': no items to evaluate", o->dataset);
    int B = o->batch_size, cap = o->max_length;
    struct swift_eval_tally acc, accn;
    swift_eval_tally_init(&acc);
    swift_eval_tally_init(&accn);
    struct swift_eval_shots sh = {0};
    struct mc_item *items = swift_xcalloc((size_t)B, sizeof(*items));
    int rc = 0;
    int n = 0;
    long bi = 0;
    r->prog.total = last - first;
    for (size_t i = first; i < last && rc == 0; i++) {
        const struct swift_eval_item *it = &set.items[i];
        if ((rc = swift_eval_shots_for(r, &sh, &set, i)) < 0)
            break;
        char *prompt = swift_eval_prompt(o->task, it, sh.list, sh.n);
        if (!prompt) {
            rc = -1;
            break;
        }
        struct mc_item *m = &items[n];
        m->idx = i;
        rc = swift_eval_encode_prompt(r, prompt, &m->ctx);
        free(prompt);
        int maxcont = 1;
        for (int k = 0; rc == 0 && k < it->nchoices; k++) {
            char *c = swift_eval_continuation(o->task, it, k);
            if (!c) { /* longer than the prompt ceiling (reported) */
                rc = -1;
                break;
            }
            /* an assistant reply starts without the space that follows "Answer:" */
            const char *cc =
                strcmp(swift_eval_prompter_name(r->pr), "none") && c[0] == ' ' ? c + 1 : c;
            m->cont_bytes[k] = strlen(cc);
            rc = swift_eval_encode(r, cc, &m->cont[k]);
            free(c);
            m->nc = k + 1;
            if (rc == 0 && m->cont[k].n == 0)
                rc = swift_error_at(it->file, it->line, "choice %d encodes to no tokens", k);
            if (rc == 0 && m->cont[k].n > maxcont)
                maxcont = m->cont[k].n;
        }
        if (rc < 0) {
            n++;
            break;
        }
        if (maxcont >= cap)
            rc = swift_error_at(it->file, it->line, "a choice is longer than --max-length %d", cap);
        else if (m->ctx.n == 0)
            rc = swift_error_at(it->file, it->line, "empty prompt");
        else
            swift_eval_left_truncate(&m->ctx, cap - maxcont);
        n++;
        if (rc == 0 && n == B) {
            rc = mc_batch(r, &set, items, n, &acc, o->task == SWIFT_EVAL_MC ? &accn : NULL, bi++);
            mc_items_free(items, n);
            n = 0;
            swift_progress_update(&r->prog, i + 1 - first);
        }
    }
    if (rc == 0 && n > 0)
        rc = mc_batch(r, &set, items, n, &acc, o->task == SWIFT_EVAL_MC ? &accn : NULL, bi++);
    swift_progress_update(&r->prog, last - first);
    if (items)
        mc_items_free(items, n);
    free(items);
    swift_eval_shots_free(&sh);
    if (rc == 0) {
        json_t *mt = json_object_get(rec, "metrics");
        json_object_set_new(mt, "accuracy", json_real(swift_eval_tally_micro(&acc)));
        if (acc.n > 1 || (acc.n == 1 && acc.rows[0].subject[0]))
            json_object_set_new(mt, "accuracy_macro", json_real(swift_eval_tally_macro(&acc)));
        if (o->task == SWIFT_EVAL_MC)
            json_object_set_new(mt, "accuracy_norm", json_real(swift_eval_tally_micro(&accn)));
        swift_eval_record_add_tally(rec, &acc);
        *n_out = acc.total;
    }
    swift_eval_tally_release(&acc);
    swift_eval_tally_release(&accn);
    return rc;
}
