#include "lib/download/http.h"
#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/strbuf.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/core/banned.h"

#ifndef SWIFT_VERSION
#define SWIFT_VERSION "0"
#endif

void swift_sleep(double seconds)
{
    if (seconds <= 0)
        return;
    struct timespec ts = {(time_t)seconds, (long)((seconds - floor(seconds)) * 1e9)};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

void swift_http_init(struct swift_http *h, const struct swift_http_opts *opts)
{
    memset(h, 0, sizeof(*h));
    if (opts)
        h->o = *opts;
    if (h->o.retries < 0)
        h->o.retries = 5;
    if (h->o.retry_base <= 0)
        h->o.retry_base = 1;
    if (h->o.retry_max <= 0)
        h->o.retry_max = 60;
    if (h->o.connect_timeout <= 0)
        h->o.connect_timeout = 30;
    if (h->o.stall_timeout <= 0)
        h->o.stall_timeout = 60;
    h->curl = curl_easy_init();
    if (!h->curl)
        abort();
}

void swift_http_release(struct swift_http *h)
{
    if (h->curl)
        curl_easy_cleanup(h->curl);
    h->curl = NULL;
}

void swift_http_resp_release(struct swift_http_resp *r)
{
    free(r->body);
    free(r->etag);
    free(r->linked_etag);
    free(r->repo_commit);
    free(r->effective_url);
    memset(r, 0, sizeof(*r));
}

static void resp_reset(struct swift_http_resp *r)
{
    int attempts = r->attempts;
    swift_http_resp_release(r);
    r->linked_size = -1;
    r->content_length = -1;
    r->retry_after = -1;
    r->attempts = attempts;
}

/* ---- headers ---- */

struct hdr_state {
    struct swift_http_resp *r;
    long long range_start; /* from Content-Range of the last response, -1 when absent */
};

static char *dup_value(const char *v, size_t n)
{
    while (n && (*v == ' ' || *v == '\t')) {
        v++;
        n--;
    }
    while (n && (v[n - 1] == '\r' || v[n - 1] == '\n' || v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    /* ETags: W/"abc" -> abc */
    if (n >= 2 && v[0] == 'W' && v[1] == '/') {
        v += 2;
        n -= 2;
    }
    if (n >= 2 && v[0] == '"' && v[n - 1] == '"') {
        v++;
        n -= 2;
    }
    return swift_xstrndup(v, n);
}

static int header_is(const char *line, size_t n, const char *name, const char **val, size_t *vn)
{
    size_t k = strlen(name);
    if (n <= k || line[k] != ':' || strncasecmp(line, name, k))
        return 0;
    *val = line + k + 1;
    *vn = n - k - 1;
    return 1;
}

static size_t on_header(char *buf, size_t size, size_t nitems, void *ud)
{
    struct hdr_state *hs = ud;
    struct swift_http_resp *r = hs->r;
    size_t n = size * nitems;
    const char *v;
    size_t vn;
    if (n >= 5 && !strncmp(buf, "HTTP/", 5)) {
        /* a new response (after a redirect or a 100): per-response headers start again */
        r->retry_after = -1;
        r->content_length = -1;
        hs->range_start = -1;
        return n;
    }
    if (header_is(buf, n, "ETag", &v, &vn)) {
        if (!r->etag)
            r->etag = dup_value(v, vn);
    } else if (header_is(buf, n, "X-Linked-Etag", &v, &vn)) {
        if (!r->linked_etag)
            r->linked_etag = dup_value(v, vn);
    } else if (header_is(buf, n, "X-Repo-Commit", &v, &vn)) {
        if (!r->repo_commit)
            r->repo_commit = dup_value(v, vn);
    } else if (header_is(buf, n, "X-Linked-Size", &v, &vn)) {
        char *s = dup_value(v, vn);
        char *end;
        long long x = strtoll(s, &end, 10);
        if (end != s && !*end && x >= 0 && r->linked_size < 0)
            r->linked_size = x;
        free(s);
    } else if (header_is(buf, n, "Content-Length", &v, &vn)) {
        char *s = dup_value(v, vn);
        char *end;
        long long x = strtoll(s, &end, 10);
        if (end != s && !*end && x >= 0)
            r->content_length = x;
        free(s);
    } else if (header_is(buf, n, "Content-Range", &v, &vn)) {
        char *s = dup_value(v, vn);
        unsigned long long a;
        if (sscanf(s, "bytes %llu-", &a) == 1)
            hs->range_start = (long long)a;
        free(s);
    } else if (header_is(buf, n, "Retry-After", &v, &vn)) {
        char *s = dup_value(v, vn);
        char *end;
        double x = strtod(s, &end);
        if (end != s && !*end && x >= 0) {
            r->retry_after = x;
        } else {
            time_t t = curl_getdate(s, NULL);
            if (t > 0)
                r->retry_after = difftime(t, time(NULL)) > 0 ? difftime(t, time(NULL)) : 0;
        }
        free(s);
    }
    return n;
}

/* ---- common setup ---- */

static struct curl_slist *setup(struct swift_http *h, const char *url, struct hdr_state *hs,
                                char *errbuf)
{
    CURL *c = h->curl;
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
    /* a private mirror's CA, named the way curl and requests users already do */
    static const char *const ca_vars[] = {
        "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", NULL};
    for (int i = 0; ca_vars[i]; i++) {
        const char *ca = getenv(ca_vars[i]);
        if (ca && *ca) {
            curl_easy_setopt(c, CURLOPT_CAINFO, ca);
            break;
        }
    }
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, h->o.connect_timeout);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, h->o.stall_timeout);
    curl_easy_setopt(c, CURLOPT_BUFFERSIZE, 512L * 1024);
    curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(
        c, CURLOPT_USERAGENT, h->o.user_agent ? h->o.user_agent : "swift-download/" SWIFT_VERSION);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, hs);
    errbuf[0] = 0;
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    struct curl_slist *hdrs = NULL;
    if (h->o.token && *h->o.token) {
        size_t n = strlen(h->o.token) + 32;
        char *a = swift_xmalloc(n);
        snprintf(a, n, "Authorization: Bearer %s", h->o.token);
        hdrs = curl_slist_append(hdrs, a);
        free(a);
    }
    hdrs = curl_slist_append(hdrs, "Accept-Encoding: identity");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    return hdrs;
}

