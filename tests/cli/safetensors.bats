#!/usr/bin/env bats
# The safetensors header parser under mutated inputs (tests/fuzz/fuzz_safetensors.c).

@test "fuzz_safetensors survives 300 mutated headers" {
    run "$SWIFT_BUILD/fuzz/fuzz_safetensors" -runs=300 tests/fuzz/corpus/safetensors
    [ "$status" -eq 0 ]
}
