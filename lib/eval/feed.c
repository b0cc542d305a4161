/* eval/feed — what the task loops share: prompts into ids, sequences fed through the key/value
 * cache in chunks with the logits wanted handed to a callback, the cache sized to the batch,
 * few-shot examples (lib/eval/internal.h). */
#include "lib/eval/internal.h"
#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/trace.h"

#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

double swift_eval_now(void)
{
    return (double)swift_trace_now() * 1e-9;
}

static void to_ids(const uint32_t *u, size_t n, struct swift_eval_ids *out)
{
    out->v = swift_xmalloc(n * sizeof(int32_t));
    for (size_t i = 0; i < n; i++)
        out->v[i] = (int32_t)u[i];
    out->n = (int)n;
}

int swift_eval_encode(struct swift_eval_runner *r, const char *text, struct swift_eval_ids *out)
{
    struct swift_tokens t = {0};
    if (swift_tokenizer_encode(r->st, text, strlen(text), SWIFT_TOK_PARSE_SPECIAL, &t) < 0)
        return -1;
    to_ids(t.ids, t.n, out);
    swift_tokens_release(&t);
    return 0;
}

/* A prompt as the model sees it: plain text, or with --template the user turn followed by the
 * assistant header; the template's end-of-turn id joins the stop ids. */
int swift_eval_encode_prompt(struct swift_eval_runner *r, const char *text,
                             struct swift_eval_ids *out)
{
    const uint32_t *u;
    size_t n;
    long stop;
    if (swift_eval_prompter_encode(r->pr, text, &u, &n, &stop) < 0)
        return -1;
    if (stop >= 0)
        swift_eval_add_eos(r, stop);
    to_ids(u, n, out);
    return 0;
}

int swift_eval_encode_toolcall(struct swift_eval_runner *r, const struct swift_eval_item *it,
                               struct swift_eval_ids *out)
{
    const uint32_t *u;
    size_t n;
    long stop;
    if (swift_eval_toolcall_prompt(r->pr, it->question, it->answer, r->agent, &u, &n, &stop) < 0)
        return swift_error_at(it->file, it->line, "cannot render the tool-call prompt");
    if (stop >= 0)
        swift_eval_add_eos(r, stop);
    to_ids(u, n, out);
    return 0;
}

/* ---- feeding sequences through the cache in chunks ---- */

int swift_eval_feed_all(struct swift_eval_runner *r, const struct swift_eval_feed *f, int nf,
                        swift_eval_logit_fn fn, void *ctx)
{
    struct swift_kv *kv = &r->kv;
    int M = kv->max_tokens;
    int32_t *tok = swift_xmalloc((size_t)M * sizeof(int32_t));
    int *rowof = swift_xmalloc((size_t)M * sizeof(int));
    int *want = swift_xmalloc(SWIFT_EVAL_MAX_WANT * sizeof(int));
    int *wf = swift_xmalloc(SWIFT_EVAL_MAX_WANT * sizeof(int)),
        *wp = swift_xmalloc(SWIFT_EVAL_MAX_WANT * sizeof(int));
    int rc = 0;
    int fi = 0, pi = 0;
    while (fi < nf && rc == 0) {
        int N = 0, nw = 0;
        while (fi < nf && N < M && nw < SWIFT_EVAL_MAX_WANT) {
            const struct swift_eval_feed *x = &f[fi];
            if (pi < x->n) {
                tok[N] = x->ids[pi];
                rowof[N] = x->row;
                if (x->wantm ? x->wantm[pi] != 0 : pi >= x->want_from) {
                    want[nw] = N;
                    wf[nw] = fi;
                    wp[nw++] = pi;
                }
                N++;
                pi++;
            }
            if (pi >= x->n) {
                fi++;
                pi = 0;
            }
        }
        if (N == 0)
            continue;
        double t0 = swift_eval_now();
        if (swift_kv_forward(kv, tok, rowof, N, want, nw, r->logits) < 0) {
            rc = -1;
            break;
        }
        r->fwd_s += swift_eval_now() - t0;
        r->tokens += N;
        for (int w = 0; w < nw; w++)
            fn(ctx, &f[wf[w]], wp[w], r->logits + (size_t)w * r->V);
    }
    free(tok);
    free(rowof);
    free(want);
    free(wf);
    free(wp);
    return rc;
}

