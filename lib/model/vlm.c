/* vlm — Qwen2-VL / Qwen2.5-VL: config, parameters, load, M-RoPE positions and the forward and
 * backward around the language model (see vlm.h); the vision tower is vlm_vision.c. */
#include "lib/model/vlm.h"
#include "lib/core/alloc.h"
#include "lib/core/mem.h"
#include "lib/model/internal.h"
#include "lib/model/vlm_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/formats/safetensors.h"
#include "lib/core/banned.h"

static int vint(json_t *o, const char *key, int def, int *out, const char *path)
{
    json_t *j = json_object_get(o, key);
    if (!j || json_is_null(j)) {
        if (def < 0)
            return swift_error_at(path, 0, "vision_config: missing key '%s'", key);
        *out = def;
        return 0;
    }
    if (!json_is_integer(j) || json_integer_value(j) <= 0 || json_integer_value(j) > (1 << 24))
        return swift_error_at(path, 0, "key '%s' must be a positive integer", key);
    *out = (int)json_integer_value(j);
    return 0;
}

/* mrope_section of rope_parameters or rope_scaling (the text config's, then the top's) */
static int parse_mrope(struct swift_vlm_config *vc, json_t *text, json_t *root, int half,
                       const char *path)
{
    json_t *objs[4] = {json_object_get(text, "rope_parameters"),
                       json_object_get(text, "rope_scaling"),
                       json_object_get(root, "rope_parameters"),
                       json_object_get(root, "rope_scaling")};
    json_t *sec = NULL;
    for (int i = 0; i < 4 && !sec; i++)
        if (json_is_object(objs[i]))
            sec = json_object_get(objs[i], "mrope_section");
    if (!json_is_array(sec) || json_array_size(sec) != 3)
        return swift_error_at(path, 0, "missing mrope_section (three integers) in rope_parameters");
    int sum = 0;
    for (int i = 0; i < 3; i++) {
        json_t *e = json_array_get(sec, (size_t)i);
        if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) > 4096)
            return swift_error_at(path, 0, "mrope_section must hold non-negative integers");
        vc->mrope_section[i] = (int)json_integer_value(e);
        sum += vc->mrope_section[i];
    }
    if (sum != half)
        return swift_error_at(path, 0, "mrope_section sums to %d, not head_dim/2 = %d", sum, half);
    return 0;
}

