#!/usr/bin/env bats
# swift-train --rlhf rm (lib/train/rm.c, docs/preference.md): reward models on the pair shards.
# Against TRL: one batch of the four pairs of tests/fixtures/pairs-ref at the reward model of
# tests/fixtures/rm/full (saved by our swift-train) gives TRL RewardTrainer's loss, accuracy,
# margin, mean_reward and the norm of autograd's gradient (tests/fixtures/rm/expected.json, from
# tests/ref/gen_rm_fixtures.py) to 1e-5 relative. The saved layouts are transformers' and peft's
# (the same script loads them; tests/unit/test_score.c checks our scores against theirs).

M=tests/fixtures/model/llama
P=tests/fixtures/pairs
E=tests/fixtures/rm/expected.json
T="$SWIFT_BIN/swift-train"

setup() {
    W=$(mktemp -d)
}
teardown() {
    rm -rf "$W"
}

# close KEY [CASE]: the first record's KEY within 1e-5 relative of expected.json's CASE.KEY
# (CASE trl_full unless given)
close() {
    local ours ref
    ours=$(head -1 "$W/r/logging.jsonl" | jq ".\"$1\"")
    ref=$(jq ".${2:-trl_full}.\"$1\"" $E)
    echo "$1: ours $ours TRL $ref"
    awk -v a="$ours" -v b="$ref" 'BEGIN { d = a - b; if (d < 0) d = -d; m = b < 0 ? -b : b;
        if (m < 0.01) m = 0.01; exit !(a != "null" && d <= 1e-5 * m) }'
}

@test "rm full: one batch's loss, metrics and gradient norm equal TRL's RewardTrainer" {
    run "$T" --model tests/fixtures/rm/full --tuner full -o "$W/r" --rlhf rm --max-steps 1 \
        --logging-steps 1 --per-device-train-batch-size 4 -j 1 tests/fixtures/pairs-ref
    echo "$output"
    [ "$status" -eq 0 ]
    for k in loss accuracy margin mean_reward grad_norm; do
        close $k
    done
    ! grep -q '"token_acc"\|"rewards/' "$W/r/logging.jsonl"
}

@test "rm full --center-rewards-coefficient 0.01: TRL's loss and gradient norm with its centering term" {
    run "$T" --model tests/fixtures/rm/full --tuner full -o "$W/r" --rlhf rm --max-steps 1 \
        --logging-steps 1 --per-device-train-batch-size 4 -j 1 \
        --center-rewards-coefficient "$(jq .trl_full_center.center_rewards_coefficient $E)" \
        tests/fixtures/pairs-ref
    echo "$output"
    [ "$status" -eq 0 ]
    for k in loss accuracy margin mean_reward grad_norm; do
        close $k trl_full_center
    done
    run "$T" --model $M -o "$W/d" --rlhf dpo --center-rewards-coefficient 0.01 $P
    [ "$status" -eq 2 ]
    [[ $output == *"--center-rewards-coefficient is for --rlhf rm"* ]]
}

@test "rm lora: one batch's loss, metrics and gradient norm at the lora/ adapter equal TRL's RewardTrainer" {
    # the adapter (with its score head) goes in through --resume: a one-step run's checkpoint-1
    # gets tests/fixtures/rm/lora's weights; step 2 logs the loss and gradient norm at them
    # (over the 4 pairs of pairs-ref, one batch; their order does not change the mean)
    args=(--model $M -o "$W/r" --rlhf rm --lora-dropout 0 --logging-steps 1 --save-steps 1
        --per-device-train-batch-size 4 -j 1)
    run "$T" "${args[@]}" --max-steps 1 tests/fixtures/pairs-ref
    [ "$status" -eq 0 ]
    cmp -s tests/fixtures/rm/lora/adapter_config.json "$W/r/checkpoint-1/adapter_config.json" ||
        diff <(jq 'del(.lora_dropout, .inference_mode)' tests/fixtures/rm/lora/adapter_config.json) \
            <(jq 'del(.lora_dropout, .inference_mode)' "$W/r/checkpoint-1/adapter_config.json")
    cp tests/fixtures/rm/lora/adapter_model.safetensors "$W/r/checkpoint-1/"
    run "$T" "${args[@]}" --max-steps 2 --resume latest tests/fixtures/pairs-ref
    echo "$output"
    [ "$status" -eq 0 ]
    grep '"loss"' "$W/r/logging.jsonl" | sed -n 2p >"$W/r/rec"
    grep -q '"global_step/max_steps":"2/2"' "$W/r/rec"
    mv "$W/r/rec" "$W/r/logging.jsonl"
    for k in loss accuracy margin mean_reward grad_norm; do
        close $k trl_lora
    done
}

