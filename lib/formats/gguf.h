/*
 * gguf — read and write GGUF v3 files (llama.cpp's model format; docs/formats.md, and ggml's
 * docs/gguf.md upstream). The reader is gguf_read.c, the writer gguf_write.c.
 *
 * Layout: u32 magic "GGUF", u32 version (3), u64 tensor_count, u64 kv_count, the key/value
 * pairs, the tensor infos (name, n_dims, ne[] in GGUF order = reverse of the PyTorch shape,
 * ggml type, offset), zero padding to ALIGNMENT, then the tensor data, each tensor at
 * data_start + offset with offset % ALIGNMENT == 0. ALIGNMENT is general.alignment (u32) when
 * present, else 32. Little-endian only (big-endian GGUF files are refused with a message).
 *
 * Reading: the whole file is mapped read-only and every length, count, offset and size is
 * checked against the bytes that are really there; an error names the file and the byte
 * offset ("swift-x:model.gguf:@1234: string length 99999999 runs past the end of the file").
 *
 *     struct swift_gguf *g;
 *     if (swift_gguf_open(path, &g) < 0)
 *         return -1;
 *     const struct swift_gguf_value *arch = swift_gguf_get(g, "general.architecture");
 *     for (size_t i = 0; i < g->n_tensors; i++)
 *         use(g->tensors[i].name, g->tensors[i].data, g->tensors[i].nbytes);
 *     swift_gguf_free(g);
 *
 * Writing streams: declare every key and every tensor's name/shape/type first, then write the
 * header and the tensor data in declaration order. The file is written to a temporary name
 * (lib/core/fileio.h) and appears under its final name only on swift_gguf_writer_commit().
 *
 *     struct swift_gguf_writer w;
 *     swift_gguf_writer_init(&w);
 *     swift_gguf_set_str(&w, "general.architecture", "llama");
 *     swift_gguf_add_tensor(&w, "token_embd.weight", 2, (uint64_t[]){64, 1000}, SWIFT_GGML_F16);
 *     if (swift_gguf_writer_begin(&w, "out.gguf") < 0) ...
 *     for each tensor: swift_gguf_writer_write_data(&w, data, nbytes);
 *     swift_gguf_writer_commit(&w);      // or swift_gguf_writer_abort(&w)
 *     swift_gguf_writer_release(&w);
 */
#ifndef SWIFT_GGUF_H
#define SWIFT_GGUF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lib/core/fileio.h"

#define SWIFT_GGUF_MAGIC 0x46554747u /* "GGUF" as a little-endian u32 */
#define SWIFT_GGUF_VERSION 3u
#define SWIFT_GGUF_DEFAULT_ALIGNMENT 32u
#define SWIFT_GGUF_MAX_DIMS 4
#define SWIFT_GGUF_MAX_NAME 64 /* tensor name bytes (ggml GGML_MAX_NAME) */
#define SWIFT_GGUF_MAX_DEPTH 8 /* nested arrays */
#define SWIFT_GGUF_MAX_STRING (1u << 30)

enum swift_gguf_vtype {
    SWIFT_GGUF_U8 = 0,
    SWIFT_GGUF_I8 = 1,
    SWIFT_GGUF_U16 = 2,
    SWIFT_GGUF_I16 = 3,
    SWIFT_GGUF_U32 = 4,
    SWIFT_GGUF_I32 = 5,
    SWIFT_GGUF_F32 = 6,
    SWIFT_GGUF_BOOL = 7,
    SWIFT_GGUF_STRING = 8,
    SWIFT_GGUF_ARRAY = 9,
    SWIFT_GGUF_U64 = 10,
    SWIFT_GGUF_I64 = 11,
    SWIFT_GGUF_F64 = 12,
    SWIFT_GGUF_NTYPES
};

/* ggml tensor types (ggml.h enum ggml_type); only the ones with a known block size are
 * accepted by the reader. */
