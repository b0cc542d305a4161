/*
 * analyze/patch — a remedy as a unified diff that `patch -p0` applies (--emit-patch).
 *
 * A rule's remedy command (cmdline.c) is read back into the options it changes: every long
 * option whose value differs from the traced run's (output and --trace excepted: they only get
 * new names), the short options it drops (-j) and the environment it sets (OMP_WAIT_POLICY).
 * When the run read a config file (swift_meta.config: path, resolved path, sha256) and the
 * remedy is options only, the patch edits that file: a key already there gets the new value in
 * place (its spelling, comment and the order of the rest kept), a new key goes at the end (YAML)
 * or before the closing brace (JSON), spelled as the file spells its keys (ms-swift snake_case
 * or our dashed names). The file is read again and patched only when its sha256 is the one the
 * run recorded. Otherwise the patch is of `command.sh`, a file holding the traced command line
 * on one line, as the report prints it. See docs/bottlenecks.md.
 */
#include "lib/analyze/internal.h"
#include "lib/analyze/load.h"
#include "lib/analyze/rules.h"
#include "lib/core/fileio.h"
#include "lib/core/sha256.h"
#include "lib/core/strbuf.h"

#include <errno.h>
#include <limits.h>
#include <unistd.h>

#include "lib/core/banned.h"

#define PATCH_MAX_LINES 2000 /* a config file longer than this is not diffed (LCS: n^2) */
#define PATCH_CONTEXT 3

/* ---------- the remedy's command read back ---------- */

/* The words of a command line as cmdline.c quotes it (plain words, '...' with '\'' inside);
 * leading NAME=VALUE words go to *env (an object). A new array. */
static json_t *split_words(const char *s, json_t *env)
{
    json_t *out = json_array();
    struct swift_strbuf w = {0};
    int in_word = 0, lead = 1;
    for (const char *p = s;; p++) {
        if (!*p || *p == ' ') {
            if (in_word) {
                const char *eq = strchr(w.s, '=');
                int assign = lead && eq && eq > w.s &&
                             strspn(w.s,
                                    "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                    "abcdefghijklmnopqrstuvwxyz"
                                    "0123456789_") == (size_t)(eq - w.s);
                if (assign) {
                    *(char *)eq = 0;
                    json_object_set_new(env, w.s, json_string(eq + 1));
                } else {
                    lead = 0;
                    json_array_append_new(out, json_string(w.s));
                }
                w.len = 0;
                w.s[0] = 0;
                in_word = 0;
            }
            if (!*p)
                break;
            continue;
        }
        in_word = 1;
        if (*p == '\'') {
            const char *q = strchr(p + 1, '\'');
            if (!q)
                q = p + strlen(p);
            swift_strbuf_add(&w, p + 1, (size_t)(q - p - 1));
            p = *q ? q : q - 1;
        } else if (*p == '\\' && p[1]) {
            swift_strbuf_add(&w, ++p, 1);
        } else {
            swift_strbuf_add(&w, p, 1);
        }
    }
    free(w.s);
    return out;
}

/* "--Name_x" -> "name-x" into out (n bytes); 0 when w is not a long option. The value after
 * '=' is left out; *eq points at it (NULL when none). */
static int long_name(const char *w, char *out, size_t n, const char **eq)
{
    if (strncmp(w, "--", 2) || !w[2])
        return 0;
    size_t i = 0;
    for (w += 2; *w && *w != '=' && i + 1 < n; w++)
        out[i++] = *w == '_' ? '-' : *w;
    out[i] = 0;
    *eq = *w == '=' ? w + 1 : NULL;
    return 1;
}

/* The value of long option opt (dashed) in argv, or NULL. */
static const char *opt_value(json_t *argv, const char *opt)
{
    size_t n = json_array_size(argv);
    for (size_t i = 1; i < n; i++) {
        const char *w = json_string_value(json_array_get(argv, i)), *eq;
        char name[128];
        if (!w || !strcmp(w, "--"))
            break;
        if (long_name(w, name, sizeof(name), &eq) && !strcmp(name, opt))
            return eq ? eq : i + 1 < n ? json_string_value(json_array_get(argv, i + 1)) : NULL;
    }
    return NULL;
}

