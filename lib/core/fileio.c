#include "lib/core/fileio.h"
#include "lib/core/alloc.h"
#include "lib/core/error.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/core/banned.h"

static atomic_int tmp_counter;

static char *dirname_of(const char *path)
{
    const char *s = strrchr(path, '/');
    if (!s)
        return swift_xstrdup(".");
    if (s == path)
        return swift_xstrdup("/");
    return swift_xstrndup(path, (size_t)(s - path));
}

char *swift_asprintf(const char *fmt, ...)
{
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) /* an encoding error in the format: a bug */
        abort();
    char *s = swift_xmalloc((size_t)n + 1);
    vsnprintf(s, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return s;
}

char *swift_path_join(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    char *r = swift_xmalloc(la + lb + 2);
    memcpy(r, a, la);
    size_t n = la;
    if (la && a[la - 1] != '/')
        r[n++] = '/';
    memcpy(r + n, b, lb + 1);
    return r;
}

int swift_fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

int swift_atomic_open(struct swift_atomic *af, const char *path)
{
    memset(af, 0, sizeof(*af));
    char *dir = dirname_of(path);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(dir) + strlen(base) + 64;
    af->tmp = swift_xmalloc(n);
    af->path = swift_xstrdup(path);
    snprintf(af->tmp,
             n,
             "%s/.%s.tmp-%d-%d",
             dir,
             base,
             (int)getpid(),
             atomic_fetch_add(&tmp_counter, 1));
    free(dir);
    int fd = open(af->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        int rc = swift_error_errno("cannot create '%s'", path);
        free(af->tmp);
        free(af->path);
        memset(af, 0, sizeof(*af));
        return rc;
    }
    af->fp = fdopen(fd, "wb");
    if (!af->fp) {
        int rc = swift_error_errno("cannot open '%s'", af->tmp);
        close(fd);
        swift_atomic_abort(af);
        return rc;
    }
    return 0;
}

int swift_atomic_commit(struct swift_atomic *af)
{
    int rc = 0;
    if (fflush(af->fp) || ferror(af->fp))
        rc = swift_error_errno("cannot write '%s'", af->path);
    else if (fsync(fileno(af->fp)))
        rc = swift_error_errno("cannot sync '%s'", af->path);
    if (fclose(af->fp) && !rc)
        rc = swift_error_errno("cannot close '%s'", af->path);
    af->fp = NULL;
    if (!rc && rename(af->tmp, af->path))
        rc = swift_error_errno("cannot rename onto '%s'", af->path);
    if (rc) {
        unlink(af->tmp);
    } else {
        char *dir = dirname_of(af->path);
        swift_fsync_dir(dir);
        free(dir);
    }
    free(af->tmp);
    free(af->path);
    af->tmp = af->path = NULL;
    return rc;
}

void swift_atomic_abort(struct swift_atomic *af)
{
    if (af->fp)
        fclose(af->fp);
    if (af->tmp)
        unlink(af->tmp);
    free(af->tmp);
    free(af->path);
    memset(af, 0, sizeof(*af));
}

int swift_atomic_write(const char *path, const void *data, size_t len)
{
    struct swift_atomic af;
    if (swift_atomic_open(&af, path) < 0)
        return -1;
    if (len && fwrite(data, 1, len, af.fp) != len) {
        int rc = swift_error_errno("cannot write '%s'", path);
        swift_atomic_abort(&af);
        return rc;
    }
    return swift_atomic_commit(&af);
}

int swift_copy_file(const char *src, const char *dst)
{
    char *data;
    size_t len;
    if (swift_read_file(src, (size_t)1 << 31, &data, &len) < 0)
        return -1;
    int rc = swift_atomic_write(dst, data, len);
    free(data);
    return rc;
}

int swift_mkdirs(const char *path, int mode)
{
    char *p = swift_xstrdup(path);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = 0;
        if (mkdir(p, (mode_t)mode) && errno != EEXIST) {
            int rc = swift_error_errno("cannot create directory '%s'", p);
            free(p);
            return rc;
        }
        *s = '/';
    }
    if (mkdir(p, (mode_t)mode) && errno != EEXIST) {
        int rc = swift_error_errno("cannot create directory '%s'", p);
        free(p);
        return rc;
    }
    free(p);
    if (!swift_is_dir(path))
        return swift_error("'%s' exists and is not a directory", path);
    return 0;
}

