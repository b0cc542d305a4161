#include "lib/download/extract.h"
#include "lib/core/error.h"
#include "lib/download/hub.h"

#include <archive.h>
#include <archive_entry.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>
#include <strings.h>

#include "lib/core/banned.h"

int swift_is_archive_name(const char *name)
{
    static const char *const sfx[] = {".tar",
                                      ".tar.gz",
                                      ".tgz",
                                      ".tar.bz2",
                                      ".tbz2",
                                      ".tar.xz",
                                      ".txz",
                                      ".tar.zst",
                                      ".zip",
                                      NULL};
    size_t n = strcspn(name, "?#");
    for (int i = 0; sfx[i]; i++) {
        size_t k = strlen(sfx[i]);
        if (n >= k && !strncasecmp(name + n - k, sfx[i], k))
            return 1;
    }
    return 0;
}

/* "./a/b" -> "a/b"; "a//b" stays (then refused by swift_hub_path_ok). Returns a pointer into s. */
static const char *strip_dot_slash(const char *s)
{
    while (s[0] == '.' && s[1] == '/')
        s += 2;
    return s;
}

/* Does a symlink at member path `p` pointing at `target` stay inside the destination? */
static int link_target_ok(const char *p, const char *target)
{
    if (!target || !*target || target[0] == '/')
        return 0;
    /* depth of the directory holding the link */
    int depth = 0;
    for (const char *c = p; *c; c++)
        if (*c == '/')
            depth++;
    const char *seg = target;
    for (const char *c = target;; c++) {
        if (*c == '/' || !*c) {
            size_t n = (size_t)(c - seg);
            if (n == 2 && seg[0] == '.' && seg[1] == '.') {
                if (--depth < 0)
                    return 0;
            } else if (n > 0 && !(n == 1 && seg[0] == '.')) {
                depth++;
            }
            if (!*c)
                break;
            seg = c + 1;
        }
    }
    return 1;
}

static int copy_data(struct archive *in, struct archive *out, const char *archive,
                     const char *member, unsigned long long *total, unsigned long long max,
                     long long *size)
{
    const void *buf;
    size_t len;
    la_int64_t off;
    *size = 0;
    for (;;) {
        int r = archive_read_data_block(in, &buf, &len, &off);
        if (r == ARCHIVE_EOF)
            return 0;
        if (r < ARCHIVE_WARN)
            return swift_error("%s: member '%s': %s", archive, member, archive_error_string(in));
        *total += len;
        if (*total > max)
            return swift_error(
                "%s: archive expands beyond the %llu-byte limit (--max-extract)", archive, max);
        if (archive_write_data_block(out, buf, len, off) < ARCHIVE_WARN)
            return swift_error(
                "%s: cannot write member '%s': %s", archive, member, archive_error_string(out));
        if ((long long)(off + (la_int64_t)len) > *size)
            *size = (long long)(off + (la_int64_t)len);
    }
}

