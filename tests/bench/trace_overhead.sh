#!/bin/sh
# Cost of tracing in swift-train: the same LoRA run (10M Llama config, random weights written by
# bench_train, the fixture shards, batch 8 x 32 tokens) without a trace, with per-step spans
# (--trace), and with per-op spans on every step (--profile wait=0,warmup=0,active=N).
# Prints the mean step time of each from logging.jsonl (train_speed(s/it), steps 10..N).
set -eu
BUILD=${SWIFT_BUILD:-build}
T=$BUILD/bin/swift-train
N=${BENCH_STEPS:-40}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
BENCH_SAVE="$W/model" "$BUILD/bench/bench_train" 10M 1 1 2 1
run() { # name, extra args
    name=$1
    shift
    "$T" --model "$W/model" -o "$W/$name" --max-steps "$N" --logging-steps 10 --save-steps 100000 \
        --eval-steps 100000 --per-device-train-batch-size 8 -j 1 "$@" tests/fixtures/shards \
        >"$W/$name.out" 2>"$W/$name.err" || cat "$W/$name.err" >&2
    # mean of train_speed over the logging records after the first
    grep '"train_speed' "$W/$name.out" | tail -n +3 | sed 's/.*"train_speed(s\/it)":\([0-9.e-]*\).*/\1/' |
        awk -v n="$name" '{ s += $1; k++ } END { printf "%-10s %.4f s/step\n", n, s / k }'
}

run off
run off2
run trace --trace "$W/t1.jsonl"
run profile --trace "$W/t2.jsonl" --profile "wait=0,warmup=0,active=$N"
