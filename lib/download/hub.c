#include "lib/download/hub.h"
#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"

#include <ctype.h>
#include <stdarg.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

const char *const swift_hub_default_excludes[] = {"*.zip",
                                                  "*.gguf",
                                                  "*.pth",
                                                  "*.pt",
                                                  "consolidated*",
                                                  "onnx/*",
                                                  "*.safetensors.md",
                                                  "*.msgpack",
                                                  "*.onnx",
                                                  "*.ot",
                                                  "*.h5",
                                                  NULL};

int swift_hub_path_ok(const char *p)
{
    if (!p || !*p || *p == '/' || strlen(p) > SWIFT_HUB_MAX_PATH)
        return 0;
    const char *seg = p;
    for (const char *c = p;; c++) {
        if (*c && ((unsigned char)*c < 0x20 || *c == 0x7f || *c == '\\'))
            return 0;
        if (*c == '/' || !*c) {
            size_t n = (size_t)(c - seg);
            if (n == 0 || (n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
                return 0;
            if (!*c)
                break;
            seg = c + 1;
        }
    }
    return 1;
}

int swift_hub_repo_id_ok(const char *id)
{
    if (!id || !*id || strlen(id) > 256)
        return 0;
    int slashes = 0;
    const char *seg = id;
    for (const char *c = id;; c++) {
        if (*c == '/' || !*c) {
            size_t n = (size_t)(c - seg);
            if (n == 0 || (n == 1 && seg[0] == '.') || (n == 2 && !strncmp(seg, "..", 2)))
                return 0;
            if (!*c)
                break;
            if (++slashes > 1)
                return 0;
            seg = c + 1;
        } else if (!isalnum((unsigned char)*c) && *c != '-' && *c != '_' && *c != '.') {
            return 0;
        }
    }
    return 1;
}

static int is_hex(const char *s, size_t n)
{
    if (strlen(s) != n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)s[i]))
            return 0;
    return 1;
}

static void set_sha(char dst[65], const char *s)
{
    dst[0] = 0;
    if (s && is_hex(s, 64)) {
        for (int i = 0; i < 64; i++)
            dst[i] = (char)tolower((unsigned char)s[i]);
        dst[64] = 0;
    }
}

static long long num(json_t *v)
{
    if (json_is_integer(v) && json_integer_value(v) >= 0)
        return (long long)json_integer_value(v);
    return -1;
}

void swift_hub_listing_release(struct swift_hub_listing *ls)
{
    for (size_t i = 0; i < ls->n; i++) {
        free(ls->files[i].path);
        free(ls->files[i].blob_id);
    }
    free(ls->files);
    free(ls->commit);
    memset(ls, 0, sizeof(*ls));
}

/* Append one file; returns -1 after an error. */
static int add_file(struct swift_hub_listing *ls, size_t *cap, const char *name, const char *path,
                    long long size, const char *sha, const char *blob, int lfs)
{
    if (!swift_hub_path_ok(path))
        return swift_error("%s: unsafe file path '%.200s' in the listing", name, path);
    for (size_t i = 0; i < ls->n; i++)
        if (!strcmp(ls->files[i].path, path))
            return swift_error("%s: file '%.200s' listed twice", name, path);
    if (ls->n >= SWIFT_HUB_MAX_FILES)
        return swift_error("%s: more than %d files", name, SWIFT_HUB_MAX_FILES);
    swift_xgrow((void **)&ls->files, cap, ls->n + 1, sizeof(*ls->files));
    struct swift_hub_file *f = &ls->files[ls->n++];
    memset(f, 0, sizeof(*f));
    f->path = swift_xstrdup(path);
    f->size = size;
    set_sha(f->sha256, sha);
    f->blob_id = blob && is_hex(blob, 40) ? swift_xstrdup(blob) : NULL;
    f->lfs = lfs;
    return 0;
}

/* One file of an HF listing (both answers): "size", "lfs": {"sha256" or "oid", "size"} and the
 * git blob id under blob_key. */
static int add_hf_entry(struct swift_hub_listing *ls, size_t *cap, const char *name, json_t *e,
                        const char *path, const char *blob_key)
{
    json_t *lfs = json_object_get(e, "lfs");
    long long size = num(json_object_get(e, "size"));
    const char *sh = NULL;
    if (json_is_object(lfs)) {
        sh = json_string_value(json_object_get(lfs, "sha256"));
        if (!sh)
            sh = json_string_value(json_object_get(lfs, "oid"));
        if (num(json_object_get(lfs, "size")) >= 0)
            size = num(json_object_get(lfs, "size"));
    }
    return add_file(ls,
                    cap,
                    name,
                    path,
                    size,
                    sh,
                    json_string_value(json_object_get(e, blob_key)),
                    json_is_object(lfs));
}

/* HF /api/models/{id}/revision/{rev}?blobs=true: {"sha":..., "siblings":[{"rfilename",
 * "size", "blobId", "lfs":{"sha256","size"}}]} */
