#!/usr/bin/env bats
bats_require_minimum_version 1.5.0
# swift-trace-analyze on real swift-train traces of a Qwen2-VL model (docs/multimodal.md
# "Profile of a multimodal step", docs/bottlenecks.md "Multimodal steps"): the tiny fixture
# tests/fixtures/vlm/qwen2_vl (vocabulary widened as in train-vl.bats) on LLaMA-Factory's
# mllm_demo.json. The multimodal view (spans, FLOPs split, MFU), image_starved when the images
# are throttled (a VL run's --data-delay-ms sleeps inside image_load) and not on a plain VL run
# nor on a text model's run. Rules fire on timing: the throttle (1.5 s per step) is several
# times the step's compute even on a loaded machine.

A="$SWIFT_BIN/swift-trace-analyze"
T="$SWIFT_BIN/swift-train"
P="$SWIFT_BIN/swift-preprocess"
F=tests/fixtures/vlm/qwen2_vl
. "$BATS_TEST_DIRNAME/vl_model.bash" # vl_model_at

setup() {
    W="$BATS_TEST_TMPDIR"
    TOK="$SHARED/data/tokenizers/qwen3"
    DEMO="$SHARED/data/datasets/llama-factory-demo"
    export OMP_NUM_THREADS=1
    if [ ! -f "$TOK/tokenizer.json" ] || [ ! -f "$DEMO/mllm_demo.json" ]; then
        [ "${CI:-}" != true ] || return 1
        skip "shared data missing"
    fi
}

# The fixture widened to Qwen2's vocabulary (vl_model.bash) and the demo preprocessed into $W/d.
vl_model() {
    vl_model_at "$F" "$W/m" "$W/d"
}

ARGS=(--max-steps 3 --logging-steps 1 --save-steps 100 --eval-steps 100 --lora-rank 4
    --per-device-train-batch-size 1 -j 1)

@test "trace-analyze-vl: throttled image loading fires image_starved with the loader's figures and the exact command" {
    vl_model
    run --separate-stderr "$T" --model "$W/m" "${ARGS[@]}" --num-workers 1 --prefetch 1 \
        --data-delay-ms 1500 --trace "$W/t.jsonl" -o "$W/a" "$W/d"
    echo "$stderr"
    [ "$status" -eq 0 ]
    run "$A" --format json -o "$W/r.json" "$W/t.jsonl"
    [ "$status" -eq 0 ]
    b='.bottlenecks[] | select(.rule == "image_starved")'
    [ "$(jq "[$b] | length" "$W/r.json")" = 1 ]
    jq -e "$b | .value > 10 and .threshold == 10 and .unit == \"% of step time\"" "$W/r.json"
    jq -e "$b | .evidence.image_load.share_of_loader >= 0.5 and .evidence.image_load.threads == 1" "$W/r.json"
    jq -e "$b | .evidence.steps == 3 and (.evidence.worst_spans | length) > 0" "$W/r.json"
    [[ "$(jq -r "$b | .summary" "$W/r.json")" == "the step waits "*"% of its time for the loader ("*"loading images (image_load: "*"patches per step)" ]]
    [[ "$(jq -r "$b | .remedy" "$W/r.json")" == *"--max-pixels"* ]]
    [[ "$(jq -r "$b | .command" "$W/r.json")" == *"--num-workers 2 "*"--prefetch 4 "* ]]
    # the view: one image_load span per micro-batch, 3 steps
    jq -e '.processes[0].multimodal | .steps == 3 and .image_load.spans == 3' "$W/r.json"
}

@test "trace-analyze-vl: a plain VL run has the multimodal view (spans, FLOPs split, MFU) and no VL rule" {
    vl_model
    run --separate-stderr "$T" --model "$W/m" "${ARGS[@]}" --max-steps 6 --trace "$W/t.jsonl" \
        -o "$W/a" "$W/d"
    echo "$stderr"
    [ "$status" -eq 0 ]
    run "$A" --format json -o "$W/r.json" "$W/t.jsonl"
    [ "$status" -eq 0 ]
    v='.processes[0].multimodal'
    jq -e "$v | .steps == 6 and .per_step.vision_us > 0 and .per_step.llm_us > 0 and .per_step.llm_backward_us > 0" "$W/r.json"
    # the ViT frozen (LoRA on the language model): no vision backward
    jq -e "$v | .per_step.vision_backward_us == 0" "$W/r.json"
    # the trainer's FLOPs: vision (forward only, lib/model/vlm_flops.h) + language model
    jq -e "$v.flops | .vision_per_step > 0 and .llm_per_step > .vision_per_step and .peak_gflops > 0 and .mfu > 0 and .mfu > .mfu_llm_only" "$W/r.json"
    # the sum of the trace's vision_flops per step, as the view averages them
    want=$(jq -s '[.[] | select(.name == "forward_backward") | .args.vision_flops] | add / 6' "$W/t.jsonl")
    jq -e "($v.flops.vision_per_step - $want) | fabs < 1" "$W/r.json"
    jq -e "$v.image_load | .spans == 6 and .images_per_step > 0 and .patches_per_step > 0" "$W/r.json"
    [ "$(jq '[.bottlenecks[] | select(.rule == "image_starved" or .rule == "vision_bound")] | length' "$W/r.json")" = 0 ]
    # the step breakdown: vision + llm are forward, llm_backward backward
    jq -e ".processes[0].breakdown.us | .backward > 0 and .forward > 0" "$W/r.json"
    # text: the table and the FLOPs line
    run "$A" "$W/t.jsonl"
    [ "$status" -eq 0 ]
    [[ "$output" == *"multimodal steps, per step:"* ]]
    [[ "$output" == *"image_load (loader threads): "* ]]
    [[ "$output" == *"FLOPs per step: "*", MFU "*"without the vision FLOPs)"* ]]
    # Markdown and HTML: the same table
    run "$A" --format md "$W/t.jsonl"
    [ "$status" -eq 0 ]
    [[ "$output" == *"| part | per step | share of step |"*"| &nbsp;&nbsp;vision | "* ]]
    run "$A" --format html -o "$W/r.html" "$W/t.jsonl"
    [ "$status" -eq 0 ]
    grep -q "Multimodal steps: vision, language model, images" "$W/r.html"
    grep -q "image_load (loader threads): " "$W/r.html"
}

@test "trace-analyze-vl: a text model's run has no multimodal view and no VL rule" {
    (cd "$W" && "$T" --model "$OLDPWD/tests/fixtures/model/llama" "$OLDPWD/tests/fixtures/shards" \
        -o run --trace t.jsonl -j 1 --max-steps 3 --save-steps 100 --eval-steps 100 \
        --data-delay-ms 20 >/dev/null 2>&1)
    run "$A" --format json -o "$W/r.json" "$W/t.jsonl"
    [ "$status" -eq 0 ]
    jq -e '.processes[0] | has("multimodal") and .multimodal == null' "$W/r.json"
    [ "$(jq '[.bottlenecks[] | select(.rule == "image_starved" or .rule == "vision_bound")] | length' "$W/r.json")" = 0 ]
}
