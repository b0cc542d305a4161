#!/usr/bin/env bats
bats_require_minimum_version 1.5.0
# swift-train on a Qwen2-VL model and image shards (docs/multimodal.md "Training"): LLaMA-Factory's
# mllm_demo.json through swift-preprocess (qwen3's tokenizer: Qwen2's vocabulary with the vision
# tokens) against the tiny fixture tests/fixtures/vlm/qwen2_vl, its vocabulary widened here to
# the tokenizer's (the fixture's own is 128 ids): LoRA with the ViT frozen lowers the loss, frozen
# tensors stay as loaded, resume is exact, the vision/llm trace spans, and the flags' usage errors.

T="$SWIFT_BIN/swift-train"
P="$SWIFT_BIN/swift-preprocess"
F=tests/fixtures/vlm/qwen2_vl
. "$BATS_TEST_DIRNAME/vl_model.bash" # vl_model_at

setup() {
    W="$BATS_TEST_TMPDIR"
    TOK="$SHARED/data/tokenizers/qwen3"
    DEMO="$SHARED/data/datasets/llama-factory-demo"
    if [ ! -f "$TOK/tokenizer.json" ] || [ ! -f "$DEMO/mllm_demo.json" ]; then
        [ "${CI:-}" != true ] || return 1
        skip "shared data missing"
    fi
}

# The fixture $F widened to Qwen2's vocabulary (vl_model.bash) and the demo preprocessed with
# $TEMPLATE against it into $W/d.
vl_model() {
    vl_model_at "$F" "$W/m" "$W/d" "${TEMPLATE:-qwen2_vl}"
}

# "DTYPE SHA256" of tensor NAME's bytes in safetensors FILE (python3's standard library only);
# fails when the file has no such tensor
tsha() {
    python3 - "$1" "$2" <<'EOF'
import hashlib, json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
t = json.loads(raw[8:8 + n])[sys.argv[2]]
b, e = t["data_offsets"]
print(t["dtype"], hashlib.sha256(raw[8 + n + b:8 + n + e]).hexdigest())
EOF
}

# the tensors of safetensors FILE, "NAME SHAPE" one a line, sorted
tnames() {
    python3 - "$1" <<'EOF'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
for k in sorted(k for k in h if k != "__metadata__"):
    print(k, ",".join(str(d) for d in h[k]["shape"]))
EOF
}

losses() { # the train records' "loss" values of a stdout capture
    grep '"loss"' "$1" | sed 's/.*"loss":\([^,]*\),.*/\1/'
}

ARGS=(--max-steps 8 --logging-steps 1 --save-steps 4 --eval-steps 100 --learning-rate 1e-2
    --lora-rank 4 --per-device-train-batch-size 1 -j 1)

@test "train-vl: LoRA on the LLM with the ViT frozen lowers the loss; frozen tensors untouched; vision/llm spans" {
    vl_model
    sum0=$(sha256sum "$W/m/model.safetensors")
    run --separate-stderr "$T" --model "$W/m" "${ARGS[@]}" --freeze_vit true --trace "$W/t.jsonl" \
        -o "$W/a" "$W/d"
    echo "$stderr"
    [ "$status" -eq 0 ]
    echo "$output" >"$W/a.out"
    first=$(losses "$W/a.out" | head -1)
    last=$(losses "$W/a.out" | tail -1)
    echo "loss $first -> $last"
    awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }'
    # the checkpoint holds the trainable tensors only: the language model's adapters
    [ -f "$W/a/checkpoint-8/adapter_model.safetensors" ]
    ! grep -aq 'visual\|merger\|patch_embed' "$W/a/checkpoint-8/adapter_model.safetensors"
    [ "$(sha256sum "$W/m/model.safetensors")" = "$sum0" ]
    for s in vision llm llm_backward image_load; do
        grep -q "\"name\":\"$s\"" "$W/t.jsonl" || { echo "no $s span"; false; }
    done
}

@test "train-vl: resume from a checkpoint gives bit-identical losses" {
    vl_model
    run "$T" --model "$W/m" "${ARGS[@]}" -o "$W/a" "$W/d"
    [ "$status" -eq 0 ]
    echo "$output" >"$W/a.out"
    run "$T" --model "$W/m" "${ARGS[@]}" -o "$W/b" --resume "$W/a/checkpoint-4" "$W/d"
    [ "$status" -eq 0 ]
    echo "$output" >"$W/b.out"
    diff <(losses "$W/a.out" | sed -n 5,8p) <(losses "$W/b.out")
    [ "$(losses "$W/b.out" | wc -l)" -eq 4 ]
}

