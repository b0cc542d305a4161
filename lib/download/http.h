/*
 * http — HTTP(S) transfers over libcurl for swift-download: redirects, TLS verification (never
 * turned off), Range resume of partial files, retries with exponential backoff on 5xx, 429,
 * timeouts and dropped connections, Retry-After honoured, a bearer token, and a per-transfer
 * byte callback for progress bars.
 *
 *     curl_global_init(CURL_GLOBAL_DEFAULT);            // once, before any thread starts
 *     struct swift_http h;
 *     swift_http_init(&h, &(struct swift_http_opts){.token = tok, .retries = 5});
 *     struct swift_http_resp r;
 *     if (swift_http_get(&h, url, 16 << 20, &r) < 0)    // transport failure after retries
 *         return -1;
 *     if (r.status != 200) ...                          // the caller words 401/404 errors
 *     swift_http_resp_release(&r);
 *     swift_http_release(&h);
 *
 * One struct swift_http per thread (it keeps one curl handle, so connections are reused
 * between files of the same worker). Only http:// and https:// are allowed, also on redirects.
 * The Authorization header is not forwarded when a redirect leaves the host (libcurl's rule).
 * CURL_CA_BUNDLE, REQUESTS_CA_BUNDLE or SSL_CERT_FILE name a CA file for private mirrors;
 * proxies come from http_proxy/https_proxy/no_proxy (libcurl).
 */
#ifndef SWIFT_HTTP_H
#define SWIFT_HTTP_H

#include "lib/core/sha256.h"

#include <stddef.h>

struct swift_http_opts {
    const char *token;      /* "Authorization: Bearer TOKEN" when set (borrowed) */
    int retries;            /* further attempts after a retryable failure (default 5 when <0) */
    double retry_base;      /* first backoff in seconds, doubled each time (0: 1 s) */
    double retry_max;       /* cap on one wait, also on Retry-After (0: 60 s) */
    long connect_timeout;   /* seconds (0: 30) */
    long stall_timeout;     /* seconds without a byte before the transfer is retried (0: 60) */
    const char *user_agent; /* NULL: "swift-download/VERSION" */
};

struct swift_http {
    void *curl; /* CURL * */
    struct swift_http_opts o;
};

/* Copies opts (strings stay borrowed). Aborts on allocation failure. */
void swift_http_init(struct swift_http *h, const struct swift_http_opts *opts);
void swift_http_release(struct swift_http *h);

/* Headers the hubs send; NULL / -1 when absent. Strings are owned by the response. */
struct swift_http_resp {
    long status; /* last HTTP status (after redirects) */
    char *body;  /* NUL-terminated (GET only) */
    size_t len;
    char *etag;            /* ETag of the first response, quotes and W/ removed */
    char *linked_etag;     /* X-Linked-Etag (HF: the LFS sha256 on the redirect) */
    char *repo_commit;     /* X-Repo-Commit */
    long long linked_size; /* X-Linked-Size */
    long long content_length;
    double retry_after; /* seconds, -1 when absent */
    char *effective_url;
    int attempts; /* attempts made */
};
void swift_http_resp_release(struct swift_http_resp *r);

/*
 * GET url into memory (at most max bytes: more is an error). Retries transport failures, 5xx,
 * 408 and 429; any other status is returned in r->status with its body for the caller to word
 * the error. Returns 0 with r filled (caller releases), or -1 after reporting the error.
 */
int swift_http_get(struct swift_http *h, const char *url, size_t max, struct swift_http_resp *r);

/* Download one file into part_path, resuming from what part_path already holds. */
struct swift_http_fetch {
    const char *url;       /* in */
    const char *part_path; /* in: the ".incomplete" file, created or appended to */
    long long expect_size; /* in: -1 when unknown; a longer partial file is restarted */
    /* in: called with the number of new bytes written, from the calling thread (may be NULL) */
    void (*on_bytes)(void *ctx, long long n);
    void *ctx;
    /* out: */
    struct swift_http_resp resp; /* headers of the last attempt (body unused) */
    char sha256[65];             /* of the whole file (prefix included) */
    long long size;              /* bytes in the file at the end */
    long long resumed_from;      /* bytes already present when the first attempt started */
    long long fetched;           /* bytes received over the network, all attempts */
    double connect_s;            /* time to connect (TCP+TLS) of the last attempt */
    double transfer_s;           /* total time in transfers */
    double hash_wait_s;          /* time waiting for the hash after the last byte */
    int http_error;              /* nonzero: failed with this final HTTP status */
};

/*
 * Fetch f->url into f->part_path. Each attempt asks for "Range: bytes=N-" where N is the size of
 * the partial file; a 200 answer restarts the file from zero, 416 restarts it, a 206 with the
 * wrong start is refused. The SHA-256 of the whole file (resumed prefix included) is computed
 * by a helper thread that reads the file back just behind the writer. The partial file is kept on
 * failure so that a later run resumes. Returns 0, or -1 after reporting the error (f->http_error
 * set for HTTP statuses). Caller releases f->resp.
 */
int swift_http_fetch(struct swift_http *h, struct swift_http_fetch *f);

/* Sleep for `seconds` (fractional), restarting after signals. */
void swift_sleep(double seconds);

#endif
