#!/usr/bin/env bats
# swift-train --galore-rank (lib/train/galore.c, docs/train.md "GaLore"): full tuning with the
# attention/MLP weights' AdamW moments in a low-rank gradient projection. The step itself is
# checked against galore-torch in tests/unit/test_galore.c; here: it trains, resumes exactly,
# keeps less optimizer state than AdamW, and refuses what it does not support.

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

ARGS=(--model $M --tuner full --galore-rank 4 --galore-update-proj-gap 3 --galore-scale 1
    --logging-steps 1 --eval-steps 100 --per-device-train-batch-size 2 --learning-rate 1e-2
    -j 1 --device cpu)

@test "--galore-rank: full tuning trains, the state is smaller than AdamW's, checkpoint layout" {
    run "$T" "${ARGS[@]}" --max-steps 12 --save-steps 6 -o "$W/a" $D
    [ "$status" -eq 0 ]
    echo "$output" >"$W/a.out"
    line=$(grep "^swift-train: GaLore rank 4 on 14 weights (projection every 3 steps, scale 1): optimizer state " "$W/a.out")
    ours=$(echo "$line" | sed 's/.*optimizer state \([0-9.]*\) MiB.*/\1/')
    adamw=$(echo "$line" | sed 's/.*AdamW on every parameter: \([0-9.]*\) MiB.*/\1/')
    awk -v a="$ours" -v b="$adamw" 'BEGIN { exit !(a > 0 && a < 0.5 * b) }'
    # the loss falls
    first=$(losses "$W/a.out" | head -1)
    last=$(losses "$W/a.out" | tail -4 | awk '{ s += $1 } END { print s / NR }')
    awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.8) }'
    # optimizer.safetensors: GaLore's tensors for its weights, AdamW's for the others
    f="$W/a/checkpoint-6/optimizer.safetensors"
    grep -q '"optimizer":"galore_adamw"' "$f"
    grep -q '"galore_rank":"4"' "$f"
    grep -q '"galore_proj.model.layers.0.self_attn.q_proj.weight":{"dtype":"F32","shape":\[4,32\]' "$f"
    grep -q '"galore_exp_avg.model.layers.0.self_attn.q_proj.weight":{"dtype":"F32","shape":\[64,4\]' "$f"
    grep -q '"galore_exp_avg_sq.model.layers.0.mlp.down_proj.weight":{"dtype":"F32","shape":\[4,64\]' "$f"
    grep -q '"galore_proj.model.layers.0.mlp.down_proj.weight":{"dtype":"F32","shape":\[32,4\]' "$f"
    grep -q '"exp_avg.model.embed_tokens.weight"' "$f"
    grep -q '"exp_avg.model.norm.weight"' "$f"
    ! grep -q '"exp_avg.model.layers.0.self_attn.q_proj.weight"' "$f"
    [ -f "$W/a/checkpoint-12/model.safetensors" ]
}

@test "--galore-rank: resume is exact, inside a projection period and across a refresh" {
    # gap 3: refreshes at steps 1, 4, 7; checkpoint-4 resumes with the saved projection for
    # steps 5 and 6, then refreshes at 7
    run "$T" "${ARGS[@]}" --max-steps 8 --save-steps 4 -o "$W/a" $D
    [ "$status" -eq 0 ]
    echo "$output" >"$W/a.out"
    run "$T" "${ARGS[@]}" --max-steps 8 --save-steps 4 -o "$W/b" --resume "$W/a/checkpoint-4" $D
    [ "$status" -eq 0 ]
    echo "$output" >"$W/b.out"
    [ "$(losses "$W/b.out" | wc -l)" -eq 4 ]
    diff <(losses "$W/a.out" | sed -n 5,8p) <(losses "$W/b.out")
    cmp "$W/a/checkpoint-8/model.safetensors" "$W/b/checkpoint-8/model.safetensors"
    cmp "$W/a/checkpoint-8/optimizer.safetensors" "$W/b/checkpoint-8/optimizer.safetensors"
}

