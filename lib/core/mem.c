/* mem — per-category memory accounting (see mem.h): counters under one mutex, and an
 * open-addressing table from tracked pointer to (category, bytes). */
#include "lib/core/mem.h"
#include "lib/core/alloc.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "lib/core/banned.h"

struct slot {
    void *p; /* NULL: empty; &tomb: deleted */
    size_t bytes;
    int cat;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct swift_mem_stats st;
static struct slot *tab;
static size_t cap, used; /* used counts live entries and tombstones */
static char tomb;

static const char *const names[SWIFT_MEM_NCAT] = {
    "params", "grads", "optimizer", "activations", "other"};

const char *swift_mem_name(int cat)
{
    return cat >= 0 && cat < SWIFT_MEM_NCAT ? names[cat] : "other";
}

static int clamp(int cat)
{
    return cat >= 0 && cat < SWIFT_MEM_NCAT ? cat : SWIFT_MEM_OTHER;
}

static void add_locked(int cat, size_t bytes)
{
    st.cur[cat] += bytes;
    st.total += bytes;
    if (st.cur[cat] > st.peak[cat])
        st.peak[cat] = st.cur[cat];
    if (st.total > st.total_peak) {
        st.total_peak = st.total;
        for (int c = 0; c < SWIFT_MEM_NCAT; c++)
            st.at_peak[c] = st.cur[c];
    }
}

static void sub_locked(int cat, size_t bytes)
{
    size_t b = bytes < st.cur[cat] ? bytes : st.cur[cat];
    st.cur[cat] -= b;
    st.total -= b;
}

void swift_mem_add(int cat, size_t bytes)
{
    pthread_mutex_lock(&mu);
    add_locked(clamp(cat), bytes);
    pthread_mutex_unlock(&mu);
}

void swift_mem_sub(int cat, size_t bytes)
{
    pthread_mutex_lock(&mu);
    sub_locked(clamp(cat), bytes);
    pthread_mutex_unlock(&mu);
}

static size_t hash(const void *p, size_t n)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)(x & (n - 1));
}

static void insert_locked(void *p, int cat, size_t bytes);

static void grow_locked(void)
{
    struct slot *old = tab;
    size_t ocap = cap;
    cap = cap ? cap * 2 : 256;
    tab = swift_xcalloc(cap, sizeof(*tab));
    used = 0;
    for (size_t i = 0; i < ocap; i++)
        if (old[i].p && old[i].p != &tomb)
            insert_locked(old[i].p, old[i].cat, old[i].bytes);
    free(old);
}

static void insert_locked(void *p, int cat, size_t bytes)
{
    if ((used + 1) * 2 > cap)
        grow_locked();
    size_t i = hash(p, cap);
    while (tab[i].p && tab[i].p != &tomb)
        i = (i + 1) & (cap - 1);
    if (!tab[i].p)
        used++;
    tab[i] = (struct slot){p, bytes, cat};
}

void *swift_mem_track(void *p, int cat, size_t bytes)
{
    if (!p)
        return p;
    pthread_mutex_lock(&mu);
    cat = clamp(cat);
    insert_locked(p, cat, bytes);
    add_locked(cat, bytes);
    pthread_mutex_unlock(&mu);
    return p;
}

void swift_mem_untrack(void *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&mu);
    for (size_t i = cap ? hash(p, cap) : 0, k = 0; k < cap && tab[i].p; k++) {
        if (tab[i].p == p) {
            sub_locked(tab[i].cat, tab[i].bytes);
            tab[i].p = &tomb;
            break;
        }
        i = (i + 1) & (cap - 1);
    }
    pthread_mutex_unlock(&mu);
}

void *swift_mem_alloc(void *(*alloc)(size_t), int cat, size_t bytes)
{
    return swift_mem_track(alloc(bytes), cat, bytes);
}

void swift_mem_free(void (*fr)(void *), void *p)
{
    if (!p)
        return;
    swift_mem_untrack(p);
    fr(p);
}

void swift_mem_snapshot(struct swift_mem_stats *s)
{
    pthread_mutex_lock(&mu);
    *s = st;
    pthread_mutex_unlock(&mu);
}

void swift_mem_reset_peak(void)
{
    pthread_mutex_lock(&mu);
    st.total_peak = st.total;
    for (int c = 0; c < SWIFT_MEM_NCAT; c++)
        st.peak[c] = st.at_peak[c] = st.cur[c];
    pthread_mutex_unlock(&mu);
}
