/* lora — see lora.h. */
#include "lib/model/lora.h"
#include "lib/core/mem.h"
#include "lib/core/alloc.h"
#include "lib/model/adapter.h"
#include "lib/model/internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/error.h"
#include "lib/formats/safetensors.h"
#include "lib/core/banned.h"

static const char *const short_names[SWIFT_LIN_COUNT] = {
    "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};

/* Is linear `full` ("model.layers.3.self_attn.q_proj") selected by the target list? */
static int targeted(const char *targets, const char *full)
{
    if (!strcmp(targets, "all-linear"))
        return 1;
    size_t fl = strlen(full);
    const char *s = targets;
    while (*s) {
        const char *e = strchr(s, ',');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        while (n && *s == ' ') {
            s++;
            n--;
        }
        if (n && n <= fl && !strncmp(full + fl - n, s, n) && (n == fl || full[fl - n - 1] == '.'))
            return 1;
        if (!e)
            break;
        s = e + 1;
    }
    return 0;
}

/* PEFT's modules_to_save for a reward model's score head: a trainable copy at offset off of
 * the adapters' buffer, saved as "base_model.model.score.weight"; the model reads the copy. */
static void score_copy(struct swift_model *m, size_t off)
{
    struct swift_param *p = &m->lp[m->nlp++];
    p->name = swift_xstrdup("base_model.model.score.weight");
    p->ndim = 2;
    p->shape[0] = 1;
    p->shape[1] = m->cfg.hidden_size;
    p->numel = (size_t)m->cfg.hidden_size;
    p->w = m->lora_params + off;
    p->g = m->lora_grads + off;
    p->decay = 1;
    m->ops->copy(p->w, m->score, p->numel);
    m->score = p->w;
    m->gscore = p->g;
}

/* The module name an adapter tensor is saved under: the linear's, or for a VL model's language
 * model transformers 5's path (model.layers.N.* → model.language_model.layers.N.*). */
static void module_name(const struct swift_model *m, const char *name, char *out, size_t n)
{
    if (m->lora_vl_names && !strncmp(name, "model.", 6))
        snprintf(out, n, "model.language_model.%s", name + 6);
    else
        snprintf(out, n, "%s", name);
}

/* DoRA's magnitude of L at offset off of the adapters' buffer, "...lora_magnitude_vector":
 * ||W + s B A||_row = ||W||_row (B is zero), computed on the host in double as PEFT's
 * weight_norm (float32 there). Returns the floats used. */
static size_t dora_magnitude(struct swift_model *m, struct swift_linear *L, size_t off)
{
    struct swift_param *p = &m->lp[m->nlp++];
    char nm[240], mod[200];
    module_name(m, L->name, mod, sizeof(mod));
    swift_adapter_tensor_name(nm, sizeof(nm), mod, 'M');
    p->name = swift_xstrdup(nm);
    p->ndim = 1;
    p->shape[0] = L->out;
    p->numel = (size_t)L->out;
    p->w = m->lora_params + off;
    p->g = m->lora_grads + off;
    p->decay = 1; /* a weight for HF Trainer (not a bias or a norm) */
    L->lora->mag = p->w;
    L->lora->gmag = p->g;
    float *w = swift_xmalloc((size_t)L->out * L->in * sizeof(float));
    float *mag = swift_xmalloc((size_t)L->out * sizeof(float));
    m->ops->download(w, L->w, (size_t)L->out * L->in * sizeof(float));
    for (int r = 0; r < L->out; r++) {
        double ss = 0;
        for (int i = 0; i < L->in; i++)
            ss += (double)w[(size_t)r * L->in + i] * w[(size_t)r * L->in + i];
        mag[r] = (float)sqrt(ss);
    }
    m->ops->upload(p->w, mag, (size_t)L->out * sizeof(float));
    free(w);
    free(mag);
    return (size_t)L->out;
}

void swift_lora_dora_free(struct swift_model *m)
{
    struct swift_dora *d = m->dora;
    if (!d)
        return;
    swift_mem_free(m->ops->free, d->w);
    swift_mem_free(m->ops->free, d->w2);
    swift_mem_free(m->ops->free, d->ones);
    swift_mem_free(m->ops->free, d->mones);
    swift_mem_free(m->ops->free, d->vec);
    swift_mem_free(m->ops->free, d->z);
    free(d);
    m->dora = NULL;
}

/* DoRA's scratch (struct swift_dora) and every adapter's inv and g */
static int dora_scratch(struct swift_model *m)
{
    size_t wmax = 0, vmax = 0, vec = 0;
    for (int l = 0; l < m->cfg.num_layers; l++)
        for (int k = 0; k < SWIFT_LIN_COUNT; k++) {
            struct swift_linear *L = &m->layers[l].lin[k];
            if (!L->lora)
                continue;
            size_t wn = (size_t)L->out * L->in;
            wmax = wn > wmax ? wn : wmax;
            vmax = (size_t)L->in > vmax ? (size_t)L->in : vmax;
            vmax = (size_t)L->out > vmax ? (size_t)L->out : vmax;
            vec += 2 * (size_t)L->out;
        }
    struct swift_dora *d = m->dora = swift_xcalloc(1, sizeof(*d));
    d->w = swift_mem_alloc(m->ops->alloc, SWIFT_MEM_ACTIVATIONS, wmax * sizeof(float));
    d->w2 = swift_mem_alloc(m->ops->alloc, SWIFT_MEM_ACTIVATIONS, wmax * sizeof(float));
    d->ones = swift_mem_alloc(m->ops->alloc, SWIFT_MEM_ACTIVATIONS, vmax * sizeof(float));
    d->mones = swift_mem_alloc(m->ops->alloc, SWIFT_MEM_ACTIVATIONS, vmax * sizeof(float));
    d->vec = swift_mem_alloc(m->ops->alloc, SWIFT_MEM_ACTIVATIONS, vec * sizeof(float));
    if (!d->w || !d->w2 || !d->ones || !d->mones || !d->vec)
        return swift_error("out of memory for DoRA's scratch");
    float *host = swift_xmalloc(vmax * sizeof(float));
    for (size_t i = 0; i < vmax; i++)
        host[i] = 1.0f;
    m->ops->upload(d->ones, host, vmax * sizeof(float));
    for (size_t i = 0; i < vmax; i++)
        host[i] = -1.0f;
    m->ops->upload(d->mones, host, vmax * sizeof(float));
    free(host);
    size_t off = 0;
    for (int l = 0; l < m->cfg.num_layers; l++)
        for (int k = 0; k < SWIFT_LIN_COUNT; k++) {
            struct swift_lora_ad *ad = m->layers[l].lin[k].lora;
            if (!ad)
                continue;
            ad->inv = d->vec + off;
            ad->g = d->vec + off + m->layers[l].lin[k].out;
            off += 2 * (size_t)m->layers[l].lin[k].out;
        }
    return 0;
}

int swift_lora_attach(struct swift_model *m, const struct swift_lora_opts *o)
{
    const struct swift_model_config *c = &m->cfg;
    if (o->rank <= 0)
        return swift_error("lora rank must be positive");
    if (o->dropout < 0 || o->dropout >= 1)
        return swift_error("lora dropout must be in [0, 1)");
    int nt = 0;
    size_t total = 0;
    for (int l = 0; l < c->num_layers; l++)
        for (int k = 0; k < SWIFT_LIN_COUNT; k++) {
            struct swift_linear *L = &m->layers[l].lin[k];
            if (targeted(o->targets, L->name)) {
                nt++;
                total += (size_t)o->rank * (L->in + L->out) + (o->use_dora ? (size_t)L->out : 0);
            }
        }
    if (!nt)
        return swift_error("--target-modules '%s' selects no linear layer", o->targets);
    m->lora_rank = o->rank;
    m->lora_alpha = o->alpha;
    m->lora_scale = swift_lora_scale(o->alpha, o->rank, o->use_rslora);
    m->lora_dropout = o->dropout;
    if (m->score) /* a reward model's head: trainable beside the adapters (modules_to_save) */
        total += (size_t)c->hidden_size;
    m->nlora = total;
    m->lora_params = swift_mem_alloc(m->ops->alloc, SWIFT_MEM_PARAMS, total * sizeof(float));
    m->lora_grads = swift_mem_alloc(m->ops->alloc, SWIFT_MEM_GRADS, total * sizeof(float));
    m->lp = swift_xcalloc((size_t)nt * 3 + 1, sizeof(*m->lp));
    if (!m->lora_params || !m->lora_grads) /* backend memory */
        return swift_error("out of memory");
    uint64_t seed = o->seed;
    size_t off = 0;
    for (int l = 0; l < c->num_layers; l++)
        for (int k = 0; k < SWIFT_LIN_COUNT; k++) {
            struct swift_linear *L = &m->layers[l].lin[k];
            if (!targeted(o->targets, L->name))
                continue;
            L->lora = swift_xcalloc(1, sizeof(*L->lora));
            for (int ab = 0; ab < 2; ab++) {
                struct swift_param *p = &m->lp[m->nlp++];
                char nm[240], mod[200];
                module_name(m, L->name, mod, sizeof(mod));
                swift_adapter_tensor_name(nm, sizeof(nm), mod, ab ? 'B' : 'A');
                p->name = swift_xstrdup(nm);
                p->ndim = 2;
                p->shape[0] = ab ? L->out : o->rank;
                p->shape[1] = ab ? o->rank : L->in;
                p->numel = (size_t)p->shape[0] * (size_t)p->shape[1];
                p->w = m->lora_params + off;
                p->g = m->lora_grads + off;
                p->decay = 1;
                off += p->numel;
                if (ab) {
                    L->lora->B = p->w;
                    L->lora->gB = p->g;
                } else {
                    L->lora->A = p->w;
                    L->lora->gA = p->g;
                    /* kaiming_uniform_(a=sqrt(5)): U(-1/sqrt(in), 1/sqrt(in)), drawn on the
                     * host and uploaded (B stays zero: alloc zeroes) */
                    float bound = 1.0f / sqrtf((float)L->in);
                    float *host = swift_xmalloc(p->numel * sizeof(float));
                    for (size_t i = 0; i < p->numel; i++)
                        host[i] =
                            bound *
                            (2.0f * (float)((swift_splitmix64(&seed) >> 40) / 16777216.0) - 1.0f);
                    m->ops->upload(p->w, host, p->numel * sizeof(float));
                    free(host);
                }
            }
            if (o->use_dora)
                off += dora_magnitude(m, L, off);
        }
    if (m->score)
        score_copy(m, off);
    if (o->use_dora && dora_scratch(m) < 0)
        return -1;
    /* activations are per adapter: reallocate on the next reserve */
    int B = m->capB, T = m->capT;
    if (m->acts) {
        m->capB = 0;
        if (swift_model_reserve(m, B, T) < 0)
            return -1;
    }
    return 0;
}

static char targets_buf[1024];

/* the adapter's tensors into the attached adapters (converted on the host, then uploaded:
 * backend memory may be a device's) */
static int fill(struct swift_model *m, const struct swift_adapter *ad)
{
    float *host = swift_xmalloc((m->nlora ? m->nlora : 1) * sizeof(float));
    int rc = 0;
    for (int i = 0; i < m->nlp && rc == 0; i++) {
        struct swift_param *p = &m->lp[i];
        const struct swift_st_tensor *t = swift_safetensors_find(&ad->st, p->name);
        const char *vl = m->lora_vl_names ? strstr(p->name, ".language_model.") : NULL;
        if (!t && vl) { /* a VL adapter in the hub's layout (base_model.model.model.layers.*) */
            char alt[256];
            snprintf(alt, sizeof(alt), "%.*s%s", (int)(vl - p->name), p->name, vl + 15);
            t = swift_safetensors_find(&ad->st, alt);
        }
        if (!t)
            rc = swift_error_at(ad->st.path, 0, "missing tensor '%s'", p->name);
        else if (swift_st_tensor_check_shape(t, p->ndim, p->shape) < 0 ||
                 swift_st_tensor_to_f32(t, host) < 0)
            rc = -1;
        else
            m->ops->upload(p->w, host, p->numel * sizeof(float));
    }
    free(host);
    return rc;
}

int swift_lora_load(struct swift_model *m, const char *dir, struct swift_lora_opts *o)
{
    struct swift_adapter ad;
    int rc = swift_adapter_open(&ad, dir);
    if (rc == 0)
        rc = swift_lora_load_adapter(m, &ad, o);
    swift_adapter_close(&ad);
    return rc < 0 ? -1 : 0;
}

int swift_lora_load_adapter(struct swift_model *m, const struct swift_adapter *a,
                            struct swift_lora_opts *o)
{
    const struct swift_adapter ad = *a;
    memset(o, 0, sizeof(*o));
    int rc = 0;
    if (rc == 0 && ad.cfg.patterns)
        rc = swift_error_at(ad.cfg_path, 0, "rank_pattern and alpha_pattern are not supported");
    if (rc == 0 && ad.cfg.targets_regex)
        rc = swift_error_at(ad.cfg_path,
                            0,
                            "target_modules must be a list or \"all-linear\" (regular "
                            "expressions are not supported)");
    if (rc == 0 && ad.score && !m->score)
        rc = swift_error_at(ad.st_path,
                            0,
                            "holds a reward model's score head (modules_to_save): the model "
                            "was not loaded as a reward model");
    if (rc == 0) {
        o->rank = ad.cfg.r;
        o->alpha = (float)ad.cfg.alpha;
        o->dropout = (float)ad.cfg.dropout;
        o->use_rslora = ad.cfg.use_rslora;
        o->use_dora = ad.cfg.use_dora;
        snprintf(targets_buf, sizeof(targets_buf), "%s", ad.cfg.targets);
        o->targets = targets_buf;
        rc = swift_lora_attach(m, o);
    }
    if (rc == 0)
        rc = fill(m, &ad);
    return rc < 0 ? -1 : 0;
}

int swift_lora_save(const struct swift_model *m, const struct swift_lora_opts *o, const char *dir,
                    const char *base_model)
{
    return swift_lora_save_with(m, o, dir, base_model, NULL, 0, NULL);
}

int swift_lora_save_with(const struct swift_model *m, const struct swift_lora_opts *o,
                         const char *dir, const char *base_model, const struct swift_st_entry *full,
                         size_t nfull, const char *modules_to_save)
{
    struct swift_st_entry *e = swift_xcalloc((size_t)m->nlp + nfull + 1, sizeof(*e));
    /* a host copy of the adapters (backend memory may be a device's) */
    float *host = swift_xmalloc((m->nlora ? m->nlora : 1) * sizeof(float));
    m->ops->download(host, m->lora_params, m->nlora * sizeof(float));
    for (int i = 0; i < m->nlp; i++) {
        e[i].name = m->lp[i].name;
        e[i].dtype = SWIFT_DTYPE_F32;
        e[i].ndim = m->lp[i].ndim;
        e[i].shape[0] = m->lp[i].shape[0];
        e[i].shape[1] = m->lp[i].shape[1];
        e[i].data = host + (m->lp[i].w - m->lora_params);
    }
    /* target_modules: the short names in use, as PEFT writes them for ms-swift's all-linear */
    struct swift_adapter_config c = {.r = o->rank,
                                     .alpha = o->alpha,
                                     .dropout = o->dropout,
                                     .use_rslora = o->use_rslora,
                                     .use_dora = o->use_dora,
                                     .seq_cls = m->cfg.score,
                                     .modules_to_save = modules_to_save};
    for (size_t i = 0; i < nfull; i++)
        e[m->nlp + i] = full[i];
    size_t used = 0;
    for (int k = 0; k < SWIFT_LIN_COUNT; k++)
        for (int l = 0; l < m->cfg.num_layers; l++)
            if (m->layers[l].lin[k].lora) {
                used += (size_t)snprintf(c.targets + used,
                                         sizeof(c.targets) - used,
                                         "%s%s",
                                         used ? "," : "",
                                         short_names[k]);
                break;
            }
    int rc = swift_adapter_write(dir, &c, base_model, e, (size_t)m->nlp + nfull);
    free(host);
    free(e);
    return rc;
}
