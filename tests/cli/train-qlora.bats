#!/usr/bin/env bats
# swift-train --quant-bits 4 (QLoRA): the tiny fixture model's base linears in bitsandbytes'
# 4-bit layout, LoRA on top: the loss falls, resume is exact, the base takes <= 0.29 x its bf16
# bytes (the stderr line "4-bit base (...): N linear weights in B bytes, R x their bf16 size"),
# checkpoints hold the adapter only, ms-swift's spellings, usage errors.

M=tests/fixtures/model/llama
D=tests/fixtures/shards
T="$SWIFT_BIN/swift-train"

setup() {
    W=$(mktemp -d)
}
teardown() {
    rm -rf "$W"
}

losses() { # the train records' "loss" values of a capture
    grep '"loss"' "$1" | sed 's/.*"loss":\([^,]*\),.*/\1/'
}
eval_loss() { # the n-th eval_loss of a capture (1 or $)
    grep '"eval_loss"' "$1" | sed -n "$2p" | sed 's/.*"eval_loss":\([^,]*\),.*/\1/'
}

@test "QLoRA (nf4, double quant) lowers the validation loss; the base is <= 0.29 x its bf16 size" {
    q=(--quant-bits 4 --quant-type nf4 --double-quant)
    "$T" --model $M -o "$W/run" "${q[@]}" --max-steps 30 --logging-steps 10 --save-steps 30 \
        --eval-steps 15 --per-device-train-batch-size 4 --learning-rate 3e-3 --lora-rank 8 \
        --lora-dropout 0 -j 1 $D >"$W/run.out" 2>"$W/run.err"
    "$T" --model $M -o "$W/base" "${q[@]}" --max-steps 1 --learning-rate 0 --eval-steps 1 \
        --save-steps 1 -j 1 $D >"$W/base.out" 2>/dev/null
    base=$(eval_loss "$W/base.out" 1)
    last=$(eval_loss "$W/run.out" '$')
    echo "# QLoRA validation loss $base -> $last (30 steps)" >&3
    awk -v a="$base" -v b="$last" 'BEGIN { exit !(b < a - 0.3) }'
    line=$(grep '^swift-train: 4-bit base (nf4, double quant): ' "$W/run.err")
    echo "# $line" >&3
    ratio=$(echo "$line" | sed 's/.* bytes, \([0-9.]*\) x their bf16 size$/\1/')
    awk -v r="$ratio" 'BEGIN { exit !(r > 0.2 && r <= 0.29) }'
    # the checkpoint is the adapter (PEFT's layout), never the base
    [ -f "$W/run/checkpoint-30/adapter_model.safetensors" ]
    [ ! -e "$W/run/checkpoint-30/model.safetensors" ]
}

@test "QLoRA resume gives bit-identical losses (dropout, accumulation, 2 threads)" {
    args=(--model $M --quant-bits 4 --double-quant --max-steps 8 --logging-steps 1
        --save-steps 4 --eval-steps 100 --per-device-train-batch-size 2
        --gradient-accumulation-steps 2 --learning-rate 1e-3 --lora-dropout 0.1 -j 2)
    "$T" "${args[@]}" -o "$W/a" $D >"$W/a.out" 2>/dev/null
    "$T" "${args[@]}" -o "$W/b" --resume "$W/a/checkpoint-4" $D >"$W/b.out" 2>/dev/null
    diff <(losses "$W/a.out" | sed -n 5,8p) <(losses "$W/b.out")
    [ "$(losses "$W/b.out" | wc -l)" -eq 4 ]
    # a 4-bit base is not the float32 one: the first losses differ from plain LoRA's
    "$T" "${args[@]:0:2}" "${args[@]:5}" -o "$W/c" $D >"$W/c.out" 2>/dev/null
    [ "$(losses "$W/a.out" | head -1)" != "$(losses "$W/c.out" | head -1)" ]
}

