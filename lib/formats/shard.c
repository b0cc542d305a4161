/* shard — binary token shards and index.json (see shard.h for the layout). */
#include "lib/formats/shard.h"
#include "lib/core/alloc.h"

#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/core/record.h"
#include "lib/core/sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "lib/core/banned.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "swift_shards_get returns pointers into little-endian files");

#define SHARD_MAX_TOKENS ((uint64_t)1 << 36) /* per file: 256 GiB of ids is surely corrupt */
#define INDEX_MAX_BYTES ((size_t)256 << 20)

/* ---- little-endian helpers ---- */
static void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}
static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get_u64(const unsigned char *p)
{
    return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32;
}
static uint64_t align8(uint64_t x)
{
    return (x + 7) & ~(uint64_t)7;
}

static uint32_t crc32_big(const unsigned char *p, uint64_t n)
{
    uLong c = crc32(0L, Z_NULL, 0);
    while (n > 0) {
        uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
        c = crc32(c, p, k);
        p += k;
        n -= k;
    }
    return (uint32_t)c;
}

/* Section layout for given counts; offsets from the file start. Returns 0, -1 on overflow. */
struct layout {
    uint64_t sample_tok, sample_doc, doc_len, ids, mask, label, end; /* label: 0 when none */
};
static int compute_layout(uint64_t hdr, uint64_t ns, uint64_t nd, uint64_t nt, int labels,
                          struct layout *l)
{
    if (ns > SHARD_MAX_TOKENS || nd > SHARD_MAX_TOKENS || nt > SHARD_MAX_TOKENS)
        return -1;
    l->sample_tok = align8(hdr);
    l->sample_doc = l->sample_tok + 8 * (ns + 1);
    l->doc_len = l->sample_doc + 8 * (ns + 1);
    l->ids = align8(l->doc_len + 4 * nd);
    l->mask = l->ids + 4 * nt;
    l->label = labels ? l->mask + nt : 0;
    l->end = align8(labels ? l->label + ns : l->mask + nt);
    return 0;
}

/* ---- writer ---- */

struct swift_shard_writer {
    char *path;
    uint32_t *ids;
    uint8_t *mask;
    uint64_t nt, cap_t;
    uint32_t *doc_len;
    uint64_t nd, cap_d;
    uint64_t *sample_tok, *sample_doc; /* ns + 1 entries */
    uint64_t ns, cap_s;
    uint8_t *labels; /* cap_s entries once a sample was added with a label */
    int labeled;
};

static int grow(void **p, uint64_t *cap, uint64_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    uint64_t nc = *cap ? *cap : 1024;
    while (nc < need)
        nc *= 2;
    if (nc > SHARD_MAX_TOKENS + 2)
        return swift_error("shard too large (%" PRIu64 " entries)", need);
    *p = swift_xrealloc(*p, nc * elem);
    *cap = nc;
    return 0;
}

struct swift_shard_writer *swift_shard_writer_new(const char *path)
{
    struct swift_shard_writer *w = swift_xcalloc(1, sizeof(*w));
    w->path = swift_xstrdup(path ? path : "");
    if (grow((void **)&w->sample_tok, &w->cap_s, 1, sizeof(uint64_t)) < 0) {
        swift_shard_writer_free(w);
        return NULL;
    }
    w->sample_doc = swift_xcalloc(w->cap_s, sizeof(uint64_t));
    w->sample_tok[0] = 0;
    w->sample_doc[0] = 0;
    return w;
}

void swift_shard_writer_free(struct swift_shard_writer *w)
{
    if (!w)
        return;
    free(w->path);
    free(w->ids);
    free(w->mask);
    free(w->doc_len);
    free(w->sample_tok);
    free(w->sample_doc);
    free(w->labels);
    free(w);
}