@test "train-vl: bad flag combinations are usage errors (exit 2)" {
    run "$T" --model "$F" --vit-lr 1e-5 -o "$W/x" "$W/d"
    [ "$status" -eq 2 ] && [[ "$output" == *"--vit-lr needs --freeze-vit false"* ]]
    run "$T" --model "$F" --freeze_aligner true --aligner_lr 1e-5 -o "$W/x" "$W/d"
    [ "$status" -eq 2 ] && [[ "$output" == *"--aligner-lr needs --freeze-aligner false"* ]]
    run "$T" --model "$F" --freeze-llm true -o "$W/x" "$W/d"
    [ "$status" -eq 2 ] && [[ "$output" == *"nothing to train"* ]]
    run "$T" --model "$F" --freeze-vit false --freeze-llm true -o "$W/x" "$W/d"
    [ "$status" -eq 2 ] && [[ "$output" == *"--freeze-llm true needs --tuner full"* ]]
    run "$T" --model "$F" --freeze-vit maybe -o "$W/x" "$W/d"
    [ "$status" -eq 2 ] && [[ "$output" == *"--freeze-vit: 'maybe' is not true or false"* ]]
    [ ! -e "$W/x" ]
}

@test "train-vl: image shards need a vision-language model; so do the freeze flags" {
    vl_model
    run "$T" --model tests/fixtures/model/llama -o "$W/x" "$W/d"
    [ "$status" -eq 1 ] && [[ "$output" == *"cannot feed to a model yet"* ]]
    run "$T" --model tests/fixtures/model/llama --freeze-vit false -o "$W/y" "$W/d"
    [ "$status" -eq 1 ] && [[ "$output" == *"--freeze-llm are for a vision-language model"* ]]
}

VARGS=(--freeze-vit false --freeze-aligner false)

@test "train-vl: ViT and aligner trained with LoRA on the LLM: loss goes down; the adapter carries them (modules_to_save)" {
    vl_model
    sum0=$(sha256sum "$W/m/model.safetensors")
    run --separate-stderr "$T" --model "$W/m" "${ARGS[@]}" "${VARGS[@]}" --trace "$W/t.jsonl" -o "$W/a" "$W/d"
    echo "$stderr"
    [ "$status" -eq 0 ]
    echo "$output" >"$W/a.out"
    first=$(losses "$W/a.out" | head -1)
    last=$(losses "$W/a.out" | tail -1)
    echo "loss $first -> $last"
    awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }'
    grep -q '"name":"vision_backward"' "$W/t.jsonl"
    A="$W/a/checkpoint-8/adapter_model.safetensors"
    [ "$(jq -c .modules_to_save "$W/a/checkpoint-8/adapter_config.json")" = '["visual"]' ]
    # every vision tensor, named base_model.model.model.visual.* (PEFT's names under transformers
    # 5, as the adapters' base_model.model.model.language_model.layers.*), in the input's shapes
    # (the patch embedding 5-D), F32
    diff <(tnames "$A" | grep visual | sed 's/^base_model\.model\.//') \
        <(tnames "$W/m/model.safetensors" | grep visual)
    tsha "$A" base_model.model.model.visual.blocks.0.attn.qkv.weight | grep -q '^F32 '
    # trained: not the base's values; the base model file unchanged
    [ "$(tsha "$A" base_model.model.model.visual.blocks.0.attn.qkv.weight)" != \
        "$(tsha "$W/m/model.safetensors" model.visual.blocks.0.attn.qkv.weight)" ]
    [ "$(tsha "$A" base_model.model.model.visual.merger.mlp.0.weight)" != \
        "$(tsha "$W/m/model.safetensors" model.visual.merger.mlp.0.weight)" ]
    [ "$(sha256sum "$W/m/model.safetensors")" = "$sum0" ]
}

