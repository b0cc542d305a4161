/* lora — see lora.h. */
#include "lib/model/lora.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "lib/core/error.h"
#include "lib/core/fileio.h"
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

static uint64_t next(uint64_t *s)
{
    uint64_t x = (*s += 0x9e3779b97f4a7c15ULL);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
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
                total += (size_t)o->rank * (L->in + L->out);
            }
        }
    if (!nt)
        return swift_error("--target-modules '%s' selects no linear layer", o->targets);
    m->lora_rank = o->rank;
    m->lora_alpha = o->alpha;
    m->lora_scale = o->use_rslora ? o->alpha / sqrtf((float)o->rank) : o->alpha / (float)o->rank;
    m->lora_dropout = o->dropout;
    m->nlora = total;
    m->lora_params = m->ops->alloc(total * sizeof(float));
    m->lora_grads = m->ops->alloc(total * sizeof(float));
    m->lp = calloc((size_t)nt * 2, sizeof(*m->lp));
    if (!m->lora_params || !m->lora_grads || !m->lp)
        return swift_error("out of memory");
    uint64_t seed = o->seed;
    size_t off = 0;
    for (int l = 0; l < c->num_layers; l++)
        for (int k = 0; k < SWIFT_LIN_COUNT; k++) {
            struct swift_linear *L = &m->layers[l].lin[k];
            if (!targeted(o->targets, L->name))
                continue;
            L->lora = calloc(1, sizeof(*L->lora));
            if (!L->lora)
                return swift_error("out of memory");
            for (int ab = 0; ab < 2; ab++) {
                struct swift_param *p = &m->lp[m->nlp++];
                char nm[200];
                snprintf(
                    nm, sizeof(nm), "base_model.model.%s.lora_%c.weight", L->name, ab ? 'B' : 'A');
                p->name = strdup(nm);
                if (!p->name)
                    return swift_error("out of memory");
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
                    float *host = malloc(p->numel * sizeof(float));
                    if (!host)
                        return swift_error("out of memory");
                    for (size_t i = 0; i < p->numel; i++)
                        host[i] = bound * (2.0f * (float)((next(&seed) >> 40) / 16777216.0) - 1.0f);
                    m->ops->upload(p->w, host, p->numel * sizeof(float));
                    free(host);
                }
            }
        }
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

int swift_lora_load(struct swift_model *m, const char *dir, struct swift_lora_opts *o)
{
    char *cp = swift_path_join(dir, "adapter_config.json");
    if (!cp)
        return swift_error("out of memory");
    json_error_t jerr;
    json_t *root = json_load_file(cp, 0, &jerr);
    int rc = -1;
    if (!root) {
        swift_error_at(cp, jerr.line, "%s", jerr.text);
        free(cp);
        return -1;
    }
    memset(o, 0, sizeof(*o));
    const char *pt = json_string_value(json_object_get(root, "peft_type"));
    json_t *r = json_object_get(root, "r"), *al = json_object_get(root, "lora_alpha");
    json_t *tm = json_object_get(root, "target_modules");
    if (!pt || strcmp(pt, "LORA")) {
        swift_error_at(cp, 0, "peft_type must be \"LORA\"");
        goto out;
    }
    if (!json_is_integer(r) || !json_is_number(al)) {
        swift_error_at(cp, 0, "missing or non-numeric 'r' or 'lora_alpha'");
        goto out;
    }
    if (json_is_true(json_object_get(root, "use_dora"))) {
        swift_error_at(cp, 0, "DoRA adapters are not supported");
        goto out;
    }
    json_t *rp = json_object_get(root, "rank_pattern"),
           *ap = json_object_get(root, "alpha_pattern");
    if ((json_is_object(rp) && json_object_size(rp)) ||
        (json_is_object(ap) && json_object_size(ap))) {
        swift_error_at(cp, 0, "rank_pattern and alpha_pattern are not supported");
        goto out;
    }
    o->rank = (int)json_integer_value(r);
    o->alpha = (float)json_number_value(al);
    o->dropout = (float)json_number_value(json_object_get(root, "lora_dropout"));
    o->use_rslora = json_is_true(json_object_get(root, "use_rslora"));
    targets_buf[0] = 0;
    if (json_is_string(tm) && !strcmp(json_string_value(tm), "all-linear")) {
        snprintf(targets_buf, sizeof(targets_buf), "all-linear");
    } else if (json_is_array(tm)) {
        size_t i, used = 0;
        json_t *v;
        json_array_foreach(tm, i, v)
        {
            if (!json_is_string(v))
                continue;
            int n = snprintf(targets_buf + used,
                             sizeof(targets_buf) - used,
                             "%s%s",
                             used ? "," : "",
                             json_string_value(v));
            if (n < 0 || (size_t)n >= sizeof(targets_buf) - used) {
                swift_error_at(cp, 0, "target_modules list too long");
                goto out;
            }
            used += (size_t)n;
        }
    } else {
        swift_error_at(cp,
                       0,
                       "target_modules must be a list or \"all-linear\" (regular "
                       "expressions are not supported)");
        goto out;
    }
    o->targets = targets_buf;
    if (swift_lora_attach(m, o) < 0)
        goto out;
    char *wp = swift_path_join(dir, "adapter_model.safetensors");
    struct swift_safetensors st;
    if (!wp || swift_safetensors_open(&st, wp) < 0) {
        free(wp);
        goto out;
    }
    free(wp);
    rc = 0;
    /* converted on the host, then uploaded (backend memory may be a device's) */
    float *host = malloc((m->nlora ? m->nlora : 1) * sizeof(float));
    if (!host)
        rc = swift_error("out of memory");
    for (int i = 0; i < m->nlp && rc == 0; i++) {
        struct swift_param *p = &m->lp[i];
        const struct swift_st_tensor *t = swift_safetensors_find(&st, p->name);
        if (!t)
            rc = swift_error_at(st.path, 0, "missing tensor '%s'", p->name);
        else if (swift_st_tensor_check_shape(t, 2, p->shape) < 0 ||
                 swift_st_tensor_to_f32(t, host) < 0)
            rc = -1;
        else
            m->ops->upload(p->w, host, p->numel * sizeof(float));
    }
    free(host);
    swift_safetensors_close(&st);
out:
    json_decref(root);
    free(cp);
    return rc;
}