static int writer_add(struct swift_shard_writer *w, const uint32_t *ids, const uint8_t *mask,
                      uint32_t n, const uint32_t *doc_len, uint32_t n_docs)
{
    uint32_t one = n;
    if (!doc_len) {
        doc_len = &one;
        n_docs = 1;
    }
    if (n_docs == 0)
        return swift_error("shard sample without documents");
    uint64_t sum = 0;
    for (uint32_t d = 0; d < n_docs; d++)
        sum += doc_len[d];
    if (sum != n)
        return swift_error("shard sample: document lengths sum to %" PRIu64 ", not %u", sum, n);
    if (grow((void **)&w->ids, &w->cap_t, w->nt + n, sizeof(uint32_t)) < 0)
        return -1;
    w->mask = swift_xrealloc(w->mask, w->cap_t);
    uint64_t cap_s = w->cap_s;
    if (grow((void **)&w->sample_tok, &cap_s, w->ns + 2, sizeof(uint64_t)) < 0)
        return -1;
    if (cap_s != w->cap_s) {
        w->sample_doc = swift_xrealloc(w->sample_doc, cap_s * sizeof(uint64_t));
        if (w->labels)
            w->labels = swift_xrealloc(w->labels, cap_s);
        w->cap_s = cap_s;
    }
    if (grow((void **)&w->doc_len, &w->cap_d, w->nd + n_docs, sizeof(uint32_t)) < 0)
        return -1;
    memcpy(w->ids + w->nt, ids, (size_t)n * sizeof(uint32_t));
    if (mask)
        memcpy(w->mask + w->nt, mask, n);
    else
        memset(w->mask + w->nt, 1, n);
    memcpy(w->doc_len + w->nd, doc_len, (size_t)n_docs * sizeof(uint32_t));
    w->nt += n;
    w->nd += n_docs;
    w->ns++;
    w->sample_tok[w->ns] = w->nt;
    w->sample_doc[w->ns] = w->nd;
    return 0;
}

int swift_shard_writer_add(struct swift_shard_writer *w, const uint32_t *ids, const uint8_t *mask,
                           uint32_t n, const uint32_t *doc_len, uint32_t n_docs)
{
    if (w->labeled)
        return swift_error("shard: an unlabelled sample after labelled ones");
    return writer_add(w, ids, mask, n, doc_len, n_docs);
}

int swift_shard_writer_add_labeled(struct swift_shard_writer *w, const uint32_t *ids,
                                   const uint8_t *mask, uint32_t n, const uint32_t *doc_len,
                                   uint32_t n_docs, uint8_t label)
{
    if (!w->labeled && w->ns > 0)
        return swift_error("shard: a labelled sample after %" PRIu64 " unlabelled ones", w->ns);
    if (writer_add(w, ids, mask, n, doc_len, n_docs) < 0)
        return -1;
    if (!w->labeled) {
        w->labels = swift_xcalloc(w->cap_s, 1);
        w->labeled = 1;
    }
    w->labels[w->ns - 1] = label ? 1 : 0;
    return 0;
}

uint64_t swift_shard_writer_samples(const struct swift_shard_writer *w)
{
    return w->ns;
}
uint64_t swift_shard_writer_tokens(const struct swift_shard_writer *w)
{
    return w->nt;
}

int swift_shard_serialize(struct swift_shard_writer *w, unsigned char **out, size_t *outlen)
{
    struct layout l;
    if (compute_layout(SWIFT_SHARD_HEADER_SIZE, w->ns, w->nd, w->nt, w->labeled, &l) < 0)
        return swift_error("shard too large");
    unsigned char *b = swift_xcalloc(1, l.end);
    for (uint64_t i = 0; i <= w->ns; i++) {
        put_u64(b + l.sample_tok + 8 * i, w->sample_tok[i]);
        put_u64(b + l.sample_doc + 8 * i, w->sample_doc[i]);
    }
    for (uint64_t i = 0; i < w->nd; i++)
        put_u32(b + l.doc_len + 4 * i, w->doc_len[i]);
    for (uint64_t i = 0; i < w->nt; i++)
        put_u32(b + l.ids + 4 * i, w->ids[i]);
    if (w->nt)
        memcpy(b + l.mask, w->mask, w->nt);
    if (w->labeled && w->ns)
        memcpy(b + l.label, w->labels, w->ns);
    uint64_t payload = l.end - SWIFT_SHARD_HEADER_SIZE;
    memcpy(b, SWIFT_SHARD_MAGIC, 8);
    put_u32(b + 8, w->labeled ? SWIFT_SHARD_VERSION_LABELS : SWIFT_SHARD_VERSION);
    put_u32(b + 52, w->labeled ? SWIFT_SHARD_FLAG_LABELS : 0);
    put_u32(b + 12, SWIFT_SHARD_HEADER_SIZE);
    put_u64(b + 16, w->ns);
    put_u64(b + 24, w->nd);
    put_u64(b + 32, w->nt);
    put_u64(b + 40, payload);
    put_u32(b + 48, crc32_big(b + SWIFT_SHARD_HEADER_SIZE, payload));
    *out = b;
    *outlen = l.end;
    return 0;
}

