#include "model_init.h"
#include "backend.h"
#include "error.h"
#include "fileio.h"
#include "model.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "banned.h"

static const char *const side_files[] = {"tokenizer.json",
                                         "tokenizer_config.json",
                                         "vocab.json",
                                         "merges.txt",
                                         "special_tokens_map.json",
                                         "generation_config.json",
                                         NULL};

static int copy_file(const char *src, const char *dst)
{
    char *data;
    size_t len;
    if (swift_read_file(src, (size_t)1 << 30, &data, &len) < 0)
        return -1;
    int rc = swift_atomic_write(dst, data, len);
    free(data);
    return rc;
}

int swift_model_init_dir(const char *config_dir, const char *out_dir, unsigned long long seed,
                         int force)
{
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
    for (int i = 0; rc == 0 && side_files[i]; i++) {
        char *src = swift_path_join(config_dir, side_files[i]);
        if (access(src, F_OK) == 0) {
            char *dst = swift_path_join(tmp, side_files[i]);
            rc = copy_file(src, dst);
            free(dst);
        }
        free(src);
    }
    if (rc == 0)
        rc = swift_atomic_dir_commit(tmp, out_dir, force);
    else
        swift_atomic_dir_abort(tmp);
    if (rc < 0 && tmp && access(tmp, F_OK) == 0)
        swift_atomic_dir_abort(tmp);
    swift_model_free(&m);
    free(cfg_path);
    return rc;
}
