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

/* A growable interval list with a ceiling (SIZE_MAX/sizeof). */
struct swift_an_ivec {
    struct swift_an_ival *v;
    size_t n, cap;
};
void swift_an_ivec_push(struct swift_an_ivec *iv, double b, double e);
void swift_an_ivec_free(struct swift_an_ivec *iv);

#endif
