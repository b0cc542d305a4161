#include "lib/analyze/breakdown.h"
#include "lib/core/alloc.h"

#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

static int cmp_ival(const void *a, const void *b)
{
    const struct swift_an_ival *x = a, *y = b;
    if (x->b != y->b)
        return x->b < y->b ? -1 : 1;
    return (x->e > y->e) - (x->e < y->e);
}

size_t swift_an_ival_merge(struct swift_an_ival *v, size_t n)
{
    if (n == 0)
        return 0;
    qsort(v, n, sizeof(*v), cmp_ival);
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