static int retryable_curl(CURLcode rc)
{
    switch (rc) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
        return 1;
    default:
        return 0;
    }
}

static int retryable_status(long st)
{
    return st >= 500 || st == 408 || st == 429;
}

static double backoff(const struct swift_http *h, int attempt, double retry_after)
{
    double w = retry_after >= 0 ? retry_after : h->o.retry_base * pow(2.0, attempt);
    return w > h->o.retry_max ? h->o.retry_max : w;
}

static const char *why(CURLcode rc, const char *errbuf)
{
    return errbuf && *errbuf ? errbuf : curl_easy_strerror(rc);
}

/* ---- GET into memory ---- */

struct mem_state {
    char *buf;
    size_t len, cap, max;
    int too_big;
};

static size_t on_mem(char *p, size_t size, size_t nmemb, void *ud)
{
    struct mem_state *m = ud;
    size_t n = size * nmemb;
    if (m->len + n > m->max) {
        m->too_big = 1;
        return 0;
    }
    swift_str_append(&m->buf, &m->len, &m->cap, p, n);
    return n;
}

int swift_http_get(struct swift_http *h, const char *url, size_t max, struct swift_http_resp *r)
{
    memset(r, 0, sizeof(*r));
    for (int attempt = 0;; attempt++) {
        resp_reset(r);
        r->attempts = attempt + 1;
        struct hdr_state hs = {r, -1};
        char errbuf[CURL_ERROR_SIZE];
        struct curl_slist *hdrs = setup(h, url, &hs, errbuf);
        struct mem_state m = {0};
        m.max = max;
        curl_easy_setopt(h->curl, CURLOPT_WRITEFUNCTION, on_mem);
        curl_easy_setopt(h->curl, CURLOPT_WRITEDATA, &m);
        CURLcode rc = curl_easy_perform(h->curl);
        curl_slist_free_all(hdrs);
        curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &r->status);
        r->body = m.buf ? m.buf : swift_xstrdup("");
        r->len = m.len;
        if (m.too_big)
            return swift_error("%s: response larger than %zu bytes", url, max);
        char reason[CURL_ERROR_SIZE + 32];
        if (rc == CURLE_OK && !retryable_status(r->status))
            return 0;
        if (rc == CURLE_OK)
            snprintf(reason, sizeof(reason), "HTTP %ld", r->status);
        else if (retryable_curl(rc))
            snprintf(reason, sizeof(reason), "%s", why(rc, errbuf));
        else
            return swift_error("%s: %s", url, why(rc, errbuf));
        if (attempt >= h->o.retries) {
            if (rc == CURLE_OK)
                return 0; /* the caller words the final 5xx */
            return swift_error("%s: %s (gave up after %d attempts)", url, reason, attempt + 1);
        }
        double w = backoff(h, attempt, r->retry_after);
        swift_warn("%s: %s, retrying in %.1f s (attempt %d of %d)",
                   url,
                   reason,
                   w,
                   attempt + 2,
                   h->o.retries + 1);
        swift_sleep(w);
    }
}

