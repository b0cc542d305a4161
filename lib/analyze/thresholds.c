/*
 * analyze/thresholds — the rules' ids and thresholds (docs/bottlenecks.md): the defaults and
 * --threshold RULE=VALUE. The rules themselves are in rules.c, rule_roofline.c, rule_rl.c and
 * rule_infer.c.
 */
#include "lib/analyze/internal.h"
#include "lib/analyze/rules.h"
#include "lib/core/cli.h"

#include <string.h>

#include "lib/core/banned.h"

const char *const swift_an_rule_ids[] = {"data_stall",
                                         "comm_bound",
                                         "launch_bound",
                                         "gpu_idle",
                                         "straggler",
                                         "memory_headroom",
                                         "ckpt_stall",
                                         "serial_preprocess",
                                         "oversubscription",
                                         "low_efficiency",
                                         "generation_bound",
                                         "reward_stall",
                                         "ref_logps_cost",
                                         "queue_bound_ttft",
                                         "kv_pressure",
                                         "low_occupancy",
                                         "prefill_interference",
                                         "image_starved",
                                         "vision_bound",
                                         NULL};

void swift_an_thresholds_default(struct swift_an_thresholds *t)
{
    t->data_stall_pct = 10;
    t->comm_bound_pct = 40;
    t->launch_short_pct = 30;
    t->gpu_idle_pct = 50;
    t->straggler_pct = 10;
    t->memory_headroom_pct = 90;
    t->ckpt_stall_pct = 5;
    t->serial_preprocess_pct = 50;
    t->oversubscription_x = 3;
    t->low_efficiency_pct = 20;
    /* RL steps (rule_rl.c): generation above half the step makes the step generation-bound
     * (training is the smaller part); rewards are meant to be cheap next to generation, so a
     * tenth of the step is already a stall; the reference's forward is about a third of the
     * policy's forward and backward, so above a fifth of the step it is a large share */
    t->generation_bound_pct = 50;
    t->reward_stall_pct = 10;
    t->ref_logps_cost_pct = 20;
    /* inference (rule_infer.c): time in the queue above half the time to first token means
     * requests wait for a slot rather than for their prefill; the KV pool near full (95 % of
     * its blocks at the peak, or any preemption, which recomputes a sequence); the running batch
     * below half of max_num_seqs while requests wait; decode steps that carry prompt chunks 50 %
     * slower than pure decode steps */
    t->queue_bound_ttft_pct = 50;
    t->kv_pressure_pct = 95;
    t->low_occupancy_pct = 50;
    t->prefill_interference_pct = 50;
    /* multimodal steps (rule_vl.c): waiting for images as data_stall waits for batches (a
     * tenth of the step); the vision tower above half of the model's time (forward_backward)
     * makes the step vision-bound: the language model, what is trained, is the smaller part */
    t->image_starved_pct = 10;
    t->vision_bound_pct = 50;
}

int swift_an_threshold_set(struct swift_an_thresholds *t, const char *spec)
{
    const char *eq = strchr(spec, '=');
    if (!eq)
        return -1;
    double v;
    if (swift_parse_double(eq + 1, &v) < 0 || !(v >= 0) || v > 1e9)
        return -1;
    size_t l = (size_t)(eq - spec);
    double *slots[] = {&t->data_stall_pct,
                       &t->comm_bound_pct,
                       &t->launch_short_pct,
                       &t->gpu_idle_pct,
                       &t->straggler_pct,
                       &t->memory_headroom_pct,
                       &t->ckpt_stall_pct,
                       &t->serial_preprocess_pct,
                       &t->oversubscription_x,
                       &t->low_efficiency_pct,
                       &t->generation_bound_pct,
                       &t->reward_stall_pct,
                       &t->ref_logps_cost_pct,
                       &t->queue_bound_ttft_pct,
                       &t->kv_pressure_pct,
                       &t->low_occupancy_pct,
                       &t->prefill_interference_pct,
                       &t->image_starved_pct,
                       &t->vision_bound_pct};
    for (int i = 0; swift_an_rule_ids[i]; i++)
        if (strlen(swift_an_rule_ids[i]) == l && !strncmp(spec, swift_an_rule_ids[i], l)) {
            *slots[i] = v;
            return 0;
        }
    return -1;
}
