#!/usr/bin/env bats
# Many ranks: a job of 32 ranks made from one real rank's Kineto trace (tests/bench/gen_ranks.py:
# shifted clocks, rank 5's timeline stretched 1.3x) is analysed in parallel threads with the
# same results as one thread, the slow rank is found, and the text report stays compact (one
# summary of the ranks and a heatmap instead of 32 processes in full). Above 16 files each rank is
# read, analysed and freed in turn, so memory stays near one rank's working set per thread.

setup_file() {
    T="$SHARED/data/traces"
    [ -d "$T" ] || return 0
    python3 "$BATS_TEST_DIRNAME/../bench/gen_ranks.py" "$T/hta/trace_filter/sampled_rank-0.json.gz" \
        "$BATS_FILE_TMPDIR/r32" --ranks 32 --slow 5 --stretch 1.3
}

setup() {
    A="$SWIFT_BIN/swift-trace-analyze"
    T="$SHARED/data/traces"
    W="$BATS_TEST_TMPDIR"
    R="$BATS_FILE_TMPDIR/r32"
    if [ ! -d "$T" ]; then
        [ "${CI:-}" = true ] && { echo "missing $T" >&2; return 1; }
        skip "shared traces not found at $T"
    fi
}

json() { # json FILE JQ-EXPR: evaluate on a report file
    jq -r "$2" "$1"
}

@test "32 ranks: -j 2 gives the same report as -j 1; the slowed rank is the straggler and the slowest" {
    run "$A" -j 1 --format json -o "$W/j1.json" "$R"
    [ "$status" -eq 0 ]
    run "$A" --threads 2 --format json -o "$W/j2.json" "$R"
    [ "$status" -eq 0 ]
    cmp "$W/j1.json" "$W/j2.json"
    [ "$(json "$W/j2.json" '.processes | length')" = 32 ]
    [ "$(json "$W/j2.json" '[.bottlenecks[] | select(.rule == "straggler") | .rank] | map(tostring) | join(",")')" = 5 ]
    [ "$(json "$W/j2.json" '.ranks.n')" = 32 ]
    [ "$(json "$W/j2.json" '.ranks.slowest[0].rank')" = 5 ]
    [ "$(json "$W/j2.json" '.ranks.slowest[0].above_median_pct')" = 30 ]
    [ "$(json "$W/j2.json" '.ranks.busy_us.max.rank')" = 5 ]
    # the compact per-rank array: [rank, steps, step_us, busy_us], one per rank
    [ "$(json "$W/j2.json" '.ranks.per_rank | length')" = 32 ]
    [ "$(json "$W/j2.json" '.ranks.per_rank_columns | join(",")')" = "rank,steps,step_us,busy_us" ]
    [ "$(json "$W/j2.json" '.ranks.per_rank[5][0]')" = 5 ]
    # 0: one thread per CPU, the same again
    run "$A" -j 0 --format json -o "$W/j0.json" "$R"
    [ "$status" -eq 0 ]
    cmp "$W/j1.json" "$W/j0.json"
}

@test "32 ranks: the text and Markdown reports summarise the ranks instead of 32 processes" {
    run "$A" -j 2 -o "$W/r.txt" "$R"
    [ "$status" -eq 0 ]
    [ "$(wc -l <"$W/r.txt")" -le 40 ]
    grep -q '^Ranks (32): busy time per step (outside communication): min .* max 799.46 ms (rank 5)$' "$W/r.txt"
    grep -q '^  slowest: rank 5 799.46 ms (+30.0%)' "$W/r.txt"
    grep -q '^  straggler: rank 5 (critical)$' "$W/r.txt"
    grep -q '^    0 \.\.\.\.\.@\.\.\.\.\.\.\.\.\.\.\.\.\.\.\.\.\.\.\.\.\.\.\.\.\.\.$' "$W/r.txt"
    grep -q '^32 processes: every one in --format json$' "$W/r.txt"
    ! grep -q '^Processes:' "$W/r.txt"
    # each rule once, with the ranks it also fired on
    [ "$(grep -c '\] gpu_idle' "$W/r.txt")" = 1 ]
    grep -q '^   also on 31 more ranks: 1-31$' "$W/r.txt"
    # the collectives table: the ranks that made the others wait longest, not 32 rows
    grep -q '^  27 more ranks (the 5 that made the others wait longest shown)$' "$W/r.txt"
    run "$A" -j 2 -f md -o "$W/r.md" "$R"
    [ "$status" -eq 0 ]
    [ "$(wc -l <"$W/r.md")" -le 60 ]
    grep -q '^## Ranks (32)$' "$W/r.md"
    grep -q '^Straggler: rank 5 (critical)$' "$W/r.md"
}

