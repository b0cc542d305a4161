/* download_fetch — one file of swift-download: reuse what is already there, fetch it (resumable
 * HTTP, or a local copy), verify it, commit it under its final name, report it. */
#include "lib/download/download.h"

#include "lib/core/alloc.h"
#include "lib/core/record.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/core/jsonl.h"
#include "lib/core/sha256.h"
#include "lib/core/trace.h"
#include "lib/download/http.h"
#include "lib/download/hub.h"
#include "lib/download/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/core/banned.h"

/* ---- hashing ---- */

static int git_blob_sha1(const char *path, long long size, char hex[41])
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return swift_error_errno("cannot read '%s'", path);
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    if (!c || !EVP_DigestInit_ex(c, EVP_sha1(), NULL))
        abort();
    char hdr[64];
    int hn = snprintf(hdr, sizeof(hdr), "blob %lld", size);
    EVP_DigestUpdate(c, hdr, (size_t)hn + 1);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), fp)) > 0)
        EVP_DigestUpdate(c, buf, n);
    int bad = ferror(fp);
    fclose(fp);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdn = 0;
    EVP_DigestFinal_ex(c, md, &mdn);
    EVP_MD_CTX_free(c);
    if (bad)
        return swift_error_errno("cannot read '%s'", path);
    for (unsigned i = 0; i < 20; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    return 0;
}

/* ---- output ---- */

void swift_dl_emit(struct dl *d, struct dl_job *j, const char *err)
{
    json_t *v = json_pack("{s:i,s:s,s:I,s:s,s:f,s:s,s:I}",
                          "version",
                          1,
                          "path",
                          j->path,
                          "bytes",
                          (json_int_t)j->bytes,
                          "sha256",
                          j->got,
                          "seconds",
                          (double)((long long)(j->secs * 1e6)) / 1e6,
                          "status",
                          j->status,
                          "fetched",
                          (json_int_t)j->fetched);
    if (!v)
        abort();
    if (err)
        json_object_set_new(v, "error", json_string(err));
    pthread_mutex_lock(&d->mu);
    swift_progress_clear(&d->pr); /* stdout may share the terminal */
    swift_record_print(stdout, v, SWIFT_RECORD_DIGITS);
    fflush(stdout);
    d->files_done++;
    if (j->bytes > j->fetched) /* cached or resumed bytes count as done */
        d->done_bytes += (unsigned long long)(j->bytes - j->fetched);
    swift_dl_draw_progress(d, 0); /* at once: the line is not on the screen */
    pthread_mutex_unlock(&d->mu);
    json_decref(v);
}

static void human(char *buf, size_t n, double v)
{
    const char *u[] = {"B", "KB", "MB", "GB", "TB"};
    int i = 0;
    while (v >= 1000 && i < 4) {
        v /= 1000;
        i++;
    }
    snprintf(buf, n, i ? "%.1f %s" : "%.0f %s", v, u[i]);
}

/* The progress line (stderr, a terminal or --progress; at most twice a second): total bytes,
 * files, rate and ETA. Called with d->mu held. */
