#include "lib/download/download.h"
#include "lib/core/error.h"
#include "lib/download/extract.h"
#include "lib/core/fileio.h"
#include "lib/download/http.h"
#include "lib/download/hub.h"
#include "lib/core/jsonl.h"
#include "lib/core/pool.h"
#include "lib/core/sha256.h"
#include "lib/core/trace.h"

#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "lib/core/banned.h"

#define MAX_LISTING ((size_t)256 << 20)

struct job {
    char *path;      /* relative path in the repository / output */
    char *url;       /* remote source, or NULL for a local copy */
    char *local;     /* local source file (copy) */
    long long size;  /* expected, -1 unknown */
    char sha256[65]; /* expected, "" unknown */
    char *blob_id;   /* expected git blob sha1 (HF non-LFS), or NULL */
    /* results */
    char got[65];
    long long bytes, fetched;
    double secs;
    const char *status;
    int failed;
};

struct dl {
    const struct swift_download_opts *o;
    int kind;
    char *endpoint;
    const char *token;
    const char *rev;
    char *commit;
    char *label;   /* the source as recorded in the manifest */
    char *dir;     /* final files */
    char *partdir; /* "*.incomplete" files (-o / ModelScope layout) */
    char *blobs;   /* HF cache: blobs/ (NULL otherwise) */
    char *manifest_name;
    struct job *jobs;
    size_t n;
    struct swift_http *clients;
    int nclients;
    pthread_mutex_t mu;
    int progress_on;
    double t_start, t_drawn;
    unsigned long long total_bytes, done_bytes;
    size_t files_done;
    json_t *old; /* previous manifest's files by path (borrowed refs inside) */
    long nfailed;
};

static char *xstrdup(const char *s)
{
    char *d = strdup(s);
    if (!d)
        abort();
    return d;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int is_url(const char *s)
{
    return !strncmp(s, "http://", 7) || !strncmp(s, "https://", 8);
}

static const char *file_url_path(const char *s)
{
    if (!strncmp(s, "file://", 7))
        return s + 7;
    return NULL;
}

int swift_download_source_kind(const char *s)
{
    if (!s || !*s)
        return -1;
    if (is_url(s))
        return swift_is_archive_name(s) ? SWIFT_SOURCE_ARCHIVE : SWIFT_SOURCE_URL;
    const char *p = file_url_path(s);
    struct stat st;
    if (p || s[0] == '/' || s[0] == '.' || s[0] == '~' || stat(s, &st) == 0) {
        if (!p)
            p = s;
        if (stat(p, &st) == 0 && S_ISDIR(st.st_mode))
            return SWIFT_SOURCE_DIR;
        if (swift_is_archive_name(p))
            return SWIFT_SOURCE_ARCHIVE;
        return SWIFT_SOURCE_FILE;
    }
    return swift_hub_repo_id_ok(s) ? SWIFT_SOURCE_HUB : -1;
}

/* ---- paths, locks ---- */

static int mkparents(const char *path)
{
    char *d = xstrdup(path);
    char *slash = strrchr(d, '/');
    int rc = 0;
    if (slash && slash != d) {
        *slash = 0;
        rc = swift_mkdirs(d, 0755);
    }
    free(d);
    return rc;
}

/* Take an exclusive flock on path (created). Waits, with a message, when another run holds it.
 * Returns the descriptor or -1 after an error. */
static int take_lock(const char *path, const char *what)
{
    if (mkparents(path) < 0)
        return -1;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return swift_error_errno("cannot create lock file '%s'", path);
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        if (errno != EWOULDBLOCK) {
            int rc = swift_error_errno("cannot lock '%s'", path);
            close(fd);
            return rc;
        }
        swift_info("waiting for another download of %s (lock '%s')", what, path);
        while (flock(fd, LOCK_EX) < 0) {
            if (errno != EINTR) {
                int rc = swift_error_errno("cannot lock '%s'", path);
                close(fd);
                return rc;
            }
        }
    }
    return fd;
}

/* ---- filters ---- */

static int matches_any(const char *path, const char *const *pats, int n)
{
    for (int i = 0; i < n || (n < 0 && pats[i]); i++)
        if (!fnmatch(pats[i], path, 0))
            return 1;
    return 0;
}

static int wanted(const struct swift_download_opts *o, const char *path)
{
    if (o->ninclude > 0 && !matches_any(path, o->include, o->ninclude))
        return 0;
    if (o->nexclude > 0)
        return !matches_any(path, o->exclude, o->nexclude);
    if (!o->all_files && matches_any(path, swift_hub_default_excludes, -1))
        return 0;
    return 1;
}

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

