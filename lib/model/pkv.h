/*
 * pkv — a paged key/value cache for lib/model's forward (swift-infer's engine, lib/infer): the
 * keys and values of every layer live in a pool of num_blocks blocks of block_size tokens, and a
 * sequence holds a block table (position j in blocks[j / block_size], at slot j % block_size), as
 * vLLM's PagedAttention. Sequences of any length share the pool; memory is taken block by block
 * as they grow and given back when they end.
 *
 * Blocks are reference-counted: swift_pkv_fork makes a sequence share another's blocks (the n
 * choices of a request share the prompt's). Only the block that receives the next token can be
 * written, so copy-on-write concerns at most one block per sequence: swift_pkv_reserve copies a
 * shared partial last block before the first write into it; full blocks stay shared.
 *
 *     struct swift_pkv c;
 *     swift_pkv_init(&c, &model, num_blocks, block_size, max_tokens);
 *     struct swift_pkv_seq a = {0}, b = {0};
 *     swift_pkv_reserve(&c, &a, n);                       // blocks for n more tokens, or -1
 *     struct swift_pkv_seq *seqs[] = {&a};
 *     swift_pkv_forward(&c, seqs, tokens, seqof, n, want, nwant, logits);
 *     swift_pkv_fork(&c, &b, &a);                         // b shares a's tokens
 *     swift_pkv_seq_free(&c, &a);                         // blocks back to the pool
 *     swift_pkv_release(&c);
 *
 * The forward (lib/model/forward.c) is swift_kv_forward's: the same layer function; the new
 * tokens' keys and values go to their block slots (copy_rows) and attention reads through the
 * block tables (the attention_paged op, the same loop as attention_cached: identical logits on
 * the CPU). The pool and the scratch are backend memory; block tables, reference counts and the
 * index arrays are host memory.
 */
#ifndef SWIFT_MODEL_PKV_H
#define SWIFT_MODEL_PKV_H

#include <stddef.h>
#include <stdint.h>

#include "lib/model/kv.h"

struct swift_model;

/* One sequence's view of the pool; zero-initialise it. */
struct swift_pkv_seq {
    int len;         /* tokens held */
    int nblocks;     /* blocks in the table (covering len, and what reserve added) */
    int cap;         /* the table's capacity */
    int32_t *blocks; /* host: block ids */
    int nreg;        /* leading full blocks already offered to the prefix cache (or taken
                      * from it) */
};

struct swift_pkv {
    struct swift_model *m; /* borrowed */
    int num_blocks, block_size, max_tokens;
    float *k, *v;      /* backend (layers, num_blocks * block_size, kv_heads * head_dim) */
    int *ref;          /* host (num_blocks): sequences holding each block, 0: free */
    int32_t *freel;    /* host: the free blocks (a stack) */
    int nfree, peak;   /* free blocks now; most ever used */
    struct swift_kv s; /* the scratch of one forward and its host index arrays (its own 1 x 1
                        * cache is not used) */
    int32_t *toff;     /* host (max_tokens): each token's block table in tables */
    int32_t *tables;   /* host: the block tables of the call's sequences */
    int ntables, tables_cap;
    double flops; /* matmul + attention FLOPs since init */
    /* the prefix cache (swift_pkv_prefix_*): full blocks found by their tokens and the block
     * before them, held or evictable (lru_*) */
    int32_t *bparent; /* host (num_blocks): the block before it, -1: none; -2: not registered */
    int32_t *btok;    /* host (num_blocks * block_size): a registered block's tokens */
    int32_t *htab;    /* host (hcap): registered blocks by hash, -1 empty, -2 deleted */
    int hcap, hdel;
    /* registered blocks no sequence holds (ref 0), kept for a later hit, least recently freed
     * first; taken (evicted) only when the free stack is empty */
    int32_t *lru_prev, *lru_next; /* host (num_blocks), -1: none */
    int32_t lru_head, lru_tail;
    int nevict; /* blocks in that list */
};

/* A pool of num_blocks blocks of block_size tokens, scratch for max_tokens tokens per forward.
 * Returns 0 or -1 (reported: out of memory, head_dim above 512, bad sizes, or a backend without
 * copy_rows and attention_paged). */
int swift_pkv_init(struct swift_pkv *c, struct swift_model *m, int num_blocks, int block_size,
                   int max_tokens);
void swift_pkv_release(struct swift_pkv *c);
/* Blocks held by sequences now. */
int swift_pkv_used(const struct swift_pkv *c);
/* Registered blocks that no sequence holds, kept for a later prefix hit (evictable). */
int swift_pkv_cached(const struct swift_pkv *c);

/* Blocks that growing s by n tokens takes from the pool: new blocks, plus one when the block
 * that receives the next token is shared (it is copied first). */