int swift_shard_writer_commit(struct swift_shard_writer *w, uint32_t *crc)
{
    unsigned char *buf;
    size_t len;
    int rc = swift_shard_serialize(w, &buf, &len);
    if (rc == 0) {
        if (crc)
            *crc = get_u32(buf + 48);
        rc = swift_atomic_write(w->path, buf, len);
        free(buf);
    }
    swift_shard_writer_free(w);
    return rc;
}

/* ---- checking a shard image ---- */
struct shard_view {
    const unsigned char *base;
    uint64_t ns, nd, nt;
    int labels; /* the file has the label section */
    struct layout l;
};

static int check_image(const unsigned char *b, size_t len, const char *name, int verify_crc,
                       struct shard_view *v)
{
    if (len < 16)
        return swift_error_at(
            name, 0, "offset 0: file too short for a shard header (%zu bytes)", len);
    if (memcmp(b, SWIFT_SHARD_MAGIC, 8) != 0)
        return swift_error_at(name, 0, "offset 0: bad magic (not a swift shard)");
    uint32_t version = get_u32(b + 8);
    if (version != SWIFT_SHARD_VERSION && version != SWIFT_SHARD_VERSION_LABELS)
        return swift_error_at(name,
                              0,
                              "offset 8: unsupported shard version %u (this build reads %d and %d)",
                              version,
                              SWIFT_SHARD_VERSION,
                              SWIFT_SHARD_VERSION_LABELS);
    uint32_t hdr = get_u32(b + 12);
    if (hdr < SWIFT_SHARD_HEADER_SIZE || hdr > (1u << 20) || hdr % 8)
        return swift_error_at(name, 0, "offset 12: bad header size %u", hdr);
    if (len < hdr)
        return swift_error_at(name, 0, "offset %zu: file ends inside the %u-byte header", len, hdr);
    /* version 1 never had flags (they were written 0 and not read) */
    uint32_t flags = version == SWIFT_SHARD_VERSION ? 0 : get_u32(b + 52);
    if (version == SWIFT_SHARD_VERSION_LABELS && flags != SWIFT_SHARD_FLAG_LABELS)
        return swift_error_at(name, 0, "offset 52: unknown flags %08x for version 2", flags);
    v->labels = flags & SWIFT_SHARD_FLAG_LABELS ? 1 : 0;
    v->base = b;
    v->ns = get_u64(b + 16);
    v->nd = get_u64(b + 24);
    v->nt = get_u64(b + 32);
    uint64_t payload = get_u64(b + 40);
    if (compute_layout(hdr, v->ns, v->nd, v->nt, v->labels, &v->l) < 0)
        return swift_error_at(name,
                              0,
                              "offset 16: implausible counts (samples %" PRIu64
                              ", documents %" PRIu64 ", tokens %" PRIu64 ")",
                              v->ns,
                              v->nd,
                              v->nt);
    if (payload != v->l.end - hdr)
        return swift_error_at(name,
                              0,
                              "offset 40: payload size %" PRIu64
                              " does not match the counts (%" PRIu64 ")",
                              payload,
                              v->l.end - hdr);
    if ((uint64_t)len != v->l.end)
        return swift_error_at(name,
                              0,
                              "offset %zu: file size %zu, header says %" PRIu64
                              " (truncated or trailing data)",
                              len < v->l.end ? len : (size_t)v->l.end,
                              len,
                              v->l.end);
    if (verify_crc) {
        uint32_t want = get_u32(b + 48);
        uint32_t got = crc32_big(b + hdr, payload);
        if (want != got)
            return swift_error_at(name,
                                  0,
                                  "offset %u: payload CRC32 mismatch (header %08x, data %08x)",
                                  hdr,
                                  want,
                                  got);
    }
    /* offsets must be monotonic and documents must tile the samples */
    const unsigned char *st = b + v->l.sample_tok, *sd = b + v->l.sample_doc;
    if (get_u64(st) != 0 || get_u64(sd) != 0)
        return swift_error_at(
            name, 0, "offset %" PRIu64 ": first sample offset is not 0", v->l.sample_tok);
    if (get_u64(st + 8 * v->ns) != v->nt || get_u64(sd + 8 * v->ns) != v->nd)
        return swift_error_at(name,
                              0,
                              "offset %" PRIu64 ": last sample offset does not match the counts",
                              v->l.sample_tok + 8 * v->ns);
    for (uint64_t i = 0; i < v->ns; i++) {
        uint64_t t0 = get_u64(st + 8 * i), t1 = get_u64(st + 8 * (i + 1));
        uint64_t d0 = get_u64(sd + 8 * i), d1 = get_u64(sd + 8 * (i + 1));
        if (t1 < t0 || t1 - t0 > UINT32_MAX || d1 <= d0 || d1 > v->nd)
            return swift_error_at(name,
                                  0,
                                  "offset %" PRIu64 ": bad offsets for sample %" PRIu64,
                                  v->l.sample_tok + 8 * i,
                                  i);
        uint64_t sum = 0;
        for (uint64_t d = d0; d < d1; d++)
            sum += get_u32(b + v->l.doc_len + 4 * d);
        if (sum != t1 - t0)
            return swift_error_at(name,
                                  0,
                                  "offset %" PRIu64 ": documents of sample %" PRIu64
                                  " sum to %" PRIu64 " tokens, not %" PRIu64,
                                  v->l.doc_len + 4 * d0,
                                  i,
                                  sum,
                                  t1 - t0);
    }
    for (uint64_t i = 0; v->labels && i < v->ns; i++)
        if (b[v->l.label + i] > 1)
            return swift_error_at(name,
                                  0,
                                  "offset %" PRIu64 ": label %u of sample %" PRIu64
                                  " is not 0 or 1",
                                  v->l.label + i,
                                  b[v->l.label + i],
                                  i);
    return 0;
}

