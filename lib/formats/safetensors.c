/* safetensors — see safetensors.h. */
#include "lib/formats/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/core/record.h"
#include "lib/core/banned.h"

static const struct {
    const char *name;
    int bits;
} dtypes[SWIFT_DTYPE_COUNT] = {
    [SWIFT_DTYPE_F32] = {"F32", 32},
    [SWIFT_DTYPE_F16] = {"F16", 16},
    [SWIFT_DTYPE_BF16] = {"BF16", 16},
    [SWIFT_DTYPE_F64] = {"F64", 64},
    [SWIFT_DTYPE_BOOL] = {"BOOL", 8},
    [SWIFT_DTYPE_U8] = {"U8", 8},
    [SWIFT_DTYPE_I8] = {"I8", 8},
    [SWIFT_DTYPE_I16] = {"I16", 16},
    [SWIFT_DTYPE_U16] = {"U16", 16},
    [SWIFT_DTYPE_I32] = {"I32", 32},
    [SWIFT_DTYPE_U32] = {"U32", 32},
    [SWIFT_DTYPE_I64] = {"I64", 64},
    [SWIFT_DTYPE_U64] = {"U64", 64},
    [SWIFT_DTYPE_C64] = {"C64", 64},
    [SWIFT_DTYPE_F8_E5M2] = {"F8_E5M2", 8},
    [SWIFT_DTYPE_F8_E4M3] = {"F8_E4M3", 8},
    [SWIFT_DTYPE_F8_E8M0] = {"F8_E8M0", 8},
    [SWIFT_DTYPE_F8_E4M3FNUZ] = {"F8_E4M3FNUZ", 8},
    [SWIFT_DTYPE_F8_E5M2FNUZ] = {"F8_E5M2FNUZ", 8},
    [SWIFT_DTYPE_F4] = {"F4", 4},
    [SWIFT_DTYPE_F6_E2M3] = {"F6_E2M3", 6},
    [SWIFT_DTYPE_F6_E3M2] = {"F6_E3M2", 6},
};

const char *swift_dtype_name(enum swift_dtype dt)
{
    if ((int)dt < 0 || dt >= SWIFT_DTYPE_COUNT)
        return NULL;
    return dtypes[dt].name;
}

int swift_dtype_parse(const char *s)
{
    for (int i = 0; i < SWIFT_DTYPE_COUNT; i++)
        if (!strcmp(dtypes[i].name, s))
            return i;
    return -1;
}

int swift_dtype_bits(enum swift_dtype dt)
{
    if ((int)dt < 0 || dt >= SWIFT_DTYPE_COUNT)
        return 0;
    return dtypes[dt].bits;
}

static float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint32_t bits_from_f32(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

float swift_bf16_to_f32(uint16_t b)
{
    return f32_from_bits((uint32_t)b << 16);
}

uint16_t swift_f32_to_bf16(float f)
{
    uint32_t u = bits_from_f32(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it a quiet NaN */
        return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1); /* round to nearest even */
    return (uint16_t)(u >> 16);
}

float swift_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0) {
        /* zero or subnormal: man * 2^-24 */
        float v = (float)man * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    if (exp == 31)
        return f32_from_bits(sign | 0x7f800000u | (man << 13));
    return f32_from_bits(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t swift_f32_to_f16(float f)
{
    uint32_t u = bits_from_f32(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u)
        return sign | 0x7e00;
    if (a >= 0x477ff000u) /* rounds to >= 65520: inf */
        return sign | 0x7c00;
    if (a < 0x38800000u) {
        /* subnormal half (or zero): value / 2^-24, round to nearest even */
        float v = f32_from_bits(a) * 16777216.0f;
        float r = __builtin_rintf(v); /* default rounding mode is nearest-even */
        return sign | (uint16_t)r;
    }
    uint32_t e = ((a >> 23) - 112) << 10, m = (a >> 13) & 0x3ff;
    uint32_t rest = a & 0x1fff;
    uint32_t h = e | m;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1)))
        h++;
    return sign | (uint16_t)h;
}

/* ---- reader ---- */

static int cmp_tensor_name(const void *a, const void *b)
{
    return strcmp(((const struct swift_st_tensor *)a)->name,
                  ((const struct swift_st_tensor *)b)->name);
}

