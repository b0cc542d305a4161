#!/usr/bin/env bats
# swift-eval --task pref (lib/eval/run_pref.c, docs/eval.md): preference accuracy and reward margin
# of a policy against a reference on held-out pair shards. On the tiny Llama fixture and the pairs
# of tests/fixtures/pairs: an adapter with B = 0 (the policy is the reference) scores 0 and 0, a
# DPO LoRA run raises both on the val pairs (fixed seed, step counts, no timing), the numbers
# equal swift-train's own eval_rewards/* of the same checkpoint, --ref-model gives the same as
# adapters off, --baseline gates accuracy and margin, and bad input is refused before the model
# loads.

bats_require_minimum_version 1.5.0

setup() {
    ROOT=$BATS_TEST_DIRNAME/../..
    M=$ROOT/tests/fixtures/model/llama
    P=$ROOT/tests/fixtures/pairs
    ZERO=$ROOT/tests/fixtures/pairs-ref/adapter-zero
    T=$BATS_TEST_TMPDIR
    EVAL=$SWIFT_BIN/swift-eval
    export OMP_NUM_THREADS=2
}

dpo() { # OUT STEPS: a DPO LoRA run on the fixture pairs, checkpoint at the last step
    "$SWIFT_BIN/swift-train" --model "$M" -o "$1" --rlhf dpo --max-steps "$2" --eval-steps "$2" \
        --save-steps "$2" --logging-steps 1 --per-device-train-batch-size 4 --learning-rate 5e-3 \
        --seed 1 -j 1 "$P" >"$1.out" 2>&1
}

@test "pref: an adapter with B = 0 is the reference: accuracy 0, margin 0, rewards 0" {
    run --separate-stderr "$EVAL" "$M" --adapters "$ZERO" --task pref --dataset "$P/val" --quiet
    [ "$status" -eq 0 ]
    [ "${#lines[@]}" -eq 1 ]
    [ "$(jq -r '[.task, .n, .metrics.pairs, .metrics.accuracy, .metrics.margin, .metrics."rewards/chosen", .metrics."rewards/rejected"] | @csv' <<<"$output")" = '"pref",16,16,0,0,0,0' ]
    [ "$(jq -r '.metrics | keys | join(",")' <<<"$output")" = "accuracy,logps/chosen,logps/rejected,margin,pairs,ref_logps/chosen,ref_logps/rejected,rewards/chosen,rewards/rejected" ]
    jq -e '.metrics."logps/chosen" == .metrics."ref_logps/chosen" and .metrics."logps/chosen" < 0' <<<"$output"
    [ "$(jq -c '.config | [.beta, .ref_model]' <<<"$output")" = '[0.1,"adapters off"]' ]
}

@test "pref: a DPO LoRA run raises accuracy and margin on held-out pairs, as swift-train's eval says" {
    dpo "$T/r" 16
    run --separate-stderr "$EVAL" "$M" --adapters "$ZERO" --task pref --dataset "$P/val" --quiet
    [ "$status" -eq 0 ]
    before=$output
    run --separate-stderr "$EVAL" "$M" --adapters "$T/r/checkpoint-16" --task pref \
        --dataset "$P/val" --quiet -o "$T/after.json"
    [ "$status" -eq 0 ]
    after=$output
    echo "before $before"
    echo "after $after"
    jq -e '.metrics.margin > 0.1 and .metrics.accuracy >= 0.6' <<<"$after"
    jq -e --argjson b "$before" '.metrics.accuracy > $b.metrics.accuracy and .metrics.margin > $b.metrics.margin' <<<"$after"
    # the policy's chosen rows gain against the reference, the rejected ones lose
    jq -e '.metrics."rewards/chosen" > .metrics."rewards/rejected"' <<<"$after"
    # the same pairs, the same implicit reward as swift-train's eval on its val/ split
    L=$T/r/logging.jsonl
    ea=$(grep '"eval_rewards/accuracies"' "$L" | tail -1 | jq '."eval_rewards/accuracies"')
    em=$(grep '"eval_rewards/margins"' "$L" | tail -1 | jq '."eval_rewards/margins"')
    jq -e --argjson a "$ea" --argjson m "$em" \
        '.metrics.accuracy == $a and ((.metrics.margin - $m) | fabs) < 1e-6 * ($m | fabs)' <<<"$after"
    # the batch size does not change the numbers (rows are independent)
    run --separate-stderr "$EVAL" "$M" --adapters "$T/r/checkpoint-16" --task pref \
        --dataset "$P/val" --quiet --batch-size 3
    jq -e --argjson a "$after" '.metrics.accuracy == $a.metrics.accuracy and ((.metrics.margin - $a.metrics.margin) | fabs) < 1e-6' <<<"$output"
    # --beta scales the rewards, not the accuracy
    run --separate-stderr "$EVAL" "$M" --adapters "$T/r/checkpoint-16" --task pref \
        --dataset "$P/val" --quiet --beta 1
    jq -e --argjson a "$after" '.metrics.accuracy == $a.metrics.accuracy and ((.metrics.margin - 10 * $a.metrics.margin) | fabs) < 1e-5' <<<"$output"
}

