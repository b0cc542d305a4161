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

@test "-o DIR holding a run (or anything) is refused and left untouched; an empty DIR is fine" {
    run --separate-stderr "$T" "${quick[@]}" --max-steps 3 -o "$W/a" $D
    [ "$status" -eq 0 ]
    snapshot "$W/a" >"$W/before"
    [ "$(grep -c '"loss"' "$W/a/logging.jsonl")" -eq 3 ]
    run --separate-stderr "$T" "${quick[@]}" --max-steps 2 -o "$W/a" $D
    [ "$status" -eq 1 ]
    [ -z "$output" ]
    [ "${stderr_lines[0]}" = "swift-train: run directory '$W/a' is not empty (args.json, checkpoint-1, checkpoint-2, ...); nothing was changed" ]
    [[ "${stderr_lines[1]}" == "swift-train: --resume latest continues the run in it, --add-version starts a new one in $W/a/v<N>-<date>-<time>, --force replaces it; or choose another -o" ]]
    diff "$W/before" <(snapshot "$W/a")
    # anything at all counts, not only a run
    mkdir "$W/b"
    echo notes >"$W/b/notes.txt"
    run --separate-stderr "$T" "${quick[@]}" --max-steps 1 -o "$W/b" $D
    [ "$status" -eq 1 ]
    [[ "${stderr_lines[0]}" == "swift-train: run directory '$W/b' is not empty (notes.txt); nothing was changed" ]]
    [ "$(ls "$W/b")" = notes.txt ]
    # an existing empty directory is a new run's
    mkdir "$W/c"
    run --separate-stderr "$T" "${quick[@]}" --max-steps 1 -o "$W/c" $D
    [ "$status" -eq 0 ]
    [ -d "$W/c/checkpoint-1" ]
    # --resume continues in it (the SIGTERM and SIGINT tests check the losses)
    run --separate-stderr "$T" "${quick[@]}" --max-steps 4 -o "$W/a" --resume latest $D
    [ "$status" -eq 0 ]
    [ "${stderr_lines[0]}" = "swift-train: resumed from $W/a/checkpoint-3 (step 3 of 4, epoch 0.03125)" ]
    [ "$(grep -c '"loss"' "$W/a/logging.jsonl")" -eq 4 ]
}

