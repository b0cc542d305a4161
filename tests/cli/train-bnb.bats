#!/usr/bin/env bats
# Models that transformers + bitsandbytes saved (tests/ref/gen_bnb_models.py: load_in_4bit nf4
# with double quantization, fp4, load_in_8bit): swift-train trains LoRA on them and swift-eval
# evaluates them with the linears loaded as stored; a bad quantization_config or a missing or
# different tensor is an error naming the file and the tensor (exit 1).

F=tests/ref/fixtures/bnb
S=tests/fixtures/eval/synth/train
T="$SWIFT_BIN/swift-train"
E="$SWIFT_BIN/swift-eval"

setup() {
    W=$(mktemp -d)
}
teardown() {
    rm -rf "$W"
}

losses() {
    grep '"loss"' "$1" | sed 's/.*"loss":\([^,]*\),.*/\1/'
}

@test "swift-train: LoRA on a bitsandbytes nf4 (double quant) directory lowers the loss; resume is exact" {
    args=(--model $F/nf4-dq --max-steps 8 --logging-steps 1 --save-steps 4 --eval-steps 100
        --per-device-train-batch-size 4 --learning-rate 3e-3 --lora-dropout 0.1 -j 2)
    "$T" "${args[@]}" -o "$W/a" $S >"$W/a.out" 2>"$W/a.err"
    grep -q '^swift-train: 4-bit base as saved by bitsandbytes (nf4, double quant): 73728 linear weights in ' "$W/a.err"
    first=$(losses "$W/a.out" | head -1)
    last=$(losses "$W/a.out" | tail -1)
    echo "# LoRA on the nf4 directory: loss $first -> $last (8 steps)" >&3
    awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 1) }'
    [ -f "$W/a/checkpoint-8/adapter_model.safetensors" ]
    [ ! -e "$W/a/checkpoint-8/model.safetensors" ]
    "$T" "${args[@]}" -o "$W/b" --resume "$W/a/checkpoint-4" $S >"$W/b.out" 2>/dev/null
    diff <(losses "$W/a.out" | sed -n 5,8p) <(losses "$W/b.out")
}

@test "swift-train: fp4 and int8 directories train too" {
    for v in fp4 int8; do
        run "$T" --model $F/$v -o "$W/$v" --max-steps 2 --save-steps 2 -j 1 $S
        [ "$status" -eq 0 ]
    done
    run "$T" --model $F/int8 -o "$W/x" --max-steps 1 --save-steps 1 -j 1 $S
    [[ "${lines[0]}" == "swift-train: 8-bit base as saved by bitsandbytes (int8): 73728 linear weights in 77824 bytes" ]]
}

@test "swift-eval loads the three layouts as stored; the loss is near the float model's" {
    fl=$("$E" tests/fixtures/eval/llama --task loss --dataset $S --quiet | jq .metrics.loss)
    for v in nf4-dq fp4 int8; do
        ql=$("$E" $F/$v --task loss --dataset $S --quiet | jq .metrics.loss)
        echo "# $v eval loss $ql (float32 model $fl)" >&3
        awk -v a="$ql" -v b="$fl" 'BEGIN { d = a - b; exit !(d != 0 && d < 0.5 && d > -0.5) }'
    done
    # adapters trained on it run aside; folding them into quantized weights is refused
    "$T" --model $F/nf4-dq -o "$W/r" --max-steps 2 --save-steps 2 -j 1 $S >/dev/null 2>&1
    run "$E" $F/nf4-dq --task loss --dataset $S --quiet --adapters "$W/r/checkpoint-2"
    [ "$status" -eq 0 ]
    run "$E" $F/nf4-dq --task loss --dataset $S --quiet --adapters "$W/r/checkpoint-2" \
        --merge-adapters
    [ "$status" -eq 1 ]
    [[ "$output" == *"swift-eval: --merge-adapters: model.layers.0.self_attn.q_proj is quantized (4 or 8 bits): the adapters run aside instead (drop --merge-adapters)"* ]]
}

# a copy of $F/$1 in $W/m with config.json's quantization_config edited by jq filter $2
edited() {
    rm -rf "$W/m"
    cp -r "$F/$1" "$W/m"
    jq "$2" "$F/$1/config.json" >"$W/m/config.json"
}

