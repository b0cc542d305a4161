/* export/to_gguf — Hugging Face safetensors model → GGUF v3 for llama.cpp (the metadata and
 * tensor layout of llama.cpp's convert_hf_to_gguf.py for llama, qwen2 and qwen3). */
#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/export/export.h"
#include "lib/export/internal.h"
#include "lib/core/fileio.h"
#include "lib/formats/gguf.h"
#include "lib/formats/quant.h"
#include "lib/formats/safetensors.h"
#include "lib/core/trace.h"

#include <inttypes.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/core/banned.h"

struct dtype_info {
    const char *name;
    uint32_t type;      /* ggml type of 2-D weights */
    uint32_t file_type; /* general.file_type (LlamaFileType) */
};
static const struct dtype_info dtypes[] = {
    {"f32", SWIFT_GGML_F32, 0},
    {"f16", SWIFT_GGML_F16, 1},
    {"bf16", SWIFT_GGML_BF16, 32},
    {"q8_0", SWIFT_GGML_Q8_0, 7},
    {"q4_0", SWIFT_GGML_Q4_0, 2},
    {"q4_k", SWIFT_GGML_Q4_K, 14},
    {"q4_k_m", SWIFT_GGML_Q4_K, 15},
    {"q6_k", SWIFT_GGML_Q6_K, 18},
};

/* llama.cpp's use_more_bits (llama-quant.cpp): the first and last eighth of the layers and every
 * third one between get more bits in the _M mixes. */
