#!/usr/bin/env bats
# GGUF reader: fuzz run over the seed corpus.

@test "fuzz_gguf survives 300 mutated inputs" {
    run "$SWIFT_BUILD/fuzz/fuzz_gguf" -runs=300 tests/fuzz/corpus/gguf
    [ "$status" -eq 0 ]
}

@test "our reader dumps the real ggml-vocab-gpt-2.gguf exactly as gguf-py's GGUFReader" {
    f=$SHARED/data/tokenizer-vectors/ggml-vocab-gpt-2.gguf
    if [ ! -r "$f" ]; then
        [ "${CI:-}" != true ] || { echo "missing $f" >&2; return 1; }
        skip "missing $f"
    fi
    run "$SWIFT_BIN/swift-export" --dump "$f"
    [ "$status" -eq 0 ]
    [ "$output" = "$(cat tests/ref/fixtures/ggml-vocab-gpt-2.dump)" ]
}

@test "--dump of a truncated file: error with file and offset, exit 1" {
    head -c 100 tests/fuzz/corpus/gguf/small.gguf > "$BATS_TEST_TMPDIR/t.gguf"
    run "$SWIFT_BIN/swift-export" --dump "$BATS_TEST_TMPDIR/t.gguf"
    [ "$status" -eq 1 ]
    [[ "$output" == "swift-export: $BATS_TEST_TMPDIR/t.gguf:@"* ]]
}
