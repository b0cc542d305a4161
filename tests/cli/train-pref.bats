#!/usr/bin/env bats
# swift-train --rlhf (lib/train/dpo.c, docs/preference.md) on the tiny Llama fixture and the pair
# shards of tests/ref/gen_pair_fixtures.py (tests/fixtures/pairs): the first DPO step is exactly
# ln 2 with rewards 0 (fresh adapters: the policy is the reference), a few steps lower the loss
# and raise the margins, every objective logs TRL's keys, --resume is exact, the reference has
# its own trace span, the shard kinds are checked, and 2 MPI ranks give 1 rank's curve.

M=tests/fixtures/model/llama
P=tests/fixtures/pairs
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
absent() { # PATTERN FILE: no line of FILE matches
    ! grep -q "$1" "$2"
}
key() { # KEY FILE: the values of "KEY" in the records of FILE
    grep -o "\"$1\":[^,}]*" "$2" | sed 's/.*://'
}

@test "dpo lora: the first step's loss is exactly ln 2, rewards 0; TRL's keys are logged" {
    run "$T" --model $M -o "$W/r" --rlhf dpo --max-steps 2 --logging-steps 1 \
        --per-device-train-batch-size 2 -j 1 $P
    [ "$status" -eq 0 ]
    L="$W/r/logging.jsonl"
    head -1 "$L" | grep -q '"loss":0.69314718055994529,' # ln 2 to the last bit
    for k in rewards/chosen rewards/rejected rewards/accuracies rewards/margins; do
        head -1 "$L" | grep -q "\"$k\":0.0," || { echo "$k not 0"; false; }
    done
    for k in logps/chosen logps/rejected logits/chosen logits/rejected; do
        grep -q "\"$k\":" "$L" || { echo "missing $k"; false; }
    done
    absent '"token_acc"\|"nll_loss"' "$L"
    grep -q '"eval_rewards/margins":' "$L"
    grep -q '"eval_pairs":16' "$L"
}

@test "dpo full fine-tuning: a frozen copy of --model is the reference, first loss ln 2" {
    run "$T" --model $M --tuner full -o "$W/r" --rlhf_type dpo --max-steps 1 \
        --per-device-train-batch-size 2 -j 1 $P
    [ "$status" -eq 0 ]
    head -1 "$W/r/logging.jsonl" | grep -q '"loss":0.69314718055994529,'
}

@test "a few steps of DPO LoRA lower the loss and raise rewards/margins on held-out pairs" {
    run "$T" --model $M -o "$W/r" --rlhf dpo --max-steps 16 --eval-steps 8 --logging-steps 1 \
        --per-device-train-batch-size 4 --learning-rate 5e-3 -j 1 $P
    [ "$status" -eq 0 ]
    L="$W/r/logging.jsonl"
    key eval_loss "$L" >"$W/el"
    key eval_rewards/margins "$L" >"$W/em"
    cat "$W/el" "$W/em"
    [ "$(wc -l <"$W/el")" -eq 2 ]
    # ln 2 before training; lower after 8 steps and lower still after 16
    awk 'NR == 1 { a = $1 } NR == 2 { b = $1 } END { exit !(a < 0.6931 && b < a) }' "$W/el"
    awk 'NR == 1 { a = $1 } NR == 2 { b = $1 } END { exit !(a > 0 && b > a) }' "$W/em"
}

@test "simpo, orpo, cpo and dpo's loss types run and log their keys" {
    for o in simpo orpo cpo; do
        run "$T" --model $M -o "$W/$o" --rlhf $o --max-steps 2 --logging-steps 1 \
            --per-device-train-batch-size 2 -j 1 $P
        [ "$status" -eq 0 ]
        for k in loss rewards/chosen rewards/rejected rewards/accuracies rewards/margins \
            logps/chosen logps/rejected logits/chosen logits/rejected nll_loss eval_nll_loss; do
            grep -q "\"$k\":" "$W/$o/logging.jsonl" || { echo "$o: missing $k"; false; }
        done
    done
    grep -q '"log_odds_ratio":' "$W/orpo/logging.jsonl"
    grep -q '"log_odds_chosen":' "$W/orpo/logging.jsonl"
    absent '"log_odds_ratio":' "$W/simpo/logging.jsonl"
    for lt in hinge ipo robust; do
        run "$T" --model $M -o "$W/d$lt" --rlhf dpo --loss-type $lt --label-smoothing 0.1 \
            --rpo-alpha 0.5 --max-steps 1 --per-device-train-batch-size 2 -j 1 $P
        [ "$status" -eq 0 ]
        grep -q '"nll_loss":' "$W/d$lt/logging.jsonl"
    done
    # hinge at the reference: relu(1 - 0) = 1, plus rpo-alpha x the NLL
    run "$T" --model $M -o "$W/h" --rlhf dpo --loss-type hinge --max-steps 1 \
        --per-device-train-batch-size 2 -j 1 $P
    head -1 "$W/h/logging.jsonl" | grep -q '"loss":1.0,'
}