/* ---- fetch into a partial file ---- */

#define SYNC_EVERY (16LL << 20)

/*
 * The SHA-256 of the partial file is computed by a second thread that reads the file back
 * (from the page cache) a little behind the writer: the resumed prefix and the new bytes are
 * hashed while the transfer runs, on another core, and a restart from zero simply restarts it.
 */
struct hasher {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int fd;
    struct swift_sha256 sha;
    long long hashed, avail; /* avail: bytes known to be in the file */
    int stop, err;
};

static void *hasher_main(void *arg)
{
    struct hasher *hs = arg;
    static const size_t bs = 1 << 20;
    char *buf = swift_xmalloc(bs);
    for (;;) {
        pthread_mutex_lock(&hs->mu);
        while (hs->hashed == hs->avail && !hs->stop)
            pthread_cond_wait(&hs->cv, &hs->mu);
        long long target = hs->avail;
        int stop = hs->stop;
        pthread_mutex_unlock(&hs->mu);
        if (hs->hashed == target && stop)
            break;
        while (hs->hashed < target) {
            size_t want = (size_t)(target - hs->hashed) < bs ? (size_t)(target - hs->hashed) : bs;
            ssize_t n = pread(hs->fd, buf, want, hs->hashed);
            if (n <= 0) {
                hs->err = n < 0 ? errno : EIO;
                free(buf);
                return NULL;
            }
            swift_sha256_update(&hs->sha, buf, (size_t)n);
            hs->hashed += n;
        }
    }
    free(buf);
    return NULL;
}

static int hasher_start(struct hasher *hs, const char *path, long long avail)
{
    memset(hs, 0, sizeof(*hs));
    hs->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (hs->fd < 0)
        return swift_error_errno("cannot read '%s'", path);
    if (swift_sha256_init(&hs->sha) < 0)
        abort();
    hs->avail = avail;
    pthread_mutex_init(&hs->mu, NULL);
    pthread_cond_init(&hs->cv, NULL);
    if (pthread_create(&hs->th, NULL, hasher_main, hs))
        abort();
    return 0;
}

static void hasher_publish(struct hasher *hs, long long avail)
{
    pthread_mutex_lock(&hs->mu);
    hs->avail = avail;
    pthread_cond_signal(&hs->cv);
    pthread_mutex_unlock(&hs->mu);
}

/* Wait for the hash of everything published; hex gets it (NULL: discard). 0 or -1 (errno). */
static int hasher_finish(struct hasher *hs, char hex[65])
{
    pthread_mutex_lock(&hs->mu);
    hs->stop = 1;
    pthread_cond_signal(&hs->cv);
    pthread_mutex_unlock(&hs->mu);
    pthread_join(hs->th, NULL);
    char tmp[65];
    swift_sha256_final(&hs->sha, hex ? hex : tmp);
    close(hs->fd);
    pthread_mutex_destroy(&hs->mu);
    pthread_cond_destroy(&hs->cv);
    if (hs->err) {
        errno = hs->err;
        return -1;
    }
    return 0;
}

struct fetch_state {
    struct swift_http_fetch *f;
    CURL *c;
    int fd; /* the partial file, O_APPEND */
    struct hasher hash;
    long long have;      /* bytes in the file */
    long long requested; /* range start asked for in this attempt */
    struct hdr_state *hs;
    int decided;        /* first body byte of this attempt seen */
    int sink;           /* body is an error page: do not write */
    int restart;        /* 206 with the wrong start: truncate and try again */
    int write_errno;    /* a write to disk failed */
    long long unsynced; /* bytes written since the last writeback was started */
    char errbody[256];
    size_t errlen;
};

