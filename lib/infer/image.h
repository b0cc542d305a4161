/*
 * image — the images of a swift-infer request (docs/infer.md "Images"): each URL of an image_url
 * part (or path of an ms-swift row's "images") read, decoded (lib/formats/image.h) and processed
 * as Qwen2-VL's image processor does (lib/preprocess/vision.h, lib/formats/pixels.h), and the
 * prompt's one <|image_pad|> per image (SWIFT_OAI_IMAGE_MARK) expanded to the image's tokens.
 * Nothing is fetched from the network: http(s) URLs are a 400 that says to download first.
 *
 *     struct swift_infer_pixels px;
 *     if (swift_infer_images(&im, &rq, base, &ids, &n, &px, &er) < 0)
 *         reply(er.status, swift_oai_error_json(&er));       // 400: bad, missing, undecodable
 *     struct swift_engine_images ei = {px.pixels, px.npatches, px.grid, px.nimages};
 *     swift_engine_add_images(im.eng, ids, n, &ei, ...);
 *     swift_infer_pixels_release(&px);
 */
#ifndef SWIFT_INFER_IMAGE_H
#define SWIFT_INFER_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "lib/infer/openai.h"

struct swift_infer_model;

/* A request's images as the engine takes them (host memory, owned). */
struct swift_infer_pixels {
    float *pixels; /* (npatches, patch_dim) pixel_values, the images one after the other */
    int npatches;
    int32_t *grid; /* (nimages, 3) */
    int nimages;
};
void swift_infer_pixels_release(struct swift_infer_pixels *px);

/* The bytes of a data: URL (RFC 2397 with ";base64": "data:image/png;base64,iVBOR..."); the media
 * type must be image/... or absent. *data is malloc'ed. Returns 0, or -1 with a one-line
 * message in err (nothing allocated). Whitespace in the base64 is skipped; padding is optional. */
int swift_infer_data_url(const char *url, size_t len, unsigned char **data, size_t *n, char *err,
                         size_t errlen);

/* One image: ref a data: URL, file:// URL or path (a relative path joined to base when base is
 * not NULL), read, decoded, processed with vo; its pixel_values (patch_dim floats a row, the
 * model's) appended to px. Returns 0, or -1 with the reason in err (px as it was). */
struct swift_vl_opts;
int swift_infer_image_load(const char *ref, const char *base, const struct swift_vl_opts *vo,
                           int patch_dim, struct swift_infer_pixels *px, char *err, size_t errlen);
/* Each single pad token of ids[0..*n) (one per image of px, in order) expanded to its image's
 * t*h*w / merge_size^2 tokens (*ids reallocated). Returns 0, or -1 with a message in err when the
 * pads are not one per image. */
int swift_infer_expand_pads(int32_t pad, int merge_size, const struct swift_infer_pixels *px,
                            int32_t **ids, int *n, char *err, size_t errlen);

/* rq's images (rq->nimages may be 0: *ids untouched, px empty) against model im: a data: URL,
 * file:// URL or path (relative: to base when rq->images_rel and base is not NULL), read,
 * decoded and processed; each <|image_pad|> of ids[0..*n) (one per image, in order) expanded to
 * the image's token count (*ids reallocated). Returns 0, or -1 with a 400 in er naming the image
 * (a model without vision, an http(s) URL, a missing or undecodable file, pads that do not match
 * the images). */
int swift_infer_images(const struct swift_infer_model *im, const struct swift_oai_request *rq,
                       const char *base, int32_t **ids, int *n, struct swift_infer_pixels *px,
                       struct swift_oai_error *er);

#endif