int swift_extract(const char *archive, const char *dest, unsigned long long max_total,
                  swift_extract_fn fn, void *ctx)
{
    struct archive *in = archive_read_new(), *out = archive_write_disk_new();
    if (!in || !out)
        abort();
    archive_read_support_format_tar(in);
    archive_read_support_format_gnutar(in);
    archive_read_support_format_zip(in);
    archive_read_support_filter_all(in);
    int flags = ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_SECURE_NODOTDOT |
                ARCHIVE_EXTRACT_SECURE_SYMLINKS | ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS |
                ARCHIVE_EXTRACT_NO_OVERWRITE;
    archive_write_disk_set_options(out, flags);
    archive_write_disk_set_standard_lookup(out);
    int rc = 0, cwd = -1;
    if (archive_read_open_filename(in, archive, 1 << 16) != ARCHIVE_OK) {
        rc = swift_error("%s: %s", archive, archive_error_string(in));
        goto done;
    }
    /* members are written relative to dest; the caller runs no other thread that uses paths */
    cwd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (cwd < 0 || chdir(dest) < 0) {
        rc = swift_error_errno("cannot enter '%s'", dest);
        goto done;
    }
    unsigned long long total = 0;
    struct archive_entry *e;
    long nmembers = 0;
    for (;;) {
        int r = archive_read_next_header(in, &e);
        if (r == ARCHIVE_EOF)
            break;
        if (r < ARCHIVE_WARN) {
            rc = swift_error("%s: %s", archive, archive_error_string(in));
            break;
        }
        nmembers++;
        const char *raw = archive_entry_pathname(e);
        if (!raw)
            raw = "";
        if (raw[0] == '/') {
            rc = swift_error("%s: member '%s': absolute path refused", archive, raw);
            break;
        }
        const char *name = strip_dot_slash(raw);
        char *rel = strdup(name);
        if (!rel)
            abort();
        size_t rn = strlen(rel);
        while (rn > 0 && rel[rn - 1] == '/')
            rel[--rn] = 0; /* directories end in '/' */
        if (!rn) {         /* "./" itself */
            free(rel);
            continue;
        }
        if (!swift_hub_path_ok(rel)) {
            rc = swift_error("%s: member '%s': path escapes the target directory", archive, raw);
            free(rel);
            break;
        }
        mode_t type = archive_entry_filetype(e);
        const char *sl = archive_entry_symlink(e);
        const char *hl = archive_entry_hardlink(e);
        if (sl && !link_target_ok(rel, sl)) {
            rc = swift_error("%s: member '%s': symbolic link to '%s' leaves the target directory",
                             archive,
                             raw,
                             sl);
            free(rel);
            break;
        }
        if (hl && !swift_hub_path_ok(strip_dot_slash(hl))) {
            rc = swift_error(
                "%s: member '%s': hard link to '%s' leaves the target directory", archive, raw, hl);
            free(rel);
            break;
        }
        if (!sl && !hl && type != AE_IFREG && type != AE_IFDIR) {
            rc = swift_error("%s: member '%s': special file refused", archive, raw);
            free(rel);
            break;
        }
        /* relative to dest: the process works inside it (NOABSOLUTEPATHS stays meaningful) */
        char *full = strdup(rel);
        if (!full)
            abort();
        archive_entry_set_pathname(e, full);
        if (hl) {
            char *h = strdup(strip_dot_slash(hl));
            if (!h)
                abort();
            archive_entry_set_hardlink(e, h);
            free(h);
        }
        /* never setuid/setgid/world-writable from an archive */
        archive_entry_set_perm(e, archive_entry_perm(e) & 0755);
        r = archive_write_header(out, e);
        if (r < ARCHIVE_WARN) {
            rc = swift_error("%s: member '%s': %s", archive, raw, archive_error_string(out));
            free(full);
            free(rel);
            break;
        }
        long long size = 0;
        if (type == AE_IFREG && !hl && archive_entry_size(e) > 0)
            rc = copy_data(in, out, archive, raw, &total, max_total, &size);
        if (rc == 0 && archive_write_finish_entry(out) < ARCHIVE_WARN)
            rc = swift_error("%s: member '%s': %s", archive, raw, archive_error_string(out));
        if (rc == 0 && type == AE_IFREG && !sl && fn) {
            struct stat st;
            if (!hl && lstat(full, &st) == 0)
                size = (long long)st.st_size;
            rc = fn(ctx, rel, size);
        }
        free(full);
        free(rel);
        if (rc < 0)
            break;
    }
    if (rc == 0 && nmembers == 0)
        rc = swift_error("%s: empty archive", archive);
done:
    if (archive_write_close(out) < ARCHIVE_WARN && rc == 0)
        rc = swift_error("%s: %s", archive, archive_error_string(out));
    if (cwd >= 0) {
        if (fchdir(cwd) < 0 && rc == 0)
            rc = swift_error_errno("cannot return to the working directory");
        close(cwd);
    }
    archive_read_free(in);
    archive_write_free(out);
    return rc;
}
