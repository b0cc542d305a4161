/* download — swift-download's entry point, its job list, running the jobs, the manifest, locks
 * and filters (see download.h; internal.h says how the files divide the work). */
#include "lib/download/download.h"
#include "lib/core/alloc.h"

#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/core/record.h"
#include "lib/core/pool.h"
#include "lib/download/extract.h"
#include "lib/download/http.h"
#include "lib/download/hub.h"
#include "lib/download/internal.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "lib/core/banned.h"

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

int swift_dl_mkparents(const char *path)
{
    char *d = swift_xstrdup(path);
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
int swift_dl_take_lock(const char *path, const char *what)
{
    if (swift_dl_mkparents(path) < 0)
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

int swift_dl_wanted(const struct swift_download_opts *o, const char *path)
{
    if (o->ninclude > 0 && !matches_any(path, o->include, o->ninclude))
        return 0;
    if (o->nexclude > 0)
        return !matches_any(path, o->exclude, o->nexclude);
    if (!o->all_files && matches_any(path, swift_hub_default_excludes, -1))
        return 0;
    return 1;
}

/* ---- manifest ---- */

void swift_dl_load_old_manifest(struct dl *d)
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

int swift_dl_write_manifest(struct dl *d)
{
    json_t *files = json_array();
    json_t *seen = json_object();
    for (size_t i = 0; i < d->n; i++) {
        struct dl_job *j = &d->jobs[i];
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
    char *path = swift_path_join(d->dir, d->manifest_name);
    int rc = swift_json_write_file(path, root, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    json_decref(root);
    free(path);
    return rc;
}

/* ---- running the jobs ---- */

static int cmp_size_desc(const void *a, const void *b)
{
    const struct dl_job *x = a, *y = b;
    return (x->size < y->size) - (x->size > y->size);
}

int swift_dl_run_jobs(struct dl *d)
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
    d->clients = swift_xcalloc((size_t)d->nclients, sizeof(*d->clients));
    struct swift_http_opts ho = {.token = d->token,
                                 .retries = o->retries,
                                 .retry_base = o->retry_delay,
                                 .stall_timeout = o->timeout};
    for (int i = 0; i < d->nclients; i++)
        swift_http_init(&d->clients[i], &ho);
    d->total_bytes = total;
    swift_progress_init(&d->pr, o->progress);
    d->t_start = dl_now_s();
    swift_pool_for(pool, (long)d->n, 1, swift_dl_fetch_one, d);
    pthread_mutex_lock(&d->mu);
    swift_dl_draw_progress(d, 1);
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

void swift_dl_add_job(struct dl *d, size_t *cap, const char *path, char *url, char *local,
                      long long size, const char *sha, const char *blob_id)
{
    swift_xgrow((void **)&d->jobs, cap, d->n + 1, sizeof(*d->jobs));
    struct dl_job *j = &d->jobs[d->n++];
    memset(j, 0, sizeof(*j));
    j->path = swift_xstrdup(path);
    j->url = url;
    j->local = local;
    j->size = size;
    snprintf(j->sha256, sizeof(j->sha256), "%s", sha ? sha : "");
    j->blob_id = blob_id ? swift_xstrdup(blob_id) : NULL;
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

void swift_dl_pick_manifest_name(struct dl *d)
{
    d->manifest_name = swift_xstrdup("manifest.json");
    for (size_t i = 0; i < d->n; i++) {
        if (!strcmp(d->jobs[i].path, "manifest.json")) {
            swift_warn("the source has its own manifest.json; ours is swift-manifest.json");
            free(d->manifest_name);
            d->manifest_name = swift_xstrdup("swift-manifest.json");
            break;
        }
    }
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
        rc = swift_dl_run_hub(&d);
        break;
    case SWIFT_SOURCE_DIR:
        rc = swift_dl_run_local(&d, local, 1);
        break;
    case SWIFT_SOURCE_FILE:
        rc = swift_dl_run_local(&d, local, 0);
        break;
    case SWIFT_SOURCE_ARCHIVE:
        rc = swift_dl_run_archive(&d, is_url(o->source) ? NULL : local);
        break;
    case SWIFT_SOURCE_URL:
        rc = swift_dl_run_url(&d);
        break;
    default:
        rc = swift_error("'%s' is not a repository id, a path or a URL", o->source);
    }
    dl_release(&d);
    curl_global_cleanup();
    return rc;
}