static int is_output(const char *name)
{
    return !strcmp(name, "output-dir") || !strcmp(name, "output") || !strcmp(name, "trace");
}

static int has_short(json_t *argv, char c)
{
    size_t i;
    json_t *v;
    json_array_foreach(argv, i, v)
    {
        const char *w = json_string_value(v);
        if (i && w && w[0] == '-' && w[1] == c)
            return 1;
    }
    return 0;
}

/* What the new argv changes against the old one (env is stolen): {"set": {option: value}, "drop":
 * "j...", "env": {NAME: VALUE}}. */
static json_t *changes_of(json_t *old, json_t *nw, json_t *env)
{
    json_t *set = json_object();
    size_t n = json_array_size(nw);
    for (size_t i = 1; i < n; i++) {
        const char *w = json_string_value(json_array_get(nw, i)), *eq, *v;
        char name[128];
        if (!w || !strcmp(w, "--"))
            break;
        if (!long_name(w, name, sizeof(name), &eq) || is_output(name))
            continue;
        v = eq ? eq : i + 1 < n ? json_string_value(json_array_get(nw, i + 1)) : NULL;
        if (!eq)
            i++;
        const char *was = opt_value(old, name);
        if (v && (!was || strcmp(was, v)))
            json_object_set_new(set, name, json_string(v));
    }
    char drop[16] = "";
    size_t nd = 0;
    size_t i;
    json_t *x;
    json_array_foreach(old, i, x)
    {
        const char *w = json_string_value(x);
        if (i && w && w[0] == '-' && w[1] && w[1] != '-' && !(w[1] >= '0' && w[1] <= '9') &&
            !has_short(nw, w[1]) && nd + 1 < sizeof(drop) && !strchr(drop, w[1]))
            drop[nd++] = w[1];
    }
    return json_pack("{s:o,s:s,s:o}", "set", set, "drop", drop, "env", env);
}

/* ---------- a config file edited ---------- */

/* ms-swift's names of the options remedies set, where they differ from ours (the config file
 * may use either; cmd/swift-train.c and cmd/swift-preprocess.c list them as aliases). */
static const char *const aliases[][2] = {
    {"num-workers", "dataloader_num_workers"},
    {"prefetch", "dataloader_prefetch_factor"},
    {"per-device-train-batch-size", "batch_size"},
    {"threads", "dataset_num_proc"},
};

/* Does config key k (len l, any spelling) name option opt? */
static int key_is(const char *k, size_t l, const char *opt)
{
    char a[128];
    if (l >= sizeof(a))
        return 0;
    for (size_t i = 0; i < l; i++)
        a[i] = k[i] == '_' ? '-' : k[i];
    a[l] = 0;
    if (!strcmp(a, opt))
        return 1;
    for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++) {
        if (strcmp(aliases[i][0], opt))
            continue;
        char b[128];
        size_t j = 0;
        for (const char *p = aliases[i][1]; *p && j + 1 < sizeof(b); p++)
            b[j++] = *p == '_' ? '-' : *p;
        b[j] = 0;
        if (!strcmp(a, b))
            return 1;
    }
    return 0;
}

struct lines {
    char **v; /* each with its '\n' when it had one */
    size_t n;
};

static void lines_split(struct lines *L, const char *text)
{
    L->v = NULL;
    L->n = 0;
    size_t cap = 0;
    for (const char *p = text; *p;) {
        const char *e = strchr(p, '\n');
        size_t l = e ? (size_t)(e - p) + 1 : strlen(p);
        if (L->n == cap) {
            cap = cap ? cap * 2 : 64;
            L->v = swift_xrealloc(L->v, cap * sizeof(*L->v));
        }
        L->v[L->n] = swift_xmalloc(l + 1);
        memcpy(L->v[L->n], p, l);
        L->v[L->n++][l] = 0;
        p += l;
    }
}