@test "ms-swift's spellings: --quant_method bnb --quant_bits 4 --bnb_4bit_quant_type fp4 --bnb_4bit_use_double_quant true" {
    run "$T" --model $M -o "$W/r" --quant_method bnb --quant_bits 4 --bnb_4bit_quant_type fp4 \
        --bnb_4bit_use_double_quant true --max-steps 2 --save-steps 2 -j 1 $D
    [ "$status" -eq 0 ]
    [[ "$output" == *"swift-train: 4-bit base (fp4, double quant): "* ]]
    run "$T" --model $M -o "$W/s" --quant_bits 4 --bnb_4bit_use_double_quant false \
        --max-steps 1 --save-steps 1 -j 1 $D
    [ "$status" -eq 0 ]
    [[ "$output" == *"swift-train: 4-bit base (nf4): "* ]]
}

@test "QLoRA usage errors exit 2" {
    run "$T" --model $M -o "$W/r" --quant-bits 4 --tuner full $D
    [ "$status" -eq 2 ]
    [[ "${lines[0]}" == "swift-train: --quant-bits 4 freezes the base: it needs --tuner lora (QLoRA)" ]]
    run "$T" --model $M -o "$W/r" --quant-bits 3 $D
    [ "$status" -eq 2 ]
    [[ "${lines[0]}" == "swift-train: --quant-bits: '3' is not 4 or 8" ]]
    run "$T" --model $M -o "$W/r" --quant-bits 4 --quant-type int4 $D
    [ "$status" -eq 2 ]
    [[ "${lines[0]}" == "swift-train: --quant-type: 'int4' is not nf4 or fp4" ]]
    run "$T" --model $M -o "$W/r" --double-quant $D
    [ "$status" -eq 2 ]
    [[ "${lines[0]}" == "swift-train: --quant-type, --double-quant and --quant-method go with --quant-bits 4" ]]
    run "$T" --model $M -o "$W/r" --quant-bits 4 --quant-method gptq $D
    [ "$status" -eq 2 ]
    [[ "${lines[0]}" == "swift-train: --quant-method: 'gptq' is not bnb (the only one)" ]]
    run "$T" --model $M -o "$W/r" --quant-bits 4 --lora-dora $D
    [ "$status" -eq 2 ]
    [[ "${lines[0]}" == "swift-train: --lora-dora and --quant-bits 4 are not combined (DoRA's norm needs the base's float weights)" ]]
    [ ! -e "$W/r" ]
}

@test "QLoRA on the strict backend (kernels/ops.h: the 4-bit arrays are backend memory) equals the cpu's bit for bit" {
    args=(--model $M --quant-bits 4 --double-quant --max-steps 4 --logging-steps 1
        --save-steps 4 --eval-steps 2 --per-device-train-batch-size 2 -j 1)
    "$T" "${args[@]}" -o "$W/a" $D >"$W/a.out" 2>/dev/null
    SWIFT_CPU_STRICT_HOST=1 "$T" "${args[@]}" -o "$W/b" $D >"$W/b.out" 2>/dev/null
    diff <(grep -o '"\(eval_\)\?loss":[^,]*' "$W/a.out") <(grep -o '"\(eval_\)\?loss":[^,]*' "$W/b.out")
    cmp "$W/a/checkpoint-4/adapter_model.safetensors" "$W/b/checkpoint-4/adapter_model.safetensors"
}

