#!/usr/bin/env bats
# swift-train on the tiny fixture models (tests/fixtures/model) and character shards of
# tinyshakespeare (tests/fixtures/shards): runs, exact resume, signals, crash safety, bad input.

M=tests/fixtures/model/llama
D=tests/fixtures/shards
T="$SWIFT_BIN/swift-train"

setup() {
    W=$(mktemp -d)
}
teardown() {
    rm -rf "$W"
}

losses() { # the train records' "loss" values of a stdout capture
    grep '"loss"' "$1" | sed 's/.*"loss":\([^,]*\),.*/\1/'
}

@test "train a few LoRA steps: run directory, logging keys, checkpoint in PEFT layout" {
    run "$T" --model $M -o "$W/run" --max-steps 4 --logging-steps 1 --save-steps 2 \
        --per-device-train-batch-size 2 -j 1 $D
    [ "$status" -eq 0 ]
    [ -f "$W/run/args.json" ] && [ -f "$W/run/logging.jsonl" ]
    for k in loss grad_norm learning_rate token_acc epoch 'global_step/max_steps' elapsed_time \
        remaining_time 'memory(GiB)' 'rss(GiB)' 'memory/params(GiB)' 'memory/grads(GiB)' \
        'memory/optimizer(GiB)' 'memory/activations(GiB)' 'memory/other(GiB)' \
        'train_speed(s/it)' 'tokens/s' MFU; do
        grep -q "\"$k\":" "$W/run/logging.jsonl" || { echo "missing $k"; false; }
    done
    grep -q '"eval_loss"' "$W/run/logging.jsonl"
    [ -f "$W/run/checkpoint-2/adapter_model.safetensors" ]
    [ -f "$W/run/checkpoint-4/adapter_config.json" ]
    [ -f "$W/run/checkpoint-4/optimizer.safetensors" ]
    [ -f "$W/run/checkpoint-4/trainer_state.json" ]
    [[ "${lines[-1]}" == '{"version":1,"event":"done",'* ]]
}

@test "resume from a checkpoint gives bit-identical losses (LoRA with dropout, accumulation, 2 threads)" {
    args=(--model $M --max-steps 8 --logging-steps 1 --save-steps 4 --eval-steps 100
        --per-device-train-batch-size 2 --gradient-accumulation-steps 2 --learning-rate 1e-3
        --lora-dropout 0.1 -j 2)
    run "$T" "${args[@]}" -o "$W/a" $D
    [ "$status" -eq 0 ]
    echo "$output" >"$W/a.out"
    run "$T" "${args[@]}" -o "$W/b" --resume "$W/a/checkpoint-4" $D
    [ "$status" -eq 0 ]
    echo "$output" >"$W/b.out"
    diff <(losses "$W/a.out" | sed -n 5,8p) <(losses "$W/b.out")
    [ "$(losses "$W/b.out" | wc -l)" -eq 4 ]
}

@test "full fine-tuning: resume is exact and the checkpoint is a complete HF model directory" {
    args=(--model tests/fixtures/model/qwen3 --tuner full --max-steps 6 --logging-steps 1
        --save-steps 3 --eval-steps 100 --per-device-train-batch-size 2 --learning-rate 1e-3 -j 1)
    run "$T" "${args[@]}" -o "$W/a" $D
    [ "$status" -eq 0 ]
    echo "$output" >"$W/a.out"
    [ -f "$W/a/checkpoint-6/config.json" ] && [ -f "$W/a/checkpoint-6/model.safetensors" ]
    run "$T" "${args[@]}" -o "$W/b" --resume "$W/a/checkpoint-3" $D
    [ "$status" -eq 0 ]
    diff <(losses "$W/a.out" | sed -n 4,6p) <(echo "$output" | grep '"loss"' | sed 's/.*"loss":\([^,]*\),.*/\1/')
}