static int parse_vision(struct swift_vlm_config *vc, json_t *vis, const char *path)
{
    if (!json_is_object(vis))
        return swift_error_at(path, 0, "missing object 'vision_config'");
    if (vint(vis, "depth", -1, &vc->depth, path) < 0 ||
        vint(vis, "num_heads", -1, &vc->num_heads, path) < 0 ||
        vint(vis, "patch_size", 14, &vc->patch_size, path) < 0 ||
        vint(vis, "temporal_patch_size", 2, &vc->temporal_patch_size, path) < 0 ||
        vint(vis, "in_channels", 3, &vc->in_channels, path) < 0 ||
        vint(vis, "spatial_merge_size", 2, &vc->merge_size, path) < 0)
        return -1;
    const char *act = json_string_value(json_object_get(vis, "hidden_act"));
    if (vc->v25) {
        if (vint(vis, "hidden_size", -1, &vc->embed_dim, path) < 0 ||
            vint(vis, "intermediate_size", -1, &vc->mlp_dim, path) < 0 ||
            vint(vis, "out_hidden_size", -1, &vc->out_dim, path) < 0 ||
            vint(vis, "window_size", 112, &vc->window_size, path) < 0)
            return -1;
        if (act && strcmp(act, "silu"))
            return swift_error_at(
                path, 0, "vision_config: unsupported hidden_act '%s' (silu)", act);
        json_t *fa = json_object_get(vis, "fullatt_block_indexes");
        if (fa && !json_is_array(fa))
            return swift_error_at(path, 0, "fullatt_block_indexes must be a list");
        if (json_array_size(fa) > SWIFT_VLM_MAX_FULLATT)
            return swift_error_at(
                path, 0, "more than %d fullatt_block_indexes", SWIFT_VLM_MAX_FULLATT);
        for (size_t i = 0; i < json_array_size(fa); i++) {
            json_t *e = json_array_get(fa, i);
            if (!json_is_integer(e))
                return swift_error_at(path, 0, "fullatt_block_indexes must hold integers");
            vc->fullatt[vc->nfullatt++] = (int)json_integer_value(e);
        }
    } else {
        if (vint(vis, "embed_dim", -1, &vc->embed_dim, path) < 0 ||
            vint(vis, "hidden_size", -1, &vc->out_dim, path) < 0)
            return -1;
        json_t *r = json_object_get(vis, "mlp_ratio");
        double ratio = json_is_number(r) ? json_number_value(r) : 4.0;
        vc->mlp_dim = (int)(vc->embed_dim * ratio);
        if (!act || !strcmp(act, "quick_gelu"))
            vc->gelu = SWIFT_GELU_QUICK;
        else if (!strcmp(act, "gelu"))
            vc->gelu = SWIFT_GELU_ERF;
        else
            return swift_error_at(
                path, 0, "vision_config: unsupported hidden_act '%s' (quick_gelu, gelu)", act);
    }
    if (vc->embed_dim % vc->num_heads || (vc->embed_dim / vc->num_heads) % 4 || vc->mlp_dim <= 0)
        return swift_error_at(path,
                              0,
                              "vision_config: the head size (embed %d / %d heads) must be a "
                              "multiple of 4",
                              vc->embed_dim,
                              vc->num_heads);
    vc->head_dim = vc->embed_dim / vc->num_heads;
    vc->patch_dim = vc->in_channels * vc->temporal_patch_size * vc->patch_size * vc->patch_size;
    return 0;
}

int swift_vlm_config_parse(struct swift_vlm_config *vc, struct swift_model_config *tc, json_t *root,
                           const char *path)
{
    memset(vc, 0, sizeof(*vc));
    const char *mt = json_string_value(json_object_get(root, "model_type"));
    if (!mt || (strcmp(mt, "qwen2_vl") && strcmp(mt, "qwen2_5_vl")))
        return swift_error_at(
            path, 0, "model_type '%s' is not a vision model (qwen2_vl, qwen2_5_vl)", mt ? mt : "");
    snprintf(vc->model_type, sizeof(vc->model_type), "%s", mt);
    vc->v25 = !strcmp(mt, "qwen2_5_vl");
    json_t *text = json_object_get(root, "text_config");
    if (!json_is_object(text))
        text = root; /* the older flat layout */
    json_t *t = json_deep_copy(text);
    json_object_set_new(t, "model_type", json_string("qwen2"));
    static const char *const inherit[] = {"tie_word_embeddings", "dtype", "torch_dtype"};
    for (int i = 0; i < 3; i++)
        if (!json_object_get(t, inherit[i]) && json_object_get(root, inherit[i]))
            json_object_set(t, inherit[i], json_object_get(root, inherit[i]));
    json_t *rs = json_object_get(t, "rope_scaling"); /* {type: mrope}: default frequencies */
    if (json_is_object(rs))
        json_object_set_new(rs, "type", json_string("default"));
    if (json_is_object(rs))
        json_object_del(rs, "rope_type");
    json_t *rp = json_object_get(t, "rope_parameters");
    if (json_is_object(rp))
        json_object_set_new(rp, "rope_type", json_string("default"));
    int rc = swift_model_config_parse(tc, t, path);
    json_decref(t);
    if (rc < 0)
        return -1;
    if (parse_mrope(vc, text, root, tc->head_dim / 2, path) < 0 ||
        parse_vision(vc, json_object_get(root, "vision_config"), path) < 0)
        return -1;
    json_t *sources[2] = {root, text};
    vc->image_token_id = 151655;
    vc->video_token_id = 151656;
    vc->vision_start_token_id = 151652;
    for (int s = 1; s >= 0; s--) {
        json_t *j = json_object_get(sources[s], "image_token_id");
        if (json_is_integer(j))
            vc->image_token_id = (int)json_integer_value(j);
        j = json_object_get(sources[s], "video_token_id");
        if (json_is_integer(j))
            vc->video_token_id = (int)json_integer_value(j);
        j = json_object_get(sources[s], "vision_start_token_id");
        if (json_is_integer(j))
            vc->vision_start_token_id = (int)json_integer_value(j);
    }
    if (vc->out_dim != tc->hidden_size)
        return swift_error_at(path,
                              0,
                              "the merger's output (%d) is not the language model's width (%d)",
                              vc->out_dim,
                              tc->hidden_size);
    return 0;
}

