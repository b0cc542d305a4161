#!/usr/bin/env bats
# swift-train's run directory is never silently mixed or lost: a directory that holds something is
# refused (nothing touched) unless --resume continues it, --add-version versions it the way
# ms-swift does, or --force replaces a previous run (and nothing else); Ctrl-C checkpoints like
# SIGTERM, twice aborts; -o - and a --trace under a directory not made yet.

bats_require_minimum_version 1.5.0

M=tests/fixtures/model/llama
D=tests/fixtures/shards
T="$SWIFT_BIN/swift-train"
# --device cpu: stderr is asserted line by line, no GPU-fallback notice
quick=(--model $M --logging-steps 1 --save-steps 1 --eval-steps 1000 -j 1 --device cpu)

setup() {
    W=$(mktemp -d)
}
teardown() {
    rm -rf "$W"
}

snapshot() { # DIR: every file's path and checksum
    (cd "$1" && find . -type f -print0 | sort -z | xargs -0 sha256sum)
}

wait_for() { # PATTERN FILE: until FILE has a line matching PATTERN (at most 60 s)
    for _ in $(seq 600); do
        grep -q "$1" "$2" 2>/dev/null && return 0
        sleep 0.1
    done
    echo "timed out waiting for '$1' in $2"
    return 1
}

@test "Ctrl-C (SIGINT): checkpoint, message, exit 75; --resume latest says where it continues" {
    args=(--model $M --max-steps 200 --logging-steps 1 --save-steps 1000 --eval-steps 1000
        --per-device-train-batch-size 2 -j 1 --device cpu)
    set -m # a script's background job ignores SIGINT; one with job control does not
    "$T" "${args[@]}" -o "$W/a" --data-delay-ms 50 $D >"$W/a.out" 2>"$W/a.err" &
    pid=$!
    set +m
    wait_for '"loss"' "$W/a/logging.jsonl"
    kill -INT $pid
    rc=0
    wait $pid || rc=$?
    cat "$W/a.err"
    [ "$rc" -eq 75 ]
    grep -qx 'swift-train: interrupt: finishing the step, then a checkpoint and exit 75 (interrupt again to stop at once, without one)' "$W/a.err"
    grep -qx 'swift-train: SIGINT: checkpoint-[0-9]* written; exiting with 75' "$W/a.err"
    [ "$(ls -d "$W"/a/checkpoint-* | wc -l)" -eq 1 ]
    n=$(ls -d "$W"/a/checkpoint-*)
    n=${n##*-}
    [ "$(grep -c '"loss"' "$W/a/logging.jsonl")" -eq "$n" ]
    run --separate-stderr "$T" "${args[@]}" --max-steps $((n + 2)) -o "$W/a" --resume latest $D
    [ "$status" -eq 0 ]
    [[ "${stderr_lines[0]}" == "swift-train: resumed from $W/a/checkpoint-$n (step $n of $((n + 2)), epoch "*")" ]]
    [ "$(grep -c '"loss"' <<<"$output")" -eq 2 ]
}

@test "a second Ctrl-C stops at once: exit 130, no checkpoint, the trace written so far kept" {
    set -m
    "$T" --model $M --max-steps 200 --logging-steps 1 --save-steps 1000 --eval-steps 1000 -j 1 \
        --device cpu --data-delay-ms 3000 --trace "$W/t.jsonl" -o "$W/b" $D \
        >"$W/b.out" 2>"$W/b.err" &
    pid=$!
    set +m
    wait_for '"loss"' "$W/b/logging.jsonl"
    kill -INT $pid
    wait_for '^swift-train: interrupt: ' "$W/b.err" # the first one was taken
    SECONDS=0
    kill -INT $pid
    rc=0
    wait $pid || rc=$?
    cat "$W/b.err"
    [ "$rc" -eq 130 ]
    [ "$SECONDS" -lt 3 ] # the step in flight (a 3 s data wait) was not finished
    [ -z "$(ls -d "$W"/b/checkpoint-* 2>/dev/null)" ]
    [ "$(grep -c 'exiting with 75' "$W/b.err")" -eq 0 ]
    grep -q '"name":"step"' "$W/t.jsonl"
}
