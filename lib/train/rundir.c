/* rundir — the run directory, settled before anything is written (train.h): -o as given, or a new
 * version under it (--add-version: ms-swift's OUTPUT_DIR/v<N>-<YYYYMMDD-HHMMSS>, N one more than
 * the highest v<N> there); a directory that already holds something is refused unless --resume
 * continues the run in it, or --force removes a previous run's files, and only those (anything
 * a run does not write is refused, so --force never empties a directory of other things). */
#include "lib/train/internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/core/banned.h"

#define MAX_ENTRIES 100000 /* a run directory holds a few dozen */

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The entries of dir except "." and "..", sorted; *n their count. NULL with *n 0 when dir does
 * not exist; NULL with *n -1 after reporting another error. Free with free_names. */
static char **list_dir(const char *dir, int *n)
{
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT)
            return NULL;
        *n = -1;
        swift_error_errno("cannot read directory '%s'", dir);
        return NULL;
    }
    int cap = 16;
    char **names = swift_xmalloc((size_t)cap * sizeof(char *));
    struct dirent *de;
    while ((de = readdir(d)) && *n < MAX_ENTRIES) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (*n == cap) {
            cap *= 2;
            names = swift_xrealloc(names, (size_t)cap * sizeof(char *));
        }
        names[(*n)++] = swift_xstrdup(de->d_name);
    }
    closedir(d);
    qsort(names, (size_t)*n, sizeof(char *), cmp_names);
    return names;
}

