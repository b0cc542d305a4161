#!/usr/bin/env bats
# The host never dereferences backend memory (kernels/ops.h): the programs run on
# swift_cpu_strict_ops (SWIFT_CPU_STRICT_HOST=1), whose memory faults on host access outside
# an op, upload or download — as a GPU's would — and give the CPU backend's results bit for
# bit: LoRA and full (bf16) training with checkpoints and resume, swift-eval with adapters on
# the fly and merged, its key/value cache (loss, mc, generation; the cache, scratch and logits
# are backend memory), and 2 MPI ranks with ZeRO-1 (gradients and parameters staged through
# download/upload).

M=tests/fixtures/model/llama
D=tests/fixtures/shards
T="$SWIFT_BIN/swift-train"

setup() {
    W=$(mktemp -d)
}
teardown() {
    rm -rf "$W"
}

losses() { # the train records' "loss" and "grad_norm" values of a stdout capture
    grep '"loss"' "$1" | sed 's/.*"loss":\([^,]*\),"grad_norm":\([^,]*\),.*/\1 \2/'
}

strict() { # the command on the strict backend
    SWIFT_CPU_STRICT_HOST=1 "$@"
}

@test "LoRA with dropout and accumulation: checkpoint and resume on the strict backend equal the cpu's bit for bit" {
    args=(--model $M --max-steps 6 --logging-steps 1 --save-steps 3 --eval-steps 3
        --per-device-train-batch-size 2 --gradient-accumulation-steps 2 --learning-rate 1e-3
        --lora-dropout 0.1 -j 2 --device cpu)
    run "$T" "${args[@]}" -o "$W/cpu" $D
    [ "$status" -eq 0 ]
    echo "$output" >"$W/cpu.out"
    run strict "$T" "${args[@]}" -o "$W/strict" $D
    [ "$status" -eq 0 ]
    echo "$output" >"$W/strict.out"
    [ "$(losses "$W/cpu.out" | wc -l)" -eq 6 ]
    diff <(losses "$W/cpu.out") <(losses "$W/strict.out")
    diff <(grep eval_loss "$W/cpu.out" | cut -d, -f1) <(grep eval_loss "$W/strict.out" | cut -d, -f1)
    for f in adapter_model.safetensors optimizer.safetensors; do
        cmp "$W/cpu/checkpoint-6/$f" "$W/strict/checkpoint-6/$f"
    done
    run strict "$T" "${args[@]}" -o "$W/resumed" --resume "$W/strict/checkpoint-3" $D
    [ "$status" -eq 0 ]
    diff <(losses "$W/cpu.out" | sed -n 4,6p) <(echo "$output" | grep '"loss"' |
        sed 's/.*"loss":\([^,]*\),"grad_norm":\([^,]*\),.*/\1 \2/')
    cmp "$W/cpu/checkpoint-6/adapter_model.safetensors" "$W/resumed/checkpoint-6/adapter_model.safetensors"
}

@test "full fine-tuning of a bf16 model (fp32 master copy) on the strict backend: same checkpoint files, exact resume" {
    mkdir -p "$W/m"
    cp tests/fixtures/model/qwen3/model.safetensors "$W/m/"
    sed 's/"dtype": "float32"/"dtype": "bfloat16"/' tests/fixtures/model/qwen3/config.json >"$W/m/config.json"
    args=(--model "$W/m" --tuner full --max-steps 4 --logging-steps 1 --save-steps 2
        --eval-steps 100 --per-device-train-batch-size 2 --learning-rate 1e-3 -j 1 --device cpu)
    run "$T" "${args[@]}" -o "$W/cpu" $D
    [ "$status" -eq 0 ]
    echo "$output" >"$W/cpu.out"
    run strict "$T" "${args[@]}" -o "$W/strict" $D
    [ "$status" -eq 0 ]
    echo "$output" >"$W/strict.out"
    diff <(losses "$W/cpu.out") <(losses "$W/strict.out")
    for f in model.safetensors optimizer.safetensors; do
        cmp "$W/cpu/checkpoint-4/$f" "$W/strict/checkpoint-4/$f"
    done
    run strict "$T" "${args[@]}" -o "$W/resumed" --resume "$W/strict/checkpoint-2" $D
    [ "$status" -eq 0 ]
    diff <(losses "$W/cpu.out" | sed -n 3,4p) <(echo "$output" | grep '"loss"' |
        sed 's/.*"loss":\([^,]*\),"grad_norm":\([^,]*\),.*/\1 \2/')
    cmp "$W/cpu/checkpoint-4/model.safetensors" "$W/resumed/checkpoint-4/model.safetensors"
}