int swift_shard_check(const unsigned char *buf, size_t len, const char *name)
{
    struct shard_view v;
    return check_image(buf, len, name, 1, &v);
}

/* ---- index.json ---- */
void swift_shard_index_init(struct swift_shard_index *ix)
{
    memset(ix, 0, sizeof(*ix));
    ix->version = SWIFT_SHARD_INDEX_VERSION;
}

void swift_shard_index_release(struct swift_shard_index *ix)
{
    free(ix->tokenizer);
    free(ix->tokenizer_sha256);
    free(ix->template_name);
    free(ix->loss);
    free(ix->truncation);
    free(ix->packing);
    free(ix->split);
    free(ix->kind);
    for (size_t i = 0; i < ix->n_shards; i++)
        free(ix->shards[i].file);
    free(ix->shards);
    memset(ix, 0, sizeof(*ix));
}

int swift_shard_index_add(struct swift_shard_index *ix, const char *file, uint64_t samples,
                          uint64_t tokens, uint32_t crc)
{
    ix->shards = swift_xrealloc(ix->shards, (ix->n_shards + 1) * sizeof(*ix->shards));
    struct swift_shard_entry *e = &ix->shards[ix->n_shards];
    e->file = swift_xstrdup(file);
    e->samples = samples;
    e->tokens = tokens;
    e->crc32 = crc;
    ix->n_shards++;
    return 0;
}

static void set_str(json_t *o, const char *k, const char *v)
{
    json_object_set_new(o, k, v ? json_string(v) : json_null());
}

