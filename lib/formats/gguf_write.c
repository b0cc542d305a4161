/* gguf_write — the streaming GGUF writer: keys and tensor infos declared first, then the header
 * and the data in declaration order, to a temporary name renamed on commit (see gguf.h). */
#include "lib/formats/gguf.h"

#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/formats/internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

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
        w->kv = swift_xrealloc(w->kv, cap * sizeof(*w->kv));
        w->cap_kv = cap;
    }
    w->kv[w->n_kv].key = swift_xstrdup(key);
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
    v.v.str.s = swift_xstrdup(s);
    v.v.str.len = strlen(s);
    return swift_gguf_set_move(w, key, &v);
}

static void make_arr(struct swift_gguf_value *v, uint32_t et, uint64_t n)
{
    memset(v, 0, sizeof(*v));
    v->type = SWIFT_GGUF_ARRAY;
    v->v.arr.elem_type = et;
    v->v.arr.items = swift_xcalloc(n, sizeof(*v->v.arr.items));
    v->v.arr.n = n;
}

int swift_gguf_set_arr_str(struct swift_gguf_writer *w, const char *key, const char *const *s,
                           uint64_t n)
{
    struct swift_gguf_value v;
    make_arr(&v, SWIFT_GGUF_STRING, n);
    for (uint64_t i = 0; i < n; i++) {
        struct swift_gguf_value *it = &v.v.arr.items[i];
        it->type = SWIFT_GGUF_STRING;
        it->v.str.len = strlen(s[i]);
        it->v.str.s = swift_xstrdup(s[i]);
    }
    return swift_gguf_set_move(w, key, &v);
}

int swift_gguf_set_arr_i32(struct swift_gguf_writer *w, const char *key, const int32_t *x,
                           uint64_t n)
{
    struct swift_gguf_value v;
    make_arr(&v, SWIFT_GGUF_I32, n);
    for (uint64_t i = 0; i < n; i++) {
        v.v.arr.items[i].type = SWIFT_GGUF_I32;
        v.v.arr.items[i].v.i = x[i];
    }
    return swift_gguf_set_move(w, key, &v);
}

int swift_gguf_set_arr_f32(struct swift_gguf_writer *w, const char *key, const float *x, uint64_t n)
{
    struct swift_gguf_value v;
    make_arr(&v, SWIFT_GGUF_F32, n);
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
    if (swift_gguf_tensor_nbytes(&t, &t.nbytes, &why) < 0)
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
        w->tensors = swift_xrealloc(w->tensors, cap * sizeof(*w->tensors));
        w->cap_tensors = cap;
    }
    t.name = swift_xstrdup(name);
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
    w->path = swift_xstrdup(path);
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
