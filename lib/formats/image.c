/*
 * image — JPEG (libjpeg-turbo), PNG (libpng) and WebP (libwebp) to 8-bit RGB the way Pillow +
 * transformers' convert_to_rgb see them (lib/formats/image.h has the rules).
 */
#include "lib/formats/image.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>
#include <png.h>
#include <webp/decode.h>

#include "lib/core/banned.h"

static void seterr(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void seterr(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

enum swift_image_format swift_image_sniff(const unsigned char *buf, size_t len)
{
    static const unsigned char png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (len >= 3 && buf[0] == 0xff && buf[1] == 0xd8 && buf[2] == 0xff)
        return SWIFT_IMAGE_JPEG;
    if (len >= 8 && memcmp(buf, png_sig, 8) == 0)
        return SWIFT_IMAGE_PNG;
    if (len >= 12 && memcmp(buf, "RIFF", 4) == 0 && memcmp(buf + 8, "WEBP", 4) == 0)
        return SWIFT_IMAGE_WEBP;
    return SWIFT_IMAGE_UNKNOWN;
}

const char *swift_image_format_name(enum swift_image_format f)
{
    switch (f) {
    case SWIFT_IMAGE_JPEG:
        return "jpeg";
    case SWIFT_IMAGE_PNG:
        return "png";
    case SWIFT_IMAGE_WEBP:
        return "webp";
    default:
        return "unknown";
    }
}

void swift_image_release(struct swift_image *img)
{
    free(img->rgb);
    memset(img, 0, sizeof *img);
}

static int check_size(uint64_t w, uint64_t h, uint64_t max_pixels, char *err, size_t errlen)
{
    if (w == 0 || h == 0) {
        seterr(err,
               errlen,
               "image has no pixels (%llux%llu)",
               (unsigned long long)w,
               (unsigned long long)h);
        return -1;
    }
    if (w * h > max_pixels) {
        seterr(err,
               errlen,
               "image of %llux%llu pixels is over the limit of %llu pixels",
               (unsigned long long)w,
               (unsigned long long)h,
               (unsigned long long)max_pixels);
        return -1;
    }
    return 0;
}

/* Pillow's Image.alpha_composite(white, src) for one channel value (AlphaComposite.c: 7 bits of
 * precision, SHIFTFORDIV255 rounding); dst is opaque white, so outa255 = 255 * 255. */
static uint8_t over_white(unsigned v, unsigned a)
{
    if (a == 0)
        return 255;
    uint32_t outa255 = 255u * 255u;
    uint32_t coef1 = a * 255u * 255u * (1u << 7) / outa255;
    uint32_t coef2 = 255u * (1u << 7) - coef1;
    uint32_t t = v * coef1 + 255u * coef2 + (0x80u << 7);
    return (uint8_t)((((t >> 8) + t) >> 8) >> 7);
}

/* Interleaved pixels of `channels` (1 gray, 2 gray+alpha, 3 RGB, 4 RGBA) to RGB in dst. */
static void to_rgb(const uint8_t *src, int channels, size_t npix, uint8_t *dst)
{
    for (size_t i = 0; i < npix; i++, dst += 3) {
        const uint8_t *p = src + i * (size_t)channels;
        switch (channels) {
        case 1:
            dst[0] = dst[1] = dst[2] = p[0];
            break;
        case 2:
            dst[0] = dst[1] = dst[2] = over_white(p[0], p[1]);
            break;
        case 3:
            memcpy(dst, p, 3);
            break;
        default:
            for (int c = 0; c < 3; c++)
                dst[c] = over_white(p[c], p[3]);
        }
    }
}

/* ---- JPEG ---- */

struct jpeg_fail {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    char msg[JMSG_LENGTH_MAX];
    int truncated;
};

static void jpeg_fail_exit(j_common_ptr c)
{
    struct jpeg_fail *f = (struct jpeg_fail *)c->err;
    f->pub.format_message(c, f->msg);
    longjmp(f->jb, 1);
}

/* Warnings are ignored (Pillow ignores them too: "Corrupt JPEG data: extraneous bytes"), except
 * the premature end of the data, which Pillow reports as a truncated image. */
static void jpeg_fail_message(j_common_ptr c, int level)
{
    struct jpeg_fail *f = (struct jpeg_fail *)c->err;
    if (level < 0 && f->pub.msg_code == JWRN_JPEG_EOF)
        f->truncated = 1;
}

static int decode_jpeg(const unsigned char *buf, size_t len, uint64_t max_pixels,
                       struct swift_image *out, char *err, size_t errlen)
{
    struct jpeg_decompress_struct cinfo;
    struct jpeg_fail f;
    uint8_t *volatile pix = NULL;
    memset(&f, 0, sizeof f);
    cinfo.err = jpeg_std_error(&f.pub);
    f.pub.error_exit = jpeg_fail_exit;
    f.pub.emit_message = jpeg_fail_message;
    if (setjmp(f.jb)) {
        seterr(err, errlen, "bad JPEG: %s", f.msg);
        jpeg_destroy_decompress(&cinfo);
        free(pix);
        return -1;
    }
    jpeg_create_decompress(&cinfo);
    jpeg_mem_src(&cinfo, buf, (unsigned long)len);
    jpeg_read_header(&cinfo, TRUE);
    if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
        seterr(err, errlen, "CMYK JPEG images are not supported (convert it to RGB)");
        jpeg_destroy_decompress(&cinfo);
        return -1;
    }
    if (check_size(cinfo.image_width, cinfo.image_height, max_pixels, err, errlen) < 0) {
        jpeg_destroy_decompress(&cinfo);
        return -1;
    }
    int gray = cinfo.jpeg_color_space == JCS_GRAYSCALE;
    cinfo.out_color_space = gray ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_start_decompress(&cinfo);
    size_t w = cinfo.output_width, h = cinfo.output_height, ch = gray ? 1 : 3;
    pix = malloc(w * h * 3);
    uint8_t *row = malloc(w * ch);
    if (!pix || !row) {
        free(row);
        seterr(err, errlen, "out of memory for a %zux%zu image", w, h);
        jpeg_destroy_decompress(&cinfo);
        free(pix);
        return -1;
    }
    while (cinfo.output_scanline < h && !f.truncated) {
        size_t y = cinfo.output_scanline;
        JSAMPROW r = gray ? row : pix + y * w * 3;
        jpeg_read_scanlines(&cinfo, &r, 1);
        if (gray)
            to_rgb(row, 1, w, pix + y * w * 3);
    }
    free(row);
    if (f.truncated) {
        seterr(err, errlen, "truncated JPEG (the data ends before the image does)");
        jpeg_destroy_decompress(&cinfo);
        free(pix);
        return -1;
    }
    jpeg_finish_decompress(&cinfo);
    jpeg_destroy_decompress(&cinfo);
    if (f.truncated) {
        seterr(err, errlen, "truncated JPEG (the data ends before the image does)");
        free(pix);
        return -1;
    }
    out->width = (uint32_t)w;
    out->height = (uint32_t)h;
    out->rgb = pix;
    return 0;
}

/* ---- PNG ---- */

struct png_src {
    const unsigned char *buf;
    size_t len, pos;
    char msg[200];
};

static void png_src_read(png_structp p, png_bytep data, size_t n)
{
    struct png_src *s = png_get_io_ptr(p);
    if (n > s->len - s->pos)
        png_error(p, "truncated PNG (the data ends before the image does)");
    memcpy(data, s->buf + s->pos, n);
    s->pos += n;
}

static void png_fail(png_structp p, png_const_charp msg)
{
    struct png_src *s = png_get_error_ptr(p);
    snprintf(s->msg, sizeof s->msg, "%s", msg);
    png_longjmp(p, 1);
}

static void png_quiet(png_structp p, png_const_charp msg)
{
    (void)p;
    (void)msg;
}

static int decode_png(const unsigned char *buf, size_t len, uint64_t max_pixels,
                      struct swift_image *out, char *err, size_t errlen)
{
    struct png_src s = {buf, len, 0, "bad PNG"};
    png_structp p = png_create_read_struct(PNG_LIBPNG_VER_STRING, &s, png_fail, png_quiet);
    png_infop info = p ? png_create_info_struct(p) : NULL;
    uint8_t *volatile raw = NULL;
    png_bytep *volatile rows = NULL;
    uint8_t *volatile pix = NULL;
    if (!info) {
        png_destroy_read_struct(&p, NULL, NULL);
        seterr(err, errlen, "out of memory reading a PNG");
        return -1;
    }
    if (setjmp(png_jmpbuf(p))) {
        png_destroy_read_struct(&p, &info, NULL);
        free(raw);
        free(rows);
        free(pix);
        seterr(err, errlen, "bad PNG: %s", s.msg);
        return -1;
    }
    png_set_read_fn(p, &s, png_src_read);
    png_set_user_limits(p, 0x7fffffff, 0x7fffffff);
    png_read_info(p, info);
    png_uint_32 w = png_get_image_width(p, info), h = png_get_image_height(p, info);
    if (check_size(w, h, max_pixels, err, errlen) < 0) {
        png_destroy_read_struct(&p, &info, NULL);
        return -1;
    }
    int ct = png_get_color_type(p, info);
    if (ct == PNG_COLOR_TYPE_PALETTE)
        png_set_palette_to_rgb(p);
    if (ct == PNG_COLOR_TYPE_GRAY && png_get_bit_depth(p, info) < 8)
        png_set_expand_gray_1_2_4_to_8(p);
    if (png_get_valid(p, info, PNG_INFO_tRNS))
        png_set_tRNS_to_alpha(p);
    png_set_strip_16(p); /* the high byte, as Pillow's RGB;16B unpacker */
    png_set_interlace_handling(p);
    png_read_update_info(p, info);
    int ch = png_get_channels(p, info);
    size_t stride = png_get_rowbytes(p, info);
    if (ch < 1 || ch > 4 || stride != (size_t)w * (size_t)ch) {
        png_destroy_read_struct(&p, &info, NULL);
        seterr(err, errlen, "bad PNG: unexpected layout (%d channels)", ch);
        return -1;
    }
    raw = malloc(stride * h);
    rows = malloc(sizeof(png_bytep) * h);
    pix = malloc((size_t)w * h * 3);
    if (!raw || !rows || !pix) {
        png_destroy_read_struct(&p, &info, NULL);
        free(raw);
        free(rows);
        free(pix);
        seterr(err, errlen, "out of memory for a %ux%u image", (unsigned)w, (unsigned)h);
        return -1;
    }
    for (png_uint_32 y = 0; y < h; y++)
        rows[y] = raw + y * stride;
    png_read_image(p, rows);
    png_read_end(p, NULL);
    png_destroy_read_struct(&p, &info, NULL);
    to_rgb(raw, ch, (size_t)w * h, pix);
    free(raw);
    free(rows);
    out->width = w;
    out->height = h;
    out->rgb = pix;
    return 0;
}

/* ---- WebP ---- */

static int decode_webp(const unsigned char *buf, size_t len, uint64_t max_pixels,
                       struct swift_image *out, char *err, size_t errlen)
{
    WebPBitstreamFeatures ft;
    if (WebPGetFeatures(buf, len, &ft) != VP8_STATUS_OK) {
        seterr(err, errlen, "bad WebP: unreadable header");
        return -1;
    }
    if (ft.has_animation) {
        seterr(err, errlen, "animated WebP images are not supported");
        return -1;
    }
    if (check_size((uint64_t)ft.width, (uint64_t)ft.height, max_pixels, err, errlen) < 0)
        return -1;
    int w, h;
    int ch = ft.has_alpha ? 4 : 3;
    uint8_t *raw =
        ft.has_alpha ? WebPDecodeRGBA(buf, len, &w, &h) : WebPDecodeRGB(buf, len, &w, &h);
    if (!raw) {
        seterr(err, errlen, "bad WebP: the image data does not decode (truncated or corrupt)");
        return -1;
    }
    uint8_t *pix = malloc((size_t)w * (size_t)h * 3);
    if (!pix) {
        WebPFree(raw);
        seterr(err, errlen, "out of memory for a %dx%d image", w, h);
        return -1;
    }
    to_rgb(raw, ch, (size_t)w * (size_t)h, pix);
    WebPFree(raw);
    out->width = (uint32_t)w;
    out->height = (uint32_t)h;
    out->rgb = pix;
    return 0;
}

int swift_image_decode(const unsigned char *buf, size_t len, uint64_t max_pixels,
                       struct swift_image *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    switch (swift_image_sniff(buf, len)) {
    case SWIFT_IMAGE_JPEG:
        return decode_jpeg(buf, len, max_pixels, out, err, errlen);
    case SWIFT_IMAGE_PNG:
        return decode_png(buf, len, max_pixels, out, err, errlen);
    case SWIFT_IMAGE_WEBP:
        return decode_webp(buf, len, max_pixels, out, err, errlen);
    default:
        seterr(err, errlen, "not a JPEG, PNG or WebP image (%zu bytes)", len);
        return -1;
    }
}
