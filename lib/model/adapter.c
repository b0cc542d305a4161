/* adapter — PEFT's LoRA layout, read and written once (see adapter.h). */
#include "lib/model/adapter.h"
#include "lib/core/alloc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/core/banned.h"

float swift_lora_scale(double alpha, int r, int use_rslora)
{
    return (float)(use_rslora ? alpha / sqrt((double)r) : alpha / (double)r);
}

/* target_modules: a list, "all-linear", or a regular expression (flagged, left to the caller) */
static int read_targets(struct swift_adapter_config *c, json_t *tm, const char *path)
{
    c->targets[0] = 0;
    if (json_is_string(tm) && !strcmp(json_string_value(tm), "all-linear")) {
        snprintf(c->targets, sizeof(c->targets), "all-linear");
        return 0;
    }
    if (!json_is_array(tm)) {
        c->targets_regex = 1;
        return 0;
    }
    size_t i, used = 0;
    json_t *v;
    json_array_foreach(tm, i, v)
    {
        if (!json_is_string(v))
            continue;
        int n = snprintf(c->targets + used,
                         sizeof(c->targets) - used,
                         "%s%s",
                         used ? "," : "",
                         json_string_value(v));
        if (n < 0 || (size_t)n >= sizeof(c->targets) - used)
            return swift_error_at(path, 0, "target_modules list too long");
        used += (size_t)n;
    }
    return 0;
}

static int nonempty_object(json_t *v)
{
    return json_is_object(v) && json_object_size(v) > 0;
}

/* adapter_config.json into ad->cfg and ad->json, with what no caller supports refused */
static int read_config(struct swift_adapter *ad)
{
    const char *path = ad->cfg_path;
    char *txt;
    size_t len;
    if (swift_read_file(path, 16 << 20, &txt, &len) < 0)
        return -1;
    json_error_t jerr;
    ad->json = json_loadb(txt, len, JSON_REJECT_DUPLICATES, &jerr);
    free(txt);
    if (!ad->json)
        return swift_error_at(path, jerr.line, "%s", jerr.text);
    json_t *root = ad->json;
    struct swift_adapter_config *c = &ad->cfg;
    const char *pt = json_string_value(json_object_get(root, "peft_type"));
    json_t *r = json_object_get(root, "r"), *al = json_object_get(root, "lora_alpha");
    if (!pt || strcmp(pt, "LORA"))
        return swift_error_at(path, 0, "peft_type must be \"LORA\"");
    if (!json_is_integer(r) || !json_is_number(al))
        return swift_error_at(path, 0, "missing or non-numeric 'r' or 'lora_alpha'");
    if (json_is_true(json_object_get(root, "fan_in_fan_out")))
        return swift_error_at(path, 0, "fan_in_fan_out adapters (GPT-2 Conv1D) are not supported");
    const char *bias = json_string_value(json_object_get(root, "bias"));
    if (bias && strcmp(bias, "none"))
        return swift_error_at(
            path, 0, "bias '%s' adapters are not supported (only \"none\")", bias);
    c->r = (int)json_integer_value(r);
    c->alpha = json_number_value(al);
    c->dropout = json_number_value(json_object_get(root, "lora_dropout"));
    c->use_rslora = json_is_true(json_object_get(root, "use_rslora"));
    c->use_dora = json_is_true(json_object_get(root, "use_dora"));
    c->patterns = nonempty_object(json_object_get(root, "rank_pattern")) ||
                  nonempty_object(json_object_get(root, "alpha_pattern"));
    return read_targets(c, json_object_get(root, "target_modules"), path);
}

/* "base_model.model.X.lora_A.weight" or "...lora_A.default.weight" → X, which = 'A' | 'B';
 * DoRA's "base_model.model.X.lora_magnitude_vector" (or ".default.weight") → X, which = 'M' */
static char *lora_module(const char *name, char *which)
{
    const char *pre = "base_model.model.";
    if (strncmp(name, pre, strlen(pre)))
        return NULL;
    const char *p = name + strlen(pre);
    const char *mv = strstr(p, ".lora_magnitude_vector");
    if (mv && (!strcmp(mv + 22, "") || !strcmp(mv + 22, ".default.weight"))) {
        *which = 'M';
        return swift_xstrndup(p, (size_t)(mv - p));
    }
    const char *m = strstr(p, ".lora_A.");
    *which = 'A';
    if (!m) {
        m = strstr(p, ".lora_B.");
        *which = 'B';
    }
    if (!m)
        return NULL;
    const char *rest = m + 8;
    if (strcmp(rest, "weight") && strcmp(rest, "default.weight"))
        return NULL;
    return swift_xstrndup(p, (size_t)(m - p));
}

