#include "lib/core/cli.h"
#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "lib/core/banned.h"

enum { KEY_HELP = 1, KEY_VERSION, KEY_LIST };

static const struct swift_option builtin[] = {
    SWIFT_OPT_IGNORE(0, "help", NULL, "display this help and exit", .value = KEY_HELP),
    SWIFT_OPT_IGNORE(0, "version", NULL, "output version information and exit",
                     .value = KEY_VERSION),
    SWIFT_OPT_IGNORE(0, "list-options", NULL, NULL, .value = KEY_LIST),
    SWIFT_OPT_END};

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

static int takes_arg(const struct swift_option *o)
{
    if (!o->argname)
        return no_argument;
    return o->flags & SWIFT_OPT_OPTARG ? optional_argument : required_argument;
}

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

/* The next name of a comma-separated alias list (*a, advanced) into buf: 1, or 0 at the end.
 * A name that does not fit buf is skipped. */
static int next_alias(const char **a, char *buf, size_t cap)
{
    while (*a && **a) {
        const char *start = *a, *c = strchr(start, ',');
        size_t n = c ? (size_t)(c - start) : strlen(start);
        *a = c ? c + 1 : start + n;
        if (n < cap) {
            memcpy(buf, start, n);
            buf[n] = 0;
            return 1;
        }
    }
    return 0;
}

static const struct swift_option *find_option(const struct swift_command *cmd, const char *name,
                                              size_t len)
{
    char tmp[128];
    for (const struct swift_option *o = cmd->options; o && o->type; o++) {
        if (name_eq(name, len, o->name))
            return o;
        for (const char *a = o->aliases; next_alias(&a, tmp, sizeof(tmp));)
            if (name_eq(name, len, tmp))
                return o;
    }
    return NULL;
}

/* Does the entry fit its field? A mismatch is a bug in the command's table. */
static int entry_ok(const struct swift_option *o)
{
    enum swift_field_type f = o->field;
    int arg = o->argname != NULL;
    switch (o->type) {
    case SWIFT_OPTION_SET:
        return !arg && f == SWIFT_FIELD_INT;
    case SWIFT_OPTION_STRING:
    case SWIFT_OPTION_PATH:
        return arg && f == SWIFT_FIELD_STRING;
    case SWIFT_OPTION_INT:
        return arg && f >= SWIFT_FIELD_INT && f <= SWIFT_FIELD_ULLONG && o->min <= o->max;
    case SWIFT_OPTION_DOUBLE:
        return arg && f == SWIFT_FIELD_DOUBLE;
    case SWIFT_OPTION_SIZE:
        return arg && (f == SWIFT_FIELD_ULONG || f == SWIFT_FIELD_ULLONG);
    case SWIFT_OPTION_ENUM:
        return arg && f == SWIFT_FIELD_INT && (o->choices != NULL) != (o->lookup != NULL);
    case SWIFT_OPTION_CALLBACK:
        return o->callback != NULL;
    case SWIFT_OPTION_IGNORE:
        return 1;
    case SWIFT_OPTION_END:
        break;
    }
    return 0;
}

/* Expand a message template: {name}, {arg}, {min}, {max}. */
static void expand_error(char *out, size_t cap, const char *tmpl, const struct swift_option *o,
                         const char *arg)
{
    size_t n = 0;
    out[0] = 0;
    for (const char *p = tmpl; *p && n + 1 < cap;) {
        char num[64] = "";
        const char *sub = NULL;
        size_t skip = 0;
        int dbl = o->type == SWIFT_OPTION_DOUBLE;
        if (!strncmp(p, "{name}", 6))
            sub = o->name, skip = 6;
        else if (!strncmp(p, "{arg}", 5))
            sub = arg ? arg : "", skip = 5;
        else if (!strncmp(p, "{min}", 5) || !strncmp(p, "{max}", 5)) {
            int lo = p[2] == 'i';
            if (dbl)
                snprintf(num, sizeof(num), "%g", lo ? o->dmin : o->dmax);
            else
                snprintf(num, sizeof(num), "%ld", lo ? o->min : o->max);
            sub = num, skip = 5;
        }
        if (sub) {
            n += (size_t)snprintf(out + n, cap - n, "%s", sub);
            if (n >= cap)
                n = cap - 1;
            p += skip;
        } else {
            out[n++] = *p++;
            out[n] = 0;
        }
    }
}

