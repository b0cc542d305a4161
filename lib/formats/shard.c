/* shard — binary token shards: the writer, the checker and the directory reader (see shard.h for
 * the layout; index.json is shard_index.c). */
#include "lib/formats/shard.h"
#include "lib/formats/internal.h"
#include "lib/core/alloc.h"

#include "lib/core/error.h"
#include "lib/core/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
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

/* ---- offsets ---- */
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

/* Section layout for given counts (meta_bytes: the metadata blob's size); offsets from the file
 * start. Returns 0, -1 on overflow. */
struct layout {
    uint64_t sample_tok, sample_doc, doc_len, ids, mask;
    uint64_t label, meta_off, meta; /* 0 when the section is absent */
    uint64_t end;
};
static int compute_layout(uint64_t hdr, uint64_t ns, uint64_t nd, uint64_t nt, int labels, int meta,
                          uint64_t meta_bytes, struct layout *l)
{
    if (ns > SHARD_MAX_TOKENS || nd > SHARD_MAX_TOKENS || nt > SHARD_MAX_TOKENS ||
        meta_bytes > SHARD_MAX_TOKENS)
        return -1;
    l->sample_tok = align8(hdr);
    l->sample_doc = l->sample_tok + 8 * (ns + 1);
    l->doc_len = l->sample_doc + 8 * (ns + 1);
    l->ids = align8(l->doc_len + 4 * nd);
    l->mask = l->ids + 4 * nt;
    l->label = labels ? l->mask + nt : 0;
    uint64_t end = labels ? l->label + ns : l->mask + nt;
    l->meta_off = meta ? align8(end) : 0;
    l->meta = meta ? l->meta_off + 8 * (ns + 1) : 0;
    l->end = align8(meta ? l->meta + meta_bytes : end);
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
    uint64_t *meta_off; /* cap_s entries once a sample was added with metadata */
    char *meta;
    uint64_t meta_n, meta_cap;
    int has_meta;
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
    free(w->meta_off);
    free(w->meta);
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
        if (w->meta_off)
            w->meta_off = swift_xrealloc(w->meta_off, cap_s * sizeof(uint64_t));
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

/* What check_image accepts as one sample's metadata: empty, or "{...}" without a NUL byte. */
static int meta_ok(const char *m, uint64_t n)
{
    return n == 0 || (m[0] == '{' && m[n - 1] == '}' && !memchr(m, 0, n));
}

/* A sample with a label (label >= 0) and metadata (meta non-NULL) or without: a writer's samples
 * all have each section or none. */
static int add_sample(struct swift_shard_writer *w, const uint32_t *ids, const uint8_t *mask,
                      uint32_t n, const uint32_t *doc_len, uint32_t n_docs, int label,
                      const char *meta, uint32_t meta_len)
{
    if (w->labeled && label < 0)
        return swift_error("shard: an unlabelled sample after labelled ones");
    if (!w->labeled && label >= 0 && w->ns > 0)
        return swift_error("shard: a labelled sample after %" PRIu64 " unlabelled ones", w->ns);
    if (w->has_meta && !meta)
        return swift_error("shard: a sample without metadata after samples with it");
    if (!w->has_meta && meta && w->ns > 0)
        return swift_error("shard: a sample with metadata after %" PRIu64 " without", w->ns);
    if (meta && !meta_ok(meta, meta_len))
        return swift_error("shard: sample metadata must be a JSON object's text without NUL bytes");
    if (meta && w->meta_n + meta_len > SHARD_MAX_TOKENS)
        return swift_error("shard: more than %" PRIu64 " bytes of metadata", SHARD_MAX_TOKENS);
    if (writer_add(w, ids, mask, n, doc_len, n_docs) < 0)
        return -1;
    if (label >= 0) {
        if (!w->labeled)
            w->labels = swift_xcalloc(w->cap_s, 1);
        w->labeled = 1;
        w->labels[w->ns - 1] = label ? 1 : 0;
    }
    if (meta) {
        if (!w->has_meta) {
            w->meta_off = swift_xcalloc(w->cap_s, sizeof(uint64_t));
            w->has_meta = 1;
        }
        if (w->meta_n + meta_len > w->meta_cap) {
            uint64_t nc = w->meta_cap ? w->meta_cap : 4096;
            while (nc < w->meta_n + meta_len)
                nc *= 2;
            w->meta = swift_xrealloc(w->meta, nc);
            w->meta_cap = nc;
        }
        if (meta_len) /* an empty first entry leaves w->meta NULL: no memcpy to it */
            memcpy(w->meta + w->meta_n, meta, meta_len);
        w->meta_n += meta_len;
        w->meta_off[w->ns] = w->meta_n;
    }
    return 0;
}

int swift_shard_writer_add(struct swift_shard_writer *w, const uint32_t *ids, const uint8_t *mask,
                           uint32_t n, const uint32_t *doc_len, uint32_t n_docs)
{
    return add_sample(w, ids, mask, n, doc_len, n_docs, -1, NULL, 0);
}

int swift_shard_writer_add_labeled(struct swift_shard_writer *w, const uint32_t *ids,
                                   const uint8_t *mask, uint32_t n, const uint32_t *doc_len,
                                   uint32_t n_docs, uint8_t label)
{
    return add_sample(w, ids, mask, n, doc_len, n_docs, label ? 1 : 0, NULL, 0);
}

int swift_shard_writer_add_meta(struct swift_shard_writer *w, const uint32_t *ids,
                                const uint8_t *mask, uint32_t n, const uint32_t *doc_len,
                                uint32_t n_docs, const char *meta, uint32_t meta_len)
{
    return add_sample(w, ids, mask, n, doc_len, n_docs, -1, meta ? meta : "", meta_len);
}

int swift_shard_writer_add_labeled_meta(struct swift_shard_writer *w, const uint32_t *ids,
                                        const uint8_t *mask, uint32_t n, const uint32_t *doc_len,
                                        uint32_t n_docs, uint8_t label, const char *meta,
                                        uint32_t meta_len)
{
    return add_sample(w, ids, mask, n, doc_len, n_docs, label ? 1 : 0, meta ? meta : "", meta_len);
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
    if (compute_layout(
            SWIFT_SHARD_HEADER_SIZE, w->ns, w->nd, w->nt, w->labeled, w->has_meta, w->meta_n, &l) <
        0)
        return swift_error("shard too large");
    unsigned char *b = swift_xcalloc(1, l.end);
    for (uint64_t i = 0; i <= w->ns; i++) {
        swift_le_put64(b + l.sample_tok + 8 * i, w->sample_tok[i]);
        swift_le_put64(b + l.sample_doc + 8 * i, w->sample_doc[i]);
    }
    for (uint64_t i = 0; i < w->nd; i++)
        swift_le_put32(b + l.doc_len + 4 * i, w->doc_len[i]);
    for (uint64_t i = 0; i < w->nt; i++)
        swift_le_put32(b + l.ids + 4 * i, w->ids[i]);
    if (w->nt)
        memcpy(b + l.mask, w->mask, w->nt);
    if (w->labeled && w->ns)
        memcpy(b + l.label, w->labels, w->ns);
    for (uint64_t i = 0; w->has_meta && i <= w->ns; i++)
        swift_le_put64(b + l.meta_off + 8 * i, w->meta_off[i]);
    if (w->has_meta && w->meta_n)
        memcpy(b + l.meta, w->meta, w->meta_n);
    uint64_t payload = l.end - SWIFT_SHARD_HEADER_SIZE;
    uint32_t flags =
        (w->labeled ? SWIFT_SHARD_FLAG_LABELS : 0) | (w->has_meta ? SWIFT_SHARD_FLAG_META : 0);
    memcpy(b, SWIFT_SHARD_MAGIC, 8);
    swift_le_put32(b + 8, flags ? SWIFT_SHARD_VERSION_LABELS : SWIFT_SHARD_VERSION);
    swift_le_put32(b + 52, flags);
    swift_le_put32(b + 12, SWIFT_SHARD_HEADER_SIZE);
    swift_le_put64(b + 16, w->ns);
    swift_le_put64(b + 24, w->nd);
    swift_le_put64(b + 32, w->nt);
    swift_le_put64(b + 40, payload);
    swift_le_put32(b + 48, crc32_big(b + SWIFT_SHARD_HEADER_SIZE, payload));
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
            *crc = swift_le_get32(buf + 48);
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
    int meta;   /* the file has the metadata section */
    struct layout l;
};

/* The metadata blob's size is meta_off[n_samples], inside the payload: v->l gets the layout
 * with it once the whole file is there and the size fits the payload exactly. */
static int check_meta_size(const unsigned char *b, size_t len, const char *name, uint64_t hdr,
                           uint64_t payload, struct shard_view *v)
{
    uint64_t last = v->l.meta_off + 8 * v->ns; /* &meta_off[n_samples] */
    if (payload < v->l.end - hdr)
        return 0; /* the caller says the payload does not match the counts */
    uint64_t want = payload > UINT64_MAX - hdr ? UINT64_MAX : hdr + payload;
    if ((uint64_t)len != want)
        return swift_error_at(name,
                              0,
                              "offset %zu: file size %zu, header says %" PRIu64
                              " (truncated or trailing data)",
                              (uint64_t)len < want ? len : (size_t)want,
                              len,
                              want);
    uint64_t bytes = swift_le_get64(b + last);
    if (bytes > payload ||
        compute_layout(hdr, v->ns, v->nd, v->nt, v->labels, 1, bytes, &v->l) < 0 ||
        v->l.end != hdr + payload)
        return swift_error_at(name,
                              0,
                              "offset %" PRIu64 ": metadata size %" PRIu64
                              " does not fit the payload (%" PRIu64 " bytes)",
                              last,
                              bytes,
                              payload);
    return 0;
}

/* Metadata offsets start at 0 and never decrease (the last one was checked against the payload);
 * each sample's entry is empty or "{...}" without NUL bytes. */
static int check_meta(const unsigned char *b, const char *name, const struct shard_view *v)
{
    const unsigned char *mo = b + v->l.meta_off;
    uint64_t total = swift_le_get64(mo + 8 * v->ns);
    if (swift_le_get64(mo) != 0)
        return swift_error_at(
            name, 0, "offset %" PRIu64 ": first metadata offset is not 0", v->l.meta_off);
    for (uint64_t i = 0; i < v->ns; i++) {
        uint64_t a = swift_le_get64(mo + 8 * i), e = swift_le_get64(mo + 8 * (i + 1));
        if (e < a || e > total || e - a > UINT32_MAX)
            return swift_error_at(name,
                                  0,
                                  "offset %" PRIu64 ": bad metadata offsets for sample %" PRIu64,
                                  v->l.meta_off + 8 * (i + 1),
                                  i);
        if (!meta_ok((const char *)b + v->l.meta + a, e - a))
            return swift_error_at(name,
                                  0,
                                  "offset %" PRIu64 ": metadata of sample %" PRIu64
                                  " is not a JSON object's text (or holds a NUL byte)",
                                  v->l.meta + a,
                                  i);
    }
    return 0;
}

static int check_image(const unsigned char *b, size_t len, const char *name, int verify_crc,
                       struct shard_view *v)
{
    if (len < 16)
        return swift_error_at(
            name, 0, "offset 0: file too short for a shard header (%zu bytes)", len);
    if (memcmp(b, SWIFT_SHARD_MAGIC, 8) != 0)
        return swift_error_at(name, 0, "offset 0: bad magic (not a swift shard)");
    uint32_t version = swift_le_get32(b + 8);
    if (version != SWIFT_SHARD_VERSION && version != SWIFT_SHARD_VERSION_LABELS)
        return swift_error_at(name,
                              0,
                              "offset 8: unsupported shard version %u (this build reads %d and %d)",
                              version,
                              SWIFT_SHARD_VERSION,
                              SWIFT_SHARD_VERSION_LABELS);
    uint32_t hdr = swift_le_get32(b + 12);
    if (hdr < SWIFT_SHARD_HEADER_SIZE || hdr > (1u << 20) || hdr % 8)
        return swift_error_at(name, 0, "offset 12: bad header size %u", hdr);
    if (len < hdr)
        return swift_error_at(name, 0, "offset %zu: file ends inside the %u-byte header", len, hdr);
    /* version 1 never had flags (they were written 0 and not read) */
    uint32_t flags = version == SWIFT_SHARD_VERSION ? 0 : swift_le_get32(b + 52);
    if (version == SWIFT_SHARD_VERSION_LABELS &&
        (flags == 0 || (flags & ~(SWIFT_SHARD_FLAG_LABELS | SWIFT_SHARD_FLAG_META))))
        return swift_error_at(name, 0, "offset 52: unknown flags %08x for version 2", flags);
    v->labels = flags & SWIFT_SHARD_FLAG_LABELS ? 1 : 0;
    v->meta = flags & SWIFT_SHARD_FLAG_META ? 1 : 0;
    v->base = b;
    v->ns = swift_le_get64(b + 16);
    v->nd = swift_le_get64(b + 24);
    v->nt = swift_le_get64(b + 32);
    uint64_t payload = swift_le_get64(b + 40);
    if (compute_layout(hdr, v->ns, v->nd, v->nt, v->labels, v->meta, 0, &v->l) < 0)
        return swift_error_at(name,
                              0,
                              "offset 16: implausible counts (samples %" PRIu64
                              ", documents %" PRIu64 ", tokens %" PRIu64 ")",
                              v->ns,
                              v->nd,
                              v->nt);
    if (v->meta && check_meta_size(b, len, name, hdr, payload, v) < 0)
        return -1;
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
        uint32_t want = swift_le_get32(b + 48);
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
    if (swift_le_get64(st) != 0 || swift_le_get64(sd) != 0)
        return swift_error_at(
            name, 0, "offset %" PRIu64 ": first sample offset is not 0", v->l.sample_tok);
    if (swift_le_get64(st + 8 * v->ns) != v->nt || swift_le_get64(sd + 8 * v->ns) != v->nd)
        return swift_error_at(name,
                              0,
                              "offset %" PRIu64 ": last sample offset does not match the counts",
                              v->l.sample_tok + 8 * v->ns);
    for (uint64_t i = 0; i < v->ns; i++) {
        uint64_t t0 = swift_le_get64(st + 8 * i), t1 = swift_le_get64(st + 8 * (i + 1));
        uint64_t d0 = swift_le_get64(sd + 8 * i), d1 = swift_le_get64(sd + 8 * (i + 1));
        if (t1 < t0 || t1 - t0 > UINT32_MAX || d1 <= d0 || d1 > v->nd)
            return swift_error_at(name,
                                  0,
                                  "offset %" PRIu64 ": bad offsets for sample %" PRIu64,
                                  v->l.sample_tok + 8 * i,
                                  i);
        uint64_t sum = 0;
        for (uint64_t d = d0; d < d1; d++)
            sum += swift_le_get32(b + v->l.doc_len + 4 * d);
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
    return v->meta ? check_meta(b, name, v) : 0;
}

int swift_shard_check(const unsigned char *buf, size_t len, const char *name)
{
    struct shard_view v;
    return check_image(buf, len, name, 1, &v);
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
 * (and only kto files do), prompts files have metadata (and only they do) and one document a
 * sample. */
static int check_kind(const struct swift_shard_index *ix, const struct mapped *m, const char *path)
{
    const char *kind = swift_shard_index_kind(ix);
    int kto = !strcmp(kind, "kto"), prompts = !strcmp(kind, "prompts");
    int meta = prompts || ix->image_cache; /* images: per sample {"images": [...]} */
    if (m->v.labels != kto || m->v.meta != meta)
        return swift_error_at(path,
                              0,
                              "offset 8: %s the %s section, but index.json's kind is \"%s\"",
                              (m->v.labels != kto ? m->v.labels : m->v.meta) ? "has" : "lacks",
                              m->v.labels != kto ? "label" : "metadata",
                              kind);
    uint64_t docs = !strcmp(kind, "pairs") ? 2 : prompts ? 1 : 0;
    const unsigned char *sd = m->base + m->v.l.sample_doc;
    for (uint64_t i = 0; docs && i < m->v.ns; i++)
        if (swift_le_get64(sd + 8 * (i + 1)) - swift_le_get64(sd + 8 * i) != docs)
            return swift_error_at(path,
                                  0,
                                  "offset %" PRIu64 ": sample %" PRIu64 " %s",
                                  m->v.l.sample_doc + 8 * i,
                                  i,
                                  docs == 2 ? "is not a pair (kind \"pairs\" needs two documents)"
                                            : "is not one document (kind \"prompts\" needs one)");
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
    if (s->ix.image_cache && !(flags & SWIFT_SHARDS_IMAGES)) {
        swift_error("%s/index.json: the samples have images (index version 3), which this "
                    "program cannot feed to a model yet",
                    dir);
        swift_shard_index_release(&s->ix);
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
        if (rc == 0 && e->crc32 && swift_le_get32(m->base + 48) != e->crc32)
            rc = swift_error_at(path,
                                0,
                                "offset 48: CRC32 %08x differs from index.json's %08x",
                                swift_le_get32(m->base + 48),
                                e->crc32);
        if (rc == 0)
            rc = check_kind(&s->ix, m, path);
        if (rc == 0 && s->ix.vocab_size) {
            const unsigned char *ids = m->base + m->v.l.ids;
            for (uint64_t t = 0; t < m->v.nt; t++)
                if (swift_le_get32(ids + 4 * t) >= s->ix.vocab_size) {
                    rc = swift_error_at(path,
                                        0,
                                        "offset %" PRIu64 ": token id %u >= vocab size %" PRIu64,
                                        m->v.l.ids + 4 * t,
                                        swift_le_get32(ids + 4 * t),
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
    uint64_t t0 = swift_le_get64(b + m->v.l.sample_tok + 8 * k);
    uint64_t t1 = swift_le_get64(b + m->v.l.sample_tok + 8 * (k + 1));
    uint64_t d0 = swift_le_get64(b + m->v.l.sample_doc + 8 * k);
    uint64_t d1 = swift_le_get64(b + m->v.l.sample_doc + 8 * (k + 1));
    /* the layout is 8-aligned and mmap is page-aligned, and this is a little-endian host */
    out->ids = (const uint32_t *)(const void *)(b + m->v.l.ids) + t0;
    out->mask = b + m->v.l.mask + t0;
    out->len = (uint32_t)(t1 - t0);
    out->doc_len = (const uint32_t *)(const void *)(b + m->v.l.doc_len) + d0;
    out->n_docs = (uint32_t)(d1 - d0);
    out->label = m->v.labels ? b[m->v.l.label + k] : 0;
    out->meta = NULL;
    out->meta_len = 0;
    if (m->v.meta) {
        uint64_t a = swift_le_get64(b + m->v.l.meta_off + 8 * k);
        out->meta = (const char *)b + m->v.l.meta + a;
        out->meta_len = (uint32_t)(swift_le_get64(b + m->v.l.meta_off + 8 * (k + 1)) - a);
    }
    return 0;
}
