#!/usr/bin/env bats
# The progress line (lib/core/progress.h) of swift-train, swift-eval, swift-preprocess and
# swift-download: on stderr when it is a terminal (script(1) gives a pty) or with --progress,
# redrawn with \r and erase-to-end-of-line, ended with a newline; never with --no-progress, and
# not one byte of it in files and pipes. The rate limit is tested on an injected clock
# (tests/unit/test_core.c), never on time here.

bats_require_minimum_version 1.5.0

setup() {
    ROOT=$BATS_TEST_DIRNAME/../..
    M=$ROOT/tests/fixtures/model/llama
    D=$ROOT/tests/fixtures/shards
    FIX=$ROOT/tests/fixtures/eval
    W=$BATS_TEST_TMPDIR
    export OMP_NUM_THREADS=2 TERM=xterm
    CR=$'\r'
    EL=$'\033[K'
    ELRE=$'\033\\[K' # the same in a regular expression
}

# train NAME [OPTION]...: 10 steps, records at steps 1 and 10; stdout in W/NAME.out,
# stderr in W/NAME.err
train() {
    "$SWIFT_BIN/swift-train" --model "$M" -o "$W/$1" --max-steps 10 --logging-steps 10 \
        --per-device-train-batch-size 2 -j 1 "${@:2}" "$D" >"$W/$1.out" 2>"$W/$1.err"
}

# the records without their times
records() {
    jq -c 'del(."tokens/s", .elapsed_time, .remaining_time, ."memory(GiB)", ."rss(GiB)",
              ."train_speed(s/it)", .MFU, .train_runtime, .last_checkpoint)' "$1"
}

@test "swift-train --progress: step N/M, loss, lr, tokens/s, ETA redrawn in place; stdout and the rest of stderr as without it" {
    train plain
    train off --no-progress
    # 120 ms a step: more than half a second between the records of steps 1 and 10
    train on --progress --data-delay-ms 120
    # not a terminal: no line, and --no-progress is the same bytes
    ! grep -q "$CR" "$W/plain.err"
    ! grep -q 'train: step' "$W/plain.err"
    cmp "$W/plain.err" "$W/off.err"
    # forced: a redrawn line mid-run and the final one, ended with a newline
    grep -Eq "${CR}train: step [0-9]/10 \([0-9]+%\), [0-9]+:[0-9]{2} elapsed, ETA [0-9]+:[0-9]{2}, loss [0-9.]+, lr [0-9.e+-]+, [0-9]+ tokens/s$ELRE" \
        "$W/on.err"
    grep -Eq "${CR}train: step 10/10 \(100%\), [0-9]+:[0-9]{2} elapsed, loss [0-9.]+, .*, done\.$ELRE\$" \
        "$W/on.err"
    [ "$(tail -c 1 "$W/on.err" | od -An -c | tr -d ' ')" = '\n' ]
    # everything else on stderr is unchanged, and stdout is the same data
    diff <(grep -v "$CR" "$W/on.err") "$W/plain.err"
    diff <(records "$W/on.out") <(records "$W/plain.out")
    [ "$(grep -c '"loss"' "$W/on.out")" -eq 2 ]
}

@test "on a terminal (a pty from script) swift-train draws the line unasked; --no-progress does not" {
    command -v script >/dev/null || skip "script (util-linux/bsdutils) not installed"
    T="$SWIFT_BIN/swift-train --model $M --max-steps 4 --logging-steps 2 -j 1"
    run script -qec "$T -o $W/tty $D" /dev/null </dev/null
    [ "$status" -eq 0 ]
    [[ $output == *"${CR}train: step 4/4 (100%), "*" elapsed, loss "*", done.$EL"* ]]
    [[ $output == *'"event":"done"'* ]] # stdout, on the same terminal, after the line ended
    run script -qec "$T -o $W/tty-off --no-progress $D" /dev/null </dev/null
    [ "$status" -eq 0 ]
    [[ $output != *"train: step"* ]]
    [[ $output == *'"event":"done"'* ]]
}