/* "base_model.model.<module>.modules_to_save.default.weight" or "base_model.model.<module>.weight"
 * (or bias) → "<module>.weight", the base's tensor it replaces; NULL for anything else */
static char *full_name(const char *name)
{
    const char *pre = "base_model.model.";
    size_t lp = strlen(pre), ln = strlen(name);
    if (strncmp(name, pre, lp) || strstr(name, ".lora_"))
        return NULL;
    const char *sfx[] = {".weight", ".bias"};
    for (int i = 0; i < 2; i++) {
        size_t ls = strlen(sfx[i]);
        if (ln <= lp + ls || strcmp(name + ln - ls, sfx[i]))
            continue;
        const char *mid = ".modules_to_save.default";
        size_t lm = strlen(mid), body = ln - lp - ls;
        if (body > lm && !strncmp(name + lp + body - lm, mid, lm))
            body -= lm;
        char *out = swift_xmalloc(body + ls + 1);
        memcpy(out, name + lp, body);
        memcpy(out + body, sfx[i], ls + 1);
        return out;
    }
    return NULL;
}

/* every tensor of the file into its module's pair; each pair complete and of one rank */
static int read_pairs(struct swift_adapter *ad, int accept_full)
{
    ad->pairs = swift_xcalloc(ad->st.ntensors + 1, sizeof(*ad->pairs));
    if (accept_full) {
        ad->full = swift_xcalloc(ad->st.ntensors + 1, sizeof(*ad->full));
        ad->full_names = swift_xcalloc(ad->st.ntensors + 1, sizeof(*ad->full_names));
    }
    for (size_t i = 0; i < ad->st.ntensors; i++) {
        const struct swift_st_tensor *t = &ad->st.tensors[i];
        char which;
        if (!strcmp(t->name, "base_model.model.score.weight")) {
            ad->score = t; /* a reward model's head (modules_to_save): lora.c loads it */
            continue;
        }
        char *mod = lora_module(t->name, &which);
        char *fn = !mod && accept_full ? full_name(t->name) : NULL;
        if (fn) {
            ad->full[ad->nfull] = t;
            ad->full_names[ad->nfull++] = fn;
            continue;
        }
        if (!mod)
            return swift_error("%s: tensor '%s' is not a LoRA A/B weight (modules_to_save and "
                               "other adapter types are not supported)",
                               ad->st_path,
                               t->name);
        struct swift_adapter_pair *p = swift_adapter_find(ad, mod);
        if (!p) {
            p = &ad->pairs[ad->n++];
            p->module = mod;
        } else {
            free(mod);
        }
        if (which == 'M') {
            if (t->ndim != 1)
                return swift_error("%s: '%s' is not a vector", ad->st_path, t->name);
            p->m = t;
            continue;
        }
        if (t->ndim != 2)
            return swift_error("%s: '%s' is not a matrix", ad->st_path, t->name);
        if (which == 'A')
            p->a = t;
        else
            p->b = t;
    }
    for (size_t j = 0; j < ad->n; j++) {
        struct swift_adapter_pair *p = &ad->pairs[j];
        if (!p->a || !p->b)
            return swift_error("%s: module '%s' has lora_%c but no lora_%c",
                               ad->st_path,
                               p->module,
                               p->a ? 'A' : 'B',
                               p->a ? 'B' : 'A');
        if (!p->m != !ad->cfg.use_dora)
            return swift_error(p->m ? "%s: module '%s' has a DoRA magnitude but use_dora is not set"
                                    : "%s: module '%s' has no lora_magnitude_vector (use_dora)",
                               ad->st_path,
                               p->module);
        if (p->m && p->m->shape[0] != p->b->shape[0])
            return swift_error("%s: '%s': lora_magnitude_vector has %lld entries, lora_B %lld rows",
                               ad->st_path,
                               p->module,
                               (long long)p->m->shape[0],
                               (long long)p->b->shape[0]);
        if (p->a->shape[0] != p->b->shape[1])
            return swift_error("%s: '%s': lora_A has rank %lld, lora_B %lld",
                               ad->st_path,
                               p->module,
                               (long long)p->a->shape[0],
                               (long long)p->b->shape[1]);
    }
    return 0;
}

static int open_adapter(struct swift_adapter *ad, const char *dir, int accept_full)
{
    memset(ad, 0, sizeof(*ad));
    ad->cfg_path = swift_path_join(dir, "adapter_config.json");
    ad->st_path = swift_path_join(dir, "adapter_model.safetensors");
    if (read_config(ad) < 0 || swift_safetensors_open(&ad->st, ad->st_path) < 0)
        return -1;
    return read_pairs(ad, accept_full);
}

