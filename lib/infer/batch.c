/* batch — swift-infer's batch mode over the engine (see batch.h). */
#include "lib/infer/batch.h"
#include "lib/infer/engine.h"
#include "lib/infer/image.h"
#include "lib/infer/openai.h"

#include "kernels/ops.h"
#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/core/jsonl.h"
#include "lib/core/trace.h"
#include "lib/model/model.h"
#include "lib/preprocess/template.h"
#include "lib/preprocess/tokenizer.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/core/banned.h"

void swift_infer_opts_init(struct swift_infer_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->engine = swift_engine_defaults();
}

/* ---- stop signals ---- */

static volatile sig_atomic_t stop_flag;
static void on_stop(int sig)
{
    (void)sig;
    stop_flag = 1;
}

/* ---- state ---- */

struct job {
    long line;       /* input line */
    char *custom_id; /* owned; NULL when the line has none */
    json_t *out;     /* the output line once answered (or kept) */
    int running;     /* in the engine */
    int64_t eng_id;  /* swift_engine_add's id while running */
    struct swift_oai_request rq;
    struct swift_oai_choice *ch;
    int nleft; /* choices still going */
    int prompt_tokens;
    int64_t t0, t_first; /* trace clock: queued, first token */
    struct batch *b;
};

struct batch {
    const struct swift_infer_opts *o;
    char *base; /* the input file's directory: a row's relative image paths (NULL: stdin) */
    struct swift_infer_model im; /* the model, tokenizer, template, engine (load.c) */
    const char *model_name;
    json_t *kept;   /* custom_id -> line of an earlier output */
    json_t *seen;   /* custom_ids of the input so far */
    struct job **q; /* unwritten jobs in input order: q[head..tail) */
    size_t head, tail, cap;
    int inflight;
    FILE *out;
    long answered, errors, reused;
};

static void job_free(struct job *j)
{
    if (j->ch) {
        for (int c = 0; c < j->rq.sampling.n; c++)
            swift_oai_choice_release(&j->ch[c]);
        free(j->ch);
    }
    if (j->rq.body)
        swift_oai_request_release(&j->rq);
    json_decref(j->out);
    free(j->custom_id);
    free(j);
}

/* A short stable hex tag of the custom_id (or line) for the ids of the answer. */
static void tag_of(const struct job *j, char *out, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    const char *s = j->custom_id ? j->custom_id : "";
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    h ^= (uint64_t)j->line * 0x9e3779b97f4a7c15ULL * (j->custom_id == NULL);
    snprintf(out, n, "%016llx", (unsigned long long)h);
}

static void answer(struct job *j, int status, json_t *body)
{
    char tag[24], id[40], rid[40];
    tag_of(j, tag, sizeof(tag));
    snprintf(id, sizeof(id), "batch_req_%s", tag);
    snprintf(rid, sizeof(rid), "req_%s", tag);
    j->out = swift_oai_batch_line(id, j->custom_id, status, rid, body);
    if (status == 200)
        j->b->answered++;
    else
        j->b->errors++;
}

static void answer_error(struct job *j, const struct swift_oai_error *er)
{
    answer(j, er->status, swift_oai_error_json(er));
}