static int cmp_tensor_off(const void *a, const void *b)
{
    const struct swift_st_tensor *x = *(const struct swift_st_tensor *const *)a;
    const struct swift_st_tensor *y = *(const struct swift_st_tensor *const *)b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return 0;
}

static int get_u64(json_t *v, uint64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return -1;
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

static int parse_entry(struct swift_st_tensor *t, const char *name, json_t *v, const char *path)
{
    if (!json_is_object(v))
        return swift_error_at(path, 0, "tensor '%s': entry is not an object", name);
    json_t *jd = json_object_get(v, "dtype"), *js = json_object_get(v, "shape"),
           *jo = json_object_get(v, "data_offsets");
    if (!json_is_string(jd))
        return swift_error_at(path, 0, "tensor '%s': missing or non-string dtype", name);
    int dt = swift_dtype_parse(json_string_value(jd));
    if (dt < 0)
        return swift_error_at(
            path, 0, "tensor '%s': unknown dtype '%s'", name, json_string_value(jd));
    if (!json_is_array(js))
        return swift_error_at(path, 0, "tensor '%s': missing or non-array shape", name);
    if (json_array_size(js) > SWIFT_ST_MAX_DIMS)
        return swift_error_at(path,
                              0,
                              "tensor '%s': %zu dimensions (at most %d)",
                              name,
                              json_array_size(js),
                              SWIFT_ST_MAX_DIMS);
    if (!json_is_array(jo) || json_array_size(jo) != 2)
        return swift_error_at(path, 0, "tensor '%s': data_offsets must be [BEGIN, END]", name);
    if (json_object_size(v) != 3)
        return swift_error_at(path, 0, "tensor '%s': unexpected keys in entry", name);
    t->dtype = (enum swift_dtype)dt;
    t->ndim = (int)json_array_size(js);
    /* numel * bits / 8 must not overflow: keep numel below 2^58 */
    uint64_t numel = 1;
    for (int i = 0; i < t->ndim; i++) {
        uint64_t d;
        if (get_u64(json_array_get(js, (size_t)i), &d) < 0)
            return swift_error_at(
                path, 0, "tensor '%s': shape[%d] is not a non-negative integer", name, i);
        if (d && numel > (UINT64_C(1) << 58) / d)
            return swift_error_at(path, 0, "tensor '%s': shape too large", name);
        numel *= d;
        t->shape[i] = (int64_t)d;
    }
    t->numel = numel;
    if (get_u64(json_array_get(jo, 0), &t->begin) < 0 ||
        get_u64(json_array_get(jo, 1), &t->end) < 0)
        return swift_error_at(
            path, 0, "tensor '%s': data_offsets are not non-negative integers", name);
    if (t->end < t->begin)
        return swift_error_at(path, 0, "tensor '%s': data_offsets END < BEGIN", name);
    uint64_t bits = numel * (uint64_t)dtypes[dt].bits;
    if (bits % 8)
        return swift_error_at(path,
                              0,
                              "tensor '%s': %llu elements of %s are not whole bytes",
                              name,
                              (unsigned long long)numel,
                              dtypes[dt].name);
    if (t->end - t->begin != bits / 8)
        return swift_error_at(
            path,
            0,
            "tensor '%s': data_offsets span %llu bytes, shape and dtype need %llu",
            name,
            (unsigned long long)(t->end - t->begin),
            (unsigned long long)(bits / 8));
    return 0;
}

/* The u64 header length at the start of the file, checked against the limit and the file. */
static int header_length(const uint8_t *p, size_t len, const char *path, uint64_t *np)
{
    if (len < 8)
        return swift_error_at(path,
                              0,
                              "not a safetensors file: %zu bytes, shorter than the 8-byte "
                              "header length",
                              len);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = (n << 8) | p[i];
    if (n > SWIFT_ST_MAX_HEADER)
        return swift_error_at(path,
                              0,
                              "header length %llu exceeds the 100000000-byte limit "
                              "(not a safetensors file?)",
                              (unsigned long long)n);
    if (n > len - 8)
        return swift_error_at(path,
                              0,
                              "header length %llu runs past the end of the file (%zu bytes)",
                              (unsigned long long)n,
                              len);
    if (n < 2 || p[8] != '{')
        return swift_error_at(path, 0, "header does not start with '{'");
    *np = n;
    return 0;
}

/* __metadata__ must map strings to strings. */
static int check_metadata(json_t *val, const char *path)
{
    if (!json_is_object(val))
        return swift_error_at(path, 0, "__metadata__ is not an object");
    const char *mk;
    json_t *mv;
    json_object_foreach(val, mk, mv)
    {
        if (!json_is_string(mv))
            return swift_error_at(path, 0, "__metadata__ value of '%s' is not a string", mk);
    }
    return 0;
}

/* The header's entries: __metadata__ and one tensor per other key. */
static int read_entries(struct swift_safetensors *st, json_t *root, const char *path)
{
    size_t cap = json_object_size(root);
    st->tensors = swift_xcalloc(cap, sizeof(*st->tensors));
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val)
    {
        if (!strcmp(key, "__metadata__")) {
            if (check_metadata(val, path) < 0)
                return -1;
            st->metadata = json_incref(val);
            continue;
        }
        struct swift_st_tensor *t = &st->tensors[st->ntensors];
        if (parse_entry(t, key, val, path) < 0)
            return -1;
        t->name = swift_xstrdup(key);
        t->path = st->path;
        t->data = st->buffer + t->begin;
        st->ntensors++;
    }
    return 0;
}