@test "dpo: --resume from a checkpoint gives bit-identical losses (LoRA and full)" {
    for tuner in lora full; do
        args=(--model $M --tuner $tuner --rlhf dpo --max-steps 6 --logging-steps 1 --save-steps 3
            --eval-steps 100 --per-device-train-batch-size 2 --learning-rate 1e-3 -j 1)
        run "$T" "${args[@]}" -o "$W/a$tuner" $P
        [ "$status" -eq 0 ]
        echo "$output" >"$W/a.out"
        run "$T" "${args[@]}" -o "$W/b$tuner" --resume "$W/a$tuner/checkpoint-3" $P
        [ "$status" -eq 0 ]
        echo "$output" >"$W/b.out"
        diff <(losses "$W/a.out" | sed -n 4,6p) <(losses "$W/b.out")
        [ "$(losses "$W/b.out" | wc -l)" -eq 3 ]
    done
}

@test "dpo and orpo on the strict backend (no host access to backend memory), with gradient checkpointing: the same records bit for bit" {
    for o in dpo orpo; do
        args=(--model $M --rlhf $o --max-steps 3 --logging-steps 1 --eval-steps 3
            --per-device-train-batch-size 2 --learning-rate 1e-3 -j 1)
        run "$T" "${args[@]}" -o "$W/c$o" $P
        [ "$status" -eq 0 ]
        run env SWIFT_CPU_STRICT_HOST=1 "$T" "${args[@]}" -o "$W/s$o" $P
        [ "$status" -eq 0 ]
        run "$T" "${args[@]}" --gradient-checkpointing -o "$W/g$o" $P
        [ "$status" -eq 0 ]
        for k in loss grad_norm rewards/margins logits/chosen eval_loss; do
            diff <(key "$k" "$W/c$o/logging.jsonl") <(key "$k" "$W/s$o/logging.jsonl")
            diff <(key "$k" "$W/c$o/logging.jsonl") <(key "$k" "$W/g$o/logging.jsonl")
        done
    done
}

@test "trace: the reference's forward is a span of its own (dpo), none without one (simpo)" {
    run "$T" --model $M -o "$W/d" --rlhf dpo --max-steps 2 --per-device-train-batch-size 2 \
        -j 1 --trace "$W/d.jsonl" $P
    [ "$status" -eq 0 ]
    [ "$(grep -c '"name":"reference_forward"' "$W/d.jsonl")" -eq 2 ]
    [ "$(grep -c '"name":"forward"' "$W/d.jsonl")" -eq 2 ]
    run "$T" --model $M -o "$W/s" --rlhf simpo --max-steps 2 --per-device-train-batch-size 2 \
        -j 1 --trace "$W/s.jsonl" $P
    [ "$status" -eq 0 ]
    absent '"name":"reference_forward"' "$W/s.jsonl"
}

@test "shard kinds: SFT shards are refused for --rlhf, pair shards for SFT" {
    run "$T" --model $M -o "$W/a" --rlhf dpo --max-steps 1 tests/fixtures/shards
    [ "$status" -eq 1 ]
    [[ $output == *"tests/fixtures/shards/index.json: the shards hold SFT samples (kind \"sft\"), --rlhf dpo needs preference pairs (make them with swift-preprocess --kind pairs)"* ]]
    [ ! -e "$W/a/logging.jsonl" ]
    run "$T" --model $M -o "$W/b" --max-steps 1 $P
    [ "$status" -eq 1 ]
    [[ $output == *"tests/fixtures/pairs/index.json: the shards hold preference pairs (kind \"pairs\"), swift-train without --rlhf needs SFT samples"* ]]
    # a "pairs" shard whose samples are not pairs
    mkdir "$W/bad"
    cp tests/fixtures/shards/shard-00000.bin "$W/bad/"
    sed 's/"version": 1,/"version": 1, "kind": "pairs",/' tests/fixtures/shards/index.json \
        >"$W/bad/index.json"
    run "$T" --model $M -o "$W/c" --rlhf orpo --max-steps 1 "$W/bad"
    [ "$status" -eq 1 ]
    [[ $output == *"/bad/shard-00000.bin: offset 840: sample 0 is not a pair (kind \"pairs\" needs two documents)"* ]]
}