static int use_more_bits(int64_t i, int64_t n)
{
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

/* The type llama.cpp's llama_tensor_get_type gives a matrix in LLAMA_FTYPE_MOSTLY_Q4_K_M:
 * the output (or the tied token embedding that serves as it) Q6_K; attn_v and ffn_down Q6_K in
 * the layers use_more_bits picks; everything else Q4_K. */
static uint32_t q4_k_m_type(const char *gguf_name, int64_t n_layer, int tied)
{
    if (!strcmp(gguf_name, "output.weight") || (tied && !strcmp(gguf_name, "token_embd.weight")))
        return SWIFT_GGML_Q6_K;
    long long layer;
    char kind[32];
    if (sscanf(gguf_name, "blk.%lld.%31[^.]", &layer, kind) == 2 &&
        (!strcmp(kind, "attn_v") || !strcmp(kind, "ffn_down")) && use_more_bits(layer, n_layer))
        return SWIFT_GGML_Q6_K;
    return SWIFT_GGML_Q4_K;
}

static const struct dtype_info *find_dtype(const char *name)
{
    for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
        if (!strcasecmp(dtypes[i].name, name))
            return &dtypes[i];
    return NULL;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct plan {
    const struct swift_st_tensor *src; /* NULL for a generated tensor (rope_freqs) */
    char name[SWIFT_GGUF_MAX_NAME];
    int permute_heads; /* llama q/k: heads to permute over, 0 for none */
    uint32_t type;
    uint32_t want; /* the type --dtype asks for this matrix (type differs after a fallback) */
    uint64_t ne[2];
    uint32_t n_dims;
};

/* Llama q/k rows: HF's rotate_half (halves) → llama.cpp's NORM rope (adjacent pairs).
 * w.reshape(n_head, 2, rows/n_head/2, cols).swapaxes(1, 2).reshape(rows, cols) */
static void permute_rows(const float *src, float *dst, int64_t rows, int64_t cols, int64_t n_head)
{
    int64_t half = rows / n_head / 2;
    for (int64_t h = 0; h < n_head; h++)
        for (int64_t i = 0; i < half; i++)
            for (int64_t j = 0; j < 2; j++) {
                int64_t to = h * 2 * half + i * 2 + j, from = h * 2 * half + j * half + i;
                memcpy(dst + to * cols, src + from * cols, (size_t)cols * sizeof(float));
            }
}

/* llama 3 rope scaling: convert_hf_to_gguf.py writes these factors as rope_freqs.weight */
static void llama3_rope_factors(const struct swift_hparams *hp, float *out, int64_t n)
{
    double low_wl = hp->rope_orig_ctx / hp->rope_low_freq;
    double high_wl = hp->rope_orig_ctx / hp->rope_high_freq;
    for (int64_t i = 0; i < n; i++) {
        float freq = (float)(1.0 / pow(hp->rope_theta, (double)(2 * i) / (double)hp->head_dim));
        double wl = 2 * M_PI / freq;
        if (wl < high_wl) {
            out[i] = 1.0f;
        } else if (wl > low_wl) {
            out[i] = (float)hp->rope_factor;
        } else {
            double smooth = (hp->rope_orig_ctx / wl - hp->rope_low_freq) /
                            (hp->rope_high_freq - hp->rope_low_freq);
            out[i] = (float)(1.0 / ((1 - smooth) / hp->rope_factor + smooth));
        }
    }
}

static int set_hparams(struct swift_gguf_writer *w, const struct swift_hparams *hp,
                       const char *name, const struct dtype_info *dt)
{
    char k[128];
    const char *a = hp->arch;
#define KEY(suffix) (snprintf(k, sizeof(k), "%s." suffix, a), k)
    if (swift_gguf_set_str(w, "general.architecture", a) < 0 ||
        swift_gguf_set_str(w, "general.type", "model") < 0 ||
        swift_gguf_set_str(w, "general.name", name) < 0 ||
        swift_gguf_set_u32(w, KEY("block_count"), (uint32_t)hp->layers) < 0 ||
        swift_gguf_set_u32(w, KEY("context_length"), (uint32_t)hp->ctx) < 0 ||
        swift_gguf_set_u32(w, KEY("embedding_length"), (uint32_t)hp->hidden) < 0 ||
        swift_gguf_set_u32(w, KEY("feed_forward_length"), (uint32_t)hp->ffn) < 0 ||
        swift_gguf_set_u32(w, KEY("attention.head_count"), (uint32_t)hp->heads) < 0 ||
        swift_gguf_set_u32(w, KEY("attention.head_count_kv"), (uint32_t)hp->kv_heads) < 0 ||
        swift_gguf_set_f32(w, KEY("rope.freq_base"), (float)hp->rope_theta) < 0 ||
        swift_gguf_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), (float)hp->rms_eps) < 0)
        return -1;
    if (hp->has_head_dim &&
        (swift_gguf_set_u32(w, KEY("attention.key_length"), (uint32_t)hp->head_dim) < 0 ||
         swift_gguf_set_u32(w, KEY("attention.value_length"), (uint32_t)hp->head_dim) < 0))
        return -1;
    if (!strcmp(hp->rope_type, "linear") || !strcmp(hp->rope_type, "yarn")) {
        if (swift_gguf_set_str(w, KEY("rope.scaling.type"), hp->rope_type) < 0 ||
            swift_gguf_set_f32(w, KEY("rope.scaling.factor"), (float)hp->rope_factor) < 0)
            return -1;
        if (!strcmp(hp->rope_type, "yarn") &&
            swift_gguf_set_u32(
                w, KEY("rope.scaling.original_context_length"), (uint32_t)hp->rope_orig_ctx) < 0)
            return -1;
    }
    if (swift_gguf_set_u32(w, "general.file_type", dt->file_type) < 0)
        return -1;
    if (dt->type != SWIFT_GGML_F32 && dt->type != SWIFT_GGML_F16 && dt->type != SWIFT_GGML_BF16 &&
        swift_gguf_set_u32(w, "general.quantization_version", 2) < 0)
        return -1;
    /* M-RoPE: the rotary frequencies' split over (t, h, w), padded to four as
     * convert_hf_to_gguf.py's Qwen2VLModel writes it (int32) */
    int32_t sec[4] = {hp->vc.mrope_section[0], hp->vc.mrope_section[1], hp->vc.mrope_section[2], 0};
    if (hp->vl && swift_gguf_set_arr_i32(w, KEY("rope.dimension_sections"), sec, 4) < 0)
        return -1;
    if (!strcmp(a, "llama") &&
        (swift_gguf_set_u32(w, KEY("vocab_size"), (uint32_t)hp->vocab_size) < 0 ||
         swift_gguf_set_u32(w, KEY("rope.dimension_count"), (uint32_t)hp->head_dim) < 0))
        return -1;
#undef KEY
    return 0;
}

