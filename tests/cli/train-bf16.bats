#!/usr/bin/env bats
# swift-train --torch-dtype bfloat16 (ms-swift's --torch_dtype): the matmuls in bf16 with fp32
# accumulation (oneDNN, kernels/cpu/matmul_bf16.c), everything else fp32, fp32 master weights.
# Bands: per logged step |loss(bf16) - loss(fp32)| <= 0.02 on the fixtures over 12 steps (seen:
# <= 0.002); the 200-step curve is tests/bench/bf16_curve.sh.

bats_require_minimum_version 1.5.0

M=tests/fixtures/model/llama
D=tests/fixtures/shards
T="$SWIFT_BIN/swift-train"

setup() {
    W=$(mktemp -d)
}
teardown() {
    rm -rf "$W"
}

losses() { # the train records' "loss" values of a stdout capture
    grep '"loss"' "$1" | sed 's/.*"loss":\([^,]*\),.*/\1/'
}
# the largest |a - b| of two loss columns, and their counts equal
band() {
    [ "$(losses "$1" | wc -l)" -eq "$(losses "$2" | wc -l)" ]
    paste <(losses "$1") <(losses "$2") |
        awk -v b="$3" '{d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d} END {print "max |d| " m; exit !(m <= b && NR > 0)}'
}
has_bf16() {
    grep -qE '^flags.* (avx512_bf16|amx_bf16)' /proc/cpuinfo
}

@test "--torch-dtype bfloat16, LoRA: tracks the float32 losses; args.json and the kernel note" {
    args=(--model $M --max-steps 12 --logging-steps 1 --eval-steps 100 --save-steps 100
        --per-device-train-batch-size 2 --learning-rate 1e-3 -j 1)
    run --separate-stderr "$T" "${args[@]}" -o "$W/f" $D
    [ "$status" -eq 0 ]
    echo "$output" >"$W/f.out"
    run --separate-stderr "$T" "${args[@]}" -o "$W/b" --torch_dtype bfloat16 $D
    [ "$status" -eq 0 ]
    echo "$output" >"$W/b.out"
    band "$W/f.out" "$W/b.out" 0.02
    # bf16 rounds: the losses are not float32's bits
    ! diff -q <(losses "$W/f.out") <(losses "$W/b.out")
    [ "$(jq -r .torch_dtype "$W/b/args.json")" = bfloat16 ]
    [ "$(jq -r .torch_dtype "$W/f/args.json")" = float32 ]
    [[ $stderr == *"swift-train: bf16 matmuls: oneDNN "* || $stderr == *"warning: bf16 matmuls: oneDNN runs"* ]]
}

@test "--torch-dtype bfloat16: the fast kernel on a CPU with avx512_bf16 or AMX, in the trace too" {
    has_bf16 || skip "this CPU has neither avx512_bf16 nor amx_bf16"
    run --separate-stderr "$T" --model $M --max-steps 2 --eval-steps 100 --save-steps 100 \
        --per-device-train-batch-size 2 -j 1 --torch-dtype bfloat16 --trace "$W/t.json" \
        -o "$W/r" $D
    [ "$status" -eq 0 ]
    [[ $stderr == *"swift-train: bf16 matmuls: oneDNN "*avx512_core_bf16* ||
        $stderr == *"swift-train: bf16 matmuls: oneDNN "*amx* ]]
    [[ $stderr != *warning* ]]
    grep -q '"bf16_fast_path"' "$W/t.json"
    jq -se '[.[] | select(.name == "bf16_matmul")][0].args | .fast == 1 and .peak_gflops > 0' "$W/t.json"
}

@test "--torch-dtype bfloat16, full fine-tuning: tracks float32; resume is exact" {
    args=(--model tests/fixtures/model/qwen3 --tuner full --max-steps 8 --logging-steps 1
        --save-steps 4 --eval-steps 100 --per-device-train-batch-size 2
        --gradient-accumulation-steps 2 --learning-rate 1e-3 -j 2)
    run --separate-stderr "$T" "${args[@]}" -o "$W/f" $D
    [ "$status" -eq 0 ]
    echo "$output" >"$W/f.out"
    run --separate-stderr "$T" "${args[@]}" --torch-dtype bfloat16 -o "$W/a" $D
    [ "$status" -eq 0 ]
    echo "$output" >"$W/a.out"
    band "$W/f.out" "$W/a.out" 0.02
    # the checkpoint holds the fp32 master weights and states; the bf16 copies are derived
    run --separate-stderr "$T" "${args[@]}" --torch-dtype bfloat16 -o "$W/b" \
        --resume "$W/a/checkpoint-4" $D
    [ "$status" -eq 0 ]
    echo "$output" >"$W/b.out"
    diff <(losses "$W/a.out" | sed -n 5,8p) <(losses "$W/b.out")
}

