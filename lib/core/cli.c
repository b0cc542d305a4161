#include "lib/core/cli.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "lib/core/banned.h"

enum { KEY_HELP = 0x300, KEY_VERSION, KEY_LIST };

static const struct swift_option builtin[] = {
    {"help", KEY_HELP, SWIFT_ARG_NONE, NULL, "display this help and exit", NULL},
    {"version", KEY_VERSION, SWIFT_ARG_NONE, NULL, "output version information and exit", NULL},
    {"list-options", KEY_LIST, SWIFT_ARG_NONE, NULL, NULL, NULL},
    {0}};

/* ---------- numbers ---------- */

int swift_parse_long(const char *s, long min, long max, long *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

int swift_parse_double(const char *s, double *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || end == s || isnan(v))
        return -1;
    *out = v;
    return 0;
}

int swift_parse_size(const char *s, unsigned long long *out)
{
    if (!s || !*s || *s == '-')
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0)
        return -1;
    double mul = 1;
    switch (*end) {
    case 'k':
    case 'K':
        mul = 1024.0;
        end++;
        break;
    case 'm':
    case 'M':
        mul = 1024.0 * 1024;
        end++;
        break;
    case 'g':
    case 'G':
        mul = 1024.0 * 1024 * 1024;
        end++;
        break;
    case 't':
    case 'T':
        mul = 1024.0 * 1024 * 1024 * 1024;
        end++;
        break;
    default:
        break;
    }
    if (mul > 1 && *end == 'i')
        end++;
    if (mul > 1 && (*end == 'B' || *end == 'b'))
        end++;
    if (mul == 1 && (*end == 'B' || *end == 'b'))
        end++;
    if (*end)
        return -1;
    *out = (unsigned long long)(v * mul + 0.5);
    return 0;
}

/* ---------- option tables ---------- */

/* Find the option whose name (or alias) matches `name` with '-' and '_' treated as equal. */
static int name_eq(const char *a, size_t alen, const char *b)
{
    size_t i = 0;
    for (; i < alen && b[i]; i++) {
        char x = a[i] == '_' ? '-' : a[i], y = b[i] == '_' ? '-' : b[i];
        if (x != y)
            return 0;
    }
    return i == alen && !b[i];
}

static const struct swift_option *find_option(const struct swift_command *cmd, const char *name,
                                              size_t len)
{
    for (const struct swift_option *o = cmd->options; o && o->name; o++) {
        if (name_eq(name, len, o->name))
            return o;
        for (const char *a = o->aliases; a && *a;) {
            const char *c = strchr(a, ',');
            size_t al = c ? (size_t)(c - a) : strlen(a);
            char tmp[128];
            if (al < sizeof(tmp)) {
                memcpy(tmp, a, al);
                tmp[al] = 0;
                if (name_eq(name, len, tmp))
                    return o;
            }
            a = c ? c + 1 : a + al;
        }
    }
    return NULL;
}

struct longtab {
    struct option *v;
    char **names; /* owned strings for generated underscore names and aliases */
    int n, cap, nnames;
};

static void add_long(struct longtab *t, const char *name, int has_arg, int key, int owned)
{
    if (t->n + 1 >= t->cap) {
        t->cap = t->cap ? 2 * t->cap : 64;
        t->v = realloc(t->v, (size_t)t->cap * sizeof(*t->v));
        t->names = realloc(t->names, (size_t)t->cap * sizeof(*t->names));
        if (!t->v || !t->names)
            abort();
    }
    const char *stored = name;
    if (owned) {
        char *dup = strdup(name);
        if (!dup)
            abort();
        t->names[t->nnames++] = dup;
        stored = dup;
    }
    t->v[t->n++] = (struct option){stored, has_arg, NULL, key};
    t->v[t->n] = (struct option){0};
}

static void add_names(struct longtab *t, const struct swift_option *o)
{
    add_long(t, o->name, o->has_arg, o->key, 0);
    if (strchr(o->name, '-')) {
        char u[128];
        snprintf(u, sizeof(u), "%s", o->name);
        for (char *p = u; *p; p++)
            if (*p == '-')
                *p = '_';
        add_long(t, u, o->has_arg, o->key, 1);
    }
    for (const char *a = o->aliases; a && *a;) {
        const char *c = strchr(a, ',');
        size_t al = c ? (size_t)(c - a) : strlen(a);
        char tmp[128];
        if (al < sizeof(tmp)) {
            memcpy(tmp, a, al);
            tmp[al] = 0;
            add_long(t, tmp, o->has_arg, o->key, 1);
        }
        a = c ? c + 1 : a + al;
    }
}

