#!/usr/bin/env bats
# The layout's arrows run down only (cmd -> lib -> kernels), wings keep their internal.h to
# themselves, includes have one spelling, and files and functions stay a size a person can read
# (scripts/check-layers.sh, `make check-layers`, DESIGN.md §3, docs/architecture.md).

setup() {
    repo=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
    copy=$BATS_TEST_TMPDIR/tree
    mkdir -p "$copy"
    cp -r "$repo/lib" "$repo/kernels" "$repo/cmd" "$copy/"
}

@test "the tree passes check-layers" {
    run sh "$repo/scripts/check-layers.sh" "$repo"
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "kernels/ including a lib/ header is refused" {
    printf '#include "lib/core/error.h"\n' >>"$copy/kernels/cpu/norm.c"
    run sh "$repo/scripts/check-layers.sh" "$copy"
    echo "$output"
    [ "$status" -eq 1 ]
    [[ $output == *"kernels/cpu/norm.c:"*": kernels/ includes lib/core/error.h"* ]]
}

@test "kernels/ including a lib/ header in angle brackets is refused too" {
    printf '#include <lib/core/error.h>\n' >>"$copy/kernels/cpu/rope.c"
    run sh "$repo/scripts/check-layers.sh" "$copy"
    [ "$status" -eq 1 ]
    [[ $output == *"kernels/cpu/rope.c:"*": includes <lib/core/error.h>: project headers are included with quotes"* ]]
    [[ $output == *"kernels/cpu/rope.c:"*": kernels/ includes lib/core/error.h"* ]]
}

@test "lib/ including from cmd/ is refused" {
    printf '#include "cmd/swift-train.c"\n' >>"$copy/lib/core/error.c"
    run sh "$repo/scripts/check-layers.sh" "$copy"
    [ "$status" -eq 1 ]
    [[ $output == *"lib/core/error.c:"*": lib/ includes cmd/swift-train.c"* ]]
}

@test "a wing including another wing's internal.h is refused" {
    printf '#include "lib/export/internal.h"\n' >>"$copy/lib/core/error.c"
    run sh "$repo/scripts/check-layers.sh" "$copy"
    [ "$status" -eq 1 ]
    [[ $output == *"lib/core includes another wing's lib/export/internal.h"* ]]
}

@test "an include spelled relative to the file is refused" {
    printf '#include "error.h"\n' >>"$copy/lib/core/jsonl.c"
    run sh "$repo/scripts/check-layers.sh" "$copy"
    [ "$status" -eq 1 ]
    [[ $output == *"lib/core/jsonl.c:"*"includes \"error.h\": spell project headers from the repository root"* ]]
}

@test "a function over 150 lines and a file over 1000 lines are refused" {
    {
        printf 'int long_one(void)\n{\n'
        for i in $(seq 1 160); do printf '    (void)0;\n'; done
        printf '    return 0;\n}\n'
        for i in $(seq 1 900); do printf '/* filler */\n'; done
    } >"$copy/lib/core/long.c"
    run sh "$repo/scripts/check-layers.sh" "$copy"
    [ "$status" -eq 1 ]
    [[ $output == *"lib/core/long.c:1: long_one is 163 lines (at most 150)"* ]]
    [[ $output == *"lib/core/long.c: 1064 lines (split it: at most 1000)"* ]]
}
