#!/usr/bin/env bats
# Short deterministic fuzz runs of the preprocess parsers (shard, index.json, tokenizer.json, dataset).

run_fuzz() {
    local name=$1
    [ -x "$SWIFT_BUILD/fuzz/fuzz_$name" ] || { echo "missing fuzz_$name" >&2; return 1; }
    run "$SWIFT_BUILD/fuzz/fuzz_$name" -runs=300 "tests/fuzz/corpus/$name"
    [ "$status" -eq 0 ]
    [[ "$output" == *"no crash"* ]]
}

@test "fuzz shard header and index.json" {
    run_fuzz shard
}

@test "fuzz tokenizer.json loader" {
    run_fuzz tokenizer
}

@test "fuzz dataset readers (JSON Lines, JSON arrays, CSV) and row mapping" {
    run_fuzz dataset
}
