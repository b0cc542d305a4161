/*
 * analyze/cmdline — the exact new command line a remedy gives: the traced run's argv
 * (swift_meta.argv) with one option set, shell-quoted; and an option's current value.
 * See swift_an_argv_with (rules.h) and swift_an_argv_long (internal.h).
 */
#include "lib/analyze/internal.h"
#include "lib/analyze/rules.h"
#include "lib/core/alloc.h"
#include "lib/core/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

char *swift_an_argv_with(json_t *argv, const char *opt, const char *value)
{
    json_t *a = swift_an_argv_set(argv, opt, value);
    char *s = swift_an_argv_quote(a);
    json_decref(a);
    return s;
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