static int parse_hf_info(json_t *root, const char *name, struct swift_hub_listing *ls)
{
    json_t *sha = json_object_get(root, "sha");
    if (json_is_string(sha))
        ls->commit = swift_xstrdup(json_string_value(sha));
    json_t *sib = json_object_get(root, "siblings");
    if (!json_is_array(sib))
        return swift_error("%s: no \"siblings\" list in the answer", name);
    size_t cap = 0, i;
    json_t *e;
    json_array_foreach(sib, i, e)
    {
        const char *path = json_string_value(json_object_get(e, "rfilename"));
        if (!json_is_object(e) || !path)
            return swift_error("%s: siblings[%zu] has no \"rfilename\"", name, i);
        if (add_hf_entry(ls, &cap, name, e, path, "blobId") < 0)
            return -1;
    }
    return 0;
}

/* HF /api/models/{id}/tree/{rev}?recursive=true: [{"type":"file","path","size","oid",
 * "lfs":{"oid","size"}}] */
static int parse_hf_tree(json_t *root, const char *name, struct swift_hub_listing *ls)
{
    size_t cap = 0, i;
    json_t *e;
    json_array_foreach(root, i, e)
    {
        const char *type = json_string_value(json_object_get(e, "type"));
        const char *path = json_string_value(json_object_get(e, "path"));
        if (!json_is_object(e) || !type || !path)
            return swift_error("%s: entry %zu has no \"type\" or \"path\"", name, i);
        if (strcmp(type, "file"))
            continue;
        if (add_hf_entry(ls, &cap, name, e, path, "oid") < 0)
            return -1;
    }
    return 0;
}

/* ModelScope /api/v1/models/{id}/repo/files: {"Code":200,"Success":true,"Data":{"Files":[
 * {"Path","Type":"blob"|"tree","Size","Sha256","Revision"}]}} */
static int parse_ms(json_t *root, const char *name, struct swift_hub_listing *ls)
{
    json_t *ok = json_object_get(root, "Success");
    json_t *code = json_object_get(root, "Code");
    if ((ok && !json_is_true(ok)) || (json_is_integer(code) && json_integer_value(code) != 200)) {
        const char *msg = json_string_value(json_object_get(root, "Message"));
        return swift_error(
            "%s: the hub refused the request: %.200s", name, msg ? msg : "no message");
    }
    json_t *files = json_object_get(json_object_get(root, "Data"), "Files");
    if (!json_is_array(files))
        return swift_error("%s: no \"Data.Files\" list in the answer", name);
    size_t cap = 0, i;
    json_t *e;
    json_array_foreach(files, i, e)
    {
        const char *type = json_string_value(json_object_get(e, "Type"));
        const char *path = json_string_value(json_object_get(e, "Path"));
        if (!json_is_object(e) || !path)
            return swift_error("%s: Files[%zu] has no \"Path\"", name, i);
        if (type && strcmp(type, "blob"))
            continue;
        const char *rev = json_string_value(json_object_get(e, "Revision"));
        if (rev && !ls->commit)
            ls->commit = swift_xstrdup(rev);
        if (add_file(ls,
                     &cap,
                     name,
                     path,
                     num(json_object_get(e, "Size")),
                     json_string_value(json_object_get(e, "Sha256")),
                     NULL,
                     0) < 0)
            return -1;
    }
    return 0;
}

int swift_hub_parse_listing(int kind, const char *json, size_t len, const char *name,
                            struct swift_hub_listing *out)
{
    memset(out, 0, sizeof(*out));
    json_error_t err;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &err);
    if (!root)
        return swift_error_at(name, err.line, "column %d: invalid JSON: %s", err.column, err.text);
    int rc;
    if (kind == SWIFT_HUB_HF && json_is_array(root))
        rc = parse_hf_tree(root, name, out);
    else if (!json_is_object(root))
        rc = swift_error("%s: expected a JSON object", name);
    else if (kind == SWIFT_HUB_HF)
        rc = parse_hf_info(root, name, out);
    else
        rc = parse_ms(root, name, out);
    json_decref(root);
    if (rc < 0)
        swift_hub_listing_release(out);
    return rc;
}

/* ---- endpoints, tokens, URLs ---- */

static char *strip_slash(char *s)
{
    size_t n = strlen(s);
    while (n > 0 && s[n - 1] == '/')
        s[--n] = 0;
    return s;
}

char *swift_hub_endpoint(int kind, const char *given)
{
    if (given && *given)
        return strip_slash(swift_xstrdup(given));
    if (kind == SWIFT_HUB_HF) {
        const char *e = getenv("HF_ENDPOINT");
        return strip_slash(swift_xstrdup(e && *e ? e : "https://huggingface.co"));
    }
    const char *d = getenv("MODELSCOPE_DOMAIN");
    if (!d || !*d)
        return swift_xstrdup("https://www.modelscope.cn");
    if (strstr(d, "://"))
        return strip_slash(swift_xstrdup(d));
    const char *scheme = getenv("MODELSCOPE_URL_SCHEME");
    return strip_slash(swift_asprintf("%s%s", scheme && *scheme ? scheme : "https://", d));
}

