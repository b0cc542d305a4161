#include "lib/analyze/merge.h"
#include "lib/core/cli.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "lib/core/banned.h"

int swift_an_rank_in(const char *list, int rank)
{
    if (!list || !*list)
        return 1;
    const char *p = list;
    while (*p) {
        char *end;
        long a = strtol(p, &end, 10), b = a;
        if (end == p)
            return 0;
        if (*end == '-') {
            const char *q = end + 1;
            b = strtol(q, &end, 10);
            if (end == q)
                return 0;
        }
        if (rank >= a && rank <= b)
            return 1;
        if (*end != ',')
            break;
        p = end + 1;
    }
    return 0;
}

struct mctx {
    const struct swift_an_source *src;
    size_t index;
    double lo, hi; /* kept time range (aligned), lo > hi: everything */
    double shift;  /* subtracted from ts */
    int rank;
    const char *label;
    FILE *fp;
    gzFile gz;
    int first;
    long written;
    int err;
};

static int out_str(struct mctx *m, const char *s, size_t n)
{
    if (m->gz)
        return gzwrite(m->gz, s, (unsigned)n) == (int)n ? 0 : -1;
    return fwrite(s, 1, n, m->fp) == n ? 0 : -1;
}

static int64_t remap_pid(struct mctx *m, json_t *pid)
{
    int64_t base = (int64_t)(m->index + 1) * 10000000;
    if (json_is_integer(pid)) {
        int64_t v = json_integer_value(pid) % 10000000;
        return base + (v < 0 ? -v : v);
    }
    return base + 9999999;
}

static int on_merge_event(void *vctx, json_t *e, uint64_t off, long line)
{
    struct mctx *m = vctx;
    (void)off;
    (void)line;
    const char *ph = json_string_value(json_object_get(e, "ph"));
    if (!ph)
        return 0;
    json_t *ts = json_object_get(e, "ts");
    if (ph[0] != 'M') {
        if (!json_is_number(ts))
            return 0; /* Perfetto drops these too */
        double t = json_number_value(ts) - m->shift;
        double d = json_number_value(json_object_get(e, "dur"));
        if (!isfinite(d))
            d = 0;
        if (m->lo <= m->hi && (d > 0 ? (t >= m->hi || t + d <= m->lo) : (t < m->lo || t > m->hi)))
            return 0;
        if (m->shift != 0)
            json_object_set_new(e, "ts", json_real(t));
    } else {
        const char *nm = json_string_value(json_object_get(e, "name"));
        if (nm && !strcmp(nm, "swift_meta"))
            return 0;
        if (nm && !strcmp(nm, "process_name")) {
            json_t *a = json_object_get(e, "args");
            const char *orig = json_string_value(json_object_get(a, "name"));
            char buf[512];
            if (m->src->kind == SWIFT_AN_SWIFT)
                snprintf(buf, sizeof(buf), "%s", orig ? orig : m->label);
            else {
                const char *where = m->src->host, *slash = strrchr(m->src->path, '/');
                if (!where)
                    where = slash ? slash + 1 : m->src->path;
                json_t *pid = json_object_get(e, "pid");
                if (json_is_integer(pid) && json_integer_value(pid) >= 0 &&
                    json_integer_value(pid) < 64) /* Kineto: GPU pid = device index */
                    snprintf(buf,
                             sizeof(buf),
                             "rank %d GPU %d @ %s",
                             m->rank,
                             (int)json_integer_value(pid),
                             where);
                else
                    snprintf(buf,
                             sizeof(buf),
                             "%s rank %d @ %s",
                             orig && *orig ? orig : "process",
                             m->rank,
                             where);
            }
            if (json_is_object(a))
                json_object_set_new(a, "name", json_string(buf));
        }
    }
    json_object_set_new(e, "pid", json_integer(remap_pid(m, json_object_get(e, "pid"))));
    json_t *id = json_object_get(e, "id");
    if (id && (ph[0] == 's' || ph[0] == 't' || ph[0] == 'f' || ph[0] == 'b' || ph[0] == 'e' ||
               ph[0] == 'n')) {
        if (json_is_integer(id))
            json_object_set_new(
                e, "id", json_integer(json_integer_value(id) + ((json_int_t)(m->index + 1) << 40)));
        else if (json_is_string(id)) {
            char buf[256];
            snprintf(buf, sizeof(buf), "r%zu:%s", m->index, json_string_value(id));
            json_object_set_new(e, "id", json_string(buf));
        }
    }
    char *s = json_dumps(e, JSON_COMPACT | JSON_REAL_PRECISION(17));
    if (!s)
        abort(); /* only a bug: jansson allocates through swift_xmalloc */
    int rc = out_str(m, m->first ? "\n" : ",\n", m->first ? 1 : 2);
    if (rc == 0)
        rc = out_str(m, s, strlen(s));
    free(s);
    m->first = 0;
    m->written++;
    if (rc < 0) {
        m->err = 1;
        return swift_error("write error while merging");
    }
    return 0;
}

