#!/usr/bin/env bats
# tests/bench/msswift.sh (docs/benchmarks.md "ms-swift itself on the CPU") is not a test of
# speed and needs ms-swift from PyPI; these check that it skips with a visible reason (exit 0,
# so `make bench` goes on) when its data or its venv are missing, without any network.

bats_require_minimum_version 1.5.0

setup() {
    W=$(mktemp -d)
}
teardown() {
    rm -rf "$W"
}

@test "bench msswift: no data under SHARED: skipped, saying what it needs" {
    run env SHARED="$W/none" MSSWIFT_VENV="$W/venv" sh tests/bench/msswift.sh
    [ "$status" -eq 0 ]
    [ "$output" = "msswift: skipped: needs $W/none/data/tokenizers/qwen3 and $W/none/data/datasets/llama-factory-demo/alpaca_en_demo.json (set SHARED)" ]
    [ ! -e "$W/venv" ]
}

@test "bench msswift: a venv that cannot be made, or has no ms-swift: skipped with the reason" {
    mkdir -p "$W/shared/data/tokenizers/qwen3" "$W/shared/data/datasets/llama-factory-demo"
    echo '{}' >"$W/shared/data/tokenizers/qwen3/tokenizer.json"
    echo '[]' >"$W/shared/data/datasets/llama-factory-demo/alpaca_en_demo.json"
    : >"$W/file"
    run env SHARED="$W/shared" MSSWIFT_VENV="$W/file/venv" sh tests/bench/msswift.sh
    [ "$status" -eq 0 ]
    [[ ${lines[-1]} == "msswift: skipped: cannot create $W/file" ]]
    # a venv with a swift that is not ms-swift
    mkdir -p "$W/v/bin"
    printf '#!/bin/sh\nexit 1\n' >"$W/v/bin/swift"
    cp "$W/v/bin/swift" "$W/v/bin/python"
    chmod +x "$W/v/bin/swift" "$W/v/bin/python"
    run env SHARED="$W/shared" MSSWIFT_VENV="$W/v" sh tests/bench/msswift.sh
    [ "$status" -eq 0 ]
    [ "$output" = "msswift: skipped: $W/v has no importable ms-swift" ]
}
