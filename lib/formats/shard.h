/*
 * shard — the binary token shards between swift-preprocess and swift-train (docs/formats.md
 * "Shards and index.json").
 *
 * A shard directory holds index.json and shard-00000.bin, shard-00001.bin, ...; with a
 * validation split, DIR/val/ is a second shard directory of the same layout. A shard file is
 * little-endian:
 *
 *     offset  size  field
 *     0       8     magic "SWSHARD\0"
 *     8       4     u32 version (1; 2 when the file has the label or the metadata section)
 *     12      4     u32 header_size (64; readers skip to it, so later versions may grow it)
 *     16      8     u64 n_samples
 *     24      8     u64 n_docs        (documents over all samples; >= n_samples)
 *     32      8     u64 n_tokens
 *     40      8     u64 payload_size  (bytes after the header; file size = header + payload)
 *     48      4     u32 payload_crc32 (zlib crc32 of the payload)
 *     52      4     u32 flags (0; version 2: bit 0 = SWIFT_SHARD_FLAG_LABELS, bit 1 =
 *                       SWIFT_SHARD_FLAG_META, at least one set, others 0)
 *     56      8     reserved (0)
 *     payload, each section starting at a multiple of 8 from the file start:
 *       u64 sample_tok[n_samples + 1]   token offset of each sample; [0] = 0, [n] = n_tokens
 *       u64 sample_doc[n_samples + 1]   index of each sample's first document in doc_len
 *       u32 doc_len[n_docs]             tokens per document; a sample's documents sum to its length
 *       u32 ids[n_tokens]               token ids
 *       u8  mask[n_tokens]              1 = the token is a label (counts in the loss), 0 = not
 *       u8  label[n_samples]            only with SWIFT_SHARD_FLAG_LABELS (version 2): KTO's
 *                                       per-sample label, 1 desirable, 0 undesirable
 *       u64 meta_off[n_samples + 1]     only with SWIFT_SHARD_FLAG_META (version 2): byte offset
 *                                       of each sample's metadata in meta; [0] = 0, monotonic
 *       u8  meta[meta_off[n_samples]]   per sample one compact JSON object as UTF-8 text (no
 *                                       NUL, no terminator; empty = no metadata): GRPO's
 *                                       {"prompt": ..., the row's other columns}
 * A version-1 reader refuses version 2 ("unsupported shard version 2"), and a reader that knows
 * only the label flag refuses the metadata flag ("unknown flags 00000002 for version 2"), so
 * labelled (KTO) and prompt files cannot be read as plain SFT data by an old build; files without
 * either section stay version 1. A file may have both sections (labels first).
 *
 * What the samples are is index.json's "kind" (swift_shard_index_kind):
 *   "sft"   (or no "kind": index version 1)  documents of supervised fine-tuning, maybe packed;
 *   "pairs" (index version 2)  one preference pair per sample, exactly two documents: document 0
 *           = prompt + chosen response, document 1 = the same prompt tokens + rejected response;
 *           mask is 1 on the response tokens only; max_length bounds each document;
 *   "kto"   (index version 2)  one document per sample (prompt + completion, mask on the
 *           completion) and its label in the label section;
 *   "sft" with images (index version 3, "images" object)  as "sft", and every file has the
 *           metadata section: per sample {"images": [sha256, ...]}, the image cache files
 *           (lib/formats/pixels.h) of its <|vision_start|> spans in order;
 *   "prompts" (index version 2)  GRPO's prompts: one document per sample, the conversation
 *           rendered with the generation prompt (what the model continues), mask all 0;
 *           max_length bounds the prompt; the sample's metadata section holds the row's JSON.
 *
 * A sample is one training sequence: one document, or several when packed. Attention must not
 * cross documents: the trainer builds its block-diagonal mask (or position ids restarting at 0)
 * from the document lengths. mask[t] says whether token t is a *target*; the trainer predicts
 * ids[t] from ids[<t] when mask[t] is 1 (HF labels = ids where mask, else -100, before the shift).
 *
 * Reading (the trainer):
 *
 *     struct swift_shards *s;
 *     if (swift_shards_open(&s, "data/shards", 0) < 0)   // checks magic/version/size/CRC
 *         return -1;
 *     for (uint64_t i = 0; i < swift_shards_count(s); i++) {
 *         struct swift_sample x;
 *         swift_shards_get(s, i, &x);                   // borrowed pointers into the mmap
 *         ... x.ids[0..x.len), x.mask[0..x.len), x.doc_len[0..x.n_docs) ...
 *     }
 *     const struct swift_shard_index *ix = swift_shards_index(s);   // max_length, counts, ...
 *     swift_shards_close(s);
 *
 * Writing (swift-preprocess): swift_shard_writer_* collects samples in memory and writes the
 * file atomically (temp + fsync + rename); swift_shard_index_write writes index.json atomically.
 *
 * Errors: every function reports once (file, and the byte offset for a bad shard) and returns -1.
 */
#ifndef SWIFT_SHARD_H
#define SWIFT_SHARD_H

#include <stddef.h>
#include <stdint.h>