static void step_range(const struct swift_an_proc *p, const struct swift_analyze_opts *o,
                       double *lo, double *hi)
{
    *lo = 1, *hi = 0; /* everything */
    if (!p->nsteps)
        return;
    if (o->step_lo >= 0) {
        double a = INFINITY, b = -INFINITY;
        for (size_t i = 0; i < p->nsteps; i++)
            if (p->steps[i].step >= o->step_lo && p->steps[i].step <= o->step_hi) {
                if (p->steps[i].ts < a)
                    a = p->steps[i].ts;
                if (p->steps[i].ts + p->steps[i].dur > b)
                    b = p->steps[i].ts + p->steps[i].dur;
            }
        if (a > b)
            a = 0, b = -1e300; /* no such step: keep only metadata */
        *lo = a, *hi = b;
    } else if (o->window >= 0) {
        size_t w = 0;
        for (size_t i = 1; i < p->nsteps; i++)
            if (p->steps[i].dur > p->steps[w].dur)
                w = i;
        size_t a = w >= (size_t)o->window ? w - (size_t)o->window : 0;
        size_t b = w + (size_t)o->window < p->nsteps ? w + (size_t)o->window : p->nsteps - 1;
        *lo = p->steps[a].ts;
        *hi = p->steps[b].ts + p->steps[b].dur;
    }
}

int swift_an_merge_write(const struct swift_an_set *set, const struct swift_an_proc *procs,
                         size_t n, json_t *report, const struct swift_analyze_opts *o)
{
    (void)report;
    struct swift_atomic af;
    if (swift_atomic_open(&af, o->merge) < 0)
        return -1;
    size_t l = strlen(o->merge);
    gzFile gz = NULL;
    if (l > 3 && !strcmp(o->merge + l - 3, ".gz")) {
        fflush(af.fp);
        gz = gzdopen(dup(fileno(af.fp)), "wb6");
        if (!gz) {
            swift_atomic_abort(&af);
            return swift_error("cannot start gzip output '%s'", o->merge);
        }
    }
    struct mctx m = {.fp = af.fp, .gz = gz, .first = 1};
    int rc = out_str(&m, "{\"traceEvents\":[", 16);
    for (size_t i = 0; i < set->n && rc == 0; i++) {
        const struct swift_an_proc *p = &procs[i];
        if (!swift_an_rank_in(o->ranks, p->rank))
            continue;
        m.src = &set->src[i];
        m.index = i;
        m.rank = p->rank;
        m.label = p->label;
        m.shift = m.src->kind == SWIFT_AN_SWIFT ? m.src->clock_offset_us : 0;
        step_range(p, o, &m.lo, &m.hi);
        rc = swift_an_stream_file(m.src->path, on_merge_event, NULL, &m);
    }
    (void)n;
    if (rc == 0)
        rc = out_str(&m, "\n]}\n", 4);
    if (gz && gzclose(gz) != Z_OK && rc == 0)
        rc = swift_error("cannot write '%s'", o->merge);
    if (rc < 0) {
        swift_atomic_abort(&af);
        return -1;
    }
    fseek(af.fp, 0, SEEK_END);
    long size = ftell(af.fp);
    if (swift_atomic_commit(&af) < 0)
        return -1;
    if (size > 0 && (unsigned long long)size > o->merge_warn_bytes)
        swift_warn("merged trace '%s' is %.0f MB: viewers struggle above ~256 MB; narrow it with "
                   "--steps A-B, --ranks LIST or --window N",
                   o->merge,
                   (double)size / 1e6);
    swift_info("merged %ld events from %zu input%s into '%s'",
               m.written,
               set->n,
               set->n == 1 ? "" : "s",
               o->merge);
    return 0;
}
