/* eval/remote — the OpenAI API client of swift-eval --eval-url (see remote.h): libcurl's multi
 * interface keeps several requests in flight on one thread. */
#include "lib/eval/remote.h"
#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/trace.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

#define MAX_ANSWER_BYTES (64L << 20)

static int ends_with(const char *s, size_t n, const char *suf)
{
    size_t k = strlen(suf);
    return n >= k && !memcmp(s + n - k, suf, k);
}

int swift_eval_remote_init(struct swift_eval_remote *rm, const char *url, int chat,
                           const char *api_key, int inflight)
{
    memset(rm, 0, sizeof(*rm));
    if (strncmp(url, "http://", 7) && strncmp(url, "https://", 8)) {
        swift_usage("--eval-url '%s': not an http:// or https:// URL", url);
        return -1;
    }
    size_t n = strlen(url);
    while (n > 8 && url[n - 1] == '/')
        n--;
    if (ends_with(url, n, "/chat/completions")) {
        n -= strlen("/chat/completions");
        chat = 1;
    } else if (ends_with(url, n, "/completions")) {
        n -= strlen("/completions");
        chat = 0;
    }
    if (ends_with(url, n, "/v1"))
        n -= 3;
    const char *path = chat ? "/v1/chat/completions" : "/v1/completions";
    size_t cap = n + strlen(path) + 1;
    rm->endpoint = swift_xmalloc(cap);
    snprintf(rm->endpoint, cap, "%.*s%s", (int)n, url, path);
    rm->chat = chat;
    rm->api_key = api_key && *api_key ? api_key : NULL;
    rm->inflight = inflight > 0 ? inflight : 1;
    rm->timeout_s = 600;
    return 0;
}

void swift_eval_remote_release(struct swift_eval_remote *rm)
{
    free(rm->endpoint);
    rm->endpoint = NULL;
}

void swift_eval_answer_release(struct swift_eval_answer *a)
{
    free(a->text);
    a->text = NULL;
}

static long usage_int(json_t *u, const char *k)
{
    json_t *v = json_object_get(u, k);
    return json_is_integer(v) ? (long)json_integer_value(v) : -1;
}

/* A non-200 answer: OpenAI's error object when there is one. */
static int parse_error(json_t *j, long status, char *err, size_t cap)
{
    json_t *e = json_object_get(j, "error");
    const char *msg = json_string_value(json_object_get(e, "message"));
    const char *type = json_string_value(json_object_get(e, "type"));
    if (msg)
        snprintf(err,
                 cap,
                 "HTTP %ld: %s%s%s%s",
                 status,
                 msg,
                 type ? " (" : "",
                 type ? type : "",
                 type ? ")" : "");
    else
        snprintf(err, cap, "HTTP %ld without an OpenAI error object", status);
    return -1;
}

int swift_eval_remote_parse(const char *body, size_t len, long status, int chat,
                            struct swift_eval_answer *a, char *err, size_t errcap)
{
    memset(a, 0, sizeof(*a));
    json_error_t je;
    json_t *j = json_loadb(body, len, 0, &je);
    int rc = -1;
    if (status != 200) {
        rc = parse_error(j, status, err, errcap);
        json_decref(j);
        return rc;
    }
    if (!json_is_object(j)) {
        snprintf(err, errcap, "malformed response: %s", j ? "not a JSON object" : je.text);
        json_decref(j);
        return -1;
    }
    json_t *c0 = json_array_get(json_object_get(j, "choices"), 0);
    json_t *t = chat ? json_object_get(json_object_get(c0, "message"), "content")
                     : json_object_get(c0, "text");
    if (!json_is_object(c0))
        snprintf(err, errcap, "malformed response: no choices[0]");
    else if (!json_is_string(t) && !(chat && json_is_null(t)))
        snprintf(err,
                 errcap,
                 "malformed response: choices[0].%s is not a string",
                 chat ? "message.content" : "text");
    else {
        a->text = swift_xstrdup(json_is_string(t) ? json_string_value(t) : "");
        json_t *u = json_object_get(j, "usage");
        a->prompt_tokens = usage_int(u, "prompt_tokens");
        a->completion_tokens = usage_int(u, "completion_tokens");
        const char *fr = json_string_value(json_object_get(c0, "finish_reason"));
        snprintf(a->finish_reason, sizeof(a->finish_reason), "%s", fr ? fr : "");
        rc = 0;
    }
    json_decref(j);
    return rc;
}

/* ---- transfers ---- */

struct slot {
    CURL *h;
    size_t i; /* the request it carries */
    int busy;
    char *buf;
    size_t len, cap;
    int too_big;
    int64_t t0;
};