static void free_names(char **names, int n)
{
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* ms-swift's _get_version: the number after a leading 'v' ("v3-20250101-120000", "v12"), or -1 */
static long version_of(const char *name)
{
    if (name[0] != 'v' || name[1] < '0' || name[1] > '9')
        return -1;
    long v = strtol(name + 1, NULL, 10);
    return v < 0 || v > 1000000000L ? -1 : v;
}

/* The highest version of any entry of base (-1: none); *newest: malloc'ed name of the directory
 * with the highest version (the last in byte order among equals), NULL if none. */
static long versions(const char *base, char **newest)
{
    int n;
    char **names = list_dir(base, &n);
    long top = -1, top_dir = -1;
    *newest = NULL;
    for (int i = 0; i < n; i++) {
        long v = version_of(names[i]);
        if (v < 0)
            continue;
        if (v > top)
            top = v;
        char *p = swift_path_join(base, names[i]);
        if (v >= top_dir && swift_is_dir(p)) {
            top_dir = v;
            free(*newest);
            *newest = swift_xstrdup(names[i]);
        }
        free(p);
    }
    free_names(names, n);
    return top;
}

static char *version_dir(const char *base, long n, time_t t)
{
    struct tm tm;
    localtime_r(&t, &tm);
    char name[64];
    snprintf(name,
             sizeof(name),
             "v%ld-%04d%02d%02d-%02d%02d%02d",
             n,
             tm.tm_year + 1900,
             tm.tm_mon + 1,
             tm.tm_mday,
             tm.tm_hour,
             tm.tm_min,
             tm.tm_sec);
    return swift_path_join(base, name);
}

/* "checkpoint-<digits>" (prefix only, rest after) */
static const char *after_ckpt_step(const char *name)
{
    if (strncmp(name, "checkpoint-", 11) || name[11] < '0' || name[11] > '9')
        return NULL;
    const char *p = name + 11;
    while (*p >= '0' && *p <= '9')
        p++;
    return p;
}

/* A trace file of ours (its first line an event that starts with the phase, as our writer puts
 * it) or an empty *.jsonl (the trace of a process killed before its first flush). */
static int is_trace_file(const char *path, const struct stat *st)
{
    static const char head[] = "{\"ph\":\"";
    size_t l = strlen(path);
    if (!S_ISREG(st->st_mode))
        return 0;
    if (st->st_size == 0)
        return l > 6 && !strcmp(path + l - 6, ".jsonl");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    char buf[sizeof(head)];
    ssize_t r = read(fd, buf, sizeof(head) - 1);
    close(fd);
    return r == (ssize_t)sizeof(head) - 1 && !memcmp(buf, head, sizeof(head) - 1);
}

/* 1 if dir/name is something a run writes: args.json, logging.jsonl, checkpoint-N/, a temporary
 * of those (".checkpoint-N.tmp-PID", ".args.json.tmp-PID-K"), a trace file, or a directory of
 * trace files only (--trace DIR/ inside the run directory). */
static int written_by_run(const char *dir, const char *name)
{
    char *p = swift_path_join(dir, name);
    struct stat st;
    int ok = 0;
    const char *rest;
    if (lstat(p, &st) < 0) {
        ok = 0;
    } else if (S_ISREG(st.st_mode) &&
               (!strcmp(name, "args.json") || !strcmp(name, "logging.jsonl"))) {
        ok = 1;
    } else if (S_ISDIR(st.st_mode) && (rest = after_ckpt_step(name)) && !*rest) {
        ok = 1;
    } else if (name[0] == '.' && strstr(name, ".tmp-") &&
               (((rest = after_ckpt_step(name + 1)) && !strncmp(rest, ".tmp-", 5)) ||
                !strncmp(name, ".args.json.tmp-", 15))) {
        ok = 1;
    } else if (S_ISDIR(st.st_mode)) {
        int n;
        char **names = list_dir(p, &n);
        ok = n > 0;
        for (int i = 0; ok && i < n; i++) {
            char *q = swift_path_join(p, names[i]);
            struct stat qs;
            ok = lstat(q, &qs) == 0 && is_trace_file(q, &qs);
            free(q);
        }
        free_names(names, n);
    } else {
        ok = is_trace_file(p, &st);
    }
    free(p);
    return ok;
}

/* --force: remove a previous run's files from dir, or refuse (nothing removed) when dir holds
 * anything else. */
static int clear_run(const char *dir, char **names, int n)
{
    for (int i = 0; i < n; i++)
        if (!written_by_run(dir, names[i]))
            return swift_error("--force: '%s' holds '%s', which a run does not write; not "
                               "replacing anything (move it away or choose another -o)",
                               dir,
                               names[i]);
    for (int i = 0; i < n; i++) {
        char *p = swift_path_join(dir, names[i]);
        int rc = swift_remove_tree(p);
        if (rc < 0)
            swift_error_errno("--force: cannot remove '%s'", p);
        free(p);
        if (rc < 0)
            return -1;
    }
    swift_info("--force: removed the previous run in '%s' (%d entries)", dir, n);
    return 0;
}

/* The directory must be absent or empty, unless --resume continues the run in it or --force
 * clears it. Rank 0 only. */
static int check_empty(const struct swift_train_opts *o, const char *dir)
{
    struct stat st;
    if (o->resume || stat(dir, &st) < 0)
        return 0;
    if (!S_ISDIR(st.st_mode))
        return swift_error("-o '%s' is not a directory", dir);
    int n;
    char **names = list_dir(dir, &n);
    if (n < 0)
        return -1;
    int rc = 0;
    if (n > 0 && o->force) {
        rc = clear_run(dir, names, n);
    } else if (n > 0) {
        char some[256] = "";
        for (int i = 0; i < n && i < 3; i++)
            snprintf(
                some + strlen(some), sizeof(some) - strlen(some), "%s%s", i ? ", " : "", names[i]);
        rc = swift_error("run directory '%s' is not empty (%s%s); nothing was changed",
                         dir,
                         some,
                         n > 3 ? ", ..." : "");
        swift_info("--resume latest continues the run in it, --add-version starts a new one in "
                   "%s/v<N>-<date>-<time>, --force replaces it; or choose another -o",
                   dir);
    }
    free_names(names, n);
    return rc;
}

/* Rank 0: a new version directory, made now so that a concurrent run takes the next one. */
static char *new_version(const char *base, long n, time_t *t, long *chosen)
{
    if (swift_mkdirs(base, 0755) < 0)
        return NULL;
    for (int tries = 0; tries < 100; tries++, n++) {
        char *dir = version_dir(base, n, *t);
        if (mkdir(dir, 0755) == 0) {
            *chosen = n;
            return dir;
        }
        if (errno != EEXIST) {
            swift_error_errno("cannot create directory '%s'", dir);
            free(dir);
            return NULL;
        }
        free(dir);
    }
    swift_error("%s: no free version directory", base);
    return NULL;
}

enum { AS_GIVEN, NEW_VERSION, NEWEST_VERSION };

/* Rank 0's choice; *kind, *n and *t tell the other ranks. */
static char *choose(const struct swift_train_opts *o, int *kind, long *n, time_t *t)
{
    const char *base = o->output_dir;
    *kind = AS_GIVEN;
    if (!o->add_version)
        return check_empty(o, base) < 0 ? NULL : swift_xstrdup(base);
    char *newest;
    long top = versions(base, &newest);
    if (newest && o->resume && !strcmp(o->resume, "latest")) {
        /* a requeued job with the same command line continues the newest run */
        *kind = NEWEST_VERSION;
        char *dir = swift_path_join(base, newest);
        free(newest);
        swift_info("run directory %s (the newest version: --resume latest)", dir);
        return dir;
    }
    free(newest);
    *kind = NEW_VERSION;
    *t = time(NULL);
    char *dir = new_version(base, top + 1, t, n);
    if (dir)
        swift_info("run directory %s", dir);
    return dir;
}

char *train_run_dir(const struct swift_train_opts *o, struct swift_dist *d)
{
    int kind = AS_GIVEN;
    long n = 0;
    time_t t = 0;
    char *dir = NULL;
    if (d->rank == 0)
        dir = choose(o, &kind, &n, &t);
    int bad = d->rank == 0 && !dir;
    double v[3] = {kind, (double)n, (double)t}; /* rank 0's; the others add zeros */
    if (d->rank != 0)
        v[0] = v[1] = v[2] = 0;
    if (swift_dist_checkin(d, "run directory", 0, &bad, v, 3) < 0 || bad) {
        free(dir);
        return NULL;
    }
    if (d->rank == 0)
        return dir;
    kind = (int)v[0];
    if (kind == NEW_VERSION)
        return version_dir(o->output_dir, (long)v[1], (time_t)v[2]);
    if (kind == NEWEST_VERSION) {
        char *newest;
        versions(o->output_dir, &newest);
        if (newest) {
            dir = swift_path_join(o->output_dir, newest);
            free(newest);
            return dir;
        }
        swift_error("rank %d: no version directory in '%s'", d->rank, o->output_dir);
        return NULL;
    }
    return swift_xstrdup(o->output_dir);
}