#define SWIFT_SHARD_MAGIC "SWSHARD"
#define SWIFT_SHARD_VERSION 1        /* files without labels or metadata */
#define SWIFT_SHARD_VERSION_LABELS 2 /* files with the label and/or the metadata section */
#define SWIFT_SHARD_FLAG_LABELS 1u
#define SWIFT_SHARD_FLAG_META 2u
#define SWIFT_SHARD_HEADER_SIZE 64
#define SWIFT_SHARD_INDEX_VERSION 1        /* kind "sft" (no "kind" key) */
#define SWIFT_SHARD_INDEX_VERSION_KIND 2   /* pairs, kto, prompts: version-1 readers refuse it */
#define SWIFT_SHARD_INDEX_VERSION_IMAGES 3 /* sft with images: older readers refuse it */
#define SWIFT_SHARD_INDEX_FORMAT "swift-shards"

/* One sample as stored: all pointers borrowed (into the mmap, valid until swift_shards_close). */
struct swift_sample {
    const uint32_t *ids;
    const uint8_t *mask;
    uint32_t len;            /* tokens */
    const uint32_t *doc_len; /* n_docs document lengths, summing to len */
    uint32_t n_docs;
    uint8_t label;    /* kind "kto": 1 desirable, 0 undesirable; 0 for other kinds */
    const char *meta; /* kind "prompts": the sample's JSON object text, meta_len bytes, NOT
                         NUL-terminated; NULL (and meta_len 0) without the metadata section */
    uint32_t meta_len;
};

/* One shard file's entry in index.json. */
struct swift_shard_entry {
    char *file; /* name relative to the directory (owned) */
    uint64_t samples;
    uint64_t tokens;
    uint32_t crc32; /* payload CRC, also in the file's header */
};

/* index.json. Strings are owned (freed by swift_shard_index_release); NULL when absent. */
struct swift_shard_index {
    int version;     /* SWIFT_SHARD_INDEX_VERSION, or _KIND for pairs, kto, prompts */
    char *kind;      /* "pairs", "kto", "prompts"; NULL or "sft" for SFT (swift_shard_index_kind) */
    char *tokenizer; /* tokenizer directory or name as given (informational) */
    char *tokenizer_sha256; /* sha256 hex of tokenizer.json */
    char *template_name;    /* chat template ("qwen3", "generation", ...) */
    char *loss;             /* loss mask policy: "default", "last_round", "all" */
    char *truncation;       /* "delete", "left", "right", "split" */
    char *packing;          /* "none", "binpack", "sequential" */
    char *split;            /* "train" or "val" */
    uint64_t max_length;    /* longest sample allowed (tokens) */
    uint64_t vocab_size;    /* ids are < vocab_size (0: unknown, not checked) */
    uint64_t seed;
    /* counts */
    uint64_t samples;          /* samples stored (after packing) */
    uint64_t documents;        /* documents stored */
    uint64_t dropped;          /* documents dropped (too long with truncation=delete, invalid) */
    uint64_t truncated;        /* documents cut to max_length */
    uint64_t tokens;           /* tokens stored */
    uint64_t trained_tokens;   /* tokens with mask 1 */
    double packing_efficiency; /* tokens / (samples * max_length) when packed, else 0 */
    /* document length statistics (tokens, before packing; ms-swift's "Dataset Token Length") */
    double len_mean, len_std;
    uint64_t len_min, len_max;
    struct swift_shard_entry *shards;
    size_t n_shards;
    /* images (index version 3, docs/multimodal.md): NULL without. The image cache directory
     * relative to this index's directory ("images", or "../images" for val/), whose
     * <sha256>.pix files (lib/formats/pixels.h) the samples' metadata {"images": [sha256, ...]}
     * name, one per <|vision_start|> span in token order. */
    char *image_cache;
    uint64_t image_refs;                         /* image references over all samples */
    uint64_t image_min_pixels, image_max_pixels; /* the processor's bounds (informational) */
};

/* What the samples are: "sft", "pairs", "kto" or "prompts" (never NULL). */
const char *swift_shard_index_kind(const struct swift_shard_index *ix);
/* Refuse shards of another kind than `want` ("sft", "pairs", "kto", "prompts") for `what` (the
 * objective, e.g. "--rlhf dpo"), with a message naming "<data_dir>/index.json", the kind found and
 * the swift-preprocess option that makes the right one. Returns 0 or -1 (reported). */
int swift_shard_index_check_kind(const struct swift_shard_index *ix, const char *want,
                                 const char *what, const char *data_dir);

/* Zero an index (all strings NULL). */
void swift_shard_index_init(struct swift_shard_index *ix);
/* Free the strings and the shard list; leaves ix zeroed. */
void swift_shard_index_release(struct swift_shard_index *ix);
/* Append a shard entry (file is copied). Returns 0 or -1. */
int swift_shard_index_add(struct swift_shard_index *ix, const char *file, uint64_t samples,
                          uint64_t tokens, uint32_t crc32);