static int truncate_part(struct fetch_state *s)
{
    hasher_finish(&s->hash, NULL);
    if (ftruncate(s->fd, 0) < 0)
        return -1;
    s->have = 0;
    return hasher_start(&s->hash, s->f->part_path, 0);
}

static size_t on_body(char *p, size_t size, size_t nmemb, void *ud)
{
    struct fetch_state *s = ud;
    size_t n = size * nmemb;
    if (!s->decided) {
        s->decided = 1;
        long st = 0;
        curl_easy_getinfo(s->c, CURLINFO_RESPONSE_CODE, &st);
        if (st == 206) {
            if (s->hs->range_start != s->have) {
                s->restart = 1;
                return 0;
            }
        } else if (st == 200) {
            if (s->have > 0 && truncate_part(s) < 0) {
                s->write_errno = errno ? errno : EIO;
                return 0;
            }
        } else {
            s->sink = 1;
        }
    }
    if (s->sink) {
        size_t k = sizeof(s->errbody) - 1 - s->errlen;
        if (k > n)
            k = n;
        memcpy(s->errbody + s->errlen, p, k);
        s->errlen += k;
        s->errbody[s->errlen] = 0;
        return n;
    }
    for (size_t off = 0; off < n;) {
        ssize_t w = write(s->fd, p + off, n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            s->write_errno = w < 0 ? errno : EIO;
            /* whatever part of the chunk reached the file stays there (and in the hash) */
            s->have += (long long)off;
            hasher_publish(&s->hash, s->have);
            return 0;
        }
        off += (size_t)w;
    }
    s->have += (long long)n;
    hasher_publish(&s->hash, s->have);
    /* start writeback as we go, so the fsync before the rename has little left to do */
    s->unsynced += (long long)n;
    if (s->unsynced >= SYNC_EVERY) {
        s->unsynced = 0;
        sync_file_range(s->fd, 0, 0, SYNC_FILE_RANGE_WRITE);
    }
    s->f->fetched += (long long)n;
    if (s->f->on_bytes)
        s->f->on_bytes(s->f->ctx, (long long)n);
    return n;
}

/* One request for the bytes from s->have on; records the status, times and effective URL. */
static CURLcode perform_attempt(struct swift_http *h, struct fetch_state *s, struct hdr_state *hs,
                                char *errbuf, long *st)
{
    struct swift_http_fetch *f = s->f;
    struct curl_slist *hdrs = setup(h, f->url, hs, errbuf);
    s->hs = hs;
    s->decided = s->sink = s->restart = s->write_errno = 0;
    s->errlen = 0;
    s->errbody[0] = 0;
    s->requested = s->have;
    char range[64];
    if (s->have > 0) {
        snprintf(range, sizeof(range), "%lld-", s->have);
        curl_easy_setopt(h->curl, CURLOPT_RANGE, range);
    }
    curl_easy_setopt(h->curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h->curl, CURLOPT_WRITEDATA, s);
    CURLcode cc = curl_easy_perform(h->curl);
    curl_slist_free_all(hdrs);
    *st = 0;
    curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, st);
    f->resp.status = *st;
    double tconn = 0, ttotal = 0;
    curl_easy_getinfo(h->curl, CURLINFO_APPCONNECT_TIME, &tconn);
    if (tconn <= 0)
        curl_easy_getinfo(h->curl, CURLINFO_CONNECT_TIME, &tconn);
    curl_easy_getinfo(h->curl, CURLINFO_TOTAL_TIME, &ttotal);
    f->connect_s = tconn;
    f->transfer_s += ttotal;
    char *eff = NULL;
    curl_easy_getinfo(h->curl, CURLINFO_EFFECTIVE_URL, &eff);
    if (eff) {
        free(f->resp.effective_url);
        f->resp.effective_url = swift_xstrdup(eff);
    }
    return cc;
}

/* What an attempt's outcome means: 0 the file is complete, 1 try again (reason says why; the
 * partial file was truncated when it cannot be continued), -1 failed for good (reported). */
