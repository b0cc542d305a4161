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

# The fixture with a vocabulary of 151936 (Qwen2's) and Qwen2's vision token ids: every other
# tensor as committed, embed_tokens and lm_head rows i = the fixture's row i % 128 (python3's
# standard library only), the tokenizer's files beside it.
vl_model() {
    mkdir -p "$W/m"
    python3 - "$F" "$W/m" <<'EOF'
import json, struct, sys
src, dst = sys.argv[1], sys.argv[2]
cfg = json.load(open(src + "/config.json"))
V = 151936
cfg["text_config"]["vocab_size"] = V
cfg.update(image_token_id=151655, video_token_id=151656, vision_start_token_id=151652,
           vision_end_token_id=151653)
json.dump(cfg, open(dst + "/config.json", "w"), indent=2)
raw = open(src + "/model.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
hdr = json.loads(raw[8:8 + n])
body = raw[8 + n:]
out, data, off = {}, [], 0
for k in sorted(x for x in hdr if x != "__metadata__"):
    t = hdr[k]
    b = body[t["data_offsets"][0]:t["data_offsets"][1]]
    shape = t["shape"]
    if k in ("lm_head.weight", "model.language_model.embed_tokens.weight"):
        row = len(b) // shape[0]
        b = b"".join(b[(i % shape[0]) * row:(i % shape[0] + 1) * row] for i in range(V))
        shape = [V, shape[1]]
    out[k] = {"dtype": t["dtype"], "shape": shape, "data_offsets": [off, off + len(b)]}
    data.append(b)
    off += len(b)
h = json.dumps(out).encode()
h += b" " * (-len(h) % 8)
with open(dst + "/model.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + b"".join(data))
EOF
    cp "$TOK"/tokenizer*.json "$W/m/"
    [ -f "$TOK/vocab.json" ] && cp "$TOK/vocab.json" "$TOK/merges.txt" "$W/m/" || true
    "$P" --tokenizer "$W/m" --template qwen2_vl --max-pixels 12544 --max-length 128 -o "$W/d" "$DEMO/mllm_demo.json"
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
