#!/usr/bin/env bats
# swift-train --optim adamw_8bit (bitsandbytes' 8-bit AdamW): trains, resumes exactly, holds
# about a quarter of AdamW's optimizer state; the optimizer.safetensors names; usage errors.
# The step itself is checked against bitsandbytes in tests/unit/test_optim8.c.

bats_require_minimum_version 1.5.0

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

# A Llama shape whose weights reach bitsandbytes' min_8bit_size (4096 elements): hidden 128,
# MLP 256, vocabulary 128 (the fixture shards' characters); norms stay 32-bit.
model() {
    mkdir -p "$W/cfg"
    sed -e 's/"hidden_size": 32/"hidden_size": 128/' \
        -e 's/"intermediate_size": 64/"intermediate_size": 256/' \
        -e 's/"head_dim": 8/"head_dim": 32/' tests/fixtures/model/llama/config.json >"$W/cfg/config.json"
    "$T" --init-model --model "$W/cfg" -o "$W/m" --seed 3 >/dev/null
}

@test "--optim adamw_8bit: loss falls, state about a quarter of AdamW's, resume is exact" {
    model
    args=(--model "$W/m" --tuner full --max-steps 8 --logging-steps 1 --save-steps 4
        --eval-steps 100 --per-device-train-batch-size 4 --learning-rate 3e-3 -j 2)
    run --separate-stderr "$T" "${args[@]}" --optim adamw_8bit -o "$W/a" $D
    [ "$status" -eq 0 ]
    echo "$output" >"$W/a.out"
    # swift-train: optimizer state X MiB in 8 bits, AdamW's would be Y MiB (N of M parameters ...)
    line=$(grep '^swift-train: optimizer state .* MiB in 8 bits' <<<"$stderr")
    x=$(sed 's/.*state \([0-9.]*\) MiB in 8 bits.*/\1/' <<<"$line")
    y=$(sed "s/.*AdamW's would be \([0-9.]*\) MiB.*/\1/" <<<"$line")
    echo "# 8-bit $x MiB, AdamW $y MiB; loss $(losses "$W/a.out" | head -1) -> $(losses "$W/a.out" | tail -1)" >&3
    awk -v x="$x" -v y="$y" 'BEGIN { exit !(x > 0.24 * y && x < 0.27 * y) }'
    first=$(losses "$W/a.out" | head -1)
    last=$(losses "$W/a.out" | tail -1)
    awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.3) }'
    # the quantized states and their absmax under bitsandbytes' state_dict names
    st="$W/a/checkpoint-4/optimizer.safetensors"
    grep -aq '"state1.model.layers.0.mlp.up_proj.weight":{"dtype":"U8","shape":\[256,128\]' "$st"
    grep -aq '"absmax2.model.layers.0.mlp.up_proj.weight":{"dtype":"F32","shape":\[128\]' "$st"
    grep -aq '"exp_avg.model.norm.weight":{"dtype":"F32"' "$st"
    grep -aq '"optimizer":"adamw_8bit"' "$st"
    run "$T" "${args[@]}" --optim adamw_bnb_8bit -o "$W/b" --resume "$W/a/checkpoint-4" $D
    [ "$status" -eq 0 ]
    diff <(losses "$W/a.out" | sed -n 5,8p) <(echo "$output" | grep '"loss"' | sed 's/.*"loss":\([^,]*\),.*/\1/')
    cmp "$W/a/checkpoint-8/optimizer.safetensors" "$W/b/checkpoint-8/optimizer.safetensors"
    cmp "$W/a/checkpoint-8/model.safetensors" "$W/b/checkpoint-8/model.safetensors"
}

