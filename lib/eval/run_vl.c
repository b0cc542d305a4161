/* eval/run_vl — the loss and ppl tasks on a vision-language model (Qwen2-VL, Qwen2.5-VL;
 * lib/model/vlm.h) over image shards of swift-preprocess: each document of a sample, with its
 * images from the shards' image cache, through the model's full forward (the vision tower, the
 * merged embeddings over the pads, M-RoPE), cross-entropy over the tokens its loss mask trains,
 * as swift-train's forward computes it. */
#include "lib/eval/internal.h"
#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/core/trace.h"
#include "lib/formats/pixels.h"
#include "lib/formats/shard.h"
#include "lib/model/vlm.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/core/banned.h"

/* One sample's images (every image of its metadata, in order). */
struct vl_imgs {
    float *pix;
    int32_t *grid;
    int n, npatches, *first_patch; /* image k's rows start at first_patch[k] */
};

static void imgs_free(struct vl_imgs *im)
{
    free(im->pix);
    free(im->grid);
    free(im->first_patch);
    memset(im, 0, sizeof(*im));
}

static int imgs_load(struct vl_imgs *im, const struct swift_sample *x, const char *dir)
{
    memset(im, 0, sizeof(*im));
    if (!x->meta || !x->meta_len)
        return 0;
    json_t *root = json_loadb(x->meta, x->meta_len, 0, NULL);
    json_t *list = json_object_get(root, "images");
    size_t k;
    json_t *h;
    int rc = 0;
    json_array_foreach(list, k, h)
    {
        const char *hex = json_string_value(h);
        struct swift_pixels px;
        unsigned char *buf = NULL;
        if (!hex || !dir) {
            rc = swift_error("a sample's metadata names no image cache file");
            break;
        }
        if ((rc = swift_pixels_load(&px, &buf, dir, hex)) < 0)
            break;
        size_t np = (size_t)swift_pixels_patches(&px), pd = (size_t)swift_pixels_patch_dim(&px);
        im->pix = swift_xrealloc(im->pix, ((size_t)im->npatches + np) * pd * sizeof(float));
        swift_pixels_expand(&px, im->pix + (size_t)im->npatches * pd);
        im->grid = swift_xrealloc(im->grid, ((size_t)im->n + 1) * 3 * sizeof(int32_t));
        im->first_patch = swift_xrealloc(im->first_patch, ((size_t)im->n + 1) * sizeof(int));
        im->grid[3 * im->n] = (int32_t)px.grid_t;
        im->grid[3 * im->n + 1] = (int32_t)px.grid_h;
        im->grid[3 * im->n + 2] = (int32_t)px.grid_w;
        im->first_patch[im->n++] = im->npatches;
        im->npatches += (int)np;
        free(buf);
    }
    json_decref(root);
    return rc;
}

struct vl_acc {
    double sum;
    long count, correct;
};

/* One document (ids[0..n), the trained flags mask) with images [i0, i1) of im. */
static int doc_loss(struct swift_eval_runner *r, const uint32_t *ids, const uint8_t *mask, int n,
                    const struct vl_imgs *im, int i0, int i1, struct vl_acc *acc)
{
    if (n < 2)
        return 0;
    int32_t *tok = swift_xmalloc((size_t)n * sizeof(int32_t));
    int32_t *tgt = swift_xmalloc((size_t)n * sizeof(int32_t));
    for (int t = 0; t < n; t++) {
        tok[t] = (int32_t)ids[t];
        tgt[t] = t + 1 < n && mask[t + 1] ? (int32_t)ids[t + 1] : -1;
    }
    int pd = r->vlm->vc.patch_dim;
    int p0 = i0 < im->n ? im->first_patch[i0] : im->npatches;
    int p1 = i1 < im->n ? im->first_patch[i1] : im->npatches;
    struct swift_vlm_batch b = {.B = 1,
                                .T = n,
                                .tokens = tok,
                                .targets = tgt,
                                .pixels = im->pix ? im->pix + (size_t)p0 * pd : NULL,
                                .npatches = p1 - p0,
                                .grid_thw = im->grid ? im->grid + 3 * i0 : NULL,
                                .nimages = i1 - i0};
    struct swift_loss l = {0};
    double t0 = swift_eval_now();
    int rc = swift_vlm_forward(r->vlm, &b, &l, 0.0f);
    r->fwd_s += swift_eval_now() - t0;
    r->tokens += n;
    if (rc == 0) {
        acc->sum += l.sum;
        acc->count += l.count;
        acc->correct += l.correct;
    }
    free(tok);
    free(tgt);
    return rc;
}