enum swift_ggml_type {
    SWIFT_GGML_F32 = 0,
    SWIFT_GGML_F16 = 1,
    SWIFT_GGML_Q4_0 = 2,
    SWIFT_GGML_Q4_1 = 3,
    SWIFT_GGML_Q5_0 = 6,
    SWIFT_GGML_Q5_1 = 7,
    SWIFT_GGML_Q8_0 = 8,
    SWIFT_GGML_Q8_1 = 9,
    SWIFT_GGML_Q2_K = 10,
    SWIFT_GGML_Q3_K = 11,
    SWIFT_GGML_Q4_K = 12,
    SWIFT_GGML_Q5_K = 13,
    SWIFT_GGML_Q6_K = 14,
    SWIFT_GGML_Q8_K = 15,
    SWIFT_GGML_I8 = 24,
    SWIFT_GGML_I16 = 25,
    SWIFT_GGML_I32 = 26,
    SWIFT_GGML_I64 = 27,
    SWIFT_GGML_F64 = 28,
    SWIFT_GGML_BF16 = 30,
    SWIFT_GGML_NTYPES = 40
};

/* Elements per block and bytes per block of a ggml type; 0 for an unknown type. */
int swift_ggml_blck_size(uint32_t type);
size_t swift_ggml_type_size(uint32_t type);
/* "F32", "Q4_K", ...; "?" for an unknown type. */
const char *swift_ggml_type_name(uint32_t type);
/* Parse a name ("q8_0", "F16", case-insensitive); returns the type or -1. */
int swift_ggml_type_from_name(const char *name);
/* Bytes of a row of ne0 elements; 0 when ne0 is not a multiple of the block size or the type
 * is unknown. */
size_t swift_ggml_row_size(uint32_t type, uint64_t ne0);

const char *swift_gguf_vtype_name(uint32_t vtype);

/* One value. Strings are byte strings (not NUL-safe in general, but always NUL-terminated
 * here). Arrays hold `n` values of `elem_type` in `items` (nested arrays allowed). */
struct swift_gguf_value {
    uint32_t type;
    union {
        uint64_t u; /* U8, U16, U32, U64, BOOL */
        int64_t i;  /* I8, I16, I32, I64 */
        double f;   /* F32, F64 */
        struct {
            char *s;
            uint64_t len;
        } str;
        struct {
            uint32_t elem_type;
            uint64_t n;
            struct swift_gguf_value *items;
        } arr;
    } v;
};

struct swift_gguf_kv {
    char *key;
    struct swift_gguf_value value;
};

struct swift_gguf_tensor {
    char *name;
    uint32_t n_dims;
    uint64_t ne[SWIFT_GGUF_MAX_DIMS]; /* GGUF order: ne[0] varies fastest; unused dims are 1 */
    uint32_t type;                    /* enum swift_ggml_type */
    uint64_t offset;                  /* relative to the start of the data section */
    uint64_t nbytes;
    const void *data; /* reader: points into the mapping; NULL in the writer */
};

struct swift_gguf {
    uint32_t version;
    uint32_t alignment;
    uint64_t n_kv;
    struct swift_gguf_kv *kv;
    uint64_t n_tensors;
    struct swift_gguf_tensor *tensors;
    uint64_t data_offset; /* file offset of the data section */
    const uint8_t *base;  /* the whole file (borrowed from the mapping or the caller) */
    size_t size;
    void *map; /* owned mapping (NULL for swift_gguf_parse) */
    size_t map_len;
};

/* Map and parse a file. *out is freed with swift_gguf_free. Returns 0 or -1 after an error
 * naming the file and the offset. */
int swift_gguf_open(const char *path, struct swift_gguf **out);
/* Parse a buffer (borrowed: it must outlive *out); `name` is used in messages. */
int swift_gguf_parse(const void *buf, size_t len, const char *name, struct swift_gguf **out);
void swift_gguf_free(struct swift_gguf *g);

/* The value of a key, or NULL. */
const struct swift_gguf_value *swift_gguf_get(const struct swift_gguf *g, const char *key);
/* Index of a tensor by name, or -1. */
long swift_gguf_find_tensor(const struct swift_gguf *g, const char *name);
/* Integer value of any integer/bool type into *out (0 or -1 if the type is not integral). */
int swift_gguf_value_int(const struct swift_gguf_value *v, int64_t *out);

/* Release what a value owns (strings, arrays), not the value itself. */
void swift_gguf_value_release(struct swift_gguf_value *v);
/* Deep copy (dst owns its strings/arrays). Returns 0 (out of memory dies, lib/core/alloc.h). */
int swift_gguf_value_copy(struct swift_gguf_value *dst, const struct swift_gguf_value *src);

