/*
 * safetensors — read and write Hugging Face safetensors files, single or sharded.
 *
 * Layout (docs/formats.md): u64 little-endian header length N, N bytes of JSON header, then the
 * byte buffer. Every header is checked before any tensor is touched: N <= 100 MB, the header
 * starts with '{', no duplicate keys, each entry has a known dtype, a shape of non-negative
 * integers and data_offsets [BEGIN, END) with END-BEGIN == numel*bits/8, the offsets tile the
 * buffer exactly (no holes, no overlap, starting at 0) and 8+N+last END is the file size.
 * `__metadata__`, when present, must map strings to strings.
 *
 *     struct swift_safetensors st;
 *     if (swift_safetensors_open(&st, "model.safetensors") < 0)
 *         return -1;                            // error already reported with the file name
 *     const struct swift_st_tensor *t = swift_safetensors_find(&st, "model.norm.weight");
 *     float *w = swift_xcalloc(t->numel, sizeof(float));   // lib/core/alloc.h
 *     swift_st_tensor_to_f32(t, w);             // F32, F16 or BF16 on disk
 *     swift_safetensors_close(&st);
 *
 * A model directory (model.safetensors, or model.safetensors.index.json + shards) opens as a
 * set with swift_st_set_open(); lookups then go through the weight map.
 *
 * Writing: describe the tensors with struct swift_st_entry (borrowed data pointers) and call
 * swift_safetensors_write(); the header starts with {"__metadata__":{"format":"pt",...}}, is
 * padded with spaces to a multiple of 8, tensors are laid out like the reference writer (dtype
 * alignment descending, then name), and the file appears atomically (lib/core/fileio.h).
 * swift_safetensors_write_sharded() splits into model-0000k-of-0000K.safetensors + index.
 *
 * Errors: every function reports once ("swift-X:FILE: message") and returns -1 or NULL.
 */
#ifndef SWIFT_SAFETENSORS_H
#define SWIFT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

enum swift_dtype {
    SWIFT_DTYPE_F32 = 0,
    SWIFT_DTYPE_F16,
    SWIFT_DTYPE_BF16,
    SWIFT_DTYPE_F64,
    SWIFT_DTYPE_BOOL,
    SWIFT_DTYPE_U8,
    SWIFT_DTYPE_I8,
    SWIFT_DTYPE_I16,
    SWIFT_DTYPE_U16,
    SWIFT_DTYPE_I32,
    SWIFT_DTYPE_U32,
    SWIFT_DTYPE_I64,
    SWIFT_DTYPE_U64,
    SWIFT_DTYPE_C64,
    SWIFT_DTYPE_F8_E5M2,
    SWIFT_DTYPE_F8_E4M3,
    SWIFT_DTYPE_F8_E8M0,
    SWIFT_DTYPE_F8_E4M3FNUZ,
    SWIFT_DTYPE_F8_E5M2FNUZ,
    SWIFT_DTYPE_F4,
    SWIFT_DTYPE_F6_E2M3,
    SWIFT_DTYPE_F6_E3M2,
    SWIFT_DTYPE_COUNT
};

/* "F32", "BF16", ...; NULL for an out-of-range value. */
const char *swift_dtype_name(enum swift_dtype dt);
/* Parse a dtype string; returns the dtype or -1. */
int swift_dtype_parse(const char *s);
/* Bits per element (4 for F4, 6 for F6_*, 16 for BF16 ...). */
int swift_dtype_bits(enum swift_dtype dt);

/* Scalar conversions (round to nearest even for the narrowing ones; NaN stays NaN). */
float swift_f16_to_f32(uint16_t h);
float swift_bf16_to_f32(uint16_t b);
uint16_t swift_f32_to_f16(float f);
uint16_t swift_f32_to_bf16(float f);

#define SWIFT_ST_MAX_DIMS 8
#define SWIFT_ST_MAX_HEADER 100000000ULL