@test "64 ranks in 64 MB of address space: each rank is read, analysed and freed in turn" {
    # all 64 ranks' events at once need about 90 MB of address space, one rank's at a time
    # about 40 MB (the report objects and summaries kept); a sanitizer's shadow memory does not
    # fit any limit
    if ldd "$A" 2>/dev/null | grep -q 'lib[at]san' ||
        grep -q '^SANITIZE ?= .' "${SWIFT_BUILD:-/nonexistent}/config.mk" 2>/dev/null; then
        skip "sanitizer build"
    fi
    python3 "$BATS_TEST_DIRNAME/../bench/gen_ranks.py" "$T/hta/trace_filter/sampled_rank-0.json.gz" \
        "$W/r64" --ranks 64 --slow 41 --stretch 1.3
    # one thread, no OpenMP team and one malloc arena: the limit measures the events kept
    run env OMP_NUM_THREADS=1 MALLOC_ARENA_MAX=1 bash -c \
        'ulimit -v 65536 && exec "$0" -j 1 --format json -o "$1" "$2"' "$A" "$W/r64.json" "$W/r64"
    [ "$status" -eq 0 ]
    [ "$(json "$W/r64.json" '.processes | length')" = 64 ]
    [ "$(json "$W/r64.json" '[.bottlenecks[] | select(.rule == "straggler") | .rank] | map(tostring) | join(",")')" = 41 ]
    [ "$(json "$W/r64.json" '.ranks.slowest[0].rank')" = 41 ]
    [ "$(json "$W/r64.json" '.ranks.slowest[0].above_median_pct')" = 30 ]
    # the collectives matched across all 64 ranks from what each kept: rank 41 made the others wait
    [ "$(json "$W/r64.json" '.collectives | length')" = 64 ]
    [ "$(json "$W/r64.json" '[.collectives[] | select(.rank == 41)][0].arrived_last > 0')" = true ]
    # and the same report with two threads, reading two ranks at once
    run "$A" -j 2 --format json -o "$W/r64j2.json" "$W/r64"
    [ "$status" -eq 0 ]
    cmp "$W/r64.json" "$W/r64j2.json"
}

@test "read one rank at a time or every file first (--merge): the same report, on files unlike each other" {
    # every shared trace at once (more than 16 files of different runs, formats and strings): the
    # per-rank reading merges each file's strings in file order, so ids and orders are unchanged
    [ "$(find "$T" -name '*.json' -o -name '*.json.gz' | wc -l)" -gt 16 ]
    run "$A" -j 2 --format json -o "$W/each.json" "$T"
    [ "$status" -eq 0 ]
    run "$A" -j 1 --format json --merge "$W/m.json.gz" -o "$W/all.json" "$T"
    [ "$status" -eq 0 ]
    cmp "$W/each.json" "$W/all.json"
    [ "$(json "$W/each.json" '.processes | length')" -gt 16 ]
}

@test "two ranks still show every process; --threads rejects a bad count" {
    run "$A" -j 2 "$T/hta/trace_filter"
    [ "$status" -eq 0 ]
    [[ "$output" == *$'\nProcesses:\n'* ]]
    [[ "$output" != *"Ranks (2)"* ]]
    run "$A" -j x "$T/hta/trace_filter"
    [ "$status" -eq 2 ]
    [[ "$output" == *"--threads: expected 0..4096, got 'x'"* ]]
    run "$A" --threads -1 "$T/hta/trace_filter"
    [ "$status" -eq 2 ]
}