@test "--torch-dtype bfloat16, LoRA with dropout: resume is exact" {
    args=(--model $M --max-steps 6 --logging-steps 1 --save-steps 3 --eval-steps 100
        --per-device-train-batch-size 2 --learning-rate 1e-3 --lora-dropout 0.1 -j 2
        --torch-dtype bfloat16)
    run "$T" "${args[@]}" -o "$W/a" $D
    [ "$status" -eq 0 ]
    echo "$output" >"$W/a.out"
    run "$T" "${args[@]}" -o "$W/b" --resume "$W/a/checkpoint-3" $D
    [ "$status" -eq 0 ]
    echo "$output" >"$W/b.out"
    diff <(losses "$W/a.out" | sed -n 4,6p) <(losses "$W/b.out")
    [ "$(losses "$W/b.out" | wc -l)" -eq 3 ]
}

@test "--torch-dtype float16 is refused; an unknown dtype is a usage error" {
    run "$T" --model $M -o "$W/r" --torch-dtype float16 $D
    [ "$status" -eq 2 ]
    [[ ${lines[0]} == "swift-train: --torch-dtype float16: not supported"* ]]
    run "$T" --model $M -o "$W/r" --torch-dtype int8 $D
    [ "$status" -eq 2 ]
    [[ ${lines[0]} == "swift-train: --torch-dtype: 'int8' is not bfloat16, float16 or float32" ]]
}

@test "swift-eval --torch-dtype bfloat16: the loss within 1% of float32, adapters merged in fp32" {
    E="$SWIFT_BIN/swift-eval"
    F=tests/fixtures/eval
    run --separate-stderr "$E" $F/llama --task loss --dataset $F/synth/train --quiet
    [ "$status" -eq 0 ]
    a=$(jq .metrics.loss <<<"$output")
    run --separate-stderr "$E" $F/llama --task loss --dataset $F/synth/train --quiet --torch_dtype bfloat16
    [ "$status" -eq 0 ]
    b=$(jq .metrics.loss <<<"$output")
    [[ $stderr == *"swift-eval: bf16 matmuls: oneDNN "* || $stderr == *"warning: bf16 matmuls"* ]]
    awk -v a="$a" -v b="$b" 'BEGIN { d = (a - b) / a; if (d < 0) d = -d; print d; exit !(d < 0.01 && a != b) }'
    run --separate-stderr "$E" $F/llama --adapters $F/llama/adapter --merge-adapters --task loss \
        --dataset $F/synth/train --quiet --torch-dtype bfloat16
    [ "$status" -eq 0 ]
    run "$E" $F/llama --task loss --dataset $F/synth/train --torch-dtype float16
    [ "$status" -eq 2 ]
    [[ ${lines[0]} == "swift-eval: --torch-dtype float16: not supported"* ]]
}

# a copy of a fixture model whose config.json says dtype $2 (none: no dtype key at all)
with_dtype() {
    mkdir -p "$W/$2"
    cp -r "$1/." "$W/$2/"
    if [ "$2" = none ]; then
        jq 'del(.dtype, .torch_dtype)' "$1/config.json" >"$W/$2/config.json"
    else
        jq --arg d "$2" 'del(.dtype) | .torch_dtype = $d' "$1/config.json" >"$W/$2/config.json"
    fi
}