@test "swift-eval on the strict backend: base, adapters on the fly and merged give the cpu's losses" {
    E=tests/fixtures/eval
    for a in "" "--adapters $E/llama/adapter" "--adapters $E/llama/adapter --merge-adapters"; do
        # shellcheck disable=SC2086
        run "$SWIFT_BIN/swift-eval" $E/llama $a --task loss --dataset $E/synth/train --quiet
        [ "$status" -eq 0 ]
        cpu=$(jq .metrics <<<"$output")
        # shellcheck disable=SC2086
        run strict "$SWIFT_BIN/swift-eval" $E/llama $a --task loss --dataset $E/synth/train --quiet
        [ "$status" -eq 0 ]
        [ "$(jq .metrics <<<"$output")" = "$cpu" ]
    done
}

untimed() { # a swift-eval record without its timings
    jq -c 'del(.time_s, .load_s, .tokens_per_s, .prefill_tokens_per_s, .decode_tokens_per_s)'
}

same_record() { # swift-eval ARGS...: the strict backend's record equals the cpu's (timings aside)
    run "$SWIFT_BIN/swift-eval" "$@" --quiet
    [ "$status" -eq 0 ]
    cpu=$(untimed <<<"$output")
    run strict "$SWIFT_BIN/swift-eval" "$@" --quiet
    [ "$status" -eq 0 ]
    [ "$(untimed <<<"$output")" = "$cpu" ]
    echo "$cpu"
}

@test "swift-eval's key/value cache on the strict backend: loss, mc, generation with batch > 1, LoRA on the fly" {
    E=tests/fixtures/eval
    export OMP_NUM_THREADS=2
    r=$(same_record $E/llama --task loss --dataset $E/synth/train --batch-size 3 --limit 7)
    jq -e '.metrics.loss > 0' <<<"$r"
    r=$(same_record $E/llama --task mc --dataset $E/synth/mc.jsonl --batch-size 3 --limit 8)
    jq -e '.n == 8' <<<"$r"
    same_record $E/llama --adapters $E/llama/adapter --task mc --dataset $E/synth/mc.jsonl \
        --batch-size 4 --limit 6 >/dev/null
    r=$(same_record $E/qwen3 --task exact --dataset $E/synth/exact.jsonl --limit 5 --batch-size 3 \
        --max-new-tokens 6)
    jq -e '.decode_tokens > 0' <<<"$r"
    same_record $E/llama --adapters $E/llama/adapter --task exact --dataset $E/synth/exact.jsonl \
        --limit 5 --batch-size 4 --max-new-tokens 6 --temperature 1.0 --top-p 0.9 --seed 7 >/dev/null
}

@test "the key/value cache's unit tests (log-probs and greedy tokens against transformers, LoRA) pass on the strict backend" {
    [ -x "$SWIFT_BUILD/tests/test_eval_kv" ] || skip "test_eval_kv not built"
    run strict "$SWIFT_BUILD/tests/test_eval_kv"
    [ "$status" -eq 0 ]
    [ "$(grep -c 'greedy generation 48/48 tokens equal' <<<"$output")" -eq 4 ]
}

@test "swift-infer's engine and paged cache (paged forward, greedy against transformers, preemption) pass on the strict backend" {
    [ -x "$SWIFT_BUILD/tests/test_infer_engine" ] || skip "test_infer_engine not built"
    run strict "$SWIFT_BUILD/tests/test_infer_engine"
    [ "$status" -eq 0 ]
    [ "$(grep -c 'paged forward logits identical' <<<"$output")" -eq 3 ]
    [ "$(grep -c "96/96 tokens equal to transformers' generate" <<<"$output")" -eq 7 ]
}

@test "2 MPI ranks with ZeRO-1 on the strict backend: the cpu's losses and checkpoint" {
    command -v mpirun >/dev/null || skip "mpirun not installed (openmpi-bin)"
    . "$BATS_TEST_DIRNAME/mpi_env.bash" # mpirun as root, no network, ASan
    args=(--model $M --tuner full --max-steps 4 --logging-steps 1 --save-steps 2 --eval-steps 2
        --per-device-train-batch-size 2 --learning-rate 1e-3 -j 1 --zero 1 --device cpu)
    mpi2() {
        timeout 120 mpirun -np 2 --oversubscribe --bind-to none --mca btl self,vader "$@" </dev/null
    }
    run mpi2 "$T" "${args[@]}" -o "$W/cpu" $D
    [ "$status" -eq 0 ]
    echo "$output" >"$W/cpu.out"
    run mpi2 env SWIFT_CPU_STRICT_HOST=1 "$T" "${args[@]}" -o "$W/strict" $D
    [ "$status" -eq 0 ]
    echo "$output" >"$W/strict.out"
    [ "$(losses "$W/cpu.out" | wc -l)" -eq 4 ]
    diff <(losses "$W/cpu.out") <(losses "$W/strict.out")
    for f in model.safetensors optimizer.safetensors; do
        cmp "$W/cpu/checkpoint-4/$f" "$W/strict/checkpoint-4/$f"
    done
}
