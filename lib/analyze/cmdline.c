/*
 * analyze/cmdline — the exact new command line a remedy gives: the traced run's argv
 * (swift_meta.argv) with one option set, shell-quoted; and an option's current value.
 * See swift_an_argv_with (rules.h) and swift_an_argv_long (internal.h).
 *
 * A remedy's command never walks into the traced run: its output (-o/--output-dir/--output)
 * and its --trace are given new names that do not exist yet (runs/a -> runs/a-2, t.jsonl ->
 * t-2.jsonl, a trace inside the old output moves into the new one), so running it neither
 * refuses nor mixes with the run it came from, and the two traces can be compared.
 */
#include "lib/analyze/internal.h"
#include "lib/analyze/rules.h"
#include "lib/core/alloc.h"
#include "lib/core/cli.h"
#include "lib/core/fileio.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/core/banned.h"

static void sb_add(char **buf, size_t *len, size_t *cap, const char *s)
{
    size_t l = strlen(s);
    if (*len + l + 1 > *cap) {
        *cap = (*len + l + 1) * 2;
        *buf = swift_xrealloc(*buf, *cap);
    }
    memcpy(*buf + *len, s, l + 1);
    *len += l;
}

static void sb_quoted(char **buf, size_t *len, size_t *cap, const char *s)
{
    int plain = *s != 0;
    for (const char *p = s; *p; p++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%", *p))
            plain = 0;
    if (plain) {
        sb_add(buf, len, cap, s);
        return;
    }
    sb_add(buf, len, cap, "'");
    for (const char *p = s; *p; p++) {
        char c[2] = {*p, 0};
        sb_add(buf, len, cap, *p == '\'' ? "'\\''" : c);
    }
    sb_add(buf, len, cap, "'");
}

/* Does argv word w name option opt ("--num-workers", also "--num_workers")? Returns 1 for
 * "--opt", 2 for "--opt=V", 0 otherwise. */
static int opt_match(const char *w, const char *opt)
{
    if (strncmp(w, "--", 2))
        return 0;
    w += 2;
    size_t i = 0;
    for (; opt[i] && w[i]; i++) {
        char a = w[i] == '_' ? '-' : w[i];
        if (a != opt[i])
            return 0;
    }
    if (opt[i])
        return 0;
    return w[i] == 0 ? 1 : w[i] == '=' ? 2 : 0;
}

/* A new argv array with --opt set to value (replaced in place, or appended). */
json_t *swift_an_argv_set(json_t *argv, const char *opt, const char *value)
{
    json_t *out = json_array();
    size_t n = json_array_size(argv);
    int done = 0;
    for (size_t i = 0; i < n; i++) {
        const char *w = json_string_value(json_array_get(argv, i));
        if (!w)
            continue;
        int m = done ? 0 : opt_match(w, opt);
        if (m) {
            char flag[256];
            snprintf(flag, sizeof(flag), "--%s", opt);
            json_array_append_new(out, json_string(flag));
            json_array_append_new(out, json_string(value));
            if (m == 1 && i + 1 < n)
                i++; /* the old value */
            done = 1;
            continue;
        }
        json_array_append_new(out, json_string(w));
    }
    if (!done) {
        char flag[256];
        snprintf(flag, sizeof(flag), "--%s", opt);
        json_array_append_new(out, json_string(flag));
        json_array_append_new(out, json_string(value));
    }
    return out;
}

char *swift_an_argv_quote(json_t *argv)
{
    char *buf = NULL;
    size_t len = 0, cap = 0;
    sb_add(&buf, &len, &cap, "");
    size_t i;
    json_t *w;
    json_array_foreach(argv, i, w)
    {
        if (i)
            sb_add(&buf, &len, &cap, " ");
        sb_quoted(&buf, &len, &cap, json_string_value(w) ? json_string_value(w) : "");
    }
    return buf;
}

/* path with "-N" put before its extension ext ("" for none), N >= 2 the first for which the
 * name is free here (a name already ending in "-N" counts on from N); the trailing slash of a
 * directory is kept. Malloc'ed. */
static char *fresh_name(const char *path, const char *ext)
{
    size_t l = strlen(path);
    int slash = l > 1 && path[l - 1] == '/';
    if (slash)
        l--;
    size_t el = strlen(ext);
    if (el >= l)
        el = 0;
    size_t stem = l - el;
    long n = 1;
    size_t d = stem;
    while (d > 0 && path[d - 1] >= '0' && path[d - 1] <= '9')
        d--;
    if (d < stem && d > 1 && path[d - 1] == '-' && stem - d < 9 && path[d - 2] != '/') {
        n = strtol(path + d, NULL, 10);
        stem = d - 1;
    }
    size_t cap = l + 32;
    char *out = swift_xmalloc(cap);
    for (long k = n + 1;; k++) {
        snprintf(out,
                 cap,
                 "%.*s-%ld%.*s%s",
                 (int)stem,
                 path,
                 k,
                 (int)el,
                 path + l - el,
                 slash ? "/" : "");
        if (access(out, F_OK) != 0 || k > n + 1000)
            return out;
    }
}

/* The extension a new trace name keeps: ".trace.jsonl", ".jsonl", ".json" (+ ".gz"). */
static const char *trace_ext(const char *path)
{
    static const char *const ends[] = {
        ".trace.jsonl.gz", ".trace.jsonl", ".jsonl.gz", ".jsonl", ".json.gz", ".json", NULL};
    size_t l = strlen(path);
    for (int i = 0; ends[i]; i++) {
        size_t k = strlen(ends[i]);
        if (l > k && !strcmp(path + l - k, ends[i]))
            return ends[i];
    }
    return "";
}

/* Index of the value of the first option among opts in argv ("-o V", "-oV", "--opt V",
 * "--opt=V"), with *inword set to the offset of the value in its word; -1 when absent. */
static long find_value(json_t *argv, const char *const *opts, char shortopt, size_t *inword)
{
    size_t n = json_array_size(argv);
    for (size_t i = 1; i < n; i++) {
        const char *w = json_string_value(json_array_get(argv, i));
        if (!w)
            continue;
        if (!strcmp(w, "--"))
            return -1;
        if (shortopt && w[0] == '-' && w[1] == shortopt) {
            *inword = w[2] ? 2 : 0;
            return w[2] ? (long)i : (i + 1 < n ? (long)i + 1 : -1);
        }
        for (int k = 0; opts[k]; k++) {
            int m = opt_match(w, opts[k]);
            if (m == 2) {
                *inword = (size_t)(strchr(w, '=') - w) + 1;
                return (long)i;
            }
            if (m == 1) {
                *inword = 0;
                return i + 1 < n ? (long)i + 1 : -1;
            }
        }
    }
    return -1;
}

/* Replace the value at (idx, off) of argv with v. */
static void put_value(json_t *argv, long idx, size_t off, const char *v)
{
    const char *w = json_string_value(json_array_get(argv, (size_t)idx));
    size_t l = off + strlen(v) + 1;
    char *nw = swift_xmalloc(l);
    snprintf(nw, l, "%.*s%s", (int)off, w, v);
    json_array_set_new(argv, (size_t)idx, json_string(nw));
    free(nw);
}

json_t *swift_an_argv_fresh(json_t *argv)
{
    static const char *const outs[] = {"output-dir", "output", NULL};
    static const char *const traces[] = {"trace", NULL};
    json_t *a = json_deep_copy(argv);
    size_t oo = 0, to = 0;
    long oi = find_value(a, outs, 'o', &oo), ti = find_value(a, traces, 0, &to);
    char *old_out = NULL, *new_out = NULL;
    if (oi >= 0) {
        const char *v = json_string_value(json_array_get(a, (size_t)oi)) + oo;
        if (*v && strcmp(v, "-")) {
            old_out = swift_xstrdup(v);
            size_t l = strlen(old_out);
            while (l > 1 && old_out[l - 1] == '/')
                old_out[--l] = 0;
            new_out = fresh_name(old_out, "");
            put_value(a, oi, oo, new_out);
        }
    }
    if (ti >= 0) {
        const char *v = json_string_value(json_array_get(a, (size_t)ti)) + to;
        size_t ol = old_out ? strlen(old_out) : 0;
        char *nt;
        if (old_out && !strncmp(v, old_out, ol) && v[ol] == '/') {
            size_t l = strlen(new_out) + strlen(v + ol) + 1;
            nt = swift_xmalloc(l);
            snprintf(nt, l, "%s%s", new_out, v + ol); /* inside the run: into the new one */
        } else {
            nt = fresh_name(v, swift_is_dir(v) ? "" : trace_ext(v));
        }
        put_value(a, ti, to, nt);
        free(nt);
    }
    free(old_out);
    free(new_out);
    return a;
}

char *swift_an_argv_command(json_t *argv)
{
    json_t *a = swift_an_argv_fresh(argv);
    char *s = swift_an_argv_quote(a);
    json_decref(a);
    return s;
}

char *swift_an_argv_with(json_t *argv, const char *opt, const char *value)
{
    json_t *a = swift_an_argv_set(argv, opt, value);
    char *s = swift_an_argv_command(a);
    json_decref(a);
    return s;
}

json_t *swift_an_argv_drop_short(json_t *argv, char c)
{
    json_t *out = json_array();
    size_t n = json_array_size(argv);
    for (size_t i = 0; i < n; i++) {
        const char *w = json_string_value(json_array_get(argv, i));
        if (!w)
            continue;
        if (i > 0 && w[0] == '-' && w[1] == c) {
            if (!w[2])
                i++; /* "-c V": the value too */
            continue;
        }
        json_array_append_new(out, json_string(w));
    }
    return out;
}

/* swift_an_argv_long: see internal.h. */
long swift_an_argv_long(json_t *argv, const char *opt, long dflt)
{
    size_t n = json_array_size(argv);
    for (size_t i = 0; i < n; i++) {
        const char *w = json_string_value(json_array_get(argv, i));
        if (!w)
            continue;
        int m = opt_match(w, opt);
        const char *v = m == 2                ? strchr(w, '=') + 1
                        : m == 1 && i + 1 < n ? json_string_value(json_array_get(argv, i + 1))
                                              : NULL;
        long x;
        if (v && swift_parse_long(v, 0, 1L << 40, &x) == 0)
            return x;
    }
    return dflt;
}
