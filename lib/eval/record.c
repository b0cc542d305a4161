/* The swift-eval output record, its table on stderr, and the regression gate. */
#include "lib/eval/eval.h"
#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/record.h"
#include "lib/core/fileio.h"
#include "lib/core/jsonl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

json_t *swift_eval_record_new(const char *model, const char *adapters, int task,
                              const char *dataset, long n)
{
    json_t *r = json_object();
    if (!r)
        abort();
    json_object_set_new(r, "schema_version", json_integer(SWIFT_EVAL_SCHEMA_VERSION));
    json_object_set_new(r, "model", model ? json_string(model) : json_null());
    json_object_set_new(r, "adapters", adapters ? json_string(adapters) : json_null());
    json_object_set_new(r, "task", json_string(swift_eval_task_name(task)));
    json_object_set_new(r, "dataset", dataset ? json_string(dataset) : json_null());
    json_object_set_new(r, "n", json_integer(n));
    json_object_set_new(r, "metrics", json_object());
    return r;
}

void swift_eval_record_add_tally(json_t *rec, const struct swift_eval_tally *t)
{
    if (t->n == 0 || (t->n == 1 && t->rows[0].subject[0] == 0))
        return;
    json_t *s = json_object();
    for (size_t i = 0; i < t->n; i++) {
        const struct swift_eval_tally_row *r = &t->rows[i];
        json_t *o = json_object();
        json_object_set_new(o, "n", json_integer(r->n));
        json_object_set_new(o, "correct", json_integer(r->correct));
        json_object_set_new(o, "accuracy", json_real((double)r->correct / (double)r->n));
        json_object_set_new(s, r->subject[0] ? r->subject : "(none)", o);
    }
    json_object_set_new(rec, "subjects", s);
}

int swift_eval_record_write(const json_t *rec, const char *path)
{
    struct swift_atomic af;
    if (swift_atomic_open(&af, path) < 0)
        return -1;
    if (swift_record_print(af.fp, rec, SWIFT_RECORD_DIGITS) < 0) {
        swift_atomic_abort(&af);
        return swift_error_errno("cannot write '%s'", path);
    }
    return swift_atomic_commit(&af);
}

static void print_num(FILE *fp, json_t *v)
{
    if (json_is_integer(v))
        fprintf(fp, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v))
        fprintf(fp, "%.4f", json_real_value(v));
    else
        fprintf(fp, "-");
}

void swift_eval_record_table(const json_t *rec, FILE *fp)
{
    fprintf(fp, "%-28s %s\n", "task", json_string_value(json_object_get(rec, "task")));
    fprintf(fp, "%-28s ", "n");
    print_num(fp, json_object_get(rec, "n"));
    fputc('\n', fp);
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(rec, "metrics"), k, v)
    {
        fprintf(fp, "%-28s ", k);
        print_num(fp, v);
        fputc('\n', fp);
    }
    json_t *tps = json_object_get(rec, "tokens_per_s");
    if (tps) {
        fprintf(fp, "%-28s ", "tokens/s");
        print_num(fp, tps);
        fputc('\n', fp);
    }
    json_t *subj = json_object_get(rec, "subjects");
    if (json_object_size(subj) > 1) {
        fprintf(fp, "%-40s %6s %8s\n", "subject", "n", "accuracy");
        json_object_foreach(subj, k, v)
        {
            fprintf(fp,
                    "%-40.40s %6lld %8.4f\n",
                    k,
                    (long long)json_integer_value(json_object_get(v, "n")),
                    json_real_value(json_object_get(v, "accuracy")));
        }
    }
}

static int ends_with(const char *s, const char *suffix)
{
    size_t l = strlen(s), k = strlen(suffix);
    return l > k && !strcmp(s + l - k, suffix);
}

