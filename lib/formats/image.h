/*
 * image — decoding JPEG, PNG and WebP files to 8-bit RGB, as Pillow opens them and transformers'
 * image processors turn them into RGB (docs/multimodal.md "Images").
 *
 * The decoders are Debian's well-kept libraries, one per format (no wrapper library, so nothing
 * between us and the code Pillow itself links): libjpeg-turbo (libjpeg62-turbo-dev), libpng
 * (libpng-dev) and libwebp (libwebp-dev); scripts/deps.sh installs them. The format is sniffed
 * from the first bytes, never from the file name.
 *
 * RGB conversion is transformers' convert_to_rgb (image_transforms.py) on a Pillow image:
 *   - RGB stays; grayscale is replicated to the three channels;
 *   - an image with an alpha channel, or a PNG with a tRNS transparency chunk (palette, gray or
 *     RGB), is composited over opaque white with Pillow's integer alpha_composite (7 bits of
 *     extra precision, rounded division by 255), then the alpha is dropped;
 *   - JPEG: the library's default decode (accurate integer IDCT, fancy upsampling), as Pillow
 *     does; a truncated JPEG is an error (Pillow's LOAD_TRUNCATED_IMAGES is off by default);
 *     CMYK/YCCK JPEGs are refused (not converted);
 *   - 16-bit PNG channels keep their high byte (Pillow's RGB;16B unpacker). Pillow's 16-bit
 *     grayscale mode "I;16" converts to RGB by clipping at 255 instead: we keep the high byte
 *     there too, a documented difference;
 *   - EXIF orientation is not applied (the processor receives Image.open()'s image unrotated).
 *
 *     struct swift_image img;
 *     char err[256];
 *     if (swift_image_decode(buf, len, SWIFT_IMAGE_MAX_PIXELS, &img, err, sizeof err) < 0)
 *         ... report err with the file and row ...
 *     ... img.rgb[(y * img.width + x) * 3 + c] ...
 *     swift_image_release(&img);
 *
 * Nothing here prints: errors come back as a message in err (no file name; the caller knows the
 * row and the path), so the decoders can be fuzzed quietly (tests/fuzz/fuzz_image.c).
 */
#ifndef SWIFT_IMAGE_H
#define SWIFT_IMAGE_H

#include <stddef.h>
#include <stdint.h>

/* Pillow's decompression-bomb limit: 2 * Image.MAX_IMAGE_PIXELS (89,478,485) raises an error. */
#define SWIFT_IMAGE_MAX_PIXELS 178956970ull

enum swift_image_format {
    SWIFT_IMAGE_UNKNOWN = 0,
    SWIFT_IMAGE_JPEG,
    SWIFT_IMAGE_PNG,
    SWIFT_IMAGE_WEBP
};

/* An 8-bit RGB image, rows top to bottom, pixels interleaved R, G, B. */
struct swift_image {
    uint32_t width, height;
    uint8_t *rgb; /* width * height * 3 bytes, owned (swift_image_release) */
};

/* The format from the first bytes (JPEG FF D8 FF, PNG signature, RIFF....WEBP). */
enum swift_image_format swift_image_sniff(const unsigned char *buf, size_t len);
/* "jpeg", "png", "webp" or "unknown". */
const char *swift_image_format_name(enum swift_image_format f);

/* Decode buf into *out (RGB as above). Images over max_pixels pixels (width * height) are
 * refused before their pixels are allocated. Returns 0, or -1 with a one-line message in err
 * (out left empty). */
int swift_image_decode(const unsigned char *buf, size_t len, uint64_t max_pixels,
                       struct swift_image *out, char *err, size_t errlen);

/* Free the pixels; leaves img zeroed. */
void swift_image_release(struct swift_image *img);

#endif