/* The offsets must tile the buffer exactly, in offset order. */
static int check_tiling(const struct swift_safetensors *st, const char *path)
{
    struct swift_st_tensor **ord = swift_xcalloc(st->ntensors, sizeof(*ord));
    for (size_t i = 0; i < st->ntensors; i++)
        ord[i] = &st->tensors[i];
    qsort(ord, st->ntensors, sizeof(*ord), cmp_tensor_off);
    uint64_t at = 0;
    for (size_t i = 0; i < st->ntensors; i++) {
        if (ord[i]->begin != at) {
            int rc = swift_error_at(path,
                                    0,
                                    "tensor '%s' starts at byte %llu of the buffer, expected %llu "
                                    "(offsets must tile the buffer with no holes or overlaps)",
                                    ord[i]->name,
                                    (unsigned long long)ord[i]->begin,
                                    (unsigned long long)at);
            free(ord);
            return rc;
        }
        at = ord[i]->end;
    }
    free(ord);
    if (at != st->buffer_len)
        return swift_error_at(path,
                              0,
                              "tensors end at byte %llu of the buffer but the file holds %llu "
                              "bytes after the header (truncated or trailing data)",
                              (unsigned long long)at,
                              (unsigned long long)st->buffer_len);
    return 0;
}

int swift_safetensors_parse(struct swift_safetensors *st, const void *buf, size_t len,
                            const char *path)
{
    const uint8_t *p = buf;
    memset(st, 0, sizeof(*st));
    st->path = swift_xstrdup(path);
    uint64_t n = 0;
    if (header_length(p, len, path, &n) < 0)
        goto fail;
    st->header_len = n;
    st->buffer = p + 8 + n;
    st->buffer_len = len - 8 - n;

    json_error_t jerr;
    json_t *root = json_loadb((const char *)p + 8, (size_t)n, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        swift_error_at(path, 0, "header byte %d: %s", jerr.position + 8, jerr.text);
        goto fail;
    }
    int rc = json_is_object(root) ? read_entries(st, root, path)
                                  : swift_error_at(path, 0, "header is not a JSON object");
    json_decref(root);
    if (rc < 0 || check_tiling(st, path) < 0)
        goto fail;
    qsort(st->tensors, st->ntensors, sizeof(*st->tensors), cmp_tensor_name);
    return 0;
fail:
    swift_safetensors_close(st);
    return -1;
}

int swift_safetensors_open(struct swift_safetensors *st, const char *path)
{
    memset(st, 0, sizeof(*st));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return swift_error_errno("cannot open '%s'", path);
    struct stat sb;
    if (fstat(fd, &sb) < 0) {
        close(fd);
        return swift_error_errno("cannot stat '%s'", path);
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return swift_error_at(path, 0, "not a regular file");
    }
    size_t len = (size_t)sb.st_size;
    void *map = NULL;
    if (len > 0) {
        map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            close(fd);
            return swift_error_errno("cannot mmap '%s'", path);
        }
    }
    close(fd);
    if (swift_safetensors_parse(st, map ? map : "", len, path) < 0) {
        if (map)
            munmap(map, len);
        return -1;
    }
    st->map = map;
    st->map_len = len;
    return 0;
}

