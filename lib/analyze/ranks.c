/*
 * ranks — the report's "ranks": a job of many ranks summarised instead of one row per rank
 * (docs/formats.md): the distribution of the ranks' step time and busy time (step time outside
 * communication, what the rule straggler compares), the slowest ranks by name, a compact
 * per-rank array, and the text/Markdown rendering (a heatmap of one character per rank).
 */
#include "lib/analyze/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

/* Per rank: the mean step time and the busy part of it (rules.c's busy_avg). */
struct rank_row {
    size_t i; /* process index */
    double step, busy;
};

static double busy_of(const struct swift_an_proc *p)
{
    double c = p->comm_part >= 0 && p->comm_part < p->npart ? p->part_avg[p->comm_part] : 0;
    return p->step_avg - c;
}

static int cmp_busy(const void *a, const void *b, void *ctx)
{
    (void)ctx;
    const struct rank_row *x = a, *y = b;
    if (x->busy != y->busy)
        return (x->busy > y->busy) - (x->busy < y->busy);
    return (x->i > y->i) - (x->i < y->i);
}

static double r1(double v)
{
    return isfinite(v) ? round(v * 10) / 10 : 0;
}

/* {rank, label, busy_us} of row q of the sorted rows. */
static json_t *at(const struct swift_an_proc *ps, const struct rank_row *row)
{
    const struct swift_an_proc *p = &ps[row->i];
    return json_pack("{s:i,s:s,s:f,s:f}",
                     "rank",
                     p->rank,
                     "label",
                     p->label,
                     "busy_us",
                     r1(row->busy),
                     "step_us",
                     r1(row->step));
}

json_t *swift_an_ranks_json(const struct swift_an_proc *ps, size_t n, int top)
{
    struct rank_row *rows = swift_xmalloc((n + 1) * sizeof(*rows));
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (ps[i].nsteps)
            rows[m++] = (struct rank_row){i, ps[i].step_avg, busy_of(&ps[i])};
    if (m < 2) {
        free(rows);
        return json_null();
    }
    swift_an_sort_r(rows, m, sizeof(*rows), cmp_busy, NULL);
    /* nearest rank on the sorted busy times: the median's lower middle, p90 ceil(0.9 m) */
    size_t qi[4] = {0, (m - 1) / 2, (size_t)ceil(0.9 * (double)m) - 1, m - 1};
    double med = rows[qi[1]].busy;
    json_t *dist = json_pack("{s:o,s:o,s:o,s:o}",
                             "min",
                             at(ps, &rows[qi[0]]),
                             "median",
                             at(ps, &rows[qi[1]]),
                             "p90",
                             at(ps, &rows[qi[2]]),
                             "max",
                             at(ps, &rows[qi[3]]));
    json_t *slow = json_array();
    for (size_t q = 0; q < m && q < (size_t)top; q++) {
        const struct rank_row *row = &rows[m - 1 - q];
        json_t *o = at(ps, row);
        json_object_set_new(
            o, "above_median_pct", json_real(med > 0 ? r1(100 * (row->busy - med) / med) : 0));
        json_array_append_new(slow, o);
    }
    /* per rank, in process order: [rank, steps, step mean, busy mean] */
    json_t *per = json_array();
    for (size_t i = 0; i < n; i++)
        if (ps[i].nsteps)
            json_array_append_new(per,
                                  json_pack("[i,I,f,f]",
                                            ps[i].rank,
                                            (json_int_t)ps[i].nsteps,
                                            r1(ps[i].step_avg),
                                            r1(busy_of(&ps[i]))));
    free(rows);
    return json_pack("{s:I,s:s,s:o,s:o,s:[ssss],s:o}",
                     "n",
                     (json_int_t)m,
                     "by",
                     "busy_us (mean step time outside communication)",
                     "busy_us",
                     dist,
                     "slowest",
                     slow,
                     "per_rank_columns",
                     "rank",
                     "steps",
                     "step_us",
                     "busy_us",
                     "per_rank",
                     per);
}

/* One character per rank: how far its busy time is above the median. */
static char heat(double pct)
{
    return pct < 2 ? '.' : pct < 5 ? ':' : pct < 10 ? '+' : pct < 25 ? '#' : '@';
}

