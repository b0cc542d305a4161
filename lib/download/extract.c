#include "lib/download/extract.h"
#include "lib/core/alloc.h"
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

/* One extraction: the archive read, the disk written (relative to the working directory). */
struct extraction {
    struct archive *in, *out;
    const char *archive;
    unsigned long long total, max_total;
    swift_extract_fn fn;
    void *ctx;
};

/* The checks on a member before anything is written: *rel gets its path relative to the target
 * (caller frees). Returns 0, 1 to skip it ("./" itself) or -1 after reporting why it is
 * refused (absolute, escaping, a link leaving the target, a special file). */
static int check_member(const char *archive, struct archive_entry *e, const char *raw, char **relp)
{
    *relp = NULL;
    if (raw[0] == '/')
        return swift_error("%s: member '%s': absolute path refused", archive, raw);
    char *rel = swift_xstrdup(strip_dot_slash(raw));
    size_t rn = strlen(rel);
    while (rn > 0 && rel[rn - 1] == '/')
        rel[--rn] = 0; /* directories end in '/' */
    int rc = 0;
    mode_t type = archive_entry_filetype(e);
    const char *sl = archive_entry_symlink(e);
    const char *hl = archive_entry_hardlink(e);
    if (!rn) /* "./" itself */
        rc = 1;
    else if (!swift_hub_path_ok(rel))
        rc = swift_error("%s: member '%s': path escapes the target directory", archive, raw);
    else if (sl && !link_target_ok(rel, sl))
        rc = swift_error(
            "%s: member '%s': symbolic link to '%s' leaves the target directory", archive, raw, sl);
    else if (hl && !swift_hub_path_ok(strip_dot_slash(hl)))
        rc = swift_error(
            "%s: member '%s': hard link to '%s' leaves the target directory", archive, raw, hl);
    else if (!sl && !hl && type != AE_IFREG && type != AE_IFDIR)
        rc = swift_error("%s: member '%s': special file refused", archive, raw);
    if (rc)
        free(rel);
    else
        *relp = rel;
    return rc;
}

/* Write a checked member under the working directory; regular files are reported to fn. */
static int write_member(struct extraction *x, struct archive_entry *e, const char *raw,
                        const char *rel)
{
    mode_t type = archive_entry_filetype(e);
    const char *sl = archive_entry_symlink(e);
    const char *hl = archive_entry_hardlink(e);
    /* relative to dest: the process works inside it (NOABSOLUTEPATHS stays meaningful) */
    char *full = swift_xstrdup(rel);
    archive_entry_set_pathname(e, full);
    if (hl) {
        char *h = swift_xstrdup(strip_dot_slash(hl));
        archive_entry_set_hardlink(e, h);
        free(h);
    }
    /* never setuid/setgid/world-writable from an archive */
    archive_entry_set_perm(e, archive_entry_perm(e) & 0755);
    int rc = 0;
    if (archive_write_header(x->out, e) < ARCHIVE_WARN) {
        rc = swift_error("%s: member '%s': %s", x->archive, raw, archive_error_string(x->out));
        free(full);
        return rc;
    }
    long long size = 0;
    if (type == AE_IFREG && !hl && archive_entry_size(e) > 0)
        rc = copy_data(x->in, x->out, x->archive, raw, &x->total, x->max_total, &size);
    if (rc == 0 && archive_write_finish_entry(x->out) < ARCHIVE_WARN)
        rc = swift_error("%s: member '%s': %s", x->archive, raw, archive_error_string(x->out));
    if (rc == 0 && type == AE_IFREG && !sl && x->fn) {
        struct stat st;
        if (!hl && lstat(full, &st) == 0)
            size = (long long)st.st_size;
        rc = x->fn(x->ctx, rel, size);
    }
    free(full);
    return rc;
}

/* Every member in turn; an archive without members is an error. */
static int extract_members(struct extraction *x)
{
    struct archive_entry *e;
    long nmembers = 0;
    int rc = 0;
    for (;;) {
        int r = archive_read_next_header(x->in, &e);
        if (r == ARCHIVE_EOF)
            break;
        if (r < ARCHIVE_WARN)
            return swift_error("%s: %s", x->archive, archive_error_string(x->in));
        nmembers++;
        const char *raw = archive_entry_pathname(e);
        if (!raw)
            raw = "";
        char *rel;
        rc = check_member(x->archive, e, raw, &rel);
        if (rc > 0)
            continue;
        if (rc < 0)
            return -1;
        rc = write_member(x, e, raw, rel);
        free(rel);
        if (rc < 0)
            return rc;
    }
    if (nmembers == 0)
        return swift_error("%s: empty archive", x->archive);
    return 0;
}

int swift_extract(const char *archive, const char *dest, unsigned long long max_total,
                  swift_extract_fn fn, void *ctx)
{
    struct extraction x = {.in = archive_read_new(),
                           .out = archive_write_disk_new(),
                           .archive = archive,
                           .max_total = max_total,
                           .fn = fn,
                           .ctx = ctx};
    if (!x.in || !x.out)
        abort();
    archive_read_support_format_tar(x.in);
    archive_read_support_format_gnutar(x.in);
    archive_read_support_format_zip(x.in);
    archive_read_support_filter_all(x.in);
    int flags = ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_SECURE_NODOTDOT |
                ARCHIVE_EXTRACT_SECURE_SYMLINKS | ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS |
                ARCHIVE_EXTRACT_NO_OVERWRITE;
    archive_write_disk_set_options(x.out, flags);
    archive_write_disk_set_standard_lookup(x.out);
    int rc = 0, cwd = -1;
    if (archive_read_open_filename(x.in, archive, 1 << 16) != ARCHIVE_OK) {
        rc = swift_error("%s: %s", archive, archive_error_string(x.in));
    } else {
        /* members are written relative to dest; the caller runs no other thread that uses
         * paths */
        cwd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (cwd < 0 || chdir(dest) < 0)
            rc = swift_error_errno("cannot enter '%s'", dest);
        else
            rc = extract_members(&x);
    }
    if (archive_write_close(x.out) < ARCHIVE_WARN && rc == 0)
        rc = swift_error("%s: %s", archive, archive_error_string(x.out));
    if (cwd >= 0) {
        if (fchdir(cwd) < 0 && rc == 0)
            rc = swift_error_errno("cannot return to the working directory");
        close(cwd);
    }
    archive_read_free(x.in);
    archive_write_free(x.out);
    return rc;
}
