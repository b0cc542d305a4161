#!/usr/bin/env bats
# Every fuzz target (tests/fuzz/fuzz_*.c) replays its seed corpus plus deterministic mutations
# (tests/fuzz/replay.c): bad input must give errors, never a crash or a sanitizer report.

@test "every fuzz target survives its corpus and 300 mutations" {
    n=0
    for f in "$SWIFT_BUILD"/fuzz/fuzz_*; do
        [ -x "$f" ] || continue
        name=$(basename "$f")
        name=${name#fuzz_}
        corpus=$BATS_TEST_DIRNAME/../fuzz/corpus/$name
        [ -d "$corpus" ] || corpus=
        run "$f" -runs="${FUZZ_RUNS:-300}" $corpus
        if [ "$status" -ne 0 ]; then
            echo "fuzz_$name failed: $output"
            return 1
        fi
        n=$((n + 1))
    done
    [ "$n" -gt 0 ]
}
