/*
 * analyze/report — render the report document (analyze.h) as text (default, for people at a
 * terminal), Markdown (for PR comments and wikis), JSON (schema in docs/formats.md, for scripts
 * and CI) or one self-contained HTML page with inline SVG (per-rank timeline of the worst
 * steps, stacked step-time breakdown per rank, top kernels; no network).
 */
#ifndef SWIFT_ANALYZE_REPORT_H
#define SWIFT_ANALYZE_REPORT_H

#include <jansson.h>
#include <stdio.h>

/* Write to fp. Returns 0 or -1 (write error, not reported). */
int swift_an_report_print(FILE *fp, json_t *report, int format, int top);
/* Write to `path` atomically, or to stdout when path is NULL or "-". Returns 0 or -1 after
 * reporting an error. */
int swift_an_report_write(json_t *report, int format, const char *path, int top);

#endif
