/*
 * download — swift-download's engine: fetch a model or dataset from a hub (Hugging Face or
 * ModelScope), a mirror, a local directory, a single URL or an archive, into a directory that
 * later stages read (docs/download.md, docs/formats.md "Download manifest").
 *
 *     struct swift_download_opts o = {.source = "Qwen/Qwen2.5-0.5B", .output = "models/q",
 *                                     .hub = SWIFT_HUB_HF, .jobs = 8, .retries = 5};
 *     int rc = swift_download_run(&o);   // 0, or -1 after the errors were reported
 *
 * Guarantees:
 *   - a file appears under its final name only when complete and verified (size, and the hub's
 *     SHA-256 / git blob id when it gives one); partial data lives in "*.incomplete" files that
 *     the next run resumes with an HTTP Range request;
 *   - two runs on the same target serialise on a lock file (flock) instead of colliding;
 *   - stdout gets one JSON line per file: {"version":1,"path","bytes","sha256","seconds",
 *     "status","fetched"} with status downloaded|resumed|cached|verified|copied|extracted|failed;
 *   - manifest.json (file, size, sha256, source, revision) is written atomically at the end of a
 *     successful run.
 * Threads: --jobs workers, each with its own curl handle; stdout and the progress line are
 * serialised by a mutex.
 */
#ifndef SWIFT_DOWNLOAD_H
#define SWIFT_DOWNLOAD_H

struct swift_download_opts {
    const char *source;   /* MODEL_ID, DIR, file://..., http(s)://... */
    const char *output;   /* -o DIR; NULL: the hub's cache layout */
    int dataset;          /* a dataset repository, not a model */
    int hub;              /* SWIFT_HUB_MODELSCOPE or SWIFT_HUB_HF */
    const char *endpoint; /* NULL: HF_ENDPOINT / MODELSCOPE_DOMAIN / the public hub */
    const char *revision; /* NULL: main (HF) / master (ModelScope) */
    const char *token;    /* NULL: HF_TOKEN / MODELSCOPE_API_TOKEN */
    const char **include; /* fnmatch globs; a file must match one when any are given */
    int ninclude;
    const char **exclude; /* fnmatch globs; NULL/0 with all_files == 0: ms-swift's defaults */
    int nexclude;
    int all_files;                  /* no default excludes */
    int jobs;                       /* parallel files (>= 1) */
    int retries;                    /* per file */
    double retry_delay;             /* first backoff, seconds */
    long timeout;                   /* seconds without a byte before a retry */
    unsigned long long max_extract; /* cap on bytes unpacked from an archive */
    int progress; /* enum swift_progress_mode: --progress (on), --no-progress (off), auto */
    int force;    /* replace a non-empty output directory for archive sources */
};

enum swift_source_kind {
    SWIFT_SOURCE_HUB,     /* a repository id */
    SWIFT_SOURCE_DIR,     /* a local directory (or file:// of one) */
    SWIFT_SOURCE_FILE,    /* a local file (or file:// of one) */
    SWIFT_SOURCE_ARCHIVE, /* a local archive, file:// or http(s):// ending in .tar.gz, .zip, ... */
    SWIFT_SOURCE_URL      /* an http(s):// URL of a single file */
};
/* Classify a source string; -1 when it is neither a path, a URL nor a valid repository id. */
int swift_download_source_kind(const char *source);

int swift_download_run(const struct swift_download_opts *o);

#endif