void swift_cli_help(const struct swift_command *cmd, FILE *fp)
{
    fprintf(fp, "Usage: %s %s\n", cmd->name, cmd->usage ? cmd->usage : "[OPTION]...");
    if (cmd->summary)
        fprintf(fp,
                "%c%s.\n",
                cmd->summary[0] >= 'a' && cmd->summary[0] <= 'z' ? cmd->summary[0] - 'a' + 'A'
                                                                 : cmd->summary[0],
                cmd->summary + 1);
    fprintf(fp, "\nOptions:\n");
    const struct swift_option *tabs[2] = {cmd->options, builtin};
    for (int t = 0; t < 2; t++) {
        for (const struct swift_option *o = tabs[t]; o && o->name; o++) {
            if (!o->help)
                continue;
            char left[96];
            int n = 0;
            if (o->key > 0 && o->key < 128)
                n = snprintf(left, sizeof(left), "  -%c, --%s", o->key, o->name);
            else
                n = snprintf(left, sizeof(left), "      --%s", o->name);
            if (o->argname && n > 0 && (size_t)n < sizeof(left))
                snprintf(left + n,
                         sizeof(left) - (size_t)n,
                         o->has_arg == SWIFT_ARG_OPTIONAL ? "[=%s]" : "=%s",
                         o->argname);
            if (strlen(left) < 30)
                fprintf(fp, "%-30s%s\n", left, o->help);
            else
                fprintf(fp, "%s\n%30s%s\n", left, "", o->help);
        }
    }
    if (cmd->description)
        fprintf(fp, "\n%s\n", cmd->description);
    if (cmd->examples) {
        size_t n = strlen(cmd->examples);
        fprintf(fp,
                "\n%s%s%s",
                strncmp(cmd->examples, "Examples:", 9) ? "Examples:\n" : "",
                cmd->examples,
                n && cmd->examples[n - 1] == '\n' ? "" : "\n");
    }
    fprintf(fp, "\nOptions also accept ms-swift's spelling with '_' (--max_length).\n");
}

static void list_options(const struct swift_command *cmd)
{
    const struct swift_option *tabs[2] = {cmd->options, builtin};
    for (int t = 0; t < 2; t++)
        for (const struct swift_option *o = tabs[t]; o && o->name; o++) {
            const char *eq = o->has_arg == SWIFT_ARG_REQUIRED ? "=" : "";
            printf("--%s%s\n", o->name, eq);
            /* ms-swift's spellings too, so completions and docs checks know them */
            for (const char *a = o->aliases; a && *a;) {
                const char *c = strchr(a, ',');
                int n = c ? (int)(c - a) : (int)strlen(a);
                printf("--%.*s%s\n", n, a, eq);
                a = c ? c + 1 : a + n;
            }
        }
}

static int is_config_path(const char *s)
{
    if (!s || s[0] == '-')
        return 0;
    size_t n = strlen(s);
    return (n > 5 && !strcmp(s + n - 5, ".yaml")) || (n > 4 && !strcmp(s + n - 4, ".yml")) ||
           (n > 5 && !strcmp(s + n - 5, ".json"));
}

static char **expanded, **expanded_argv;
static int nexpanded;

static void free_words(char **w, int n)
{
    for (int i = 0; i < n; i++)
        free(w[i]);
    free(w);
}

static void release_expanded(void)
{
    free_words(expanded, nexpanded);
    free(expanded_argv);
    expanded = expanded_argv = NULL;
    nexpanded = 0;
}