@test "no --torch-dtype: the checkpoint's dtype (ms-swift's default), a note for bfloat16 and float16" {
    args=(--max-steps 4 --logging-steps 1 --eval-steps 100 --save-steps 100
        --per-device-train-batch-size 2 --learning-rate 1e-3 -j 1 --device cpu)
    for d in bfloat16 float16 float32 none; do with_dtype $M $d; done
    # bfloat16: bf16 matmuls, the same losses as an explicit --torch-dtype bfloat16
    run --separate-stderr "$T" --model "$W/bfloat16" "${args[@]}" -o "$W/b" $D
    [ "$status" -eq 0 ]
    echo "$output" >"$W/b.out"
    [[ $stderr == *"swift-train: --torch-dtype bfloat16: the checkpoint's dtype (torch_dtype in $W/bfloat16/config.json)"* ]]
    [ "$(jq -r .torch_dtype "$W/b/args.json")" = bfloat16 ]
    run --separate-stderr "$T" --model "$W/bfloat16" "${args[@]}" -o "$W/be" --torch-dtype bfloat16 $D
    [ "$status" -eq 0 ]
    echo "$output" >"$W/be.out"
    diff <(losses "$W/b.out") <(losses "$W/be.out")
    [[ $stderr != *"the checkpoint's dtype"* ]] # explicit: no note
    # an explicit float32 overrides a bf16 checkpoint: float32's losses
    run --separate-stderr "$T" --model "$W/bfloat16" "${args[@]}" -o "$W/bf" --torch-dtype float32 $D
    [ "$status" -eq 0 ]
    echo "$output" >"$W/bf.out"
    ! diff -q <(losses "$W/b.out") <(losses "$W/bf.out")
    # float32 and no dtype: fp32 matmuls, float32's bits
    run --separate-stderr "$T" --model "$W/float32" "${args[@]}" -o "$W/f" $D
    [ "$status" -eq 0 ]
    echo "$output" >"$W/f.out"
    [[ $stderr != *"--torch-dtype"* ]] # as the checkpoint says, as before: no note
    diff <(losses "$W/bf.out") <(losses "$W/f.out")
    [ "$(jq -r .torch_dtype "$W/f/args.json")" = float32 ]
    run --separate-stderr "$T" --model "$W/none" "${args[@]}" -o "$W/n" $D
    [ "$status" -eq 0 ]
    [[ $stderr != *"--torch-dtype"* ]]
    [ "$(jq -r .torch_dtype "$W/n/args.json")" = float32 ]
    # float16: no fp16 matmuls on the CPU, float32 (which holds fp16 weights exactly)
    run --separate-stderr "$T" --model "$W/float16" "${args[@]}" -o "$W/h" $D
    [ "$status" -eq 0 ]
    [[ $stderr == *"swift-train: --torch-dtype float32: the checkpoint is float16 (torch_dtype in $W/float16/config.json) and the CPU has no fp16 matmuls"* ]]
    [ "$(jq -r .torch_dtype "$W/h/args.json")" = float32 ]
}

@test "swift-eval without --torch-dtype: the checkpoint's dtype, a note for bfloat16 (not under --quiet)" {
    E="$SWIFT_BIN/swift-eval"
    F=tests/fixtures/eval
    with_dtype $F/llama bfloat16
    run --separate-stderr "$E" "$W/bfloat16" --task loss --dataset $F/synth/train
    [ "$status" -eq 0 ]
    a=$(jq .metrics.loss <<<"$output")
    [[ $stderr == *"swift-eval: --torch-dtype bfloat16: the checkpoint's dtype (torch_dtype in $W/bfloat16/config.json)"* ]]
    run --separate-stderr "$E" "$W/bfloat16" --task loss --dataset $F/synth/train --torch-dtype bfloat16
    [ "$status" -eq 0 ]
    [ "$(jq .metrics.loss <<<"$output")" = "$a" ]
    run --separate-stderr "$E" "$W/bfloat16" --task loss --dataset $F/synth/train --torch-dtype float32
    [ "$status" -eq 0 ]
    [ "$(jq .metrics.loss <<<"$output")" != "$a" ]
    # --quiet: no note either
    run --separate-stderr "$E" "$W/bfloat16" --task loss --dataset $F/synth/train --quiet
    [ "$status" -eq 0 ]
    [ "$(jq .metrics.loss <<<"$output")" = "$a" ]
    [[ $stderr != *"--torch-dtype"* ]]
    # a float32 checkpoint: fp32 as before, no note
    run --separate-stderr "$E" $F/llama --task loss --dataset $F/synth/train
    [ "$status" -eq 0 ]
    [[ $stderr != *"--torch-dtype"* ]]
}