int swift_shard_index_write(const struct swift_shard_index *ix, const char *dir)
{
    json_t *o = json_object();
    json_object_set_new(o, "format", json_string(SWIFT_SHARD_INDEX_FORMAT));
    int sft = !strcmp(swift_shard_index_kind(ix), "sft");
    json_object_set_new(
        o,
        "version",
        json_integer(sft ? SWIFT_SHARD_INDEX_VERSION : SWIFT_SHARD_INDEX_VERSION_KIND));
    if (!sft) /* SFT indexes stay as they were (no "kind", version 1) */
        set_str(o, "kind", ix->kind);
    set_str(o, "split", ix->split);
    set_str(o, "tokenizer", ix->tokenizer);
    set_str(o, "tokenizer_sha256", ix->tokenizer_sha256);
    set_str(o, "template", ix->template_name);
    set_str(o, "loss", ix->loss);
    set_str(o, "truncation", ix->truncation);
    set_str(o, "packing", ix->packing);
    json_object_set_new(o, "max_length", json_integer((json_int_t)ix->max_length));
    json_object_set_new(o, "vocab_size", json_integer((json_int_t)ix->vocab_size));
    json_object_set_new(o, "seed", json_integer((json_int_t)ix->seed));
    json_t *c = json_object();
    json_object_set_new(c, "samples", json_integer((json_int_t)ix->samples));
    json_object_set_new(c, "documents", json_integer((json_int_t)ix->documents));
    json_object_set_new(c, "dropped", json_integer((json_int_t)ix->dropped));
    json_object_set_new(c, "truncated", json_integer((json_int_t)ix->truncated));
    json_object_set_new(c, "tokens", json_integer((json_int_t)ix->tokens));
    json_object_set_new(c, "trained_tokens", json_integer((json_int_t)ix->trained_tokens));
    json_object_set_new(o, "counts", c);
    json_object_set_new(o, "packing_efficiency", json_real(ix->packing_efficiency));
    json_t *ls = json_object();
    json_object_set_new(ls, "mean", json_real(ix->len_mean));
    json_object_set_new(ls, "std", json_real(ix->len_std));
    json_object_set_new(ls, "min", json_integer((json_int_t)ix->len_min));
    json_object_set_new(ls, "max", json_integer((json_int_t)ix->len_max));
    json_object_set_new(o, "length", ls);
    json_t *sh = json_array();
    for (size_t i = 0; i < ix->n_shards; i++) {
        json_t *e = json_object();
        json_object_set_new(e, "file", json_string(ix->shards[i].file));
        json_object_set_new(e, "samples", json_integer((json_int_t)ix->shards[i].samples));
        json_object_set_new(e, "tokens", json_integer((json_int_t)ix->shards[i].tokens));
        json_object_set_new(e, "crc32", json_integer((json_int_t)ix->shards[i].crc32));
        json_array_append_new(sh, e);
    }
    json_object_set_new(o, "shards", sh);
    char *path = swift_path_join(dir, "index.json");
    int rc = swift_json_write_file(path, o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(o);
    free(path);
    return rc;
}

static int get_str(json_t *o, const char *k, char **dst, const char *name)
{
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v))
        return swift_error_at(name, 0, "\"%s\" must be a string", k);
    *dst = swift_xstrdup(json_string_value(v));
    return 0;
}

