/* reflogps — --precompute-ref-logps (TRL's precompute_ref_log_probs): the reference model's
 * summed log-prob of every row (the chosen and the rejected response of each pair) of the
 * training and validation shards, computed once before the first step and stored next to the
 * shards as DIR/ref_logps-<key>.bin (layout: docs/formats.md), so that steps run no reference
 * pass and full fine-tuning loads no frozen copy. The key covers what the values depend on:
 * the reference's weights (sha256 of config.json and of model.safetensors.index.json, name,
 * size and mtime of each *.safetensors: hashing gigabytes at every start would cost more than
 * it guards; a rewritten weight file has a new mtime, a copy without -p only costs a
 * recompute), the shards (sha256 of index.json, which holds every shard's crc32, checked when
 * the shards are opened), the row length and the backend. A file whose key, size, values or
 * crc32 do not fit is never used: a warning names it and the offset, and the values are
 * computed again. Every rank computes the whole table itself (no collective); rank 0 writes it,
 * atomically, into the shard directory, or into the run directory when the shard directory is
 * not writable. */
#include "lib/train/internal.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/core/sha256.h"
#include "lib/core/trace.h"
#include "lib/core/banned.h"

#define MAGIC "SWRLOGP1"
#define MAX_HEADER (1u << 20)

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* sha256 of DIR/NAME into obj[NAME] when the file is there */
static int put_sha(json_t *obj, const char *dir, const char *name)
{
    char *p = swift_path_join(dir, name), hex[65];
    int rc = 0;
    if (access(p, R_OK) == 0) {
        rc = swift_sha256_file(p, hex);
        if (rc == 0)
            json_object_set_new(obj, name, json_string(hex));
    }
    free(p);
    return rc;
}

/* The reference's weights: config.json's sha256, each *.safetensors' name, size and mtime. */
static json_t *model_key(const char *dir)
{
    json_t *k = json_object();
    if (put_sha(k, dir, "config.json") < 0 || put_sha(k, dir, "model.safetensors.index.json") < 0)
        goto fail;
    DIR *d = opendir(dir);
    if (!d) {
        swift_error_errno("cannot open '%s'", dir);
        goto fail;
    }
    char **names = NULL;
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len > 12 && !strcmp(e->d_name + len - 12, ".safetensors")) {
            names = swift_xrealloc(names, (n + 1) * sizeof(*names));
            names[n++] = swift_xstrdup(e->d_name);
        }
    }
    closedir(d);
    qsort(names, n, sizeof(*names), by_name);
    json_t *w = json_array();
    for (size_t i = 0; i < n; i++) {
        char *p = swift_path_join(dir, names[i]);
        struct stat st;
        if (stat(p, &st) == 0) {
            char mt[48];
            snprintf(mt,
                     sizeof(mt),
                     "%lld.%09ld",
                     (long long)st.st_mtim.tv_sec,
                     (long)st.st_mtim.tv_nsec);
            json_array_append_new(w,
                                  json_pack("{s:s, s:I, s:s}",
                                            "file",
                                            names[i],
                                            "size",
                                            (json_int_t)st.st_size,
                                            "mtime",
                                            mt));
        }
        free(p);
        free(names[i]);
    }
    free(names);
    json_object_set_new(k, "weights", w);
    return k;
fail:
    json_decref(k);
    return NULL;
}

/* The key of the table of shard directory dir, as canonical JSON (malloc'ed), or NULL. The
 * batch size is not part of it on the CPU backend: a table made with one batch size and -j
 * gives bit-identical records with another. */