int swift_eval_metric_direction(const char *name)
{
    static const char *const lower[] = {"loss", "ppl", "perplexity"};
    static const char *const higher[] = {
        "accuracy", "acc", "acc_norm", "token_acc", "exact_match", "em", "f1", "margin"};
    for (size_t i = 0; i < sizeof(lower) / sizeof(lower[0]); i++)
        if (!strcmp(name, lower[i]))
            return -1;
    if (ends_with(name, "_loss") || ends_with(name, "_ppl"))
        return -1;
    for (size_t i = 0; i < sizeof(higher) / sizeof(higher[0]); i++)
        if (!strcmp(name, higher[i]))
            return 1;
    if (!strncmp(name, "accuracy_", 9) || ends_with(name, "_acc") || ends_with(name, "_accuracy") ||
        ends_with(name, "_f1") || ends_with(name, "_exact_match"))
        return 1;
    return 0; /* a count (tokens, n) or unknown: not a quality to gate on */
}

static double num(json_t *v)
{
    return json_is_integer(v) ? (double)json_integer_value(v) : json_real_value(v);
}

/* Two dataset names are the same dataset when spelled alike or resolving to one path. */
static int same_dataset(const char *a, const char *b)
{
    if (!a || !b)
        return 0;
    if (!strcmp(a, b))
        return 1;
    char *ra = realpath(a, NULL), *rb = realpath(b, NULL);
    int same = ra && rb && !strcmp(ra, rb);
    free(ra);
    free(rb);
    return same;
}

/* Every record of a baseline file (one record, one pretty-printed record, or JSONL) into recs,
 * with its line in lines (room for max). Returns the count, or -1 (reported). */
#define MAX_BASELINE_RECORDS 4096
static long load_baseline(const char *path, json_t **recs, long *lines, long max)
{
    char *data;
    size_t len;
    if (swift_read_file(path, (size_t)64 << 20, &data, &len) < 0)
        return -1;
    long n = 0, line = 0;
    for (char *p = data, *end = data + len; p < end;) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);
        line++;
        size_t k = 0;
        while (k < l && (p[k] == ' ' || p[k] == '\t' || p[k] == '\r'))
            k++;
        if (k < l) {
            json_error_t err;
            json_t *v = json_loadb(p, l, 0, &err);
            if (!v) {
                /* maybe one pretty-printed record spanning the whole file */
                v = line == 1 ? json_loadb(data, len, 0, &err) : NULL;
                if (!v) {
                    while (n > 0)
                        json_decref(recs[--n]);
                    free(data);
                    return swift_error_at(path, line + err.line - 1, "%s", err.text);
                }
                nl = NULL;
            }
            if (n == max) {
                json_decref(v);
                while (n > 0)
                    json_decref(recs[--n]);
                free(data);
                return swift_error_at(path, line, "more than %ld records", max);
            }
            recs[n] = v;
            lines[n++] = line;
        }
        if (!nl)
            break;
        p = nl + 1;
    }
    free(data);
    if (!n)
        return swift_error_at(path, 1, "no record");
    return n;
}

/* The record of task and dataset among the n loaded: its index, or -1 after saying why none
 * fits (one record: what it is for; several: that none is for this task and dataset). */
static long find_baseline(const char *path, json_t *const *recs, const long *lines, long n,
                          const char *task, const char *dataset)
{
    for (long i = 0; i < n; i++) {
        const char *bt = json_string_value(json_object_get(recs[i], "task"));
        const char *bd = json_string_value(json_object_get(recs[i], "dataset"));
        if (bt && task && !strcmp(bt, task) && same_dataset(bd, dataset))
            return i;
    }
    if (n == 1) {
        const char *bt = json_string_value(json_object_get(recs[0], "task"));
        const char *bd = json_string_value(json_object_get(recs[0], "dataset"));
        if (!json_is_object(recs[0]) || !json_is_object(json_object_get(recs[0], "metrics")))
            return swift_error_at(path, lines[0], "not a swift-eval record (no 'metrics' object)");
        if (!bt || !task || strcmp(bt, task))
            return swift_error_at(
                path, lines[0], "baseline is for task '%s', not '%s'", bt ? bt : "?", task);
        return swift_error_at(path,
                              lines[0],
                              "baseline is for dataset '%s', not '%s' (compare runs on the same "
                              "data)",
                              bd ? bd : "?",
                              dataset ? dataset : "?");
    }
    return swift_error_at(path,
                          0,
                          "no baseline record for task '%s' on dataset '%s' among its %ld records",
                          task,
                          dataset ? dataset : "?",
                          n);
}

