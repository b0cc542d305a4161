/*
 * analyze/merge — one Perfetto-loadable trace from every input (--merge OUT.json[.gz]).
 *
 * JSON Object format {"traceEvents":[...]} with µs timestamps and no displayTimeUnit (Perfetto
 * and chrome://tracing read ts as µs). Every input is re-read as a stream, so
 * memory does not grow with the trace. pids are remapped per input so they never collide (GPU
 * pids are local device indices in Kineto traces): input i's pid p becomes
 * (i+1)*10000000 + p mod 10000000 (Linux pids stay below 2^22); flow ids are offset per input
 * (id + (i+1)<<40); process names become "swift-train rank 3 @ host", "rank 3 GPU 0 @ host";
 * our timestamps are shifted by swift_meta.clock_offset_us.
 * --steps A-B keeps events overlapping those steps' time ranges, --ranks LIST keeps those
 * ranks, --window N keeps N steps around each process's worst step. The file is written to a
 * temporary name and renamed; a warning is printed when it exceeds the size viewers open.
 */
#ifndef SWIFT_ANALYZE_MERGE_H
#define SWIFT_ANALYZE_MERGE_H

#include "lib/analyze/analyze.h"

int swift_an_merge_write(const struct swift_an_set *set, const struct swift_an_proc *procs,
                         size_t n, json_t *report, const struct swift_analyze_opts *o);
/* Parse "0,2,5-7" into a membership test. Returns 1 if rank is in list (NULL list: all). */
int swift_an_rank_in(const char *list, int rank);

#endif