@test "--optim: a checkpoint resumes only with its own optimizer; adamw_torch is the default" {
    model
    args=(--model "$W/m" --tuner full --max-steps 4 --save-steps 2 --eval-steps 100
        --per-device-train-batch-size 2 -j 1)
    run "$T" "${args[@]}" --optim adamw_torch -o "$W/a" $D
    [ "$status" -eq 0 ]
    grep -aq '"optimizer":"adamw"' "$W/a/checkpoint-2/optimizer.safetensors"
    run --separate-stderr "$T" "${args[@]}" --optim adamw_8bit -o "$W/b" --resume "$W/a/checkpoint-2" $D
    [ "$status" -eq 1 ]
    [[ "$stderr" == *"optimizer.safetensors: the checkpoint's optimizer state is adamw_torch's: resume with --optim adamw_torch"* ]]
    run "$T" "${args[@]}" --optim adamw_8bit -o "$W/c" $D
    [ "$status" -eq 0 ]
    run --separate-stderr "$T" "${args[@]}" -o "$W/d" --resume "$W/c/checkpoint-2" $D
    [ "$status" -eq 1 ]
    [[ "$stderr" == *"resume with --optim adamw_8bit"* ]]
}

@test "--optim: unknown names and --zero 1 are usage errors" {
    run --separate-stderr "$T" --model tests/fixtures/model/llama -o "$W/a" --optim sgd $D
    [ "$status" -eq 2 ]
    [[ "$stderr" == "swift-train: --optim: 'sgd' is not adamw_torch, adamw_8bit or adamw_bnb_8bit"* ]]
    run --separate-stderr "$T" --model tests/fixtures/model/llama -o "$W/a" --optim adamw_8bit --zero 1 $D
    [ "$status" -eq 2 ]
    [[ "$stderr" == "swift-train: --optim adamw_8bit does not shard its state: no --zero 1"* ]]
}

@test "--optim adamw_8bit with GaLore (--galore-rank, --use-galore) is a usage error" {
    local msg="swift-train: --optim adamw_8bit and GaLore (--galore-rank/--use-galore) are not combined"
    run --separate-stderr "$T" --model tests/fixtures/model/llama -o "$W/a" --tuner full \
        --optim adamw_8bit --galore-rank 4 $D
    [ "$status" -eq 2 ]
    [[ "$stderr" == "$msg"* ]]
    run --separate-stderr "$T" --model tests/fixtures/model/llama -o "$W/a" --tuner full \
        --optim adamw_bnb_8bit --use-galore $D
    [ "$status" -eq 2 ]
    [[ "$stderr" == "$msg"* ]]
    [ ! -e "$W/a" ]
}

@test "--optim adamw_8bit under mpirun -np 2 follows 1 rank x 2 micro-batches" {
    command -v mpirun >/dev/null || skip "mpirun not installed (openmpi-bin)"
    export DIST_TEST_ID=$W
    . "$BATS_TEST_DIRNAME/mpi_env.bash"
    model
    args=(--model "$W/m" --tuner full --max-steps 6 --logging-steps 1 --save-steps 6
        --eval-steps 100 --per-device-train-batch-size 2 --learning-rate 3e-3 -j 1
        --optim adamw_8bit)
    run "$T" "${args[@]}" --gradient-accumulation-steps 2 -o "$W/one" $D
    [ "$status" -eq 0 ]
    echo "$output" >"$W/one.out"
    run timeout 120 mpirun -np 2 --oversubscribe --bind-to none --mca btl self,vader \
        "$T" "${args[@]}" -o "$W/two" $D </dev/null
    [ "$status" -eq 0 ]
    echo "$output" >"$W/two.out"
    # every rank holds the whole 8-bit state (no ZeRO): rank 0 reports it once
    [ "$(grep -c 'optimizer state .* MiB in 8 bits' "$W/two.out")" -eq 1 ]
    # the gradients differ by the order of float sums only; the 8-bit states may round a code
    # differently now and then, so the curves agree to 1e-4, not bit for bit
    paste <(losses "$W/one.out") <(losses "$W/two.out") | awk '
        { d = $1 - $2; if (d < 0) d = -d; r = d / $1; if (r > m) m = r; c++ }
        END { printf "# 1 vs 2 ranks: %d losses, max relative difference %.3g\n", c, m > "/dev/fd/3";
              exit !(c == 6 && m < 1e-4) }'
}