static int judge_attempt(struct fetch_state *s, const struct hdr_state *hs, CURLcode cc, long st,
                         const char *errbuf, char *reason, size_t rlen)
{
    struct swift_http_fetch *f = s->f;
    if (s->write_errno) {
        errno = s->write_errno;
        return swift_error_errno("cannot write '%s'", f->part_path);
    }
    if (s->restart) {
        snprintf(reason,
                 rlen,
                 "server answered the range %lld- from byte %lld",
                 s->requested,
                 hs->range_start);
        if (truncate_part(s) < 0)
            return swift_error_errno("cannot truncate '%s'", f->part_path);
        return 1;
    }
    if (cc == CURLE_OK && (st == 200 || st == 206))
        return 0;
    if (cc == CURLE_OK && st == 416) {
        /* the partial file does not fit the remote one: start again */
        snprintf(reason, rlen, "HTTP 416 for range %lld-", s->requested);
        if (truncate_part(s) < 0)
            return swift_error_errno("cannot truncate '%s'", f->part_path);
        return 1;
    }
    if (cc == CURLE_OK && !retryable_status(st)) {
        f->http_error = (int)st;
        return swift_error("%s: HTTP %ld%s%.*s",
                           f->url,
                           st,
                           s->errlen ? ": " : "",
                           (int)strcspn(s->errbody, "\r\n"),
                           s->errbody);
    }
    if (cc == CURLE_OK) {
        snprintf(reason, rlen, "HTTP %ld", st);
        return 1;
    }
    if (retryable_curl(cc)) {
        snprintf(reason, rlen, "%s", why(cc, errbuf));
        return 1;
    }
    return swift_error("%s: %s", f->url, why(cc, errbuf));
}

/* Attempts until the file is complete, fails for good or the retries are spent. */
static int fetch_attempts(struct swift_http *h, struct fetch_state *s)
{
    struct swift_http_fetch *f = s->f;
    for (int attempt = 0;; attempt++) {
        if (f->expect_size >= 0 && s->have == f->expect_size && f->expect_size > 0)
            return 0; /* already complete: the caller verifies it */
        resp_reset(&f->resp);
        f->resp.attempts = attempt + 1;
        struct hdr_state hs = {&f->resp, -1};
        char errbuf[CURL_ERROR_SIZE];
        long st;
        CURLcode cc = perform_attempt(h, s, &hs, errbuf, &st);
        char reason[CURL_ERROR_SIZE + 64];
        int v = judge_attempt(s, &hs, cc, st, errbuf, reason, sizeof(reason));
        if (v <= 0)
            return v;
        if (attempt >= h->o.retries) {
            if (cc == CURLE_OK && st >= 400)
                f->http_error = (int)st;
            return swift_error("%s: %s (gave up after %d attempts; %lld bytes kept in '%s')",
                               f->url,
                               reason,
                               attempt + 1,
                               s->have,
                               f->part_path);
        }
        double w = backoff(h, attempt, f->resp.retry_after);
        swift_warn("%s: %s, retrying in %.1f s from byte %lld (attempt %d of %d)",
                   f->url,
                   reason,
                   w,
                   s->have,
                   attempt + 2,
                   h->o.retries + 1);
        swift_sleep(w);
    }
}

int swift_http_fetch(struct swift_http *h, struct swift_http_fetch *f)
{
    memset(&f->resp, 0, sizeof(f->resp));
    f->sha256[0] = 0;
    f->size = f->resumed_from = f->fetched = 0;
    f->connect_s = f->transfer_s = f->hash_wait_s = 0;
    f->http_error = 0;

    struct fetch_state s = {.f = f, .c = h->curl};
    s.fd = open(f->part_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (s.fd < 0)
        return swift_error_errno("cannot create '%s'", f->part_path);
    struct stat fst;
    if (fstat(s.fd, &fst) < 0) {
        int rc = swift_error_errno("cannot stat '%s'", f->part_path);
        close(s.fd);
        return rc;
    }
    s.have = (long long)fst.st_size;
    int rc = 0;
    if (hasher_start(&s.hash, f->part_path, s.have) < 0) {
        close(s.fd);
        return -1;
    }
    if (f->expect_size >= 0 && s.have > f->expect_size && truncate_part(&s) < 0)
        rc = swift_error_errno("cannot truncate '%s'", f->part_path);
    else {
        f->resumed_from = s.have;
        rc = fetch_attempts(h, &s);
    }
    curl_easy_setopt(h->curl, CURLOPT_RANGE, NULL);
    f->size = s.have;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (hasher_finish(&s.hash, f->sha256) < 0 && rc == 0)
        rc = swift_error_errno("cannot read back '%s'", f->part_path);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    f->hash_wait_s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    if (close(s.fd) < 0 && rc == 0)
        rc = swift_error_errno("cannot write '%s'", f->part_path);
    return rc;
}