static char *make_key(struct run *r, const char *dir, uint64_t n)
{
    json_t *mk = model_key(r->o->model), *sk = json_object();
    if (!mk || put_sha(sk, dir, "index.json") < 0) {
        json_decref(mk);
        json_decref(sk);
        return NULL;
    }
    json_t *k = json_pack("{s:s, s:o, s:o, s:I, s:i, s:s}",
                          "objective",
                          r->obj.name,
                          "model",
                          mk,
                          "shards",
                          sk,
                          "samples",
                          (json_int_t)n,
                          "max_length",
                          r->T,
                          "backend",
                          r->be.ops->name);
    /* the CPU kernels give each row the same sums whatever the batch and -j (checked by
     * tests/cli/train-pref-refl.bats); GPU libraries may pick kernels by the batch's shape */
    if (strcmp(r->be.ops->name, "cpu"))
        json_object_set_new(
            k, "batch_rows", json_integer((json_int_t)r->o->batch_size * r->obj.rows_per_sample));
    char *s = json_dumps(k, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(k);
    return s;
}

static uint32_t get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* Read path into tab (rows values) when it is there and fits key. 1: read; 0: not there;
 * -1: there but not usable (warned: why, and where). */
static int read_table(const char *path, const char *key, double *tab, uint64_t rows)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return 0;
    size_t most = 12 + MAX_HEADER + rows * 8 + 4;
    if ((uint64_t)st.st_size > most) {
        swift_warn("%s: offset %zu: %lld bytes, more than a table of %llu rows",
                   path,
                   most,
                   (long long)st.st_size,
                   (unsigned long long)rows);
        return -1;
    }
    char *data = NULL;
    size_t len = 0;
    int ok = -1;
    if (swift_read_file(path, most, &data, &len) < 0)
        return -1;
    const unsigned char *b = (const unsigned char *)data;
    uint32_t H = len >= 12 ? get_u32(b + 8) : 0;
    size_t want = 12 + (size_t)H + rows * 8 + 4;
    if (len < 12 || memcmp(b, MAGIC, 8))
        swift_warn("%s: offset 0: not a reference log-prob file", path);
    else if (H > MAX_HEADER || len < 12 + (size_t)H)
        swift_warn("%s: offset 8: header length %u runs past the end", path, H);
    else if ((size_t)H != strlen(key) + 0 || memcmp(b + 12, key, H))
        swift_warn("%s: offset 12: made for another reference model, shards or length", path);
    else if (len != want)
        swift_warn("%s: offset %zu: %zu bytes, %zu expected for %llu rows",
                   path,
                   len < want ? len : want,
                   len,
                   want,
                   (unsigned long long)rows);
    else if (get_u32(b + len - 4) != (uint32_t)crc32(crc32(0L, Z_NULL, 0), b, (uInt)(len - 4)))
        swift_warn("%s: offset %zu: crc32 does not match the contents", path, len - 4);
    else {
        ok = 1;
        for (uint64_t i = 0; i < rows && ok == 1; i++) {
            uint64_t u = 0;
            for (int j = 0; j < 8; j++)
                u |= (uint64_t)b[12 + H + i * 8 + (size_t)j] << (8 * j);
            memcpy(&tab[i], &u, 8);
            if (!isfinite(tab[i]) || tab[i] > 0) {
                swift_warn("%s: offset %llu: row %llu's log-prob %g is not finite and <= 0",
                           path,
                           (unsigned long long)(12 + H + i * 8),
                           (unsigned long long)i,
                           tab[i]);
                ok = -1;
            }
        }
    }
    free(data);
    return ok;
}

static int write_table(const char *path, const char *key, const double *tab, uint64_t rows)
{
    size_t H = strlen(key), len = 12 + H + rows * 8 + 4;
    unsigned char *b = swift_xmalloc(len);
    memcpy(b, MAGIC, 8);
    put_u32(b + 8, (uint32_t)H);
    memcpy(b + 12, key, H);
    for (uint64_t i = 0; i < rows; i++) {
        uint64_t u;
        memcpy(&u, &tab[i], 8);
        for (int j = 0; j < 8; j++)
            b[12 + H + i * 8 + (size_t)j] = (unsigned char)(u >> (8 * j));
    }
    put_u32(b + len - 4, (uint32_t)crc32(crc32(0L, Z_NULL, 0), b, (uInt)(len - 4)));
    int rc = swift_atomic_write(path, b, len);
    free(b);
    return rc;
}

/* The reference over every sample of s, batch by batch as training runs them, into tab. */
static int compute(struct run *r, struct swift_shards *s, double *tab, struct swift_model *ref)
{
    struct swift_objective *obj = &r->obj;
    int B = r->o->batch_size, rows = obj->rows_per_sample;
    uint64_t n = swift_shards_count(s);
    struct train_ubatch u;
    train_ubatch_alloc(&u, B * rows, r->T, B);
    double *out = swift_xcalloc((size_t)B * (size_t)rows, sizeof(double));
    int rc = 0;
    for (uint64_t i = 0; i < n && rc == 0; i += (uint64_t)B) {
        int have = 0;
        for (int b = 0; b < B; b++) {
            struct swift_sample x;
            int ok = i + (uint64_t)b < n && swift_shards_get(s, i + (uint64_t)b, &x) == 0;
            have += ok;
            size_t row = (size_t)b * (size_t)rows * (size_t)r->T;
            obj->fill(obj, ok ? &x : NULL, r->T, u.tok + row, u.tgt + row, u.pos + row);
        }
        struct swift_batch bt = {B * rows, r->T, u.tok, u.tgt, u.pos};
        rc = obj->reference_rows(obj, ref, &bt, out);
        if (rc == 0)
            memcpy(tab + i * (uint64_t)rows, out, (size_t)have * (size_t)rows * sizeof(double));
    }
    free(out);
    train_ubatch_free(&u);
    return rc;
}

/* Store the table: DIR/name, or the run directory's when DIR is not writable (rank 0). */
static int store(struct run *r, const char *dir, const char *name, const char *key,
                 const double *tab, uint64_t rows)
{
    char *path = swift_path_join(dir, name);
    if (access(dir, W_OK) != 0) {
        char *alt = swift_path_join(r->o->output_dir, name);
        swift_info("%s is not writable (%s): reference log-probs stored in %s instead",
                   dir,
                   strerror(errno),
                   alt);
        free(path);
        path = alt;
    }
    int rc = write_table(path, key, tab, rows);
    if (rc == 0)
        swift_info("reference log-probs stored in %s", path);
    free(path);
    return rc;
}

