/* model bnb — a model that transformers saved with bitsandbytes (config.json quantization_config
 * quant_method "bitsandbytes", load_in_4bit or load_in_8bit): each decoder linear is loaded as
 * stored, into the 4-bit (kernels/quant4.h) or int8-row (kernels/quant8.h) layout training's
 * --quant-bits uses, with no dequantize-requantize: the packed codes, the absmax (or their 8-bit
 * codes and the nested absmax and offset) and the int8 rows with SCB are copied. Per linear
 * prefix P (model.layers.L.self_attn.q_proj, ...), 4 bits: P.weight (uint8, the packed codes),
 * P.weight.absmax (float32, or uint8 with double quantization), P.weight.quant_map (the 16 codes'
 * values), P.weight.nested_absmax and P.weight.nested_quant_map (double quantization) and
 * P.weight.quant_state.bitsandbytes__nf4|fp4 (JSON bytes: quant_type, blocksize, shape,
 * nested_blocksize, nested_offset); 8 bits: P.weight (int8, out x in), P.SCB (float32, out) and
 * optionally P.weight_format (uint8 0: row-major). */
#include "lib/model/internal.h"
#include "lib/core/alloc.h"
#include "kernels/quant4.h"
#include "kernels/quant8.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "lib/core/error.h"
#include "lib/formats/safetensors.h"
#include "lib/core/banned.h"

#define ANY ((uint64_t)-1)

/* Tensor `prefix``suffix` of set, of dtype dt and numel elements (ANY: any); NULL (reported,
 * naming the file of `where` and the tensor) when absent or different. */
static const struct swift_st_tensor *need(const struct swift_st_set *set,
                                          const struct swift_st_tensor *where, const char *prefix,
                                          const char *suffix, enum swift_dtype dt, uint64_t numel)
{
    char nm[256];
    snprintf(nm, sizeof(nm), "%s%s", prefix, suffix);
    const struct swift_st_tensor *t = swift_st_set_find(set, nm);
    if (!t) {
        swift_error("%s: missing tensor '%s' (bitsandbytes layout)", where->path, nm);
        return NULL;
    }
    if (t->dtype != dt && numel == ANY) {
        swift_error("%s: tensor '%s' is %s, expected %s",
                    t->path,
                    nm,
                    swift_dtype_name(t->dtype),
                    swift_dtype_name(dt));
        return NULL;
    }
    if (t->dtype != dt || (numel != ANY && t->numel != numel)) {
        swift_error("%s: tensor '%s' is %s with %llu elements, expected %s with %llu",
                    t->path,
                    nm,
                    swift_dtype_name(t->dtype),
                    (unsigned long long)t->numel,
                    swift_dtype_name(dt),
                    (unsigned long long)numel);
        return NULL;
    }
    return t;
}

/* The code table a file stores must be ours bit for bit (bitsandbytes writes its own). */
static int same_table(const struct swift_st_tensor *t, const float *ours, size_t n)
{
    if (!memcmp(t->data, ours, n * sizeof(float)))
        return 0;
    return swift_error(
        "%s: tensor '%s' is not bitsandbytes' code table (unsupported)", t->path, t->name);
}

/* The quant_state JSON: quant_type, blocksize 64, shape [out, in]; with dq nested_blocksize 256
 * and nested_offset into *offset. */
static int check_state(const struct swift_st_tensor *t, const char *type, int out, int in, int dq,
                       float *offset)
{
    json_error_t je;
    json_t *j = json_loadb(t->data, (size_t)t->numel, 0, &je);
    json_t *shape = j ? json_object_get(j, "shape") : NULL;
    const char *qt = j ? json_string_value(json_object_get(j, "quant_type")) : NULL;
    const char *bad =
        !j                        ? "not JSON"
        : !qt || strcmp(qt, type) ? "quant_type differs from the config's"
        : json_integer_value(json_object_get(j, "blocksize")) != SWIFT_Q4_BLOCK
            ? "blocksize is not 64"
        : json_array_size(shape) != 2 || json_integer_value(json_array_get(shape, 0)) != out ||
                json_integer_value(json_array_get(shape, 1)) != in
            ? "shape differs from the model's"
        : dq && json_integer_value(json_object_get(j, "nested_blocksize")) != SWIFT_Q4_BLOCK2
            ? "nested_blocksize is not 256"
        : dq && !json_is_number(json_object_get(j, "nested_offset")) ? "nested_offset is missing"
                                                                     : NULL;
    if (!bad && dq)
        *offset = (float)json_number_value(json_object_get(j, "nested_offset"));
    json_decref(j);
    if (bad)
        return swift_error("%s: tensor '%s': %s", t->path, t->name, bad);
    return 0;
}