/* ---- vision parameters ---- */

struct vspec {
    char name[160];
    size_t n;
    int64_t shape[2];
    int ndim;
    float **w, **g;
    int group, decay;
};

static void spec(struct vspec *s, int *n, const char *name, int64_t s0, int64_t s1, float **w,
                 float **g, int group)
{
    struct vspec *e = &s[(*n)++];
    snprintf(e->name, sizeof(e->name), "visual.%s", name);
    e->shape[0] = s0;
    e->shape[1] = s1;
    e->ndim = s1 ? 2 : 1;
    e->n = (size_t)s0 * (size_t)(s1 ? s1 : 1);
    e->w = w;
    e->g = g;
    e->group = group;
    e->decay = e->ndim == 2;
}

static void lin_spec(struct vspec *s, int *n, const char *name, struct swift_vlin *L, int out,
                     int in, int group)
{
    char nm[128];
    L->in = in;
    L->out = out;
    snprintf(nm, sizeof(nm), "%s.weight", name);
    spec(s, n, nm, out, in, &L->w, &L->gw, group);
    snprintf(nm, sizeof(nm), "%s.bias", name);
    spec(s, n, nm, out, 0, &L->b, &L->gb, group);
}

/* every vision parameter in the checkpoint's order of modules */
static int vision_specs(struct swift_vlm *v, struct vspec **out)
{
    const struct swift_vlm_config *c = &v->vc;
    int E = c->embed_dim, I = c->mlp_dim, n = 0, M = E * c->merge_size * c->merge_size;
    struct vspec *s = swift_xcalloc((size_t)(8 + 24 * c->depth), sizeof(*s));
    spec(s, &n, "patch_embed.proj.weight", E, c->patch_dim, &v->patch, &v->gpatch, SWIFT_VLM_VIT);
    v->blocks = swift_xcalloc((size_t)c->depth, sizeof(*v->blocks));
    for (int l = 0; l < c->depth; l++) {
        struct swift_vit_block *bl = &v->blocks[l];
        char nm[128];
#define P(fmt, s0, s1, w, g)                                                                       \
    do {                                                                                           \
        snprintf(nm, sizeof(nm), "blocks.%d." fmt, l);                                             \
        spec(s, &n, nm, s0, s1, w, g, SWIFT_VLM_VIT);                                              \
    } while (0)
#define L(fmt, lin, o, i)                                                                          \
    do {                                                                                           \
        snprintf(nm, sizeof(nm), "blocks.%d." fmt, l);                                             \
        lin_spec(s, &n, nm, lin, o, i, SWIFT_VLM_VIT);                                             \
    } while (0)
        P("norm1.weight", E, 0, &bl->n1w, &bl->gn1w);
        if (!c->v25)
            P("norm1.bias", E, 0, &bl->n1b, &bl->gn1b);
        P("norm2.weight", E, 0, &bl->n2w, &bl->gn2w);
        if (!c->v25)
            P("norm2.bias", E, 0, &bl->n2b, &bl->gn2b);
        L("attn.qkv", &bl->q, 3 * E, E); /* split into q, k, v below */
        L("attn.proj", &bl->proj, E, E);
        if (c->v25) {
            L("mlp.gate_proj", &bl->gate, I, E);
            L("mlp.up_proj", &bl->up, I, E);
            L("mlp.down_proj", &bl->down, E, I);
        } else {
            L("mlp.fc1", &bl->fc1, I, E);
            L("mlp.fc2", &bl->fc2, E, I);
        }
#undef P
#undef L
    }
    spec(s, &n, "merger.ln_q.weight", E, 0, &v->mln_w, &v->gmln_w, SWIFT_VLM_ALIGNER);
    if (!c->v25)
        spec(s, &n, "merger.ln_q.bias", E, 0, &v->mln_b, &v->gmln_b, SWIFT_VLM_ALIGNER);
    lin_spec(s, &n, "merger.mlp.0", &v->mfc1, M, M, SWIFT_VLM_ALIGNER);
    lin_spec(s, &n, "merger.mlp.2", &v->mfc2, c->out_dim, M, SWIFT_VLM_ALIGNER);
    *out = s;
    return n;
}

