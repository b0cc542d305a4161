#!/usr/bin/env bats
# SIGTERM and Ctrl-C (SIGINT) in preference runs (--rlhf dpo on tests/fixtures/pairs, --rlhf kto
# on tests/fixtures/kto), as SFT's (train.bats, train-rundir.bats): the step finishes, a
# checkpoint is written, exit 75; --resume latest continues to the records of an uninterrupted
# run. The signal is sent once the first step is logged (not after a fixed sleep).

M=tests/fixtures/model/llama
T="$SWIFT_BIN/swift-train"

setup() {
    W=$(mktemp -d)
}
teardown() {
    rm -rf "$W"
}

wait_for() { # PATTERN FILE: until FILE has a line matching PATTERN (at most 60 s)
    for _ in $(seq 600); do
        grep -q "$1" "$2" 2>/dev/null && return 0
        sleep 0.1
    done
    echo "timed out waiting for '$1' in $2"
    return 1
}
key() { # KEY FILE: the values of "KEY" in the train records of FILE
    grep '"loss"' "$2" | grep -o "\"$1\":[^,}]*" | sed 's/.*://'
}

# OBJECTIVE DATA SIGNAL KEYS...: interrupt, check, resume, compare KEYS with a run left alone
signal_resume() {
    local obj=$1 data=$2 sig=$3 d="$W/$1-$3"
    shift 3
    local args=(--model $M --rlhf $obj --max-steps 12 --logging-steps 1 --save-steps 1000
        --eval-steps 1000 --per-device-train-batch-size 2 --learning-rate 1e-2 -j 1)
    set -m # a script's background job ignores SIGINT; one with job control does not
    "$T" "${args[@]}" -o "$d" --data-delay-ms 100 $data >"$W/out" 2>"$W/err" &
    local pid=$!
    set +m
    wait_for '"loss"' "$d/logging.jsonl"
    kill -$sig $pid
    local rc=0
    wait $pid || rc=$?
    cat "$W/err"
    [ "$rc" -eq 75 ]
    grep -qx "swift-train: SIG$sig: checkpoint-[0-9]* written; exiting with 75" "$W/err"
    [ "$(ls -d "$d"/checkpoint-* | wc -l)" -eq 1 ]
    local n
    n=$(ls -d "$d"/checkpoint-*)
    n=${n##*-}
    [ "$n" -ge 1 ] && [ "$n" -lt 12 ] # stopped early, after the step it was in
    [ "$(key loss "$d/logging.jsonl" | wc -l)" -eq "$n" ]
    [ -f "$d/checkpoint-$n/adapter_model.safetensors" ]
    run "$T" "${args[@]}" -o "$d" --resume latest $data
    [ "$status" -eq 0 ]
    if [ ! -f "$W/$obj-ref/logging.jsonl" ]; then
        run "$T" "${args[@]}" -o "$W/$obj-ref" $data
        [ "$status" -eq 0 ]
    fi
    [ "$(key loss "$d/logging.jsonl" | wc -l)" -eq 12 ]
    for k in loss grad_norm "$@"; do
        diff <(key "$k" "$d/logging.jsonl") <(key "$k" "$W/$obj-ref/logging.jsonl")
    done
}

@test "dpo: SIGTERM and Ctrl-C checkpoint and exit 75; --resume latest gives the uninterrupted records" {
    for sig in TERM INT; do
        signal_resume dpo tests/fixtures/pairs $sig rewards/chosen rewards/margins logps/rejected
    done
}

@test "kto: SIGTERM and Ctrl-C checkpoint and exit 75; --resume latest gives the uninterrupted records" {
    for sig in TERM INT; do
        signal_resume kto tests/fixtures/kto $sig kl rewards/chosen logps/chosen
    done
}
