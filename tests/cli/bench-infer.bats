#!/usr/bin/env bats
# tests/bench/infer.sh (docs/benchmarks.md "Inference") is not a test of speed; these check its
# contract on the tiny shape with the reference systems' Pythons absent (as on a fresh machine):
# the header, a row of ours per concurrency with every request held to the asked token count,
# the skip lines of llama.cpp and transformers, the goals as not measured; exit 1 when
# swift-infer fails, 2 for an unknown shape. Nothing asserts on time.

bats_require_minimum_version 1.5.0

N='[0-9]+(\.[0-9]+)?'

@test "bench infer (tiny shape, references absent): our rows, the skips, the goals" {
    run env BENCH_INFER_SHAPE=tiny BENCH_THREADS=1 BENCH_TOKENS=8 BENCH_CONC="1 4" \
        LLAMA_PYTHON=/nonexistent/python HF_PYTHON=/nonexistent/python sh tests/bench/infer.sh
    echo "$output"
    [ "$status" -eq 0 ]
    [[ $output == *"model: LlamaForCausalLM random weights, hidden 64, 2 layers, MLP 128, 4 heads (2 key/value), vocabulary 260,"*"fp32 on every side; 8 new tokens per request, greedy; 1 threads each"* ]]
    [[ $output == *"load average: "* ]]
    echo "$output" | grep -Eq '^system +mode +conc +reqs +tokens +tok/s +ttft_p50 +ttft_p99 +tpot_p50 +tpot_p99$'
    # 3 requests one after another at concurrency 1, 4 at once at 4; 8 tokens each
    echo "$output" | grep -Eq "^ours +(batch|serve) +1 +3 +24 +($N +){4}$N\$"
    echo "$output" | grep -Eq "^ours +(batch|serve) +4 +4 +32 +($N +){4}$N\$"
    [[ $output == *"llama.cpp: skipped (no llama-cpp-python[server] and openai for /nonexistent/python; set LLAMA_PYTHON)"* ]]
    [[ $output == *"transformers: skipped (no torch and transformers for /nonexistent/python; set HF_PYTHON)"* ]]
    [[ $output == *"goal: throughput ahead of transformers at every concurrency: not measured"* ]]
    [[ $output == *"goal: within reach of llama.cpp at concurrency 1 (tok/s >= 0.8 x): not measured"* ]]
    [[ $output == *"goal: ahead of llama.cpp at concurrency 8+: not measured"* ]]
    [[ $output != *"ours/"* ]]
}

@test "bench infer: a failing swift-infer fails the benchmark; a bad shape is usage" {
    d=$(mktemp -d)
    ln -s "$SWIFT_BIN/swift-train" "$d/swift-train"
    printf '#!/bin/sh\necho "swift-infer: boom" >&2\nexit 1\n' >"$d/swift-infer"
    chmod +x "$d/swift-infer"
    run env SWIFT_BIN="$d" BENCH_INFER_SHAPE=tiny BENCH_TOKENS=4 BENCH_CONC=1 \
        LLAMA_PYTHON=/nonexistent/python HF_PYTHON=/nonexistent/python sh tests/bench/infer.sh
    rm -rf "$d"
    echo "$output"
    [ "$status" -eq 1 ]
    [[ $output == *"infer: swift-infer (concurrency 1) failed:"*"swift-infer: boom"* ]]
    run env BENCH_INFER_SHAPE=huge sh tests/bench/infer.sh
    [ "$status" -eq 2 ]
    [[ $output == *"infer: BENCH_INFER_SHAPE is small or tiny, not 'huge'"* ]]
}