int swift_cli_parse(const struct swift_command *cmd, int argc, char **argv, swift_option_fn fn,
                    void *ctx, int *argi)
{
    /* A config file as the first argument expands in front of the remaining arguments. */
    int orig_argc = 0;
    char **orig_argv = NULL;
    if (argc > 1 && is_config_path(argv[1])) {
        char **words = NULL;
        int nwords = 0;
        int rc = swift_cli_config_expand(cmd, argv[1], &words, &nwords);
        if (rc < 0) {
            free_words(words, nwords);
            return SWIFT_EXIT_FAIL;
        }
        char **nargv = calloc((size_t)(argc + nwords + 1), sizeof(char *));
        if (!nargv)
            abort();
        nargv[0] = argv[0];
        memcpy(nargv + 1, words, (size_t)nwords * sizeof(char *));
        memcpy(nargv + 1 + nwords, argv + 2, (size_t)(argc - 2) * sizeof(char *));
        /* The expanded words live until exit (or the next parse), as argv does. */
        release_expanded();
        expanded = words;
        nexpanded = nwords;
        expanded_argv = nargv;
        static int registered;
        if (!registered++)
            atexit(release_expanded);
        orig_argc = argc;
        orig_argv = argv;
        argc = argc - 1 + nwords;
        argv = nargv;
    }

    struct longtab lt = {0};
    char shorts[256];
    size_t ns = 0;
    shorts[ns++] = '+'; /* stop at the first positional argument? no: permute like GNU tools */
    ns = 0;
    shorts[ns++] = ':';
    const struct swift_option *tabs[2] = {cmd->options, builtin};
    for (int t = 0; t < 2; t++)
        for (const struct swift_option *o = tabs[t]; o && o->name; o++) {
            add_names(&lt, o);
            if (o->key > 0 && o->key < 128 && ns + 3 < sizeof(shorts)) {
                shorts[ns++] = (char)o->key;
                if (o->has_arg == SWIFT_ARG_REQUIRED)
                    shorts[ns++] = ':';
                else if (o->has_arg == SWIFT_ARG_OPTIONAL) {
                    shorts[ns++] = ':';
                    shorts[ns++] = ':';
                }
            }
        }
    shorts[ns] = 0;

    int rc = -1;
    optind = 0; /* full reinitialisation (GNU), so tests can parse several times */
    opterr = 0;
    for (;;) {
        int li = -1;
        int c = getopt_long(argc, argv, shorts, lt.v, &li);
        if (c == -1)
            break;
        if (c == '?') {
            if (optopt && optopt < 128)
                rc = swift_usage("invalid option -- '%c'", optopt);
            else
                rc = swift_usage("unrecognized option '%s'", argv[optind - 1]);
            break;
        }
        if (c == ':') {
            rc = swift_usage("option '%s' requires an argument", argv[optind - 1]);
            break;
        }
        if (c == KEY_HELP) {
            swift_cli_help(cmd, stdout);
            rc = 0;
            break;
        }
        if (c == KEY_VERSION) {
            printf("%s (swift-tools) %s\n", cmd->name, SWIFT_VERSION);
            rc = 0;
            break;
        }
        if (c == KEY_LIST) {
            list_options(cmd);
            rc = 0;
            break;
        }
        if (fn(ctx, c, optarg)) {
            rc = SWIFT_EXIT_USAGE;
            break;
        }
    }
    if (rc < 0) {
        *argi = optind;
        if (orig_argv) {
            /* Hand the positional arguments back in the caller's argv, at its end. */
            int npos = argc - optind;
            memmove(orig_argv + orig_argc - npos, argv + optind, (size_t)npos * sizeof(char *));
            *argi = orig_argc - npos;
        }
    }
    if (rc == 0) /* --help, --version, --list-options: their output must have arrived */
        rc = swift_close_stdout(0);
    for (int i = 0; i < lt.nnames; i++)
        free(lt.names[i]);
    free(lt.names);
    free(lt.v);
    return rc;
}

/* ---------- config files ---------- */

struct words {
    char ***v;
    int *n;
    int cap;
};

static void push_word(struct words *w, const char *s)
{
    if (*w->n + 1 >= w->cap) {
        w->cap = w->cap ? 2 * w->cap : 32;
        *w->v = realloc(*w->v, (size_t)w->cap * sizeof(char *));
        if (!*w->v)
            abort();
    }
    char *d = strdup(s);
    if (!d)
        abort();
    (*w->v)[(*w->n)++] = d;
}

static int truthy(const char *v)
{
    return !strcmp(v, "true") || !strcmp(v, "True") || !strcmp(v, "yes") || !strcmp(v, "1") ||
           !strcmp(v, "on");
}
static int falsy(const char *v)
{
    return !strcmp(v, "false") || !strcmp(v, "False") || !strcmp(v, "no") || !strcmp(v, "0") ||
           !strcmp(v, "off") || !strcmp(v, "null") || !strcmp(v, "~") || !*v;
}