static size_t on_data(char *p, size_t sz, size_t nm, void *ud)
{
    struct slot *s = ud;
    size_t n = sz * nm;
    if (s->len + n > (size_t)MAX_ANSWER_BYTES) {
        s->too_big = 1;
        return 0;
    }
    if (s->len + n + 1 > s->cap) {
        s->cap = (s->len + n + 1) * 2;
        s->buf = swift_xrealloc(s->buf, s->cap);
    }
    memcpy(s->buf + s->len, p, n);
    s->len += n;
    s->buf[s->len] = 0;
    return n;
}

static void slot_start(CURLM *m, struct slot *s, size_t i, const char *body, struct curl_slist *hdr,
                       const struct swift_eval_remote *rm)
{
    if (!s->h && !(s->h = curl_easy_init()))
        abort();
    CURL *h = s->h;
    curl_easy_setopt(h, CURLOPT_URL, rm->endpoint);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, s);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, rm->timeout_s);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "swift-eval");
    s->i = i;
    s->busy = 1;
    s->len = 0;
    s->too_big = 0;
    s->t0 = swift_trace_now();
    curl_multi_add_handle(m, h);
}

/* A finished transfer: parse, trace, hand over. Returns 0 or -1 (reported). */
static int slot_done(struct slot *s, CURLcode res, const struct swift_eval_remote *rm,
                     const char *label, swift_eval_remote_fn fn, void *ctx)
{
    char err[1024];
    long status = 0;
    curl_easy_getinfo(s->h, CURLINFO_RESPONSE_CODE, &status);
    struct swift_eval_answer a = {0};
    int rc;
    if (res != CURLE_OK)
        rc = swift_error("%s: %s: %s",
                         rm->endpoint,
                         label,
                         s->too_big ? "answer larger than 64 MiB" : curl_easy_strerror(res));
    else if (swift_eval_remote_parse(
                 s->buf ? s->buf : "", s->len, status, rm->chat, &a, err, sizeof(err)) < 0)
        rc = swift_error("%s: %s: %s", rm->endpoint, label, err);
    else
        rc = 0;
    struct swift_targ ta[] = {SWIFT_TARG_I("req", (int64_t)s->i + 1),
                              SWIFT_TARG_I("status", status),
                              SWIFT_TARG_I("prompt_tokens", a.prompt_tokens),
                              SWIFT_TARG_I("completion_tokens", a.completion_tokens)};
    swift_trace_span("infer", "request", s->t0, swift_trace_now(), ta, 4);
    if (rc == 0)
        rc = fn(ctx, s->i, &a);
    swift_eval_answer_release(&a);
    return rc;
}

int swift_eval_remote_post_all(const struct swift_eval_remote *rm, char *const *bodies,
                               const char *const *labels, size_t n, swift_eval_remote_fn fn,
                               void *ctx)
{
    CURLM *m = curl_multi_init();
    if (!m)
        abort();
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    char *auth = NULL;
    if (rm->api_key) {
        size_t cap = strlen(rm->api_key) + 32;
        auth = swift_xmalloc(cap);
        snprintf(auth, cap, "Authorization: Bearer %s", rm->api_key);
        hdr = curl_slist_append(hdr, auth);
    }
    int ns = rm->inflight < (long)n ? rm->inflight : (int)(n ? n : 1);
    struct slot *sl = swift_xcalloc((size_t)ns, sizeof(*sl));
    size_t next = 0, done = 0;
    int rc = 0;
    while (rc == 0 && done < n) {
        for (int k = 0; k < ns && next < n; k++)
            if (!sl[k].busy) {
                slot_start(m, &sl[k], next, bodies[next], hdr, rm);
                next++;
            }
        int running = 0, left;
        curl_multi_perform(m, &running);
        CURLMsg *msg;
        while (rc == 0 && (msg = curl_multi_info_read(m, &left))) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            int k = 0;
            while (k < ns && sl[k].h != msg->easy_handle)
                k++;
            CURLcode res = msg->data.result;
            curl_multi_remove_handle(m, sl[k].h);
            sl[k].busy = 0;
            done++;
            rc = slot_done(&sl[k], res, rm, labels[sl[k].i], fn, ctx);
        }
        if (rc == 0 && running)
            curl_multi_poll(m, NULL, 0, 1000, NULL);
    }
    for (int k = 0; k < ns; k++) {
        if (sl[k].busy)
            curl_multi_remove_handle(m, sl[k].h);
        if (sl[k].h)
            curl_easy_cleanup(sl[k].h);
        free(sl[k].buf);
    }
    free(sl);
    curl_multi_cleanup(m);
    curl_slist_free_all(hdr);
    free(auth);
    return rc;
}