void swift_dl_draw_progress(struct dl *d, int final)
{
    if (!d->pr.on || (!final && d->pr.shown && !swift_progress_due(&d->pr)))
        return;
    double now = dl_now_s();
    double el = now - d->t_start, rate = el > 0 ? (double)d->done_bytes / el : 0;
    char done[32], total[32], r[32], eta[32] = "";
    human(done, sizeof(done), (double)d->done_bytes);
    human(total, sizeof(total), (double)d->total_bytes);
    human(r, sizeof(r), rate);
    if (!final && rate > 0 && d->total_bytes > d->done_bytes) {
        long s = (long)((double)(d->total_bytes - d->done_bytes) / rate);
        snprintf(eta, sizeof(eta), ", ETA %ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
    }
    swift_progress_show(&d->pr,
                        "downloading: %3.0f%% %s / %s, %zu/%zu files, %s/s%s",
                        d->total_bytes ? 100.0 * (double)d->done_bytes / (double)d->total_bytes
                                       : 100.0,
                        done,
                        total,
                        d->files_done,
                        d->n,
                        r,
                        eta);
    if (final)
        swift_progress_end(&d->pr);
}

static void on_bytes(void *ctx, long long n)
{
    struct dl *d = ctx;
    pthread_mutex_lock(&d->mu);
    d->done_bytes += (unsigned long long)n;
    swift_dl_draw_progress(d, 0);
    pthread_mutex_unlock(&d->mu);
}

static void fail(struct dl *d, struct dl_job *j, double t0, const char *why)
{
    j->failed = 1;
    j->status = "failed";
    j->secs = dl_now_s() - t0;
    pthread_mutex_lock(&d->mu);
    d->nfailed++;
    pthread_mutex_unlock(&d->mu);
    swift_dl_emit(d, j, why);
}

static int fsync_path(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return swift_error_errno("cannot open '%s'", path);
    int rc = fsync(fd);
    close(fd);
    if (rc < 0)
        return swift_error_errno("cannot sync '%s'", path);
    return 0;
}

/* snapshots/<commit>/<path> -> ../../blobs/<blob> (relative, as huggingface_hub makes them),
 * replaced atomically. */
static int link_snapshot(struct dl *d, struct dl_job *j, const char *blob)
{
    char *final = swift_path_join(d->dir, j->path);
    if (swift_dl_mkparents(final) < 0) {
        free(final);
        return -1;
    }
    int depth = 2;
    for (const char *c = j->path; *c; c++)
        depth += *c == '/';
    size_t cap = (size_t)depth * 3 + strlen(blob) + 16;
    char *target = swift_xmalloc(cap);
    target[0] = 0;
    size_t off = 0;
    for (int i = 0; i < depth; i++)
        off += (size_t)snprintf(target + off, cap - off, "../");
    snprintf(target + off, cap - off, "blobs/%s", blob);
    char *tmp = swift_asprintf("%s.tmp-link-%d", final, (int)getpid());
    unlink(tmp);
    int rc = 0;
    if (symlink(target, tmp) < 0 || rename(tmp, final) < 0) {
        rc = swift_error_errno("cannot link '%s'", final);
        unlink(tmp);
    }
    free(tmp);
    free(target);
    free(final);
    return rc;
}

/* Check a complete file against what the hub promised. Returns 0, or -1 with why set. */
static int verify(struct dl_job *j, const char *file, const char *sha, long long size,
                  const char *linked_etag, char *why, size_t whyn)
{
    if (j->size >= 0 && size != j->size) {
        snprintf(why, whyn, "size mismatch: expected %lld bytes, got %lld", j->size, size);
        return -1;
    }
    const char *want = j->sha256[0] ? j->sha256 : NULL;
    if (!want && linked_etag && strlen(linked_etag) == 64)
        want = linked_etag;
    if (want && strcasecmp(want, sha)) {
        snprintf(why, whyn, "checksum mismatch: expected sha256 %s, got %s", want, sha);
        return -1;
    }
    if (!want && j->blob_id) {
        char g[41];
        if (git_blob_sha1(file, size, g) < 0) {
            snprintf(why, whyn, "cannot read back the file");
            return -1;
        }
        if (strcasecmp(g, j->blob_id)) {
            snprintf(why, whyn, "checksum mismatch: expected git blob %s, got %s", j->blob_id, g);
            return -1;
        }
    }
    return 0;
}

/* An existing final file: reuse it when it is what the hub lists. 1 reused, 0 fetch again. */
static int reuse_existing(struct dl *d, struct dl_job *j, const char *final)
{
    struct stat st;
    if (lstat(final, &st) < 0 || !S_ISREG(st.st_mode))
        return 0;
    if (j->size >= 0 && st.st_size != j->size)
        return 0;
    json_t *m = d->old ? json_object_get(d->old, j->path) : NULL;
    const char *msha = json_string_value(json_object_get(m, "sha256"));
    if (m && msha && json_integer_value(json_object_get(m, "size")) == st.st_size &&
        (!j->sha256[0] || !strcmp(msha, j->sha256)) && strlen(msha) == 64) {
        snprintf(j->got, sizeof(j->got), "%s", msha);
        j->status = "cached";
        j->bytes = st.st_size;
        return 1;
    }
    char sha[65];
    if (swift_sha256_file(final, sha) < 0)
        return 0;
    char why[256];
    if (verify(j, final, sha, st.st_size, NULL, why, sizeof(why)) < 0)
        return 0;
    snprintf(j->got, sizeof(j->got), "%s", sha);
    j->status = "verified";
    j->bytes = st.st_size;
    return 1;
}

/* Spans of one file: connect, transfer (until the last byte), verify (waiting for the hash and
 * comparing it), commit (fsync, rename, snapshot link), all inside "file". */
static void trace_file(struct dl_job *j, int64_t t0, int64_t tf0, int64_t tf1, int64_t tv1,
                       int64_t tc1, double connect_s, double hash_wait_s)
{
    if (!swift_trace_enabled())
        return;
    int64_t tend = tf1 - (int64_t)(hash_wait_s * 1e9);
    tf1 = tend > tf0 ? tend : tf1;
    int64_t tc = tf0 + (int64_t)(connect_s * 1e9);
    if (tc > tf1)
        tc = tf1;
    double xfer = (double)(tf1 - tc) / 1e9;
    double mbps = xfer > 0 ? (double)j->fetched / xfer / 1e6 : 0;
    struct swift_targ a[] = {SWIFT_TARG_S("path", j->path), SWIFT_TARG_I("bytes", j->fetched)};
    if (tf1 > tf0) {
        swift_trace_span("download", "connect", tf0, tc, a, 1);
        struct swift_targ b[] = {SWIFT_TARG_S("path", j->path),
                                 SWIFT_TARG_I("bytes", j->fetched),
                                 SWIFT_TARG_D("MB/s", mbps)};
        swift_trace_span("download", "transfer", tc, tf1, b, 3);
    }
    swift_trace_span("download", "verify", tf1, tv1, a, 1);
    swift_trace_span("download", "commit", tv1, tc1, a, 1);
    struct swift_targ c[] = {SWIFT_TARG_S("path", j->path),
                             SWIFT_TARG_I("bytes", j->bytes),
                             SWIFT_TARG_I("fetched", j->fetched),
                             SWIFT_TARG_S("status", j->status),
                             SWIFT_TARG_D("MB/s", mbps)};
    swift_trace_span("download", "file", t0, tc1, c, 5);
    struct swift_targ s[] = {SWIFT_TARG_I("bytes", j->fetched), SWIFT_TARG_D("MB/s", mbps)};
    swift_trace_counters("download", s, 2);
}

/* Copy a local file into part, hashing it. */
static int copy_local(const char *src, const char *part, char sha[65], long long *size)
{
    FILE *in = fopen(src, "rb");
    if (!in)
        return swift_error_errno("cannot open '%s'", src);
    FILE *out = fopen(part, "wb");
    if (!out) {
        fclose(in);
        return swift_error_errno("cannot create '%s'", part);
    }
    struct swift_sha256 s;
    if (swift_sha256_init(&s) < 0)
        abort();
    char *buf = swift_xmalloc(1 << 20);
    size_t n;
    int rc = 0;
    *size = 0;
    while ((n = fread(buf, 1, 1 << 20, in)) > 0) {
        if (fwrite(buf, 1, n, out) != n) {
            rc = swift_error_errno("cannot write '%s'", part);
            break;
        }
        swift_sha256_update(&s, buf, n);
        *size += (long long)n;
    }
    if (!rc && ferror(in))
        rc = swift_error_errno("cannot read '%s'", src);
    if (fclose(out) && !rc)
        rc = swift_error_errno("cannot write '%s'", part);
    fclose(in);
    free(buf);
    swift_sha256_final(&s, sha);
    return rc;
}

/* What fetching one file produced, for verify, commit and the trace. */
struct fetched {
    char sha[65];
    long long size;
    const char *linked; /* the hub's linked etag (in f.resp), or NULL */
    double connect_s, hash_wait_s;
    struct swift_http_fetch f;
};

/* The HF cache already holds the blob: link it into the snapshot and report. Returns 1 when
 * the job is done (cached or failed), 0 when the blob must be fetched. */
static int use_cached_blob(struct dl *d, struct dl_job *j, const char *blob, double t0s)
{
    struct stat st;
    if (!(stat(blob, &st) == 0 && S_ISREG(st.st_mode) && (j->size < 0 || st.st_size == j->size)))
        return 0;
    /* blobs are only ever named after a verified download */
    if (link_snapshot(d, j, strrchr(blob, '/') + 1) < 0 ||
        (j->sha256[0] ? (snprintf(j->got, 65, "%s", j->sha256), 0)
                      : swift_sha256_file(blob, j->got)) < 0) {
        fail(d, j, t0s, "cannot reuse the cached blob");
    } else {
        j->status = "cached";
        j->bytes = st.st_size;
        j->secs = dl_now_s() - t0s;
        swift_dl_emit(d, j, NULL);
    }
    return 1;
}

/* Fetch j->url into part, resuming a partial file (and starting again once when the resumed
 * data does not verify). Returns 0, or -1 after reporting the job failed. */
static int fetch_remote(struct dl *d, struct dl_job *j, int worker, char *part, double t0s,
                        struct fetched *g)
{
    char why[512];
    struct swift_http_fetch *f = &g->f;
    f->url = j->url;
    f->part_path = part;
    f->expect_size = j->size;
    f->on_bytes = on_bytes;
    f->ctx = d;
    int rc = swift_http_fetch(&d->clients[worker], f);
    j->fetched = f->fetched;
    if (rc == 0 && f->resumed_from > 0 &&
        verify(j, part, f->sha256, f->size, f->resp.linked_etag, why, sizeof(why)) < 0) {
        /* the partial file came from another version of the file: start again once */
        swift_warn("%s: resumed data does not verify (%s); fetching it again from the start",
                   j->path,
                   why);
        unlink(part);
        swift_http_resp_release(&f->resp);
        rc = swift_http_fetch(&d->clients[worker], f);
        j->fetched += f->fetched;
    }
    g->connect_s = f->connect_s;
    g->hash_wait_s = f->hash_wait_s;
    if (rc < 0) {
        snprintf(why, sizeof(why), f->http_error ? "HTTP %d" : "transfer failed", f->http_error);
        fail(d, j, t0s, why);
        return -1;
    }
    snprintf(g->sha, sizeof(g->sha), "%s", f->sha256);
    g->size = f->size;
    g->linked = f->resp.linked_etag;
    /* what the file answer itself promises, when the listing did not say */
    if (j->size < 0 && f->resp.linked_size >= 0)
        j->size = f->resp.linked_size;
    if (d->endpoint && d->kind == SWIFT_HUB_HF && !j->sha256[0] && !j->blob_id && !g->linked &&
        f->resp.etag && strlen(f->resp.etag) == 40 &&
        strspn(f->resp.etag, "0123456789abcdef") == 40)
        j->blob_id = swift_xstrdup(f->resp.etag); /* HF: the git blob id of a non-LFS file */
    if (f->resumed_from > 0)
        j->status = "resumed";
    return 0;
}

/* Copy j->local into part. Returns 0, or -1 after reporting the job failed. */
static int copy_in(struct dl *d, struct dl_job *j, const char *part, double t0s, struct fetched *g)
{
    if (copy_local(j->local, part, g->sha, &g->size) < 0) {
        unlink(part);
        fail(d, j, t0s, "copy failed");
        return -1;
    }
    j->fetched = g->size;
    j->status = "copied";
    on_bytes(d, g->size);
    return 0;
}

/* Verify part, then move it to its final name (the blob plus its snapshot link, or the file
 * itself) and report the job; corrupt data is removed. */
static void commit_part(struct dl *d, struct dl_job *j, const char *part, const char *blob,
                        const char *final, double t0s, int64_t t0, int64_t tf0,
                        const struct fetched *g)
{
    char why[512];
    int64_t tf1 = swift_trace_enabled() ? swift_trace_now() : 0, tv1 = 0;
    int bad = verify(j, part, g->sha, g->size, g->linked, why, sizeof(why));
    if (swift_trace_enabled())
        tv1 = swift_trace_now();
    if (bad < 0) {
        swift_error("%s: %s; removed '%s'", j->url ? j->url : j->local, why, part);
        unlink(part); /* corrupt data cannot be resumed from */
        fail(d, j, t0s, why);
    } else if (fsync_path(part) < 0 || rename(part, blob ? blob : final) < 0) {
        int e = errno;
        unlink(part);
        errno = e;
        swift_error_errno("cannot rename '%s' to its final name", part);
        fail(d, j, t0s, "rename failed");
    } else if (blob && link_snapshot(d, j, strrchr(blob, '/') + 1) < 0) {
        fail(d, j, t0s, "link failed");
    } else {
        snprintf(j->got, sizeof(j->got), "%s", g->sha);
        j->bytes = g->size;
        j->secs = dl_now_s() - t0s;
        trace_file(j,
                   t0,
                   tf0,
                   tf1,
                   tv1,
                   swift_trace_enabled() ? swift_trace_now() : 0,
                   g->connect_s,
                   g->hash_wait_s);
        swift_dl_emit(d, j, NULL);
    }
}

void swift_dl_fetch_one(void *ctx, long i, int worker)
{
    struct dl *d = ctx;
    struct dl_job *j = &d->jobs[i];
    double t0s = dl_now_s();
    int64_t t0 = swift_trace_enabled() ? swift_trace_now() : 0;
    char *final = swift_path_join(d->dir, j->path);
    char *blob = NULL, *part;
    j->status = "downloaded";

    if (d->blobs) {
        const char *bn = j->sha256[0] ? j->sha256 : j->blob_id;
        if (bn)
            blob = swift_path_join(d->blobs, bn);
    }
    if (blob) {
        if (use_cached_blob(d, j, blob, t0s))
            goto out;
        part = swift_asprintf("%s.incomplete", blob);
    } else {
        if (reuse_existing(d, j, final)) {
            j->secs = dl_now_s() - t0s;
            swift_dl_emit(d, j, NULL);
            goto out;
        }
        char *p = swift_path_join(d->partdir, j->path);
        part = swift_asprintf("%s.incomplete", p);
        free(p);
    }
    if (swift_dl_mkparents(part) < 0 || (!blob && swift_dl_mkparents(final) < 0)) {
        fail(d, j, t0s, "cannot create the directory");
        free(part);
        goto out;
    }
    int64_t tf0 = swift_trace_enabled() ? swift_trace_now() : 0;
    struct fetched g = {0};
    int rc = j->url ? fetch_remote(d, j, worker, part, t0s, &g) : copy_in(d, j, part, t0s, &g);
    if (rc == 0)
        commit_part(d, j, part, blob, final, t0s, t0, tf0, &g);
    swift_http_resp_release(&g.f.resp);
    free(part);
out:
    free(blob);
    free(final);
}