/*
 * Print a value as JSON-like text (strings JSON-escaped, arrays as [..]; arrays longer than
 * max_items printed as {"type":...,"n":N,"head":[first items]} when max_items > 0).
 * Used by tests and `swift-export --dump`.
 */
void swift_gguf_value_print(FILE *fp, const struct swift_gguf_value *v, uint64_t max_items);

/*
 * Dump a file's header as text, one line per item (tests compare it with gguf-py's reader):
 *   version\t3 / alignment\t32 / kv_count\tN / tensor_count\tN
 *   kv\tKEY\tTYPE[\tELEMTYPE]\tVALUE        (TYPE "array[string]" for arrays)
 *   tensor\tNAME\tGGMLTYPE\t[ne0,ne1]\tOFFSET\tNBYTES
 */
void swift_gguf_dump(FILE *fp, const struct swift_gguf *g, uint64_t max_items);

/* ---- writer ---- */

struct swift_gguf_writer {
    uint64_t n_kv, cap_kv;
    struct swift_gguf_kv *kv;
    uint64_t n_tensors, cap_tensors;
    struct swift_gguf_tensor *tensors;
    uint32_t alignment;
    uint64_t data_size; /* bytes of the data section (padded) */
    /* streaming state */
    struct swift_atomic af;
    int open;
    uint64_t next_tensor; /* index of the next tensor whose data is expected */
    uint64_t written;     /* bytes written so far (whole file) */
    char *path;
};

void swift_gguf_writer_init(struct swift_gguf_writer *w);
/* Frees everything (and aborts an open output). */
void swift_gguf_writer_release(struct swift_gguf_writer *w);

/* Set a key (replacing an earlier value of the same key, so the order of first setting is
 * kept). The value is copied. "general.alignment" (u32, multiple of 8) also sets the
 * alignment used. Return 0 or -1 after an error. */
int swift_gguf_set(struct swift_gguf_writer *w, const char *key, const struct swift_gguf_value *v);
int swift_gguf_set_u32(struct swift_gguf_writer *w, const char *key, uint32_t x);
int swift_gguf_set_i32(struct swift_gguf_writer *w, const char *key, int32_t x);
int swift_gguf_set_f32(struct swift_gguf_writer *w, const char *key, float x);
int swift_gguf_set_bool(struct swift_gguf_writer *w, const char *key, int x);
int swift_gguf_set_str(struct swift_gguf_writer *w, const char *key, const char *s);
/* Arrays of strings / i32 / f32 (copied). */
int swift_gguf_set_arr_str(struct swift_gguf_writer *w, const char *key, const char *const *s,
                           uint64_t n);
int swift_gguf_set_arr_i32(struct swift_gguf_writer *w, const char *key, const int32_t *x,
                           uint64_t n);
int swift_gguf_set_arr_f32(struct swift_gguf_writer *w, const char *key, const float *x,
                           uint64_t n);
/* Set a key the writer takes ownership of (v is moved; on error it is released). */
int swift_gguf_set_move(struct swift_gguf_writer *w, const char *key, struct swift_gguf_value *v);

/* Declare a tensor (ne in GGUF order). Checks name length, dims, block divisibility and
 * duplicates. Returns the tensor's index or -1. */
long swift_gguf_add_tensor(struct swift_gguf_writer *w, const char *name, uint32_t n_dims,
                           const uint64_t *ne, uint32_t type);

/* Open the temporary output and write the header and tensor infos. No key or tensor may be
 * added afterwards. Returns 0 or -1. */
int swift_gguf_writer_begin(struct swift_gguf_writer *w, const char *path);
/* Write the next tensor's data (exactly its nbytes), followed by its alignment padding. */
int swift_gguf_writer_write_data(struct swift_gguf_writer *w, const void *data, uint64_t nbytes);
/* Check every tensor was written, fsync and rename onto the final name. */
int swift_gguf_writer_commit(struct swift_gguf_writer *w);
/* Remove the temporary; the final name is untouched. */
void swift_gguf_writer_abort(struct swift_gguf_writer *w);

#endif