@test "--galore-rank on a bf16 model: fp32 master copies of GaLore's weights too, exact resume" {
    mkdir -p "$W/m"
    cp $M/model.safetensors "$W/m/"
    sed 's/"dtype": "float32"/"dtype": "bfloat16"/' $M/config.json >"$W/m/config.json"
    args=("${ARGS[@]}" --model "$W/m" --max-steps 6 --save-steps 3)
    run "$T" "${args[@]}" -o "$W/a" $D
    [ "$status" -eq 0 ]
    echo "$output" >"$W/a.out"
    grep -q '"master.model.layers.0.self_attn.q_proj.weight"' "$W/a/checkpoint-3/optimizer.safetensors"
    run "$T" "${args[@]}" -o "$W/b" --resume "$W/a/checkpoint-3" $D
    [ "$status" -eq 0 ]
    echo "$output" >"$W/b.out"
    diff <(losses "$W/a.out" | sed -n 4,6p) <(losses "$W/b.out")
}

@test "--galore-rank differs from plain AdamW; --use-galore takes rank 128 (clamped per weight)" {
    run "$T" "${ARGS[@]}" --max-steps 3 --save-steps 100 -o "$W/g" $D
    [ "$status" -eq 0 ]
    echo "$output" >"$W/g.out"
    run "$T" --model $M --tuner full --logging-steps 1 --eval-steps 100 \
        --per-device-train-batch-size 2 --learning-rate 1e-2 -j 1 --device cpu \
        --max-steps 3 --save-steps 100 -o "$W/p" $D
    [ "$status" -eq 0 ]
    echo "$output" >"$W/p.out"
    ! grep -q "GaLore" "$W/p.out"
    ! diff <(losses "$W/g.out") <(losses "$W/p.out") >/dev/null
    run "$T" --model $M --tuner full --use_galore --max-steps 2 --save-steps 100 -j 1 \
        --device cpu -o "$W/u" $D
    [ "$status" -eq 0 ]
    [[ $output == *"swift-train: GaLore rank 128 on 14 weights (projection every 50 steps, scale 1)"* ]]
    run "$T" --model $M --tuner full --galore-rank 2 --galore-target-modules q_proj,v_proj \
        --max-steps 1 --save-steps 100 -j 1 --device cpu -o "$W/t" $D
    [ "$status" -eq 0 ]
    [[ $output == *"swift-train: GaLore rank 2 on 4 weights"* ]]
}

@test "--galore-rank: refused with LoRA, with --zero 1, and targets that select nothing" {
    run "$T" --model $M --galore-rank 4 -o "$W/a" $D
    [ "$status" -eq 2 ]
    [[ $output == "swift-train: --galore-rank: GaLore is for full tuning (--tuner full), not LoRA"* ]]
    run "$T" --model $M --tuner full --use-galore --zero 1 -o "$W/a" $D
    [ "$status" -eq 2 ]
    [[ $output == "swift-train: --galore-rank: not with --zero 1"* ]]
    run "$T" --model $M --tuner full --galore-rank 4 --galore-update-proj-gap 0 -o "$W/a" $D
    [ "$status" -eq 2 ]
    run "$T" --model $M --tuner full --galore-rank 4 --galore-target-modules lm_head,norm \
        --device cpu -j 1 -o "$W/a" $D
    [ "$status" -eq 1 ]
    [[ $output == *"swift-train: --galore-target-modules 'lm_head,norm' selects no attention or MLP weight"* ]]
}

@test "--galore-rank under mpirun: 2 ranks x 1 micro-batch follow 1 rank x 2 (relative 1e-6)" {
    command -v mpirun >/dev/null || skip "mpirun not installed (openmpi-bin)"
    . "$BATS_TEST_DIRNAME/mpi_env.bash"
    # every rank refreshes its projections from the same summed gradient (the ranks' sums
    # differ from one process's only in float order: the SVDs agree, signs included)
    run "$T" "${ARGS[@]}" --max-steps 8 --save-steps 100 --gradient-accumulation-steps 2 \
        -o "$W/one" $D
    [ "$status" -eq 0 ]
    echo "$output" >"$W/one.out"
    run timeout 120 mpirun -np 2 --oversubscribe --bind-to none --mca btl self,vader \
        "$T" "${ARGS[@]}" --max-steps 8 --save-steps 100 -o "$W/two" $D </dev/null
    [ "$status" -eq 0 ]
    echo "$output" >"$W/two.out"
    paste <(losses "$W/one.out") <(losses "$W/two.out") | awk '
        { d = $1 - $2; if (d < 0) d = -d; r = d / $1; if (r > m) m = r; if ($2 == "") bad = 1; c++ }
        END { printf "steps %d, max relative difference %.3g\n", c, m; exit (bad || c != 8 || m > 1e-6) }'
}