/* the fused qkv (3E, E) as three row slices */
static void split_qkv(struct swift_vit_block *bl, int E)
{
    struct swift_vlin qkv = bl->q;
    size_t EE = (size_t)E * E;
    struct swift_vlin *parts[3] = {&bl->q, &bl->k, &bl->v};
    for (int i = 0; i < 3; i++) {
        parts[i]->in = E;
        parts[i]->out = E;
        parts[i]->w = qkv.w + i * EE;
        parts[i]->b = qkv.b + (size_t)i * E;
        parts[i]->gw = qkv.gw ? qkv.gw + i * EE : NULL;
        parts[i]->gb = qkv.gb ? qkv.gb + (size_t)i * E : NULL;
    }
}

static int vision_alloc(struct swift_vlm *v)
{
    struct vspec *s = NULL;
    int n = vision_specs(v, &s);
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += s[i].n;
    int grads =
        (v->frozen & (SWIFT_VLM_VIT | SWIFT_VLM_ALIGNER)) != (SWIFT_VLM_VIT | SWIFT_VLM_ALIGNER);
    v->nvparams = total;
    v->vparams = swift_mem_alloc(v->ops->alloc, SWIFT_MEM_PARAMS, total * sizeof(float));
    v->vgrads =
        grads ? swift_mem_alloc(v->ops->alloc, SWIFT_MEM_GRADS, total * sizeof(float)) : NULL;
    if (!v->vparams || (grads && !v->vgrads)) {
        free(s);
        return swift_error("out of memory: %zu vision parameters", total);
    }
    v->vp = swift_xcalloc((size_t)n, sizeof(*v->vp));
    v->nvp = n;
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        struct swift_param *p = &v->vp[i];
        p->name = swift_xstrdup(s[i].name);
        p->ndim = s[i].ndim;
        p->shape[0] = s[i].shape[0];
        p->shape[1] = s[i].shape[1];
        p->numel = s[i].n;
        p->decay = s[i].decay;
        p->w = v->vparams + off;
        p->g = v->vgrads && !(v->frozen & s[i].group) ? v->vgrads + off : NULL;
        *s[i].w = p->w;
        *s[i].g = p->g;
        off += s[i].n;
    }
    free(s);
    for (int l = 0; l < v->vc.depth; l++)
        split_qkv(&v->blocks[l], v->vc.embed_dim);
    return 0;
}

/* ---- load ---- */

/* the tensor of parameter `name` under either layout's key */
static const struct swift_st_tensor *find_any(const struct swift_st_set *set, const char *name,
                                              char *tried, size_t cap)
{
    char alt[256];
    const struct swift_st_tensor *t = swift_st_set_find(set, name);
    if (t)
        return t;
    if (!strncmp(name, "visual.", 7))
        snprintf(alt, sizeof(alt), "model.%s", name);
    else if (!strncmp(name, "model.", 6))
        snprintf(alt, sizeof(alt), "model.language_model.%s", name + 6);
    else
        snprintf(alt, sizeof(alt), "model.%s", name);
    snprintf(tried, cap, "'%s' (or '%s')", name, alt);
    return swift_st_set_find(set, alt);
}

