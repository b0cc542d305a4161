/*
 * fileio — atomic outputs and checked streams (git lockfile, GNU close_stdout).
 *
 * A file appears under its final name only when complete: it is written to a temporary name in
 * the same directory, fsynced, then renamed over the final name, and the directory is fsynced.
 *
 *     struct swift_atomic af;
 *     if (swift_atomic_open(&af, "out/index.json") < 0)
 *         return -1;
 *     fprintf(af.fp, "...");
 *     return swift_atomic_commit(&af);   // or swift_atomic_abort(&af) on error
 *
 * Directories work the same way with swift_atomic_dir_* (a temp directory renamed at the end).
 */
#ifndef SWIFT_FILEIO_H
#define SWIFT_FILEIO_H

#include <stddef.h>
#include <stdio.h>

struct swift_atomic {
    FILE *fp;   /* write here */
    char *path; /* final name (owned) */
    char *tmp;  /* temporary name (owned) */
};

/* Create "<dir>/.<name>.tmp-<pid>-<n>" opened for writing. Returns 0 or -1 after an error. */
int swift_atomic_open(struct swift_atomic *af, const char *path);
/* Flush, fsync, close and rename onto the final name. Frees af. Returns 0 or -1 (then the
 * temporary is removed and the final name is untouched). */
int swift_atomic_commit(struct swift_atomic *af);
/* Close and remove the temporary; the final name is untouched. Frees af. */
void swift_atomic_abort(struct swift_atomic *af);
/* Write a whole buffer atomically. */
int swift_atomic_write(const char *path, const void *data, size_t len);

/* Temporary directory next to `final`: "<parent>/.<name>.tmp-<pid>"; created (mode 0755).
 * *tmp is malloc'ed. Returns 0 or -1. */
int swift_atomic_dir_begin(const char *final, char **tmp);
/* Rename tmp onto final. If final exists: with force, it is moved aside and removed after the
 * rename; without force, an error. Returns 0 or -1. Frees tmp on success. */
int swift_atomic_dir_commit(char *tmp, const char *final, int force);
/* Remove the temporary directory tree. Frees tmp. */
void swift_atomic_dir_abort(char *tmp);

/* Copy a whole file (at most 2 GiB) to dst atomically. Returns 0 or -1 after an error. */
int swift_copy_file(const char *src, const char *dst);

/* mkdir -p; returns 0 or -1 after an error. */
int swift_mkdirs(const char *path, int mode);
/* rm -rf (no symlink following); returns 0 or -1. */
int swift_remove_tree(const char *path);
/* fsync a directory (after a rename inside it). */
int swift_fsync_dir(const char *dir);

/* Read a whole file ("-" is stdin) into a NUL-terminated malloc'ed buffer, at most `max`
 * bytes (error beyond). Returns 0 or -1. */
int swift_read_file(const char *path, size_t max, char **data, size_t *len);

/* Close stdout and report a failed write (">/dev/full" gives exit 1 and a message). Call at the
 * end of main(); returns the exit code to use (rc unchanged when stdout is fine). */
int swift_close_stdout(int rc);

/* 1 if path names a directory. */
int swift_is_dir(const char *path);

/* printf into a malloc'ed string (never NULL: out of memory dies, lib/core/alloc.h). */
char *swift_asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Join "a" + "/" + "b" into a malloc'ed string. */
char *swift_path_join(const char *a, const char *b);

#endif
