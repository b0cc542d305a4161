#include "lib/core/cli.h"
#include "lib/core/alloc.h"
#include "lib/core/cli_internal.h"
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

enum { KEY_HELP = 1, KEY_VERSION, KEY_LIST, KEY_VALUES };

static const struct swift_option builtin[] = {
    SWIFT_OPT_IGNORE(0, "help", NULL, "display this help and exit", .value = KEY_HELP),
    SWIFT_OPT_IGNORE(0, "version", NULL, "output version information and exit",
                     .value = KEY_VERSION),
    SWIFT_OPT_IGNORE(0, "list-options", NULL, NULL, .value = KEY_LIST),
    SWIFT_OPT_IGNORE(0, "list-values", NULL, NULL, .value = KEY_VALUES),
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

int swift_cli_takes_arg(const struct swift_option *o)
{
    if (!o->argname)
        return no_argument;
    return o->flags & SWIFT_OPT_OPTARG ? optional_argument : required_argument;
}

/* Find the option whose name (or alias) matches `name` with '-' and '_' treated as equal. */
int swift_cli_name_eq(const char *a, size_t alen, const char *b)
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
int swift_cli_next_alias(const char **a, char *buf, size_t cap)
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

const struct swift_option *swift_cli_find_option(const struct swift_command *cmd, const char *name,
                                                 size_t len)
{
    char tmp[128];
    for (const struct swift_option *o = cmd->options; o && o->type; o++) {
        if (swift_cli_name_eq(name, len, o->name))
            return o;
        for (const char *a = o->aliases; swift_cli_next_alias(&a, tmp, sizeof(tmp));)
            if (swift_cli_name_eq(name, len, tmp))
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
    add_long(t, o->name, swift_cli_takes_arg(o), key, 0);
    if (strchr(o->name, '-')) {
        char u[128];
        snprintf(u, sizeof(u), "%s", o->name);
        for (char *p = u; *p; p++)
            if (*p == '-')
                *p = '_';
        add_long(t, u, swift_cli_takes_arg(o), key, 1);
    }
    char tmp[128];
    for (const char *a = o->aliases; swift_cli_next_alias(&a, tmp, sizeof(tmp));)
        add_long(t, tmp, swift_cli_takes_arg(o), key, 1);
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
            const char *eq = swift_cli_takes_arg(o) == required_argument ? "=" : "";
            printf("--%s%s\n", o->name, eq);
            /* ms-swift's spellings too, so completions and docs checks know them */
            char tmp[128];
            for (const char *a = o->aliases; swift_cli_next_alias(&a, tmp, sizeof(tmp));)
                printf("--%s%s\n", tmp, eq);
        }
}

/* An argname that lists the values ("full|lora", "auto|cpu|cuda[:N]"), as " full lora" into buf;
 * 0 when it names a metavariable instead ("N", "CKPT|latest"). */
static int argname_values(const char *argname, char *buf, size_t cap)
{
    if (!argname || !strchr(argname, '|'))
        return 0;
    size_t n = 0;
    buf[0] = 0;
    for (const char *p = argname; *p;) {
        size_t len = strcspn(p, "|"), word = strcspn(p, "|[");
        for (size_t i = 0; i < word; i++)
            if (!strchr("abcdefghijklmnopqrstuvwxyz0123456789_-.:", p[i]))
                return 0;
        if (word && n + word + 2 < cap) {
            buf[n++] = ' ';
            memcpy(buf + n, p, word);
            buf[n += word] = 0;
        }
        p += len + (p[len] == '|');
    }
    return n > 0;
}

/* The words o's value may be, " a b c" into buf (empty when it is free text or a path). */
static void option_values(const struct swift_option *o, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = 0;
    if (o->choices) {
        for (const struct swift_choice *c = o->choices; c->name && n + 1 < cap; c++)
            n += (size_t)snprintf(buf + n, cap - n, " %s", c->name);
        return;
    }
    if (!o->values) {
        argname_values(o->argname, buf, cap);
        return;
    }
    for (const char *p = o->values; *p;) {
        size_t len = strcspn(p, " ,|");
        char w[128];
        if (len && len < sizeof(w)) {
            memcpy(w, p, len);
            w[len] = 0;
            if ((!o->lookup || o->lookup(w) >= 0) && n + len + 2 < cap)
                n += (size_t)snprintf(buf + n, cap - n, " %s", w);
        }
        p += len;
        p += strspn(p, " ,|");
    }
}

/* --list-values: "--NAME value..." for every name (aliases and the short name too) of an option
 * with known values. */
static void list_values(const struct swift_command *cmd)
{
    for (const struct swift_option *o = cmd->options; o && o->type; o++) {
        char vals[1024], tmp[128];
        option_values(o, vals, sizeof(vals));
        if (!vals[0])
            continue;
        printf("--%s%s\n", o->name, vals);
        if (o->short_name > 0 && o->short_name < 128)
            printf("-%c%s\n", o->short_name, vals);
        for (const char *a = o->aliases; swift_cli_next_alias(&a, tmp, sizeof(tmp));) {
            for (char *p = tmp; *p; p++)
                *p = *p == '_' ? '-' : *p;
            printf("--%s%s\n", tmp, vals);
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

enum { MAX_GIVEN = 256 };
static char **expanded, **expanded_argv;
static int nexpanded;
static char *config_given; /* the config file of the last parse, as given (argv[1]) */

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
    free(config_given);
    expanded = expanded_argv = NULL;
    config_given = NULL;
    nexpanded = 0;
}

const char *swift_cli_config_used(char *const **argv)
{
    *argv = expanded_argv;
    return config_given;
}

/* The entry of a command-line word: "--name[=v]" or "-x..." (short options: the first), or NULL;
 * *skip is 1 when the next word is its value. */
static const struct swift_option *word_option(const struct swift_command *cmd, const char *w,
                                              int *skip)
{
    *skip = 0;
    const struct swift_option *o = NULL;
    if (w[0] != '-' || !w[1])
        return NULL;
    if (w[1] == '-') {
        size_t len = strcspn(w + 2, "=");
        o = swift_cli_find_option(cmd, w + 2, len);
        *skip = o && !w[2 + len] && swift_cli_takes_arg(o) == required_argument;
        return o;
    }
    for (const char *c = w + 1; *c; c++) {
        for (o = cmd->options; o && o->type && o->short_name != *c; o++)
            ;
        if (!o || !o->type)
            return NULL;
        if (swift_cli_takes_arg(o) != no_argument) {
            *skip = !c[1];
            return o;
        }
    }
    return NULL; /* a cluster of flags: setting one twice changes nothing */
}

/* Flags override the file: drop the file's words for every option the command line (rest)
 * gives, so a repeatable one (--dataset) does not add to the file's values. */
static void drop_overridden(const struct swift_command *cmd, char **words, int *nwords, char **rest,
                            int nrest)
{
    const struct swift_option *given[MAX_GIVEN];
    int ngiven = 0, skip;
    for (int i = 0; i < nrest && strcmp(rest[i], "--"); i += 1 + skip) {
        const struct swift_option *o = word_option(cmd, rest[i], &skip);
        if (o && ngiven < MAX_GIVEN)
            given[ngiven++] = o;
    }
    int out = 0;
    for (int i = 0; i < *nwords; i += 1 + skip) {
        /* the file's words: "--name" and, unless it takes none, its value */
        const struct swift_option *o = word_option(cmd, words[i], &skip);
        skip = o && swift_cli_takes_arg(o) != no_argument;
        int drop = 0;
        for (int g = 0; o && g < ngiven; g++)
            drop |= given[g] == o;
        for (int k = 0; k <= skip && i + k < *nwords; k++) {
            if (drop)
                free(words[i + k]);
            else
                words[out++] = words[i + k];
        }
    }
    *nwords = out;
}

/* A config file as argv[1] expands in front of the remaining arguments: *argc and *argv become
 * the expanded vector (owned here until exit, as argv is). 0, -1 after reporting a bad file, or
 * SWIFT_MISUSED after reporting a usage error. */
static int expand_config_argv(const struct swift_command *cmd, int *argc, char ***argv)
{
    char **words = NULL;
    int nwords = 0;
    int rc = swift_cli_config_expand(cmd, (*argv)[1], &words, &nwords);
    if (rc < 0) {
        free_words(words, nwords);
        return rc;
    }
    drop_overridden(cmd, words, &nwords, *argv + 2, *argc - 2);
    char **nargv = swift_xcalloc((size_t)(*argc + nwords + 1), sizeof(char *));
    nargv[0] = (*argv)[0];
    memcpy(nargv + 1, words, (size_t)nwords * sizeof(char *));
    memcpy(nargv + 1 + nwords, *argv + 2, (size_t)(*argc - 2) * sizeof(char *));
    release_expanded(); /* the words of an earlier parse (tests parse several times) */
    expanded = words;
    nexpanded = nwords;
    expanded_argv = nargv;
    config_given = swift_xstrdup((*argv)[1]);
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
                for (int k = 0; k < swift_cli_takes_arg(o); k++)
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
    else if (which == KEY_LIST)
        list_options(cmd);
    else
        list_values(cmd);
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

/* Reorder argv[1..argc-1] so that the words of pos (pointers into argv) come last, in pos'
 * order, and the others keep theirs before them. */
static void permute_back(char **argv, int argc, char **pos, int npos)
{
    char **tmp = swift_xcalloc((size_t)argc + 1, sizeof(char *));
    int k = 0;
    for (int i = 1; i < argc; i++) {
        int is_pos = 0;
        for (int j = 0; j < npos && !is_pos; j++)
            is_pos = argv[i] == pos[j];
        if (!is_pos)
            tmp[k++] = argv[i];
    }
    if (k + npos == argc - 1) {
        memcpy(tmp + k, pos, (size_t)npos * sizeof(char *));
        memcpy(argv + 1, tmp, (size_t)(argc - 1) * sizeof(char *));
    } else { /* a positional word the caller did not give: only a bug; keep the old way */
        memmove(argv + argc - npos, pos, (size_t)npos * sizeof(char *));
    }
    free(tmp);
}

int swift_cli_parse(const struct swift_command *cmd, int argc, char **argv, void *opts, int *argi)
{
    int orig_argc = argc;
    char **orig_argv = argv;
    if (argc > 1 && is_config_path(argv[1])) {
        int rc = expand_config_argv(cmd, &argc, &argv);
        if (rc < 0)
            return rc == SWIFT_MISUSED ? SWIFT_EXIT_USAGE : SWIFT_EXIT_FAIL;
    }
    struct entries *e = swift_xcalloc(1, sizeof(*e));
    int rc = collect(cmd, e) < 0 ? SWIFT_EXIT_FAIL : parse_loop(cmd, e, argc, argv, opts);
    if (rc < 0) {
        *argi = optind;
        if (argv != orig_argv) {
            /* Hand the positional arguments back in the caller's argv, at its end: permute it
             * (its other words first, in their order), as getopt does, so that it still holds
             * every word given (the trace records it as the command line). */
            int npos = argc - optind;
            permute_back(orig_argv, orig_argc, argv + optind, npos);
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