@test "pref: --ref-model names the reference; the base as --ref-model equals adapters off" {
    dpo "$T/r" 8
    run --separate-stderr "$EVAL" "$M" --adapters "$T/r/checkpoint-8" --task pref \
        --dataset "$P/val" --quiet
    [ "$status" -eq 0 ]
    off=$output
    run --separate-stderr "$EVAL" "$M" --adapters "$T/r/checkpoint-8" --ref-model "$M" \
        --task pref --dataset "$P/val" --quiet
    [ "$status" -eq 0 ]
    [ "$(jq -c '.metrics' <<<"$output")" = "$(jq -c '.metrics' <<<"$off")" ]
    [ "$(jq -r '.config.ref_model' <<<"$output")" = "$M" ]
    # no adapters and no reference: the model against itself, said on stderr
    run --separate-stderr "$EVAL" "$M" --task pref --dataset "$P/val" --quiet
    [ "$status" -eq 0 ]
    [ "$(jq -r '[.metrics.accuracy, .metrics.margin] | @csv' <<<"$output")" = '0,0' ]
    [[ $stderr == *"warning: no --adapters (or merged) and no --ref-model: the reference is the model itself"* ]]
}

@test "pref: --baseline gates accuracy and margin" {
    dpo "$T/r" 16
    "$EVAL" "$M" --adapters "$T/r/checkpoint-16" --task pref --dataset "$P/val" --quiet \
        -o "$T/after.json" >/dev/null
    run --separate-stderr "$EVAL" "$M" --adapters "$T/r/checkpoint-16" --task pref \
        --dataset "$P/val" --quiet --baseline "$T/after.json"
    [ "$status" -eq 0 ]
    [ "$(jq -c '.baseline | [.regressions, (.metrics | keys)]' <<<"$output")" = '[0,["accuracy","margin"]]' ]
    # the untrained adapter against the trained run's record: both regress, exit 1
    run --separate-stderr "$EVAL" "$M" --adapters "$ZERO" --task pref --dataset "$P/val" \
        --quiet --baseline "$T/after.json"
    [ "$status" -eq 1 ]
    [[ $stderr == *"swift-eval: regression: accuracy 0 vs baseline "* ]]
    [[ $stderr == *"swift-eval: regression: margin 0 vs baseline "* ]]
    [ "$(jq -r '.baseline.regressions' <<<"$output")" = 2 ]
}

@test "pref: an SFT shard or a file is refused before the model loads" {
    run --separate-stderr "$EVAL" "$M" --task pref --dataset "$ROOT/tests/fixtures/shards"
    [ "$status" -eq 1 ]
    [[ $stderr == "swift-eval: $ROOT/tests/fixtures/shards/index.json: the shards hold "*"--task pref"*"swift-preprocess --kind pairs"* ]]
    run --separate-stderr "$EVAL" "$M" --task pref --dataset "$P/index.json"
    [ "$status" -eq 1 ]
    [ "$stderr" = "swift-eval: '$P/index.json' is not a shard directory: --task pref reads pair shards (make them with swift-preprocess --kind pairs)" ]
    run --separate-stderr "$EVAL" "$M" --task pref --dataset "$P/val" --beta -1
    [ "$status" -eq 2 ]
}

@test "pref: a DPO adapter swift-train saved scores in swift-eval as peft scores it" {
    # tests/ref/gen_pref_eval.py: peft.PeftModel.from_pretrained loads the committed adapter (made
    # by swift-train --rlhf dpo) and computes each demo pair's log-probs with and without it
    E=$ROOT/tests/fixtures/pairs-eval
    run --separate-stderr "$EVAL" "$M" --adapters "$E/adapter" --task pref \
        --dataset "$ROOT/tests/fixtures/pairs-ref" --quiet
    [ "$status" -eq 0 ]
    echo "$output"
    jq -e --slurpfile e "$E/expected.json" '
        .metrics as $m | $e[0].metrics | to_entries | all(
            (($m[.key] - .value) | fabs) <= 1e-5 * ([(.value | fabs), 1] | max))' <<<"$output"
    [ "$(jq -r '.metrics | [.accuracy, .pairs] | @csv' <<<"$output")" = '1,4' ]
    jq -e '.metrics.margin > 0.1' <<<"$output"
}