/* One key: value pair at the top level. */
static int emit_pair(const struct swift_command *cmd, const char *path, long line, const char *key,
                     const char *value, struct words *w)
{
    const struct swift_option *o = find_option(cmd, key, strlen(key));
    if (!o)
        return swift_error_at(path, line, "unknown option '%s'", key);
    char flag[160];
    snprintf(flag, sizeof(flag), "--%s", o->name);
    if (o->has_arg == SWIFT_ARG_NONE) {
        if (truthy(value))
            push_word(w, flag);
        else if (!falsy(value))
            return swift_error_at(
                path, line, "option '%s' takes true or false, not '%s'", key, value);
        return 0;
    }
    if (!strcmp(value, "null") || !strcmp(value, "~"))
        return 0;
    push_word(w, flag);
    push_word(w, value);
    return 0;
}

/* profiler: {enabled, wait_steps, warmup_steps, active_steps, repeat, output_dir, record_shapes,
 * profile_memory, with_stack} → --profile wait=..,warmup=..,active=..[,repeat=..][,shapes=1]...
 * and --trace output_dir/ */
struct profcfg {
    int enabled;
    char spec[256];
    char outdir[1024];
};

static int prof_key(struct profcfg *p, const char *path, long line, const char *k, const char *v)
{
    static const struct {
        const char *key, *name;
    } map[] = {{"wait_steps", "wait"},
               {"warmup_steps", "warmup"},
               {"active_steps", "active"},
               {"repeat", "repeat"},
               {"skip_first", "skip_first"},
               {"record_shapes", "shapes"},
               {"profile_memory", "memory"},
               {"with_stack", "stack"},
               {"with_flops", "flops"}};
    if (name_eq(k, strlen(k), "enabled")) {
        p->enabled = truthy(v);
        return 0;
    }
    if (name_eq(k, strlen(k), "output_dir")) {
        snprintf(p->outdir, sizeof(p->outdir), "%s%s", v, *v && v[strlen(v) - 1] == '/' ? "" : "/");
        return 0;
    }
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
        if (!name_eq(k, strlen(k), map[i].key))
            continue;
        const char *val = v;
        if (truthy(v) && strcmp(map[i].name, "wait") && strcmp(map[i].name, "warmup") &&
            strcmp(map[i].name, "active") && strcmp(map[i].name, "repeat") &&
            strcmp(map[i].name, "skip_first"))
            val = "1";
        else if (falsy(v) && strcmp(v, "0"))
            val = "0";
        size_t n = strlen(p->spec);
        snprintf(p->spec + n, sizeof(p->spec) - n, "%s%s=%s", n ? "," : "", map[i].name, val);
        return 0;
    }
    return swift_error_at(path, line, "unknown profiler key '%s'", k);
}

static int prof_finish(const struct swift_command *cmd, const char *path, struct profcfg *p,
                       struct words *w)
{
    if (!p->enabled)
        return 0;
    if (!find_option(cmd, "profile", 7))
        return swift_error_at(path, 0, "%s does not take a profiler section", cmd->name);
    push_word(w, "--profile");
    push_word(w, p->spec[0] ? p->spec : "wait=1,warmup=1,active=3");
    if (p->outdir[0]) {
        push_word(w, "--trace");
        push_word(w, p->outdir);
    }
    return 0;
}

static int expand_json(const struct swift_command *cmd, const char *path, struct words *w)
{
    json_error_t je;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return swift_error_at(path, je.line, "%s", je.text);
    if (!json_is_object(root)) {
        json_decref(root);
        return swift_error_at(path, 1, "config must be an object of options");
    }
    int rc = 0;
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val)
    {
        char buf[4096];
        if (!strcmp(key, "profiler") && json_is_object(val)) {
            struct profcfg p = {0};
            const char *k2;
            json_t *v2;
            json_object_foreach(val, k2, v2)
            {
                char *s = json_is_string(v2) ? strdup(json_string_value(v2))
                                             : json_dumps(v2, JSON_ENCODE_ANY);
                if (!s)
                    abort();
                rc = prof_key(&p, path, 0, k2, s);
                free(s);
                if (rc)
                    break;
            }
            if (!rc)
                rc = prof_finish(cmd, path, &p, w);
        } else if (json_is_array(val)) {
            size_t i, n = 0;
            json_t *e;
            buf[0] = 0;
            json_array_foreach(val, i, e)
            {
                char *s = json_is_string(e) ? strdup(json_string_value(e))
                                            : json_dumps(e, JSON_ENCODE_ANY);
                if (!s)
                    abort();
                n += (size_t)snprintf(
                    buf + n, n < sizeof(buf) ? sizeof(buf) - n : 0, "%s%s", i ? "," : "", s);
                free(s);
            }
            rc = emit_pair(cmd, path, 0, key, buf, w);
        } else if (json_is_object(val)) {
            rc = swift_error_at(path, 0, "option '%s' cannot be an object", key);
        } else {
            char *s = json_is_string(val) ? strdup(json_string_value(val))
                                          : json_dumps(val, JSON_ENCODE_ANY);
            if (!s)
                abort();
            rc = emit_pair(cmd, path, 0, key, s, w);
            free(s);
        }
        if (rc)
            break;
    }
    json_decref(root);
    return rc ? -1 : 0;
}

