/* gguf — GGUF v3 reader (mapped, bounds-checked) and streaming writer. See gguf.h. */
#include "lib/formats/gguf.h"
#include "lib/core/error.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/core/banned.h"

/* ---- ggml type traits ---- */

struct type_traits {
    const char *name;
    int blck;
    size_t size;
};
static const struct type_traits traits[SWIFT_GGML_NTYPES] = {
    [SWIFT_GGML_F32] = {"F32", 1, 4},       [SWIFT_GGML_F16] = {"F16", 1, 2},
    [SWIFT_GGML_Q4_0] = {"Q4_0", 32, 18},   [SWIFT_GGML_Q4_1] = {"Q4_1", 32, 20},
    [SWIFT_GGML_Q5_0] = {"Q5_0", 32, 22},   [SWIFT_GGML_Q5_1] = {"Q5_1", 32, 24},
    [SWIFT_GGML_Q8_0] = {"Q8_0", 32, 34},   [SWIFT_GGML_Q8_1] = {"Q8_1", 32, 36},
    [SWIFT_GGML_Q2_K] = {"Q2_K", 256, 84},  [SWIFT_GGML_Q3_K] = {"Q3_K", 256, 110},
    [SWIFT_GGML_Q4_K] = {"Q4_K", 256, 144}, [SWIFT_GGML_Q5_K] = {"Q5_K", 256, 176},
    [SWIFT_GGML_Q6_K] = {"Q6_K", 256, 210}, [SWIFT_GGML_Q8_K] = {"Q8_K", 256, 292},
    [SWIFT_GGML_I8] = {"I8", 1, 1},         [SWIFT_GGML_I16] = {"I16", 1, 2},
    [SWIFT_GGML_I32] = {"I32", 1, 4},       [SWIFT_GGML_I64] = {"I64", 1, 8},
    [SWIFT_GGML_F64] = {"F64", 1, 8},       [SWIFT_GGML_BF16] = {"BF16", 1, 2},
};

int swift_ggml_blck_size(uint32_t type)
{
    return type < SWIFT_GGML_NTYPES ? traits[type].blck : 0;
}
size_t swift_ggml_type_size(uint32_t type)
{
    return type < SWIFT_GGML_NTYPES ? traits[type].size : 0;
}
const char *swift_ggml_type_name(uint32_t type)
{
    return type < SWIFT_GGML_NTYPES && traits[type].name ? traits[type].name : "?";
}
int swift_ggml_type_from_name(const char *name)
{
    for (int t = 0; t < SWIFT_GGML_NTYPES; t++)
        if (traits[t].name && !strcasecmp(traits[t].name, name))
            return t;
    return -1;
}
size_t swift_ggml_row_size(uint32_t type, uint64_t ne0)
{
    int b = swift_ggml_blck_size(type);
    if (!b || ne0 % (uint64_t)b)
        return 0;
    return (size_t)(ne0 / (uint64_t)b) * traits[type].size;
}

static const char *const vtype_names[SWIFT_GGUF_NTYPES] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};
const char *swift_gguf_vtype_name(uint32_t vtype)
{
    return vtype < SWIFT_GGUF_NTYPES ? vtype_names[vtype] : "?";
}

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

/* ---- values ---- */

void swift_gguf_value_release(struct swift_gguf_value *v)
{
    if (!v)
        return;
    if (v->type == SWIFT_GGUF_STRING) {
        free(v->v.str.s);
        v->v.str.s = NULL;
    } else if (v->type == SWIFT_GGUF_ARRAY) {
        if (v->v.arr.items)
            for (uint64_t i = 0; i < v->v.arr.n; i++)
                swift_gguf_value_release(&v->v.arr.items[i]);
        free(v->v.arr.items);
        v->v.arr.items = NULL;
        v->v.arr.n = 0;
    }
}