void swift_safetensors_close(struct swift_safetensors *st)
{
    if (!st)
        return;
    for (size_t i = 0; i < st->ntensors; i++)
        free(st->tensors[i].name);
    free(st->tensors);
    json_decref(st->metadata);
    if (st->map)
        munmap(st->map, st->map_len);
    free(st->path);
    memset(st, 0, sizeof(*st));
}

const struct swift_st_tensor *swift_safetensors_find(const struct swift_safetensors *st,
                                                     const char *name)
{
    size_t lo = 0, hi = st->ntensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(name, st->tensors[mid].name);
        if (!c)
            return &st->tensors[mid];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

const char *swift_safetensors_meta(const struct swift_safetensors *st, const char *key)
{
    if (!st->metadata)
        return NULL;
    return json_string_value(json_object_get(st->metadata, key));
}

int swift_st_tensor_to_f32(const struct swift_st_tensor *t, float *out)
{
    const uint8_t *p = t->data;
    switch (t->dtype) {
    case SWIFT_DTYPE_F32:
        memcpy(out, p, t->numel * 4);
        return 0;
    case SWIFT_DTYPE_F16:
        for (uint64_t i = 0; i < t->numel; i++)
            out[i] = swift_f16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
        return 0;
    case SWIFT_DTYPE_BF16:
        for (uint64_t i = 0; i < t->numel; i++)
            out[i] = swift_bf16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
        return 0;
    default:
        return swift_error_at(t->path,
                              0,
                              "tensor '%s' has dtype %s; only F32, F16 and BF16 "
                              "convert to float32",
                              t->name,
                              swift_dtype_name(t->dtype));
    }
}

static void fmt_shape(char *buf, size_t cap, int ndim, const int64_t *dims)
{
    size_t o = 0;
    o += (size_t)snprintf(buf + o, cap - o, "[");
    for (int i = 0; i < ndim && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%lld", i ? ", " : "", (long long)dims[i]);
    if (o < cap)
        snprintf(buf + o, cap - o, "]");
}

int swift_st_tensor_check_shape(const struct swift_st_tensor *t, int ndim, const int64_t *dims)
{
    int ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++)
        ok = t->shape[i] == dims[i];
    if (ok)
        return 0;
    char a[256], b[256];
    fmt_shape(a, sizeof(a), t->ndim, t->shape);
    fmt_shape(b, sizeof(b), ndim, dims);
    return swift_error_at(t->path, 0, "tensor '%s' has shape %s, expected %s", t->name, a, b);
}

/* ---- sets (single file or sharded) ---- */

/* One file as a set of one. */
static int open_single(struct swift_st_set *set, const char *path)
{
    set->files = swift_xcalloc(1, sizeof(*set->files));
    if (swift_safetensors_open(&set->files[0], path) < 0)
        return -1;
    set->nfiles = 1;
    return 0;
}

static size_t name_index(const char *const *names, size_t nn, const char *f)
{
    size_t j = 0;
    while (j < nn && strcmp(names[j], f))
        j++;
    return j;
}

/* The distinct shard names of a weight map, in first-seen order; each must be a plain file
 * name in the directory. */
static int shard_names(json_t *wm, const char *idx, const char **names, size_t *nn)
{
    const char *key;
    json_t *val;
    *nn = 0;
    json_object_foreach(wm, key, val)
    {
        const char *f = json_string_value(val);
        if (!f)
            return swift_error_at(idx, 0, "weight_map value of '%s' is not a string", key);
        if (strchr(f, '/') || !strcmp(f, "..") || !strcmp(f, "."))
            return swift_error_at(
                idx, 0, "weight_map names '%s', which is not a file in the directory", f);
        if (name_index(names, *nn, f) == *nn)
            names[(*nn)++] = f;
    }
    return 0;
}

/* Open every shard the weight map names and check that each holds the tensors put in it. */
static int open_weight_map(struct swift_st_set *set, const char *dir, const char *idx, json_t *wm)
{
    size_t cap = json_object_size(wm), nn = 0;
    const char **names = swift_xcalloc(cap, sizeof(*names));
    set->files = swift_xcalloc(cap, sizeof(*set->files));
    int rc = shard_names(wm, idx, names, &nn);
    for (size_t j = 0; rc == 0 && j < nn; j++) {
        char *p = swift_path_join(dir, names[j]);
        if (swift_safetensors_open(&set->files[j], p) < 0)
            rc = -1;
        else
            set->nfiles = j + 1;
        free(p);
    }
    const char *key;
    json_t *val;
    if (rc == 0) {
        json_object_foreach(wm, key, val)
        {
            const char *f = json_string_value(val);
            if (!swift_safetensors_find(&set->files[name_index(names, nn, f)], key)) {
                rc = swift_error_at(
                    idx, 0, "weight_map puts '%s' in %s, which does not hold it", key, f);
                break;
            }
        }
    }
    free(names);
    return rc;
}

/* A directory: model.safetensors.index.json and its shards, else model.safetensors. */
static int open_dir(struct swift_st_set *set, const char *dir)
{
    set->dir = swift_xstrdup(dir);
    char *idx = swift_path_join(dir, "model.safetensors.index.json");
    if (access(idx, F_OK) < 0) {
        free(idx);
        char *single = swift_path_join(dir, "model.safetensors");
        int rc =
            access(single, F_OK) < 0
                ? swift_error("'%s' has neither model.safetensors nor model.safetensors.index.json",
                              dir)
                : open_single(set, single);
        free(single);
        return rc;
    }
    json_error_t jerr;
    json_t *root = json_load_file(idx, JSON_REJECT_DUPLICATES, &jerr);
    int rc;
    if (!root)
        rc = swift_error_at(idx, jerr.line, "%s", jerr.text);
    else if (!json_is_object(json_object_get(root, "weight_map")))
        rc = swift_error_at(idx, 0, "missing or non-object weight_map");
    else
        rc = open_weight_map(set, dir, idx, json_object_get(root, "weight_map"));
    json_decref(root);
    free(idx);
    return rc;
}

int swift_st_set_open(struct swift_st_set *set, const char *dir)
{
    memset(set, 0, sizeof(*set));
    int rc = swift_is_dir(dir) ? open_dir(set, dir) : open_single(set, dir);
    if (rc < 0)
        swift_st_set_close(set);
    return rc < 0 ? -1 : 0;
}

void swift_st_set_close(struct swift_st_set *set)
{
    if (!set)
        return;
    for (size_t i = 0; i < set->nfiles; i++)
        swift_safetensors_close(&set->files[i]);
    free(set->files);
    free(set->dir);
    memset(set, 0, sizeof(*set));
}

const struct swift_st_tensor *swift_st_set_find(const struct swift_st_set *set, const char *name)
{
    for (size_t i = 0; i < set->nfiles; i++) {
        const struct swift_st_tensor *t = swift_safetensors_find(&set->files[i], name);
        if (t)
            return t;
    }
    return NULL;
}

/* ---- writer ---- */

static uint64_t entry_bytes(const struct swift_st_entry *e)
{
    uint64_t numel = 1;
    for (int i = 0; i < e->ndim; i++)
        numel *= (uint64_t)e->shape[i];
    return numel * (uint64_t)swift_dtype_bits(e->dtype) / 8;
}

static int entry_align(const struct swift_st_entry *e)
{
    int b = swift_dtype_bits(e->dtype) / 8;
    return b ? b : 1;
}

static int cmp_entry_ptr(const void *a, const void *b)
{
    const struct swift_st_entry *x = *(const struct swift_st_entry *const *)a;
    const struct swift_st_entry *y = *(const struct swift_st_entry *const *)b;
    int ax = entry_align(x), ay = entry_align(y);
    if (ax != ay)
        return ay - ax;
    return strcmp(x->name, y->name);
}

static int write_file(const char *path, const struct swift_st_entry *const *ord, size_t n,
                      const char *const *meta)
{
    json_t *root = json_object(), *md = json_object();
    if (!root || !md)
        abort();
    json_object_set_new(md, "format", json_string("pt"));
    for (size_t i = 0; meta && meta[i] && meta[i + 1]; i += 2)
        json_object_set_new(md, meta[i], json_string(meta[i + 1]));
    json_object_set_new(root, "__metadata__", md);
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        const struct swift_st_entry *e = ord[i];
        if (!swift_dtype_name(e->dtype) || e->ndim < 0 || e->ndim > SWIFT_ST_MAX_DIMS) {
            json_decref(root);
            return swift_error("%s: tensor '%s': bad dtype or rank", path, e->name);
        }
        if (json_object_get(root, e->name)) {
            json_decref(root);
            return swift_error("%s: duplicate tensor name '%s'", path, e->name);
        }
        json_t *shape = json_array();
        for (int d = 0; d < e->ndim; d++)
            json_array_append_new(shape, json_integer(e->shape[d]));
        uint64_t nb = entry_bytes(e);
        json_t *t = json_pack("{s:s,s:o,s:[I,I]}",
                              "dtype",
                              swift_dtype_name(e->dtype),
                              "shape",
                              shape,
                              "data_offsets",
                              (json_int_t)off,
                              (json_int_t)(off + nb));
        if (!t)
            abort();
        json_object_set_new(root, e->name, t);
        off += nb;
    }
    char *hdr = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!hdr)
        abort();
    size_t hl = strlen(hdr), padded = (hl + 7) / 8 * 8;
    struct swift_atomic af;
    if (swift_atomic_open(&af, path) < 0) {
        free(hdr);
        return -1;
    }
    uint8_t len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    int ok = fwrite(len8, 1, 8, af.fp) == 8 && fwrite(hdr, 1, hl, af.fp) == hl;
    for (size_t i = hl; ok && i < padded; i++)
        ok = fputc(' ', af.fp) != EOF;
    free(hdr);
    for (size_t i = 0; ok && i < n; i++) {
        uint64_t nb = entry_bytes(ord[i]);
        ok = nb == 0 || fwrite(ord[i]->data, 1, nb, af.fp) == nb;
    }
    if (!ok) {
        swift_error_errno("cannot write '%s'", path);
        swift_atomic_abort(&af);
        return -1;
    }
    return swift_atomic_commit(&af);
}

