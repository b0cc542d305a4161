/* The swift-eval output record, its table on stderr, and the regression gate. */
#include "lib/eval/eval.h"
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

int swift_eval_metric_lower_is_better(const char *name)
{
    size_t l = strlen(name);
    return !strcmp(name, "loss") || !strcmp(name, "ppl") ||
           (l > 5 && !strcmp(name + l - 5, "_loss")) || (l > 4 && !strcmp(name + l - 4, "_ppl"));
}

static double num(json_t *v)
{
    return json_is_integer(v) ? (double)json_integer_value(v) : json_real_value(v);
}

int swift_eval_gate(const json_t *rec, const char *baseline_path, double max_drop)
{
    char *data;
    size_t len;
    if (swift_read_file(baseline_path, (size_t)64 << 20, &data, &len) < 0)
        return -1;
    /* a record, or a JSONL file of records: the one of the same task and dataset, else the
     * first of the same task, else the first */
    json_t *base = NULL;
    int best = -1;
    long line = 0, base_line = 1;
    const char *ct0 = json_string_value(json_object_get(rec, "task"));
    const char *cd0 = json_string_value(json_object_get(rec, "dataset"));
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
                    json_decref(base);
                    free(data);
                    return swift_error_at(baseline_path, line + err.line - 1, "%s", err.text);
                }
                nl = NULL;
            }
            const char *bt = json_string_value(json_object_get(v, "task"));
            const char *bd = json_string_value(json_object_get(v, "dataset"));
            int score = !base ? 0 : -1;
            if (bt && ct0 && !strcmp(bt, ct0))
                score = 1 + (bd && cd0 && !strcmp(bd, cd0));
            if (score > best) {
                json_decref(base);
                base = v;
                best = score;
                base_line = line;
            } else {
                json_decref(v);
            }
        }
        if (!nl)
            break;
        p = nl + 1;
    }
    free(data);
    if (!base)
        return swift_error_at(baseline_path, 1, "no record");
    int rc = 0;
    json_t *bm = json_object_get(base, "metrics");
    if (!json_is_object(base) || !json_is_object(bm)) {
        rc = swift_error_at(
            baseline_path, base_line, "not a swift-eval record (no 'metrics' object)");
        goto out;
    }
    const char *bt = json_string_value(json_object_get(base, "task"));
    const char *ct = json_string_value(json_object_get(rec, "task"));
    if (bt && ct && strcmp(bt, ct)) {
        rc =
            swift_error_at(baseline_path, base_line, "baseline is for task '%s', not '%s'", bt, ct);
        goto out;
    }
    json_t *cm = json_object_get(rec, "metrics");
    int common = 0;
    const char *k;
    json_t *bv;
    json_object_foreach(bm, k, bv)
    {
        json_t *cv = json_object_get(cm, k);
        if (!json_is_number(bv) || !json_is_number(cv))
            continue;
        common++;
        double b = num(bv), c = num(cv);
        int bad;
        if (swift_eval_metric_lower_is_better(k))
            bad = isnan(c) || c > b * (1.0 + max_drop);
        else
            bad = isnan(c) || b - c > max_drop;
        if (bad) {
            swift_error("regression: %s %.6g vs baseline %.6g (max drop %g%s)",
                        k,
                        c,
                        b,
                        max_drop,
                        swift_eval_metric_lower_is_better(k) ? " relative" : "");
            rc++;
        }
    }
    if (!common)
        rc = swift_error_at(baseline_path, base_line, "no metric in common with this run");
out:
    json_decref(base);
    return rc;
}