static int get_u64j(json_t *o, const char *k, uint64_t *dst, const char *name, int required)
{
    json_t *v = json_object_get(o, k);
    if (!v) {
        if (required)
            return swift_error_at(name, 0, "missing \"%s\"", k);
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return swift_error_at(name, 0, "\"%s\" must be a non-negative integer", k);
    *dst = (uint64_t)json_integer_value(v);
    return 0;
}

static int get_dbl(json_t *o, const char *k, double *dst, const char *name)
{
    json_t *v = json_object_get(o, k);
    if (!v)
        return 0;
    if (!json_is_number(v))
        return swift_error_at(name, 0, "\"%s\" must be a number", k);
    *dst = json_number_value(v);
    return 0;
}

static int parse_obj(struct swift_shard_index *ix, json_t *o, const char *name)
{
    if (!json_is_object(o))
        return swift_error_at(name, 0, "index must be a JSON object");
    json_t *f = json_object_get(o, "format");
    if (!json_is_string(f) || strcmp(json_string_value(f), SWIFT_SHARD_INDEX_FORMAT))
        return swift_error_at(
            name, 0, "not a shard index (\"format\" is not \"%s\")", SWIFT_SHARD_INDEX_FORMAT);
    uint64_t ver = 0;
    if (get_u64j(o, "version", &ver, name, 1) < 0)
        return -1;
    if (ver != SWIFT_SHARD_INDEX_VERSION && ver != SWIFT_SHARD_INDEX_VERSION_KIND)
        return swift_error_at(name,
                              0,
                              "unsupported index version %" PRIu64 " (this build reads %d and %d)",
                              ver,
                              SWIFT_SHARD_INDEX_VERSION,
                              SWIFT_SHARD_INDEX_VERSION_KIND);
    ix->version = (int)ver;
    if (get_str(o, "kind", &ix->kind, name) < 0)
        return -1;
    if (ix->kind && strcmp(ix->kind, "sft") && strcmp(ix->kind, "pairs") && strcmp(ix->kind, "kto"))
        return swift_error_at(
            name, 0, "unknown \"kind\" '%s' (this build reads sft, pairs and kto)", ix->kind);
    if (get_str(o, "split", &ix->split, name) < 0 ||
        get_str(o, "tokenizer", &ix->tokenizer, name) < 0 ||
        get_str(o, "tokenizer_sha256", &ix->tokenizer_sha256, name) < 0 ||
        get_str(o, "template", &ix->template_name, name) < 0 ||
        get_str(o, "loss", &ix->loss, name) < 0 ||
        get_str(o, "truncation", &ix->truncation, name) < 0 ||
        get_str(o, "packing", &ix->packing, name) < 0 ||
        get_u64j(o, "max_length", &ix->max_length, name, 1) < 0 ||
        get_u64j(o, "vocab_size", &ix->vocab_size, name, 0) < 0 ||
        get_u64j(o, "seed", &ix->seed, name, 0) < 0 ||
        get_dbl(o, "packing_efficiency", &ix->packing_efficiency, name) < 0)
        return -1;
    json_t *c = json_object_get(o, "counts");
    if (!json_is_object(c))
        return swift_error_at(name, 0, "missing \"counts\" object");
    if (get_u64j(c, "samples", &ix->samples, name, 1) < 0 ||
        get_u64j(c, "documents", &ix->documents, name, 0) < 0 ||
        get_u64j(c, "dropped", &ix->dropped, name, 0) < 0 ||
        get_u64j(c, "truncated", &ix->truncated, name, 0) < 0 ||
        get_u64j(c, "tokens", &ix->tokens, name, 1) < 0 ||
        get_u64j(c, "trained_tokens", &ix->trained_tokens, name, 0) < 0)
        return -1;
    json_t *ls = json_object_get(o, "length");
    if (ls) {
        if (!json_is_object(ls))
            return swift_error_at(name, 0, "\"length\" must be an object");
        if (get_dbl(ls, "mean", &ix->len_mean, name) < 0 ||
            get_dbl(ls, "std", &ix->len_std, name) < 0 ||
            get_u64j(ls, "min", &ix->len_min, name, 0) < 0 ||
            get_u64j(ls, "max", &ix->len_max, name, 0) < 0)
            return -1;
    }
    json_t *sh = json_object_get(o, "shards");
    if (!json_is_array(sh))
        return swift_error_at(name, 0, "missing \"shards\" array");
    uint64_t tot_s = 0, tot_t = 0;
    for (size_t i = 0; i < json_array_size(sh); i++) {
        json_t *e = json_array_get(sh, i);
        json_t *file = json_object_get(e, "file");
        uint64_t s = 0, t = 0, crc = 0;
        if (!json_is_object(e) || !json_is_string(file))
            return swift_error_at(name, 0, "shards[%zu]: expected {\"file\": ...}", i);
        const char *fn = json_string_value(file);
        if (!*fn || strchr(fn, '/') || !strcmp(fn, ".") || !strcmp(fn, ".."))
            return swift_error_at(
                name, 0, "shards[%zu]: file name '%s' must be a plain name", i, fn);
        if (get_u64j(e, "samples", &s, name, 1) < 0 || get_u64j(e, "tokens", &t, name, 1) < 0 ||
            get_u64j(e, "crc32", &crc, name, 0) < 0)
            return -1;
        if (crc > UINT32_MAX)
            return swift_error_at(name, 0, "shards[%zu]: crc32 out of range", i);
        if (swift_shard_index_add(ix, fn, s, t, (uint32_t)crc) < 0)
            return -1;
        tot_s += s;
        tot_t += t;
    }
    if (tot_s != ix->samples || tot_t != ix->tokens)
        return swift_error_at(name,
                              0,
                              "shard list holds %" PRIu64 " samples / %" PRIu64
                              " tokens, counts say %" PRIu64 " / %" PRIu64,
                              tot_s,
                              tot_t,
                              ix->samples,
                              ix->tokens);
    return 0;
}

int swift_shard_index_parse(struct swift_shard_index *ix, const char *text, size_t len,
                            const char *name)
{
    swift_shard_index_init(ix);
    json_error_t err;
    json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
    if (!o)
        return swift_error_at(name, err.line, "%s", err.text);
    int rc = parse_obj(ix, o, name);
    json_decref(o);
    if (rc < 0)
        swift_shard_index_release(ix);
    return rc;
}

int swift_shard_index_read(struct swift_shard_index *ix, const char *dir)
{
    swift_shard_index_init(ix);
    char *path = swift_path_join(dir, "index.json");
    char *text;
    size_t len;
    int rc = swift_read_file(path, INDEX_MAX_BYTES, &text, &len);
    if (rc == 0) {
        rc = swift_shard_index_parse(ix, text, len, path);
        free(text);
    }
    free(path);
    return rc;
}

const char *swift_shard_index_kind(const struct swift_shard_index *ix)
{
    if (ix->kind && (!strcmp(ix->kind, "pairs") || !strcmp(ix->kind, "kto")))
        return ix->kind;
    return "sft";
}

int swift_shard_index_check_kind(const struct swift_shard_index *ix, const char *want,
                                 const char *what, const char *data_dir)
{
    const char *have = swift_shard_index_kind(ix);
    if (!strcmp(have, want))
        return 0;
    static const char *const desc[][2] = {
        {"sft", "SFT samples"}, {"pairs", "preference pairs"}, {"kto", "KTO's labelled samples"}};
    const char *dh = have, *dw = want;
    for (size_t i = 0; i < 3; i++) {
        if (!strcmp(have, desc[i][0]))
            dh = desc[i][1];
        if (!strcmp(want, desc[i][0]))
            dw = desc[i][1];
    }
    return swift_error("%s/index.json: the shards hold %s (kind \"%s\"), %s needs %s (make them "
                       "with swift-preprocess --kind %s)",
                       data_dir,
                       dh,
                       have,
                       what,
                       dw,
                       want);
}

int swift_shard_index_check_tokenizer(const struct swift_shard_index *ix, const char *model_dir,
                                      const char *data_dir)
{
    if (!ix->tokenizer_sha256)
        return 0;
    char *tj = swift_path_join(model_dir, "tokenizer.json");
    if (access(tj, R_OK) < 0) {
        free(tj);
        return 0;
    }
    char hex[65];
    int rc = swift_sha256_file(tj, hex);
    if (rc == 0 && strcmp(hex, ix->tokenizer_sha256))
        rc = swift_error("%s/index.json: shards were made with another tokenizer (sha256 %.12s…, "
                         "the model's tokenizer.json is %.12s…)",
                         data_dir,
                         ix->tokenizer_sha256,
                         hex);
    free(tj);
    return rc;
}

/* ---- the directory reader ---- */
struct mapped {
    unsigned char *base;
    size_t len;
    struct shard_view v;
    uint64_t first; /* global index of the first sample */
};

struct swift_shards {
    struct swift_shard_index ix;
    struct mapped *files;
    size_t n;
    uint64_t count;
};

static int map_file(const char *path, struct mapped *m, int flags)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return swift_error_errno("cannot open '%s'", path);
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return swift_error_errno("cannot stat '%s'", path);
    }
    m->len = (size_t)st.st_size;
    m->base = NULL;
    if (m->len > 0) {
        void *p = mmap(NULL, m->len, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            errno = e;
            return swift_error_errno("cannot mmap '%s'", path);
        }
        m->base = p;
    }
    close(fd);
    static const unsigned char empty[1];
    return check_image(
        m->base ? m->base : empty, m->len, path, !(flags & SWIFT_SHARDS_NO_CRC), &m->v);
}

