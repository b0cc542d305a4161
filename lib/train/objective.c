/* objective — the table of objectives swift-train knows (see objective.h). */
#include "lib/train/objective.h"

#include <string.h>

#include "lib/core/error.h"
#include "lib/core/banned.h"

static const struct {
    const char *name;
    int (*init)(struct swift_objective *, const struct swift_train_opts *, struct swift_model *);
} objectives[] = {
    {"sft", swift_objective_sft},
    {"dpo", swift_objective_dpo},
    {"cpo", swift_objective_cpo},
    {"simpo", swift_objective_simpo},
    {"orpo", swift_objective_orpo},
    {"rm", swift_objective_rm},
    {"kto", swift_objective_kto},
    {"grpo", swift_objective_grpo},
};

int swift_objective_init(struct swift_objective *obj, const char *name,
                         const struct swift_train_opts *o, struct swift_model *m)
{
    memset(obj, 0, sizeof(*obj));
    for (size_t i = 0; i < sizeof(objectives) / sizeof(objectives[0]); i++)
        if (!strcmp(name, objectives[i].name))
            return objectives[i].init(obj, o, m);
    return swift_error("unknown training objective '%s'", name);
}

void swift_objective_free(struct swift_objective *obj)
{
    if (obj->free)
        obj->free(obj);
    memset(obj, 0, sizeof(*obj));
}