static int load4(struct swift_model *m, struct swift_linear *L, const struct swift_st_tensor *w,
                 const char *wname, const struct swift_st_set *set)
{
    const char *type = m->cfg.bnb_type == SWIFT_Q4_FP4 ? "fp4" : "nf4";
    int dq = m->cfg.bnb_dq;
    size_t n = (size_t)L->out * L->in, nb = swift_q4_nblocks(n), nb2 = swift_q4_nblocks2(n);
    struct swift_q4 h = {.type = m->cfg.bnb_type, .dq = dq, .n = n};
    if (w->dtype != SWIFT_DTYPE_U8 || w->numel != (n + 1) / 2)
        return swift_error("%s: tensor '%s' is %s with %llu elements, expected the packed 4-bit "
                           "codes of a %dx%d weight (U8, %zu)",
                           w->path,
                           wname,
                           swift_dtype_name(w->dtype),
                           (unsigned long long)w->numel,
                           L->out,
                           L->in,
                           (n + 1) / 2);
    char sfx[64];
    snprintf(sfx, sizeof(sfx), ".quant_state.bitsandbytes__%s", type);
    const struct swift_st_tensor *qs = need(set, w, wname, sfx, SWIFT_DTYPE_U8, ANY);
    const struct swift_st_tensor *qm =
        qs ? need(set, w, wname, ".quant_map", SWIFT_DTYPE_F32, 16) : NULL;
    const struct swift_st_tensor *am =
        qm ? need(set, w, wname, ".absmax", dq ? SWIFT_DTYPE_U8 : SWIFT_DTYPE_F32, nb) : NULL;
    const struct swift_st_tensor *na =
        am && dq ? need(set, w, wname, ".nested_absmax", SWIFT_DTYPE_F32, nb2) : NULL;
    const struct swift_st_tensor *nq =
        na ? need(set, w, wname, ".nested_quant_map", SWIFT_DTYPE_F32, 256) : NULL;
    if (!am || (dq && !nq))
        return -1;
    if (check_state(qs, type, L->out, L->in, dq, &h.offset) < 0 ||
        same_table(qm, h.type == SWIFT_Q4_FP4 ? swift_q4_fp4 : swift_q4_nf4, 16) < 0 ||
        (dq && same_table(nq, swift_q4_dynamic, 256) < 0))
        return -1;
    /* the mapping may be unaligned: copies in host memory, then uploaded */
    h.codes = swift_xmalloc((n + 1) / 2);
    memcpy(h.codes, w->data, (n + 1) / 2);
    if (dq) {
        h.qabsmax = swift_xmalloc(nb);
        memcpy(h.qabsmax, am->data, nb);
        h.absmax2 = swift_xmalloc(nb2 * sizeof(float));
        memcpy(h.absmax2, na->data, nb2 * sizeof(float));
    } else {
        h.absmax = swift_xmalloc(nb * sizeof(float));
        memcpy(h.absmax, am->data, nb * sizeof(float));
    }
    L->q4 = swift_model_q4_upload(m, &h, L->name);
    free(h.codes);
    free(h.qabsmax);
    free(h.absmax2);
    free(h.absmax);
    if (!L->q4)
        return -1;
    m->q4_numel += n;
    m->q4_bytes += swift_q4_bytes(n, dq);
    return 0;
}

static int load8(struct swift_model *m, struct swift_linear *L, const struct swift_st_tensor *w,
                 const char *wname, const struct swift_st_set *set)
{
    size_t n = (size_t)L->out * L->in;
    if (w->dtype != SWIFT_DTYPE_I8 || w->ndim != 2 || w->shape[0] != L->out || w->shape[1] != L->in)
        return swift_error("%s: tensor '%s' is not an int8 %dx%d weight (bitsandbytes 8-bit "
                           "layout)",
                           w->path,
                           wname,
                           L->out,
                           L->in);
    char prefix[256];
    snprintf(prefix, sizeof(prefix), "%.*s", (int)(strlen(wname) - strlen(".weight")), wname);
    const struct swift_st_tensor *scb =
        need(set, w, prefix, ".SCB", SWIFT_DTYPE_F32, (uint64_t)L->out);
    if (!scb)
        return -1;
    char nm[300];
    snprintf(nm, sizeof(nm), "%s_format", wname);
    const struct swift_st_tensor *fmt = swift_st_set_find(set, nm);
    if (fmt && (fmt->dtype != SWIFT_DTYPE_U8 || fmt->numel != 1 || *(const uint8_t *)fmt->data))
        return swift_error(
            "%s: tensor '%s': only the row-major format (0) is supported", fmt->path, nm);
    struct swift_q8 h = {.rows = L->out, .cols = L->in};
    h.cb = swift_xmalloc(n);
    memcpy(h.cb, w->data, n);
    h.scb = swift_xmalloc((size_t)L->out * sizeof(float));
    memcpy(h.scb, scb->data, (size_t)L->out * sizeof(float));
    L->q8 = swift_model_q8_upload(m, &h, L->name);
    free(h.cb);
    free(h.scb);
    if (!L->q8)
        return -1;
    m->q4_numel += n;
    m->q4_bytes += swift_q8_bytes(L->out, L->in);
    return 0;
}

int swift_model_bnb_linear(struct swift_model *m, struct swift_linear *L, const char *wname,
                           const struct swift_st_set *set)
{
    const struct swift_st_tensor *w = swift_st_set_find(set, wname);
    if (!w)
        return swift_error("%s: missing tensor '%s'", set->dir, wname);
    if (strlen(wname) + 40 > 256)
        return swift_error("%s: tensor name '%s' too long", w->path, wname);
    return m->cfg.bnb_bits == 8 ? load8(m, L, w, wname, set) : load4(m, L, w, wname, set);
}
