#!/usr/bin/env bats
# swift-export --quant --method gptq from the command line: a model fine-tuned by swift-train,
# quantized on its training shards, loaded back by swift-eval (GPTQ directories are
# dequantized on load); usage errors, bad calibration input, traces. The algorithm itself is
# checked against auto-gptq in tests/unit/test_gptq.c.

bats_require_minimum_version 1.5.0

setup() {
    ROOT=$BATS_TEST_DIRNAME/../..
    SYN=$ROOT/tests/fixtures/eval/synth
    M=$ROOT/tests/fixtures/eval/llama
    T=$BATS_TEST_TMPDIR
    X=$SWIFT_BIN/swift-export
    export OMP_NUM_THREADS=2
}

@test "usage errors exit 2" {
    run --separate-stderr "$X" "$M" --quant int4 --method gptq -o "$T/q"
    [ "$status" -eq 2 ]
    [[ $stderr == "swift-export: --method gptq needs --calib DIR (calibration shards)"* ]]
    run --separate-stderr "$X" "$M" --quant int4 --calib "$SYN/train" -o "$T/q"
    [ "$status" -eq 2 ]
    [[ $stderr == "swift-export: --calib is only read by --method gptq"* ]]
    run --separate-stderr "$X" "$M" --quant int4 --method awq -o "$T/q"
    [ "$status" -eq 2 ]
    [[ $stderr == "swift-export: --method must be rtn or gptq, not 'awq'"* ]]
    run --separate-stderr "$X" "$M" --quant int4 --method gptq --calib "$SYN/train" --damp 0 -o "$T/q"
    [ "$status" -eq 2 ]
    run --separate-stderr "$X" "$M" --method gptq --calib "$SYN/train" -o "$T/q"
    [ "$status" -eq 2 ]
    [ ! -e "$T/q" ]
}

@test "bad calibration input: exit 1 naming the file, nothing left under the output name" {
    run --separate-stderr "$X" "$M" --quant int4 --group-size 32 --method gptq --calib "$T/none" -o "$T/q"
    [ "$status" -eq 1 ]
    [ "$stderr" = "swift-export: cannot open '$T/none/index.json': No such file or directory" ]
    [ ! -e "$T/q" ]
    # a shard whose bytes were damaged
    cp -r "$SYN/train" "$T/bad"
    printf 'XXXX' | dd of="$T/bad/shard-00000.bin" bs=1 seek=100 conv=notrunc status=none
    run --separate-stderr "$X" "$M" --quant int4 --group-size 32 --method gptq --calib "$T/bad" -o "$T/q"
    [ "$status" -eq 1 ]
    [[ $stderr == *"shard-00000.bin"* ]]
    [ ! -e "$T/q" ]
    # token ids of another tokenizer (the calibration vocabulary is larger than the model's)
    run --separate-stderr "$X" "$ROOT/tests/ref/fixtures/gptq/method/qwen3" --quant int4 --group-size 32 \
        --method gptq --calib "$SYN/train" -o "$T/q"
    [ "$status" -eq 1 ]
    [[ $stderr == "swift-export: $SYN/train: calibration row 0, token 45: id 256 is outside the model's vocabulary (256)"* ]]
    [ "${#stderr_lines[@]}" -eq 1 ]
    [ ! -e "$T/q" ]
}

@test "a fine-tuned model: GPTQ int4 keeps the eval loss closer to fp32 than round-to-nearest" {
    [ -x "$SWIFT_BIN/swift-train" ] && [ -x "$SWIFT_BIN/swift-eval" ] || skip "swift-train/swift-eval not built"
    run "$SWIFT_BIN/swift-train" --model "$M" -o "$T/run" --tuner full --learning-rate 1e-2 \
        --max-steps 25 --per-device-train-batch-size 16 --save-steps 25 \
        --lr-scheduler-type constant -j 2 "$SYN/train"
    [ "$status" -eq 0 ]
    C=$T/run/checkpoint-25
    run --separate-stderr "$X" "$C" --quant int4 --group-size 64 --method rtn -o "$T/rtn"
    [ "$status" -eq 0 ]
    run --separate-stderr "$X" "$C" --quant int4 --group-size 64 --method gptq --calib "$SYN/train" \
        --calib-samples 64 --trace "$T/trace.jsonl" -o "$T/gptq"
    [ "$status" -eq 0 ]
    echo "$output"
    jq -e '.method == "gptq" and .quantized == 14 and (.layers | length) == 14' <<<"$output"
    # every layer: GPTQ's output error on the calibration data is below round-to-nearest's
    jq -e '[.layers[] | .out_err < .rtn_out_err] | all' <<<"$output"
    [ "$(jq .damp_percent "$T/gptq/quantize_config.json")" = 0.01 ]
    grep -q '"name":"calibrate"' "$T/trace.jsonl"
    grep -q '"name":"quantize".*"method":"gptq"' "$T/trace.jsonl"
    for d in "$C" "$T/rtn" "$T/gptq"; do
        run "$SWIFT_BIN/swift-eval" "$d" --task loss --dataset "$SYN/train" --quiet
        [ "$status" -eq 0 ]
        jq .metrics.loss <<<"$output" >>"$T/losses"
    done
    cat "$T/losses"
    # fp32 < gptq < rtn, and GPTQ loses less than half of what RTN loses
    awk 'NR==1{f=$1} NR==2{r=$1} NR==3{g=$1} END{exit !(f < g && g < r && (g - f) < 0.5 * (r - f))}' "$T/losses"
}

@test "training from a GPTQ directory: LoRA on the dequantized base; a full checkpoint drops quantization_config" {
    [ -x "$SWIFT_BIN/swift-train" ] || skip "swift-train not built"
    run --separate-stderr "$X" "$M" --quant int4 --group-size 32 --method gptq --calib "$SYN/train" -o "$T/gptq"
    [ "$status" -eq 0 ]
    run "$SWIFT_BIN/swift-train" --model "$T/gptq" -o "$T/lora" --tuner lora --max-steps 2 --save-steps 2 \
        --per-device-train-batch-size 4 "$SYN/train"
    [ "$status" -eq 0 ]
    [ -f "$T/lora/checkpoint-2/adapter_model.safetensors" ]
    run "$SWIFT_BIN/swift-train" --model "$T/gptq" -o "$T/full" --tuner full --max-steps 2 --save-steps 2 \
        --per-device-train-batch-size 4 "$SYN/train"
    [ "$status" -eq 0 ]
    [ "$(jq 'has("quantization_config")' "$T/full/checkpoint-2/config.json")" = false ]
    [ "$(jq 'has("quantization_config")' "$T/gptq/config.json")" = true ]
    run "$SWIFT_BIN/swift-eval" "$T/full/checkpoint-2" --task loss --dataset "$SYN/train" --quiet
    [ "$status" -eq 0 ]
}