@test "SIGTERM: checkpoint, exit 75, --resume latest continues like an uninterrupted run" {
    args=(--model $M --max-steps 40 --logging-steps 1 --save-steps 1000 --eval-steps 1000
        --per-device-train-batch-size 2 --learning-rate 1e-3 -j 1)
    "$T" "${args[@]}" -o "$W/a" --data-delay-ms 50 $D >"$W/a.out" 2>"$W/a.err" &
    pid=$!
    sleep 0.8
    kill -TERM $pid
    rc=0
    wait $pid || rc=$?
    [ "$rc" -eq 75 ]
    grep -q "swift-train: SIGTERM: checkpoint-.* written; exiting with 75" "$W/a.err"
    n=$(ls -d "$W"/a/checkpoint-* | wc -l)
    [ "$n" -eq 1 ]
    run "$T" "${args[@]}" -o "$W/a" --resume latest $D
    [ "$status" -eq 0 ]
    cat "$W/a.out" >"$W/all.out"
    echo "$output" >>"$W/all.out"
    run "$T" "${args[@]}" -o "$W/ref" $D
    [ "$status" -eq 0 ]
    echo "$output" >"$W/ref.out"
    diff <(losses "$W/all.out") <(losses "$W/ref.out")
}

@test "kill -9 during checkpointing leaves only complete checkpoints, and resume works" {
    args=(--model tests/fixtures/model/qwen2 --tuner full --max-steps 400 --logging-steps 100
        --save-steps 1 --save-total-limit 2 --eval-steps 1000 -j 1)
    shopt -s nullglob # under load the first checkpoint may not exist yet
    for delay in 0.3 0.5 0.7; do
        rm -rf "$W/a"
        "$T" "${args[@]}" -o "$W/a" $D >/dev/null 2>&1 &
        pid=$!
        sleep $delay
        kill -9 $pid
        wait $pid || true
        for c in "$W"/a/checkpoint-*; do
            [ -f "$c/trainer_state.json" ] && [ -f "$c/model.safetensors" ] && \
                [ -f "$c/optimizer.safetensors" ] && [ -f "$c/config.json" ]
        done
    done
    ls -a "$W/a"
    run "$T" "${args[@]}" --max-steps 401 -o "$W/a" --resume latest $D
    [ "$status" -eq 0 ]
    [ -z "$(ls -a "$W/a" | grep tmp)" ] # the killed run's temporary directory is gone
}

@test "LoRA fine-tune lowers the validation loss" {
    run "$T" --model $M -o "$W/run" --max-steps 30 --logging-steps 10 --save-steps 30 \
        --eval-steps 15 --per-device-train-batch-size 4 --learning-rate 3e-3 --lora-rank 8 \
        --lora-dropout 0 -j 1 $D
    [ "$status" -eq 0 ]
    first=$(grep '"eval_loss"' "$W/run/logging.jsonl" | head -1 | sed 's/.*"eval_loss":\([^,]*\),.*/\1/')
    base=$("$T" --model $M -o "$W/base" --max-steps 1 --learning-rate 0 --eval-steps 1 \
        --save-steps 1 -j 1 $D | grep eval_loss | sed 's/.*"eval_loss":\([^,]*\),.*/\1/')
    last=$(grep '"eval_loss"' "$W/run/logging.jsonl" | tail -1 | sed 's/.*"eval_loss":\([^,]*\),.*/\1/')
    echo "# validation loss $base -> $first (15 steps) -> $last (30 steps)" >&3
    awk -v a="$base" -v b="$last" 'BEGIN { exit !(b < a - 0.3) }'
}