/* Tensors llama.cpp's loader requires for the architecture (llama-model.cpp). */
static int check_required(const struct plan *p, size_t n, const struct swift_hparams *hp,
                          const char *dir)
{
    static const char *per_layer[] = {"attn_norm.weight",
                                      "attn_q.weight",
                                      "attn_k.weight",
                                      "attn_v.weight",
                                      "attn_output.weight",
                                      "ffn_norm.weight",
                                      "ffn_gate.weight",
                                      "ffn_up.weight",
                                      "ffn_down.weight"};
    static const char *qwen2[] = {"attn_q.bias", "attn_k.bias", "attn_v.bias"};
    static const char *qwen3[] = {"attn_q_norm.weight", "attn_k_norm.weight"};
    char name[96];
    const char *top[] = {"token_embd.weight", "output_norm.weight"};
    for (int i = 0; i < 2; i++) {
        int found = 0;
        for (size_t j = 0; j < n && !found; j++)
            found = !strcmp(p[j].name, top[i]);
        if (!found)
            return swift_error("%s: no tensor for %s (required by llama.cpp)", dir, top[i]);
    }
    for (int64_t l = 0; l < hp->layers; l++) {
        size_t nreq = sizeof(per_layer) / sizeof(per_layer[0]);
        for (int set = 0; set < 3; set++) {
            const char **list = set == 0 ? per_layer : set == 1 ? qwen2 : qwen3;
            size_t cnt = set == 0 ? nreq : set == 1 ? 3 : 2;
            if ((set == 1 && strcmp(hp->arch, "qwen2") && !hp->vl) ||
                (set == 2 && strcmp(hp->arch, "qwen3")))
                continue;
            for (size_t r = 0; r < cnt; r++) {
                snprintf(name, sizeof(name), "blk.%lld.%s", (long long)l, list[r]);
                int found = 0;
                for (size_t j = 0; j < n && !found; j++)
                    found = !strcmp(p[j].name, name);
                if (!found)
                    return swift_error(
                        "%s: no tensor for %s (required by llama.cpp for %s)", dir, name, hp->arch);
            }
        }
    }
    return 0;
}

struct timing {
    double read, convert, write;
    uint64_t in_bytes, out_bytes;
    /* scratch buffers reused across tensors (fresh pages for every tensor cost page faults) */
    float *x, *tmp;
    void *q;
    size_t xcap, qcap;
};

static int reserve(struct timing *tm, size_t nfloat, size_t qbytes)
{
    if (nfloat > tm->xcap) {
        free(tm->x);
        free(tm->tmp);
        tm->x = swift_xmalloc(nfloat * sizeof(float));
        tm->tmp = swift_xmalloc(nfloat * sizeof(float));
        tm->xcap = nfloat;
    }
    if (qbytes > tm->qcap) {
        free(tm->q);
        tm->q = swift_xmalloc(qbytes);
        tm->qcap = qbytes;
    }
    return 0;
}