/* A file's samples fit index.json's kind: pairs have two documents each, kto files have labels
 * (and only kto files do). */
static int check_kind(const struct swift_shard_index *ix, const struct mapped *m, const char *path)
{
    const char *kind = swift_shard_index_kind(ix);
    int kto = !strcmp(kind, "kto");
    if (m->v.labels != kto)
        return swift_error_at(path,
                              0,
                              "offset 8: %s the label section, but index.json's kind is \"%s\"",
                              m->v.labels ? "has" : "lacks",
                              kind);
    if (strcmp(kind, "pairs"))
        return 0;
    const unsigned char *sd = m->base + m->v.l.sample_doc;
    for (uint64_t i = 0; i < m->v.ns; i++)
        if (get_u64(sd + 8 * (i + 1)) - get_u64(sd + 8 * i) != 2)
            return swift_error_at(path,
                                  0,
                                  "offset %" PRIu64 ": sample %" PRIu64
                                  " is not a pair (kind \"pairs\" needs two documents)",
                                  m->v.l.sample_doc + 8 * i,
                                  i);
    return 0;
}

void swift_shards_close(struct swift_shards *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++)
        if (s->files[i].base)
            munmap(s->files[i].base, s->files[i].len);
    free(s->files);
    swift_shard_index_release(&s->ix);
    free(s);
}