@test "swift-eval --progress: eval TASK: done/total items, rate, done; --quiet and files get none" {
    E=$SWIFT_BIN/swift-eval
    "$E" "$FIX/llama" --task mc --dataset "$FIX/synth/mc.jsonl" --batch-size 2 \
        >"$W/plain.out" 2>"$W/plain.err"
    "$E" "$FIX/llama" --task mc --dataset "$FIX/synth/mc.jsonl" --batch-size 2 --progress \
        >"$W/on.out" 2>"$W/on.err"
    ! grep -q "$CR" "$W/plain.err"
    grep -Eq "${CR}eval mc: 16/16 items \(100%\), [0-9.]+ items/s, done\.$ELRE\$" "$W/on.err"
    grep -Eq "${CR}eval mc: [0-9]+/16 items \([0-9]+%\), [0-9.]+ items/s" "$W/on.err"
    # the table follows the ended line; the record is the same
    diff <(grep -v "$CR" "$W/on.err" | grep -v tokens/s) <(grep -v tokens/s "$W/plain.err")
    [ "$(jq -c .metrics "$W/on.out")" = "$(jq -c .metrics "$W/plain.out")" ]
    run --separate-stderr "$E" "$FIX/llama" --task exact --dataset "$FIX/synth/exact.jsonl" \
        --max-new-tokens 4 --quiet
    [ "$status" -eq 0 ]
    [ -z "$stderr" ]
    run --separate-stderr "$E" "$FIX/llama" --task exact --dataset "$FIX/synth/exact.jsonl" \
        --max-new-tokens 4 --quiet --progress
    [ "$status" -eq 0 ]
    [[ $stderr == *"${CR}eval exact: 16/16 items (100%), "*", done.$EL" ]]
    run --separate-stderr "$E" "$FIX/llama" --task loss --dataset "$FIX/synth/train" --progress \
        --quiet
    [ "$status" -eq 0 ]
    [[ $stderr == *"${CR}eval loss: 16/16 samples (100%), "*", done.$EL" ]]
}

@test "swift-preprocess --progress counts rows while building shards; the line tools never draw it" {
    P=$SWIFT_BIN/swift-preprocess
    run --separate-stderr "$P" --tokenizer "$FIX/llama" --max-length 64 -o "$W/s1" \
        "$FIX/synth/exact.jsonl"
    [ "$status" -eq 0 ]
    [[ $stderr != *"$CR"* ]]
    run --separate-stderr "$P" --tokenizer "$FIX/llama" --max-length 64 -o "$W/s2" --progress \
        "$FIX/synth/exact.jsonl"
    [ "$status" -eq 0 ]
    [[ $stderr == *"${CR}preprocess: 16 rows, "*" rows/s, done.$EL"$'\n'"swift-preprocess: 16 rows: "* ]]
    run --separate-stderr "$P" --tokenizer "$FIX/llama" --encode --progress <<<'"hello"'
    [ "$status" -eq 0 ]
    [[ $stderr != *"$CR"* ]]
}

@test "swift-download: --progress draws its line, --no-progress and files get none" {
    mkdir -p "$W/src"
    head -c 100000 /dev/urandom >"$W/src/a.bin"
    B=$SWIFT_BIN/swift-download
    run --separate-stderr "$B" -o "$W/d1" "file://$W/src"
    [ "$status" -eq 0 ]
    [ -z "$stderr" ]
    run --separate-stderr "$B" -o "$W/d2" --progress "file://$W/src"
    [ "$status" -eq 0 ]
    [[ $stderr == *"${CR}downloading: 100% 100.0 KB / 100.0 KB, 1/1 files, "*"$EL" ]]
    run --separate-stderr "$B" -o "$W/d3" --no-progress "file://$W/src"
    [ "$status" -eq 0 ]
    [ -z "$stderr" ]
}