@test "--add-version: a new v<N>-<date>-<time> per run (N past the highest), --resume latest in the newest" {
    run --separate-stderr "$T" "${quick[@]}" --max-steps 2 -o "$W/runs" --add-version \
        --trace "$W/t0.jsonl" $D
    [ "$status" -eq 0 ]
    [[ "${stderr_lines[0]}" =~ ^swift-train:\ run\ directory\ $W/runs/v0-[0-9]{8}-[0-9]{6}$ ]]
    v0=${stderr_lines[0]#swift-train: run directory }
    [ -d "$v0/checkpoint-2" ] && [ -f "$v0/logging.jsonl" ]
    [ "$(jq -r .output_dir "$v0/args.json")" = "$v0" ]
    grep -q "\"name\":\"checkpoint_written\".*\"path\":\"$v0/checkpoint-2\"" "$W/t0.jsonl"
    [ "$(ls "$W/runs")" = "$(basename "$v0")" ]
    # the same command line with --resume latest continues the newest run, where it is
    run --separate-stderr "$T" "${quick[@]}" --max-steps 3 -o "$W/runs" --add-version \
        --resume latest $D
    [ "$status" -eq 0 ]
    [ "${stderr_lines[0]}" = "swift-train: run directory $v0 (the newest version: --resume latest)" ]
    [ "${stderr_lines[1]}" = "swift-train: resumed from $v0/checkpoint-2 (step 2 of 3, epoch 0.02083)" ]
    [ -d "$v0/checkpoint-3" ]
    # a new run: the next version (ms-swift counts any entry starting with v<digits>)
    run --separate-stderr "$T" "${quick[@]}" --max-steps 1 -o "$W/runs" --add-version $D
    [ "$status" -eq 0 ]
    [[ "${stderr_lines[0]}" =~ ^swift-train:\ run\ directory\ $W/runs/v1-[0-9]{8}-[0-9]{6}$ ]]
    mkdir "$W/runs/v7-by-hand"
    run --separate-stderr "$T" "${quick[@]}" --max-steps 1 -o "$W/runs" --add-version $D
    [ "$status" -eq 0 ]
    [[ "${stderr_lines[0]}" =~ ^swift-train:\ run\ directory\ $W/runs/v8-[0-9]{8}-[0-9]{6}$ ]]
    [ "$(ls "$W/runs" | wc -l)" -eq 4 ]
    [ "$(ls -d "$W"/runs/v0-*/checkpoint-* | wc -l)" -eq 3 ] # the first run is as it was
}

@test "--force replaces a previous run's files (traces too) and refuses a directory holding anything else" {
    # the trace file's directory is the run directory, which -o has not made yet
    run --separate-stderr "$T" "${quick[@]}" --max-steps 3 -o "$W/a" --trace "$W/a/t.jsonl" $D
    [ "$status" -eq 0 ]
    grep -q '"name":"step"' "$W/a/t.jsonl"
    run --separate-stderr "$T" "${quick[@]}" --max-steps 1 -o "$W/a" --force --trace "$W/a/tr/" $D
    [ "$status" -eq 0 ]
    [ "${stderr_lines[0]}" = "swift-train: --force: removed the previous run in '$W/a' (6 entries)" ]
    [ "$(ls "$W/a" | tr '\n' ' ')" = "args.json checkpoint-1 logging.jsonl tr " ]
    [ "$(grep -c '"loss"' "$W/a/logging.jsonl")" -eq 1 ]
    # a directory of trace files is a run's too
    run --separate-stderr "$T" "${quick[@]}" --max-steps 1 -o "$W/a" --force $D
    [ "$status" -eq 0 ]
    [ "$(ls "$W/a" | tr '\n' ' ')" = "args.json checkpoint-1 logging.jsonl " ]
    # anything a run does not write: refused, nothing removed
    echo keep >"$W/a/notes.txt"
    snapshot "$W/a" >"$W/before"
    run --separate-stderr "$T" "${quick[@]}" --max-steps 1 -o "$W/a" --force $D
    [ "$status" -eq 1 ]
    [ "${stderr_lines[0]}" = "swift-train: --force: '$W/a' holds 'notes.txt', which a run does not write; not replacing anything (move it away or choose another -o)" ]
    diff "$W/before" <(snapshot "$W/a")
    rm "$W/a/notes.txt"
    mkdir "$W/a/v0-20250101-120000"
    run --separate-stderr "$T" "${quick[@]}" --max-steps 1 -o "$W/a" --force $D
    [ "$status" -eq 1 ]
    [[ "${stderr_lines[0]}" == "swift-train: --force: '$W/a' holds 'v0-20250101-120000', which a run does not write;"* ]]
    # --force and --resume contradict each other
    run --separate-stderr "$T" "${quick[@]}" -o "$W/a" --force --resume latest $D
    [ "$status" -eq 2 ]
    [ "${stderr_lines[0]}" = "swift-train: --force replaces the run in -o; --resume continues it: not both" ]
}

@test "-o - is a usage error (no directory named '-'); --trace creates its directory in every program" {
    cd "$W"
    R=$OLDPWD
    run --separate-stderr "$T" --model "$R/$M" -o - "$R/$D"
    [ "$status" -eq 2 ]
    [ "${stderr_lines[0]}" = "swift-train: -o -: the output is a directory, not standard output" ]
    run --separate-stderr "$T" --init-model --model "$R/$M" -o -
    [ "$status" -eq 2 ]
    [ ! -e "$W/-" ]
    cd "$R"
    run --separate-stderr "$T" "${quick[@]}" --max-steps 1 -o "$W/x" --trace "$W/x/deep/t.jsonl" $D
    [ "$status" -eq 0 ]
    grep -q '"name":"step"' "$W/x/deep/t.jsonl"
    E="$SWIFT_BIN/swift-eval"
    run --separate-stderr "$E" tests/fixtures/eval/llama --task loss \
        --dataset tests/fixtures/eval/synth/train --quiet --trace "$W/e/f/t.jsonl"
    [ "$status" -eq 0 ]
    grep -q '"swift_meta"' "$W/e/f/t.jsonl"
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

@test "under mpirun: rank 0 decides, one refusal for all ranks, one version directory for all" {
    command -v mpirun >/dev/null || skip "mpirun not installed (openmpi-bin)"
    . "$BATS_TEST_DIRNAME/mpi_env.bash" # mpirun as root, no network, ASan
    mpi2() { timeout 120 mpirun -np 2 --oversubscribe --bind-to none "$@" </dev/null; }
    run mpi2 "$T" "${quick[@]}" --max-steps 2 -o "$W/r" --add-version $D
    [ "$status" -eq 0 ]
    [ "$(ls "$W/r" | wc -l)" -eq 1 ]
    v=$(ls -d "$W"/r/v0-*)
    [ -d "$v/checkpoint-2" ]
    [ "$(grep -c "^swift-train: run directory $v\$" <<<"$output")" -eq 1 ]
    run mpi2 "$T" "${quick[@]}" --max-steps 2 -o "$v" $D
    [ "$status" -eq 1 ]
    [ "$(grep -c "^swift-train: run directory '$v' is not empty" <<<"$output")" -eq 1 ]
    [ "$(grep -c '"loss"' "$v/logging.jsonl")" -eq 2 ] # untouched
}