static int expand_yaml(const struct swift_command *cmd, const char *path, struct words *w)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return swift_error_errno("cannot open '%s'", path);
    yaml_parser_t yp;
    yaml_document_t doc;
    yaml_parser_initialize(&yp);
    yaml_parser_set_input_file(&yp, fp);
    int rc = 0;
    if (!yaml_parser_load(&yp, &doc)) {
        rc = swift_error_at(
            path, (long)yp.problem_mark.line + 1, "%s", yp.problem ? yp.problem : "invalid YAML");
        yaml_parser_delete(&yp);
        fclose(fp);
        return rc;
    }
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root) {
        rc = 0; /* empty file: no options */
        goto out;
    }
    if (root->type != YAML_MAPPING_NODE) {
        rc = swift_error_at(
            path, (long)root->start_mark.line + 1, "config must be a mapping of options");
        goto out;
    }
    for (yaml_node_pair_t *pr = root->data.mapping.pairs.start; pr < root->data.mapping.pairs.top;
         pr++) {
        yaml_node_t *k = yaml_document_get_node(&doc, pr->key);
        yaml_node_t *v = yaml_document_get_node(&doc, pr->value);
        long line = (long)k->start_mark.line + 1;
        if (k->type != YAML_SCALAR_NODE) {
            rc = swift_error_at(path, line, "option names must be plain words");
            break;
        }
        const char *key = (const char *)k->data.scalar.value;
        if (v->type == YAML_SCALAR_NODE) {
            rc = emit_pair(cmd, path, line, key, (const char *)v->data.scalar.value, w);
        } else if (v->type == YAML_SEQUENCE_NODE) {
            char buf[4096];
            size_t n = 0;
            buf[0] = 0;
            for (yaml_node_item_t *it = v->data.sequence.items.start;
                 it < v->data.sequence.items.top;
                 it++) {
                yaml_node_t *e = yaml_document_get_node(&doc, *it);
                if (e->type != YAML_SCALAR_NODE) {
                    rc = swift_error_at(path,
                                        (long)e->start_mark.line + 1,
                                        "list items of '%s' must be scalars",
                                        key);
                    break;
                }
                n += (size_t)snprintf(buf + n,
                                      n < sizeof(buf) ? sizeof(buf) - n : 0,
                                      "%s%s",
                                      n ? "," : "",
                                      (const char *)e->data.scalar.value);
            }
            if (!rc)
                rc = emit_pair(cmd, path, line, key, buf, w);
        } else if (!strcmp(key, "profiler")) {
            struct profcfg p = {0};
            for (yaml_node_pair_t *q = v->data.mapping.pairs.start;
                 q < v->data.mapping.pairs.top && !rc;
                 q++) {
                yaml_node_t *k2 = yaml_document_get_node(&doc, q->key);
                yaml_node_t *v2 = yaml_document_get_node(&doc, q->value);
                if (k2->type != YAML_SCALAR_NODE || v2->type != YAML_SCALAR_NODE) {
                    rc = swift_error_at(
                        path, (long)k2->start_mark.line + 1, "profiler keys take plain values");
                    break;
                }
                rc = prof_key(&p,
                              path,
                              (long)k2->start_mark.line + 1,
                              (const char *)k2->data.scalar.value,
                              (const char *)v2->data.scalar.value);
            }
            if (!rc)
                rc = prof_finish(cmd, path, &p, w);
        } else {
            rc = swift_error_at(path, line, "option '%s' cannot be a mapping", key);
        }
        if (rc)
            break;
    }
out:
    yaml_document_delete(&doc);
    yaml_parser_delete(&yp);
    fclose(fp);
    return rc ? -1 : 0;
}

int swift_cli_config_expand(const struct swift_command *cmd, const char *path, char ***words,
                            int *nwords)
{
    struct words w = {words, nwords, *nwords};
    size_t n = strlen(path);
    if (n > 5 && !strcmp(path + n - 5, ".json"))
        return expand_json(cmd, path, &w);
    return expand_yaml(cmd, path, &w);
}