static int load_params(const struct swift_ops *ops, struct swift_param *ps, int np,
                       const struct swift_st_set *set, const char *dir)
{
    size_t maxn = 1;
    for (int i = 0; i < np; i++)
        maxn = ps[i].numel > maxn ? ps[i].numel : maxn;
    float *host = swift_xmalloc(maxn * sizeof(float));
    int rc = 0;
    for (int i = 0; i < np && rc == 0; i++) {
        struct swift_param *p = &ps[i];
        char tried[600];
        const struct swift_st_tensor *t = find_any(set, p->name, tried, sizeof(tried));
        if (!t) {
            rc = swift_error("%s: missing tensor %s", dir, tried);
            break;
        }
        if ((size_t)t->numel != p->numel) /* the patch embedding is 5-D on disk */
            rc = swift_error("%s: tensor '%s' has %zu elements, expected %zu",
                             dir,
                             p->name,
                             (size_t)t->numel,
                             p->numel);
        else if (swift_st_tensor_to_f32(t, host) < 0)
            rc = -1;
        else
            ops->upload(p->w, host, p->numel * sizeof(float));
    }
    free(host);
    return rc;
}

static void freq_tables(struct swift_vlm *v)
{
    int D = v->vc.head_dim, q = D / 4, h2 = v->llm.cfg.head_dim / 2;
    v->vinv = swift_xcalloc((size_t)D, sizeof(float)); /* (2, D/2) */
    for (int i = 0; i < q; i++) {
        float f = (float)(1.0 / pow(10000.0, (double)(2 * i) / (D / 2)));
        v->vinv[i] = f;             /* row: frequencies 0 .. D/4 */
        v->vinv[D / 2 + q + i] = f; /* column: frequencies D/4 .. D/2 */
    }
    v->mfreq = swift_xcalloc((size_t)3 * h2, sizeof(float));
    for (int j = 0, s = 0, e = v->vc.mrope_section[0]; j < h2; j++) {
        while (j >= e && s < 2)
            e += v->vc.mrope_section[++s];
        v->mfreq[s * h2 + j] = v->llm.inv_freq[j];
    }
    v->llm.mrope_freq = v->mfreq;
}

int swift_vlm_load(struct swift_vlm *v, const char *dir, const struct swift_ops *ops, int frozen)
{
    memset(v, 0, sizeof(*v));
    v->ops = ops;
    v->frozen = frozen;
    if (!ops->layernorm_fwd || !ops->attention_seg_fwd || !ops->gelu_fwd)
        return swift_error("the %s backend has no vision ops", ops->name);
    char *cp = swift_path_join(dir, "config.json");
    json_error_t jerr;
    json_t *root = json_load_file(cp, JSON_REJECT_DUPLICATES, &jerr);
    int rc = root ? swift_vlm_config_parse(&v->vc, &v->llm.cfg, root, cp)
                  : swift_error_at(cp, jerr.line, "%s", jerr.text);
    json_decref(root);
    free(cp);
    if (rc < 0)
        return -1;
    struct swift_model_config tc = v->llm.cfg;
    memset(&v->llm, 0, sizeof(v->llm));
    v->llm.cfg = tc;
    v->llm.ops = ops;
    v->llm.lora_vl_names = 1;
    if (swift_model_alloc(&v->llm, !(frozen & SWIFT_VLM_LLM)) < 0 || vision_alloc(v) < 0) {
        swift_vlm_free(v);
        return -1;
    }
    struct swift_st_set set;
    if (swift_st_set_open(&set, dir) < 0) {
        swift_vlm_free(v);
        return -1;
    }
    rc = load_params(ops, v->vp, v->nvp, &set, dir);
    if (rc == 0)
        rc = load_params(ops, v->llm.p, v->llm.np, &set, dir);
    swift_st_set_close(&set);
    if (rc < 0) {
        swift_vlm_free(v);
        return -1;
    }
    freq_tables(v);
    return 0;
}