static void line_error(struct job *j, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void line_error(struct job *j, const char *code, const char *fmt, ...)
{
    char msg[512], tag[24], id[40];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    tag_of(j, tag, sizeof(tag));
    snprintf(id, sizeof(id), "batch_req_%s", tag);
    j->out = swift_oai_batch_error_line(id, j->custom_id, code, msg);
    j->b->errors++;
}

/* ---- a request's life ---- */

static void job_done(struct job *j)
{
    struct batch *b = j->b;
    char tag[24], id[48];
    tag_of(j, tag, sizeof(tag));
    int chat = j->rq.kind == SWIFT_OAI_CHAT;
    snprintf(id, sizeof(id), "%s-%s", chat ? "chatcmpl" : "cmpl", tag);
    long created = (long)time(NULL);
    int n = j->rq.sampling.n;
    json_t *body = chat ? swift_oai_chat_response(&j->rq,
                                                  id,
                                                  created,
                                                  b->model_name,
                                                  j->ch,
                                                  n,
                                                  j->prompt_tokens,
                                                  strtoull(tag, NULL, 16))
                        : swift_oai_completion_response(
                              &j->rq, id, created, b->model_name, j->ch, n, j->prompt_tokens);
    long ctoks = 0;
    for (int c = 0; c < n; c++)
        ctoks += j->ch[c].completion_tokens;
    int64_t t1 = swift_trace_now();
    swift_trace_span("infer",
                     "request",
                     j->t0,
                     t1,
                     (struct swift_targ[]){SWIFT_TARG_I("req", j->eng_id),
                                           SWIFT_TARG_I("line", j->line),
                                           SWIFT_TARG_I("prompt_tokens", j->prompt_tokens),
                                           SWIFT_TARG_I("completion_tokens", ctoks),
                                           SWIFT_TARG_I("n", n),
                                           SWIFT_TARG_D("ttft_s", (j->t_first - j->t0) * 1e-6)},
                     6);
    answer(j, 200, body);
    for (int c = 0; c < n; c++)
        swift_oai_choice_release(&j->ch[c]);
    free(j->ch);
    j->ch = NULL;
    swift_oai_request_release(&j->rq);
    j->running = 0;
    b->inflight--;
}

static int on_token(void *ctx, const struct swift_engine_event *ev)
{
    struct job *j = ctx;
    if (!j->t_first)
        j->t_first = swift_trace_now();
    if (ev->choice < 0 || ev->choice >= j->rq.sampling.n)
        return 0;
    struct swift_oai_choice *c = &j->ch[ev->choice];
    if (c->finish != SWIFT_FINISH_NONE)
        return 1;
    int stop = swift_oai_choice_add(c, &j->rq, j->b->im.tok, ev);
    if (ev->finish == SWIFT_FINISH_ABORT) {
        if (--j->nleft == 0) { /* cancelled (a stop signal): no answer */
            j->running = 0;
            j->b->inflight--;
        }
        return 0;
    }
    if (stop || ev->finish != SWIFT_FINISH_NONE) {
        if (--j->nleft == 0)
            job_done(j);
    }
    return stop;
}

/* Prompt ids of a parsed request; 0, or -1 with er. */
static int prompt_of(struct batch *b, struct job *j, int32_t **ids, int *n,
                     struct swift_oai_error *er)
{
    if (j->rq.kind == SWIFT_OAI_COMPLETION)
        return swift_oai_prompt_ids(&j->rq, b->im.st, b->im.tok, ids, n, er);
    if (!b->im.tpl)
        return swift_oai_fail(er,
                              400,
                              "messages",
                              NULL,
                              "the model's tokenizer has no chat template swift-infer knows; "
                              "start it with --template NAME (%s)",
                              SWIFT_TEMPLATE_NAMES);
    struct swift_encoded e = {0};
    j->rq.conv.agent = b->im.agent;
    if (swift_oai_render_chat(&j->rq, b->im.tpl, b->im.st, b->im.tok, &e, er) < 0) {
        swift_encoded_release(&e);
        return -1;
    }
    *n = (int)e.tok.n;
    *ids = swift_xmalloc((e.tok.n ? e.tok.n : 1) * sizeof(int32_t));
    for (size_t i = 0; i < e.tok.n; i++)
        (*ids)[i] = (int32_t)e.tok.ids[i];
    swift_encoded_release(&e);
    return 0;
}

/* Submit a parsed request to the engine, or answer it with its error. */
static void submit(struct batch *b, struct job *j)
{
    struct swift_oai_error er = {0};
    int32_t *ids = NULL;
    int n = 0;
    struct swift_infer_pixels px = {0};
    if (prompt_of(b, j, &ids, &n, &er) < 0 ||
        swift_infer_images(&b->im, &j->rq, b->base, &ids, &n, &px, &er) < 0) {
        free(ids);
        answer_error(j, &er);
        swift_oai_request_release(&j->rq);
        return;
    }
    struct swift_sampling s = j->rq.sampling;
    if (n >= b->im.max_len) {
        swift_oai_fail(&er,
                       400,
                       j->rq.kind == SWIFT_OAI_CHAT ? "messages" : "prompt",
                       NULL,
                       "This model's maximum context length is %d tokens. However, your request "
                       "has %d input tokens. Please reduce the length of the input.",
                       b->im.max_len,
                       n);
    } else if (s.max_tokens == 0 || s.max_tokens > b->im.max_len - n) {
        if (s.max_tokens > b->im.max_len - n)
            swift_oai_fail(&er,
                           400,
                           "max_tokens",
                           NULL,
                           "'max_tokens' is too large: %d. This model's maximum context length "
                           "is %d tokens and your request has %d input tokens (%d > %d - %d).",
                           s.max_tokens,
                           b->im.max_len,
                           n,
                           s.max_tokens,
                           b->im.max_len,
                           n);
        else
            s.max_tokens = b->im.max_len - n;
    }
    if (er.status) {
        free(ids);
        swift_infer_pixels_release(&px);
        answer_error(j, &er);
        swift_oai_request_release(&j->rq);
        return;
    }
    j->ch = swift_xcalloc((size_t)s.n, sizeof(*j->ch));
    j->nleft = s.n;
    j->prompt_tokens = n;
    j->t0 = swift_trace_now();
    char err[256];
    struct swift_engine_images ei = {
        .pixels = px.pixels, .npatches = px.npatches, .grid_thw = px.grid, .nimages = px.nimages};
    int64_t id = swift_engine_add_images(b->im.eng, ids, n, &ei, &s, on_token, j, err, sizeof(err));
    free(ids);
    swift_infer_pixels_release(&px);
    if (id < 0) {
        swift_oai_fail(&er, 400, NULL, NULL, "%s", err);
        for (int c = 0; c < s.n; c++)
            swift_oai_choice_release(&j->ch[c]);
        free(j->ch);
        j->ch = NULL;
        answer_error(j, &er);
        swift_oai_request_release(&j->rq);
        return;
    }
    j->running = 1;
    j->eng_id = id;
    b->inflight++;
}

/* ---- input lines ---- */

/* Classify one input line: a Batch API request, an ms-swift row, or an error line. */
static void read_job(struct batch *b, struct job *j, const char *line, size_t len, const char *name)
{
    json_error_t je;
    json_t *v = json_loadb(line, len, 0, &je);
    if (!json_is_object(v)) {
        json_decref(v);
        line_error(
            j, "invalid_json", "%s:%ld: %s", name, j->line, v ? "expected a JSON object" : je.text);
        return;
    }
    json_t *cid = json_object_get(v, "custom_id"), *body = NULL, *row = NULL;
    enum swift_oai_kind kind = SWIFT_OAI_CHAT;
    int has_msgs = json_is_array(json_object_get(v, "messages")) ||
                   json_is_array(json_object_get(v, "conversations"));
    int batch_line = json_object_get(v, "url") || json_object_get(v, "body") || (cid && !has_msgs);
    if (json_is_string(cid))
        j->custom_id = swift_xstrdup(json_string_value(cid));
    else if (!batch_line && json_is_string(json_object_get(v, "id")))
        j->custom_id = swift_xstrdup(json_string_value(json_object_get(v, "id")));
    else if (!batch_line)
        j->custom_id = swift_asprintf("line-%ld", j->line);
    const char *url = json_string_value(json_object_get(v, "url"));
    const char *method = json_string_value(json_object_get(v, "method"));
    if (batch_line) {
        if (!j->custom_id)
            line_error(j, "missing_custom_id", "%s:%ld: no \"custom_id\" string", name, j->line);
        else if (method && strcmp(method, "POST"))
            line_error(j, "invalid_method", "%s:%ld: method must be POST", name, j->line);
        else if (!url || (strcmp(url, "/v1/chat/completions") && strcmp(url, "/v1/completions")))
            line_error(j,
                       "invalid_url",
                       "%s:%ld: url must be /v1/chat/completions or /v1/completions",
                       name,
                       j->line);
        else if (!json_is_object(json_object_get(v, "body")))
            line_error(j, "invalid_body", "%s:%ld: no \"body\" object", name, j->line);
        else {
            body = json_incref(json_object_get(v, "body"));
            kind = strcmp(url, "/v1/completions") ? SWIFT_OAI_CHAT : SWIFT_OAI_COMPLETION;
        }
    } else if (has_msgs) {
        row = json_incref(v);
    } else {
        line_error(j,
                   "invalid_request",
                   "%s:%ld: neither a Batch API request (custom_id, url, body) nor a row with "
                   "\"messages\"",
                   name,
                   j->line);
    }
    json_decref(v);
    if (!j->out && j->custom_id) {
        if (json_object_get(b->seen, j->custom_id))
            line_error(j,
                       "duplicate_custom_id",
                       "%s:%ld: custom_id '%s' is used by an earlier line",
                       name,
                       j->line,
                       j->custom_id);
        json_object_set_new(b->seen, j->custom_id, json_true());
    }
    if (!j->out && j->custom_id && json_object_get(b->kept, j->custom_id)) {
        j->out = json_incref(json_object_get(b->kept, j->custom_id));
        json_object_del(b->kept, j->custom_id);
        b->reused++;
    }
    if (!j->out) {
        struct swift_oai_error er;
        int rc = row ? swift_oai_parse_row(row, b->o->served_name, &j->rq, &er)
                     : swift_oai_parse(body, kind, b->o->served_name, &j->rq, &er);
        if (rc < 0)
            answer_error(j, &er);
        else
            submit(b, j);
    }
    json_decref(body);
    json_decref(row);
}

/* ---- output ---- */

static int write_line(struct batch *b, json_t *line)
{
    char *s = json_dumps(line, JSON_COMPACT | JSON_PRESERVE_ORDER);
    int rc = s && fputs(s, b->out) >= 0 && fputc('\n', b->out) != EOF ? 0 : -1;
    free(s);
    if (rc < 0)
        return swift_error_errno("cannot write '%s'", b->o->output ? b->o->output : "<stdout>");
    return 0;
}

/* Write the answered jobs at the head of the queue (input order). */
static int flush_head(struct batch *b)
{
    while (b->head < b->tail && b->q[b->head]->out) {
        struct job *j = b->q[b->head];
        int rc = write_line(b, j->out);
        job_free(j);
        b->q[b->head++] = NULL;
        if (rc < 0)
            return -1;
    }
    if (b->head > 0 && b->head >= b->tail - b->head) { /* keep q as long as the window */
        memmove(b->q, b->q + b->head, (b->tail - b->head) * sizeof(*b->q));
        b->tail -= b->head;
        b->head = 0;
    }
    return 0;
}

/* After a stop: every answered job (skipping those cut short), then the kept lines of an earlier
 * run the input did not reach. */
static int flush_rest(struct batch *b)
{
    int rc = 0;
    for (size_t i = b->head; i < b->tail; i++) {
        struct job *j = b->q[i];
        if (j->out && rc == 0)
            rc = write_line(b, j->out);
        job_free(j);
    }
    b->head = b->tail = 0;
    const char *k;
    json_t *v;
    json_object_foreach(b->kept, k, v)
    {
        if (rc == 0)
            rc = write_line(b, v);
    }
    return rc;
}

/* The lines of an earlier output with a custom_id, to keep (resume). */
static int load_kept(struct batch *b, const char *path)
{
    FILE *fp = fopen(path, "r");
    if (!fp)
        return 0; /* no earlier run */
    struct swift_jsonl r;
    swift_jsonl_init_fp(&r, fp, path, SWIFT_JSONL_SKIP_INVALID);
    json_t *v;
    int rc;
    while ((rc = swift_jsonl_next(&r, &v)) > 0) {
        const char *cid = json_string_value(json_object_get(v, "custom_id"));
        if (cid && json_is_object(v))
            json_object_set(b->kept, cid, v);
        json_decref(v);
    }
    swift_jsonl_close(&r);
    fclose(fp);
    if (json_object_size(b->kept))
        swift_info("resuming: %zu answers in '%s' are kept", json_object_size(b->kept), path);
    return rc < 0 ? -1 : 0;
}

/* ---- setup ---- */

static void release(struct batch *b)
{
    for (size_t i = b->head; i < b->tail; i++)
        job_free(b->q[i]);
    free(b->q);
    swift_infer_release(&b->im);
    free(b->base);
    json_decref(b->kept);
    json_decref(b->seen);
}

/* ---- the loop ---- */

static struct job *push_job(struct batch *b, long line)
{
    if (b->tail == b->cap) {
        b->cap = b->cap ? b->cap * 2 : 64;
        b->q = swift_xrealloc(b->q, b->cap * sizeof(*b->q));
    }
    struct job *j = swift_xcalloc(1, sizeof(*j));
    j->line = line;
    j->b = b;
    b->q[b->tail++] = j;
    return j;
}

/* Read, submit, step, write until the input is done and answered, or a stop signal. */
static int run_loop(struct batch *b, struct swift_jsonl *in)
{
    int max_inflight = 2 * (b->o->engine.max_num_seqs > 0 ? b->o->engine.max_num_seqs : 16);
    size_t window = (size_t)max_inflight * 8 + 64;
    int eof = 0;
    while (!stop_flag) {
        while (!eof && b->inflight < max_inflight && b->tail - b->head < window && !stop_flag) {
            char *line;
            long n = swift_jsonl_next_line(in, &line);
            if (n == -2) {
                eof = 1;
                break;
            }
            if (n < 0)
                return -1;
            const char *p = line;
            while (*p == ' ' || *p == '\t')
                p++;
            if (!*p)
                continue; /* blank lines are no requests */
            read_job(b, push_job(b, in->line), line, (size_t)n, swift_jsonl_name(in));
        }
        if (flush_head(b) < 0)
            return -1;
        if (b->inflight == 0) {
            if (eof)
                return 0;
            continue;
        }
        if (swift_engine_step(b->im.eng) < 0)
            return -1;
    }
    return 1;
}

static void catch_signals(struct sigaction *old)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, &old[0]);
    sigaction(SIGUSR1, &sa, &old[1]);
    sigaction(SIGINT, &sa, &old[2]);
}