static void lines_free(struct lines *L)
{
    for (size_t i = 0; i < L->n; i++)
        free(L->v[i]);
    free(L->v);
}

static void lines_insert(struct lines *L, size_t at, const char *s)
{
    L->v = swift_xrealloc(L->v, (L->n + 1) * sizeof(*L->v));
    memmove(L->v + at + 1, L->v + at, (L->n - at) * sizeof(*L->v));
    L->v[at] = swift_xstrdup(s);
    L->n++;
}

static void line_set(struct lines *L, size_t i, const char *s)
{
    free(L->v[i]);
    L->v[i] = swift_xstrdup(s);
}

/* Does the file spell its keys snake_case (1), dashed (0)? ms-swift's snake_case when it has
 * no key of two words. */
static int snake_style(const struct lines *L, int json)
{
    int snake = 0, dash = 0;
    for (size_t i = 0; i < L->n; i++) {
        const char *p = L->v[i] + strspn(L->v[i], " \t");
        if (json && *p++ != '"')
            continue;
        if (!json && p != L->v[i])
            continue;
        size_t l = strcspn(p, json ? "\"" : ":#\n");
        for (size_t k = 0; k < l; k++)
            snake += p[k] == '_', dash += p[k] == '-';
    }
    return snake >= dash;
}

static const char *key_spelling(const char *opt, int snake, char *buf, size_t n)
{
    if (!snake)
        return opt;
    for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
        if (!strcmp(aliases[i][0], opt))
            return aliases[i][1];
    size_t j = 0;
    for (; opt[j] && j + 1 < n; j++)
        buf[j] = opt[j] == '-' ? '_' : opt[j];
    buf[j] = 0;
    return buf;
}

static int is_number(const char *v)
{
    char *end;
    if (!*v)
        return 0;
    (void)strtod(v, &end);
    return *end == 0;
}

/* Set key opt to v in a YAML file's lines: a top-level "key: value  # comment" line in place,
 * else a new line at the end. */
static void yaml_set(struct lines *L, const char *opt, const char *v, int snake)
{
    for (size_t i = 0; i < L->n; i++) {
        const char *s = L->v[i];
        if (*s == ' ' || *s == '\t' || *s == '#' || *s == '-')
            continue;
        size_t kl = strcspn(s, ":\n");
        if (s[kl] != ':')
            continue;
        int q = (*s == '"' || *s == '\'') && kl >= 2 && s[kl - 1] == *s; /* "key": a quoted key */
        if (!key_is(s + q, kl - 2 * (size_t)q, opt))
            continue;
        const char *val = s + kl + 1;
        val += strspn(val, " \t");
        size_t vl = strcspn(val, "#\n");
        while (vl && (val[vl - 1] == ' ' || val[vl - 1] == '\t'))
            vl--;
        if (!vl && val[strspn(val, " \t#")] != '\n' && *val != '#' && *val)
            continue; /* a block value: left alone, the key added below overrides nothing */
        struct swift_strbuf b = {0};
        swift_strbuf_add(&b, s, (size_t)(val - s));
        if (val == s + kl + 1)
            swift_strbuf_adds(&b, " ");
        swift_strbuf_adds(&b, v);
        swift_strbuf_adds(&b, val + vl);
        line_set(L, i, b.s);
        free(b.s);
        return;
    }
    if (L->n && !strchr(L->v[L->n - 1], '\n')) {
        struct swift_strbuf b = {0};
        swift_strbuf_adds(&b, L->v[L->n - 1]);
        swift_strbuf_adds(&b, "\n");
        line_set(L, L->n - 1, b.s);
        free(b.s);
    }
    char kb[128], line[512];
    snprintf(line, sizeof(line), "%s: %s\n", key_spelling(opt, snake, kb, sizeof(kb)), v);
    lines_insert(L, L->n, line);
}