int swift_gguf_value_copy(struct swift_gguf_value *dst, const struct swift_gguf_value *src)
{
    *dst = *src;
    if (src->type == SWIFT_GGUF_STRING) {
        dst->v.str.s = malloc(src->v.str.len + 1);
        if (!dst->v.str.s)
            return swift_error("out of memory");
        memcpy(dst->v.str.s, src->v.str.s, src->v.str.len);
        dst->v.str.s[src->v.str.len] = 0;
    } else if (src->type == SWIFT_GGUF_ARRAY) {
        dst->v.arr.items = calloc(src->v.arr.n ? src->v.arr.n : 1, sizeof(*dst->v.arr.items));
        if (!dst->v.arr.items)
            return swift_error("out of memory");
        for (uint64_t i = 0; i < src->v.arr.n; i++) {
            if (swift_gguf_value_copy(&dst->v.arr.items[i], &src->v.arr.items[i]) < 0) {
                dst->v.arr.n = i + 1;
                swift_gguf_value_release(dst);
                return -1;
            }
        }
    }
    return 0;
}

int swift_gguf_value_int(const struct swift_gguf_value *v, int64_t *out)
{
    switch (v->type) {
    case SWIFT_GGUF_U8:
    case SWIFT_GGUF_U16:
    case SWIFT_GGUF_U32:
    case SWIFT_GGUF_U64:
    case SWIFT_GGUF_BOOL:
        *out = (int64_t)v->v.u;
        return 0;
    case SWIFT_GGUF_I8:
    case SWIFT_GGUF_I16:
    case SWIFT_GGUF_I32:
    case SWIFT_GGUF_I64:
        *out = v->v.i;
        return 0;
    default:
        return -1;
    }
}

