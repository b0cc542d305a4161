#!/usr/bin/env bats
# tests/bench/grpo.sh (make bench's GRPO benchmark against TRL, docs/benchmarks.md) is not a test
# of speed; these check its contract: without trl it prints our figures alone and exits 0, and
# it exits non-zero when swift-train fails.

bats_require_minimum_version 1.5.0

@test "bench grpo: without trl, our figures alone (exit 0)" {
    command -v python3 >/dev/null || skip "python3 not installed"
    run env TRL_PYTHON=/nonexistent/python BENCH_STEPS=3 sh tests/bench/grpo.sh
    echo "$output"
    [ "$status" -eq 0 ]
    [[ $output == *"TRL: not installed for /nonexistent/python"*"our figures alone"* ]]
    [[ $output == *"-- 1 thread(s), 3 steps"* ]]
    echo "$output" | grep -Eq '^swift-train +1 +3 +[0-9.]+ +[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+$'
    [[ $output == *"ms per step (steps 2..N):  generate    reward   forward  backward optimizer     other"* ]]
    [[ $output == *"swift-train generate per step: prefill "* ]]
    [[ $output == *"swift-trace-analyze on our trace:"*"RL steps (3 of 3 steps generate)"* ]]
    [[ $output != *"TRL    "* ]]
}

@test "bench grpo: a failing swift-train run fails the benchmark" {
    d=$(mktemp -d)
    cp "$SWIFT_BIN/swift-preprocess" "$d/"
    printf '#!/bin/sh\necho "swift-train: boom" >&2\nexit 1\n' >"$d/swift-train"
    chmod +x "$d/swift-train"
    run env SWIFT_BIN="$d" TRL_PYTHON=/nonexistent/python BENCH_STEPS=3 sh tests/bench/grpo.sh
    rm -rf "$d"
    echo "$output"
    [ "$status" -eq 1 ]
    [[ $output == *"grpo: swift-train failed:"*"swift-train: boom"* ]]
}