void swift_an_ranks_print(FILE *fp, json_t *r, int md)
{
    json_t *rk = json_object_get(r, "ranks");
    if (!json_is_object(rk) ||
        json_array_size(json_object_get(r, "processes")) <= SWIFT_AN_RANKS_DETAIL)
        return; /* few ranks: each process in full says it all */
    json_t *d = json_object_get(rk, "busy_us"), *per = json_object_get(rk, "per_rank");
    char b[4][32];
    static const char *const q[] = {"min", "median", "p90", "max"};
    fprintf(fp,
            md ? "\n## Ranks (%zu)\n\nBusy time per step (outside communication):"
               : "\nRanks (%zu): busy time per step (outside communication):",
            (size_t)json_integer_value(json_object_get(rk, "n")));
    for (int k = 0; k < 4; k++) {
        json_t *o = json_object_get(d, q[k]);
        fprintf(fp,
                "%s %s %s (rank %d)",
                k ? "," : "",
                q[k],
                swift_an_dur(b[k], sizeof(b[k]), swift_an_jnum(o, "busy_us")),
                (int)swift_an_jnum(o, "rank"));
    }
    fprintf(fp, md ? "\n\nSlowest ranks:" : "\n  slowest:");
    size_t i;
    json_t *o;
    json_array_foreach(json_object_get(rk, "slowest"), i, o)
        fprintf(fp,
                "%s rank %d %s (%+.1f%%)",
                i ? "," : "",
                (int)swift_an_jnum(o, "rank"),
                swift_an_dur(b[0], sizeof(b[0]), swift_an_jnum(o, "busy_us")),
                swift_an_jnum(o, "above_median_pct"));
    json_array_foreach(json_object_get(r, "bottlenecks"), i, o)
    {
        if (!strcmp(swift_an_jstr(o, "rule"), "straggler"))
            fprintf(fp,
                    md ? "\n\nStraggler: rank %d (%s)" : "\n  straggler: rank %d (%s)",
                    (int)swift_an_jnum(o, "rank"),
                    swift_an_jstr(o, "severity"));
    }
    double med = swift_an_jnum(json_object_get(d, "median"), "busy_us");
    fprintf(fp,
            md ? "\n\nHeatmap, one character per rank in process order (above the median: "
                 ". <2%%, : <5%%, + <10%%, # <25%%, @ more):\n\n```\n"
               : "\n  heatmap, one character per rank in process order (above the median: "
                 ". <2%%, : <5%%, + <10%%, # <25%%, @ more):\n");
    json_array_foreach(per, i, o)
    {
        if (i % 64 == 0)
            fprintf(fp, "%s%5zu ", i ? "\n" : "", i);
        double v = json_number_value(json_array_get(o, 3));
        fputc(heat(med > 0 ? 100 * (v - med) / med : 0), fp);
    }
    fprintf(fp, md ? "\n```\n" : "\n");
}

struct pick {
    size_t i;
    double v;
};

static int cmp_pick(const void *a, const void *b, void *ctx)
{
    (void)ctx;
    const struct pick *x = a, *y = b;
    if (x->v != y->v)
        return (x->v < y->v) - (x->v > y->v);
    return (x->i > y->i) - (x->i < y->i);
}

void swift_an_ranks_pick(json_t *rows, const char *key, int top, char *keep)
{
    size_t n = json_array_size(rows);
    struct pick *pk = swift_xmalloc((n + 1) * sizeof(*pk));
    for (size_t i = 0; i < n; i++) {
        double v = swift_an_jnum(json_array_get(rows, i), key);
        pk[i] = (struct pick){i, isfinite(v) ? v : -INFINITY};
        keep[i] = n <= SWIFT_AN_RANKS_DETAIL;
    }
    swift_an_sort_r(pk, n, sizeof(*pk), cmp_pick, NULL);
    for (size_t q = 0; q < n && q < (size_t)top; q++)
        keep[pk[q].i] = 1;
    free(pk);
}

/* "0-4,6,9-31" of the ranks (ascending) into b. */
static void rank_list(char *b, size_t n, const int *r, size_t m)
{
    size_t len = 0;
    b[0] = 0;
    for (size_t i = 0; i < m && len + 24 < n; i++) {
        size_t j = i;
        while (j + 1 < m && r[j + 1] == r[j] + 1)
            j++;
        len += (size_t)snprintf(
            b + len, n - len, j > i ? "%s%d-%d" : "%s%d", i ? "," : "", r[i], r[j]);
        i = j;
    }
    if (len + 24 >= n)
        snprintf(b + len, n - len, ",...");
}

static int cmp_int(const void *a, const void *b, void *ctx)
{
    (void)ctx;
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int swift_an_ranks_repeat(json_t *bs, size_t i, char *more, size_t n)
{
    const char *rule = swift_an_jstr(json_array_get(bs, i), "rule");
    more[0] = 0;
    for (size_t q = 0; q < i; q++)
        if (!strcmp(swift_an_jstr(json_array_get(bs, q), "rule"), rule))
            return 1;
    size_t nb = json_array_size(bs), m = 0;
    int *r = swift_xmalloc((nb + 1) * sizeof(*r));
    for (size_t q = i + 1; q < nb; q++) {
        json_t *b = json_array_get(bs, q);
        if (!strcmp(swift_an_jstr(b, "rule"), rule))
            r[m++] = (int)swift_an_jnum(b, "rank");
    }
    if (m) {
        char list[256];
        swift_an_sort_r(r, m, sizeof(*r), cmp_int, NULL);
        rank_list(list, sizeof(list), r, m);
        snprintf(more, n, "also on %zu more rank%s: %s", m, m > 1 ? "s" : "", list);
    }
    free(r);
    return 0;
}