/* A cache of at least rows x need tokens. It grows only (in steps of 64 tokens, up to
 * --max-length), so its size follows the longest batch seen, not --max-length. */
int swift_eval_kv_ensure(struct swift_eval_runner *r, int rows, int need)
{
    if (r->have_kv && r->kv.rows >= rows && r->kv.cap >= need)
        return 0;
    int cap = (need + 63) / 64 * 64;
    if (r->have_kv && r->kv.cap > cap)
        cap = r->kv.cap;
    if (cap > r->o->max_length)
        cap = r->o->max_length > need ? r->o->max_length : need;
    if (r->have_kv)
        swift_kv_release(&r->kv);
    r->have_kv = 0;
    long mt = (long)rows * cap;
    if (mt > 8192)
        mt = 8192;
    if (mt < cap)
        mt = cap;
    if (swift_kv_init(&r->kv, &r->m, rows, cap, (int)mt) < 0)
        return -1;
    r->have_kv = 1;
    return 0;
}

void swift_eval_batch_span(const char *name, int64_t t0, long batch, long items, long tokens)
{
    if (!swift_trace_enabled())
        return;
    struct swift_targ a[3] = {
        SWIFT_TARG_I("batch", batch), SWIFT_TARG_I("items", items), SWIFT_TARG_I("tokens", tokens)};
    int64_t t1 = swift_trace_now();
    swift_trace_span("eval", name, t0, t1, a, 3);
    if (t1 > t0)
        swift_trace_counter("tokens/s", (double)tokens / ((double)(t1 - t0) * 1e-9));
}

/* ---- few-shot and prompts ---- */

int swift_eval_shots_for(struct swift_eval_runner *r, struct swift_eval_shots *s,
                         struct swift_eval_set *set, size_t i)
{
    const struct swift_eval_opts *o = r->o;
    s->n = 0;
    if (o->few_shot <= 0)
        return 0;
    if (!s->list)
        s->list = swift_xcalloc((size_t)o->few_shot, sizeof(*s->list));
    if (o->task == SWIFT_EVAL_MMLU) {
        const struct swift_eval_item *it = &set->items[i];
        if (!s->dev_file || strcmp(s->dev_file, it->file)) {
            swift_eval_set_release(&s->dev);
            swift_eval_set_init(&s->dev);
            free(s->dev_file);
            s->dev_file = swift_xstrdup(it->file);
            char *dev = swift_eval_mmlu_dev_path(it->file);
            if (!dev)
                return swift_error_at(it->file,
                                      0,
                                      "no dev file for %d-shot prompts (expected "
                                      "../dev/%s_dev.csv)",
                                      o->few_shot,
                                      it->subject);
            int rc = swift_eval_read(SWIFT_EVAL_MMLU, dev, &s->dev);
            free(dev);
            if (rc < 0)
                return -1;
        }
        for (size_t k = 0; k < s->dev.n && s->n < o->few_shot; k++)
            s->list[s->n++] = &s->dev.items[k];
        return 0;
    }
    for (size_t k = 0; k < set->n && s->n < o->few_shot; k++)
        s->list[s->n++] = &set->items[k];
    return 0;
}

void swift_eval_shots_free(struct swift_eval_shots *s)
{
    swift_eval_set_release(&s->dev);
    free(s->dev_file);
    free(s->list);
}

/* Keep the last `keep` tokens of ids (left truncation of long prompts). */
void swift_eval_left_truncate(struct swift_eval_ids *x, int keep)
{
    if (keep < 1)
        keep = 1;
    if (x->n <= keep)
        return;
    memmove(x->v, x->v + (x->n - keep), (size_t)keep * sizeof(int32_t));
    x->n = keep;
}

void swift_eval_add_eos(struct swift_eval_runner *r, long id)
{
    if (id < 0 || id >= r->V || r->neos >= 8)
        return;
    for (int k = 0; k < r->neos; k++)
        if (r->eos[k] == id)
            return;
    r->eos[r->neos++] = (int32_t)id;
}
