#include "lib/model/model_init.h"
#include "kernels/ops.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/model/model.h"

#include <stdlib.h>
#include <string.h>
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
    if (rc == 0)
        rc = swift_model_copy_side_files(config_dir, tmp);
    if (rc == 0) {
        rc = swift_atomic_dir_commit(tmp, out_dir, force); /* frees tmp on success */
        if (rc < 0)
            swift_atomic_dir_abort(tmp);
    } else if (tmp) {
        swift_atomic_dir_abort(tmp);
    }
    swift_model_free(&m);
    free(cfg_path);
    return rc;
}
