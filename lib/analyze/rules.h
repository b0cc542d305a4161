/*
 * analyze/rules — the bottleneck rules, documented in docs/bottlenecks.md (lib/analyze/rules.c;
 * the remedies' command lines are built in cmdline.c).
 *
 * Each rule reads the per-process analyses, and when it fires appends to the report's
 * "bottlenecks" array an object {rule, severity, process, rank, value, threshold, unit,
 * summary, evidence{figures..., worst_spans[]}, remedy, command?}. Severity: "warn" when the
 * threshold is crossed, "critical" when it is crossed twice over (or, for rules where lower
 * is worse, when the value is below half the threshold). "command" is the exact new command
 * line, present when the trace recorded swift_meta.argv.
 */
#ifndef SWIFT_ANALYZE_RULES_H
#define SWIFT_ANALYZE_RULES_H

#include "lib/analyze/analyze.h"

/* Append the bottlenecks to report["bottlenecks"] (sorted: critical first, then by how far
 * past the threshold). Returns the highest severity found (SWIFT_SEV_*). */
int swift_an_rules_apply(json_t *report, const struct swift_an_set *set,
                         const struct swift_an_proc *procs, size_t n,
                         const struct swift_analyze_opts *o);

/* Shell-quoted command line from an argv array with option `opt` set to `value` (replaced when
 * present as "--opt V", "--opt=V" or with '_' instead of '-', appended otherwise), and with a
 * new output (-o) and --trace that do not exist yet (never the traced run's). malloc'ed. */
char *swift_an_argv_with(json_t *argv, const char *opt, const char *value);
/* A duration as the rules' summaries write it, from µs: "1.25 s", "312 ms", "30.0 ms",
 * "4.20 ms", "0.019 ms" ("-" when not finite), into b; returns b. */
const char *swift_an_ms_text(char *b, size_t n, double us);
/* The argv array as it is but for the new output and --trace, shell-quoted (malloc'ed). */
char *swift_an_argv_command(json_t *argv);

#endif