@test "bad input is refused before training" {
    mkdir -p "$W/m"
    cp $M/config.json "$W/m/"
    head -c 1000 $M/model.safetensors >"$W/m/model.safetensors"
    run "$T" --model "$W/m" -o "$W/r" $D
    [ "$status" -eq 1 ]
    [[ "$output" == "swift-train:$W/m/model.safetensors: "* ]]
    [ ! -e "$W/r" ]

    sed 's/"num_attention_heads": 4/"num_attention_heads": 3/' $M/config.json >"$W/m/config.json"
    cp $M/model.safetensors "$W/m/"
    run "$T" --model "$W/m" -o "$W/r" $D
    [ "$status" -eq 1 ]
    [[ "$output" == *"num_attention_heads 3 is not a multiple of num_key_value_heads 2"* ]]

    sed 's/"vocab_size"/"vocab_sizeX"/' $M/config.json >"$W/m/config.json"
    run "$T" --model "$W/m" -o "$W/r" $D
    [ "$status" -eq 1 ]
    [[ "$output" == "swift-train:$W/m/config.json: missing key 'vocab_size'" ]]

    cp $M/config.json "$W/m/"
    run "$T" --model "$W/m" -o "$W/r" --max-length 16 $D
    [ "$status" -eq 1 ]
    [[ "$output" == *"tokens, longer than --max-length 16" ]]

    run "$T" --model "$W/m" -o "$W/r" --max-length 100 $D
    [ "$status" -eq 1 ]
    [[ "$output" == *"exceeds the model's max_position_embeddings 64" ]]

    cp -r $D "$W/d"
    sed -i 's/"tokenizer": "bytes&127"/"tokenizer_sha256": "0000000000000000000000000000000000000000000000000000000000000000", "tokenizer": "x"/' "$W/d/index.json"
    echo '{}' >"$W/m/tokenizer.json"
    run "$T" --model "$W/m" -o "$W/r" "$W/d"
    [ "$status" -eq 1 ]
    [[ "$output" == *"shards were made with another tokenizer"* ]]
    [ ! -e "$W/r" ]
}

@test "a diverging loss stops with exit 1 naming the step" {
    run "$T" --model $M --tuner full -o "$W/r" --learning-rate 1e12 --max-grad-norm 0 \
        --max-steps 20 --logging-steps 100 --save-steps 100 -j 1 $D
    [ "$status" -eq 1 ]
    [[ "${lines[-1]}" =~ ^swift-train:\ (loss|gradient\ norm)\ is\ (nan|inf)\ at\ step\ [0-9]+\;\ stopping$ ]]
}

@test "usage errors exit 2" {
    run "$T" --model $M $D
    [ "$status" -eq 2 ]
    [[ "${lines[0]}" == "swift-train: missing --output-dir DIR" ]]
    run "$T" --model $M -o "$W/r" --tuner qlora $D
    [ "$status" -eq 2 ]
    run "$T" --model $M -o "$W/r" --train_type full --lora_rank abc $D
    [ "$status" -eq 2 ]
    [[ "${lines[0]}" == "swift-train: --lora-rank: 'abc' is not an integer >= 1" ]]
}

@test "trace: step spans contain data_wait, forward, backward, optimizer; --profile adds ops" {
    run "$T" --model $M -o "$W/r" --max-steps 4 --save-steps 4 --eval-steps 2 -j 1 \
        --trace "$W/t.jsonl" --profile wait=1,warmup=1,active=1 $D
    [ "$status" -eq 0 ]
    for n in step data_wait forward backward optimizer checkpoint eval; do
        grep -q "\"name\":\"$n\"" "$W/t.jsonl" || { echo "no $n span"; false; }
    done
    grep -q '"cat":"data","name":"data_wait"\|"name":"data_wait".*"cat":"data"' "$W/t.jsonl"
    grep -q '"name":"self_attn.q_proj"' "$W/t.jsonl"
    grep -q '"flops"' "$W/t.jsonl"
    grep -q '"name":"layer.1.backward"' "$W/t.jsonl"
    [ "$(grep -c '"name":"self_attn.q_proj"' "$W/t.jsonl")" -eq 2 ] # 2 layers, 1 active step
}

@test "a slow data path (--data-delay-ms) makes swift-trace-analyze report data_stall" {
    [ -x "$SWIFT_BIN/swift-trace-analyze" ] || skip "swift-trace-analyze not built"
    run "$T" --model $M -o "$W/r" --max-steps 6 --save-steps 100 --eval-steps 100 -j 1 \
        --data-delay-ms 60 --trace "$W/slow.jsonl" $D
    [ "$status" -eq 0 ]
    run "$SWIFT_BIN/swift-trace-analyze" -f json "$W/slow.jsonl"
    [ "$status" -eq 0 ]
    [[ "$output" == *'"rule":"data_stall"'* ]]
}