static int write_tensor(struct swift_gguf_writer *w, const struct plan *p,
                        const struct swift_hparams *hp, struct timing *tm)
{
    uint64_t numel = p->ne[0] * p->ne[1];
    size_t nbytes = swift_ggml_row_size(p->type, p->ne[0]) * p->ne[1];
    if (reserve(tm, (size_t)numel + 1, nbytes + 1) < 0)
        return -1;
    float *x = tm->x, *tmp = tm->tmp;
    void *q = NULL;
    int rc = -1;
    double t0 = now_s();
    int64_t ts0 = swift_trace_now();
    uint64_t in_bytes = numel * 4;
    if (p->src) {
        in_bytes = p->src->end - p->src->begin;
        if (swift_st_tensor_to_f32(p->src, x) < 0)
            goto out;
    } else {
        llama3_rope_factors(hp, x, (int64_t)numel);
    }
    double t1 = now_s();
    int64_t ts1 = swift_trace_now();
    if (swift_trace_enabled()) {
        struct swift_targ args[] = {SWIFT_TARG_S("tensor", p->name),
                                    SWIFT_TARG_I("bytes", in_bytes)};
        swift_trace_span("export", "read", ts0, ts1, args, 2);
    }
    if (p->permute_heads) {
        permute_rows(x, tmp, (int64_t)p->ne[1], (int64_t)p->ne[0], p->permute_heads);
        float *s = x;
        x = tmp;
        tmp = s;
    }
    if (p->type != SWIFT_GGML_F32) {
        q = tm->q;
        if (swift_quantize(p->type, x, q, (int64_t)p->ne[1], (int64_t)p->ne[0]) < 0)
            goto out;
    }
    double t2 = now_s();
    int64_t ts2 = swift_trace_now();
    if (swift_trace_enabled()) {
        struct swift_targ args[] = {SWIFT_TARG_S("tensor", p->name),
                                    SWIFT_TARG_S("type", swift_ggml_type_name(p->type)),
                                    SWIFT_TARG_I("bytes", nbytes)};
        swift_trace_span("export",
                         p->type <= SWIFT_GGML_F16 || p->type == SWIFT_GGML_BF16 ? "convert"
                                                                                 : "quantize",
                         ts1,
                         ts2,
                         args,
                         3);
    }
    if (swift_gguf_writer_write_data(w, q ? q : (void *)x, nbytes) < 0)
        goto out;
    double t3 = now_s();
    if (swift_trace_enabled()) {
        struct swift_targ args[] = {SWIFT_TARG_S("tensor", p->name), SWIFT_TARG_I("bytes", nbytes)};
        swift_trace_span("export", "write", ts2, swift_trace_now(), args, 2);
    }
    tm->read += t1 - t0;
    tm->convert += t2 - t1;
    tm->write += t3 - t2;
    tm->in_bytes += in_bytes;
    tm->out_bytes += nbytes;
    rc = 0;
out:
    return rc;
}

static char *default_name(const char *dir)
{
    char *d = swift_xstrdup(dir);
    size_t n = strlen(d);
    while (n > 1 && d[n - 1] == '/')
        d[--n] = 0;
    char *b = swift_xstrdup(basename(d));
    free(d);
    return b;
}

/* One safetensors tensor into p: its GGUF name, shape and type (after the --dtype fallback),
 * and the heads to permute its rows over. Returns 0, 1 for a tensor to skip, 2 for a
 * vision-language model's vision tensor (not in this GGUF), or -1. */
