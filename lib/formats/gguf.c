/* gguf — GGUF's ggml type table, metadata values and the dump (see gguf.h); the reader is
 * gguf_read.c, the writer gguf_write.c. */
#include "lib/formats/gguf.h"

#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/formats/internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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
        dst->v.str.s = swift_xmalloc(src->v.str.len + 1);
        memcpy(dst->v.str.s, src->v.str.s, src->v.str.len);
        dst->v.str.s[src->v.str.len] = 0;
    } else if (src->type == SWIFT_GGUF_ARRAY) {
        dst->v.arr.items = swift_xcalloc(src->v.arr.n, sizeof(*dst->v.arr.items));
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

/* Number of bytes of a tensor, with overflow and divisibility checks; 0 on error. */
int swift_gguf_tensor_nbytes(const struct swift_gguf_tensor *t, uint64_t *nbytes, const char **why)
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
