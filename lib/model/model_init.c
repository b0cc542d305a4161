#include "lib/model/model_init.h"
#include "kernels/ops.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/model/model.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/core/banned.h"

static const char *const side_files[] = {"tokenizer.json",
                                         "tokenizer_config.json",
                                         "special_tokens_map.json",
                                         "vocab.json",
                                         "merges.txt",
                                         "tokenizer.model",
                                         "added_tokens.json",
                                         "chat_template.jinja",
                                         "generation_config.json",
                                         /* a vision-language model's processor */
                                         "preprocessor_config.json",
                                         "video_preprocessor_config.json",
                                         "processor_config.json",
                                         "chat_template.json",
                                         NULL};

int swift_model_copy_side_files(const char *src_dir, const char *dst_dir)
{
    int rc = 0;
    for (int i = 0; rc == 0 && side_files[i]; i++) {
        char *src = swift_path_join(src_dir, side_files[i]);
        if (access(src, R_OK) == 0) {
            char *dst = swift_path_join(dst_dir, side_files[i]);
            rc = swift_copy_file(src, dst);
            free(dst);
        }
        free(src);
    }
    return rc;
}

/* A file a model directory holds: what --force may replace. */
static int model_file(const char *name)
{
    static const char *const more[] = {
        "config.json", "README.md", "manifest.json", ".gitattributes", NULL};
    size_t l = strlen(name);
    for (int i = 0; side_files[i]; i++)
        if (!strcmp(name, side_files[i]))
            return 1;
    for (int i = 0; more[i]; i++)
        if (!strcmp(name, more[i]))
            return 1;
    return (l > 12 && !strcmp(name + l - 12, ".safetensors")) ||
           (l > 23 && !strcmp(name + l - 23, ".safetensors.index.json"));
}

/* out_dir absent: *replace 0. Empty: replaced. Holding files: refused without force, and with
 * force unless every entry is a model's file (a mistyped -o never empties another directory). */
static int check_out_dir(const char *out_dir, int force, int *replace)
{
    struct stat st;
    *replace = 0;
    if (stat(out_dir, &st) < 0)
        return 0;
    if (!S_ISDIR(st.st_mode))
        return swift_error("'%s' exists and is not a directory", out_dir);
    DIR *d = opendir(out_dir);
    if (!d)
        return swift_error_errno("cannot read directory '%s'", out_dir);
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        char *p = swift_path_join(out_dir, de->d_name);
        struct stat es;
        int ok = lstat(p, &es) == 0 && S_ISREG(es.st_mode) && model_file(de->d_name);
        free(p);
        if (!force)
            rc = swift_error("'%s' exists and is not empty (--force replaces the model in it; or "
                             "choose another -o)",
                             out_dir);
        else if (!ok)
            rc = swift_error("--force: '%s' holds '%s', which is not part of a model; not "
                             "replacing it",
                             out_dir,
                             de->d_name);
    }
    closedir(d);
    *replace = rc == 0;
    return rc;
}

int swift_model_init_dir(const char *config_dir, const char *out_dir, unsigned long long seed,
                         int force)
{
    int replace;
    if (check_out_dir(out_dir, force, &replace) < 0)
        return -1;
    char *cfg_path = swift_path_join(config_dir, "config.json");
    struct swift_model_config cfg;
    int rc = swift_model_config_load(&cfg, cfg_path);
    if (rc < 0) {
        free(cfg_path);
        return -1;
    }
    struct swift_model m;
    if (swift_model_init_random(&m, &cfg, &swift_cpu_ops, seed) < 0) {
        free(cfg_path);
        return -1;
    }
    char *tmp = NULL;
    rc = swift_atomic_dir_begin(out_dir, &tmp);
    if (rc == 0)
        rc = swift_model_save(&m, tmp, cfg_path);
    if (rc == 0)
        rc = swift_model_copy_side_files(config_dir, tmp);
    if (rc == 0) {
        rc = swift_atomic_dir_commit(tmp, out_dir, replace); /* frees tmp on success */
        if (rc < 0)
            swift_atomic_dir_abort(tmp);
    } else if (tmp) {
        swift_atomic_dir_abort(tmp);
    }
    swift_model_free(&m);
    free(cfg_path);
    return rc;
}