static void restore_signals(const struct sigaction *old)
{
    sigaction(SIGTERM, &old[0], NULL);
    sigaction(SIGUSR1, &old[1], NULL);
    sigaction(SIGINT, &old[2], NULL);
}

/* Cancel what is in flight (each choice's abort event comes back through on_token). */
static void cancel_all(struct batch *b)
{
    for (size_t i = b->head; i < b->tail; i++)
        if (b->q[i]->running)
            swift_engine_cancel(b->im.eng, b->q[i]->eng_id);
}

int swift_infer_batch_run(const struct swift_infer_opts *o)
{
    struct batch b = {.o = o, .kept = json_object(), .seen = json_object()};
    b.model_name = o->served_name ? o->served_name : o->model;
    if (o->input && strcmp(o->input, "-") && strrchr(o->input, '/'))
        b.base = swift_asprintf("%.*s", (int)(strrchr(o->input, '/') - o->input), o->input);
    stop_flag = 0;
    int rc = swift_infer_load(&b.im, o);
    if (rc < 0) {
        release(&b);
        return rc;
    }
    if (o->output && load_kept(&b, o->output) < 0) {
        release(&b);
        return SWIFT_FAILED;
    }
    struct swift_jsonl in;
    if (swift_jsonl_open(&in, o->input ? o->input : "-", 0) < 0) {
        release(&b);
        return SWIFT_FAILED;
    }
    struct swift_atomic af = {0};
    if (o->output) {
        if (swift_atomic_open(&af, o->output) < 0) {
            swift_jsonl_close(&in);
            release(&b);
            return SWIFT_FAILED;
        }
        b.out = af.fp;
    } else {
        b.out = stdout;
    }
    struct sigaction old[3];
    catch_signals(old);
    int lr = run_loop(&b, &in);
    restore_signals(old);
    swift_jsonl_close(&in);
    if (lr > 0)
        cancel_all(&b);
    if (lr >= 0 && flush_rest(&b) < 0)
        lr = -1;
    if (o->output) {
        if (lr < 0)
            swift_atomic_abort(&af);
        else if (swift_atomic_commit(&af) < 0)
            lr = -1;
    }
    struct swift_engine_stats es;
    swift_engine_stats(b.im.eng, &es);
    swift_info("%ld answered, %ld errors, %ld kept from before; %ld prompt and %ld generated "
               "tokens in %ld steps, %ld preemptions",
               b.answered,
               b.errors,
               b.reused,
               es.prefill_tokens,
               es.generated_tokens,
               es.steps,
               es.preemptions);
    release(&b);
    if (lr > 0) {
        swift_info("stopped by a signal: the answers so far are written; run again to answer "
                   "the rest");
        return SWIFT_STOPPED;
    }
    return lr < 0 ? SWIFT_FAILED : 0;
}
