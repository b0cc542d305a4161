/* download_sources — where swift-download's files come from: a hub listing, a local directory
 * or file, a single URL, an archive (see download.h). */
#include "lib/download/download.h"

#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/core/sha256.h"
#include "lib/core/trace.h"
#include "lib/download/extract.h"
#include "lib/download/http.h"
#include "lib/download/hub.h"
#include "lib/download/internal.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/core/banned.h"

#define MAX_LISTING ((size_t)256 << 20)

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

/* Under the lock: resume from the old manifest, run the jobs, write the new manifest. */
static int jobs_and_manifest(struct dl *d)
{
    swift_dl_pick_manifest_name(d);
    swift_dl_load_old_manifest(d);
    int rc = swift_dl_run_jobs(d);
    return rc == 0 ? swift_dl_write_manifest(d) : rc;
}

/* Fetch and parse the hub's file listing; a job per wanted file (from the resolved commit on
 * HF, so that a moving branch cannot mix two snapshots). */
static int hub_list(struct dl *d)
{
    const struct swift_download_opts *o = d->o;
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
    d->commit = swift_xstrdup(ls.commit ? ls.commit : d->rev);
    const char *frev = d->kind == SWIFT_HUB_HF && ls.commit ? ls.commit : d->rev;
    size_t cap = 0, skipped = 0;
    for (size_t i = 0; i < ls.n; i++) {
        struct swift_hub_file *f = &ls.files[i];
        if (!swift_dl_wanted(o, f->path)) {
            skipped++;
            continue;
        }
        swift_dl_add_job(
            d,
            &cap,
            f->path,
            swift_hub_file_url(d->kind, d->endpoint, o->dataset, o->source, frev, f->path),
            NULL,
            f->size,
            f->sha256,
            f->blob_id);
    }
    swift_hub_listing_release(&ls);
    if (!d->n)
        return swift_error("%s '%s': no file left to download (%zu listed, all excluded)",
                           o->dataset ? "dataset" : "model",
                           o->source,
                           skipped);
    return 0;
}

/* Where the files go: -o DIR, the HF cache (snapshots/ linked to blobs/) or the ModelScope
 * cache; returns the lock file's path (caller frees). */
static char *hub_place(struct dl *d)
{
    const struct swift_download_opts *o = d->o;
    char *lockpath;
    if (o->output) {
        d->dir = swift_xstrdup(o->output);
        d->partdir = swift_path_join(o->output, ".swift-download");
        lockpath = swift_path_join(d->partdir, "lock");
    } else if (d->kind == SWIFT_HUB_HF) {
        char *repo = swift_hub_cache_repo_dir(d->kind, o->dataset, o->source);
        char *snap = swift_path_join(repo, "snapshots");
        d->dir = swift_path_join(snap, d->commit);
        d->blobs = swift_path_join(repo, "blobs");
        d->partdir = swift_xstrdup(d->blobs);
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
    return lockpath;
}

int swift_dl_run_hub(struct dl *d)
{
    const struct swift_download_opts *o = d->o;
    d->endpoint = swift_hub_endpoint(d->kind, o->endpoint);
    d->token = swift_hub_token(d->kind, o->token);
    d->rev = o->revision && *o->revision ? o->revision : swift_hub_default_revision(d->kind);
    d->label = swift_asprintf("%s:%s%s",
                              d->kind == SWIFT_HUB_HF ? "huggingface" : "modelscope",
                              o->dataset ? "datasets/" : "",
                              o->source);
    if (hub_list(d) < 0)
        return -1;
    char *lockpath = hub_place(d);
    if (swift_mkdirs(d->dir, 0755) < 0 || swift_mkdirs(d->partdir, 0755) < 0) {
        free(lockpath);
        return -1;
    }
    int lock = swift_dl_take_lock(lockpath, o->source);
    free(lockpath);
    if (lock < 0)
        return -1;
    int rc = jobs_and_manifest(d);
    if (rc == 0 && d->blobs && strcmp(d->rev, d->commit)) {
        /* refs/<revision> holds the commit, as in huggingface_hub's cache */
        char *repo = swift_hub_cache_repo_dir(d->kind, o->dataset, o->source);
        char *ref = swift_asprintf("%s/refs/%s", repo, d->rev);
        if (swift_hub_path_ok(d->rev) && swift_dl_mkparents(ref) == 0)
            rc = swift_atomic_write(ref, d->commit, strlen(d->commit));
        free(ref);
        free(repo);
    }
    if (rc == 0)
        swift_info("%s", d->dir);
    close(lock);
    return rc;
}

/* ---- -o DIR ---- */
/* Run the jobs into -o DIR ("*.incomplete" files under DIR/.swift-download, locked there),
 * then write the manifest. */
static int into_output(struct dl *d, const char *what)
{
    const struct swift_download_opts *o = d->o;
    d->dir = swift_xstrdup(o->output);
    d->partdir = swift_path_join(o->output, ".swift-download");
    if (swift_mkdirs(d->dir, 0755) < 0 || swift_mkdirs(d->partdir, 0755) < 0)
        return -1;
    char *lockpath = swift_path_join(d->partdir, "lock");
    int lock = swift_dl_take_lock(lockpath, what);
    free(lockpath);
    if (lock < 0)
        return -1;
    int rc = jobs_and_manifest(d);
    close(lock);
    return rc;
}

/* ---- local directory ---- */

static int walk(struct dl *d, size_t *cap, const char *root, const char *rel, int depth)
{
    if (depth > 64)
        return swift_error("'%s': directories nested too deep", root);
    char *dir = rel[0] ? swift_path_join(root, rel) : swift_xstrdup(root);
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
        char *r = rel[0] ? swift_path_join(rel, e->d_name) : swift_xstrdup(e->d_name);
        char *full = swift_path_join(root, r);
        struct stat st;
        if (stat(full, &st) < 0) {
            rc = swift_error_errno("cannot stat '%s'", full);
        } else if (S_ISDIR(st.st_mode)) {
            rc = walk(d, cap, root, r, depth + 1);
        } else if (S_ISREG(st.st_mode) && swift_dl_wanted(d->o, r)) {
            swift_dl_add_job(
                d, cap, r, NULL, swift_xstrdup(full), (long long)st.st_size, NULL, NULL);
        }
        free(full);
        free(r);
    }
    closedir(dp);
    free(dir);
    return rc;
}

