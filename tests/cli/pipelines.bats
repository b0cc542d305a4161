#!/usr/bin/env bats
# pipelines/sft.mk: the stages as make targets with real file dependencies — a second run does
# nothing, a changed input redoes only what depends on it, a failed stage leaves no target.

setup() {
    cd "$BATS_TEST_DIRNAME/../.."
    W=$BATS_TEST_TMPDIR
    python3 datasets/make_synthetic.py "$W/data" >/dev/null
    MK=(make -s -f pipelines/sft.mk BIN="$SWIFT_BIN" MODEL=tests/fixtures/eval/llama
        DATA="$W/data/train.jsonl" EVAL="$W/data/test.jsonl" OUT="$W/sft" STEPS=3)
}

@test "sft.mk: end to end, then nothing to do, then only what a changed input affects" {
    run "${MK[@]}"
    [ "$status" -eq 0 ]
    for f in shards/index.json eval-before.json run/checkpoint-3/config.json eval-after.json \
        model.q8_0.gguf report.txt; do
        [ -s "$W/sft/$f" ] || { echo "missing $f"; false; }
    done
    run "${MK[@]}" -n
    [ "$status" -eq 0 ]
    [ -z "$output" ] # nothing would run
    touch "$W/data/train.jsonl"
    run "${MK[@]}" -n
    [[ $output == *swift-preprocess* ]]
    [[ $output == *swift-train* ]]
    [[ $output != *"swift-eval tests/fixtures/eval/llama"* ]] # "before" does not depend on data
}

@test "sft.mk: a failing stage leaves no target behind" {
    run "${MK[@]}" EVAL="$W/missing.jsonl"
    [ "$status" -ne 0 ]
    [ ! -e "$W/sft/eval-before.json" ]
    [ ! -e "$W/sft/eval-after.json" ]
}