@test "rm full: saved as transformers' LlamaForSequenceClassification (score.weight, no lm_head)" {
    run "$T" --model $M --tuner full -o "$W/r" --rlhf rm --max-steps 2 --logging-steps 1 \
        --per-device-train-batch-size 2 -j 1 $P
    echo "$output"
    [ "$status" -eq 0 ]
    C="$W/r/checkpoint-2"
    [ "$(jq -c .architectures "$C/config.json")" = '["LlamaForSequenceClassification"]' ]
    [ "$(jq .num_labels "$C/config.json")" = 1 ]
    [ "$(jq -c .id2label "$C/config.json")" = '{"0":"LABEL_0"}' ]
    [ "$(jq .pad_token_id "$C/config.json")" = 2 ] # the fixture's eos_token_id: no pad_token_id
    grep -a -q '"score.weight":{"dtype":"F32","shape":\[1,32\]' "$C/model.safetensors"
    ! grep -a -q '"lm_head.weight"' "$C/model.safetensors"
    for k in accuracy margin mean_reward eval_accuracy eval_margin eval_mean_reward eval_pairs; do
        grep -q "\"$k\":" "$W/r/logging.jsonl" || { echo "missing $k"; false; }
    done
    # the saved reward model trains on (its score head read back, not drawn anew)
    run "$T" --model "$C" --tuner full -o "$W/r2" --rlhf rm --max-steps 1 -j 1 $P
    [ "$status" -eq 0 ]
}

@test "rm lora: the score head is trained beside the adapters, saved as peft's modules_to_save" {
    run "$T" --model $M -o "$W/r" --rlhf rm --max-steps 4 --logging-steps 1 --save-steps 2 \
        --per-device-train-batch-size 2 --learning-rate 1e-2 -j 1 $P
    echo "$output"
    [ "$status" -eq 0 ]
    C="$W/r/checkpoint-4"
    [ "$(jq -r .task_type "$C/adapter_config.json")" = SEQ_CLS ]
    [ "$(jq -c .modules_to_save "$C/adapter_config.json")" = '["score"]' ]
    grep -a -q '"base_model.model.score.weight":{"dtype":"F32","shape":\[1,32\]' \
        "$C/adapter_model.safetensors"
    # --resume from checkpoint-2 reproduces steps 3 and 4 (the head is in the checkpoint)
    grep '"loss"' "$W/r/logging.jsonl" | sed -n 3,4p | jq -c '[.loss, .grad_norm]' >"$W/a"
    rm -rf "$W/r/checkpoint-4"
    run "$T" --model $M -o "$W/r" --rlhf rm --max-steps 4 --logging-steps 1 --save-steps 2 \
        --per-device-train-batch-size 2 --learning-rate 1e-2 -j 1 --resume "$W/r/checkpoint-2" $P
    echo "$output"
    [ "$status" -eq 0 ]
    grep '"loss"' "$W/r/logging.jsonl" | tail -2 | jq -c '[.loss, .grad_norm]' >"$W/b"
    cat "$W/a" "$W/b"
    cmp "$W/a" "$W/b"
}