void swift_vlm_free(struct swift_vlm *v)
{
    if (!v || !v->ops)
        return;
    swift_vlm_vision_free(v);
    swift_model_free(&v->llm);
    if (v->vparams)
        swift_mem_free(v->ops->free, v->vparams);
    if (v->vgrads)
        swift_mem_free(v->ops->free, v->vgrads);
    for (int i = 0; i < v->nvp; i++)
        free(v->vp[i].name);
    free(v->vp);
    free(v->blocks);
    free(v->vinv);
    free(v->mfreq);
    memset(v, 0, sizeof(*v));
}

void swift_vlm_zero_grad(struct swift_vlm *v)
{
    swift_model_zero_grad(&v->llm);
    if (v->vgrads)
        v->ops->zero(v->vgrads, v->nvparams);
}

struct swift_param *swift_vlm_param(struct swift_vlm *v, const char *name)
{
    char nm[256];
    if (!strncmp(name, "model.visual.", 13))
        snprintf(nm, sizeof(nm), "%s", name + 6);
    else if (!strncmp(name, "model.language_model.", 21))
        snprintf(nm, sizeof(nm), "model.%s", name + 21);
    else
        snprintf(nm, sizeof(nm), "%s", name);
    for (int i = 0; i < v->nvp; i++)
        if (!strcmp(v->vp[i].name, nm))
            return &v->vp[i];
    return swift_model_param(&v->llm, nm);
}

int swift_vlm_param_group(const struct swift_vlm *v, const struct swift_param *p)
{
    (void)v; /* by name: copies of v's parameters (a trainer's lists, ZeRO-1 ranges) too */
    if (strncmp(p->name, "visual.", 7))
        return SWIFT_VLM_LLM;
    return strncmp(p->name, "visual.merger.", 14) ? SWIFT_VLM_VIT : SWIFT_VLM_ALIGNER;
}

/* ---- M-RoPE positions ---- */

int swift_vlm_rope_index(const struct swift_vlm_config *vc, const int32_t *tokens, int B, int T,
                         const int32_t *grid_thw, int nimages, int32_t *pos3)
{
    return swift_vlm_rope_index_docs(vc, tokens, NULL, B, T, grid_thw, nimages, pos3);
}

int swift_vlm_rope_index_docs(const struct swift_vlm_config *vc, const int32_t *tokens,
                              const int32_t *pos, int B, int T, const int32_t *grid_thw,
                              int nimages, int32_t *pos3)
{
    size_t N = (size_t)B * T;
    int img = 0, ms = vc->merge_size;
    for (int r = 0; r < B; r++) {
        int cur = 0;
        const int32_t *tk = tokens + (size_t)r * T;
        for (int t = 0; t < T;) {
            size_t n = (size_t)r * T + t;
            if (pos && pos[n] == 0) /* a document starts: positions as if it were alone */
                cur = 0;
            if (tk[t] != vc->image_token_id) {
                pos3[n] = pos3[N + n] = pos3[2 * N + n] = cur++;
                t++;
                continue;
            }
            if (img >= nimages)
                return swift_error("row %d, token %d: more image pads than the %d images' "
                                   "tokens",
                                   r,
                                   t,
                                   nimages);
            const int32_t *g = grid_thw + 3 * img++;
            int gt = g[0], gh = g[1] / ms, gw = g[2] / ms, cnt = gt * gh * gw;
            for (int i = 0; i < cnt; i++, t++) {
                if (t >= T || tk[t] != vc->image_token_id)
                    return swift_error(
                        "row %d: image %d needs %d pads, the run has fewer", r, img - 1, cnt);
                n = (size_t)r * T + t;
                if (pos && i && pos[n] == 0)
                    return swift_error("row %d, token %d: image %d's pads cross the start of a "
                                       "document",
                                       r,
                                       t,
                                       img - 1);
                pos3[n] = cur + i / (gh * gw);
                pos3[N + n] = cur + (i / gw) % gh;
                pos3[2 * N + n] = cur + i % gw;
            }
            cur += gh > gw ? gh : gw;
        }
    }
    if (img != nimages)
        return swift_error("%d images given, the tokens have pads for %d", nimages, img);
    return 0;
}