/* The table of shard directory dir: read when a stored one fits, else computed (and stored). */
static double *table(struct run *r, struct swift_shards *s, const char *dir)
{
    int rank0 = r->dist.rank == 0;
    uint64_t n = swift_shards_count(s), rows = n * (uint64_t)r->obj.rows_per_sample;
    char *key = make_key(r, dir, n);
    if (!key)
        return NULL;
    char hex[65], name[64];
    swift_sha256_hex(key, strlen(key), hex);
    snprintf(name, sizeof(name), "ref_logps-%.16s.bin", hex);
    double *tab = swift_xcalloc(rows ? rows : 1, sizeof(double));
    const char *where[2] = {dir, r->o->output_dir};
    for (int w = 0; w < 2; w++) {
        char *p = swift_path_join(where[w], name);
        int got = read_table(p, key, tab, rows);
        if (got > 0 && rank0)
            swift_info("reference log-probs from %s", p);
        if (got < 0)
            swift_warn("%s: not used; computing the reference log-probs again", p);
        free(p);
        if (got > 0) {
            free(key);
            return tab;
        }
    }
    if (rank0)
        swift_info("computing the reference log-probs of %llu pairs of %s (--precompute-ref-logps)",
                   (unsigned long long)n,
                   dir);
    int64_t t0 = swift_trace_now();
    struct swift_model tmp, *ref = r->m;
    int rc = 0;
    if (r->resume && r->o->tuner == SWIFT_TUNER_FULL) { /* m holds the checkpoint's weights */
        memset(&tmp, 0, sizeof(tmp));
        rc = swift_model_load(&tmp, r->o->model, r->be.ops, 1);
        tmp.act_ckpt = 1;
        ref = &tmp;
    }
    if (rc == 0)
        rc = compute(r, s, tab, ref);
    if (ref == &tmp)
        swift_model_free(&tmp);
    swift_trace_span("compute",
                     "ref_logps",
                     t0,
                     swift_trace_now(),
                     (struct swift_targ[]){SWIFT_TARG_I("pairs", (long)n)},
                     1);
    if (rc == 0 && rank0)
        rc = store(r, dir, name, key, tab, rows);
    free(key);
    if (rc < 0) {
        free(tab);
        return NULL;
    }
    return tab;
}

int train_ref_logps(struct run *r)
{
    const struct swift_train_opts *o = r->o;
    if (!o->precompute_ref_logps)
        return 0;
    if (!r->obj.reference_rows) {
        if (r->dist.rank == 0)
            swift_warn(
                "--precompute-ref-logps: ignored; it is for --rlhf dpo (orpo, simpo, cpo and "
                "rm have no reference model; kto runs its reference each step, over the "
                "step's KL rows too)");
        return 0;
    }
    r->ref_perm.epoch = -1; /* the epoch order of the lookup: n entries, built on use */
    r->ref_perm.perm = swift_xcalloc((size_t)swift_shards_count(r->train) + 1, sizeof(uint32_t));
    r->ref_train = table(r, r->train, o->dataset);
    if (!r->ref_train)
        return -1;
    if (r->val) {
        char *vdir =
            o->val_dataset ? swift_xstrdup(o->val_dataset) : swift_path_join(o->dataset, "val");
        r->ref_val = table(r, r->val, vdir);
        free(vdir);
        if (!r->ref_val)
            return -1;
    }
    return 0;
}

/* Rows of samples idx[0..B) (UINT64_MAX: padding, 0) from tab to the objective. */
static int use(struct run *r, const struct swift_batch *b, const double *tab, const uint64_t *idx)
{
    int rows = r->obj.rows_per_sample, B = b->B / rows;
    double *ref = swift_xcalloc((size_t)b->B, sizeof(double));
    for (int i = 0; i < B; i++)
        for (int k = 0; k < rows && idx[i] != UINT64_MAX; k++)
            ref[i * rows + k] = tab[idx[i] * (uint64_t)rows + (uint64_t)k];
    int rc = r->obj.use_reference(&r->obj, r->m, b, ref);
    free(ref);
    return rc;
}

int train_ref_logps_step(struct run *r, const struct swift_batch *b, long step, int a)
{
    int B = r->o->batch_size;
    uint64_t *idx = swift_xcalloc((size_t)B, sizeof(uint64_t));
    for (int i = 0; i < B; i++)
        idx[i] = train_loader_sample(&r->loader, &r->ref_perm, step, a, i);
    int rc = use(r, b, r->ref_train, idx);
    free(idx);
    return rc;
}

int train_ref_logps_val(struct run *r, const struct swift_batch *b, uint64_t first)
{
    int B = r->o->batch_size;
    uint64_t n = swift_shards_count(r->val);
    uint64_t *idx = swift_xcalloc((size_t)B, sizeof(uint64_t));
    for (int i = 0; i < B; i++)
        idx[i] = first + (uint64_t)i < n ? first + (uint64_t)i : UINT64_MAX;
    int rc = use(r, b, r->ref_val, idx);
    free(idx);
    return rc;
}

void train_ref_logps_free(struct run *r)
{
    free(r->ref_train);
    free(r->ref_val);
    free(r->ref_perm.perm);
    r->ref_train = r->ref_val = NULL;
    r->ref_perm.perm = NULL;
}