static void draw_progress(struct dl *d, int final);

static void emit(struct dl *d, struct job *j, const char *err)
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
    if (d->progress_on && d->t_drawn > 0)
        fputs("\r\033[K", stderr); /* stdout may share the terminal */
    swift_json_print_line(stdout, v);
    fflush(stdout);
    d->files_done++;
    if (j->bytes > j->fetched) /* cached or resumed bytes count as done */
        d->done_bytes += (unsigned long long)(j->bytes - j->fetched);
    d->t_drawn = 0;
    draw_progress(d, 0);
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
static void draw_progress(struct dl *d, int final)
{
    double now = now_s();
    if (!d->progress_on || (!final && now - d->t_drawn < 0.5))
        return;
    d->t_drawn = now;
    double el = now - d->t_start, rate = el > 0 ? (double)d->done_bytes / el : 0;
    char done[32], total[32], r[32], eta[32] = "";
    human(done, sizeof(done), (double)d->done_bytes);
    human(total, sizeof(total), (double)d->total_bytes);
    human(r, sizeof(r), rate);
    if (!final && rate > 0 && d->total_bytes > d->done_bytes) {
        long s = (long)((double)(d->total_bytes - d->done_bytes) / rate);
        snprintf(eta, sizeof(eta), ", ETA %ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
    }
    fprintf(stderr,
            "\r\033[Kdownloading: %3.0f%% %s / %s, %zu/%zu files, %s/s%s%s",
            d->total_bytes ? 100.0 * (double)d->done_bytes / (double)d->total_bytes : 100.0,
            done,
            total,
            d->files_done,
            d->n,
            r,
            eta,
            final ? "\n" : "");
    fflush(stderr);
}

static void on_bytes(void *ctx, long long n)
{
    struct dl *d = ctx;
    pthread_mutex_lock(&d->mu);
    d->done_bytes += (unsigned long long)n;
    draw_progress(d, 0);
    pthread_mutex_unlock(&d->mu);
}

static void fail(struct dl *d, struct job *j, double t0, const char *why)
{
    j->failed = 1;
    j->status = "failed";
    j->secs = now_s() - t0;
    pthread_mutex_lock(&d->mu);
    d->nfailed++;
    pthread_mutex_unlock(&d->mu);
    emit(d, j, why);
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
static int link_snapshot(struct dl *d, struct job *j, const char *blob)
{
    char *final = swift_path_join(d->dir, j->path);
    if (mkparents(final) < 0) {
        free(final);
        return -1;
    }
    int depth = 2;
    for (const char *c = j->path; *c; c++)
        depth += *c == '/';
    size_t cap = (size_t)depth * 3 + strlen(blob) + 16;
    char *target = malloc(cap);
    if (!target)
        abort();
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
static int verify(struct job *j, const char *file, const char *sha, long long size,
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
static int reuse_existing(struct dl *d, struct job *j, const char *final)
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
static void trace_file(struct job *j, int64_t t0, int64_t tf0, int64_t tf1, int64_t tv1,
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
    char *buf = malloc(1 << 20);
    if (!buf)
        abort();
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

static void fetch_one(void *ctx, long i, int worker)
{
    struct dl *d = ctx;
    struct job *j = &d->jobs[i];
    double t0s = now_s();
    int64_t t0 = swift_trace_enabled() ? swift_trace_now() : 0;
    char *final = swift_path_join(d->dir, j->path);
    char *blob = NULL, *part;
    char why[512];
    j->status = "downloaded";

    if (d->blobs) {
        const char *bn = j->sha256[0] ? j->sha256 : j->blob_id;
        if (bn)
            blob = swift_path_join(d->blobs, bn);
    }
    if (blob) {
        struct stat st;
        if (stat(blob, &st) == 0 && S_ISREG(st.st_mode) && (j->size < 0 || st.st_size == j->size)) {
            /* blobs are only ever named after a verified download */
            if (link_snapshot(d, j, strrchr(blob, '/') + 1) < 0 ||
                (j->sha256[0] ? (snprintf(j->got, 65, "%s", j->sha256), 0)
                              : swift_sha256_file(blob, j->got)) < 0) {
                fail(d, j, t0s, "cannot reuse the cached blob");
            } else {
                j->status = "cached";
                j->bytes = st.st_size;
                j->secs = now_s() - t0s;
                emit(d, j, NULL);
            }
            goto out;
        }
        part = swift_asprintf("%s.incomplete", blob);
    } else {
        if (reuse_existing(d, j, final)) {
            j->secs = now_s() - t0s;
            emit(d, j, NULL);
            goto out;
        }
        char *p = swift_path_join(d->partdir, j->path);
        part = swift_asprintf("%s.incomplete", p);
        free(p);
    }
    if (mkparents(part) < 0 || (!blob && mkparents(final) < 0)) {
        fail(d, j, t0s, "cannot create the directory");
        free(part);
        goto out;
    }

    int64_t tf0 = swift_trace_enabled() ? swift_trace_now() : 0;
    char sha[65];
    long long size = 0;
    const char *linked = NULL;
    double connect_s = 0, hash_wait_s = 0;
    struct swift_http_fetch f = {0};
    if (j->url) {
        f.url = j->url;
        f.part_path = part;
        f.expect_size = j->size;
        f.on_bytes = on_bytes;
        f.ctx = d;
        int rc = swift_http_fetch(&d->clients[worker], &f);
        j->fetched = f.fetched;
        if (rc == 0 && f.resumed_from > 0 &&
            verify(j, part, f.sha256, f.size, f.resp.linked_etag, why, sizeof(why)) < 0) {
            /* the partial file came from another version of the file: start again once */
            swift_warn("%s: resumed data does not verify (%s); fetching it again from the start",
                       j->path,
                       why);
            unlink(part);
            swift_http_resp_release(&f.resp);
            rc = swift_http_fetch(&d->clients[worker], &f);
            j->fetched += f.fetched;
        }
        connect_s = f.connect_s;
        hash_wait_s = f.hash_wait_s;
        if (rc < 0) {
            snprintf(why, sizeof(why), f.http_error ? "HTTP %d" : "transfer failed", f.http_error);
            fail(d, j, t0s, why);
            swift_http_resp_release(&f.resp);
            free(part);
            goto out;
        }
        snprintf(sha, sizeof(sha), "%s", f.sha256);
        size = f.size;
        linked = f.resp.linked_etag;
        /* what the file answer itself promises, when the listing did not say */
        if (j->size < 0 && f.resp.linked_size >= 0)
            j->size = f.resp.linked_size;
        if (d->endpoint && d->kind == SWIFT_HUB_HF && !j->sha256[0] && !j->blob_id && !linked &&
            f.resp.etag && strlen(f.resp.etag) == 40 &&
            strspn(f.resp.etag, "0123456789abcdef") == 40)
            j->blob_id = xstrdup(f.resp.etag); /* HF: the git blob id of a non-LFS file */
        if (f.resumed_from > 0)
            j->status = "resumed";
    } else {
        if (copy_local(j->local, part, sha, &size) < 0) {
            unlink(part);
            fail(d, j, t0s, "copy failed");
            free(part);
            goto out;
        }
        j->fetched = size;
        j->status = "copied";
        on_bytes(d, size);
    }
    int64_t tf1 = swift_trace_enabled() ? swift_trace_now() : 0, tv1 = 0;
    int bad = verify(j, part, sha, size, linked, why, sizeof(why));
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
        snprintf(j->got, sizeof(j->got), "%s", sha);
        j->bytes = size;
        j->secs = now_s() - t0s;
        trace_file(j,
                   t0,
                   tf0,
                   tf1,
                   tv1,
                   swift_trace_enabled() ? swift_trace_now() : 0,
                   connect_s,
                   hash_wait_s);
        emit(d, j, NULL);
    }
    swift_http_resp_release(&f.resp);
    free(part);
out:
    free(blob);
    free(final);
}

/* ---- manifest ---- */

static void load_old_manifest(struct dl *d)
{
    char *path = swift_path_join(d->dir, d->manifest_name);
    json_t *root = json_load_file(path, 0, NULL);
    free(path);
    json_t *files = json_object_get(root, "files");
    if (json_is_array(files)) {
        d->old = json_object();
        size_t i;
        json_t *e;
        json_array_foreach(files, i, e)
        {
            const char *p = json_string_value(json_object_get(e, "file"));
            if (p)
                json_object_set(d->old, p, e);
        }
    }
    json_decref(root);
}

static int write_manifest(struct dl *d)
{
    json_t *files = json_array();
    json_t *seen = json_object();
    for (size_t i = 0; i < d->n; i++) {
        struct job *j = &d->jobs[i];
        json_t *e = json_pack("{s:s,s:I,s:s,s:s,s:s?}",
                              "file",
                              j->path,
                              "size",
                              (json_int_t)j->bytes,
                              "sha256",
                              j->got,
                              "source",
                              j->url ? j->url : j->local,
                              "revision",
                              d->commit);
        if (!e)
            abort();
        json_array_append_new(files, e);
        json_object_set_new(seen, j->path, json_true());
    }
    /* entries of earlier runs (other --include patterns) whose files are still there */
    const char *k;
    json_t *v;
    if (d->old) {
        json_object_foreach(d->old, k, v)
        {
            if (json_object_get(seen, k))
                continue;
            char *p = swift_path_join(d->dir, k);
            struct stat st;
            if (swift_hub_path_ok(k) && stat(p, &st) == 0 &&
                json_integer_value(json_object_get(v, "size")) == st.st_size)
                json_array_append(files, v);
            free(p);
        }
    }
    json_decref(seen);
    char ts[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_t *root =
        json_pack("{s:i,s:s,s:s,s:s?,s:s?,s:s?,s:s,s:o}",
                  "version",
                  1,
                  "source",
                  d->label,
                  "hub",
                  d->endpoint ? (d->kind == SWIFT_HUB_HF ? "huggingface" : "modelscope") : "none",
                  "endpoint",
                  d->endpoint,
                  "revision",
                  d->rev,
                  "commit",
                  d->commit,
                  "created",
                  ts,
                  "files",
                  files);
    if (!root)
        abort();
    char *text = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!text)
        abort();
    char *path = swift_path_join(d->dir, d->manifest_name);
    size_t n = strlen(text);
    text[n] = '\n';
    int rc = swift_atomic_write(path, text, n + 1);
    free(text);
    free(path);
    return rc;
}

/* ---- running the jobs ---- */

static int cmp_size_desc(const void *a, const void *b)
{
    const struct job *x = a, *y = b;
    return (x->size < y->size) - (x->size > y->size);
}

static int run_jobs(struct dl *d)
{
    const struct swift_download_opts *o = d->o;
    qsort(d->jobs, d->n, sizeof(*d->jobs), cmp_size_desc);
    unsigned long long total = 0;
    for (size_t i = 0; i < d->n; i++)
        total += d->jobs[i].size > 0 ? (unsigned long long)d->jobs[i].size : 0;
    /* like huggingface_hub: warn early when the files cannot fit (sizes may be approximate, and
     * files already present need no room, so this is not an error) */
    struct statvfs vfs;
    if (total && statvfs(d->partdir, &vfs) == 0) {
        unsigned long long avail = (unsigned long long)vfs.f_bavail * vfs.f_frsize;
        if (avail < total)
            swift_warn("'%s' has %.1f GB free, the files need up to %.1f GB",
                       d->partdir,
                       (double)avail / 1e9,
                       (double)total / 1e9);
    }
    int nj = o->jobs > 0 ? o->jobs : 1;
    if ((size_t)nj > d->n)
        nj = d->n ? (int)d->n : 1;
    struct swift_pool *pool = swift_pool_new(nj);
    d->nclients = swift_pool_size(pool);
    d->clients = calloc((size_t)d->nclients, sizeof(*d->clients));
    if (!d->clients)
        abort();
    struct swift_http_opts ho = {.token = d->token,
                                 .retries = o->retries,
                                 .retry_base = o->retry_delay,
                                 .stall_timeout = o->timeout};
    for (int i = 0; i < d->nclients; i++)
        swift_http_init(&d->clients[i], &ho);
    d->total_bytes = total;
    d->progress_on = o->progress || isatty(2);
    d->t_start = now_s();
    swift_pool_for(pool, (long)d->n, 1, fetch_one, d);
    pthread_mutex_lock(&d->mu);
    draw_progress(d, 1);
    pthread_mutex_unlock(&d->mu);
    for (int i = 0; i < d->nclients; i++)
        swift_http_release(&d->clients[i]);
    free(d->clients);
    d->clients = NULL;
    swift_pool_free(pool);
    if (d->nfailed)
        return swift_error(
            "%ld of %zu files failed; partial data kept for the next run", d->nfailed, d->n);
    return 0;
}

static void add_job(struct dl *d, size_t *cap, const char *path, char *url, char *local,
                    long long size, const char *sha, const char *blob_id)
{
    if (d->n == *cap) {
        *cap = *cap ? *cap * 2 : 16;
        d->jobs = realloc(d->jobs, *cap * sizeof(*d->jobs));
        if (!d->jobs)
            abort();
    }
    struct job *j = &d->jobs[d->n++];
    memset(j, 0, sizeof(*j));
    j->path = xstrdup(path);
    j->url = url;
    j->local = local;
    j->size = size;
    snprintf(j->sha256, sizeof(j->sha256), "%s", sha ? sha : "");
    j->blob_id = blob_id ? xstrdup(blob_id) : NULL;
    j->status = "pending";
}

static void dl_release(struct dl *d)
{
    for (size_t i = 0; i < d->n; i++) {
        free(d->jobs[i].path);
        free(d->jobs[i].url);
        free(d->jobs[i].local);
        free(d->jobs[i].blob_id);
    }
    free(d->jobs);
    free(d->endpoint);
    free(d->commit);
    free(d->label);
    free(d->dir);
    free(d->partdir);
    free(d->blobs);
    free(d->manifest_name);
    json_decref(d->old);
    pthread_mutex_destroy(&d->mu);
}

static void pick_manifest_name(struct dl *d)
{
    d->manifest_name = xstrdup("manifest.json");
    for (size_t i = 0; i < d->n; i++) {
        if (!strcmp(d->jobs[i].path, "manifest.json")) {
            swift_warn("the source has its own manifest.json; ours is swift-manifest.json");
            free(d->manifest_name);
            d->manifest_name = xstrdup("swift-manifest.json");
            break;
        }
    }
}

/* ---- hub ---- */

static int hub_error(struct dl *d, const char *url, const struct swift_http_resp *r)
{
    const struct swift_download_opts *o = d->o;
    const char *what = o->dataset ? "dataset" : "model";
    const char *envtok = d->kind == SWIFT_HUB_HF ? "HF_TOKEN" : "MODELSCOPE_API_TOKEN";
    if (r->status == 401 || r->status == 403) {
        if (d->token)
            return swift_error("access to %s '%s' denied at %s (HTTP %ld): check the token",
                               what,
                               o->source,
                               d->endpoint,
                               r->status);
        return swift_error("%s '%s' needs authentication at %s (HTTP %ld): pass --token or set %s",
                           what,
                           o->source,
                           d->endpoint,
                           r->status,
                           envtok);
    }
    if (r->status == 404)
        return swift_error("%s '%s' (revision '%s') not found at %s (HTTP 404)",
                           what,
                           o->source,
                           d->rev,
                           d->endpoint);
    return swift_error("%s: HTTP %ld: %.*s",
                       url,
                       r->status,
                       (int)strcspn(r->body ? r->body : "", "\r\n"),
                       r->body ? r->body : "");
}

static int run_hub(struct dl *d)
{
    const struct swift_download_opts *o = d->o;
    d->endpoint = swift_hub_endpoint(d->kind, o->endpoint);
    d->token = swift_hub_token(d->kind, o->token);
    d->rev = o->revision && *o->revision ? o->revision : swift_hub_default_revision(d->kind);
    d->label = swift_asprintf("%s:%s%s",
                              d->kind == SWIFT_HUB_HF ? "huggingface" : "modelscope",
                              o->dataset ? "datasets/" : "",
                              o->source);
    char *url = swift_hub_listing_url(d->kind, d->endpoint, o->dataset, o->source, d->rev);
    struct swift_http h;
    swift_http_init(&h,
                    &(struct swift_http_opts){.token = d->token,
                                              .retries = o->retries,
                                              .retry_base = o->retry_delay,
                                              .stall_timeout = o->timeout});
    struct swift_http_resp r;
    int64_t t0 = swift_trace_enabled() ? swift_trace_now() : 0;
    int rc = swift_http_get(&h, url, MAX_LISTING, &r);
    swift_http_release(&h);
    if (rc < 0) {
        free(url);
        return -1;
    }
    if (swift_trace_enabled()) {
        struct swift_targ a[] = {SWIFT_TARG_S("url", url), SWIFT_TARG_I("bytes", r.len)};
        swift_trace_span("download", "listing", t0, swift_trace_now(), a, 2);
    }
    if (r.status != 200) {
        rc = hub_error(d, url, &r);
        swift_http_resp_release(&r);
        free(url);
        return rc;
    }
    struct swift_hub_listing ls;
    rc = swift_hub_parse_listing(d->kind, r.body, r.len, url, &ls);
    swift_http_resp_release(&r);
    free(url);
    if (rc < 0)
        return -1;
    d->commit = xstrdup(ls.commit ? ls.commit : d->rev);
    /* HF files come from the resolved commit so a moving branch cannot mix two snapshots */
    const char *frev = d->kind == SWIFT_HUB_HF && ls.commit ? ls.commit : d->rev;
    size_t cap = 0, skipped = 0;
    for (size_t i = 0; i < ls.n; i++) {
        struct swift_hub_file *f = &ls.files[i];
        if (!wanted(o, f->path)) {
            skipped++;
            continue;
        }
        add_job(d,
                &cap,
                f->path,
                swift_hub_file_url(d->kind, d->endpoint, o->dataset, o->source, frev, f->path),
                NULL,
                f->size,
                f->sha256,
                f->blob_id);
    }
    swift_hub_listing_release(&ls);
    if (!d->n) {
        return swift_error("%s '%s': no file left to download (%zu listed, all excluded)",
                           o->dataset ? "dataset" : "model",
                           o->source,
                           skipped);
    }

    /* where the files go */
    char *lockpath;
    if (o->output) {
        d->dir = xstrdup(o->output);
        d->partdir = swift_path_join(o->output, ".swift-download");
        lockpath = swift_path_join(d->partdir, "lock");
    } else if (d->kind == SWIFT_HUB_HF) {
        char *repo = swift_hub_cache_repo_dir(d->kind, o->dataset, o->source);
        char *snap = swift_path_join(repo, "snapshots");
        d->dir = swift_path_join(snap, d->commit);
        d->blobs = swift_path_join(repo, "blobs");
        d->partdir = xstrdup(d->blobs);
        char *root = swift_hub_cache_root(d->kind);
        const char *base = strrchr(repo, '/') + 1;
        lockpath = swift_asprintf("%s/.locks/%s/swift-download.lock", root, base);
        free(root);
        free(snap);
        free(repo);
    } else {
        d->dir = swift_hub_cache_repo_dir(d->kind, o->dataset, o->source);
        d->partdir = swift_path_join(d->dir, ".swift-download");
        lockpath = swift_path_join(d->partdir, "lock");
    }
    if (swift_mkdirs(d->dir, 0755) < 0 || swift_mkdirs(d->partdir, 0755) < 0) {
        free(lockpath);
        return -1;
    }
    int lock = take_lock(lockpath, o->source);
    free(lockpath);
    if (lock < 0)
        return -1;
    pick_manifest_name(d);
    load_old_manifest(d);
    rc = run_jobs(d);
    if (rc == 0)
        rc = write_manifest(d);
    if (rc == 0 && d->blobs && strcmp(d->rev, d->commit)) {
        /* refs/<revision> holds the commit, as in huggingface_hub's cache */
        char *repo = swift_hub_cache_repo_dir(d->kind, o->dataset, o->source);
        char *ref = swift_asprintf("%s/refs/%s", repo, d->rev);
        if (swift_hub_path_ok(d->rev) && mkparents(ref) == 0)
            rc = swift_atomic_write(ref, d->commit, strlen(d->commit));
        free(ref);
        free(repo);
    }
    if (rc == 0)
        swift_info("%s", d->dir);
    close(lock);
    return rc;
}

/* ---- local directory ---- */

static int walk(struct dl *d, size_t *cap, const char *root, const char *rel, int depth)
{
    if (depth > 64)
        return swift_error("'%s': directories nested too deep", root);
    char *dir = rel[0] ? swift_path_join(root, rel) : xstrdup(root);
    DIR *dp = opendir(dir);
    if (!dp) {
        int rc = swift_error_errno("cannot read directory '%s'", dir);
        free(dir);
        return rc;
    }
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(dp))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
            !strcmp(e->d_name, ".swift-download") || !strcmp(e->d_name, ".git"))
            continue;
        char *r = rel[0] ? swift_path_join(rel, e->d_name) : xstrdup(e->d_name);
        char *full = swift_path_join(root, r);
        struct stat st;
        if (stat(full, &st) < 0) {
            rc = swift_error_errno("cannot stat '%s'", full);
        } else if (S_ISDIR(st.st_mode)) {
            rc = walk(d, cap, root, r, depth + 1);
        } else if (S_ISREG(st.st_mode) && wanted(d->o, r)) {
            add_job(d, cap, r, NULL, xstrdup(full), (long long)st.st_size, NULL, NULL);
        }
        free(full);
        free(r);
    }
    closedir(dp);
    free(dir);
    return rc;
}

static int run_local(struct dl *d, const char *path, int is_dir)
{
    const struct swift_download_opts *o = d->o;
    size_t cap = 0;
    char *abs = realpath(path, NULL);
    if (!abs)
        return swift_error_errno("cannot open '%s'", path);
    d->label = swift_asprintf("file://%s", abs);
    int rc = 0;
    if (is_dir) {
        rc = walk(d, &cap, abs, "", 0);
        if (rc == 0 && !d->n)
            rc = swift_error("'%s': no file to copy", path);
    } else {
        const char *base = strrchr(abs, '/') + 1;
        add_job(d, &cap, base, NULL, xstrdup(abs), -1, NULL, NULL);
    }
    free(abs);
    if (rc < 0)
        return rc;
    d->dir = xstrdup(o->output);
    d->partdir = swift_path_join(o->output, ".swift-download");
    if (swift_mkdirs(d->dir, 0755) < 0 || swift_mkdirs(d->partdir, 0755) < 0)
        return -1;
    char *lockpath = swift_path_join(d->partdir, "lock");
    int lock = take_lock(lockpath, path);
    free(lockpath);
    if (lock < 0)
        return -1;
    pick_manifest_name(d);
    load_old_manifest(d);
    rc = run_jobs(d);
    if (rc == 0)
        rc = write_manifest(d);
    close(lock);
    return rc;
}

/* ---- single URL ---- */

static char *url_basename(const char *url)
{
    size_t n = strcspn(url, "?#");
    char *u = strndup(url, n);
    if (!u)
        abort();
    while (n > 0 && u[n - 1] == '/')
        u[--n] = 0;
    const char *b = strrchr(u, '/');
    char *r = xstrdup(b ? b + 1 : u);
    free(u);
    return r;
}

static int run_url(struct dl *d)
{
    const struct swift_download_opts *o = d->o;
    d->token = o->token && *o->token ? o->token : NULL;
    d->label = xstrdup(o->source);
    char *base = url_basename(o->source);
    if (!swift_hub_path_ok(base)) {
        int rc = swift_error("%s: no file name in the URL", o->source);
        free(base);
        return rc;
    }
    size_t cap = 0;
    add_job(d, &cap, base, xstrdup(o->source), NULL, -1, NULL, NULL);
    free(base);
    d->dir = xstrdup(o->output);
    d->partdir = swift_path_join(o->output, ".swift-download");
    if (swift_mkdirs(d->dir, 0755) < 0 || swift_mkdirs(d->partdir, 0755) < 0)
        return -1;
    char *lockpath = swift_path_join(d->partdir, "lock");
    int lock = take_lock(lockpath, o->source);
    free(lockpath);
    if (lock < 0)
        return -1;
    pick_manifest_name(d);
    load_old_manifest(d);
    int rc = run_jobs(d);
    if (rc == 0)
        rc = write_manifest(d);
    close(lock);
    return rc;
}

/* ---- archives ---- */

struct names {
    char **v;
    size_t n, cap;
};

static int on_member(void *ctx, const char *path, long long size)
{
    struct names *nm = ctx;
    (void)size;
    if (nm->n == nm->cap) {
        nm->cap = nm->cap ? nm->cap * 2 : 64;
        nm->v = realloc(nm->v, nm->cap * sizeof(*nm->v));
        if (!nm->v)
            abort();
    }
    nm->v[nm->n++] = xstrdup(path);
    return 0;
}

static int dir_is_empty(const char *path)
{
    DIR *dp = opendir(path);
    if (!dp)
        return 1;
    struct dirent *e;
    int empty = 1;
    while ((e = readdir(dp)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            empty = 0;
    closedir(dp);
    return empty;
}

static int run_archive(struct dl *d, const char *local)
{
    const struct swift_download_opts *o = d->o;
    char *out = xstrdup(o->output);
    size_t n = strlen(out);
    while (n > 1 && out[n - 1] == '/')
        out[--n] = 0;
    const char *slash = strrchr(out, '/');
    char *parent = slash ? strndup(out, (size_t)(slash - out) + (slash == out)) : xstrdup(".");
    const char *base = slash ? slash + 1 : out;
    if (!parent)
        abort();
    int rc = swift_mkdirs(parent, 0755);
    char *lockpath = swift_asprintf("%s/.%s.swift-download.lock", parent, base);
    int lock = rc < 0 ? -1 : take_lock(lockpath, o->source);
    free(lockpath);
    char *archive = NULL, *tmp = NULL;
    struct names nm = {0};
    if (lock < 0) {
        rc = -1;
        goto done;
    }
    struct stat st;
    if (stat(out, &st) == 0 && !(S_ISDIR(st.st_mode) && dir_is_empty(out)) && !o->force) {
        rc = swift_error("'%s' already exists; use --force to replace it", out);
        goto done;
    }
    d->label = xstrdup(o->source);
    if (local) {
        archive = xstrdup(local);
    } else {
        /* the archive itself is a resumable download next to the output */
        archive = swift_asprintf("%s/.%s.archive", parent, base);
        size_t cap = 0;
        add_job(d, &cap, "archive", xstrdup(o->source), NULL, -1, NULL, NULL);
        d->token = o->token && *o->token ? o->token : NULL;
        struct swift_http h;
        swift_http_init(&h,
                        &(struct swift_http_opts){.token = d->token,
                                                  .retries = o->retries,
                                                  .retry_base = o->retry_delay,
                                                  .stall_timeout = o->timeout});
        char *part = swift_asprintf("%s.incomplete", archive);
        struct swift_http_fetch f = {.url = o->source, .part_path = part, .expect_size = -1};
        SWIFT_SPAN_BEGIN(tf);
        rc = swift_http_fetch(&h, &f);
        SWIFT_SPAN_END(tf, "download", "archive");
        swift_http_release(&h);
        if (rc == 0 && rename(part, archive) < 0)
            rc = swift_error_errno("cannot rename '%s'", part);
        swift_http_resp_release(&f.resp);
        free(part);
        for (size_t i = 0; i < d->n; i++) {
            free(d->jobs[i].path);
            free(d->jobs[i].url);
            free(d->jobs[i].blob_id);
        }
        d->n = 0;
        if (rc < 0)
            goto done;
    }
    if (swift_atomic_dir_begin(out, &tmp) < 0) {
        rc = -1;
        goto done;
    }
    SWIFT_SPAN_BEGIN(tx);
    double t0 = now_s();
    rc = swift_extract(
        archive, tmp, o->max_extract ? o->max_extract : (200ULL << 30), on_member, &nm);
    SWIFT_SPAN_END(tx, "download", "extract");
    if (rc < 0)
        goto done;
    d->dir = xstrdup(tmp);
    d->n = 0;
    size_t cap = 0;
    for (size_t i = 0; i < nm.n; i++)
        add_job(d, &cap, nm.v[i], NULL, NULL, -1, NULL, NULL);
    pick_manifest_name(d);
    for (size_t i = 0; i < d->n && rc == 0; i++) {
        struct job *j = &d->jobs[i];
        char *p = swift_path_join(tmp, j->path);
        struct stat fs;
        rc = swift_sha256_file(p, j->got);
        if (rc == 0 && stat(p, &fs) == 0)
            j->bytes = (long long)fs.st_size;
        free(p);
        j->local = swift_asprintf("%s#%s", o->source, j->path);
        j->status = "extracted";
        j->secs = now_s() - t0;
    }
    if (rc == 0)
        rc = write_manifest(d);
    if (rc == 0) {
        rc = swift_atomic_dir_commit(tmp, out, 1);
        if (rc == 0)
            tmp = NULL;
    }
    for (size_t i = 0; rc == 0 && i < d->n; i++)
        emit(d, &d->jobs[i], NULL);
    if (rc == 0 && !local)
        unlink(archive);
done:
    if (tmp)
        swift_atomic_dir_abort(tmp);
    for (size_t i = 0; i < nm.n; i++)
        free(nm.v[i]);
    free(nm.v);
    free(archive);
    if (lock >= 0)
        close(lock);
    free(parent);
    free(out);
    return rc;
}

int swift_download_run(const struct swift_download_opts *o)
{
    struct dl d = {0};
    d.o = o;
    d.kind = o->hub;
    pthread_mutex_init(&d.mu, NULL);
    if (curl_global_init(CURL_GLOBAL_DEFAULT))
        return swift_error("cannot initialise libcurl");
    int kind = swift_download_source_kind(o->source);
    const char *fp = file_url_path(o->source);
    const char *local = fp ? fp : o->source;
    int rc;
    switch (kind) {
    case SWIFT_SOURCE_HUB:
        rc = run_hub(&d);
        break;
    case SWIFT_SOURCE_DIR:
        rc = run_local(&d, local, 1);
        break;
    case SWIFT_SOURCE_FILE:
        rc = run_local(&d, local, 0);
        break;
    case SWIFT_SOURCE_ARCHIVE:
        rc = run_archive(&d, is_url(o->source) ? NULL : local);
        break;
    case SWIFT_SOURCE_URL:
        rc = run_url(&d);
        break;
    default:
        rc = swift_error("'%s' is not a repository id, a path or a URL", o->source);
    }
    dl_release(&d);
    curl_global_cleanup();
    return rc;
}