int swift_dl_run_local(struct dl *d, const char *path, int is_dir)
{
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
        swift_dl_add_job(d, &cap, base, NULL, swift_xstrdup(abs), -1, NULL, NULL);
    }
    free(abs);
    if (rc < 0)
        return rc;
    return into_output(d, path);
}

/* ---- single URL ---- */

static char *url_basename(const char *url)
{
    size_t n = strcspn(url, "?#");
    char *u = swift_xstrndup(url, n);
    while (n > 0 && u[n - 1] == '/')
        u[--n] = 0;
    const char *b = strrchr(u, '/');
    char *r = swift_xstrdup(b ? b + 1 : u);
    free(u);
    return r;
}

int swift_dl_run_url(struct dl *d)
{
    const struct swift_download_opts *o = d->o;
    d->token = o->token && *o->token ? o->token : NULL;
    d->label = swift_xstrdup(o->source);
    char *base = url_basename(o->source);
    if (!swift_hub_path_ok(base)) {
        int rc = swift_error("%s: no file name in the URL", o->source);
        free(base);
        return rc;
    }
    size_t cap = 0;
    swift_dl_add_job(d, &cap, base, swift_xstrdup(o->source), NULL, -1, NULL, NULL);
    free(base);
    return into_output(d, o->source);
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
        nm->v = swift_xrealloc(nm->v, nm->cap * sizeof(*nm->v));
    }
    nm->v[nm->n++] = swift_xstrdup(path);
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

/* Download the archive itself, resumably, next to the output. */
static int fetch_archive(struct dl *d, const char *archive)
{
    const struct swift_download_opts *o = d->o;
    size_t cap = 0;
    swift_dl_add_job(d, &cap, "archive", swift_xstrdup(o->source), NULL, -1, NULL, NULL);
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
    int rc = swift_http_fetch(&h, &f);
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
    return rc;
}

/* Unpack the archive into tmp, one job per member (hashed, "extracted"), then the manifest. */
static int extract_into(struct dl *d, const char *archive, const char *tmp, struct names *nm)
{
    const struct swift_download_opts *o = d->o;
    SWIFT_SPAN_BEGIN(tx);
    double t0 = dl_now_s();
    int rc = swift_extract(
        archive, tmp, o->max_extract ? o->max_extract : (200ULL << 30), on_member, nm);
    SWIFT_SPAN_END(tx, "download", "extract");
    if (rc < 0)
        return -1;
    d->dir = swift_xstrdup(tmp);
    d->n = 0;
    size_t cap = 0;
    for (size_t i = 0; i < nm->n; i++)
        swift_dl_add_job(d, &cap, nm->v[i], NULL, NULL, -1, NULL, NULL);
    swift_dl_pick_manifest_name(d);
    for (size_t i = 0; i < d->n && rc == 0; i++) {
        struct dl_job *j = &d->jobs[i];
        char *p = swift_path_join(tmp, j->path);
        struct stat fs;
        rc = swift_sha256_file(p, j->got);
        if (rc == 0 && stat(p, &fs) == 0)
            j->bytes = (long long)fs.st_size;
        free(p);
        j->local = swift_asprintf("%s#%s", o->source, j->path);
        j->status = "extracted";
        j->secs = dl_now_s() - t0;
    }
    if (rc == 0)
        rc = swift_dl_write_manifest(d);
    return rc;
}

int swift_dl_run_archive(struct dl *d, const char *local)
{
    const struct swift_download_opts *o = d->o;
    char *out = swift_xstrdup(o->output);
    size_t n = strlen(out);
    while (n > 1 && out[n - 1] == '/')
        out[--n] = 0;
    const char *slash = strrchr(out, '/');
    char *parent =
        slash ? swift_xstrndup(out, (size_t)(slash - out) + (slash == out)) : swift_xstrdup(".");
    const char *base = slash ? slash + 1 : out;
    int rc = swift_mkdirs(parent, 0755);
    char *lockpath = swift_asprintf("%s/.%s.swift-download.lock", parent, base);
    int lock = rc < 0 ? -1 : swift_dl_take_lock(lockpath, o->source);
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
    d->label = swift_xstrdup(o->source);
    archive = local ? swift_xstrdup(local) : swift_asprintf("%s/.%s.archive", parent, base);
    if (!local && (rc = fetch_archive(d, archive)) < 0)
        goto done;
    if (swift_atomic_dir_begin(out, &tmp) < 0) {
        rc = -1;
        goto done;
    }
    rc = extract_into(d, archive, tmp, &nm);
    if (rc == 0) {
        rc = swift_atomic_dir_commit(tmp, out, 1);
        if (rc == 0)
            tmp = NULL;
    }
    for (size_t i = 0; rc == 0 && i < d->n; i++)
        swift_dl_emit(d, &d->jobs[i], NULL);
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
