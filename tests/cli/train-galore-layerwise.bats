#!/usr/bin/env bats
# swift-train --galore-optim-per-parameter (lib/train/layerwise.c, docs/train.md "GaLore"): each
# GaLore weight is updated inside backward as soon as its gradient is final, the GaLore weights
# sharing one gradient buffer. Same math as the ordinary GaLore step, another schedule: the
# weights and optimizer state after N steps equal the ordinary run's bit for bit (without
# clipping, accumulation 1); resume is exact; SIGTERM checkpoints; the restrictions are usage
# errors. The memory drop: tests/cli/train-memory.bats.

M=tests/fixtures/model/qwen3
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
gnorms() {
    grep '"loss"' "$1" | sed 's/.*"grad_norm":\([^,]*\),.*/\1/'
}

ARGS=(--model $M --tuner full --galore-rank 4 --galore-update-proj-gap 3 --galore-scale 1
    --logging-steps 1 --eval-steps 100 --per-device-train-batch-size 2 --learning-rate 1e-2
    -j 1 --device cpu)

@test "--galore-optim-per-parameter: weights and state equal the ordinary GaLore run's bit for bit" {
    # 8 steps, refreshes at 1, 4, 7; the ordinary run without clipping (the per-parameter default)
    run "$T" "${ARGS[@]}" --max-grad-norm 0 --max-steps 8 --save-steps 4 -o "$W/a" $D
    [ "$status" -eq 0 ]
    echo "$output" >"$W/a.out"
    run "$T" "${ARGS[@]}" --galore-optim-per-parameter --max-steps 8 --save-steps 4 -o "$W/b" $D
    [ "$status" -eq 0 ]
    echo "$output" >"$W/b.out"
    [[ $output == *"swift-train: GaLore per parameter: 14 weights updated during backward, sharing one gradient buffer of"* ]]
    cmp "$W/a/checkpoint-8/model.safetensors" "$W/b/checkpoint-8/model.safetensors"
    cmp "$W/a/checkpoint-8/optimizer.safetensors" "$W/b/checkpoint-8/optimizer.safetensors"
    diff <(losses "$W/a.out") <(losses "$W/b.out")
    # grad_norm: the whole gradient's, summed in another order (1e-12 relative)
    paste <(gnorms "$W/a.out") <(gnorms "$W/b.out") |
        awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-12 * $1) exit 1 } END { exit NR != 8 }'
    grep -q "\"max_grad_norm\": 0.0" "$W/b/args.json"
}

@test "--galore_optim_per_parameter: resume is exact, across a refresh" {
    run "$T" "${ARGS[@]}" --galore_optim_per_parameter --max-steps 8 --save-steps 4 -o "$W/a" $D
    [ "$status" -eq 0 ]
    echo "$output" >"$W/a.out"
    run "$T" "${ARGS[@]}" --galore_optim_per_parameter --max-steps 8 --save-steps 4 -o "$W/b" \
        --resume "$W/a/checkpoint-4" $D
    [ "$status" -eq 0 ]
    echo "$output" >"$W/b.out"
    diff <(losses "$W/a.out" | sed -n 5,8p) <(losses "$W/b.out")
    cmp "$W/a/checkpoint-8/model.safetensors" "$W/b/checkpoint-8/model.safetensors"
    cmp "$W/a/checkpoint-8/optimizer.safetensors" "$W/b/checkpoint-8/optimizer.safetensors"
}

@test "--galore-optim-per-parameter: SIGTERM writes a checkpoint and exits 75; a trace" {
    "$T" "${ARGS[@]}" --galore-optim-per-parameter --max-steps 100000 --save-steps 100000 \
        --trace "$W/t.jsonl" --profile wait=0,warmup=0,active=2 -o "$W/a" $D >"$W/a.out" 2>"$W/a.err" &
    pid=$!
    for _ in $(seq 100); do
        grep -q '"global_step/max_steps":"3/' "$W/a.out" 2>/dev/null && break
        sleep 0.1
    done
    kill -TERM $pid
    rc=0
    wait $pid || rc=$?
    [ "$rc" -eq 75 ]
    ls -d "$W"/a/checkpoint-* >/dev/null
    grep -q "\"optimizer.param\"" "$W/t.jsonl"
}

@test "--galore-optim-per-parameter: without GaLore, with accumulation, with clipping: usage errors" {
    run "$T" --model $M --tuner full --galore-optim-per-parameter -o "$W/a" $D
    [ "$status" -eq 2 ]
    [[ $output == "swift-train: --galore-optim-per-parameter needs GaLore (--use-galore or --galore-rank)"* ]]
    run "$T" "${ARGS[@]}" --galore-optim-per-parameter --gradient-accumulation-steps 2 -o "$W/a" $D
    [ "$status" -eq 2 ]
    [[ $output == "swift-train: --galore-optim-per-parameter: gradient accumulation is not supported"* ]]
    run "$T" "${ARGS[@]}" --galore-optim-per-parameter --max-grad-norm 1 -o "$W/a" $D
    [ "$status" -eq 2 ]
    [[ $output == "swift-train: --galore-optim-per-parameter: no global gradient clipping"* ]]
    [ ! -e "$W/a" ]
}