/* The documents of sample x, each with the images its pads take. */
static int sample_loss(struct swift_eval_runner *r, const struct swift_sample *x,
                       const struct vl_imgs *im, int cap, struct vl_acc *acc)
{
    int32_t pad = r->vlm->vc.image_token_id, ms = r->vlm->vc.merge_size;
    uint32_t off = 0;
    int img = 0;
    for (uint32_t k = 0; k < x->n_docs; k++) {
        int n = (int)x->doc_len[k], pads = 0, i0 = img;
        for (int t = 0; t < n; t++)
            pads += x->ids[off + t] == (uint32_t)pad;
        while (pads > 0 && img < im->n) {
            const int32_t *g = im->grid + 3 * img++;
            pads -= g[0] * g[1] * g[2] / (ms * ms);
        }
        if (pads != 0)
            return swift_error("a document's image pads do not match its images' grids");
        if (n > cap && img > i0)
            return swift_error("a document with images is longer than --max-length %d (its "
                               "image tokens cannot be cut)",
                               cap);
        if (doc_loss(r, x->ids + off, x->mask + off, n < cap ? n : cap, im, i0, img, acc) < 0)
            return -1;
        off += x->doc_len[k];
    }
    return 0;
}

int swift_eval_run_vl_loss(struct swift_eval_runner *r, json_t *rec, long *n_out)
{
    const struct swift_eval_opts *o = r->o;
    char *index = swift_path_join(o->dataset, "index.json");
    int shards = swift_is_dir(o->dataset) && access(index, F_OK) == 0;
    free(index);
    if (!shards)
        return swift_error("'%s': a vision-language model's loss is read from shards (make them "
                           "with swift-preprocess --template qwen2_vl)",
                           o->dataset);
    struct swift_shards *s;
    if (swift_shards_open(&s, o->dataset, SWIFT_SHARDS_IMAGES) < 0)
        return -1;
    const char *cache = swift_shards_index(s)->image_cache;
    char *dir = cache ? swift_path_join(o->dataset, cache) : NULL;
    uint64_t ns = swift_shards_count(s);
    if (o->limit > 0 && (uint64_t)o->limit < ns)
        ns = (uint64_t)o->limit;
    r->prog.total = ns;
    struct vl_acc acc = {0};
    int rc = 0;
    long samples = 0;
    for (uint64_t i = 0; i < ns && rc == 0; i++) {
        struct swift_sample x;
        struct vl_imgs im;
        if ((rc = swift_shards_get(s, i, &x)) < 0)
            break;
        int64_t t0 = swift_trace_now();
        rc = imgs_load(&im, &x, dir);
        if (rc == 0)
            rc = sample_loss(r, &x, &im, o->max_length, &acc);
        imgs_free(&im);
        swift_eval_batch_span("forward", t0, (long)i, 1, x.len);
        samples++;
        swift_progress_update(&r->prog, (uint64_t)samples);
    }
    free(dir);
    swift_shards_close(s);
    if (rc < 0)
        return -1;
    if (swift_eval_loss_metrics(r, rec, acc.sum, acc.count, acc.correct) < 0)
        return -1;
    *n_out = samples;
    return 0;
}