@test "swift-export --merge-lora --qlora nf4 --qlora-double-quant merges onto the dequantized base: the merged model's loss is the QLoRA model's" {
    q=(--quant-bits 4 --quant-type nf4 --double-quant)
    "$T" --model $M -o "$W/run" "${q[@]}" --max-steps 10 --save-steps 10 --eval-steps 10 \
        --per-device-train-batch-size 4 --learning-rate 3e-3 --lora-dropout 0 -j 1 $D \
        >"$W/run.out" 2>/dev/null
    X="$SWIFT_BIN/swift-export"
    "$X" $M --merge-lora "$W/run/checkpoint-10" --qlora nf4 --qlora-double-quant --dtype fp32 \
        -o "$W/merged" >/dev/null
    "$X" $M --merge-lora "$W/run/checkpoint-10" --dtype fp32 -o "$W/plain" >/dev/null
    for m in merged plain; do # each model's validation loss, untrained (learning rate 0)
        "$T" --model "$W/$m" -o "$W/e-$m" --max-steps 1 --learning-rate 0 --eval-steps 1 \
            --save-steps 1 -j 1 $D 2>/dev/null | grep eval_loss |
            sed 's/.*"eval_loss":\([^,]*\),.*/\1/' >"$W/$m.loss"
    done
    ql=$(eval_loss "$W/run.out" '$')
    echo "# QLoRA eval_loss $ql; merged onto the dequantized base $(cat "$W/merged.loss"); onto the float base $(cat "$W/plain.loss")" >&3
    awk -v a="$ql" -v b="$(cat "$W/merged.loss")" 'BEGIN { d = a - b; exit !(d < 1e-5 && d > -1e-5) }'
    awk -v a="$ql" -v b="$(cat "$W/plain.loss")" 'BEGIN { d = a - b; exit !(d > 1e-4 || d < -1e-4) }'
    run "$X" $M --qlora nf4 -o "$W/x"
    [ "$status" -eq 2 ]
    [[ "${lines[0]}" == "swift-export: --qlora and --qlora-double-quant describe the base of --merge-lora" ]]
    run "$X" $M --merge-lora "$W/run/checkpoint-10" --qlora int4 -o "$W/x"
    [ "$status" -eq 2 ]
    [[ "${lines[0]}" == "swift-export: --qlora must be nf4, fp4 or int8, not 'int4'" ]]
}

# --quant-bits 8: bitsandbytes' Int8Params layout (int8 codes, one absmax per row)

params_bytes() { # memory/params of the first train record, in bytes
    grep -m1 '"loss"' "$1" | sed 's/.*"memory\/params(GiB)":\([^,]*\),.*/\1/' |
        awk '{ printf "%.0f\n", $1 * 1073741824 }'
}

@test "--quant-bits 8: LoRA on an int8 base tracks the float32 base's losses; the base takes int8 codes + a float per row" {
    args=(--model $M --max-steps 20 --logging-steps 5 --save-steps 20 --eval-steps 20
        --per-device-train-batch-size 4 --learning-rate 3e-3 --lora-dropout 0 -j 1)
    "$T" "${args[@]}" -o "$W/q8" --quant-bits 8 $D >"$W/q8.out" 2>"$W/q8.err"
    "$T" "${args[@]}" -o "$W/fp" $D >"$W/fp.out" 2>/dev/null
    line=$(grep '^swift-train: 8-bit base (int8, absmax per row): ' "$W/q8.err")
    echo "# $line" >&3
    [[ "$line" == *": 18432 linear weights in 20480 bytes, 0.556 x their bf16 size" ]]
    paste <(losses "$W/q8.out") <(losses "$W/fp.out") >"$W/pairs"
    echo "# int8 base vs float32 base losses: $(tr '\t\n' '/ ' <"$W/pairs")" >&3
    [ "$(wc -l <"$W/pairs")" -eq 5 ]
    # close (int8 rows lose little) but not the same run
    awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 0.01) bad = 1; if (d > 0) diff = 1 }
        END { exit bad || !diff }' "$W/pairs"
    q=$(eval_loss "$W/q8.out" 1)
    f=$(eval_loss "$W/fp.out" 1)
    awk -v a="$q" -v b="$f" 'BEGIN { d = a - b; exit !(d < 0.01 && d > -0.01) }'
    # memory/params: the float32 linears (18432 x 4 bytes) replaced by 20480 bytes
    [ $(($(params_bytes "$W/fp.out") - $(params_bytes "$W/q8.out"))) -eq $((18432 * 4 - 20480)) ]
    [ -f "$W/q8/checkpoint-20/adapter_model.safetensors" ]
    [ ! -e "$W/q8/checkpoint-20/model.safetensors" ]
}