struct swift_st_tensor {
    char *name; /* owned by the file */
    enum swift_dtype dtype;
    int ndim; /* 0 for a scalar */
    int64_t shape[SWIFT_ST_MAX_DIMS];
    uint64_t numel;
    uint64_t begin, end; /* offsets in the byte buffer, END exclusive */
    const void *data;    /* borrowed: points into the mapping (may be unaligned) */
    const char *path;    /* the file it lives in (borrowed) */
};

struct swift_safetensors {
    char *path; /* owned */
    void *map;  /* whole file (mmap), or NULL for a parsed buffer */
    size_t map_len;
    uint64_t header_len;   /* N */
    const uint8_t *buffer; /* the byte buffer (8 + N into the file) */
    uint64_t buffer_len;
    struct swift_st_tensor *tensors; /* sorted by name */
    size_t ntensors;
    json_t *metadata; /* __metadata__ object (owned) or NULL */
};

/* mmap a file read-only and check its header. Returns 0 or -1 (st is then empty). */
int swift_safetensors_open(struct swift_safetensors *st, const char *path);
/* Check a whole file image already in memory (`path` names it in messages); the tensors point
 * into `buf`, which the caller keeps alive. Returns 0 or -1. Used by the fuzz target. */
int swift_safetensors_parse(struct swift_safetensors *st, const void *buf, size_t len,
                            const char *path);
/* Unmap and free everything. Safe on a zeroed or failed struct. */
void swift_safetensors_close(struct swift_safetensors *st);
/* Binary search by name; NULL when absent. */
const struct swift_st_tensor *swift_safetensors_find(const struct swift_safetensors *st,
                                                     const char *name);
/* A __metadata__ value, or NULL. Borrowed. */
const char *swift_safetensors_meta(const struct swift_safetensors *st, const char *key);

/* Convert a F32/F16/BF16 tensor to float32 into out[numel]. Returns 0, or -1 with an error for
 * another dtype. */
int swift_st_tensor_to_f32(const struct swift_st_tensor *t, float *out);
/* Shape check: returns 0 when t has `ndim` dims equal to dims[], else reports
 * "FILE: tensor NAME has shape [..], expected [..]" and returns -1. */
int swift_st_tensor_check_shape(const struct swift_st_tensor *t, int ndim, const int64_t *dims);

/* A model's weights: one file or an index + shards. */
struct swift_st_set {
    struct swift_safetensors *files;
    size_t nfiles;
    char *dir;
};
/* Open DIR/model.safetensors.index.json (every shard it names, every weight_map entry checked
 * to exist in its shard) or else DIR/model.safetensors. A path to a single .safetensors file is
 * also accepted. Returns 0 or -1. */
int swift_st_set_open(struct swift_st_set *set, const char *dir);
void swift_st_set_close(struct swift_st_set *set);
/* Find a tensor in any file of the set; NULL when absent. */
const struct swift_st_tensor *swift_st_set_find(const struct swift_st_set *set, const char *name);

/* One tensor to write. */
struct swift_st_entry {
    const char *name; /* borrowed */
    enum swift_dtype dtype;
    int ndim;
    int64_t shape[SWIFT_ST_MAX_DIMS];
    const void *data; /* borrowed, numel * bits/8 bytes, little-endian */
};

/*
 * Write `n` tensors to `path` atomically. `meta` is a NULL-terminated list of key, value
 * strings added to __metadata__ after "format":"pt" (may be NULL). Duplicate names are an
 * error. Returns 0 or -1.
 */
int swift_safetensors_write(const char *path, const struct swift_st_entry *e, size_t n,
                            const char *const *meta);
/*
 * Write into directory `dir` (which must exist): when the total exceeds max_shard_bytes (0 =
 * never), model-0000k-of-0000K.safetensors files plus model.safetensors.index.json (metadata
 * total_size, weight_map), else a single model.safetensors. Tensors keep their order across
 * shards. Returns 0 or -1.
 */
int swift_safetensors_write_sharded(const char *dir, const struct swift_st_entry *e, size_t n,
                                    uint64_t max_shard_bytes);

#endif
