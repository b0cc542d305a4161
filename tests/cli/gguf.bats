#!/usr/bin/env bats
# GGUF reader: fuzz run over the seed corpus.

@test "fuzz_gguf survives 300 mutated inputs" {
    run "$SWIFT_BUILD/fuzz/fuzz_gguf" -runs=300 tests/fuzz/corpus/gguf
    [ "$status" -eq 0 ]
}