int swift_lora_save(const struct swift_model *m, const struct swift_lora_opts *o, const char *dir,
                    const char *base_model)
{
    struct swift_st_entry *e = calloc((size_t)m->nlp + 1, sizeof(*e));
    /* a host copy of the adapters (backend memory may be a device's) */
    float *host = malloc((m->nlora ? m->nlora : 1) * sizeof(float));
    if (!e || !host) {
        free(e);
        free(host);
        return swift_error("out of memory");
    }
    m->ops->download(host, m->lora_params, m->nlora * sizeof(float));
    for (int i = 0; i < m->nlp; i++) {
        e[i].name = m->lp[i].name;
        e[i].dtype = SWIFT_DTYPE_F32;
        e[i].ndim = 2;
        e[i].shape[0] = m->lp[i].shape[0];
        e[i].shape[1] = m->lp[i].shape[1];
        e[i].data = host + (m->lp[i].w - m->lora_params);
    }
    char *wp = swift_path_join(dir, "adapter_model.safetensors");
    int rc = wp ? swift_safetensors_write(wp, e, (size_t)m->nlp, NULL) : -1;
    free(wp);
    free(host);
    free(e);
    if (rc < 0)
        return -1;
    /* target_modules: the short names in use, as PEFT writes them for ms-swift's all-linear */
    json_t *tm = json_array();
    for (int k = 0; k < SWIFT_LIN_COUNT; k++)
        for (int l = 0; l < m->cfg.num_layers; l++)
            if (m->layers[l].lin[k].lora) {
                json_array_append_new(tm, json_string(short_names[k]));
                break;
            }
    json_t *root = json_pack(
        "{s:s?,s:n,s:s,s:s,s:o,s:s,s:b,s:b,s:b,s:b,s:i,s:f,s:f,s:n,s:n,s:n,s:{},s:{},s:b,s:b}",
        "base_model_name_or_path",
        base_model,
        "revision",
        "task_type",
        "CAUSAL_LM",
        "peft_type",
        "LORA",
        "target_modules",
        tm,
        "bias",
        "none",
        "fan_in_fan_out",
        0,
        "inference_mode",
        1,
        "init_lora_weights",
        1,
        "use_rslora",
        o->use_rslora,
        "r",
        o->rank,
        "lora_alpha",
        round((double)o->alpha * 1e6) / 1e6,
        "lora_dropout",
        round((double)o->dropout * 1e6) / 1e6,
        "modules_to_save",
        "layers_to_transform",
        "layers_pattern",
        "rank_pattern",
        "alpha_pattern",
        "use_dora",
        0,
        "lora_bias",
        0);
    char *txt = root ? json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(root);
    char *cp = swift_path_join(dir, "adapter_config.json");
    if (!txt || !cp)
        rc = swift_error("out of memory");
    else {
        size_t n = strlen(txt);
        char *t2 = realloc(txt, n + 2);
        if (t2) {
            txt = t2;
            txt[n++] = '\n';
            txt[n] = 0;
        }
        rc = swift_atomic_write(cp, txt, n);
    }
    free(txt);
    free(cp);
    return rc;
}