int swift_pkv_need(const struct swift_pkv *c, const struct swift_pkv_seq *s, int n);
/* Room for n more tokens in s (copying a shared partial block). Returns 0, or -1 when the pool
 * has fewer free blocks than swift_pkv_need (nothing reported, nothing changed). */
int swift_pkv_reserve(struct swift_pkv *c, struct swift_pkv_seq *s, int n);
/* Give s's blocks back (each is freed when no other sequence holds it); s is empty again and
 * keeps its table's memory. */
void swift_pkv_seq_clear(struct swift_pkv *c, struct swift_pkv_seq *s);
/* swift_pkv_seq_clear and free the table. */
void swift_pkv_seq_free(struct swift_pkv *c, struct swift_pkv_seq *s);
/* dst (cleared first) shares src's tokens: the blocks covering src's len, copy-on-write. */
void swift_pkv_fork(struct swift_pkv *c, struct swift_pkv_seq *dst,
                    const struct swift_pkv_seq *src);

/*
 * The prefix cache: sequences with the same first tokens (a system prompt, a template) share
 * the blocks of those tokens instead of computing them again (vLLM's automatic prefix
 * caching; blocks stay cached after their holders end, see below). A full block is registered with
 * its tokens and the block before it; a new sequence walks its tokens block by block:
 *
 *     while ((b = swift_pkv_prefix_find(&c, parent, tokens + s.len)) >= 0)
 *         swift_pkv_share(&c, &s, b), parent = b;        // s.len grows by block_size
 *     ...forward...
 *     swift_pkv_prefix_add(&c, &s, tokens + s.nreg * block_size);   // for each new full block
 *
 * A registered block is never written again (writes go past a sequence's full blocks). When
 * its last holder frees it, it stays registered in a list of evictable blocks (vLLM's free
 * block queue): a later sequence with the same tokens takes it back from there; a fresh block
 * is taken from the free stack first, then the least recently freed evictable block is evicted
 * (unregistered, with the registered blocks that follow it, whose keys name it). Evictable
 * blocks count as free: swift_pkv_used counts the blocks sequences hold, swift_pkv_cached the
 * evictable ones.
 */
/* The registered block holding tokens (block_size of them) after parent (-1: at the start), or
 * -1. */
int32_t swift_pkv_prefix_find(const struct swift_pkv *c, int32_t parent, const int32_t *tokens);
/* Append full block b to s (s holds whole blocks only, none reserved): s shares it. */
void swift_pkv_share(struct swift_pkv *c, struct swift_pkv_seq *s, int32_t b);
/* Offer s's block nreg (full) with its tokens to the cache (a block with the same parent and
 * tokens already there stays the one found); nreg grows by one. */
void swift_pkv_prefix_add(struct swift_pkv *c, struct swift_pkv_seq *s, const int32_t *tokens);

/*
 * The model's forward on the paged cache (lib/model/forward.c). N new tokens (N <= max_tokens):
 * token i goes to seqs[seqof[i]] at that sequence's next position (a sequence's tokens in
 * order); room must have been reserved. Writes the logits of the tokens listed in want[0..nwant)
 * to logits (nwant x V, host memory). Returns 0, or -1 after reporting a token outside the
 * vocabulary, a sequence index out of range or a sequence without room (nothing changed then).
 */
int swift_pkv_forward(struct swift_pkv *c, struct swift_pkv_seq *const *seqs, int nseqs,
                      const int32_t *tokens, const int *seqof, int N, const int *want, int nwant,
                      float *logits);

/* What a vision-language model's tokens add to swift_pkv_forward (lib/model/vlm.h, the engine's
 * image requests): rotary positions that are not the cache positions, and embeddings that
 * replace some tokens' (an image's merged patches over its <|image_pad|> tokens). */
struct swift_pkv_mm {
    const int32_t *pos3;     /* NULL, or host (3, N): M-RoPE temporal, height and width positions of
                              * each token (the model's mrope_freq must be set); attention's causal
                              * order stays the cache's */
    const float *embeds;     /* host (nemb, hidden): rows written over the token embeddings */
    const int32_t *embed_at; /* host (nemb): distinct token indices (0..N) they replace */
    int nemb;
};
/* swift_pkv_forward with mm (NULL: exactly swift_pkv_forward). Also -1 (reported, nothing
 * changed) for positions on a model without M-RoPE or embeddings for tokens out of range. */
int swift_pkv_forward_mm(struct swift_pkv *c, struct swift_pkv_seq *const *seqs, int nseqs,
                         const int32_t *tokens, const int *seqof, int N, const int *want, int nwant,
                         float *logits, const struct swift_pkv_mm *mm);

#endif