@test "bad quantization_config, missing or different tensors: exit 1 naming the file and the tensor" {
    edited nf4-dq '.quantization_config.quant_method = "awq"'
    run "$T" --model "$W/m" -o "$W/r" --max-steps 1 $S
    [ "$status" -eq 1 ]
    [[ "${lines[0]}" == "swift-train:$W/m/config.json: quantization_config: quant_method 'awq' is not supported (gptq and bitsandbytes are)" ]]
    edited nf4-dq '.quantization_config.bnb_4bit_quant_type = "int4"'
    run "$E" "$W/m" --task loss --dataset $S
    [ "$status" -eq 1 ]
    [[ "${lines[0]}" == "swift-eval:$W/m/config.json: quantization_config: bnb_4bit_quant_type 'int4' is not nf4 or fp4" ]]
    edited nf4-dq '.quantization_config.load_in_4bit = false'
    run "$E" "$W/m" --task loss --dataset $S
    [ "$status" -eq 1 ]
    [[ "${lines[0]}" == "swift-eval:$W/m/config.json: quantization_config: bitsandbytes needs load_in_4bit or load_in_8bit true (not neither)" ]]
    # the config says fp4: the nf4 quant_state tensor is not the one it names
    edited nf4-dq '.quantization_config.bnb_4bit_quant_type = "fp4"'
    run "$E" "$W/m" --task loss --dataset $S
    [ "$status" -eq 1 ]
    [[ "${lines[0]}" == "swift-eval: $W/m/model.safetensors: missing tensor 'model.layers.0.self_attn.q_proj.weight.quant_state.bitsandbytes__fp4' (bitsandbytes layout)" ]]
    # no double quantization in the config: absmax should be float32, the file has 8-bit codes
    edited nf4-dq '.quantization_config.bnb_4bit_use_double_quant = false'
    run "$T" --model "$W/m" -o "$W/r" --max-steps 1 $S
    [ "$status" -eq 1 ]
    [[ "${lines[0]}" == "swift-train: $W/m/model.safetensors: tensor 'model.layers.0.self_attn.q_proj.weight.absmax' is U8 with 64 elements, expected F32 with 64" ]]
    # 4 bits in the config, int8 rows in the file
    edited int8 '.quantization_config.load_in_8bit = false | .quantization_config.load_in_4bit = true | .quantization_config.bnb_4bit_quant_type = "nf4"'
    run "$E" "$W/m" --task loss --dataset $S
    [ "$status" -eq 1 ]
    [[ "${lines[0]}" == "swift-eval: $W/m/model.safetensors: tensor 'model.layers.0.self_attn.q_proj.weight' is I8 with 4096 elements, expected the packed 4-bit codes of a 64x64 weight (U8, 2048)" ]]
    [ ! -e "$W/r" ]
}

@test "a bitsandbytes directory is frozen: --tuner full and --quant-bits are errors (exit 1)" {
    run "$T" --model $F/nf4-dq -o "$W/r" --tuner full --max-steps 1 $S
    [ "$status" -eq 1 ]
    [[ "${lines[0]}" == "swift-train: $F/nf4-dq: saved in bitsandbytes' 4-bit layout: its base is frozen (train LoRA on it: --tuner lora)" ]]
    run "$T" --model $F/int8 -o "$W/r" --quant-bits 8 --max-steps 1 $S
    [ "$status" -eq 1 ]
    [[ "${lines[0]}" == "swift-train: the model is already saved in bitsandbytes' 8-bit layout: it loads as stored, without --quant-bits" ]]
}

@test "swift-export --merge-lora onto a bitsandbytes directory is refused with a hint (exit 1)" {
    "$T" --model $F/nf4-dq -o "$W/r" --max-steps 2 --save-steps 2 -j 1 $S >/dev/null 2>&1
    run "$SWIFT_BIN/swift-export" $F/nf4-dq --merge-lora "$W/r/checkpoint-2" -o "$W/m"
    [ "$status" -eq 1 ]
    [[ "${lines[0]}" == "swift-export: $F/nf4-dq/config.json: saved by bitsandbytes (4-bit or int8 linears): export from the float model (with --merge-lora DIR --qlora nf4|fp4|int8 for an adapter trained on it)" ]]
    [ ! -e "$W/m" ]
}