static int plan_tensor(struct plan *p, const struct swift_st_tensor *t,
                       const struct swift_hparams *hp, const struct dtype_info *dt)
{
    char hf[512];
    if (hp->vl) { /* the language model's tensors in either key layout; the vision side is the
                   * mmproj's (llama.cpp keeps it in a file of its own) */
        swift_vl_canonical_name(t->name, hf, sizeof(hf));
        if (!strncmp(hf, "visual.", 7))
            return 2;
    } else {
        snprintf(hf, sizeof(hf), "%s", t->name);
    }
    int r = swift_gguf_tensor_name(hf, p->name, sizeof(p->name));
    if (r == 1)
        return 1;
    if (r < 0)
        return swift_error(
            "%s: tensor '%s' has no GGUF name for architecture %s", t->path, t->name, hp->arch);
    if (t->ndim < 1 || t->ndim > 2)
        return swift_error(
            "%s: tensor '%s' has %d dims (1 or 2 expected)", t->path, t->name, t->ndim);
    if (t->dtype != SWIFT_DTYPE_F32 && t->dtype != SWIFT_DTYPE_F16 && t->dtype != SWIFT_DTYPE_BF16)
        return swift_error("%s: tensor '%s' has dtype %s (F32, F16 or BF16 expected)",
                           t->path,
                           t->name,
                           swift_dtype_name(t->dtype));
    p->src = t;
    p->n_dims = (uint32_t)t->ndim;
    p->ne[0] = (uint64_t)t->shape[t->ndim - 1];
    p->ne[1] = t->ndim == 2 ? (uint64_t)t->shape[0] : 1;
    uint32_t want =
        dt->file_type == 15 ? q4_k_m_type(p->name, hp->layers, hp->tie_embeddings) : dt->type;
    p->want = want;
    p->type = t->ndim == 1 ? SWIFT_GGML_F32 : swift_quant_fallback(want, (int64_t)p->ne[0]);
    if (!strcmp(hp->arch, "llama")) {
        int64_t nh = 0;
        if (strstr(p->name, ".attn_q."))
            nh = hp->heads;
        else if (strstr(p->name, ".attn_k."))
            nh = hp->kv_heads;
        if (nh && (p->ne[1] % (uint64_t)(2 * nh)))
            return swift_error("%s: tensor '%s' has %" PRIu64 " rows, not a multiple of 2 x %lld "
                               "heads",
                               t->path,
                               t->name,
                               p->ne[1],
                               (long long)nh);
        p->permute_heads = (int)nh;
    }
    return 0;
}

/* The GGUF's tensors in file order: rope_freqs (llama 3 rope scaling), then every tensor of the
 * set that has a GGUF name. *out (caller frees) is set even on failure. */
static int build_plan(const struct swift_st_set *set, const struct swift_hparams *hp,
                      const struct dtype_info *dt, const char *model_dir, struct plan **out,
                      size_t *np_out)
{
    size_t total = 1, np = 0, nvision = 0;
    for (size_t f = 0; f < set->nfiles; f++)
        total += set->files[f].ntensors;
    struct plan *plan = *out = swift_xcalloc(total, sizeof(*plan));
    if (!strcmp(hp->rope_type, "llama3")) {
        struct plan *p = &plan[np++];
        snprintf(p->name, sizeof(p->name), "rope_freqs.weight");
        p->type = SWIFT_GGML_F32;
        p->n_dims = 1;
        p->ne[0] = (uint64_t)(hp->head_dim / 2);
        p->ne[1] = 1;
    }
    for (size_t f = 0; f < set->nfiles; f++)
        for (size_t i = 0; i < set->files[f].ntensors; i++) {
            int r = plan_tensor(&plan[np], &set->files[f].tensors[i], hp, dt);
            if (r < 0)
                return -1;
            if (r == 0)
                np++;
            nvision += r == 2;
        }
    *np_out = np;
    if (nvision)
        swift_info("%zu vision tensors (ViT and merger) left out: this GGUF holds the language "
                   "model (llama.cpp's %s), the vision side goes into an mmproj file",
                   nvision,
                   hp->arch);
    return check_required(plan, np, hp, model_dir);
}

/* Declare the planned tensors to the writer; say which matrices fell back to another type. */
static int add_plan(struct swift_gguf_writer *w, const struct plan *plan, size_t np)
{
    size_t nfall[SWIFT_GGML_NTYPES][SWIFT_GGML_NTYPES] = {{0}};
    for (size_t i = 0; i < np; i++) {
        if (plan[i].type != plan[i].want && plan[i].n_dims == 2 && plan[i].want < SWIFT_GGML_NTYPES)
            nfall[plan[i].want][plan[i].type]++;
        if (swift_gguf_add_tensor(w, plan[i].name, plan[i].n_dims, plan[i].ne, plan[i].type) < 0)
            return -1;
    }
    for (int a = 0; a < SWIFT_GGML_NTYPES; a++)
        for (int t = 0; t < SWIFT_GGML_NTYPES; t++)
            if (nfall[a][t])
                swift_info("%zu matrices use %s: their rows do not fit %s blocks (as llama.cpp "
                           "does)",
                           nfall[a][t],
                           swift_ggml_type_name((uint32_t)t),
                           swift_ggml_type_name((uint32_t)a));
    return 0;
}