const char *swift_hub_token(int kind, const char *given)
{
    if (given && *given)
        return given;
    const char *t;
    if (kind == SWIFT_HUB_HF) {
        t = getenv("HF_TOKEN");
        if (!t || !*t)
            t = getenv("HUGGING_FACE_HUB_TOKEN");
    } else {
        t = getenv("MODELSCOPE_API_TOKEN");
    }
    return t && *t ? t : NULL;
}

const char *swift_hub_default_revision(int kind)
{
    return kind == SWIFT_HUB_HF ? "main" : "master";
}

char *swift_url_escape(const char *s, int keep_slash)
{
    size_t n = strlen(s);
    char *out = swift_xmalloc(3 * n + 1), *o = out;
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (isalnum(*c) || *c == '-' || *c == '.' || *c == '_' || *c == '~' ||
            (keep_slash && *c == '/')) {
            *o++ = (char)*c;
        } else {
            *o++ = '%';
            *o++ = hex[*c >> 4];
            *o++ = hex[*c & 15];
        }
    }
    *o = 0;
    return out;
}

char *swift_hub_listing_url(int kind, const char *ep, int dataset, const char *id, const char *rev)
{
    char *r = swift_url_escape(rev, 0), *u;
    if (kind == SWIFT_HUB_HF)
        u = swift_asprintf(
            "%s/api/%s/%s/revision/%s?blobs=true", ep, dataset ? "datasets" : "models", id, r);
    else
        u = swift_asprintf("%s/api/v1/%s/%s/repo/files?Revision=%s&Recursive=true",
                           ep,
                           dataset ? "datasets" : "models",
                           id,
                           r);
    free(r);
    return u;
}

char *swift_hub_file_url(int kind, const char *ep, int dataset, const char *id, const char *rev,
                         const char *path)
{
    char *r = swift_url_escape(rev, 0), *u;
    if (kind == SWIFT_HUB_HF) {
        char *p = swift_url_escape(path, 1);
        u = swift_asprintf("%s/%s%s/resolve/%s/%s", ep, dataset ? "datasets/" : "", id, r, p);
        free(p);
    } else {
        char *p = swift_url_escape(path, 0);
        u = swift_asprintf("%s/api/v1/%s/%s/repo?Revision=%s&FilePath=%s",
                           ep,
                           dataset ? "datasets" : "models",
                           id,
                           r,
                           p);
        free(p);
    }
    free(r);
    return u;
}

/* ---- caches ---- */

char *swift_hub_cache_root(int kind)
{
    const char *home = getenv("HOME");
    if (!home || !*home)
        home = "/tmp";
    if (kind == SWIFT_HUB_HF) {
        const char *c = getenv("HF_HUB_CACHE");
        if (c && *c)
            return strip_slash(swift_xstrdup(c));
        c = getenv("HF_HOME");
        if (c && *c)
            return swift_asprintf("%s/hub", c);
        c = getenv("XDG_CACHE_HOME");
        if (c && *c)
            return swift_asprintf("%s/huggingface/hub", c);
        return swift_asprintf("%s/.cache/huggingface/hub", home);
    }
    const char *c = getenv("MODELSCOPE_CACHE");
    if (c && *c)
        return strip_slash(swift_xstrdup(c));
    return swift_asprintf("%s/.cache/modelscope/hub", home);
}

char *swift_hub_cache_repo_dir(int kind, int dataset, const char *id)
{
    char *root = swift_hub_cache_root(kind), *d;
    if (kind == SWIFT_HUB_HF) {
        /* models--org--name */
        size_t n = strlen(id);
        char *flat = swift_xmalloc(2 * n + 1), *o = flat;
        for (const char *c = id; *c; c++) {
            if (*c == '/') {
                *o++ = '-';
                *o++ = '-';
            } else {
                *o++ = *c;
            }
        }
        *o = 0;
        d = swift_asprintf("%s/%s--%s", root, dataset ? "datasets" : "models", flat);
        free(flat);
    } else {
        /* models/org/name with '.' -> "___" (modelscope's masked directory) */
        size_t n = strlen(id);
        char *m = swift_xmalloc(3 * n + 1), *o = m;
        const char *name = strrchr(id, '/');
        name = name ? name + 1 : id;
        for (const char *c = id; *c; c++) {
            if (*c == '.' && c >= name) {
                memcpy(o, "___", 3);
                o += 3;
            } else {
                *o++ = *c;
            }
        }
        *o = 0;
        d = swift_asprintf("%s/%s/%s", root, dataset ? "datasets" : "models", m);
        free(m);
    }
    free(root);
    return d;
}