int swift_shards_open(struct swift_shards **out, const char *dir, int flags)
{
    *out = NULL;
    struct swift_shards *s = swift_xcalloc(1, sizeof(*s));
    if (swift_shard_index_read(&s->ix, dir) < 0) {
        free(s);
        return -1;
    }
    s->files = swift_xcalloc(s->ix.n_shards, sizeof(*s->files));
    for (size_t i = 0; i < s->ix.n_shards; i++) {
        const struct swift_shard_entry *e = &s->ix.shards[i];
        char *path = swift_path_join(dir, e->file);
        struct mapped *m = &s->files[i];
        int rc = map_file(path, m, flags);
        s->n = i + 1;
        if (rc == 0 && (m->v.ns != e->samples || m->v.nt != e->tokens))
            rc = swift_error_at(path,
                                0,
                                "offset 16: holds %" PRIu64 " samples / %" PRIu64
                                " tokens, index.json says %" PRIu64 " / %" PRIu64,
                                m->v.ns,
                                m->v.nt,
                                e->samples,
                                e->tokens);
        if (rc == 0 && e->crc32 && get_u32(m->base + 48) != e->crc32)
            rc = swift_error_at(path,
                                0,
                                "offset 48: CRC32 %08x differs from index.json's %08x",
                                get_u32(m->base + 48),
                                e->crc32);
        if (rc == 0)
            rc = check_kind(&s->ix, m, path);
        if (rc == 0 && s->ix.vocab_size) {
            const unsigned char *ids = m->base + m->v.l.ids;
            for (uint64_t t = 0; t < m->v.nt; t++)
                if (get_u32(ids + 4 * t) >= s->ix.vocab_size) {
                    rc = swift_error_at(path,
                                        0,
                                        "offset %" PRIu64 ": token id %u >= vocab size %" PRIu64,
                                        m->v.l.ids + 4 * t,
                                        get_u32(ids + 4 * t),
                                        s->ix.vocab_size);
                    break;
                }
        }
        free(path);
        if (rc < 0) {
            swift_shards_close(s);
            return -1;
        }
        m->first = s->count;
        s->count += m->v.ns;
    }
    *out = s;
    return 0;
}

uint64_t swift_shards_count(const struct swift_shards *s)
{
    return s->count;
}

const struct swift_shard_index *swift_shards_index(const struct swift_shards *s)
{
    return &s->ix;
}

int swift_shards_get(const struct swift_shards *s, uint64_t i, struct swift_sample *out)
{
    if (i >= s->count)
        return swift_error("sample %" PRIu64 " out of range (%" PRIu64 " samples)", i, s->count);
    size_t lo = 0, hi = s->n;
    while (hi - lo > 1) { /* last file with first <= i */
        size_t mid = (lo + hi) / 2;
        if (s->files[mid].first <= i)
            lo = mid;
        else
            hi = mid;
    }
    while (s->files[lo].v.ns == 0 || i - s->files[lo].first >= s->files[lo].v.ns)
        lo++; /* skip empty shards sharing the same first index */
    const struct mapped *m = &s->files[lo];
    uint64_t k = i - m->first;
    const unsigned char *b = m->base;
    uint64_t t0 = get_u64(b + m->v.l.sample_tok + 8 * k);
    uint64_t t1 = get_u64(b + m->v.l.sample_tok + 8 * (k + 1));
    uint64_t d0 = get_u64(b + m->v.l.sample_doc + 8 * k);
    uint64_t d1 = get_u64(b + m->v.l.sample_doc + 8 * (k + 1));
    /* the layout is 8-aligned and mmap is page-aligned, and this is a little-endian host */
    out->ids = (const uint32_t *)(const void *)(b + m->v.l.ids) + t0;
    out->mask = b + m->v.l.mask + t0;
    out->len = (uint32_t)(t1 - t0);
    out->doc_len = (const uint32_t *)(const void *)(b + m->v.l.doc_len) + d0;
    out->n_docs = (uint32_t)(d1 - d0);
    out->label = m->v.labels ? b[m->v.l.label + k] : 0;
    return 0;
}
