/* export/dump — a GGUF header as text, with sha256 digests of long arrays and tensor bytes so a
 * dump can be compared with tests/ref/gguf_dump.py (PyPI gguf's reader) exactly. */
#include "lib/core/error.h"
#include "lib/export/export.h"
#include "lib/formats/gguf.h"
#include "lib/core/sha256.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "lib/core/banned.h"

static void print_array(FILE *fp, const struct swift_gguf_value *v, uint64_t max_items)
{
    uint64_t n = v->v.arr.n;
    if (!max_items || n <= max_items) {
        swift_gguf_value_print(fp, v, 0);
        return;
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    if (!mem)
        return;
    swift_gguf_value_print(mem, v, 0);
    fclose(mem);
    char hex[65];
    swift_sha256_hex(buf, len, hex);
    free(buf);
    fprintf(fp,
            "{\"type\":\"%s\",\"n\":%" PRIu64 ",\"head\":[",
            swift_gguf_vtype_name(v->v.arr.elem_type),
            n);
    for (uint64_t i = 0; i < max_items; i++) {
        if (i)
            fputc(',', fp);
        swift_gguf_value_print(fp, &v->v.arr.items[i], 0);
    }
    fprintf(fp, "],\"sha256\":\"%s\"}", hex);
}

int swift_export_dump(const char *path, FILE *fp, uint64_t max_items, int tensor_hashes)
{
    struct swift_gguf *g;
    if (swift_gguf_open(path, &g) < 0)
        return -1;
    fprintf(fp,
            "version\t%u\nalignment\t%u\nkv_count\t%" PRIu64 "\ntensor_count\t%" PRIu64 "\n",
            g->version,
            g->alignment,
            g->n_kv,
            g->n_tensors);
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const struct swift_gguf_value *v = &g->kv[i].value;
        fprintf(fp, "kv\t%s\t%s", g->kv[i].key, swift_gguf_vtype_name(v->type));
        if (v->type == SWIFT_GGUF_ARRAY) {
            fprintf(fp, "[%s]\t", swift_gguf_vtype_name(v->v.arr.elem_type));
            print_array(fp, v, max_items);
        } else {
            fputc('\t', fp);
            swift_gguf_value_print(fp, v, 0);
        }
        fputc('\n', fp);
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const struct swift_gguf_tensor *t = &g->tensors[i];
        fprintf(fp, "tensor\t%s\t%s\t[", t->name, swift_ggml_type_name(t->type));
        for (uint32_t d = 0; d < t->n_dims; d++)
            fprintf(fp, "%s%" PRIu64, d ? "," : "", t->ne[d]);
        fprintf(fp, "]\t%" PRIu64 "\t%" PRIu64, t->offset, t->nbytes);
        if (tensor_hashes) {
            char hex[65];
            swift_sha256_hex(t->data, t->nbytes, hex);
            fprintf(fp, "\t%.16s", hex);
        }
        fputc('\n', fp);
    }
    swift_gguf_free(g);
    return 0;
}