@test "train-vl: --vit-lr 0 leaves the ViT as loaded while the aligner trains; one group alone in the adapter" {
    vl_model
    run "$T" --model "$W/m" "${ARGS[@]}" "${VARGS[@]}" --vit_lr 0 -o "$W/a" "$W/d"
    [ "$status" -eq 0 ]
    A="$W/a/checkpoint-8/adapter_model.safetensors"
    for t in patch_embed.proj.weight blocks.0.attn.qkv.weight blocks.1.mlp.fc2.bias blocks.1.norm2.weight; do
        [ "$(tsha "$A" "base_model.model.model.visual.$t")" = "$(tsha "$W/m/model.safetensors" "model.visual.$t")" ]
    done
    [ "$(tsha "$A" base_model.model.model.visual.merger.mlp.2.weight)" != \
        "$(tsha "$W/m/model.safetensors" model.visual.merger.mlp.2.weight)" ]
    # the aligner alone: the ViT stays the base's (not in the adapter)
    run "$T" --model "$W/m" "${ARGS[@]}" --freeze-aligner false --aligner-lr 5e-3 -o "$W/b" "$W/d"
    [ "$status" -eq 0 ]
    [ "$(jq -c .modules_to_save "$W/b/checkpoint-8/adapter_config.json")" = '["merger"]' ]
    [ "$(tnames "$W/b/checkpoint-8/adapter_model.safetensors" | grep -c visual)" -eq 6 ]
    ! tnames "$W/b/checkpoint-8/adapter_model.safetensors" | grep -q 'blocks\|patch_embed'
    # the ViT alone: its patch embedding and blocks (PEFT takes no ModuleList)
    run "$T" --model "$W/m" --max-steps 1 -j 1 --freeze-vit false -o "$W/c" "$W/d"
    [ "$status" -eq 0 ]
    [ "$(jq -c .modules_to_save "$W/c/checkpoint-1/adapter_config.json")" = '["patch_embed","blocks.0","blocks.1"]' ]
    ! tnames "$W/c/checkpoint-1/adapter_model.safetensors" | grep -q merger
}

@test "train-vl: resume with the ViT and the aligner trained is bit-identical (their optimizer state too)" {
    vl_model
    run "$T" --model "$W/m" "${ARGS[@]}" "${VARGS[@]}" --vit-lr 3e-3 -o "$W/a" "$W/d"
    [ "$status" -eq 0 ]
    echo "$output" >"$W/a.out"
    tnames "$W/a/checkpoint-4/optimizer.safetensors" | grep -q '^exp_avg\.visual\.merger\.mlp\.0\.weight '
    run "$T" --model "$W/m" "${ARGS[@]}" "${VARGS[@]}" --vit-lr 3e-3 -o "$W/b" --resume "$W/a/checkpoint-4" "$W/d"
    [ "$status" -eq 0 ]
    echo "$output" >"$W/b.out"
    diff <(losses "$W/a.out" | sed -n 5,8p) <(losses "$W/b.out")
    cmp "$W/a/checkpoint-8/adapter_model.safetensors" "$W/b/checkpoint-8/adapter_model.safetensors"
    cmp "$W/a/checkpoint-8/optimizer.safetensors" "$W/b/checkpoint-8/optimizer.safetensors"
}

@test "train-vl: --tuner full writes the input's HF layout (reloadable); frozen groups bit-identical; resume exact" {
    vl_model
    FA=(--max-steps 4 --logging-steps 1 --save-steps 2 --learning-rate 1e-3 -j 1 --tuner full)
    run "$T" --model "$W/m" "${FA[@]}" --freeze-vit false -o "$W/a" "$W/d"
    [ "$status" -eq 0 ]
    echo "$output" >"$W/a.out"
    C="$W/a/checkpoint-4"
    for f in config.json model.safetensors tokenizer.json tokenizer_config.json; do [ -f "$C/$f" ]; done
    cmp "$W/m/config.json" "$C/config.json"
    diff <(tnames "$W/m/model.safetensors") <(tnames "$C/model.safetensors")
    # the frozen aligner as loaded; the ViT and the language model trained
    [ "$(tsha "$C/model.safetensors" model.visual.merger.mlp.0.weight)" = \
        "$(tsha "$W/m/model.safetensors" model.visual.merger.mlp.0.weight)" ]
    [ "$(tsha "$C/model.safetensors" model.visual.blocks.0.attn.qkv.weight)" != \
        "$(tsha "$W/m/model.safetensors" model.visual.blocks.0.attn.qkv.weight)" ]
    [ "$(tsha "$C/model.safetensors" model.language_model.layers.0.mlp.up_proj.weight)" != \
        "$(tsha "$W/m/model.safetensors" model.language_model.layers.0.mlp.up_proj.weight)" ]
    # resume: the same losses and weights
    run "$T" --model "$W/m" "${FA[@]}" --freeze-vit false -o "$W/b" --resume "$W/a/checkpoint-2" "$W/d"
    [ "$status" -eq 0 ]
    echo "$output" >"$W/b.out"
    diff <(losses "$W/a.out" | sed -n 3,4p) <(losses "$W/b.out")
    cmp "$C/model.safetensors" "$W/b/checkpoint-4/model.safetensors"
    # the output loads as a model again; --freeze-llm true trains the vision side only
    run "$T" --model "$C" --max-steps 1 -j 1 --tuner full --freeze-llm true --freeze-aligner false -o "$W/c" "$W/d"
    [ "$status" -eq 0 ]
    [ "$(tsha "$W/c/checkpoint-1/model.safetensors" model.language_model.layers.0.mlp.up_proj.weight)" = \
        "$(tsha "$C/model.safetensors" model.language_model.layers.0.mlp.up_proj.weight)" ]
    [ "$(tsha "$W/c/checkpoint-1/model.safetensors" model.visual.merger.mlp.0.weight)" != \
        "$(tsha "$C/model.safetensors" model.visual.merger.mlp.0.weight)" ]
}