/* Report a bad value of o in the words its table chose; returns SWIFT_EXIT_USAGE. */
static int bad_value(const struct swift_command *cmd, const struct swift_option *o, const char *arg,
                     int range)
{
    const char *tmpl = range && o->range_error ? o->range_error : o->error;
    if (!tmpl && o->type == SWIFT_OPTION_INT)
        tmpl = cmd->int_error;
    if (!tmpl && o->type == SWIFT_OPTION_DOUBLE)
        tmpl = cmd->number_error;
    if (!tmpl)
        tmpl = "invalid argument '{arg}' for '--{name}'";
    char msg[1024];
    expand_error(msg, sizeof(msg), tmpl, o, arg);
    return swift_usage("%s", msg);
}

static void store_long(void *p, enum swift_field_type f, long v)
{
    switch (f) {
    case SWIFT_FIELD_INT:
        *(int *)p = (int)v;
        break;
    case SWIFT_FIELD_LONG:
        *(long *)p = v;
        break;
    case SWIFT_FIELD_ULONG:
        *(unsigned long *)p = (unsigned long)v;
        break;
    case SWIFT_FIELD_ULLONG:
        *(unsigned long long *)p = (unsigned long long)v;
        break;
    default:
        break;
    }
}

static int store_number(const struct swift_command *cmd, const struct swift_option *o, void *p,
                        const char *arg)
{
    if (o->type == SWIFT_OPTION_INT) {
        long v;
        if (swift_parse_long(arg, LONG_MIN, LONG_MAX, &v) < 0)
            return bad_value(cmd, o, arg, 0);
        if (v < o->min || v > o->max)
            return bad_value(cmd, o, arg, 1);
        store_long(p, o->field, v);
        return 0;
    }
    if (o->type == SWIFT_OPTION_SIZE) {
        unsigned long long v;
        if (swift_parse_size(arg, &v) < 0 || v < (unsigned long long)o->min)
            return bad_value(cmd, o, arg, 0);
        if (o->field == SWIFT_FIELD_ULONG)
            *(unsigned long *)p = (unsigned long)v;
        else
            *(unsigned long long *)p = v;
        return 0;
    }
    double d;
    if (swift_parse_double(arg, &d) < 0)
        return bad_value(cmd, o, arg, 0);
    int lo = o->flags & SWIFT_OPT_OPEN_MIN ? d > o->dmin : d >= o->dmin;
    int hi = o->flags & SWIFT_OPT_OPEN_MAX ? d < o->dmax : d <= o->dmax;
    if (!lo || !hi)
        return bad_value(cmd, o, arg, 1);
    *(double *)p = d;
    return 0;
}

static const struct swift_choice *find_choice(const struct swift_choice *c, const char *arg)
{
    for (; c->name; c++)
        if (!strcmp(arg, c->name))
            return c;
    return NULL;
}

/* Store one occurrence of o (argument arg, NULL when none) into opts. 0 or SWIFT_EXIT_USAGE. */
static int store(const struct swift_command *cmd, const struct swift_option *o, void *opts,
                 const char *arg)
{
    void *p = swift_option_field(o, opts);
    switch (o->type) {
    case SWIFT_OPTION_SET:
        *(int *)p = o->value;
        return 0;
    case SWIFT_OPTION_STRING:
    case SWIFT_OPTION_PATH:
        if (o->choices && !find_choice(o->choices, arg))
            return bad_value(cmd, o, arg, 0);
        *(const char **)p = arg;
        return 0;
    case SWIFT_OPTION_INT:
    case SWIFT_OPTION_DOUBLE:
    case SWIFT_OPTION_SIZE:
        return store_number(cmd, o, p, arg);
    case SWIFT_OPTION_ENUM: {
        const struct swift_choice *c = o->choices ? find_choice(o->choices, arg) : NULL;
        int v = o->lookup ? o->lookup(arg) : c ? c->value : -1;
        if (o->lookup ? v < 0 : !c)
            return bad_value(cmd, o, arg, 0);
        *(int *)p = v;
        return 0;
    }
    case SWIFT_OPTION_CALLBACK:
        return o->callback(o, opts, arg) ? SWIFT_EXIT_USAGE : 0;
    case SWIFT_OPTION_IGNORE:
    case SWIFT_OPTION_END:
        break;
    }
    return 0;
}

