#include "lib/analyze/breakdown.h"
#include "lib/core/alloc.h"

#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

static int ival_lt(const struct swift_an_ival *x, const struct swift_an_ival *y)
{
    return x->b < y->b || (x->b == y->b && x->e < y->e);
}

/* Sort by start, then end, without a call per comparison (qsort's was ~5% of the time on large
 * traces): a typed merge sort
 * (equal intervals are identical, so the order is the one qsort gives). Intervals come mostly
 * in time order, so sorted runs are common: a sorted input costs one pass. tmp holds n. */
static void ival_sort(struct swift_an_ival *v, size_t n, struct swift_an_ival *tmp)
{
    if (n < 24) {
        for (size_t i = 1; i < n; i++) {
            struct swift_an_ival x = v[i];
            size_t j = i;
            for (; j > 0 && ival_lt(&x, &v[j - 1]); j--)
                v[j] = v[j - 1];
            v[j] = x;
        }
        return;
    }
    size_t h = n / 2;
    ival_sort(v, h, tmp);
    ival_sort(v + h, n - h, tmp);
    if (!ival_lt(&v[h], &v[h - 1]))
        return; /* already in order */
    memcpy(tmp, v, h * sizeof(*v));
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n)
        v[k++] = ival_lt(&v[j], &tmp[i]) ? v[j++] : tmp[i++];
    while (i < h)
        v[k++] = tmp[i++];
}

size_t swift_an_ival_merge(struct swift_an_ival *v, size_t n)
{
    if (n == 0)
        return 0;
    size_t sorted = 1;
    while (sorted < n && !ival_lt(&v[sorted], &v[sorted - 1]))
        sorted++;
    if (sorted < n) {
        struct swift_an_ival *tmp = swift_xmalloc((n / 2 + 1) * sizeof(*tmp));
        ival_sort(v, n, tmp);
        free(tmp);
    }
    size_t k = 0;
    for (size_t i = 1; i < n; i++) {
        if (v[i].b > v[k].e)
            v[++k] = v[i];
        else if (v[i].e > v[k].e)
            v[k].e = v[i].e;
    }
    return k + 1;
}

double swift_an_ival_len(const struct swift_an_ival *v, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += v[i].e - v[i].b;
    return s;
}

size_t swift_an_ival_and(const struct swift_an_ival *a, size_t na, const struct swift_an_ival *b,
                         size_t nb, struct swift_an_ival *out)
{
    size_t i = 0, j = 0, k = 0;
    while (i < na && j < nb) {
        double lo = a[i].b > b[j].b ? a[i].b : b[j].b;
        double hi = a[i].e < b[j].e ? a[i].e : b[j].e;
        if (lo < hi)
            out[k++] = (struct swift_an_ival){lo, hi};
        if (a[i].e < b[j].e)
            i++;
        else
            j++;
    }
    return k;
}

size_t swift_an_ival_sub(const struct swift_an_ival *a, size_t na, const struct swift_an_ival *b,
                         size_t nb, struct swift_an_ival *out)
{
    size_t j = 0, k = 0;
    for (size_t i = 0; i < na; i++) {
        double cur = a[i].b;
        while (j < nb && b[j].e <= cur)
            j++;
        size_t jj = j;
        while (jj < nb && b[jj].b < a[i].e) {
            if (b[jj].b > cur)
                out[k++] = (struct swift_an_ival){cur, b[jj].b};
            if (b[jj].e > cur)
                cur = b[jj].e;
            if (cur >= a[i].e)
                break;
            jj++;
        }
        if (cur < a[i].e)
            out[k++] = (struct swift_an_ival){cur, a[i].e};
    }
    return k;
}

double swift_an_ival_len_in(const struct swift_an_ival *v, size_t n, double lo, double hi)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) {
        double b = v[i].b > lo ? v[i].b : lo, e = v[i].e < hi ? v[i].e : hi;
        if (e > b)
            s += e - b;
    }
    return s;
}

void swift_an_ivec_push(struct swift_an_ivec *iv, double b, double e)
{
    if (iv->n == iv->cap) {
        iv->cap = iv->cap ? iv->cap * 2 : 256;
        iv->v = swift_xrealloc(iv->v, iv->cap * sizeof(*iv->v));
    }
    iv->v[iv->n++] = (struct swift_an_ival){b, e};
}

void swift_an_ivec_free(struct swift_an_ivec *iv)
{
    free(iv->v);
    memset(iv, 0, sizeof(*iv));
}

size_t swift_an_ival_find(const struct swift_an_ival *v, size_t n, double t)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid].e <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

long swift_an_ival_enclosing(const struct swift_an_ival *v, size_t n, double b, double e,
                             double tol)
{
    size_t lo = 0, hi = n;
    while (lo < hi) { /* first interval starting after b */
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid].b <= b)
            lo = mid + 1;
        else
            hi = mid;
    }
    long best = -1;
    for (size_t i = lo, k = 0; i > 0 && k < 64; i--, k++) {
        const struct swift_an_ival *c = &v[i - 1];
        if (c->e > b && c->e >= e - tol && (best < 0 || c->e - c->b < v[best].e - v[best].b))
            best = (long)(i - 1);
    }
    return best;
}

void swift_an_seg_add(struct swift_an_seg **seg, size_t *n, int part, const struct swift_an_ival *v,
                      size_t nv, double min_len)
{
    for (size_t i = 0; i < nv; i++) {
        double b = v[i].b, e = v[i].e;
        /* join the following pieces while the gap is below min_len */
        while (i + 1 < nv && v[i + 1].b - e < min_len)
            e = v[++i].e;
        if (e - b < min_len || *n >= 4096)
            continue;
        if ((*n & (*n - 1)) == 0 || *n == 0) {
            size_t cap = *n ? *n * 2 : 16;
            *seg = swift_xrealloc(*seg, cap * sizeof(**seg));
        }
        (*seg)[(*n)++] = (struct swift_an_seg){part, b, e};
    }
}

static int cmp_seg(const void *a, const void *b)
{
    const struct swift_an_seg *x = a, *y = b;
    return (x->b > y->b) - (x->b < y->b);
}

void swift_an_seg_sort(struct swift_an_seg *seg, size_t n)
{
    swift_an_sort(seg, n, sizeof(*seg), cmp_seg);
}