/* The same for a JSON file of one key per line; -1 when it is not laid out so. */
static int json_set(struct lines *L, const char *opt, const char *v, int snake)
{
    char val[300];
    if (is_number(v) || !strcmp(v, "true") || !strcmp(v, "false"))
        snprintf(val, sizeof(val), "%s", v);
    else
        snprintf(val, sizeof(val), "\"%s\"", v);
    for (size_t i = 0; i < L->n; i++) {
        const char *s = L->v[i], *k = s + strspn(s, " \t");
        if (*k != '"')
            continue;
        size_t kl = strcspn(k + 1, "\"");
        if (k[1 + kl] != '"' || !key_is(k + 1, kl, opt))
            continue;
        const char *c = k + 2 + kl;
        c += strspn(c, " \t");
        if (*c != ':')
            return -1;
        c++;
        c += strspn(c, " \t");
        size_t vl = strcspn(c, ",}\n");
        if (*c == '{' || *c == '[' || (*c == '"' && !strchr(c + 1, '"')))
            return -1;
        if (*c == '"')
            vl = (size_t)(strchr(c + 1, '"') - c) + 1;
        while (vl && (c[vl - 1] == ' ' || c[vl - 1] == '\t'))
            vl--;
        struct swift_strbuf b = {0};
        swift_strbuf_add(&b, s, (size_t)(c - s));
        swift_strbuf_adds(&b, val);
        swift_strbuf_adds(&b, c + vl);
        line_set(L, i, b.s);
        free(b.s);
        return 0;
    }
    /* a new key before the closing brace, the line before it given a comma */
    size_t close = L->n;
    while (close > 0 && L->v[close - 1][strspn(L->v[close - 1], " \t\n")] == 0)
        close--;
    if (!close || L->v[close - 1][strspn(L->v[close - 1], " \t")] != '}')
        return -1;
    close--;
    size_t prev = close;
    while (prev > 0 && L->v[prev - 1][strspn(L->v[prev - 1], " \t\n")] == 0)
        prev--;
    if (!prev)
        return -1;
    prev--;
    const char *ps = L->v[prev];
    size_t pl = strlen(ps);
    while (pl && (ps[pl - 1] == '\n' || ps[pl - 1] == ' ' || ps[pl - 1] == '\t'))
        pl--;
    if (!pl)
        return -1;
    int brace = ps[pl - 1] == '{';
    if (!brace && ps[pl - 1] != ',') {
        struct swift_strbuf b = {0};
        swift_strbuf_add(&b, ps, pl);
        swift_strbuf_adds(&b, ",");
        swift_strbuf_adds(&b, ps + pl);
        line_set(L, prev, b.s);
        free(b.s);
    }
    size_t ind = brace ? 0 : strspn(L->v[prev], " \t");
    char kb[128], line[600];
    snprintf(line,
             sizeof(line),
             "%.*s%s\"%s\": %s\n",
             (int)ind,
             L->v[prev],
             brace ? "  " : "",
             key_spelling(opt, snake, kb, sizeof(kb)),
             val);
    lines_insert(L, close, line);
    return 0;
}

/* ---------- unified diff ---------- */

static void diff_line(struct swift_strbuf *b, char tag, const char *s)
{
    swift_strbuf_add(b, &tag, 1);
    swift_strbuf_adds(b, s);
    if (!strchr(s, '\n'))
        swift_strbuf_adds(b, "\n\\ No newline at end of file\n");
}

/* The unified diff of a against b (LCS on lines) under the name `name`, appended to out;
 * 0 when they are the same. */
