/*
 * profile — the profiler schedule of torch.profiler (wait/warmup/active/repeat/skip_first) as a
 * reusable state machine, parsed from `--profile wait=W,warmup=U,active=A[,repeat=R]`.
 *
 *     struct swift_profile p;
 *     if (swift_profile_parse("wait=1,warmup=1,active=3", &p) < 0) ...usage error...
 *     for (long step = 0; ...; step++) {           // steps counted from 0, as torch does
 *         int a = swift_profile_action(&p, step);
 *         swift_trace_set_detail(a == SWIFT_PROF_RECORD || a == SWIFT_PROF_RECORD_AND_SAVE);
 *     }
 *
 * Semantics are torch.profiler.schedule's: after skip_first steps, cycles of wait (nothing),
 * warmup (tracing starts but results are discarded), active (recorded; the last active step of a
 * cycle is RECORD_AND_SAVE); repeat=0 repeats cycles until the end.
 */
#ifndef SWIFT_PROFILE_H
#define SWIFT_PROFILE_H

enum swift_profile_action {
    SWIFT_PROF_NONE = 0,
    SWIFT_PROF_WARMUP,
    SWIFT_PROF_RECORD,
    SWIFT_PROF_RECORD_AND_SAVE,
};

struct swift_profile {
    int enabled;
    long skip_first, wait, warmup, active, repeat;
    int shapes, memory, stack, flops; /* record_shapes, profile_memory, with_stack, with_flops */
};

/* Parse "wait=W,warmup=U,active=A[,repeat=R][,skip_first=S][,shapes=0|1][,memory=0|1]
 * [,stack=0|1][,flops=0|1]". active must be >= 1. Returns 0 or -1 with a reason in err. */
int swift_profile_parse(const char *spec, struct swift_profile *p, char *err, int errlen);
/* The action for step (0-based). NONE when p is not enabled. */
enum swift_profile_action swift_profile_action(const struct swift_profile *p, long step);
/* The name torch uses: "NONE", "WARMUP", "RECORD", "RECORD_AND_SAVE". */
const char *swift_profile_action_name(enum swift_profile_action a);

#endif