/* Write the GGUF at path: header, then every planned tensor's data, then the atomic rename. */
static int write_plan(struct swift_gguf_writer *w, const char *path, const struct plan *plan,
                      size_t np, const struct swift_hparams *hp, struct timing *tm)
{
    if (swift_gguf_writer_begin(w, path) < 0)
        return -1;
    int rc = 0;
    for (size_t i = 0; i < np && rc == 0; i++)
        rc = write_tensor(w, &plan[i], hp, tm);
    if (rc < 0)
        swift_gguf_writer_abort(w);
    free(tm->x);
    free(tm->tmp);
    free(tm->q);
    if (rc < 0)
        return -1;
    double tc = now_s();
    if (swift_gguf_writer_commit(w) < 0)
        return -1;
    tm->write += now_s() - tc;
    return 0;
}

static json_t *summary(const struct swift_export_opts *o, const struct swift_hparams *hp,
                       const struct dtype_info *dt, size_t np, const struct timing *tm, double secs)
{
    return json_pack("{s:i,s:s,s:s,s:s,s:s,s:I,s:I,s:I,s:f,s:f,s:f,s:f}",
                     "version",
                     1,
                     "format",
                     "gguf",
                     "output",
                     o->output,
                     "arch",
                     hp->arch,
                     "dtype",
                     dt->name,
                     "tensors",
                     (json_int_t)np,
                     "bytes_in",
                     (json_int_t)tm->in_bytes,
                     "bytes_out",
                     (json_int_t)tm->out_bytes,
                     "seconds",
                     secs,
                     "read_s",
                     tm->read,
                     "convert_s",
                     tm->convert,
                     "write_s",
                     tm->write);
}

int swift_export_gguf(const struct swift_export_opts *o, const char *model_dir)
{
    const struct dtype_info *dt = find_dtype(o->dtype ? o->dtype : "f16");
    if (!dt)
        return swift_error("unknown --dtype '%s' for GGUF (f32, f16, bf16, q8_0, q4_0, q4_k, "
                           "q4_k_m, q6_k)",
                           o->dtype);
    struct stat st;
    if (!o->force && stat(o->output, &st) == 0)
        return swift_error("'%s' exists; use --force to overwrite it", o->output);
    struct swift_hparams hp;
    if (swift_hparams_load(&hp, model_dir) < 0)
        return -1;
    struct swift_st_set set = {0};
    struct swift_gguf_writer w;
    swift_gguf_writer_init(&w);
    struct plan *plan = NULL;
    size_t np = 0;
    struct timing tm = {0};
    char *name = NULL;
    int rc = -1;
    double t_start = now_s();
    if (swift_st_set_open(&set, model_dir) < 0)
        goto out;
    name = o->name ? swift_xstrdup(o->name) : default_name(model_dir);
    if (set_hparams(&w, &hp, name, dt) < 0 ||
        swift_export_tokenizer(&w, model_dir, &hp, o->tokenizer_pre) < 0)
        goto out;
    if (build_plan(&set, &hp, dt, model_dir, &plan, &np) < 0 || add_plan(&w, plan, np) < 0 ||
        write_plan(&w, o->output, plan, np, &hp, &tm) < 0)
        goto out;
    if (o->to_ollama && swift_export_modelfile(o->output, model_dir, o->force) < 0) {
        unlink(o->output);
        goto out;
    }
    swift_export_summary(summary(o, &hp, dt, np, &tm, now_s() - t_start));
    rc = 0;
out:
    swift_gguf_writer_release(&w);
    swift_st_set_close(&set);
    swift_hparams_release(&hp);
    free(plan);
    free(name);
    return rc;
}