/* Write "<dir>/index.json" atomically. Returns 0 or -1. */
int swift_shard_index_write(const struct swift_shard_index *ix, const char *dir);
/* Read and validate "<dir>/index.json" into ix (initialized here). Returns 0 or -1. */
int swift_shard_index_read(struct swift_shard_index *ix, const char *dir);
/* Parse index.json text (name is used in messages). Returns 0 or -1. */
int swift_shard_index_parse(struct swift_shard_index *ix, const char *text, size_t len,
                            const char *name);
/* Whether the shards were made with the model's tokenizer: the sha256 of
 * "<model_dir>/tokenizer.json" must equal ix->tokenizer_sha256 (nothing to check when either is
 * absent). Every reader that feeds shards to a model (swift-train, swift-eval) calls it, so they
 * refuse the same data with the same message, which names "<data_dir>/index.json" and both
 * hashes. Returns 0 or -1 (reported). */
int swift_shard_index_check_tokenizer(const struct swift_shard_index *ix, const char *model_dir,
                                      const char *data_dir);

/* ---- writing one shard file ---- */
struct swift_shard_writer;

/* Start a shard that will be written to `path` at commit. Returns NULL after an error. */
struct swift_shard_writer *swift_shard_writer_new(const char *path);
/* Append one sample: n tokens (ids, mask) made of n_docs documents of lengths doc_len (which
 * must sum to n; doc_len NULL means one document). Copies the data. Returns 0 or -1. */
int swift_shard_writer_add(struct swift_shard_writer *w, const uint32_t *ids, const uint8_t *mask,
                           uint32_t n, const uint32_t *doc_len, uint32_t n_docs);
/* The same with the sample's label (kind "kto"): the first labelled sample of a writer turns the
 * label section on (the file becomes version 2); a writer's samples are all labelled or none
 * (mixing is an error). Returns 0 or -1. */
int swift_shard_writer_add_labeled(struct swift_shard_writer *w, const uint32_t *ids,
                                   const uint8_t *mask, uint32_t n, const uint32_t *doc_len,
                                   uint32_t n_docs, uint8_t label);
/* The same with the sample's metadata (kind "prompts"): meta_len bytes of one JSON object's
 * text (no NUL; meta_len 0: none), copied. The first sample with metadata turns the metadata
 * section on (version 2); a writer's samples all have it or none (mixing is an error). */
int swift_shard_writer_add_meta(struct swift_shard_writer *w, const uint32_t *ids,
                                const uint8_t *mask, uint32_t n, const uint32_t *doc_len,
                                uint32_t n_docs, const char *meta, uint32_t meta_len);
/* A label and metadata both (a file with both sections). */
int swift_shard_writer_add_labeled_meta(struct swift_shard_writer *w, const uint32_t *ids,
                                        const uint8_t *mask, uint32_t n, const uint32_t *doc_len,
                                        uint32_t n_docs, uint8_t label, const char *meta,
                                        uint32_t meta_len);
uint64_t swift_shard_writer_samples(const struct swift_shard_writer *w);
uint64_t swift_shard_writer_tokens(const struct swift_shard_writer *w);
/* Write the file atomically and free w. *crc (may be NULL) gets the payload CRC. Returns 0 or
 * -1 (nothing left under the final name). */
int swift_shard_writer_commit(struct swift_shard_writer *w, uint32_t *crc);
/* Free w without writing. */
void swift_shard_writer_free(struct swift_shard_writer *w);

/* Serialize a shard into a malloc'ed buffer (the writer uses it; tests and fuzzing too). */
int swift_shard_serialize(struct swift_shard_writer *w, unsigned char **buf, size_t *len);

/* ---- reading ---- */
struct swift_shard; /* one mapped file */

/* Check a whole shard image in memory (header, sizes, CRC, offsets; labels 0/1; metadata
 * offsets monotonic within the payload, each entry empty or "{...}" without NUL). name is for
 * messages, which give the byte offset. Returns 0 or -1. */
int swift_shard_check(const unsigned char *buf, size_t len, const char *name);

enum {
    SWIFT_SHARDS_NO_CRC = 1, /* skip the payload CRC check on open (structure still checked) */
    SWIFT_SHARDS_IMAGES = 2  /* the reader handles samples with images (index version 3; the
                                metadata names the image cache files); without it they are
                                refused, so no text-only reader trains on image tokens alone */
};

struct swift_shards; /* a shard directory */

/* Open dir (index.json + every shard it lists, mmapped and checked; with kind "pairs" every
 * sample must have two documents, with "kto" every file must have labels (and only then), with
 * "prompts" every file must have the metadata section (and only then) and every sample one
 * document). Returns 0 or -1. */
int swift_shards_open(struct swift_shards **out, const char *dir, int flags);
void swift_shards_close(struct swift_shards *s);
/* Samples over all shards, in index order. */
uint64_t swift_shards_count(const struct swift_shards *s);
/* Sample i (0 <= i < count); pointers borrowed until swift_shards_close. Returns 0, or -1 when
 * i is out of range (reported). */
int swift_shards_get(const struct swift_shards *s, uint64_t i, struct swift_sample *out);
/* The parsed index.json (borrowed). */
const struct swift_shard_index *swift_shards_index(const struct swift_shards *s);

#endif