@test "train-vl: Qwen2.5-VL: LoRA with the ViT and the aligner trained lowers the loss; resume is exact" {
    F=tests/fixtures/vlm/qwen2_5_vl TEMPLATE=qwen2_5_vl vl_model
    run "$T" --model "$W/m" "${ARGS[@]}" "${VARGS[@]}" -o "$W/a" "$W/d"
    [ "$status" -eq 0 ]
    echo "$output" >"$W/a.out"
    first=$(losses "$W/a.out" | head -1)
    last=$(losses "$W/a.out" | tail -1)
    echo "loss $first -> $last"
    awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }'
    A="$W/a/checkpoint-8/adapter_model.safetensors"
    tsha "$A" base_model.model.model.visual.blocks.0.mlp.gate_proj.weight
    [ "$(tsha "$A" base_model.model.model.visual.merger.mlp.0.weight)" != \
        "$(tsha "$W/m/model.safetensors" visual.merger.mlp.0.weight)" ]
    run "$T" --model "$W/m" "${ARGS[@]}" "${VARGS[@]}" -o "$W/b" --resume "$W/a/checkpoint-4" "$W/d"
    [ "$status" -eq 0 ]
    echo "$output" >"$W/b.out"
    diff <(losses "$W/a.out" | sed -n 5,8p) <(losses "$W/b.out")
    cmp "$A" "$W/b/checkpoint-8/adapter_model.safetensors"
}

@test "train-vl: validation shards with images give an eval_loss (their own image cache)" {
    vl_model
    "$P" --tokenizer "$W/m" --template qwen2_vl --max-pixels 12544 --max-length 128 --val-ratio 0.34 \
        -o "$W/dv" "$DEMO/mllm_demo.json"
    [ "$(jq -r .images.cache "$W/dv/val/index.json")" = ../images ]
    run "$T" --model "$W/m" --max-steps 2 --eval-steps 2 --save-steps 2 --logging-steps 1 -j 1 \
        -o "$W/a" "$W/dv"
    [ "$status" -eq 0 ]
    grep -q '"eval_loss":[0-9]' "$W/a/logging.jsonl"
}

@test "train-vl: swift-eval reads the trained adapter and its vision tensors (the run's last eval_loss); swift-infer answers with it" {
    vl_model
    "$P" --tokenizer "$W/m" --template qwen2_vl --max-pixels 12544 --max-length 128 --val-ratio 0.34 \
        -o "$W/dv" "$DEMO/mllm_demo.json"
    run "$T" --model "$W/m" --max-steps 4 --eval-steps 4 --save-steps 4 --logging-steps 1 -j 1 \
        --freeze-aligner false --learning-rate 1e-2 -o "$W/a" "$W/dv"
    [ "$status" -eq 0 ]
    want=$(jq -s '[.[] | select(.eval_loss)] | last | .eval_loss' "$W/a/logging.jsonl")
    for merge in "" --merge-adapters; do
        run --separate-stderr "$SWIFT_BIN/swift-eval" "$W/m" --adapters "$W/a/checkpoint-4" $merge \
            --task loss --dataset "$W/dv/val" --quiet
        [ "$status" -eq 0 ]
        jq -e --argjson w "$want" '((.metrics.loss - $w) | fabs) <= 1e-5 * $w' <<<"$output"
    done
    # without the adapter the loss is the base model's, not the trained one
    run --separate-stderr "$SWIFT_BIN/swift-eval" "$W/m" --task loss --dataset "$W/dv/val" --quiet
    jq -e --argjson w "$want" '((.metrics.loss - $w) | fabs) > 1e-3 * $w' <<<"$output"
    img=$(jq -r '.[0].images[0]' "$DEMO/mllm_demo.json")
    jq -nc --arg img "$DEMO/$img" '{custom_id: "a", method: "POST", url: "/v1/chat/completions",
        body: {max_tokens: 4, messages: [{role: "user", content: [{type: "image_url",
        image_url: {url: $img}}, {type: "text", text: "What is this?"}]}]}}' >"$W/q.jsonl"
    run --separate-stderr "$SWIFT_BIN/swift-infer" "$W/m" --adapters "$W/a/checkpoint-4" "$W/q.jsonl"
    [ "$status" -eq 0 ]
    [ "$(jq .response.status_code <<<"$output")" = 200 ]
}
