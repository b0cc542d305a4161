#!/usr/bin/env bats
# tests/bench/memory.sh (make bench's memory table, docs/benchmarks.md "Memory") is not a test of
# speed; these check its contract on the tiny shape (1 step): a row per technique with the
# accounted peak by category, the total, RSS, tokens/s and the ratio to full AdamW; the two goal
# lines; exit 1 when swift-train fails, 2 for an unknown shape or run. Nothing asserts on time.

bats_require_minimum_version 1.5.0

N='[0-9]+\.[0-9]+'

@test "bench memory (tiny shape, 1 step): a row per technique and the two goals" {
    run env BENCH_MEMORY_SHAPE=tiny BENCH_STEPS=1 BENCH_THREADS=1 sh tests/bench/memory.sh
    echo "$output"
    [ "$status" -eq 0 ]
    [[ $output == *"shape tiny: hidden 64, 2 layers, MLP 128, 4 heads (2 key/value), vocabulary 128; 73728 linear weights; 1 steps of batch 1 from shards, 1 threads"* ]]
    echo "$output" | grep -Eq '^run +params +grads +optimizer +activations +other +total +rss +tokens/s +ratio +load$'
    [[ $output == *"(peak by category in MiB at the moment the accounted total peaked)"* ]]
    for r in full lora qlora dora galore16 galore128 galore16pp adamw8bit; do
        echo "$output" | grep -Eq "^$r +($N +){8}$N +[0-9.]+\$"
    done
    echo "$output" | grep -Eq "^full +($N +){8}1\.00 +[0-9.]+\$"
    # the parts sum to the total (to the printed rounding); LoRA and QLoRA hold less than full
    echo "$output" | awk '$1 ~ /^(full|lora|qlora|dora|galore16|galore128|galore16pp|adamw8bit)$/ {
        d = $2 + $3 + $4 + $5 + $6 - $7; if (d > 0.005 || d < -0.005) exit 1 }'
    echo "$output" | grep -Eq '^lora +([0-9.]+ +){8}0\.[0-9]+ '
    echo "$output" | grep -Eq '^qlora +([0-9.]+ +){8}0\.[0-9]+ '
    echo "$output" | grep -Eq "^goal: GaLore r16 total >= 35% below full AdamW: -?$N% below \((met|missed)\)\$"
    echo "$output" | grep -Eq "^goal: GaLore r16 per parameter total >= 35% below full AdamW: -?$N% below \((met|missed)\)\$"
    # per parameter: the GaLore weights' gradients share one buffer, less than GaLore's
    echo "$output" | awk '$1 == "galore16" { g = $3 } $1 == "galore16pp" { p = $3 } END { exit !(p < g) }'
    # nf4 with double quantization: half a byte per weight, a uint8 absmax per 64, an fp32
    # constant per 256 blocks; measured from the accounting = the layout's formula
    [[ $output == *"goal: QLoRA base linears <= 0.29 x bf16: 38072 bytes for 73728 weights = 0.2582 x bf16 (met); layout formula 0.2582 x"* ]]
}

@test "bench memory: a subset of runs; without full or lora the ratio and goals say not measured" {
    run env BENCH_MEMORY_SHAPE=tiny BENCH_STEPS=1 BENCH_THREADS=1 BENCH_MEMORY_RUNS=qlora \
        sh tests/bench/memory.sh
    echo "$output"
    [ "$status" -eq 0 ]
    echo "$output" | grep -Eq "^qlora +($N +){8}- +[0-9.]+\$"
    [[ $output == *"goal: GaLore r16 vs full AdamW: not measured (needs runs full and galore16)"* ]]
    [[ $output == *"goal: QLoRA base vs bf16: not measured (needs runs lora and qlora)"* ]]
}

@test "bench memory: a failing swift-train run fails the benchmark; bad shape or run is usage" {
    d=$(mktemp -d)
    # --init-model succeeds (an empty model directory), training fails
    printf '#!/bin/sh\nif [ "$1" = --init-model ]; then mkdir -p "$5"; exit 0; fi\necho "swift-train: boom" >&2\nexit 1\n' >"$d/swift-train"
    chmod +x "$d/swift-train"
    run env SWIFT_BIN="$d" BENCH_MEMORY_SHAPE=tiny BENCH_STEPS=1 sh tests/bench/memory.sh
    rm -rf "$d"
    echo "$output"
    [ "$status" -eq 1 ]
    [[ $output == *"memory: swift-train (full: --tuner full) failed:"*"swift-train: boom"* ]]
    run env BENCH_MEMORY_SHAPE=huge sh tests/bench/memory.sh
    [ "$status" -eq 2 ]
    [[ $output == *"memory: BENCH_MEMORY_SHAPE is qwen2.5-0.5b or tiny, not 'huge'"* ]]
    run env BENCH_MEMORY_SHAPE=tiny BENCH_MEMORY_RUNS=sgd sh tests/bench/memory.sh
    [ "$status" -eq 2 ]
    [[ $output == *"memory: unknown run 'sgd'"* ]]
}
