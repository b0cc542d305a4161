/*
 * pixels — the image cache between swift-preprocess and the trainer (docs/formats.md "Image
 * cache"), and the last, decode-free step of the Qwen2-VL image processor.
 *
 * swift-preprocess decodes each image once, resizes it as Qwen2-VL's processor does
 * (lib/preprocess/vision.h) and stores the RESIZED 8-bit RGB image, not the float patches: the
 * float pixel_values are a pure function of those bytes (rescale 1/255, normalize, cut into
 * 14x14 patches, repeat twice in time, order by 2x2 merge groups), 8 times smaller than the
 * float32 patches (which repeat every pixel twice), and swift_pixels_expand() rebuilds them
 * bit-exactly in one memory-bound pass, so training never decodes or resizes an image.
 *
 * A cache file, "<shard dir>/images/<sha256 of the file>.pix", is little-endian:
 *
 *     offset  size  field
 *     0       8     magic "SWPIXEL\0"
 *     8       4     u32 version (1)
 *     12      4     u32 header_size (64; readers skip to it)
 *     16      4     u32 grid_t (1 for an image)
 *     20      4     u32 grid_h (patches down; height = grid_h * patch_size)
 *     24      4     u32 grid_w (patches across)
 *     28      4     u32 patch_size (14)
 *     32      4     u32 merge_size (2)
 *     36      4     u32 temporal_patch_size (2)
 *     40      8     u64 payload_size (= grid_h * patch_size * grid_w * patch_size * 3)
 *     48      4     u32 payload_crc32 (zlib crc32)
 *     52      12    reserved (0)
 *     payload  u8 rgb[height][width][3]: the resized image, before rescaling
 *
 * The name is the SHA-256 of the whole file, so the same image at the same size is stored once
 * however many rows use it, and a file that does not hash to its name is corrupt.
 *
 *     struct swift_pixels px;
 *     if (swift_pixels_parse(&px, buf, len, "images/ab12....pix") < 0)   // borrowed view
 *         return -1;
 *     float *pv = malloc(swift_pixels_values_size(&px));
 *     swift_pixels_expand(&px, pv);   // pixel_values [grid_t*grid_h*grid_w, 3*2*14*14]
 */
#ifndef SWIFT_PIXELS_H
#define SWIFT_PIXELS_H

#include <stddef.h>
#include <stdint.h>

#define SWIFT_PIXELS_MAGIC "SWPIXEL"
#define SWIFT_PIXELS_VERSION 1
#define SWIFT_PIXELS_HEADER_SIZE 64
#define SWIFT_PIXELS_EXT ".pix"

/* OPENAI_CLIP_MEAN / OPENAI_CLIP_STD (transformers utils/constants.py), Qwen2-VL's. */
extern const float swift_pixels_clip_mean[3];
extern const float swift_pixels_clip_std[3];

/* One resized image (a view: rgb is borrowed unless the writer made it). */
struct swift_pixels {
    uint32_t grid_t, grid_h, grid_w;
    uint32_t patch_size, merge_size, temporal_patch_size;
    uint32_t height, width; /* grid_h * patch_size, grid_w * patch_size */
    const uint8_t *rgb;     /* height * width * 3 */
};

/* Rows of pixel_values: grid_t * grid_h * grid_w. */
uint64_t swift_pixels_patches(const struct swift_pixels *px);
/* Floats per row: 3 * temporal_patch_size * patch_size^2 (1176 for Qwen2-VL). */
uint64_t swift_pixels_patch_dim(const struct swift_pixels *px);
/* Bytes of the float pixel_values (patches * patch_dim * 4). */
uint64_t swift_pixels_values_size(const struct swift_pixels *px);
/* <|image_pad|> tokens the image takes: patches / merge_size^2. */
uint64_t swift_pixels_tokens(const struct swift_pixels *px);

/*
 * transformers' Qwen2VLImageProcessor after the resize: x' = (float)x - 255*mean) / (255*std)
 * in float32 (its fused rescale + normalize), then patchify: row r = ((bh * (grid_w/m) + bw) * m
 * + mh) * m + mw for the merge block (bh, bw) and the position (mh, mw) in it, each row laid out
 * [channel][time][py][px] with the image repeated over time. out has
 * swift_pixels_values_size() bytes. Pure arithmetic; cannot fail on a parsed image.
 */
void swift_pixels_expand(const struct swift_pixels *px, float *out);

/* Check a whole cache file in memory (magic, version, sizes, shape rules, CRC) and fill *px
 * with a view into buf. name is for messages, which give the byte offset. Reports and returns
 * -1 on a bad file. */
int swift_pixels_parse(struct swift_pixels *px, const unsigned char *buf, size_t len,
                       const char *name);
/* The same without printing: the message goes to err (for the fuzz target and the loader's own
 * wording). */
int swift_pixels_check(struct swift_pixels *px, const unsigned char *buf, size_t len, char *err,
                       size_t errlen);

/* Serialize px into a malloc'ed file image (*buf, *len) and its SHA-256 hex name (65 bytes with
 * the NUL) in hex. Returns 0 or -1 (out of memory is fatal as everywhere). */
int swift_pixels_serialize(const struct swift_pixels *px, unsigned char **buf, size_t *len,
                           char hex[65]);

/* Write px to "<dir>/<sha256>.pix" atomically unless a file of that name exists (content
 * addressed: same name, same bytes). hex receives the name's hash. Returns 0 or -1 (reported). */
int swift_pixels_store(const struct swift_pixels *px, const char *dir, char hex[65]);

/* Read and check "<dir>/<hex>.pix" (also that it hashes to hex). *px views *buf (malloc'ed;
 * the caller frees it). Returns 0 or -1 (reported). */
int swift_pixels_load(struct swift_pixels *px, unsigned char **buf, const char *dir,
                      const char *hex);

#endif