int swift_is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int swift_remove_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st))
        return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(st.st_mode))
        return unlink(path);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char *c = swift_path_join(path, e->d_name);
        if (swift_remove_tree(c))
            rc = -1;
        free(c);
    }
    closedir(d);
    if (rmdir(path))
        rc = -1;
    return rc;
}

int swift_atomic_dir_begin(const char *final, char **tmp)
{
    char *dir = dirname_of(final);
    const char *base = strrchr(final, '/');
    base = base && base[1] ? base + 1 : final;
    if (swift_mkdirs(dir, 0755) < 0) {
        free(dir);
        return -1;
    }
    size_t n = strlen(dir) + strlen(base) + 64;
    char *t = swift_xmalloc(n);
    snprintf(t, n, "%s/.%s.tmp-%d-%d", dir, base, (int)getpid(), atomic_fetch_add(&tmp_counter, 1));
    free(dir);
    swift_remove_tree(t);
    if (mkdir(t, 0755)) {
        int rc = swift_error_errno("cannot create directory '%s'", t);
        free(t);
        return rc;
    }
    *tmp = t;
    return 0;
}

int swift_atomic_dir_commit(char *tmp, const char *final, int force)
{
    char *aside = NULL;
    if (swift_is_dir(final)) {
        if (!force)
            return swift_error("'%s' exists (use --force to replace it)", final);
        size_t n = strlen(final) + 64;
        aside = swift_xmalloc(n);
        snprintf(aside, n, "%s.old-%d", final, (int)getpid());
        if (rename(final, aside)) {
            int rc = swift_error_errno("cannot move '%s' aside", final);
            free(aside);
            return rc;
        }
    }
    if (rename(tmp, final)) {
        int rc = swift_error_errno("cannot rename onto '%s'", final);
        if (aside && rename(aside, final) == 0) {
            /* restored */
        }
        free(aside);
        return rc;
    }
    char *dir = dirname_of(final);
    swift_fsync_dir(dir);
    free(dir);
    if (aside) {
        swift_remove_tree(aside);
        free(aside);
    }
    free(tmp);
    return 0;
}

void swift_atomic_dir_abort(char *tmp)
{
    if (!tmp)
        return;
    swift_remove_tree(tmp);
    free(tmp);
}

int swift_read_file(const char *path, size_t max, char **data, size_t *len)
{
    FILE *fp = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!fp)
        return swift_error_errno("cannot open '%s'", path);
    size_t cap = 1 << 16, n = 0;
    char *buf = swift_xmalloc(cap);
    for (;;) {
        if (n + 1 >= cap) {
            cap *= 2;
            buf = swift_xrealloc(buf, cap);
        }
        size_t r = fread(buf + n, 1, cap - n - 1, fp);
        n += r;
        if (n > max) {
            free(buf);
            if (fp != stdin)
                fclose(fp);
            return swift_error("'%s' is larger than %zu bytes", path, max);
        }
        if (r == 0)
            break;
    }
    int err = ferror(fp);
    if (fp != stdin)
        fclose(fp);
    if (err) {
        free(buf);
        return swift_error("cannot read '%s'", path);
    }
    buf[n] = 0;
    *data = buf;
    if (len)
        *len = n;
    return 0;
}

int swift_close_stdout(int rc)
{
    static int closed, failed;
    if (closed) /* a second call (after --help, say) must not fclose twice */
        return failed && !rc ? SWIFT_EXIT_FAIL : rc;
    closed = 1;
    int bad = ferror(stdout);
    if (fflush(stdout))
        bad = 1;
    int e = errno;
    if (fclose(stdout))
        bad = 1, e = errno;
    if (bad) {
        errno = e ? e : EIO;
        swift_error_errno("write error on standard output");
        failed = 1;
        return rc ? rc : SWIFT_EXIT_FAIL;
    }
    return rc;
}