@test "rm: four epochs over the 32 training pairs lower the training loss" {
    # (the held-out pairs do not improve: a 2-layer random model on byte tokens does not generalise)
    run "$T" --model $M --tuner full -o "$W/r" --rlhf rm --max-steps 32 --logging-steps 1 \
        --per-device-train-batch-size 4 --learning-rate 2e-3 -j 1 $P
    [ "$status" -eq 0 ]
    jq -r 'select(.loss) | .loss' "$W/r/logging.jsonl" >"$W/l"
    # the mean of the first epoch's 8 steps against the last epoch's
    awk 'NR <= 8 { a += $1 } NR > 24 { b += $1 } END { print a / 8, b / 8; exit !(NR == 32 && b < 0.8 * a) }' "$W/l"
}

@test "rm: an SFT shard and --loss-type are refused; an adapter with a score head is not merged" {
    run "$T" --model $M -o "$W/r" --rlhf rm --max-steps 1 tests/fixtures/shards
    [ "$status" -eq 1 ]
    [[ $output == *"--rlhf rm"* ]]
    run "$SWIFT_BIN/swift-export" --to hf --merge-lora tests/fixtures/rm/lora -o "$W/m" $M
    echo "$output"
    [ "$status" -eq 1 ]
    [[ $output == *"tests/fixtures/rm/lora/adapter_model.safetensors"*"score head"* ]]
    run "$T" --model $M -o "$W/r2" --rlhf rm --loss-type hinge --max-steps 1 $P
    [ "$status" -eq 1 ]
    [[ $output == *"--rlhf rm does not take --loss-type hinge"* ]]
}

@test "rm on the strict backend and with gradient checkpointing: the same records bit for bit" {
    args=(--model $M --rlhf rm --max-steps 3 --logging-steps 1 --eval-steps 3
        --per-device-train-batch-size 2 --learning-rate 1e-3 -j 1)
    run "$T" "${args[@]}" -o "$W/c" $P
    [ "$status" -eq 0 ]
    run env SWIFT_CPU_STRICT_HOST=1 "$T" "${args[@]}" -o "$W/s" $P
    [ "$status" -eq 0 ]
    run "$T" "${args[@]}" --gradient-checkpointing -o "$W/g" $P
    [ "$status" -eq 0 ]
    for k in loss grad_norm margin mean_reward eval_loss; do
        diff <(jq ".\"$k\"" "$W/c/logging.jsonl") <(jq ".\"$k\"" "$W/s/logging.jsonl")
        diff <(jq ".\"$k\"" "$W/c/logging.jsonl") <(jq ".\"$k\"" "$W/g/logging.jsonl")
    done
}

@test "rm under mpirun: 2 ranks (ZeRO-0 and ZeRO-1) give 1 rank's losses and metrics" {
    command -v mpirun >/dev/null || skip "mpirun not installed (openmpi-bin)"
    . "$BATS_TEST_DIRNAME/mpi_env.bash" # mpirun as root, no network, ASan
    args=(--model $M --tuner full --rlhf rm --max-steps 4 --logging-steps 1 --eval-steps 4
        --learning-rate 1e-3 --per-device-train-batch-size 1 -j 1)
    run "$T" "${args[@]}" --gradient-accumulation-steps 2 -o "$W/one" $P
    [ "$status" -eq 0 ]
    # scores are float32 of size ~1: ~1e-7 absolute rounding (a margin near 0 is compared so)
    for z in 0 1; do
        run timeout 120 mpirun -np 2 --oversubscribe --bind-to none --mca btl self,vader \
            "$T" "${args[@]}" --zero $z -o "$W/two$z" $P </dev/null
        [ "$status" -eq 0 ]
        for k in loss margin mean_reward accuracy eval_loss eval_margin; do
            paste <(jq "select(.\"$k\") | .\"$k\"" "$W/one/logging.jsonl") \
                <(jq "select(.\"$k\") | .\"$k\"" "$W/two$z/logging.jsonl") | awk -v k="$k" '
                { d = $1 - $2; if (d < 0) d = -d; a = $1 < 0 ? -$1 : $1; if (d > 1e-6 * (a + 1)) bad = 1; c++ }
                END { if (bad || c < 4 && k !~ /eval/ || c == 0) { print k " differs"; exit 1 } }'
        done
    done
}
