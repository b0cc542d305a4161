#!/usr/bin/env bats
# --device: auto falls back to the CPU (one-line notice in a CUDA build) when there is no GPU,
# explicit choices are honoured or refused; the whole run on a GPU is tests/gpu/run.sh.

bats_require_minimum_version 1.5.0

M=tests/fixtures/model/llama
D=tests/fixtures/shards
T="$SWIFT_BIN/swift-train"

setup() {
    W=$(mktemp -d)
}
teardown() {
    rm -rf "$W"
}

has_gpu() { # nvidia-smi lists a device (then the fallback cases do not apply)
    command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '
}
cuda_build() { # the binary links the CUDA runtime (make CUDA=1)
    strings "$T" | grep -q 'cudaGetDeviceCount'
}
has_driver() { # a CUDA driver is installed (whether or not a GPU answers)
    [ -e /proc/driver/nvidia/version ] || ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '
}

@test "--device auto without a GPU: CPU run, one notice line in a CUDA build with a driver, none without, same losses as cpu" {
    has_gpu && skip "a GPU is present: fallback not exercised here"
    run --separate-stderr "$T" --model $M -o "$W/a" --max-steps 2 --logging-steps 1 \
        --save-steps 100 -j 1 --device auto $D
    [ "$status" -eq 0 ]
    if cuda_build && has_driver; then
        [ "$(printf '%s\n' "$stderr" | grep -c 'running on the cpu')" -eq 1 ]
        [[ "$stderr" == "swift-train: no GPU ("*"); running on the cpu"* ]]
    elif cuda_build; then
        # no driver at all: the user asked nothing of a GPU, nothing to say
        [[ "$stderr" != *"running on the cpu"* ]]
        [[ "$stderr" != *"GPU"* && "$stderr" != *"CUDA"* ]]
    else
        [[ "$stderr" != *"running on the cpu"* ]]
    fi
    auto_out=$(grep '"loss"' <<<"$output" | sed 's/.*"loss":\([^,]*\),.*/\1/')
    run --separate-stderr "$T" --model $M -o "$W/c" --max-steps 2 --logging-steps 1 \
        --save-steps 100 -j 1 --device cpu $D
    [ "$status" -eq 0 ]
    [[ "$stderr" != *"running on the cpu"* ]]
    cpu_out=$(grep '"loss"' <<<"$output" | sed 's/.*"loss":\([^,]*\),.*/\1/')
    [ -n "$cpu_out" ]
    [ "$auto_out" = "$cpu_out" ]
}

@test "--device auto is the default; the trace names the device" {
    has_gpu && skip "a GPU is present"
    run "$T" --model $M -o "$W/a" --max-steps 1 --save-steps 100 -j 1 --trace "$W/t.jsonl" $D
    [ "$status" -eq 0 ]
    grep -q '"device":"cpu"' "$W/t.jsonl"
}

@test "--device cuda without a usable GPU is an error, not a silent fallback" {
    has_gpu && skip "a GPU is present"
    run --separate-stderr "$T" --model $M -o "$W/a" --max-steps 1 -j 1 --device cuda:0 $D
    [ "$status" -eq 1 ]
    if cuda_build && ! has_driver; then
        [ "$stderr" = "swift-train: --device cuda:0: no CUDA driver (libcuda.so.1 not found); use --device cpu" ]
    elif cuda_build; then
        [[ "$stderr" == "swift-train: --device cuda:0: no "* ]]
    else
        [[ "$stderr" == "swift-train: --device cuda:0: this build has no CUDA support"* ]]
    fi
    [ ! -e "$W/a/checkpoint-1" ]
}

@test "--device with a bad value is a usage error" {
    run --separate-stderr "$T" --model $M -o "$W/a" --device tpu $D
    [ "$status" -eq 2 ]
    [[ "$stderr" == "swift-train: --device: expected auto, cpu, cuda or cuda:N, not 'tpu'"* ]]
    run --separate-stderr "$T" --model $M -o "$W/a" --device cuda:x $D
    [ "$status" -eq 2 ]
    [[ "$stderr" == "swift-train: --device: bad device index in 'cuda:x'"* ]]
}

@test "swift-eval --device: auto and cpu run on the cpu; cuda without a GPU is refused for the device, not the cache" {
    E="$SWIFT_BIN/swift-eval"
    F=tests/fixtures/eval
    run --separate-stderr "$E" $F/llama --task loss --dataset $F/synth/train --quiet --device auto
    [ "$status" -eq 0 ]
    a=$(jq .metrics.loss <<<"$output")
    run --separate-stderr "$E" $F/llama --task loss --dataset $F/synth/train --quiet --device cpu
    [ "$status" -eq 0 ]
    [ "$a" = "$(jq .metrics.loss <<<"$output")" ]
    [ "$a" != null ]
    has_gpu && skip "a GPU is present"
    run --separate-stderr "$E" $F/llama --task loss --dataset $F/synth/train --quiet --device cuda
    [ "$status" -eq 1 ]
    [ -z "$output" ]
    [[ "$stderr" == "swift-eval: --device cuda: "* ]]
    [[ "$stderr" != *"key/value cache"* ]]
    # the refusal is swift_backend_select's, word for word what swift-train says
    ev=${stderr#swift-eval: }
    run --separate-stderr "$T" --model $M -o "$W/o" --max-steps 1 --device cuda $D
    [ "$status" -eq 1 ]
    [ "${stderr#swift-train: }" = "$ev" ]
}