@test "LoRA on the alpaca demo (swift-preprocess shards, eval fixture model) lowers validation loss" {
    A="$SHARED/data/datasets/llama-factory-demo/alpaca_en_demo.json"
    if [ ! -f "$A" ]; then
        [ "${CI:-}" != true ] || { echo "missing $A under CI"; false; }
        skip "no $A (set SHARED)"
    fi
    TM=tests/fixtures/eval/llama # tiny Llama + BPE tokenizer of the eval tests
    run "$SWIFT_BIN/swift-preprocess" --tokenizer $TM -o "$W/sh" --max-length 128 \
        --truncation right --val-ratio 0.05 --packing binpack "$A"
    [ "$status" -eq 0 ]
    run "$T" --model $TM -o "$W/base" --max-steps 1 --learning-rate 0 --eval-steps 1 \
        --save-steps 1 -j 1 "$W/sh"
    [ "$status" -eq 0 ]
    base=$(echo "$output" | grep eval_loss | sed 's/.*"eval_loss":\([^,]*\),.*/\1/')
    run "$T" --model $TM -o "$W/run" --max-steps 40 --logging-steps 20 --save-steps 40 \
        --eval-steps 40 --per-device-train-batch-size 4 --learning-rate 2e-3 -j 1 "$W/sh"
    [ "$status" -eq 0 ]
    after=$(echo "$output" | grep eval_loss | tail -1 | sed 's/.*"eval_loss":\([^,]*\),.*/\1/')
    echo "# validation loss $base -> $after" >&3
    awk -v a="$base" -v b="$after" 'BEGIN { exit !(b < a - 0.5) }'
}

@test "--gradient-checkpointing gives the same losses" {
    args=(--model tests/fixtures/model/qwen2 --tuner full --max-steps 3 --logging-steps 1
        --save-steps 100 --eval-steps 100 --per-device-train-batch-size 2 -j 1)
    run "$T" "${args[@]}" -o "$W/a" $D
    [ "$status" -eq 0 ]
    echo "$output" >"$W/a.out"
    run "$T" "${args[@]}" -o "$W/b" --gradient_checkpointing $D
    [ "$status" -eq 0 ]
    echo "$output" >"$W/b.out"
    diff <(losses "$W/a.out") <(losses "$W/b.out")
    grep -q '"gradient_checkpointing": true' "$W/b/args.json"
}

@test "full fine-tuning of a bf16 model: bf16 checkpoint weights, fp32 master copy, exact resume" {
    mkdir -p "$W/m"
    cp tests/fixtures/model/qwen3/model.safetensors "$W/m/"
    sed 's/"dtype": "float32"/"dtype": "bfloat16"/' tests/fixtures/model/qwen3/config.json >"$W/m/config.json"
    args=(--model "$W/m" --tuner full --max-steps 4 --logging-steps 1 --save-steps 2
        --eval-steps 100 --per-device-train-batch-size 2 --learning-rate 1e-3 -j 1)
    run "$T" "${args[@]}" -o "$W/a" $D
    [ "$status" -eq 0 ]
    echo "$output" >"$W/a.out"
    grep -q '"dtype":"BF16"' "$W/a/checkpoint-2/model.safetensors"
    grep -q '"master.model.norm.weight"' "$W/a/checkpoint-2/optimizer.safetensors"
    run "$T" "${args[@]}" -o "$W/b" --resume "$W/a/checkpoint-2" $D
    [ "$status" -eq 0 ]
    diff <(losses "$W/a.out" | sed -n 3,4p) <(echo "$output" | grep '"loss"' | sed 's/.*"loss":\([^,]*\),.*/\1/')
}