int swift_safetensors_write(const char *path, const struct swift_st_entry *e, size_t n,
                            const char *const *meta)
{
    const struct swift_st_entry **ord = swift_xcalloc(n, sizeof(*ord));
    for (size_t i = 0; i < n; i++)
        ord[i] = &e[i];
    qsort(ord, n, sizeof(*ord), cmp_entry_ptr);
    int rc = write_file(path, ord, n, meta);
    free(ord);
    return rc;
}

int swift_safetensors_write_sharded(const char *dir, const struct swift_st_entry *e, size_t n,
                                    uint64_t max_shard_bytes)
{
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += entry_bytes(&e[i]);
    if (!max_shard_bytes || total <= max_shard_bytes) {
        char *p = swift_path_join(dir, "model.safetensors");
        int rc = swift_safetensors_write(p, e, n, NULL);
        free(p);
        return rc;
    }
    /* Greedy split in the given order; a tensor larger than the limit gets its own shard. */
    size_t *first = swift_xcalloc(n + 1, sizeof(*first));
    size_t nsh = 0;
    uint64_t cur = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t b = entry_bytes(&e[i]);
        if (i == 0 || (cur > 0 && cur + b > max_shard_bytes)) {
            first[nsh++] = i;
            cur = 0;
        }
        cur += b;
    }
    first[nsh] = n;
    json_t *wm = json_object();
    int rc = 0;
    for (size_t s = 0; s < nsh && rc == 0; s++) {
        char name[64];
        snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors", s + 1, nsh);
        char *p = swift_path_join(dir, name);
        rc = swift_safetensors_write(p, e + first[s], first[s + 1] - first[s], NULL);
        free(p);
        for (size_t i = first[s]; i < first[s + 1]; i++)
            json_object_set_new(wm, e[i].name, json_string(name));
    }
    free(first);
    if (rc == 0) {
        json_t *root = json_pack(
            "{s:{s:I},s:o}", "metadata", "total_size", (json_int_t)total, "weight_map", wm);
        if (!root)
            abort(); /* a bad pack format: jansson allocates through swift_xmalloc */
        char *p = swift_path_join(dir, "model.safetensors.index.json");
        rc = swift_json_write_file(p, root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        json_decref(root);
        free(p);
    } else {
        json_decref(wm);
    }
    return rc;
}
