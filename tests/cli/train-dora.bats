#!/usr/bin/env bats
# swift-train --lora-dora (DoRA, PEFT use_dora): training lowers the loss, the checkpoint is
# PEFT's DoRA layout, resume is exact, and swift-export / swift-eval --merge-adapters fold the
# magnitude in (the merged model's loss is the adapter model's). The numerics against PEFT are
# tests/unit/test_dora.c's.

M=tests/fixtures/model/llama
D=tests/fixtures/shards
E=tests/fixtures/eval
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

@test "--lora-dora lowers the validation loss; the checkpoint holds PEFT's lora_magnitude_vector" {
    run "$T" --model $M -o "$W/run" --max-steps 30 --logging-steps 10 --save-steps 30 \
        --eval-steps 15 --per-device-train-batch-size 4 --learning-rate 3e-3 --lora-dora \
        --lora-dropout 0 -j 1 $D
    [ "$status" -eq 0 ]
    base=$("$T" --model $M -o "$W/base" --max-steps 1 --learning-rate 0 --eval-steps 1 \
        --save-steps 1 -j 1 $D | grep eval_loss | sed 's/.*"eval_loss":\([^,]*\),.*/\1/')
    last=$(grep '"eval_loss"' "$W/run/logging.jsonl" | tail -1 | sed 's/.*"eval_loss":\([^,]*\),.*/\1/')
    echo "# validation loss $base -> $last (30 DoRA steps)" >&3
    awk -v a="$base" -v b="$last" 'BEGIN { exit !(b < a - 0.3) }'
    C="$W/run/checkpoint-30"
    [ "$(jq .use_dora "$C/adapter_config.json")" = true ]
    [ "$(jq .use_dora "$W/run/args.json")" = true ]
    grep -aq 'base_model.model.model.layers.1.mlp.down_proj.lora_magnitude_vector"' \
        "$C/adapter_model.safetensors"
}

@test "--lora-dora: resume is exact (dropout, accumulation, gradient checkpointing, strict, 2 threads)" {
    args=(--model $M --max-steps 8 --logging-steps 1 --save-steps 4 --eval-steps 100
        --per-device-train-batch-size 2 --gradient-accumulation-steps 2 --learning-rate 1e-3
        --lora-dropout 0.1 --lora-dora -j 2)
    run "$T" "${args[@]}" -o "$W/a" $D
    [ "$status" -eq 0 ]
    echo "$output" >"$W/a.out"
    run "$T" "${args[@]}" -o "$W/b" --resume "$W/a/checkpoint-4" $D
    [ "$status" -eq 0 ]
    echo "$output" >"$W/b.out"
    diff <(losses "$W/a.out" | sed -n 5,8p) <(losses "$W/b.out")
    [ "$(losses "$W/b.out" | wc -l)" -eq 4 ]
    run "$T" "${args[@]}" --gradient-checkpointing -o "$W/g" $D
    [ "$status" -eq 0 ]
    echo "$output" >"$W/g.out"
    diff <(losses "$W/a.out") <(losses "$W/g.out")
    # the strict backend (no host access to backend memory): the same losses bit for bit
    run env SWIFT_CPU_STRICT_HOST=1 "$T" "${args[@]}" -o "$W/s" $D
    [ "$status" -eq 0 ]
    echo "$output" >"$W/s.out"
    diff <(losses "$W/a.out") <(losses "$W/s.out")
    # the DoRA path differs from plain LoRA's
    run "$T" "${args[@]/--lora-dora/--lora-rank=8}" -o "$W/l" $D
    [ "$status" -eq 0 ]
    ! diff <(losses "$W/a.out") <(echo "$output" | grep '"loss"' | sed 's/.*"loss":\([^,]*\),.*/\1/')
}

@test "--lora-dora: swift-export's merge and swift-eval --merge-adapters give the adapter model's loss" {
    run "$T" --model $E/llama -o "$W/run" --max-steps 6 --save-steps 6 --eval-steps 100 \
        --learning-rate 5e-3 --lora-dora --lora-rank 4 -j 1 $E/synth/train
    [ "$status" -eq 0 ]
    A="$W/run/checkpoint-6"
    ev() { "$SWIFT_BIN/swift-eval" "$@" --task loss --dataset $E/synth/train --quiet | jq .metrics.loss; }
    base=$(ev $E/llama)
    aside=$(ev $E/llama --adapters "$A")
    folded=$(ev $E/llama --adapters "$A" --merge-adapters)
    run "$SWIFT_BIN/swift-export" $E/llama --merge-lora "$A" --dtype fp32 -o "$W/merged"
    [ "$status" -eq 0 ]
    [ "$(echo "$output" | jq .merged)" -eq 14 ]
    merged=$(ev "$W/merged")
    echo "# loss: base $base, adapters $aside, folded $folded, exported $merged" >&3
    awk -v a="$aside" -v b="$merged" -v c="$folded" -v z="$base" 'function d(x, y) { return x > y ? x - y : y - x }
        BEGIN { exit !(d(a, b) < 1e-5 * a && d(a, c) < 1e-5 * a && a < z - 0.5) }'
}

@test "--lora-dora needs --tuner lora" {
    run "$T" --model $M -o "$W/r" --tuner full --lora-dora --max-steps 1 $D
    [ "$status" -eq 2 ]
    [[ "$output" == *"--lora-dora needs --tuner lora"* ]]
}

@test "--lora-dora on 2 ranks (mpirun): the loss curve of 1 rank x 2 micro-batches, also with --zero 1" {
    command -v mpirun >/dev/null || skip "mpirun not installed (openmpi-bin)"
    . "$BATS_TEST_DIRNAME/mpi_env.bash" # mpirun as root, no network, ASan
    args=(--model $M --lora-dora --lora-dropout 0.1 --max-steps 6 --logging-steps 1
        --save-steps 6 --eval-steps 100 --learning-rate 1e-3 --per-device-train-batch-size 2 -j 1)
    run "$T" "${args[@]}" --gradient-accumulation-steps 2 -o "$W/one" $D
    [ "$status" -eq 0 ]
    echo "$output" >"$W/one.out"
    for z in 0 1; do
        run timeout 120 mpirun -np 2 --oversubscribe --bind-to none --mca btl self,vader \
            "$T" "${args[@]}" --zero $z -o "$W/two-$z" $D </dev/null
        [ "$status" -eq 0 ]
        echo "$output" | grep -v '^swift-train: rank' >"$W/two-$z.out"
        paste <(losses "$W/one.out") <(losses "$W/two-$z.out") | awk '
            { d = $1 - $2; if (d < 0) d = -d; r = d / $1; if (r > m) m = r; if ($2 == "") bad = 1; c++ }
            END { printf "# zero '$z': steps %d, max relative difference %.3g\n", c, m > "/dev/stderr";
                  exit (bad || c != 6 || m > 1e-6) }'
    done
}