static int unified(struct swift_strbuf *out, const char *name, const struct lines *a,
                   const struct lines *b)
{
    size_t n = a->n, m = b->n;
    /* lcs[i][j]: the LCS length of a[i..] and b[j..] */
    unsigned *lcs = swift_xcalloc((n + 1) * (m + 1), sizeof(*lcs));
#define LCS(i, j) lcs[(i) * (m + 1) + (j)]
    for (size_t i = n; i-- > 0;)
        for (size_t j = m; j-- > 0;)
            LCS(i, j) = !strcmp(a->v[i], b->v[j])       ? LCS(i + 1, j + 1) + 1
                        : LCS(i + 1, j) > LCS(i, j + 1) ? LCS(i + 1, j)
                                                        : LCS(i, j + 1);
    /* the edit script: ' ', '-', '+' with their line indices */
    size_t cap = n + m + 1, k = 0;
    char *op = swift_xmalloc(cap);
    size_t *ia = swift_xmalloc(cap * sizeof(*ia)), *ib = swift_xmalloc(cap * sizeof(*ib));
    for (size_t i = 0, j = 0; i < n || j < m;) {
        if (i < n && j < m && !strcmp(a->v[i], b->v[j]))
            op[k] = ' ', ia[k] = i++, ib[k++] = j++;
        else if (i < n && (j == m || LCS(i + 1, j) >= LCS(i, j + 1)))
            op[k] = '-', ia[k] = i++, ib[k++] = j;
        else
            op[k] = '+', ia[k] = i, ib[k++] = j++;
    }
#undef LCS
    free(lcs);
    int any = 0;
    for (size_t s = 0; s < k;) {
        if (op[s] == ' ') {
            s++;
            continue;
        }
        /* a hunk: from PATCH_CONTEXT before the change to PATCH_CONTEXT after the last change
         * closer than 2 * PATCH_CONTEXT */
        size_t h0 = s > PATCH_CONTEXT ? s - PATCH_CONTEXT : 0, e = s;
        for (size_t t = s; t < k; t++) {
            if (op[t] != ' ')
                e = t;
            else if (t - e > 2 * PATCH_CONTEXT)
                break;
        }
        size_t h1 = e + 1 + PATCH_CONTEXT < k ? e + 1 + PATCH_CONTEXT : k;
        size_t na = 0, nb = 0;
        for (size_t t = h0; t < h1; t++)
            na += op[t] != '+', nb += op[t] != '-';
        if (!any) {
            char hd[2 * PATH_MAX + 32];
            snprintf(hd, sizeof(hd), "--- %s\n+++ %s\n", name, name);
            swift_strbuf_adds(out, hd);
            any = 1;
        }
        char hh[96];
        snprintf(hh,
                 sizeof(hh),
                 "@@ -%zu,%zu +%zu,%zu @@\n",
                 na ? ia[h0] + 1 : ia[h0],
                 na,
                 nb ? ib[h0] + 1 : ib[h0],
                 nb);
        swift_strbuf_adds(out, hh);
        for (size_t t = h0; t < h1; t++)
            diff_line(out, op[t], op[t] == '+' ? b->v[ib[t]] : a->v[ia[t]]);
        s = h1;
    }
    free(op);
    free(ia);
    free(ib);
    return any;
}

/* ---------- a bottleneck's patch ---------- */

/* The name the diff gives the config: as the run was given it when that is relative and
 * plain, else the resolved path relative to here, else its base name. */
static void config_name(const char *given, const char *resolved, char *out, size_t n)
{
    char cwd[PATH_MAX];
    if (given[0] != '/' && !strstr(given, "..")) {
        snprintf(out, n, "%s", given);
        return;
    }
    size_t cl = getcwd(cwd, sizeof(cwd)) ? strlen(cwd) : 0;
    if (cl && !strncmp(resolved, cwd, cl) && resolved[cl] == '/') {
        snprintf(out, n, "%s", resolved + cl + 1);
        return;
    }
    const char *slash = strrchr(resolved, '/');
    snprintf(out, n, "%s", slash ? slash + 1 : resolved);
}

/* Read the config the run recorded, checked against its sha256. Malloc'ed text, or NULL
 * with *why set. */