int swift_eval_baseline_check(const char *path, const char *task, const char *dataset)
{
    json_t **recs = swift_xmalloc(MAX_BASELINE_RECORDS * sizeof(*recs));
    long *lines = swift_xmalloc(MAX_BASELINE_RECORDS * sizeof(*lines));
    long n = load_baseline(path, recs, lines, MAX_BASELINE_RECORDS);
    long i = n < 0 ? -1 : find_baseline(path, recs, lines, n, task, dataset);
    for (long k = 0; k < n; k++)
        json_decref(recs[k]);
    free(recs);
    free(lines);
    return i < 0 ? -1 : 0;
}

/* Compare metric k (now c, baseline b): one line on stderr, one entry in cmp. 1: regression. */
static int compare_metric(const char *k, double c, double b, double max_drop, int verbose,
                          json_t *cmp)
{
    int lower = swift_eval_metric_direction(k) < 0;
    int bad = lower ? isnan(c) || c > b * (1.0 + max_drop) : isnan(c) || b - c > max_drop;
    if (bad)
        swift_error("regression: %s %.6g vs baseline %.6g, delta %+.6g (max drop %g%s)",
                    k,
                    c,
                    b,
                    c - b,
                    max_drop,
                    lower ? " relative" : "");
    else if (verbose)
        swift_info("ok: %s %.6g vs baseline %.6g, delta %+.6g", k, c, b, c - b);
    json_t *e = json_object();
    json_object_set_new(e, "baseline", json_real(b));
    json_object_set_new(e, "delta", isfinite(c - b) ? json_real(c - b) : json_null());
    json_object_set_new(e, "regression", json_boolean(bad));
    json_object_set_new(cmp, k, e);
    return bad;
}

int swift_eval_gate(json_t *rec, const char *baseline_path, double max_drop, int verbose)
{
    json_t **recs = swift_xmalloc(MAX_BASELINE_RECORDS * sizeof(*recs));
    long *lines = swift_xmalloc(MAX_BASELINE_RECORDS * sizeof(*lines));
    long n = load_baseline(baseline_path, recs, lines, MAX_BASELINE_RECORDS);
    long bi = n < 0 ? -1
                    : find_baseline(baseline_path,
                                    recs,
                                    lines,
                                    n,
                                    json_string_value(json_object_get(rec, "task")),
                                    json_string_value(json_object_get(rec, "dataset")));
    int rc = bi < 0 ? -1 : 0;
    json_t *bm = bi < 0 ? NULL : json_object_get(recs[bi], "metrics");
    if (bi >= 0 && !json_is_object(bm))
        rc = swift_error_at(
            baseline_path, lines[bi], "not a swift-eval record (no 'metrics' object)");
    if (rc == 0) {
        json_t *cm = json_object_get(rec, "metrics"), *cmp = json_object(), *bv;
        const char *k;
        int common = 0;
        json_object_foreach(bm, k, bv)
        {
            json_t *cv = json_object_get(cm, k);
            if (!json_is_number(bv) || !json_is_number(cv) || !swift_eval_metric_direction(k))
                continue;
            common++;
            rc += compare_metric(k, num(cv), num(bv), max_drop, verbose, cmp);
        }
        if (!common) {
            json_decref(cmp);
            rc = swift_error_at(baseline_path, lines[bi], "no metric in common with this run");
        } else {
            json_t *b = json_object();
            json_object_set_new(b, "file", json_string(baseline_path));
            json_object_set_new(b, "line", json_integer(lines[bi]));
            json_object_set_new(b, "max_drop", json_real(max_drop));
            json_object_set_new(b, "regressions", json_integer(rc));
            json_object_set_new(b, "metrics", cmp);
            json_object_set_new(rec, "baseline", b);
        }
    }
    for (long k = 0; k < n; k++)
        json_decref(recs[k]);
    free(recs);
    free(lines);
    return rc;
}
