/*
 * internal.h — what the files of the download wing share and nobody else may include.
 *
 * One run of swift-download is a struct dl holding a list of jobs (one per file):
 *   download.c          the entry point, the job list, running the jobs over the pool, the
 *                       manifest, locks and the include/exclude filters;
 *   download_fetch.c    one job: reuse (cached blob or verified file), fetch (resumable HTTP or
 *                       a local copy), verify (size, SHA-256, git blob id), commit, report;
 *   download_sources.c  where the jobs come from: a hub listing, a local directory or file, a
 *                       single URL, an archive (fetched, then extracted).
 */
#ifndef SWIFT_DOWNLOAD_INTERNAL_H
#define SWIFT_DOWNLOAD_INTERNAL_H

#include "lib/download/download.h"
#include "lib/core/progress.h"

#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct dl_job {
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
    struct dl_job *jobs;
    size_t n;
    struct swift_http *clients;
    int nclients;
    pthread_mutex_t mu;
    struct swift_progress pr; /* the progress line (lib/core/progress.h) */
    double t_start;
    unsigned long long total_bytes, done_bytes;
    size_t files_done;
    json_t *old; /* previous manifest's files by path (borrowed refs inside) */
    long nfailed;
};

static inline double dl_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- download.c ---- */
/* mkdir -p of path's directory. */
int swift_dl_mkparents(const char *path);
/* Take an exclusive flock on path (created). Waits, with a message, when another run holds it.
 * Returns the descriptor or -1 after an error. */
int swift_dl_take_lock(const char *path, const char *what);
/* 1 when path passes --include / --exclude (or the default excludes). */
int swift_dl_wanted(const struct swift_download_opts *o, const char *path);
/* Append a job; url and local are taken over, path, sha and blob_id copied. */
void swift_dl_add_job(struct dl *d, size_t *cap, const char *path, char *url, char *local,
                      long long size, const char *sha, const char *blob_id);
/* Fetch every job over --jobs workers; -1 (reported) when any failed. */
int swift_dl_run_jobs(struct dl *d);
/* manifest.json, or swift-manifest.json when the source has its own. */
void swift_dl_pick_manifest_name(struct dl *d);
/* The previous run's manifest entries, kept for files this run does not fetch. */
void swift_dl_load_old_manifest(struct dl *d);
int swift_dl_write_manifest(struct dl *d);

/* ---- download_fetch.c ---- */
/* A pool task: job i with worker's HTTP client. */
void swift_dl_fetch_one(void *ctx, long i, int worker);
/* The stdout record of a finished job (err: why it failed, or NULL). */
void swift_dl_emit(struct dl *d, struct dl_job *j, const char *err);
/* Redraw the progress line (caller holds d->mu); final ends it with a newline. */
void swift_dl_draw_progress(struct dl *d, int final);

/* ---- download_sources.c: one per source kind, 0 or -1 after reporting ---- */
int swift_dl_run_hub(struct dl *d);
int swift_dl_run_local(struct dl *d, const char *path, int is_dir);
int swift_dl_run_url(struct dl *d);
int swift_dl_run_archive(struct dl *d, const char *local);

#endif