static char *config_text(json_t *cfg, char *why, size_t n)
{
    const char *given = swift_an_jstr(cfg, "path"), *res = swift_an_jstr(cfg, "resolved");
    const char *sha = swift_an_jstr(cfg, "sha256");
    const char *path = *res && access(res, R_OK) == 0 ? res : given;
    char *text = NULL;
    size_t len = 0;
    if (access(path, R_OK) != 0) { /* said in the report, not here */
        snprintf(why, n, "cannot read the run's config '%s': %s", path, strerror(errno));
        return NULL;
    }
    if (swift_read_file(path, (size_t)1 << 20, &text, &len) < 0) {
        snprintf(why, n, "cannot read the run's config '%s'", path);
        return NULL;
    }
    char hex[65];
    swift_sha256_hex(text, len, hex);
    if (!*sha || strcmp(hex, sha)) {
        snprintf(why,
                 n,
                 "%s has changed since the run (sha256 %.12s..., the run read %.12s...): no "
                 "patch against it; edit it by hand or re-run",
                 path,
                 hex,
                 *sha ? sha : "(not recorded)");
        free(text);
        return NULL;
    }
    if (strlen(text) != len) {
        snprintf(why, n, "%s: not a text file", path);
        free(text);
        return NULL;
    }
    return text;
}

/* The config file patched with ch.set: the diff into out, or -1 with *why. */
static int config_patch(struct swift_strbuf *out, json_t *cfg, json_t *set, char *why, size_t n)
{
    char *text = config_text(cfg, why, n);
    if (!text)
        return -1;
    const char *given = swift_an_jstr(cfg, "path");
    size_t gl = strlen(given);
    int json = gl > 5 && !strcmp(given + gl - 5, ".json");
    struct lines a, b;
    lines_split(&a, text);
    lines_split(&b, text);
    free(text);
    int rc = 0;
    if (a.n > PATCH_MAX_LINES) {
        snprintf(why, n, "%s: longer than %d lines, not patched", given, PATCH_MAX_LINES);
        rc = -1;
    }
    int snake = snake_style(&a, json);
    const char *opt;
    json_t *v;
    json_object_foreach(set, opt, v)
    {
        if (rc)
            break;
        if (!json)
            yaml_set(&b, opt, json_string_value(v), snake);
        else if (json_set(&b, opt, json_string_value(v), snake) < 0) {
            snprintf(why, n, "%s: not one key per line; set %s by hand", given, opt);
            rc = -1;
        }
    }
    if (!rc) {
        char name[PATH_MAX];
        config_name(given, swift_an_jstr(cfg, "resolved"), name, sizeof(name));
        unified(out, name, &a, &b);
    }
    lines_free(&a);
    lines_free(&b);
    return rc;
}

/* The command line of a config run with the changes on top of what it was given (so it stays
 * a run of the same file), its output and trace given new names. */
static char *config_command(json_t *given, json_t *eff, json_t *ch)
{
    const char *drop = swift_an_jstr(ch, "drop");
    json_t *a = json_incref(given);
    for (const char *d = drop; *d; d++) {
        json_t *x = swift_an_argv_drop_short(a, *d);
        json_decref(a);
        a = x;
    }
    static const char *const outs[] = {"output-dir", "output", "trace"};
    for (int k = 0; k < 3; k++) {
        const char *v = opt_value(eff, outs[k]);
        if (v && !opt_value(given, outs[k]) && !(k < 2 && has_short(given, 'o'))) {
            json_t *x = swift_an_argv_set(a, outs[k], v);
            json_decref(a);
            a = x;
        }
    }
    const char *opt;
    json_t *v;
    json_object_foreach(json_object_get(ch, "set"), opt, v)
    {
        json_t *x = swift_an_argv_set(a, opt, json_string_value(v));
        json_decref(a);
        a = x;
    }
    json_t *f = swift_an_argv_fresh(a);
    char *q = swift_an_argv_quote(f);
    json_decref(f);
    json_decref(a);
    struct swift_strbuf b = {0};
    const char *name;
    json_object_foreach(json_object_get(ch, "env"), name, v)
    {
        swift_strbuf_adds(&b, name);
        swift_strbuf_adds(&b, "=");
        swift_strbuf_adds(&b, json_string_value(v));
        swift_strbuf_adds(&b, " ");
    }
    swift_strbuf_adds(&b, q);
    free(q);
    return b.s;
}