@test "--num-workers/--prefetch, the data_stall remedy, keep the losses bit-identical" {
    [ -x "$SWIFT_BIN/swift-trace-analyze" ] || skip "swift-trace-analyze not built"
    args=(--model $M --max-steps 8 --save-steps 100 --eval-steps 100 --logging-steps 1 -j 1
        --device cpu) # stdout and stderr are parsed together: no GPU-fallback notice
    run "$T" "${args[@]}" -o "$W/w1" --data-delay-ms 30 --trace "$W/w1.jsonl" $D
    [ "$status" -eq 0 ]
    echo "$output" | jq -c 'select(.loss) | .loss' >"$W/w1.loss"
    # the analyzer names the stall and the exact command with more workers
    run "$SWIFT_BIN/swift-trace-analyze" -f json "$W/w1.jsonl"
    [ "$status" -eq 0 ]
    cmd=$(echo "$output" | jq -r '.bottlenecks[] | select(.rule == "data_stall") | .command')
    [[ $cmd == *" --num-workers 4 --prefetch 8" ]]
    run "$T" "${args[@]}" -o "$W/w3" --data-delay-ms 30 --num-workers 3 --prefetch 6 $D
    [ "$status" -eq 0 ]
    echo "$output" | jq -c 'select(.loss) | .loss' >"$W/w3.loss"
    [ "$(wc -l <"$W/w1.loss")" -eq 8 ]
    diff "$W/w1.loss" "$W/w3.loss"
    run "$T" "${args[@]}" -o "$W/w0" --num-workers 0 $D
    [ "$status" -eq 2 ]
}

@test "--init-model: random weights from a config.json, deterministic by seed, atomic, no overwrite" {
    mkdir -p "$W/cfg"
    cp $M/config.json "$W/cfg/"
    echo '{"eos_token": "x"}' >"$W/cfg/tokenizer_config.json"
    run "$T" --init-model --model "$W/cfg" -o "$W/m1" --seed 7
    [ "$status" -eq 0 ]
    [ "$output" = '{"version":1,"event":"init_model","seed":7}' ]
    [ -s "$W/m1/model.safetensors" ]
    cmp "$W/cfg/tokenizer_config.json" "$W/m1/tokenizer_config.json"
    run "$T" --init-model --model "$W/cfg" -o "$W/m2" --seed 7
    cmp "$W/m1/model.safetensors" "$W/m2/model.safetensors"
    run "$T" --init-model --model "$W/cfg" -o "$W/m3" --seed 8
    ! cmp -s "$W/m1/model.safetensors" "$W/m3/model.safetensors"
    run "$T" --init-model --model "$W/cfg" -o "$W/m1" --seed 8
    [ "$status" -eq 1 ]
    [ "$output" = "swift-train: '$W/m1' exists and is not empty (--force replaces the model in it; or choose another -o)" ]
    cmp "$W/m1/model.safetensors" "$W/m2/model.safetensors"
    run "$T" --init-model --model "$W/cfg" -o "$W/m1" --seed 8 --force
    [ "$status" -eq 0 ]
    cmp "$W/m1/model.safetensors" "$W/m3/model.safetensors"
    # --force replaces a model, never a directory holding something else
    echo keep >"$W/m2/notes.txt"
    run "$T" --init-model --model "$W/cfg" -o "$W/m2" --seed 8 --force
    [ "$status" -eq 1 ]
    [ "$output" = "swift-train: --force: '$W/m2' holds 'notes.txt', which is not part of a model; not replacing it" ]
    [ -f "$W/m2/notes.txt" ] && cmp "$W/m1/model.safetensors" "$W/m3/model.safetensors"
    # an empty directory is simply filled
    mkdir "$W/m5"
    run "$T" --init-model --model "$W/cfg" -o "$W/m5" --seed 7
    [ "$status" -eq 0 ]
    cmp "$W/m5/model.safetensors" "$W/m2/model.safetensors"
    # the new model trains
    run "$T" --model "$W/m1" -o "$W/m1run" --max-steps 2 --save-steps 100 --eval-steps 100 -j 1 $D
    [ "$status" -eq 0 ]
    run "$T" --init-model -o "$W/m4" --model "$W/cfg" $D
    [ "$status" -eq 2 ]
}
