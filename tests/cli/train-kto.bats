#!/usr/bin/env bats
# swift-train --rlhf kto (lib/train/kto.c, docs/preference.md "KTO") on the tiny Llama fixture and
# the KTO shards of tests/ref/gen_kto_shards.py (tests/fixtures/kto: 64 rows of the LLaMA-Factory
# demo kto_en_demo.json as byte ids, with their labels; val/: 16 more): the first step is exactly
# 0.5 (fresh adapters: policy = reference, every row's loss 1 - s(0) = 1/2), TRL's keys are logged,
# a few LoRA steps lower the loss and separate the rewards, full tuning has a frozen reference,
# the weights and loss types apply, the shard kinds are checked both ways, and 2 MPI ranks give
# 1 rank's records over the same micro-batches (each micro-batch's kl is its own).
# The values themselves against TRL: tests/cli/train-kto-ref.bats.

M=tests/fixtures/model/llama
K=tests/fixtures/kto
T="$SWIFT_BIN/swift-train"

setup() {
    W=$(mktemp -d)
}
teardown() {
    rm -rf "$W"
}

key() { # KEY FILE: the values of "KEY" in the train records of FILE
    grep '"loss"' "$2" | grep -o "\"$1\":[^,}]*" | sed 's/.*://'
}

@test "kto lora: the first step's loss is exactly 0.5, rewards and kl 0; TRL's keys are logged" {
    run "$T" --model $M -o "$W/r" --rlhf kto --max-steps 2 --logging-steps 1 --eval-steps 2 \
        --per-device-train-batch-size 8 -j 1 $K
    echo "$output"
    [ "$status" -eq 0 ]
    L="$W/r/logging.jsonl"
    head -1 "$L" | grep -q '"loss":0.5,'
    for k in kl rewards/chosen rewards/rejected rewards/margins; do
        head -1 "$L" | grep -q "\"$k\":0.0," || { echo "$k not 0"; false; }
    done
    for k in logps/chosen logps/rejected logits/chosen logits/rejected; do
        head -1 "$L" | grep -q "\"$k\":" || { echo "missing $k"; false; }
    done
    ! grep -q '"token_acc"\|"nll_loss"\|"rewards/accuracies"' "$L"
    grep -q '"eval_kl":' "$L"
    grep -q '"eval_rewards/margins":' "$L"
    grep -q '"eval_samples":16' "$L"
    grep -q '"rlhf_type": "kto"' "$W/r/args.json"
    grep -q '"loss_type": "kto"' "$W/r/args.json"
}

@test "a few KTO LoRA steps on kto_en_demo lower the loss and separate the rewards" {
    run "$T" --model $M -o "$W/r" --rlhf kto --max-steps 32 --logging-steps 1 \
        --per-device-train-batch-size 16 --learning-rate 1e-2 -j 1 $K
    [ "$status" -eq 0 ]
    L="$W/r/logging.jsonl"
    [ "$(key loss "$L" | wc -l)" -eq 32 ]
    # steps 17..32 (epochs 5..8): mean loss below 0.45 (from 0.5), mean margin above 0.3
    key loss "$L" | awk 'NR > 16 { s += $1; n++ } END { print "loss", s / n; exit !(s / n < 0.45) }'
    key rewards/margins "$L" | awk 'NR > 16 { s += $1; n++ } END { print "margins", s / n; exit !(s / n > 0.3) }'
    # the KL estimate becomes positive once the policy moves
    key kl "$L" | awk '$1 > 0 { p = 1 } END { exit !p }'
}

@test "kto full fine-tuning: a frozen copy of --model is the reference, first loss 0.5" {
    run "$T" --model $M --tuner full -o "$W/r" --rlhf_type kto --max-steps 2 --logging-steps 1 \
        --per-device-train-batch-size 4 --learning-rate 1e-3 -j 1 $K
    [ "$status" -eq 0 ]
    head -1 "$W/r/logging.jsonl" | grep -q '"loss":0.5,'
    [ "$(key kl "$W/r/logging.jsonl" | wc -l)" -eq 2 ]
}

@test "kto weights (ms-swift spellings too) and apo_zero_unpaired: the first loss is their mean / 2" {
    # 8 rows of the shard in the first step; (1.5 nd + 0.5 nu) / 2 / 8 with the step's labels
    run "$T" --model $M -o "$W/w" --rlhf kto --desirable_weight 1.5 --undesirable_weight 0.5 \
        --max-steps 1 --per-device-train-batch-size 8 -j 1 $K
    [ "$status" -eq 0 ]
    grep -q '"desirable_weight": 1.5' "$W/w/args.json"
    grep -q '"undesirable_weight": 0.5' "$W/w/args.json"
    loss=$(key loss "$W/w/logging.jsonl")
    # a mean of 0.75s and 0.25s over 8 rows: a multiple of 1/16 strictly between 0.25 and 0.75
    awk -v l="$loss" 'BEGIN { k = l * 16; exit !(k == int(k) && l > 0.25 && l < 0.75) }'
    run "$T" --model $M -o "$W/a" --rlhf kto --loss-type apo_zero_unpaired --max-steps 1 \
        --per-device-train-batch-size 8 -j 1 $K
    [ "$status" -eq 0 ]
    head -1 "$W/a/logging.jsonl" | grep -q '"loss":0.5,'
    grep -q '"loss_type": "apo_zero_unpaired"' "$W/a/args.json"
}