int swift_cli_quiet(const struct swift_option *opt, void *opts, const char *arg)
{
    (void)opt, (void)opts, (void)arg;
    swift_set_quiet(1);
    return 0;
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
        t->v = swift_xrealloc(t->v, (size_t)t->cap * sizeof(*t->v));
        t->names = swift_xrealloc(t->names, (size_t)t->cap * sizeof(*t->names));
    }
    const char *stored = name;
    if (owned) {
        char *dup = swift_xstrdup(name);
        t->names[t->nnames++] = dup;
        stored = dup;
    }
    t->v[t->n++] = (struct option){stored, has_arg, NULL, key};
    t->v[t->n] = (struct option){0};
}

static void add_names(struct longtab *t, const struct swift_option *o, int key)
{
    add_long(t, o->name, takes_arg(o), key, 0);
    if (strchr(o->name, '-')) {
        char u[128];
        snprintf(u, sizeof(u), "%s", o->name);
        for (char *p = u; *p; p++)
            if (*p == '-')
                *p = '_';
        add_long(t, u, takes_arg(o), key, 1);
    }
    char tmp[128];
    for (const char *a = o->aliases; next_alias(&a, tmp, sizeof(tmp));)
        add_long(t, tmp, takes_arg(o), key, 1);
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
        for (const struct swift_option *o = tabs[t]; o && o->type; o++) {
            if (!o->help)
                continue;
            char left[96];
            int n = 0;
            if (o->short_name)
                n = snprintf(left, sizeof(left), "  -%c, --%s", o->short_name, o->name);
            else
                n = snprintf(left, sizeof(left), "      --%s", o->name);
            if (o->argname && n > 0 && (size_t)n < sizeof(left))
                snprintf(left + n,
                         sizeof(left) - (size_t)n,
                         o->flags & SWIFT_OPT_OPTARG ? "[=%s]" : "=%s",
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
        for (const struct swift_option *o = tabs[t]; o && o->type; o++) {
            const char *eq = takes_arg(o) == required_argument ? "=" : "";
            printf("--%s%s\n", o->name, eq);
            /* ms-swift's spellings too, so completions and docs checks know them */
            char tmp[128];
            for (const char *a = o->aliases; next_alias(&a, tmp, sizeof(tmp));)
                printf("--%s%s\n", tmp, eq);
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

/* A config file as argv[1] expands in front of the remaining arguments: *argc and *argv become
 * the expanded vector (owned here until exit, as argv is). 0, or -1 after reporting. */
static int expand_config_argv(const struct swift_command *cmd, int *argc, char ***argv)
{
    char **words = NULL;
    int nwords = 0;
    if (swift_cli_config_expand(cmd, (*argv)[1], &words, &nwords) < 0) {
        free_words(words, nwords);
        return -1;
    }
    char **nargv = swift_xcalloc((size_t)(*argc + nwords + 1), sizeof(char *));
    nargv[0] = (*argv)[0];
    memcpy(nargv + 1, words, (size_t)nwords * sizeof(char *));
    memcpy(nargv + 1 + nwords, *argv + 2, (size_t)(*argc - 2) * sizeof(char *));
    release_expanded(); /* the words of an earlier parse (tests parse several times) */
    expanded = words;
    nexpanded = nwords;
    expanded_argv = nargv;
    static int registered;
    if (!registered++)
        atexit(release_expanded);
    *argc = *argc - 1 + nwords;
    *argv = nargv;
    return 0;
}

/* Every entry of the command's table, then the builtins. getopt returns an entry's short name,
 * or KEY_BASE + its index here when it has none. */
enum { KEY_BASE = 0x1000, MAX_ENTRIES = 256 };
struct entries {
    const struct swift_option *v[MAX_ENTRIES];
    int n, ncmd; /* all, the command's */
    char shorts[256];
    struct longtab lt;
};

static int collect(const struct swift_command *cmd, struct entries *e)
{
    size_t ns = 0;
    e->shorts[ns++] = ':'; /* a missing argument returns ':', not '?' */
    const struct swift_option *tabs[2] = {cmd->options, builtin};
    for (int t = 0; t < 2; t++) {
        for (const struct swift_option *o = tabs[t]; o && o->type; o++) {
            if (e->n == MAX_ENTRIES || (t == 0 && !entry_ok(o)))
                return swift_error("option table entry --%s does not fit its field", o->name);
            int has_short = o->short_name > 0 && o->short_name < 128;
            add_names(&e->lt, o, has_short ? o->short_name : KEY_BASE + e->n);
            e->v[e->n++] = o;
            if (has_short && ns + 3 < sizeof(e->shorts)) {
                e->shorts[ns++] = (char)o->short_name;
                for (int k = 0; k < takes_arg(o); k++)
                    e->shorts[ns++] = ':';
            }
        }
        if (t == 0)
            e->ncmd = e->n;
    }
    e->shorts[ns] = 0;
    return 0;
}

/* The index in e of what getopt returned, or -1. */
static int entry_for(const struct entries *e, int c)
{
    if (c >= KEY_BASE && c < KEY_BASE + e->n)
        return c - KEY_BASE;
    for (int i = 0; i < e->n; i++)
        if (e->v[i]->short_name == c)
            return i;
    return -1;
}

/* --help, --version, --list-options: print, then the exit code. */
static int builtin_action(const struct swift_command *cmd, int which)
{
    if (which == KEY_HELP)
        swift_cli_help(cmd, stdout);
    else if (which == KEY_VERSION)
        printf("%s (swift-tools) %s\n", cmd->name, SWIFT_VERSION);
    else
        list_options(cmd);
    return swift_close_stdout(0); /* their output must have arrived */
}

/* The getopt loop: -1 when every option was stored, else the exit code. */
static int parse_loop(const struct swift_command *cmd, const struct entries *e, int argc,
                      char **argv, void *opts)
{
    optind = 0; /* full reinitialisation (GNU), so tests can parse several times */
    opterr = 0;
    for (;;) {
        int li = -1;
        int c = getopt_long(argc, argv, e->shorts, e->lt.v, &li);
        if (c == -1)
            return -1;
        if (c == '?') {
            if (optopt && optopt < 128)
                return swift_usage("invalid option -- '%c'", optopt);
            return swift_usage("unrecognized option '%s'", argv[optind - 1]);
        }
        if (c == ':')
            return swift_usage("option '%s' requires an argument", argv[optind - 1]);
        int i = entry_for(e, c);
        if (i < 0)
            return swift_usage("unrecognized option '%s'", argv[optind - 1]);
        if (i >= e->ncmd)
            return builtin_action(cmd, e->v[i]->value);
        if (store(cmd, e->v[i], opts, optarg))
            return SWIFT_EXIT_USAGE;
    }
}

int swift_cli_parse(const struct swift_command *cmd, int argc, char **argv, void *opts, int *argi)
{
    int orig_argc = argc;
    char **orig_argv = argv;
    if (argc > 1 && is_config_path(argv[1]) && expand_config_argv(cmd, &argc, &argv) < 0)
        return SWIFT_EXIT_FAIL;
    struct entries *e = swift_xcalloc(1, sizeof(*e));
    int rc = collect(cmd, e) < 0 ? SWIFT_EXIT_FAIL : parse_loop(cmd, e, argc, argv, opts);
    if (rc < 0) {
        *argi = optind;
        if (argv != orig_argv) {
            /* Hand the positional arguments back in the caller's argv, at its end. */
            int npos = argc - optind;
            memmove(orig_argv + orig_argc - npos, argv + optind, (size_t)npos * sizeof(char *));
            *argi = orig_argc - npos;
        }
    }
    for (int i = 0; i < e->lt.nnames; i++)
        free(e->lt.names[i]);
    free(e->lt.names);
    free(e->lt.v);
    free(e);
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
        *w->v = swift_xrealloc(*w->v, (size_t)w->cap * sizeof(char *));
    }
    (*w->v)[(*w->n)++] = swift_xstrdup(s);
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
    if (takes_arg(o) == no_argument) {
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

/* A JSON config value as option text: a string as it is, anything else as compact JSON. */
static char *value_text(json_t *v)
{
    if (json_is_string(v))
        return swift_xstrdup(json_string_value(v));
    char *s = json_dumps(v, JSON_ENCODE_ANY);
    if (!s)
        abort(); /* only a bug: jansson allocates through swift_xmalloc */
    return s;
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
                char *s = value_text(v2);
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
                char *s = value_text(e);
                n += (size_t)snprintf(
                    buf + n, n < sizeof(buf) ? sizeof(buf) - n : 0, "%s%s", i ? "," : "", s);
                free(s);
            }
            rc = emit_pair(cmd, path, 0, key, buf, w);
        } else if (json_is_object(val)) {
            rc = swift_error_at(path, 0, "option '%s' cannot be an object", key);
        } else {
            char *s = value_text(val);
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