int swift_adapter_open(struct swift_adapter *ad, const char *dir)
{
    return open_adapter(ad, dir, 0);
}

int swift_adapter_open_full(struct swift_adapter *ad, const char *dir)
{
    return open_adapter(ad, dir, 1);
}

void swift_adapter_close(struct swift_adapter *ad)
{
    for (size_t i = 0; i < ad->n; i++)
        free(ad->pairs[i].module);
    free(ad->pairs);
    for (size_t i = 0; i < ad->nfull; i++)
        free(ad->full_names[i]);
    free(ad->full_names);
    free(ad->full);
    swift_safetensors_close(&ad->st);
    json_decref(ad->json);
    free(ad->cfg_path);
    free(ad->st_path);
    memset(ad, 0, sizeof(*ad));
}

struct swift_adapter_pair *swift_adapter_find(const struct swift_adapter *ad, const char *module)
{
    for (size_t j = 0; j < ad->n; j++)
        if (!strcmp(ad->pairs[j].module, module))
            return &ad->pairs[j];
    return NULL;
}

double swift_adapter_alpha(const struct swift_adapter *ad, const char *module)
{
    json_t *pat = json_object_get(ad->json, "alpha_pattern");
    const char *k;
    json_t *v;
    json_object_foreach(pat, k, v)
    {
        size_t lk = strlen(k), lm = strlen(module);
        if (json_is_number(v) && lm >= lk && !strcmp(module + lm - lk, k) &&
            (lm == lk || module[lm - lk - 1] == '.'))
            return json_number_value(v);
    }
    return ad->cfg.alpha;
}

void swift_adapter_tensor_name(char *buf, size_t n, const char *module, char which)
{
    if (which == 'M')
        snprintf(buf, n, "base_model.model.%s.lora_magnitude_vector", module);
    else
        snprintf(buf, n, "base_model.model.%s.lora_%c.weight", module, which);
}

/* adapter_config.json as PEFT writes it */
static int write_config(const char *dir, const struct swift_adapter_config *c,
                        const char *base_model)
{
    /* target_modules: the short names in use, as PEFT writes them for ms-swift's all-linear */
    json_t *tm = json_array();
    for (const char *s = c->targets; tm && *s;) {
        const char *e = strchr(s, ',');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        json_array_append_new(tm, json_stringn(s, n));
        s += n + (e ? 1 : 0);
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
        c->use_rslora,
        "r",
        c->r,
        "lora_alpha",
        round(c->alpha * 1e6) / 1e6,
        "lora_dropout",
        round(c->dropout * 1e6) / 1e6,
        "modules_to_save",
        "layers_to_transform",
        "layers_pattern",
        "rank_pattern",
        "alpha_pattern",
        "use_dora",
        c->use_dora,
        "lora_bias",
        0);
    if (!root)
        abort();      /* a bad pack format */
    if (c->seq_cls) { /* the score head trained in full beside the adapters, as PEFT saves it */
        json_object_set_new(root, "task_type", json_string("SEQ_CLS"));
        json_object_set_new(root, "modules_to_save", json_pack("[s]", "score"));
    }
    if (c->modules_to_save && *c->modules_to_save) {
        json_t *ms = json_array();
        for (const char *s = c->modules_to_save; ms && *s;) {
            const char *e = strchr(s, ',');
            size_t n = e ? (size_t)(e - s) : strlen(s);
            json_array_append_new(ms, json_stringn(s, n));
            s += n + (e ? 1 : 0);
        }
        json_object_set_new(root, "modules_to_save", ms);
    }
    char *txt = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (!txt)
        abort();
    json_decref(root);
    char *cp = swift_path_join(dir, "adapter_config.json");
    size_t n = strlen(txt);
    txt = swift_xrealloc(txt, n + 2);
    txt[n++] = '\n';
    txt[n] = 0;
    int rc = swift_atomic_write(cp, txt, n);
    free(txt);
    free(cp);
    return rc;
}

int swift_adapter_write(const char *dir, const struct swift_adapter_config *c,
                        const char *base_model, const struct swift_st_entry *e, size_t n)
{
    char *wp = swift_path_join(dir, "adapter_model.safetensors");
    int rc = swift_safetensors_write(wp, e, n, NULL);
    free(wp);
    if (rc < 0)
        return -1;
    return write_config(dir, c, base_model);
}
