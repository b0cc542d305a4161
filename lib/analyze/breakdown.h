/*
 * analyze/breakdown — time intervals and the step-time breakdown of our own traces.
 *
 * Intervals are [b, e) in microseconds. swift_an_ival_merge() follows HTA's
 * merge_kernel_intervals: sorted by start, a new group begins only when a start is strictly
 * after every end so far, so touching intervals merge.
 */
#ifndef SWIFT_ANALYZE_BREAKDOWN_H
#define SWIFT_ANALYZE_BREAKDOWN_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* qsort that accepts empty (NULL) arrays. */
static inline void swift_an_sort(void *base, size_t n, size_t size,
                                 int (*cmp)(const void *, const void *))
{
    if (n > 1)
        qsort(base, n, size, cmp);
}

struct swift_an_ival {
    double b, e;
};

/* Sort and merge in place; returns the new count. */
size_t swift_an_ival_merge(struct swift_an_ival *v, size_t n);
/* Total length of merged intervals. */
double swift_an_ival_len(const struct swift_an_ival *v, size_t n);
/* out = a ∩ b for merged a and b; out needs na + nb slots; returns the count. */
size_t swift_an_ival_and(const struct swift_an_ival *a, size_t na, const struct swift_an_ival *b,
                         size_t nb, struct swift_an_ival *out);
/* out = a \ b for merged a and b; out needs na + nb slots; returns the count. */
size_t swift_an_ival_sub(const struct swift_an_ival *a, size_t na, const struct swift_an_ival *b,
                         size_t nb, struct swift_an_ival *out);
/* |[lo,hi) ∩ merged v| */
double swift_an_ival_len_in(const struct swift_an_ival *v, size_t n, double lo, double hi);

/* Index of the first merged interval ending after t (binary search). */
size_t swift_an_ival_find(const struct swift_an_ival *v, size_t n, double t);

/* A child span's end may pass its parent's by this many µs: our traces' timestamps are doubles
 * of µs since the epoch, 0.25 µs apart at today's dates, and end = ts + dur rounds once more.
 * (Rounding keeps order, so a child never starts before its parent.) */
#define SWIFT_AN_NEST_TOL 0.5
/* Index of the innermost (shortest) interval of v that contains [b, e]: it starts at or before
 * b, ends after b and at or after e - tol; -1 when none. v is sorted by start and its
 * intervals are disjoint or nested (the spans of one thread); the search looks back over at
 * most 64 intervals starting before b. */
long swift_an_ival_enclosing(const struct swift_an_ival *v, size_t n, double b, double e,
                             double tol);

/* A timeline segment: part index over [b, e) µs. */
struct swift_an_seg {
    int part;
    double b, e;
};
/* How many of the longest steps keep a timeline (for the HTML strip and the JSON). */
#define SWIFT_AN_TIMELINE_STEPS 8
/* Append v's intervals as segments of `part`, joining gaps and dropping pieces shorter than
 * min_len (so a strip stays small), with a ceiling of 4096 segments per step. */
void swift_an_seg_add(struct swift_an_seg **seg, size_t *n, int part, const struct swift_an_ival *v,
                      size_t nv, double min_len);
void swift_an_seg_sort(struct swift_an_seg *seg, size_t n);

/* A growable interval list with a ceiling (SIZE_MAX/sizeof). */
struct swift_an_ivec {
    struct swift_an_ival *v;
    size_t n, cap;
};
void swift_an_ivec_push(struct swift_an_ivec *iv, double b, double e);
void swift_an_ivec_free(struct swift_an_ivec *iv);

#endif
