/*
 * mem — our own accounting of the memory a run holds, per category (issue 20): the backend
 * allocations of the model (parameters, gradients, activations, the generation cache) and of the
 * optimizer are counted where they are made, so logging.jsonl's "memory(GiB)" and the trace's
 * memory_by_category counter say what each technique (QLoRA, DoRA, GaLore, 8-bit AdamW) holds.
 *
 *     m->params = swift_mem_alloc(ops->alloc, SWIFT_MEM_PARAMS, bytes);
 *     swift_mem_free(ops->free, m->params);
 *     p = swift_mem_track(calloc(n, 4), SWIFT_MEM_OPTIMIZER, n * 4);   (host memory)
 *     swift_mem_untrack(p); free(p);
 *
 * A tracked pointer remembers its category and size, so the free side needs neither. Current and
 * peak bytes per category and of the total; the categories' bytes at the moment the total peaked.
 * Thread-safe (one mutex); counts are per process.
 */
#ifndef SWIFT_MEM_H
#define SWIFT_MEM_H

#include <stddef.h>

enum swift_mem_cat {
    SWIFT_MEM_PARAMS,      /* weights: fp32, 4-bit codes+absmax, LoRA/DoRA, reference copies */
    SWIFT_MEM_GRADS,       /* gradients of the trainable parameters */
    SWIFT_MEM_OPTIMIZER,   /* AdamW m/v, 8-bit codes+absmax, GaLore projections+moments */
    SWIFT_MEM_ACTIVATIONS, /* forward/backward buffers, the key/value cache, logits */
    SWIFT_MEM_OTHER,       /* scratch: communication buffers, decode tables */
    SWIFT_MEM_NCAT
};

struct swift_mem_stats {
    size_t cur[SWIFT_MEM_NCAT];     /* bytes held now */
    size_t peak[SWIFT_MEM_NCAT];    /* each category's own peak */
    size_t at_peak[SWIFT_MEM_NCAT]; /* each category's bytes when the total peaked */
    size_t total, total_peak;
};

/* The category's name: "params", "grads", "optimizer", "activations", "other". */
const char *swift_mem_name(int cat);
void swift_mem_add(int cat, size_t bytes);
void swift_mem_sub(int cat, size_t bytes);
/* Count p (bytes in cat) and remember it; NULL is passed through uncounted. Returns p. */
void *swift_mem_track(void *p, int cat, size_t bytes);
/* Uncount a pointer swift_mem_track remembered (others and NULL: nothing). */
void swift_mem_untrack(void *p);
/* alloc(bytes), tracked; free(p), untracked first (NULL: nothing). */
void *swift_mem_alloc(void *(*alloc)(size_t), int cat, size_t bytes);
void swift_mem_free(void (*fr)(void *), void *p);
void swift_mem_snapshot(struct swift_mem_stats *s);
/* Peaks start over from what is held now (a run's start). */
void swift_mem_reset_peak(void);

#endif
