/*
 * extract — unpack a tar (gz/bz2/xz/zstd) or zip archive with libarchive, safely.
 *
 *     if (swift_extract(archive_path, tmp_dir, 64ULL << 30, on_file, ctx) < 0)
 *         return -1;       // error reported; tmp_dir may hold a partial tree: remove it
 *
 * Every member is checked before it is written: absolute paths, ".." segments, symbolic links
 * whose target leaves the destination (absolute, or climbing above it), hard links to unsafe
 * paths, and device/FIFO/socket members are refused with "ARCHIVE: member 'X': reason".
 * libarchive's own guards are on as well (ARCHIVE_EXTRACT_SECURE_NODOTDOT | SECURE_SYMLINKS |
 * SECURE_NOABSOLUTEPATHS). The total of the bytes written is capped at max_total (the bytes are
 * counted as they are written, not taken from headers), so a zip bomb stops at the cap.
 */
#ifndef SWIFT_EXTRACT_H
#define SWIFT_EXTRACT_H

/* Called after each regular file is complete: path relative to dest, its size. It runs while
 * the working directory is dest: record the name, do the work after swift_extract returns. */
typedef int (*swift_extract_fn)(void *ctx, const char *path, long long size);

/* 1 when name ends in an archive suffix we unpack (.tar .tar.gz .tgz .tar.bz2 .tbz2 .tar.xz .txz
 * .tar.zst .zip), ignoring a "?query" part. */
int swift_is_archive_name(const char *name);

/* Extract archive into the existing directory dest. Returns 0 or -1 after an error. */
int swift_extract(const char *archive, const char *dest, unsigned long long max_total,
                  swift_extract_fn fn, void *ctx);

#endif