static void command_patch(struct swift_strbuf *out, json_t *argv, const char *cmd)
{
    char *old = swift_an_argv_quote(argv);
    struct lines a, b;
    struct swift_strbuf o = {0}, n = {0};
    swift_strbuf_adds(&o, old);
    swift_strbuf_adds(&o, "\n");
    swift_strbuf_adds(&n, cmd);
    swift_strbuf_adds(&n, "\n");
    lines_split(&a, o.s);
    lines_split(&b, n.s);
    unified(out, SWIFT_AN_PATCH_COMMAND_FILE, &a, &b);
    lines_free(&a);
    lines_free(&b);
    free(old);
    free(o.s);
    free(n.s);
}

/* One bottleneck's "patch" object (or nothing when its remedy changes no option). */
static void attach_one(json_t *bn, const struct swift_an_source *src)
{
    const char *cmd = json_string_value(json_object_get(bn, "command"));
    if (!cmd || !src->argv)
        return;
    json_t *env = json_object();
    json_t *nw = split_words(cmd, env);
    json_t *ch = changes_of(src->argv, nw, env);
    json_decref(nw);
    json_t *set = json_object_get(ch, "set");
    int plain = !*swift_an_jstr(ch, "drop") && !json_object_size(json_object_get(ch, "env"));
    if (!json_object_size(set) && plain) {
        json_decref(ch);
        return;
    }
    json_t *pt = json_object();
    struct swift_strbuf d = {0};
    swift_strbuf_adds(&d, "");
    if (src->config) {
        char *c = config_command(src->argv_given, src->argv, ch);
        json_object_set_new(bn, "command", json_string(c));
        free(c);
        cmd = json_string_value(json_object_get(bn, "command"));
    }
    char why[PATH_MAX + 256];
    if (src->config && plain) {
        json_object_set_new(pt, "file", json_string(swift_an_jstr(src->config, "path")));
        if (config_patch(&d, src->config, set, why, sizeof(why)) < 0)
            json_object_set_new(pt, "error", json_string(why));
        else
            json_object_set_new(pt, "diff", json_string(d.s));
    } else {
        json_object_set_new(pt, "file", json_string(SWIFT_AN_PATCH_COMMAND_FILE));
        command_patch(&d, src->argv_given ? src->argv_given : src->argv, cmd);
        json_object_set_new(pt, "diff", json_string(d.s));
    }
    json_object_set_new(pt, "changes", json_incref(set));
    json_object_set_new(bn, "patch", pt);
    free(d.s);
    json_decref(ch);
}

void swift_an_patch_attach(json_t *list, size_t from, const struct swift_an_source *src)
{
    for (size_t i = from; i < json_array_size(list); i++)
        attach_one(json_array_get(list, i), src);
}

int swift_an_patch_emit(FILE *fp, json_t *report, int all)
{
    size_t i, shown = 0;
    json_t *b;
    json_array_foreach(json_object_get(report, "bottlenecks"), i, b)
    {
        json_t *pt = json_object_get(b, "patch");
        if (!pt)
            continue;
        if (json_object_get(pt, "error")) {
            swift_error("%s: %s", swift_an_jstr(b, "rule"), swift_an_jstr(pt, "error"));
            if (!all)
                return -1;
            continue;
        }
        if (all)
            fprintf(fp,
                    "# %zu. %s (%s) — %s\n",
                    i + 1,
                    swift_an_jstr(b, "rule"),
                    swift_an_jstr(b, "severity"),
                    swift_an_jstr(b, "process"));
        fputs(swift_an_jstr(pt, "diff"), fp);
        shown++;
        if (!all)
            break;
    }
    if (!shown) {
        swift_error("no bottleneck with a concrete change to patch (see the report's remedies)");
        return -1;
    }
    return 0;
}

int swift_an_patch_write(json_t *report, const char *path, int mode)
{
    if (!path || !strcmp(path, "-"))
        return swift_an_patch_emit(stdout, report, mode == 2);
    struct swift_atomic af;
    if (swift_atomic_open(&af, path) < 0)
        return -1;
    if (swift_an_patch_emit(af.fp, report, mode == 2) < 0) {
        swift_atomic_abort(&af);
        return -1;
    }
    return swift_atomic_commit(&af);
}