@test "--rlhf usage errors: kto refuses pair shards, loss types per objective, ranges" {
    run "$T" --model $M -o "$W/a" --rlhf kto --max-steps 1 $P
    [ "$status" -eq 1 ]
    [[ $output == *"$P/index.json"*"kto"* ]]
    run "$T" --model $M -o "$W/a" --rlhf kto --loss-type sigmoid --max-steps 1 $P
    [ "$status" -eq 1 ]
    [[ $output == *"--rlhf kto does not take --loss-type sigmoid"* ]]
    run "$T" --model $M -o "$W/a" --rlhf kto --desirable-weight -1 $P
    [ "$status" -eq 2 ]
    [[ $output == *"--desirable-weight must be >= 0"* ]]
    run "$T" --model $M -o "$W/a" --rlhf ppo $P
    [ "$status" -eq 2 ]
    [[ $output == *"--rlhf: 'ppo' is not dpo, orpo, simpo, cpo, kto, rm or grpo"* ]]
    run "$T" --model $M -o "$W/a" --rlhf dpo --loss-type simpo --max-steps 1 $P
    [ "$status" -eq 1 ]
    [[ $output == *"--rlhf dpo does not take --loss-type simpo"* ]]
    run "$T" --model $M -o "$W/a" --rlhf dpo --loss-type nca $P
    [ "$status" -eq 2 ]
    run "$T" --model $M -o "$W/a" --rlhf dpo --label-smoothing 0.5 $P
    [ "$status" -eq 2 ]
    [[ $output == *"--label-smoothing must be in [0, 0.5)"* ]]
    run "$T" --model $M -o "$W/a" --rlhf dpo --beta 0 $P
    [ "$status" -eq 2 ]
    [[ $output == *"--beta must be > 0"* ]]
}

@test "dpo under mpirun: 2 ranks (ZeRO-0 and ZeRO-1) give 1 rank's losses and metrics" {
    command -v mpirun >/dev/null || skip "mpirun not installed (openmpi-bin)"
    . "$BATS_TEST_DIRNAME/mpi_env.bash" # mpirun as root, no network, ASan
    args=(--model $M --rlhf dpo --max-steps 4 --logging-steps 1 --eval-steps 4 --learning-rate 5e-3
        --per-device-train-batch-size 1 -j 1)
    run "$T" "${args[@]}" --gradient-accumulation-steps 2 -o "$W/one" $P
    [ "$status" -eq 0 ]
    for z in 0 1; do
        run timeout 120 mpirun -np 2 --oversubscribe --bind-to none --mca btl self,vader \
            "$T" "${args[@]}" --zero $z -o "$W/two$z" $P </dev/null
        [ "$status" -eq 0 ]
        for k in loss rewards/margins rewards/accuracies logps/chosen eval_loss eval_rewards/chosen; do
            paste <(key "$k" "$W/one/logging.jsonl") <(key "$k" "$W/two$z/logging.jsonl") | awk -v k="$k" '
                { d = $1 - $2; if (d < 0) d = -d; a = $1 < 0 ? -$1 : $1; if (d > 1e-6 * (a + 1e-3)) bad = 1; c++ }
                END { if (bad || c < 4 && k !~ /eval/ || c == 0) { print k " differs"; exit 1 } }'
        done
    done
}

@test "an ms-swift style YAML drives swift-train --rlhf (rlhf_type, beta, loss_type, rpo_alpha)" {
    cat >"$W/dpo.yaml" <<YAML
model: $M
rlhf_type: dpo
beta: 0.2
loss_type: sigmoid
rpo_alpha: 0.1
max_steps: 1
per_device_train_batch_size: 2
output_dir: $W/run
YAML
    run "$T" "$W/dpo.yaml" -j 1 $P
    [ "$status" -eq 0 ]
    grep -q '"nll_loss":' "$W/run/logging.jsonl"
    grep -q '"rlhf_type": "dpo"\|"rlhf": "dpo"' "$W/run/args.json"
}

@test "--resume refuses a checkpoint of another objective" {
    run "$T" --model $M -o "$W/a" --rlhf dpo --max-steps 1 --per-device-train-batch-size 2 -j 1 $P
    [ "$status" -eq 0 ]
    grep -q '"objective": "dpo"' "$W/a/checkpoint-1/trainer_state.json"
    run "$T" --model $M -o "$W/b" --rlhf orpo --max-steps 2 --per-device-train-batch-size 2 \
        --resume "$W/a/checkpoint-1" -j 1 $P
    [ "$status" -eq 1 ]
    [[ $output == *"checkpoint-1/trainer_state.json: checkpoint was trained with --rlhf dpo, not --rlhf orpo"* ]]
    run "$T" --model $M -o "$W/c" --max-steps 2 --per-device-train-batch-size 2 \
        --resume "$W/a/checkpoint-1" -j 1 tests/fixtures/shards
    [ "$status" -eq 1 ]
    [[ $output == *"checkpoint was trained with --rlhf dpo, not SFT"* ]]
}