static void print_json_string(FILE *fp, const char *s, uint64_t len)
{
    fputc('"', fp);
    for (uint64_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            fprintf(fp, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", fp);
        else if (c == '\t')
            fputs("\\t", fp);
        else if (c == '\r')
            fputs("\\r", fp);
        else if (c == '\b')
            fputs("\\b", fp);
        else if (c == '\f')
            fputs("\\f", fp);
        else if (c < 0x20)
            fprintf(fp, "\\u%04x", c);
        else
            fputc(c, fp);
    }
    fputc('"', fp);
}

void swift_gguf_value_print(FILE *fp, const struct swift_gguf_value *v, uint64_t max_items)
{
    switch (v->type) {
    case SWIFT_GGUF_U8:
    case SWIFT_GGUF_U16:
    case SWIFT_GGUF_U32:
    case SWIFT_GGUF_U64:
        fprintf(fp, "%" PRIu64, v->v.u);
        break;
    case SWIFT_GGUF_BOOL:
        fputs(v->v.u ? "true" : "false", fp);
        break;
    case SWIFT_GGUF_I8:
    case SWIFT_GGUF_I16:
    case SWIFT_GGUF_I32:
    case SWIFT_GGUF_I64:
        fprintf(fp, "%" PRId64, v->v.i);
        break;
    case SWIFT_GGUF_F32:
        fprintf(fp, "%.9g", v->v.f);
        break;
    case SWIFT_GGUF_F64:
        fprintf(fp, "%.17g", v->v.f);
        break;
    case SWIFT_GGUF_STRING:
        print_json_string(fp, v->v.str.s, v->v.str.len);
        break;
    case SWIFT_GGUF_ARRAY: {
        uint64_t n = v->v.arr.n;
        int cut = max_items && n > max_items;
        if (cut)
            fprintf(fp,
                    "{\"type\":\"%s\",\"n\":%" PRIu64 ",\"head\":",
                    swift_gguf_vtype_name(v->v.arr.elem_type),
                    n);
        fputc('[', fp);
        for (uint64_t i = 0; i < (cut ? max_items : n); i++) {
            if (i)
                fputc(',', fp);
            swift_gguf_value_print(fp, &v->v.arr.items[i], max_items);
        }
        fputc(']', fp);
        if (cut)
            fputc('}', fp);
        break;
    }
    default:
        fputs("null", fp);
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
    *s = malloc(n + 1);
    if (!*s)
        return swift_error("out of memory");
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
    v->v.arr.items = calloc(n ? n : 1, sizeof(*v->v.arr.items));
    if (!v->v.arr.items)
        return swift_error("out of memory");
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

/* Number of bytes of a tensor, with overflow and divisibility checks; 0 on error. */
static int tensor_nbytes(const struct swift_gguf_tensor *t, uint64_t *nbytes, const char **why)
{
    int blck = swift_ggml_blck_size(t->type);
    if (!blck) {
        *why = "unknown ggml type";
        return -1;
    }
    if (t->ne[0] % (uint64_t)blck) {
        *why = "ne[0] is not a multiple of the type's block size";
        return -1;
    }
    uint64_t nblk = t->ne[0] / (uint64_t)blck;
    if (nblk > UINT64_MAX / swift_ggml_type_size(t->type)) {
        *why = "size overflows";
        return -1;
    }
    uint64_t n = nblk * swift_ggml_type_size(t->type);
    for (uint32_t d = 1; d < SWIFT_GGUF_MAX_DIMS; d++) {
        if (t->ne[d] && n > UINT64_MAX / t->ne[d]) {
            *why = "size overflows";
            return -1;
        }
        n *= t->ne[d];
    }
    *nbytes = n;
    return 0;
}

int swift_gguf_parse(const void *buf, size_t len, const char *name, struct swift_gguf **out)
{
    *out = NULL;
    struct rd r = {.p = buf, .len = len, .pos = 0, .name = name ? name : "gguf"};
    struct swift_gguf *g = calloc(1, sizeof(*g));
    if (!g)
        return swift_error("out of memory");
    g->base = buf;
    g->size = len;
    g->alignment = SWIFT_GGUF_DEFAULT_ALIGNMENT;
    uint32_t magic;
    if (rd_u32(&r, &magic, "magic") < 0)
        goto fail;
    if (magic != SWIFT_GGUF_MAGIC) {
        rd_err(&r,
               0,
               "%s: bad magic 0x%08" PRIx64 ", expected \"GGUF\"",
               "not a GGUF file",
               (uint64_t)(magic));
        goto fail;
    }
    if (rd_u32(&r, &g->version, "version") < 0)
        goto fail;
    if (g->version != 2 && g->version != 3) {
        if ((g->version & 0xffff) == 0 && g->version)
            rd_err(&r,
                   4,
                   "big-endian GGUF (version 0x%08" PRIx32 " read as little-endian): not supported",
                   g->version);
        else
            rd_err(&r,
                   4,
                   "%s %" PRIu64 " is not supported (only 2 and 3)",
                   "GGUF version",
                   (uint64_t)(g->version));
        goto fail;
    }
    uint64_t nt, nkv;
    if (rd_u64(&r, &nt, "tensor count") < 0 || rd_u64(&r, &nkv, "key/value count") < 0)
        goto fail;
    /* a kv takes >= 8 (key len) + 4 (type) + 1 bytes; a tensor info >= 8 + 4 + 4 + 8 */
    if (nkv > (len - r.pos) / 13) {
        rd_err(&r,
               16,
               "%s %" PRIu64 " is larger than the file can hold",
               "key/value count",
               (uint64_t)(nkv));
        goto fail;
    }
    if (nt > (len - r.pos) / 24) {
        rd_err(&r,
               8,
               "%s %" PRIu64 " is larger than the file can hold",
               "tensor count",
               (uint64_t)(nt));
        goto fail;
    }
    g->kv = calloc(nkv ? nkv : 1, sizeof(*g->kv));
    g->tensors = calloc(nt ? nt : 1, sizeof(*g->tensors));
    if (!g->kv || !g->tensors) {
        swift_error("out of memory");
        goto fail;
    }
    for (uint64_t i = 0; i < nkv; i++) {
        size_t at = r.pos;
        uint64_t klen;
        g->n_kv = i + 1;
        struct swift_gguf_kv *kv = &g->kv[i];
        if (rd_string(&r, &kv->key, &klen, "key") < 0)
            goto fail;
        if (klen == 0 || strlen(kv->key) != klen) {
            rd_err(&r, at, "%s%" PRIu64 " is empty or contains a NUL byte", "key #", (uint64_t)(i));
            goto fail;
        }
        for (uint64_t j = 0; j < i; j++)
            if (!strcmp(g->kv[j].key, kv->key)) {
                char m[128];
                snprintf(m, sizeof(m), "duplicate key '%.80s'", kv->key);
                swift_error("%s:@%zu: %s", r.name, at, m);
                goto fail;
            }
        uint32_t type;
        if (rd_u32(&r, &type, "value type") < 0 || rd_value(&r, type, &kv->value, 0) < 0)
            goto fail;
        if (!strcmp(kv->key, "general.alignment")) {
            if (kv->value.type != SWIFT_GGUF_U32 || kv->value.v.u == 0 || kv->value.v.u % 8 ||
                kv->value.v.u > (1u << 20)) {
                rd_err(&r,
                       at,
                       "%s must be a u32 multiple of 8, got %" PRIu64,
                       "general.alignment",
                       (uint64_t)(kv->value.v.u));
                goto fail;
            }
            g->alignment = (uint32_t)kv->value.v.u;
        }
    }
    for (uint64_t i = 0; i < nt; i++) {
        size_t at = r.pos;
        struct swift_gguf_tensor *t = &g->tensors[i];
        uint64_t nlen;
        g->n_tensors = i + 1;
        if (rd_string(&r, &t->name, &nlen, "tensor name") < 0)
            goto fail;
        if (nlen == 0 || nlen >= SWIFT_GGUF_MAX_NAME || strlen(t->name) != nlen) {
            rd_err(&r,
                   at,
                   "%s of length %" PRIu64 " (must be 1..63 bytes, no NUL)",
                   "tensor name",
                   (uint64_t)(nlen));
            goto fail;
        }
        if (rd_u32(&r, &t->n_dims, "n_dims") < 0)
            goto fail;
        if (t->n_dims < 1 || t->n_dims > SWIFT_GGUF_MAX_DIMS) {
            rd_err(&r, r.pos - 4, "%s %" PRIu64 " (must be 1..4)", "n_dims", (uint64_t)(t->n_dims));
            goto fail;
        }
        for (uint32_t d = 0; d < SWIFT_GGUF_MAX_DIMS; d++)
            t->ne[d] = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) {
            if (rd_u64(&r, &t->ne[d], "ne") < 0)
                goto fail;
            if (t->ne[d] > INT64_MAX) {
                rd_err(&r, r.pos - 8, "%s %" PRIu64 " is out of range", "ne", (uint64_t)(t->ne[d]));
                goto fail;
            }
        }
        if (rd_u32(&r, &t->type, "tensor type") < 0 || rd_u64(&r, &t->offset, "tensor offset") < 0)
            goto fail;
        const char *why = NULL;
        if (tensor_nbytes(t, &t->nbytes, &why) < 0) {
            char m[200];
            snprintf(m,
                     sizeof(m),
                     "tensor '%s' (type %u, ne[0] %" PRIu64 "): %s",
                     t->name,
                     t->type,
                     t->ne[0],
                     why);
            swift_error("%s:@%zu: %s", r.name, at, m);
            goto fail;
        }
        for (uint64_t j = 0; j < i; j++)
            if (!strcmp(g->tensors[j].name, t->name)) {
                char m[128];
                snprintf(m, sizeof(m), "duplicate tensor '%s'", t->name);
                swift_error("%s:@%zu: %s", r.name, at, m);
                goto fail;
            }
    }
    uint64_t ds = r.pos + (g->alignment - r.pos % g->alignment) % g->alignment;
    if (nt && ds > len) {
        rd_err(&r,
               r.pos,
               "%s at %" PRIu64 " is past the end of the file",
               "data section",
               (uint64_t)(ds));
        goto fail;
    }
    g->data_offset = ds;
    for (uint64_t i = 0; i < nt; i++) {
        struct swift_gguf_tensor *t = &g->tensors[i];
        if (t->offset % g->alignment) {
            char m[200];
            snprintf(m,
                     sizeof(m),
                     "tensor '%s' offset %" PRIu64 " is not a multiple of %u",
                     t->name,
                     t->offset,
                     g->alignment);
            swift_error("%s:@%" PRIu64 ": %s", r.name, ds, m);
            goto fail;
        }
        if (t->offset > len - ds || t->nbytes > len - ds - t->offset) {
            char m[200];
            snprintf(m,
                     sizeof(m),
                     "tensor '%s' data [%" PRIu64 ", +%" PRIu64 ") runs past the end of the file "
                     "(%zu bytes)",
                     t->name,
                     ds + t->offset,
                     t->nbytes,
                     len);
            swift_error("%s:@%" PRIu64 ": %s", r.name, ds + t->offset, m);
            goto fail;
        }
        t->data = (const uint8_t *)buf + ds + t->offset;
    }
    *out = g;
    return 0;
fail:
    swift_gguf_free(g);
    return -1;
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

/* ---- writer ---- */

void swift_gguf_writer_init(struct swift_gguf_writer *w)
{
    memset(w, 0, sizeof(*w));
    w->alignment = SWIFT_GGUF_DEFAULT_ALIGNMENT;
}

void swift_gguf_writer_release(struct swift_gguf_writer *w)
{
    if (w->open)
        swift_gguf_writer_abort(w);
    for (uint64_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        swift_gguf_value_release(&w->kv[i].value);
    }
    free(w->kv);
    for (uint64_t i = 0; i < w->n_tensors; i++)
        free(w->tensors[i].name);
    free(w->tensors);
    free(w->path);
    memset(w, 0, sizeof(*w));
}

int swift_gguf_set_move(struct swift_gguf_writer *w, const char *key, struct swift_gguf_value *v)
{
    if (w->open) {
        swift_gguf_value_release(v);
        return swift_error("gguf: key '%s' set after the header was written", key);
    }
    if (!key[0]) {
        swift_gguf_value_release(v);
        return swift_error("gguf: empty key");
    }
    if (!strcmp(key, "general.alignment")) {
        if (v->type != SWIFT_GGUF_U32 || !v->v.u || v->v.u % 8 || v->v.u > (1u << 20)) {
            swift_gguf_value_release(v);
            return swift_error("gguf: general.alignment must be a u32 multiple of 8");
        }
        if (w->n_tensors) {
            swift_gguf_value_release(v);
            return swift_error("gguf: general.alignment must be set before adding tensors");
        }
        w->alignment = (uint32_t)v->v.u;
    }
    for (uint64_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kv[i].key, key)) {
            swift_gguf_value_release(&w->kv[i].value);
            w->kv[i].value = *v;
            return 0;
        }
    if (w->n_kv == w->cap_kv) {
        uint64_t cap = w->cap_kv ? w->cap_kv * 2 : 32;
        void *p = realloc(w->kv, cap * sizeof(*w->kv));
        if (!p) {
            swift_gguf_value_release(v);
            return swift_error("out of memory");
        }
        w->kv = p;
        w->cap_kv = cap;
    }
    char *k = strdup(key);
    if (!k) {
        swift_gguf_value_release(v);
        return swift_error("out of memory");
    }
    w->kv[w->n_kv].key = k;
    w->kv[w->n_kv].value = *v;
    w->n_kv++;
    return 0;
}

int swift_gguf_set(struct swift_gguf_writer *w, const char *key, const struct swift_gguf_value *v)
{
    struct swift_gguf_value c;
    if (swift_gguf_value_copy(&c, v) < 0)
        return -1;
    return swift_gguf_set_move(w, key, &c);
}

int swift_gguf_set_u32(struct swift_gguf_writer *w, const char *key, uint32_t x)
{
    struct swift_gguf_value v = {.type = SWIFT_GGUF_U32, .v.u = x};
    return swift_gguf_set_move(w, key, &v);
}
int swift_gguf_set_i32(struct swift_gguf_writer *w, const char *key, int32_t x)
{
    struct swift_gguf_value v = {.type = SWIFT_GGUF_I32, .v.i = x};
    return swift_gguf_set_move(w, key, &v);
}
int swift_gguf_set_f32(struct swift_gguf_writer *w, const char *key, float x)
{
    struct swift_gguf_value v = {.type = SWIFT_GGUF_F32, .v.f = x};
    return swift_gguf_set_move(w, key, &v);
}
int swift_gguf_set_bool(struct swift_gguf_writer *w, const char *key, int x)
{
    struct swift_gguf_value v = {.type = SWIFT_GGUF_BOOL, .v.u = x ? 1 : 0};
    return swift_gguf_set_move(w, key, &v);
}
int swift_gguf_set_str(struct swift_gguf_writer *w, const char *key, const char *s)
{
    struct swift_gguf_value v = {.type = SWIFT_GGUF_STRING};
    v.v.str.s = strdup(s);
    v.v.str.len = strlen(s);
    if (!v.v.str.s)
        return swift_error("out of memory");
    return swift_gguf_set_move(w, key, &v);
}

static int make_arr(struct swift_gguf_value *v, uint32_t et, uint64_t n)
{
    memset(v, 0, sizeof(*v));
    v->type = SWIFT_GGUF_ARRAY;
    v->v.arr.elem_type = et;
    v->v.arr.items = calloc(n ? n : 1, sizeof(*v->v.arr.items));
    if (!v->v.arr.items)
        return swift_error("out of memory");
    v->v.arr.n = n;
    return 0;
}

int swift_gguf_set_arr_str(struct swift_gguf_writer *w, const char *key, const char *const *s,
                           uint64_t n)
{
    struct swift_gguf_value v;
    if (make_arr(&v, SWIFT_GGUF_STRING, n) < 0)
        return -1;
    for (uint64_t i = 0; i < n; i++) {
        struct swift_gguf_value *it = &v.v.arr.items[i];
        it->type = SWIFT_GGUF_STRING;
        it->v.str.len = strlen(s[i]);
        it->v.str.s = strdup(s[i]);
        if (!it->v.str.s) {
            swift_gguf_value_release(&v);
            return swift_error("out of memory");
        }
    }
    return swift_gguf_set_move(w, key, &v);
}

int swift_gguf_set_arr_i32(struct swift_gguf_writer *w, const char *key, const int32_t *x,
                           uint64_t n)
{
    struct swift_gguf_value v;
    if (make_arr(&v, SWIFT_GGUF_I32, n) < 0)
        return -1;
    for (uint64_t i = 0; i < n; i++) {
        v.v.arr.items[i].type = SWIFT_GGUF_I32;
        v.v.arr.items[i].v.i = x[i];
    }
    return swift_gguf_set_move(w, key, &v);
}

int swift_gguf_set_arr_f32(struct swift_gguf_writer *w, const char *key, const float *x, uint64_t n)
{
    struct swift_gguf_value v;
    if (make_arr(&v, SWIFT_GGUF_F32, n) < 0)
        return -1;
    for (uint64_t i = 0; i < n; i++) {
        v.v.arr.items[i].type = SWIFT_GGUF_F32;
        v.v.arr.items[i].v.f = x[i];
    }
    return swift_gguf_set_move(w, key, &v);
}

static uint64_t pad_to(uint64_t x, uint64_t a)
{
    return x + (a - x % a) % a;
}

long swift_gguf_add_tensor(struct swift_gguf_writer *w, const char *name, uint32_t n_dims,
                           const uint64_t *ne, uint32_t type)
{
    if (w->open)
        return swift_error("gguf: tensor '%s' added after the header was written", name);
    size_t nlen = strlen(name);
    if (nlen == 0 || nlen >= SWIFT_GGUF_MAX_NAME)
        return swift_error("gguf: tensor name '%s' must be 1..63 bytes", name);
    if (n_dims < 1 || n_dims > SWIFT_GGUF_MAX_DIMS)
        return swift_error("gguf: tensor '%s' has %u dims (1..4 allowed)", name, n_dims);
    struct swift_gguf_tensor t = {.n_dims = n_dims, .type = type};
    for (uint32_t d = 0; d < SWIFT_GGUF_MAX_DIMS; d++)
        t.ne[d] = d < n_dims ? ne[d] : 1;
    const char *why = NULL;
    if (tensor_nbytes(&t, &t.nbytes, &why) < 0)
        return swift_error("gguf: tensor '%s' (%s, ne[0]=%" PRIu64 "): %s",
                           name,
                           swift_ggml_type_name(type),
                           t.ne[0],
                           why);
    for (uint64_t i = 0; i < w->n_tensors; i++)
        if (!strcmp(w->tensors[i].name, name))
            return swift_error("gguf: duplicate tensor '%s'", name);
    if (w->n_tensors == w->cap_tensors) {
        uint64_t cap = w->cap_tensors ? w->cap_tensors * 2 : 64;
        void *p = realloc(w->tensors, cap * sizeof(*w->tensors));
        if (!p)
            return swift_error("out of memory");
        w->tensors = p;
        w->cap_tensors = cap;
    }
    t.name = strdup(name);
    if (!t.name)
        return swift_error("out of memory");
    t.offset = w->data_size;
    w->data_size = pad_to(w->data_size + t.nbytes, w->alignment);
    w->tensors[w->n_tensors] = t;
    return (long)w->n_tensors++;
}

/* Buffered little-endian output into the atomic file. */
static int wr(struct swift_gguf_writer *w, const void *p, size_t n)
{
    if (n && fwrite(p, 1, n, w->af.fp) != n)
        return swift_error_errno("cannot write '%s'", w->path);
    w->written += n;
    return 0;
}
static int wr_u32(struct swift_gguf_writer *w, uint32_t x)
{
    uint8_t b[4] = {(uint8_t)x, (uint8_t)(x >> 8), (uint8_t)(x >> 16), (uint8_t)(x >> 24)};
    return wr(w, b, 4);
}
static int wr_u64(struct swift_gguf_writer *w, uint64_t x)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(x >> (8 * i));
    return wr(w, b, 8);
}
static int wr_str(struct swift_gguf_writer *w, const char *s, uint64_t len)
{
    return wr_u64(w, len) < 0 ? -1 : wr(w, s, (size_t)len);
}

static int wr_value(struct swift_gguf_writer *w, const struct swift_gguf_value *v)
{
    uint8_t b[8];
    switch (v->type) {
    case SWIFT_GGUF_U8:
    case SWIFT_GGUF_I8:
    case SWIFT_GGUF_BOOL:
        b[0] = (uint8_t)(v->type == SWIFT_GGUF_I8 ? (uint64_t)v->v.i : v->v.u);
        return wr(w, b, 1);
    case SWIFT_GGUF_U16:
    case SWIFT_GGUF_I16: {
        uint64_t x = v->type == SWIFT_GGUF_I16 ? (uint64_t)v->v.i : v->v.u;
        b[0] = (uint8_t)x;
        b[1] = (uint8_t)(x >> 8);
        return wr(w, b, 2);
    }
    case SWIFT_GGUF_U32:
        return wr_u32(w, (uint32_t)v->v.u);
    case SWIFT_GGUF_I32:
        return wr_u32(w, (uint32_t)(int32_t)v->v.i);
    case SWIFT_GGUF_F32: {
        float f = (float)v->v.f;
        uint32_t x;
        memcpy(&x, &f, 4);
        return wr_u32(w, x);
    }
    case SWIFT_GGUF_U64:
        return wr_u64(w, v->v.u);
    case SWIFT_GGUF_I64:
        return wr_u64(w, (uint64_t)v->v.i);
    case SWIFT_GGUF_F64: {
        uint64_t x;
        memcpy(&x, &v->v.f, 8);
        return wr_u64(w, x);
    }
    case SWIFT_GGUF_STRING:
        return wr_str(w, v->v.str.s, v->v.str.len);
    case SWIFT_GGUF_ARRAY:
        if (wr_u32(w, v->v.arr.elem_type) < 0 || wr_u64(w, v->v.arr.n) < 0)
            return -1;
        for (uint64_t i = 0; i < v->v.arr.n; i++) {
            if (v->v.arr.items[i].type != v->v.arr.elem_type)
                return swift_error("gguf: array element %" PRIu64 " has type %s, not %s",
                                   i,
                                   swift_gguf_vtype_name(v->v.arr.items[i].type),
                                   swift_gguf_vtype_name(v->v.arr.elem_type));
            if (wr_value(w, &v->v.arr.items[i]) < 0)
                return -1;
        }
        return 0;
    default:
        return swift_error("gguf: cannot write value type %u", v->type);
    }
}

static int wr_zeros(struct swift_gguf_writer *w, uint64_t n)
{
    static const uint8_t z[64];
    while (n) {
        size_t k = n > sizeof(z) ? sizeof(z) : (size_t)n;
        if (wr(w, z, k) < 0)
            return -1;
        n -= k;
    }
    return 0;
}

int swift_gguf_writer_begin(struct swift_gguf_writer *w, const char *path)
{
    if (w->open)
        return swift_error("gguf: writer already open");
    free(w->path);
    w->path = strdup(path);
    if (!w->path)
        return swift_error("out of memory");
    if (swift_atomic_open(&w->af, path) < 0)
        return -1;
    w->open = 1;
    w->written = 0;
    w->next_tensor = 0;
    setvbuf(w->af.fp, NULL, _IOFBF, 1 << 20);
    if (wr_u32(w, SWIFT_GGUF_MAGIC) < 0 || wr_u32(w, SWIFT_GGUF_VERSION) < 0 ||
        wr_u64(w, w->n_tensors) < 0 || wr_u64(w, w->n_kv) < 0)
        goto fail;
    for (uint64_t i = 0; i < w->n_kv; i++) {
        const struct swift_gguf_kv *kv = &w->kv[i];
        if (wr_str(w, kv->key, strlen(kv->key)) < 0 || wr_u32(w, kv->value.type) < 0 ||
            wr_value(w, &kv->value) < 0)
            goto fail;
    }
    for (uint64_t i = 0; i < w->n_tensors; i++) {
        const struct swift_gguf_tensor *t = &w->tensors[i];
        if (wr_str(w, t->name, strlen(t->name)) < 0 || wr_u32(w, t->n_dims) < 0)
            goto fail;
        for (uint32_t d = 0; d < t->n_dims; d++)
            if (wr_u64(w, t->ne[d]) < 0)
                goto fail;
        if (wr_u32(w, t->type) < 0 || wr_u64(w, t->offset) < 0)
            goto fail;
    }
    if (wr_zeros(w, pad_to(w->written, w->alignment) - w->written) < 0)
        goto fail;
    return 0;
fail:
    swift_gguf_writer_abort(w);
    return -1;
}

int swift_gguf_writer_write_data(struct swift_gguf_writer *w, const void *data, uint64_t nbytes)
{
    if (!w->open)
        return swift_error("gguf: writer is not open");
    if (w->next_tensor >= w->n_tensors)
        return swift_error("gguf: more tensor data than declared tensors");
    const struct swift_gguf_tensor *t = &w->tensors[w->next_tensor];
    if (nbytes != t->nbytes)
        return swift_error(
            "gguf: tensor '%s' needs %" PRIu64 " bytes, got %" PRIu64, t->name, t->nbytes, nbytes);
    if (wr(w, data, (size_t)nbytes) < 0 ||
        wr_zeros(w, pad_to(t->nbytes, w->alignment) - t->nbytes) < 0)
        return -1;
    w->next_tensor++;
    return 0;
}

int swift_gguf_writer_commit(struct swift_gguf_writer *w)
{
    if (!w->open)
        return swift_error("gguf: writer is not open");
    if (w->next_tensor != w->n_tensors) {
        swift_error("gguf: only %" PRIu64 " of %" PRIu64 " tensors written to '%s'",
                    w->next_tensor,
                    w->n_tensors,
                    w->path);
        swift_gguf_writer_abort(w);
        return -1;
    }
    w->open = 0;
    return swift_atomic_commit(&w->af);
}

void swift_gguf_writer_abort(struct swift_gguf_writer *w)
{
    if (w->open)
        swift_atomic_abort(&w->af);
    w->open = 0;
}

void swift_gguf_dump(FILE *fp, const struct swift_gguf *g, uint64_t max_items)
{
    fprintf(fp,
            "version\t%u\nalignment\t%u\nkv_count\t%" PRIu64 "\ntensor_count\t%" PRIu64 "\n",
            g->version,
            g->alignment,
            g->n_kv,
            g->n_tensors);
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const struct swift_gguf_value *v = &g->kv[i].value;
        fprintf(fp, "kv\t%s\t%s", g->kv[i].key, swift_gguf_vtype_name(v->type));
        if (v->type == SWIFT_GGUF_ARRAY)
            fprintf(fp, "[%s]", swift_gguf_vtype_name(v->v.arr.elem_type));
        fputc('\t', fp);
        swift_gguf_value_print(fp, v, max_items);
        fputc('\n', fp);
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const struct swift_gguf_tensor *t = &g->tensors[i];
        fprintf(fp, "tensor\t%s\t%s\t[", t->name, swift_ggml_type_name(t->type));
        for (uint32_t d = 0; d < t->n_dims; d++)
            fprintf(fp, "%s%" PRIu64, d ? "," : "", t->ne[d]);
        fprintf(fp, "]\t%" PRIu64 "\t%" PRIu64 "\n", t->offset, t->nbytes);
    }
}
