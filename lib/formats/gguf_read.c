/* gguf_read — the GGUF reader: the file mapped read-only, every length, count, offset and size
 * checked against the bytes that are really there (see gguf.h). */
#include "lib/formats/gguf.h"

#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/formats/internal.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/core/banned.h"

/* Encoded size of a scalar value type; 0 for string/array/unknown. */
static size_t scalar_size(uint32_t t)
{
    switch (t) {
    case SWIFT_GGUF_U8:
    case SWIFT_GGUF_I8:
    case SWIFT_GGUF_BOOL:
        return 1;
    case SWIFT_GGUF_U16:
    case SWIFT_GGUF_I16:
        return 2;
    case SWIFT_GGUF_U32:
    case SWIFT_GGUF_I32:
    case SWIFT_GGUF_F32:
        return 4;
    case SWIFT_GGUF_U64:
    case SWIFT_GGUF_I64:
    case SWIFT_GGUF_F64:
        return 8;
    default:
        return 0;
    }
}

/* ---- reader ---- */

struct rd {
    const uint8_t *p;
    size_t len, pos;
    const char *name;
};

static int rd_err(const struct rd *r, size_t at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int rd_err(const struct rd *r, size_t at, const char *fmt, ...)
{
    char msg[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return swift_error("%s:@%zu: %s", r->name, at, msg);
}

static int need(const struct rd *r, uint64_t n, const char *what)
{
    if (n > r->len - r->pos) {
        char msg[160];
        snprintf(msg,
                 sizeof(msg),
                 "%s needs %" PRIu64 " bytes, only %zu left (truncated file?)",
                 what,
                 n,
                 r->len - r->pos);
        return swift_error("%s:@%zu: %s", r->name, r->pos, msg);
    }
    return 0;
}

static int rd_u32(struct rd *r, uint32_t *x, const char *what)
{
    if (need(r, 4, what) < 0)
        return -1;
    const uint8_t *b = r->p + r->pos;
    *x = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    r->pos += 4;
    return 0;
}

static int rd_u64(struct rd *r, uint64_t *x, const char *what)
{
    if (need(r, 8, what) < 0)
        return -1;
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | r->p[r->pos + (size_t)i];
    *x = v;
    r->pos += 8;
    return 0;
}

static int rd_string(struct rd *r, char **s, uint64_t *len, const char *what)
{
    size_t at = r->pos;
    uint64_t n;
    if (rd_u64(r, &n, what) < 0)
        return -1;
    if (n > SWIFT_GGUF_MAX_STRING || n > r->len - r->pos)
        return rd_err(
            r, at, "%s length %" PRIu64 " runs past the end of the file", what, (uint64_t)(n));
    *s = swift_xmalloc(n + 1);
    memcpy(*s, r->p + r->pos, n);
    (*s)[n] = 0;
    *len = n;
    r->pos += n;
    return 0;
}

static int rd_value(struct rd *r, uint32_t type, struct swift_gguf_value *v, int depth);

static int rd_scalar(struct rd *r, uint32_t type, struct swift_gguf_value *v)
{
    size_t sz = scalar_size(type);
    if (need(r, sz, "value") < 0)
        return -1;
    const uint8_t *b = r->p + r->pos;
    uint64_t u = 0;
    for (size_t i = sz; i-- > 0;)
        u = u << 8 | b[i];
    r->pos += sz;
    v->type = type;
    switch (type) {
    case SWIFT_GGUF_U8:
    case SWIFT_GGUF_U16:
    case SWIFT_GGUF_U32:
    case SWIFT_GGUF_U64:
        v->v.u = u;
        break;
    case SWIFT_GGUF_BOOL:
        if (u > 1)
            return rd_err(
                r, r->pos - 1, "%s value %" PRIu64 " is not 0 or 1", "bool", (uint64_t)(u));
        v->v.u = u;
        break;
    case SWIFT_GGUF_I8:
        v->v.i = (int8_t)(uint8_t)u;
        break;
    case SWIFT_GGUF_I16:
        v->v.i = (int16_t)(uint16_t)u;
        break;
    case SWIFT_GGUF_I32:
        v->v.i = (int32_t)(uint32_t)u;
        break;
    case SWIFT_GGUF_I64:
        v->v.i = (int64_t)u;
        break;
    case SWIFT_GGUF_F32: {
        uint32_t w = (uint32_t)u;
        float f;
        memcpy(&f, &w, 4);
        v->v.f = f;
        break;
    }
    case SWIFT_GGUF_F64: {
        double d;
        memcpy(&d, &u, 8);
        v->v.f = d;
        break;
    }
    }
    return 0;
}

static int rd_value(struct rd *r, uint32_t type, struct swift_gguf_value *v, int depth)
{
    memset(v, 0, sizeof(*v));
    if (type >= SWIFT_GGUF_NTYPES)
        return rd_err(r, r->pos, "%s %" PRIu64 " is unknown", "value type", (uint64_t)(type));
    if (type == SWIFT_GGUF_STRING) {
        v->type = type;
        return rd_string(r, &v->v.str.s, &v->v.str.len, "string");
    }
    if (type != SWIFT_GGUF_ARRAY)
        return rd_scalar(r, type, v);
    size_t at = r->pos;
    if (depth >= SWIFT_GGUF_MAX_DEPTH)
        return rd_err(r,
                      at,
                      "%s nested deeper than %" PRIu64,
                      "array",
                      (uint64_t)((uint64_t)SWIFT_GGUF_MAX_DEPTH));
    uint32_t et;
    uint64_t n;
    if (rd_u32(r, &et, "array type") < 0 || rd_u64(r, &n, "array length") < 0)
        return -1;
    if (et >= SWIFT_GGUF_NTYPES)
        return rd_err(r, at, "%s %" PRIu64 " is unknown", "array element type", (uint64_t)(et));
    /* Every element takes at least this many bytes, so n is bounded by what is left. */
    uint64_t min = et == SWIFT_GGUF_STRING ? 8 : et == SWIFT_GGUF_ARRAY ? 12 : scalar_size(et);
    if (n > (r->len - r->pos) / min)
        return rd_err(r,
                      at,
                      "%s of %" PRIu64 " elements runs past the end of the file",
                      "array",
                      (uint64_t)(n));
    v->type = SWIFT_GGUF_ARRAY;
    v->v.arr.elem_type = et;
    v->v.arr.items = swift_xcalloc(n, sizeof(*v->v.arr.items));
    for (uint64_t i = 0; i < n; i++) {
        v->v.arr.n = i + 1;
        if (rd_value(r, et, &v->v.arr.items[i], depth + 1) < 0)
            return -1;
    }
    v->v.arr.n = n;
    return 0;
}

void swift_gguf_free(struct swift_gguf *g)
{
    if (!g)
        return;
    if (g->kv)
        for (uint64_t i = 0; i < g->n_kv; i++) {
            free(g->kv[i].key);
            swift_gguf_value_release(&g->kv[i].value);
        }
    free(g->kv);
    if (g->tensors)
        for (uint64_t i = 0; i < g->n_tensors; i++)
            free(g->tensors[i].name);
    free(g->tensors);
    if (g->map)
        munmap(g->map, g->map_len);
    free(g);
}

const struct swift_gguf_value *swift_gguf_get(const struct swift_gguf *g, const char *key)
{
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (g->kv[i].key && !strcmp(g->kv[i].key, key))
            return &g->kv[i].value;
    return NULL;
}

long swift_gguf_find_tensor(const struct swift_gguf *g, const char *name)
{
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (g->tensors[i].name && !strcmp(g->tensors[i].name, name))
            return (long)i;
    return -1;
}

/* Magic, version and the two counts, each checked against what the file can hold. */
static int read_header(struct rd *r, struct swift_gguf *g, uint64_t *nt, uint64_t *nkv)
{
    uint32_t magic;
    if (rd_u32(r, &magic, "magic") < 0)
        return -1;
    if (magic != SWIFT_GGUF_MAGIC)
        return rd_err(r,
                      0,
                      "%s: bad magic 0x%08" PRIx64 ", expected \"GGUF\"",
                      "not a GGUF file",
                      (uint64_t)(magic));
    if (rd_u32(r, &g->version, "version") < 0)
        return -1;
    if (g->version != 2 && g->version != 3) {
        if ((g->version & 0xffff) == 0 && g->version)
            return rd_err(r,
                          4,
                          "big-endian GGUF (version 0x%08" PRIx32
                          " read as little-endian): not supported",
                          g->version);
        return rd_err(r,
                      4,
                      "%s %" PRIu64 " is not supported (only 2 and 3)",
                      "GGUF version",
                      (uint64_t)(g->version));
    }
    if (rd_u64(r, nt, "tensor count") < 0 || rd_u64(r, nkv, "key/value count") < 0)
        return -1;
    /* a kv takes >= 8 (key len) + 4 (type) + 1 bytes; a tensor info >= 8 + 4 + 4 + 8 */
    if (*nkv > (r->len - r->pos) / 13)
        return rd_err(r,
                      16,
                      "%s %" PRIu64 " is larger than the file can hold",
                      "key/value count",
                      (uint64_t)(*nkv));
    if (*nt > (r->len - r->pos) / 24)
        return rd_err(r,
                      8,
                      "%s %" PRIu64 " is larger than the file can hold",
                      "tensor count",
                      (uint64_t)(*nt));
    return 0;
}

/* The key/value pairs: keys non-empty, without NUL, unique; general.alignment applied. */
static int read_kvs(struct rd *r, struct swift_gguf *g, uint64_t nkv)
{
    for (uint64_t i = 0; i < nkv; i++) {
        size_t at = r->pos;
        uint64_t klen;
        g->n_kv = i + 1;
        struct swift_gguf_kv *kv = &g->kv[i];
        if (rd_string(r, &kv->key, &klen, "key") < 0)
            return -1;
        if (klen == 0 || strlen(kv->key) != klen)
            return rd_err(
                r, at, "%s%" PRIu64 " is empty or contains a NUL byte", "key #", (uint64_t)(i));
        for (uint64_t j = 0; j < i; j++)
            if (!strcmp(g->kv[j].key, kv->key)) {
                char m[128];
                snprintf(m, sizeof(m), "duplicate key '%.80s'", kv->key);
                return swift_error("%s:@%zu: %s", r->name, at, m);
            }
        uint32_t type;
        if (rd_u32(r, &type, "value type") < 0 || rd_value(r, type, &kv->value, 0) < 0)
            return -1;
        if (!strcmp(kv->key, "general.alignment")) {
            if (kv->value.type != SWIFT_GGUF_U32 || kv->value.v.u == 0 || kv->value.v.u % 8 ||
                kv->value.v.u > (1u << 20))
                return rd_err(r,
                              at,
                              "%s must be a u32 multiple of 8, got %" PRIu64,
                              "general.alignment",
                              (uint64_t)(kv->value.v.u));
            g->alignment = (uint32_t)kv->value.v.u;
        }
    }
    return 0;
}

/* One tensor info (name, n_dims, ne[], type, offset) at the reader's position. */
static int read_tensor_info(struct rd *r, struct swift_gguf_tensor *t)
{
    size_t at = r->pos;
    uint64_t nlen;
    if (rd_string(r, &t->name, &nlen, "tensor name") < 0)
        return -1;
    if (nlen == 0 || nlen >= SWIFT_GGUF_MAX_NAME || strlen(t->name) != nlen)
        return rd_err(r,
                      at,
                      "%s of length %" PRIu64 " (must be 1..63 bytes, no NUL)",
                      "tensor name",
                      (uint64_t)(nlen));
    if (rd_u32(r, &t->n_dims, "n_dims") < 0)
        return -1;
    if (t->n_dims < 1 || t->n_dims > SWIFT_GGUF_MAX_DIMS)
        return rd_err(
            r, r->pos - 4, "%s %" PRIu64 " (must be 1..4)", "n_dims", (uint64_t)(t->n_dims));
    for (uint32_t d = 0; d < SWIFT_GGUF_MAX_DIMS; d++)
        t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        if (rd_u64(r, &t->ne[d], "ne") < 0)
            return -1;
        if (t->ne[d] > INT64_MAX)
            return rd_err(
                r, r->pos - 8, "%s %" PRIu64 " is out of range", "ne", (uint64_t)(t->ne[d]));
    }
    if (rd_u32(r, &t->type, "tensor type") < 0 || rd_u64(r, &t->offset, "tensor offset") < 0)
        return -1;
    const char *why = NULL;
    if (swift_gguf_tensor_nbytes(t, &t->nbytes, &why) < 0) {
        char m[200];
        snprintf(m,
                 sizeof(m),
                 "tensor '%s' (type %u, ne[0] %" PRIu64 "): %s",
                 t->name,
                 t->type,
                 t->ne[0],
                 why);
        return swift_error("%s:@%zu: %s", r->name, at, m);
    }
    return 0;
}

/* The tensor infos, with unique names. */
static int read_tensor_infos(struct rd *r, struct swift_gguf *g, uint64_t nt)
{
    for (uint64_t i = 0; i < nt; i++) {
        size_t at = r->pos;
        struct swift_gguf_tensor *t = &g->tensors[i];
        g->n_tensors = i + 1;
        if (read_tensor_info(r, t) < 0)
            return -1;
        for (uint64_t j = 0; j < i; j++)
            if (!strcmp(g->tensors[j].name, t->name)) {
                char m[128];
                snprintf(m, sizeof(m), "duplicate tensor '%s'", t->name);
                return swift_error("%s:@%zu: %s", r->name, at, m);
            }
    }
    return 0;
}

/* The data section after the aligned header; every tensor aligned and inside the file. */
static int place_data(struct rd *r, struct swift_gguf *g, uint64_t nt)
{
    size_t len = r->len;
    uint64_t ds = r->pos + (g->alignment - r->pos % g->alignment) % g->alignment;
    if (nt && ds > len)
        return rd_err(r,
                      r->pos,
                      "%s at %" PRIu64 " is past the end of the file",
                      "data section",
                      (uint64_t)(ds));
    g->data_offset = ds;
    for (uint64_t i = 0; i < nt; i++) {
        struct swift_gguf_tensor *t = &g->tensors[i];
        char m[200];
        if (t->offset % g->alignment) {
            snprintf(m,
                     sizeof(m),
                     "tensor '%s' offset %" PRIu64 " is not a multiple of %u",
                     t->name,
                     t->offset,
                     g->alignment);
            return swift_error("%s:@%" PRIu64 ": %s", r->name, ds, m);
        }
        if (t->offset > len - ds || t->nbytes > len - ds - t->offset) {
            snprintf(m,
                     sizeof(m),
                     "tensor '%s' data [%" PRIu64 ", +%" PRIu64 ") runs past the end of the file "
                     "(%zu bytes)",
                     t->name,
                     ds + t->offset,
                     t->nbytes,
                     len);
            return swift_error("%s:@%" PRIu64 ": %s", r->name, ds + t->offset, m);
        }
        t->data = r->p + ds + t->offset;
    }
    return 0;
}

int swift_gguf_parse(const void *buf, size_t len, const char *name, struct swift_gguf **out)
{
    *out = NULL;
    struct rd r = {.p = buf, .len = len, .pos = 0, .name = name ? name : "gguf"};
    struct swift_gguf *g = swift_xcalloc(1, sizeof(*g));
    g->base = buf;
    g->size = len;
    g->alignment = SWIFT_GGUF_DEFAULT_ALIGNMENT;
    uint64_t nt, nkv;
    int rc = read_header(&r, g, &nt, &nkv);
    if (rc == 0) {
        g->kv = swift_xcalloc(nkv, sizeof(*g->kv));
        g->tensors = swift_xcalloc(nt, sizeof(*g->tensors));
    }
    if (rc == 0)
        rc = read_kvs(&r, g, nkv);
    if (rc == 0)
        rc = read_tensor_infos(&r, g, nt);
    if (rc == 0)
        rc = place_data(&r, g, nt);
    if (rc < 0) {
        swift_gguf_free(g);
        return -1;
    }
    *out = g;
    return 0;
}

int swift_gguf_open(const char *path, struct swift_gguf **out)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return swift_error_errno("cannot open '%s'", path);
    struct stat st;
    if (fstat(fd, &st) < 0) {
        close(fd);
        return swift_error_errno("cannot stat '%s'", path);
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return swift_error("'%s' is not a regular file", path);
    }
    size_t len = (size_t)st.st_size;
    void *map = NULL;
    if (len) {
        map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            close(fd);
            return swift_error_errno("cannot map '%s'", path);
        }
    }
    close(fd);
    static const uint8_t empty[1];
    struct swift_gguf *g;
    if (swift_gguf_parse(map ? map : empty, len, path, &g) < 0) {
        if (map)
            munmap(map, len);
        return -1;
    }
    g->map = map;
    g->map_len = len;
    *out = g;
    return 0;
}