@test "kto shard kinds: --rlhf kto refuses pairs and SFT shards, dpo and SFT refuse kto shards" {
    run "$T" --model $M -o "$W/a" --rlhf kto --max-steps 1 tests/fixtures/pairs
    [ "$status" -eq 1 ]
    [[ $output == *"tests/fixtures/pairs/index.json"* ]]
    run "$T" --model $M -o "$W/b" --rlhf kto --max-steps 1 tests/fixtures/shards
    [ "$status" -eq 1 ]
    run "$T" --model $M -o "$W/c" --rlhf dpo --max-steps 1 $K
    [ "$status" -eq 1 ]
    [[ $output == *"$K/index.json"* ]]
    run "$T" --model $M -o "$W/d" --max-steps 1 $K
    [ "$status" -eq 1 ]
    [[ $output == *"$K/index.json"* ]]
}

@test "kto --resume from a checkpoint gives bit-identical losses and kl (LoRA and full)" {
    for tuner in lora full; do
        args=(--model $M --tuner $tuner --rlhf kto --max-steps 6 --logging-steps 1 --save-steps 3
            --eval-steps 100 --per-device-train-batch-size 4 --learning-rate 1e-3 -j 1)
        run "$T" "${args[@]}" -o "$W/a$tuner" $K
        [ "$status" -eq 0 ]
        run "$T" "${args[@]}" -o "$W/b$tuner" --resume "$W/a$tuner/checkpoint-3" $K
        [ "$status" -eq 0 ]
        for k in loss kl grad_norm; do
            diff <(key $k "$W/a$tuner/logging.jsonl" | sed -n 4,6p) <(key $k "$W/b$tuner/logging.jsonl")
        done
        [ "$(key loss "$W/b$tuner/logging.jsonl" | wc -l)" -eq 3 ]
    done
}

@test "kto on the strict backend (no host access to backend memory), with gradient checkpointing: the same records bit for bit" {
    args=(--model $M --rlhf kto --max-steps 3 --logging-steps 1 --eval-steps 3
        --per-device-train-batch-size 4 --learning-rate 5e-3 -j 1)
    run "$T" "${args[@]}" -o "$W/c" $K
    [ "$status" -eq 0 ]
    run env SWIFT_CPU_STRICT_HOST=1 "$T" "${args[@]}" -o "$W/s" $K
    [ "$status" -eq 0 ]
    run "$T" "${args[@]}" --gradient-checkpointing -o "$W/g" $K
    [ "$status" -eq 0 ]
    for k in loss grad_norm kl rewards/margins logits/chosen; do
        diff <(key "$k" "$W/c/logging.jsonl") <(key "$k" "$W/s/logging.jsonl")
        diff <(key "$k" "$W/c/logging.jsonl") <(key "$k" "$W/g/logging.jsonl")
    done
    grep -q '"eval_loss"' "$W/g/logging.jsonl"
}

@test "trace: kto's reference forward is a span of its own" {
    run "$T" --model $M -o "$W/d" --rlhf kto --max-steps 2 --per-device-train-batch-size 4 \
        -j 1 --trace "$W/d.jsonl" $K
    [ "$status" -eq 0 ]
    [ "$(grep -c '"name":"reference_forward"' "$W/d.jsonl")" -eq 2 ]
    [ "$(grep -c '"name":"forward"' "$W/d.jsonl")" -eq 2 ]
}

@test "kto under mpirun: 2 ranks (ZeRO-0 and ZeRO-1) give 1 rank's records over the same micro-batches" {
    # docs/preference.md: each micro-batch's kl is its own (clamped on its own), so 2 ranks of
    # batch 2 equal 1 rank of batch 2 with 2 accumulation steps (the same micro-batches), not
    # 1 rank of batch 4 (one micro-batch of 4 rows, another kl)
    command -v mpirun >/dev/null || skip "mpirun not installed (openmpi-bin)"
    . "$BATS_TEST_DIRNAME/mpi_env.bash" # mpirun as root, no network, ASan
    # lr 0.1: the policy moves enough that step 4's kl is > 0 (not clamped)
    args=(--model $M --rlhf kto --max-steps 4 --logging-steps 1 --eval-steps 4 --learning-rate 0.1
        --per-device-train-batch-size 2 -j 1)
    run "$T" "${args[@]}" --gradient-accumulation-steps 2 -o "$W/one" $K
    [ "$status" -eq 0 ]
    for z in 0 1; do
        run timeout 120 mpirun -np 2 --oversubscribe --bind-to none --mca btl self,vader \
            "$T" "${args[@]}" --zero $z -o "$W/two$z" $K </dev/null
        [ "$status" -eq 0 ]
        for k in loss grad_norm kl rewards/chosen rewards/rejected logps/chosen logps/rejected; do
            paste <(key "$k" "$W/one/logging.jsonl") <(key "$k" "$W/two$z/logging.jsonl") | awk -v k="$k" '
                { d = $1 - $2; if (d < 0) d = -d; a = $1 < 0 ? -$1 : $1; if (d > 1e-6 * (a + 1e-3)) bad = 1; c++ }
                END { if (bad || c < 4) { print k " differs"; exit 1 } }'
        done
        for k in eval_loss eval_kl; do # the val split over the ranks: the same sums
            a=$(grep -o "\"$k\":[^,}]*" "$W/one/logging.jsonl")
            [ -n "$a" ] && [ "$a" = "$(grep -o "\"$k\":[^,}]*" "$W/two$z/logging.jsonl")" ]
        done
    done
    kl4=$(key kl "$W/one/logging.jsonl" | sed -n 4p)
    awk -v k="$kl4" 'BEGIN { exit !(k > 0.1) }'
    # the kl is the micro-batch's: one micro-batch of 4 rows (the same rows) logs another kl
    run "$T" --model $M --rlhf kto --max-steps 4 --logging-steps 1 --learning-rate 0.1 \
        --per-device-train-batch-size 4 -j 1 -o "$W/four" $K
    [ "$status" -eq 0 ]
    [ "$(key kl "$W/four/logging.jsonl" | sed -n 4p)" != "$kl4" ]
}
