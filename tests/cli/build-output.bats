#!/usr/bin/env bats
# What the build and the demo write for people: `make -s` is silent, and `make demo`'s step titles
# are bold on a terminal only (never in a log, never under NO_COLOR).

setup() {
    cd "$BATS_TEST_DIRNAME/../.."
    unset MAKEFLAGS MFLAGS MAKELEVEL # a make -s running the tests must not silence the plain make
    W=$BATS_TEST_TMPDIR
    # swift-* that fail at once: the demo stops at its second step, after two titles
    mkdir -p "$W/fake"
    for c in swift-download swift-preprocess swift-train swift-eval swift-export swift-trace-analyze; do
        printf '#!/bin/sh\nexit 3\n' >"$W/fake/$c"
        chmod +x "$W/fake/$c"
    done
}

demo() {
    SWIFT_BIN="$W/fake" DEMO_DIR="$W/demo" sh pipelines/demo.sh
}

@test "make demo: no ANSI escapes when stderr is not a terminal" {
    run demo
    [ "$status" -ne 0 ]
    [[ $output == *"== 1/9 data"* ]]
    [[ $output == *"== 2/9 tokenizer"* ]]
    [[ $output != *$'\033'* ]]
}

@test "make demo: bold titles on a terminal, none under NO_COLOR" {
    command -v script >/dev/null || skip "no script(1) to give the demo a terminal"
    export W
    run script -qec "SWIFT_BIN='$W/fake' DEMO_DIR='$W/demo' sh pipelines/demo.sh" /dev/null
    [[ $output == *$'\033[1m== 1/9 data'* ]]
    run script -qec "NO_COLOR=1 SWIFT_BIN='$W/fake' DEMO_DIR='$W/demo' sh pipelines/demo.sh" /dev/null
    [[ $output == *"== 1/9 data"* ]]
    [[ $output != *$'\033['* ]]
}

@test "make -s prints no CC/LINK lines; plain make does" {
    obj="$W/b/obj/lib/core/alloc.o"
    run make -s O="$W/b" "$obj"
    [ "$status" -eq 0 ]
    [ -z "$output" ]
    [ -f "$obj" ]
    rm "$obj"
    run make --no-print-directory O="$W/b" "$obj"
    [ "$status" -eq 0 ]
    [[ $output == *"CC     lib/core/alloc.c"* ]]
    rm "$obj"
    run make -s -j2 O="$W/b" "$obj"
    [ -z "$output" ]
}
