/*
 * hub — the Hugging Face and ModelScope hub protocols, as swift-download speaks them:
 * where the file list of a repository is, how it is parsed, where each file is fetched from,
 * and where the hubs' own caches keep a repository on disk.
 *
 *     struct swift_hub_listing ls;
 *     char *url = swift_hub_listing_url(SWIFT_HUB_HF, endpoint, 0, "Qwen/Qwen2.5-0.5B", "main");
 *     ... GET url ...
 *     if (swift_hub_parse_listing(SWIFT_HUB_HF, body, len, url, &ls) < 0)
 *         return -1;
 *     for (size_t i = 0; i < ls.n; i++)
 *         ... ls.files[i].path, .size, .sha256 ...
 *     swift_hub_listing_release(&ls);
 *
 * Endpoints used (docs/download.md):
 *   HF          GET {ep}/api/{models|datasets}/{id}/revision/{rev}?blobs=true
 *               GET {ep}/{id | datasets/{id}}/resolve/{rev}/{path}   (X-Repo-Commit, ETag,
 *                                                 X-Linked-Etag, X-Linked-Size on the answer)
 *   ModelScope  GET {ep}/api/v1/{models|datasets}/{id}/repo/files?Revision={rev}&Recursive=true
 *               GET {ep}/api/v1/{models|datasets}/{id}/repo?Revision={rev}&FilePath={path}
 * The HF tree listing (a JSON array from /api/models/{id}/tree/{rev}) is parsed as well.
 * Every path in a listing is checked (relative, no "..", no empty or "." segment, no control
 * characters) before anything is written, so a hostile hub cannot write outside the target.
 */
#ifndef SWIFT_HUB_H
#define SWIFT_HUB_H

#include <stddef.h>

enum swift_hub_kind { SWIFT_HUB_MODELSCOPE = 0, SWIFT_HUB_HF = 1 };

#define SWIFT_HUB_MAX_FILES 1000000
#define SWIFT_HUB_MAX_PATH 4096

struct swift_hub_file {
    char *path;      /* relative, checked */
    long long size;  /* -1 when unknown */
    char sha256[65]; /* lowercase hex, "" when the hub gives none */
    char *blob_id;   /* HF: git blob sha1 of a non-LFS file (NULL otherwise) */
    int lfs;         /* HF: stored in LFS (sha256 known) */
};

struct swift_hub_listing {
    char *commit; /* revision the listing resolved to (HF "sha"; ModelScope files' Revision) */
    struct swift_hub_file *files;
    size_t n;
};

/* Parse a listing answer; `name` is used in messages (the URL). Returns 0 (out owned by the
 * caller: release it) or -1 after reporting "name: ..." (out left empty). */
int swift_hub_parse_listing(int kind, const char *json, size_t len, const char *name,
                            struct swift_hub_listing *out);
void swift_hub_listing_release(struct swift_hub_listing *ls);

/* 1 when path is a safe relative path (see above), else 0. */
int swift_hub_path_ok(const char *path);
/* 1 when id looks like "name" or "org/name" with [A-Za-z0-9._-] parts, not "." or "..". */
int swift_hub_repo_id_ok(const char *id);

/* The endpoint: `given` if set, else HF_ENDPOINT / MODELSCOPE_DOMAIN (a host, or a URL), else
 * https://huggingface.co / https://www.modelscope.cn. Malloc'ed, without a trailing '/'. */
char *swift_hub_endpoint(int kind, const char *given);
/* The token: `given` if set, else HF_TOKEN (or HUGGING_FACE_HUB_TOKEN) / MODELSCOPE_API_TOKEN.
 * Borrowed; NULL when none. */
const char *swift_hub_token(int kind, const char *given);
/* Default revision: "main" (HF) or "master" (ModelScope). */
const char *swift_hub_default_revision(int kind);

/* URLs (malloc'ed); revision and path are percent-encoded. */
char *swift_hub_listing_url(int kind, const char *endpoint, int dataset, const char *id,
                            const char *rev);
char *swift_hub_file_url(int kind, const char *endpoint, int dataset, const char *id,
                         const char *rev, const char *path);

/* Cache locations (malloc'ed) when no -o is given:
 *   HF:         $HF_HUB_CACHE | $HF_HOME/hub | ~/.cache/huggingface/hub, then
 *               "models--org--name" (or "datasets--...") holding blobs/, snapshots/, refs/
 *   ModelScope: $MODELSCOPE_CACHE | ~/.cache/modelscope/hub, then "models/org/name" (or
 *               "datasets/..."), with '.' in the name written "___" as modelscope does. */
char *swift_hub_cache_root(int kind);
char *swift_hub_cache_repo_dir(int kind, int dataset, const char *id);

/* Percent-encode s (unreserved characters kept, and '/' when keep_slash). Malloc'ed. */
char *swift_url_escape(const char *s, int keep_slash);

/* ms-swift's default ignore patterns (safe_snapshot_download), NULL-terminated. */
extern const char *const swift_hub_default_excludes[];

#endif
