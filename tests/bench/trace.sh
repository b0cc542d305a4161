#!/bin/sh
# Trace writer cost (issue 2): ns per span event with formatting, and the slowdown of a tight loop
# of ~1 µs bodies with a span each, tracing on vs off. Target: < 300 ns/event on one core.
set -eu
"$SWIFT_BUILD/bench/bench_trace" "${TRACE_BENCH_EVENTS:-2000000}"