@test "--quant-bits 8: resume gives bit-identical losses; the strict backend equals the cpu's" {
    args=(--model $M --quant-bits 8 --max-steps 8 --logging-steps 1 --save-steps 4
        --eval-steps 100 --per-device-train-batch-size 2 --gradient-accumulation-steps 2
        --learning-rate 1e-3 --lora-dropout 0.1 -j 2)
    "$T" "${args[@]}" -o "$W/a" $D >"$W/a.out" 2>/dev/null
    "$T" "${args[@]}" -o "$W/b" --resume "$W/a/checkpoint-4" $D >"$W/b.out" 2>/dev/null
    diff <(losses "$W/a.out" | sed -n 5,8p) <(losses "$W/b.out")
    [ "$(losses "$W/b.out" | wc -l)" -eq 4 ]
    SWIFT_CPU_STRICT_HOST=1 "$T" "${args[@]}" -o "$W/c" $D >"$W/c.out" 2>/dev/null
    diff <(losses "$W/a.out") <(losses "$W/c.out")
    cmp "$W/a/checkpoint-8/adapter_model.safetensors" "$W/c/checkpoint-8/adapter_model.safetensors"
}

@test "swift-export --merge-lora --qlora int8 merges onto the dequantized int8 base: the merged model's loss is the run's" {
    "$T" --model $M -o "$W/run" --quant_bits 8 --max-steps 10 --save-steps 10 --eval-steps 10 \
        --per-device-train-batch-size 4 --learning-rate 3e-3 --lora-dropout 0 -j 1 $D \
        >"$W/run.out" 2>/dev/null
    X="$SWIFT_BIN/swift-export"
    "$X" $M --merge-lora "$W/run/checkpoint-10" --qlora int8 --dtype fp32 -o "$W/merged" >/dev/null
    "$X" $M --merge-lora "$W/run/checkpoint-10" --dtype fp32 -o "$W/plain" >/dev/null
    for m in merged plain; do
        "$T" --model "$W/$m" -o "$W/e-$m" --max-steps 1 --learning-rate 0 --eval-steps 1 \
            --save-steps 1 -j 1 $D 2>/dev/null | grep eval_loss |
            sed 's/.*"eval_loss":\([^,]*\),.*/\1/' >"$W/$m.loss"
    done
    ql=$(eval_loss "$W/run.out" '$')
    echo "# int8-base LoRA eval_loss $ql; merged onto the dequantized base $(cat "$W/merged.loss"); onto the float base $(cat "$W/plain.loss")" >&3
    awk -v a="$ql" -v b="$(cat "$W/merged.loss")" 'BEGIN { d = a - b; exit !(d < 1e-5 && d > -1e-5) }'
    awk -v a="$ql" -v b="$(cat "$W/plain.loss")" 'BEGIN { d = a - b; exit !(d > 1e-6 || d < -1e-6) }'
    run "$X" $M --merge-lora "$W/run/checkpoint-10" --qlora int8 --qlora-double-quant -o "$W/x"
    [ "$status" -eq 2 ]
    [[ "${lines[0]}" == "swift-export: --qlora-double-quant goes with --qlora nf4|fp4" ]]
}

@test "--quant-bits 8 usage errors exit 2" {
    run "$T" --model $M -o "$W/r" --quant-bits 8 --quant-type nf4 $D
    [ "$status" -eq 2 ]
    [[ "${lines[0]}" == "swift-train: --quant-type and --double-quant describe 4-bit bases, not --quant-bits 8" ]]
    run "$T" --model $M -o "$W/r" --quant-bits 8 --double-quant $D
    [ "$status" -eq 2 ]
    [[ "${lines[0]}" == "swift-train: --quant-type and --double-quant describe 4-bit bases, not --quant-bits 8" ]]
    run "$T" --model $M -o "$W/r" --quant-bits 8 --tuner full $D
    [ "$status" -eq 2 ]
    [[ "${lines[0]}" == "swift-train: --quant-bits 8 freezes the base: it needs --tuner lora (QLoRA)" ]]
    run "$T" --model $M -o "$W/r" --quant-bits 8 --lora-dora $D
    [ "$status" -eq 2 ]
    [[ "${lines[0]}" == "swift-train: --lora-dora and --quant-bits 8 are not combined (DoRA's norm needs the base's float weights)" ]]
    [ ! -e "$W/r" ]
}
